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
        for key in ("toxicity_rate", "mode_tv", "mode_neff", "diversity", "transfer_toxicity"):
            assert key in run.metrics[arm], (arm, key)
    assert run.metrics["tb_exact"]["n_sequences"] == 84.0
    assert run.metrics["oracle"]["toxicity_rate"] > run.metrics["sft"]["toxicity_rate"]
    assert {"tradeoff", "tradeoff_coverage", "modes_vs_toxicity", "training_success", "exact_tv"} <= set(
        run.series
    )
    assert CLAIM.figure == "tradeoff"
    assert len(judge(CLAIM, "smoke", [run]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(smoke_runs) -> None:
    a, b = smoke_runs("gfn_redteam")
    assert a.deterministic_metrics() == b.deterministic_metrics()


def test_equal_victim_queries(smoke_runs) -> None:
    m = smoke_runs("gfn_redteam")[0].metrics
    rl = ("reinforce", "reinforce_kl0p03", "reinforce_kl0p01", "reinforce_kl0", "crt", "gfn_onpolicy")
    assert {m[a]["victim_queries"] for a in rl} == {m["gfn"]["victim_queries"]}


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
            target_shares=world.trigger_probs[:4],
        )
        res["modes_frac"] = res["modes_covered"] / 4
        out[name] = res
    return out


def _gate(name: str):
    return next(c for c in CLAIM.criteria if c.name == name)


def test_coverage_gate_fails_for_a_collapsed_sampler(diverse_and_collapsed) -> None:
    d, c = diverse_and_collapsed["diverse"], diverse_and_collapsed["collapsed"]
    cov, ctrl = _gate("coverage"), _gate("ctrl_coverage_reinforce_kl0")
    assert c["top_mode_share"] == 1.0 and d["mode_tv"] < c["mode_tv"]
    assert not cov.holds(cov.statistic({"gfn_mle": c, "oracle": d}))
    assert cov.holds(cov.statistic({"gfn_mle": d, "oracle": d}))
    assert ctrl.holds(ctrl.statistic({"reinforce_kl0": c, "oracle": d}))  # the control misses the bar


def test_tradeoff_gate_fails_below_the_curve(diverse_and_collapsed) -> None:
    """A collapsed sampler evaluated against a curve through the diverse one lies below it."""
    from iclr25.methods.gfn_redteam import frontier_gap

    d, c = diverse_and_collapsed["diverse"], diverse_and_collapsed["collapsed"]
    gate = _gate("tradeoff")
    curve = [(d["toxicity_rate"], d["diversity"]), (d["toxicity_rate"] - 0.2, d["diversity"] + 0.01)]
    below = {"frontier_gap": frontier_gap((c["toxicity_rate"], c["diversity"]), curve)}
    on = {"frontier_gap": frontier_gap((d["toxicity_rate"], d["diversity"]), curve)}
    assert not gate.holds(gate.statistic({"gfn_mle": below}))
    assert gate.holds(gate.statistic({"gfn_mle": on}))


def test_frontier_gap_uses_the_pareto_curve() -> None:
    from iclr25.methods.gfn_redteam import frontier_gap

    curve = [(0.2, 0.9), (0.8, 0.6), (0.5, 0.5)]  # (0.5, 0.5) is dominated by (0.8, 0.6)
    assert math.isclose(frontier_gap((0.5, 0.75), curve), 0.0, abs_tol=1e-12)
    assert frontier_gap((0.9, 0.61), curve) > 0 > frontier_gap((0.9, 0.59), curve)  # flat beyond the ends
    assert frontier_gap((0.1, 0.91), curve) > 0 > frontier_gap((0.1, 0.89), curve)
