"""The DITTO claim at smoke budget, the well-formedness falsifier, and the paper-scale snippet."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

from iclr25._core.claims import judge
from iclr25._core.registry import REGISTRY
from iclr25.common.data.style_world import StyleJudge, StyleWorld, build_style_tokenizer
from iclr25.common.tiny_lm import build_tiny_lm
from iclr25.methods.ditto import DittoConfig, DittoTrainer
from iclr25.methods.ditto.claim import CLAIM

README = Path(__file__).resolve().parents[3] / "src" / "iclr25" / "methods" / "ditto" / "README.md"


def test_smoke_covers_every_arm_and_is_finite(smoke_runs) -> None:
    run, _ = smoke_runs("ditto")
    assert set(run.metrics) == set(CLAIM.arms)
    assert all(math.isfinite(v) for ms in run.metrics.values() for v in ms.values())
    assert {"win_by_iteration", "win_vs_sft"} <= set(run.series)
    assert len(run.series["win_by_iteration"].x) == 2  # smoke: 4 steps, resampling every 2
    for arm in CLAIM.arms:
        assert 0.0 <= run.metrics[arm]["win_vs_sft"] <= 1.0
        assert 0.0 <= run.metrics[arm]["win_vs_sft_parsed"] <= 1.0
        assert 0.0 <= run.metrics[arm]["well_formed"] <= 1.0
    assert run.metrics["sft"]["win_vs_sft"] == 0.5  # a system against itself ties
    assert len(judge(CLAIM, "smoke", [run]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(smoke_runs) -> None:
    a, b = smoke_runs("ditto")
    assert a.deterministic_metrics() == b.deterministic_metrics()


def test_budgets_match_registry() -> None:
    entry = REGISTRY["ditto"]
    full, smoke = CLAIM.budgets["full"], CLAIM.budgets["smoke"]
    assert (entry.smoke_s, entry.full_s, entry.full_seeds) == (smoke.seconds, full.seconds, full.seeds)
    assert smoke.report_only and full.seeds >= 3 and full.total_seconds <= 15 * 60


def test_well_formed_gate_fails_for_an_untrained_model(one_thread) -> None:
    """The well-formedness gate can fail: a base LM that never learned the grammar misses it."""
    world = StyleWorld()
    tok = build_style_tokenizer(world)
    lm = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, d_model=16, seed=0)
    cfg = DittoConfig.cpu_default()
    tr = DittoTrainer(
        lm,
        tok,
        [([{"role": "user", "content": world.prompt("garden", "mom")}], "hi mom , soil good . bye")],
        cfg,
    )
    prompts = [world.prompt(t, "boss") for t in world.topics[:5]]
    outs = tr.generate([[{"role": "user", "content": p}] for p in prompts], 4, adapter="base", seed=0)
    j = StyleJudge(world, 0)
    wf = sum(j.well_formed(p, o) for p, o in zip(prompts, outs, strict=True)) / len(prompts)
    gate = next(c for c in CLAIM.criteria if c.name == "well_formed")
    assert wf < 0.8
    assert not gate.holds(gate.statistic({"ditto": {"well_formed": wf}}))


def test_paper_scale_snippet_runs_on_a_saved_tiny_llama(tmp_path: Path) -> None:
    """The README's paper-scale block, pointed at a tiny Llama with a chat template saved locally."""
    world = StyleWorld()
    tok = build_style_tokenizer(world)
    lm = build_tiny_lm("llama", vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0)
    lm.save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    text = README.read_text()
    blocks = re.findall(r"```python paper-scale\n(.*?)```", text.split("### Paper scale", 1)[1], flags=re.S)
    env = {**os.environ, "DITTO_MODEL_DIR": str(tmp_path / "model"), "DITTO_QUICK": "1"}
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "ditto-adapter" / "ditto" / "adapter_config.json").is_file()
    assert '"r": 32' in (tmp_path / "ditto-adapter" / "ditto" / "adapter_config.json").read_text()
