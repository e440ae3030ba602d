"""The claim at smoke budget (plumbing and exactness, never a verdict), the tiny MoE LM and the config."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25._core.claims import judge
from iclr25.methods.netmoe.claim import CLAIM
from iclr25.methods.netmoe.config import ClaimConfig
from iclr25.methods.netmoe.routing_data import TinyMoELM, domain_corpus, train_tiny_moe_lm


def test_smoke_runs_every_arm_and_is_exact(smoke_runs) -> None:
    a, b = smoke_runs("netmoe")
    assert a.deterministic_metrics() == b.deterministic_metrics()
    m = a.metrics
    for arm in ("netmoe", "joint", "bottleneck", "greedy", "random", "smartmoe", "uniform", "shuffled"):
        assert 0.0 < m[arm]["tmax_ratio"] < 2.0
    assert m["optimality"]["stage1_match"] == 1.0 and m["optimality"]["stage2_match"] == 1.0
    assert m["optimality"]["joint_match"] == 1.0 and m["optimality"]["never_worse"] == 1.0
    assert m["distributed"]["bytes_exact"] == 1.0 and m["distributed"]["placement_agree"] == 1.0
    assert m["distributed"]["out_err_vs_identity"] <= 1e-6
    assert m["random"]["inter_ratio"] > m["netmoe"]["inter_ratio"]
    assert {"lm_tmax_ratio", "lm_inter_ratio"} <= set(m["shuffled"])
    assert {"gain_vs_locality", "lm_loss"} <= set(a.series)
    j = judge(CLAIM, "smoke", [a])
    assert j.reason == "smoke: report-only" and len(j.outcomes) == len(CLAIM.criteria)


def test_tiny_moe_lm_trains_and_records_routing() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only loses from more threads
    try:
        _train_and_trace()
    finally:
        torch.set_num_threads(threads)


def _train_and_trace() -> None:
    tokens, dom = domain_corpus(64, 17, vocab=64, domains=4, words_per_domain=12, seed=0)
    assert tokens.shape == (64, 17) and set(dom.tolist()) <= {0, 1, 2, 3}
    assert np.array_equal(tokens, domain_corpus(64, 17, vocab=64, domains=4, words_per_domain=12, seed=0)[0])
    lm = TinyMoELM(
        64, d_model=16, d_ff=16, num_experts=4, max_len=16, generator=torch.Generator().manual_seed(0)
    )
    calls: list[tuple[str, int, int]] = []
    record = lambda *a: calls.append(a)  # noqa: E731
    losses = train_tiny_moe_lm(lm, tokens, steps=30, batch_size=16, seed=0, progress=record)
    assert np.mean(losses[-5:]) < losses[0]
    assert calls[0] == ("tiny MoE LM training", 0, 30)
    assert [c[1] for c in calls] == list(range(30))  # every 5 % of 30 steps: every step
    traces = lm.routing(torch.as_tensor(tokens[:8, :16]))
    assert len(traces) == 2 and traces[0].shape == (8, 16, 2) and traces[0].max() < 4


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="samples"):
        ClaimConfig(samples=60)
    with pytest.raises(ValueError, match="trace_seeds"):
        ClaimConfig(trace_seeds=0)
    with pytest.raises(ValueError, match="g3_samples"):
        ClaimConfig(g3_samples=6)


def test_negative_controls_gate() -> None:
    controls = {c.name: c for c in CLAIM.criteria if c.control}
    assert set(controls) == {
        "ctrl_shuffled_inter",
        "ctrl_uniform_routing",
        "ctrl_shuffled_columns",
        "ctrl_shuffled_lm",
        "ctrl_shuffled_lm_vs_random",
        "ctrl_labels_left_behind",
    }
    # The labels control belongs to the report-only exactness rows of G3.
    assert {n for n, c in controls.items() if not c.gating} == {"ctrl_labels_left_behind"}


def test_every_gate_names_a_control_falsifier_and_every_row_explains_itself() -> None:
    by_name = {c.name: c for c in CLAIM.criteria}
    gates = [c for c in CLAIM.criteria if c.gating and not c.control]
    assert {c.name for c in gates} == {"g1_inter_bytes", "g1_tmax", "lm_gain", "lm_above_random"}
    for c in gates:
        target = by_name[c.falsifier]
        assert target.control and target.gating, c.name
        # the control measures the same statistic on the broken arm, against the same bar
        assert (target.kind, target.op, target.threshold) == (c.kind, c.op, c.threshold), c.name
    assert all(c.explain for c in CLAIM.criteria)
    exact = [c for c in CLAIM.criteria if c.name.startswith(("g2_", "g3_"))]
    assert exact and not any(c.gating for c in exact)


def test_memmap_corpus_reads_any_sample_by_global_id(tmp_path) -> None:
    from iclr25.methods.netmoe.routing_data import MemmapCorpus

    path = tmp_path / "tokens.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    corpus = MemmapCorpus(str(path), seq_len=8)
    whole = corpus.rows(step=3, sample_ids=np.arange(16), global_batch=16, seed=1)  # [I, S+1]
    assert whole.shape == (16, 9) and (np.diff(whole, axis=1) == 1).all()
    moved = np.array([11, 2, 7])  # a rank's samples after re-placement read their own windows
    assert np.array_equal(corpus.rows(step=3, sample_ids=moved, global_batch=16, seed=1), whole[moved])
    assert not np.array_equal(corpus.rows(step=4, sample_ids=moved, global_batch=16, seed=1), whole[moved])
    with pytest.raises(FileNotFoundError):
        MemmapCorpus(str(tmp_path / "missing.bin"), seq_len=8)
    with pytest.raises(ValueError, match="fewer than one window"):
        MemmapCorpus(str(path), seq_len=5000)
