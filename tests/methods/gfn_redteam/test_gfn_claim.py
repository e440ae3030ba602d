"""The GFlowNet red-teaming claim at smoke budget: plumbing, determinism and gate structure."""

from __future__ import annotations

import math

import pytest

from iclr25._core.claims import judge
from iclr25._core.registry import REGISTRY
from iclr25.methods.gfn_redteam.claim import _ARMS_B, CLAIM


def test_smoke_covers_every_arm_and_is_finite(smoke_runs) -> None:
    run, _ = smoke_runs("gfn_redteam")
    assert set(run.metrics) == set(CLAIM.arms)
    assert all(math.isfinite(v) for ms in run.metrics.values() for v in ms.values())
    for arm in _ARMS_B:
        for key in ("toxicity_rate", "modes_covered", "diversity", "edit_diversity", "transfer_toxicity"):
            assert key in run.metrics[arm], (arm, key)
    assert run.metrics["tb_exact"]["n_sequences"] == 84.0
    assert run.metrics["oracle"]["toxicity_rate"] > run.metrics["sft"]["toxicity_rate"]
    assert {"modes_vs_toxicity", "training_success", "exact_tv"} <= set(run.series)
    assert len(judge(CLAIM, "smoke", [run]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(smoke_runs) -> None:
    a, b = smoke_runs("gfn_redteam")
    assert a.deterministic_metrics() == b.deterministic_metrics()


def test_equal_victim_queries(smoke_runs) -> None:
    m = smoke_runs("gfn_redteam")[0].metrics
    assert m["gfn"]["victim_queries"] == m["reinforce"]["victim_queries"] == m["crt"]["victim_queries"]
    assert m["tb_cold"]["victim_queries"] <= m["gfn"]["victim_queries"]


def test_budgets_match_registry() -> None:
    entry = REGISTRY["gfn_redteam"]
    smoke, full = CLAIM.budgets["smoke"], CLAIM.budgets["full"]
    assert (entry.smoke_s, entry.full_s, entry.full_seeds) == (smoke.seconds, full.seconds, full.seeds)
    assert smoke.report_only and full.seeds >= 3


def test_gates_have_controls_that_read_the_same_metric() -> None:
    by_name = {c.name: c for c in CLAIM.criteria}
    for c in CLAIM.criteria:
        if c.gating and not c.control and not c.precondition and not c.falsifier.startswith("tests/"):
            ctrl = by_name[c.falsifier]
            assert ctrl.control and ctrl.kind == c.kind and ctrl.threshold == c.threshold and ctrl.op == c.op


def _metrics(**over: float) -> dict:
    m = {
        "tb_exact": {"tv": 0.05, "logz_err": 0.1},
        "reinforce_exact": {"tv": 0.8},
    }
    m["tb_exact"].update(over)
    return m


def test_logz_gate_fails_for_an_untrained_head() -> None:
    """The head starts at log Z = 0 (zero weights). On the Part A world of each full-budget seed the
    true log Z, by enumeration, is far from 0, so an untrained (or frozen) head misses the gate."""
    import torch

    from iclr25.methods.gfn_redteam import LogZHead, ToyReward, enumerate_sequences

    gate = next(c for c in CLAIM.criteria if c.name == "exact_logz")
    ids = list(range(4, 10))
    patterns = [(i, (i + 1) % 6) for i in range(0, 6, 2)] + [((i + 1) % 6, i) for i in range(0, 6, 2)]
    head = LogZHead(32)
    with torch.no_grad():
        untrained = float(head(torch.randn(1, 1, 32), torch.ones(1, 1)))
    for seed in (0, 1, 2):
        toy = ToyReward(ids, 3, 4, patterns, beta=0.5, seed=seed)
        log_z = float(torch.logsumexp(toy.log_reward(enumerate_sequences(ids, 4, 3)), 0))
        assert not gate.holds(gate.statistic(_metrics(logz_err=abs(untrained - log_z))))
        assert gate.holds(gate.statistic(_metrics(logz_err=abs(log_z + 0.05 - log_z))))


@pytest.fixture(scope="module")
def diverse_and_collapsed() -> dict:
    """Metrics of two tiny attackers on a 4-mode world: one fitted to successful corpus attacks of
    every mode, one collapsed onto a single attack (the broken variant the gates must catch)."""
    import numpy as np
    import torch
    from sklearn.feature_extraction.text import TfidfVectorizer

    from iclr25.common.data.attack_world import META_PROMPT, AttackWorld, AttackWorldConfig
    from iclr25.common.tiny_lm import build_tiny_lm, build_word_tokenizer
    from iclr25.methods.gfn_redteam import AttackPrompt, mle_finetune, redteam_metrics, sample_sequences

    torch.set_num_threads(1)
    world = AttackWorld(AttackWorldConfig(n_modes=4, n_shared=2))
    tok = build_word_tokenizer(world.vocab)
    prompt = AttackPrompt.from_tokenizer(tok, META_PROMPT)
    corpus = world.corpus(3000, np.random.default_rng(0))
    hits = [c for c in corpus if world.modes_of(c)]
    tfidf = TfidfVectorizer(token_pattern=r"\S+").fit(corpus)
    clf = world.fit_classifier(400)
    out = {}
    for name, data in (("diverse", hits), ("collapsed", hits[:1])):
        seqs = [(*tok(t, add_special_tokens=False)["input_ids"], prompt.eos_token_id) for t in data]
        model = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, n_head=2, d_model=32, seed=0)
        model, _ = mle_finetune(
            model, prompt, seqs, steps=60, batch_size=32, lr=1e-2, generator=torch.Generator().manual_seed(0)
        )
        s = sample_sequences(
            model,
            prompt.prompt_ids,
            128,
            max_len=14,
            eos_token_id=prompt.eos_token_id,
            banned_token_ids=prompt.banned_token_ids,
            generator=torch.Generator().manual_seed(1),
        )
        res = redteam_metrics(
            prompt.texts(s.tokens, s.mask),
            world.victim(0),
            clf,
            triggers=world.triggers,
            embedder=lambda ts: tfidf.transform(ts).toarray(),
            min_hits=2,
        )
        res["modes_frac"] = res["modes_covered"] / 4
        out[name] = res
    return out


def _gate(name: str):
    return next(c for c in CLAIM.criteria if c.name == name)


def test_coverage_gates_fail_for_a_collapsed_sampler(diverse_and_collapsed) -> None:
    d, c = diverse_and_collapsed["diverse"], diverse_and_collapsed["collapsed"]
    cov, rat = _gate("coverage"), _gate("coverage_vs_reinforce")
    assert c["modes_covered"] <= 1 and d["modes_covered"] >= 3
    assert not cov.holds(cov.statistic({"gfn_mle": c}))
    assert cov.holds(cov.statistic({"gfn_mle": d}))
    assert not rat.holds(rat.statistic({"gfn_mle": c, "reinforce": d}))
    assert rat.holds(rat.statistic({"gfn_mle": d, "reinforce": c}))


def test_diversity_gate_fails_for_a_collapsed_smoother(diverse_and_collapsed) -> None:
    d, c = diverse_and_collapsed["diverse"], diverse_and_collapsed["collapsed"]
    gate = _gate("smoothing_keeps_diversity")
    assert not gate.holds(gate.statistic({"gfn_mle": c, "gfn": d}))
    assert gate.holds(gate.statistic({"gfn_mle": d, "gfn": d}))
