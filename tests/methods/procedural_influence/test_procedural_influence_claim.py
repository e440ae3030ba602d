"""The claim at smoke budget (plumbing, never a verdict), the corpus, training replay and configs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25._core.claims import judge
from iclr25.methods.procedural_influence import (
    ClaimConfig,
    CorpusConfig,
    InfluenceConfig,
    LMConfig,
    Query,
    assert_no_leak,
    build_lm,
    make_corpus,
    make_queries,
    query_prompts,
    train_lm,
    valid_solutions,
)
from iclr25.methods.procedural_influence.claim import CLAIM


def test_smoke_runs_every_arm(smoke_runs) -> None:
    a, b = smoke_runs("procedural_influence")
    assert a.deterministic_metrics() == b.deterministic_metrics()
    m = a.metrics
    arms = (
        "ekfac",
        "graddot",
        "bm25",
        "tfidf",
        "permuted",
        "foreign_factors",
        "pair_shuffled",
        "ekfac_damp10",
    )
    for arm in arms:
        assert -1.0 <= m[arm]["r_same_template"] <= 1.0 and 0.0 <= m[arm]["procedural_share"] <= 1.0
        assert 0.0 <= m[arm]["procedural_partial_p"] <= 1.0
    assert {"oracle_delta"} <= set(m["random"]) and m["flipped"]["oracle_removed"] > 0
    assert (
        0.0 <= m["ekfac"]["oracle_p_vs_random"] <= 1.0 and 0.0 <= m["flipped"]["oracle_p_vs_graddot"] <= 1.0
    )
    assert np.isfinite(m["training"]["plateau_gap"]) and -1.0 <= m["init"]["r_same_template"] <= 1.0
    # the pairing control keeps query-query correlations (same permutation for every query)
    assert m["pair_shuffled"]["r_same_template"] == pytest.approx(m["ekfac"]["r_same_template"])
    assert 0.0 <= m["world"]["reasoning_number_nats_share"] <= 1.0
    assert {"correlations", "topk_shares", "training"} <= set(a.series)
    blocks, matrix = a.media["correlation_blocks"], a.media["correlation_matrix"]
    assert blocks.xticks[0] == "factual" and len(blocks.values) == len(blocks.yticks) == len(blocks.xticks)
    n = len(matrix.values)
    assert all(len(row) == n for row in matrix.values)
    assert all(abs(matrix.values[i][i] - 1.0) < 1e-9 for i in range(n))  # every query with itself
    j = judge(CLAIM, "smoke", [a])
    assert j.reason == "smoke: report-only" and len(j.outcomes) == len(CLAIM.criteria)


def test_every_gate_has_a_control_with_the_same_bar() -> None:
    by_name = {c.name: c for c in CLAIM.criteria}
    gates = [c for c in CLAIM.criteria if c.gating and not c.control and not c.precondition]
    assert {c.name for c in gates} == {
        "corr_gap", "answer_gap", "procedural_share", "procedural_beyond_bm25", "oracle_vs_random",
        "oracle_vs_graddot",
    }  # fmt: skip
    for c in gates:
        ctrl = by_name[c.falsifier]
        assert ctrl.control and ctrl.gating and ctrl.part == c.part
        assert (ctrl.kind, ctrl.op, ctrl.threshold) == (c.kind, c.op, c.threshold), c.name
    assert by_name["world_learned"].precondition and by_name["positive_control_epoch0"].precondition
    assert by_name["training_converged"].convergence


def test_gates_fail_on_broken_scores() -> None:
    """The controls' statistics measured by the claim miss the bars on a made-up run."""
    metrics = {
        "ekfac": {"r_same_template": 0.1, "r_factual": 0.05},
        "permuted": {"r_same_template": 0.0, "r_factual": 0.0},
    }
    gap = next(c for c in CLAIM.criteria if c.name == "corr_gap")
    ctrl = next(c for c in CLAIM.criteria if c.name == "ctrl_corr_gap_permuted")
    assert not gap.holds(gap.statistic(metrics)) and ctrl.holds(ctrl.statistic(metrics))


def _gate(name: str):
    return next(c for c in CLAIM.criteria if c.name == name)


def test_beyond_bm25_gate_fails_when_overlap_explains_everything() -> None:
    """Broken variant: influence that is a function of BM25 alone has no partial correlation left,
    so the gate misses; a score with procedural signal beyond BM25 passes."""
    from iclr25.methods.procedural_influence import paired_greater_p, partial_spearman

    rng = np.random.default_rng(0)
    q, d = 12, 300
    bm25 = rng.random((q, d))
    procedural = (rng.random(d) < 0.3).astype(float)
    bm25 = bm25 + procedural  # overlap and procedural kind go together, as in the corpus
    lexical = np.exp(2.0 * bm25)  # influence explained by overlap alone (a monotone function of it)
    signal = bm25 + 0.5 * procedural + 0.1 * rng.random((q, d))
    gate = _gate("procedural_beyond_bm25")
    for scores, expect in ((lexical, False), (signal, True)):
        r = partial_spearman(scores, procedural, bm25)
        p = paired_greater_p(r, np.zeros_like(r))
        assert gate.holds(gate.statistic({"ekfac": {"procedural_partial_p": p}})) is expect


def test_oracle_gate_is_a_paired_test_that_a_coin_flip_fails() -> None:
    """Broken variant: per-query differences of random sign (the old median >= 0 rule's coin flip)
    miss the bar; consistently positive ones pass."""
    from iclr25.methods.procedural_influence import paired_greater_p

    gate = _gate("oracle_vs_graddot")
    rng = np.random.default_rng(1)
    base = rng.random(12)
    coin = base + rng.normal(0, 0.05, 12)
    better = base + 0.05 + rng.random(12) * 0.01
    for delta, expect in ((coin, False), (better, True)):
        p = paired_greater_p(delta, base)
        assert gate.holds(gate.statistic({"ekfac": {"oracle_p_vs_graddot": p}})) is expect
    assert paired_greater_p(base, base) == 1.0


def test_corpus_is_deterministic_and_labelled() -> None:
    cfg = CorpusConfig(n_arithmetic=30, n_slope=30, n_linear=10, n_procedures=4, n_facts=5, n_filler=10,
                       holdout_problems=5)  # fmt: skip
    a, b, c = make_corpus(cfg, 1), make_corpus(cfg, 1), make_corpus(cfg, 2)
    assert a.texts == b.texts and a.texts != c.texts
    kinds = a.labels("kind")
    assert set(kinds) == {"worked", "procedure", "fact", "filler"}
    assert len(a) == 30 + 30 + 10 + 3 * 4 + 5 * cfg.docs_per_fact + 10
    for d in a.docs:
        if d.kind == "worked":
            assert d.source == "qa_forum" and d.problem and d.equations
            prompt = query_prompts(d.task, d.problem, d.template)
            assert d.text.removeprefix(prompt + " ") in valid_solutions(d.task, d.problem, d.template)
        if d.kind == "fact":
            assert d.source == "encyclopedia" and len(d.fact_ids) == 1
    stated = {(d.task, d.problem) for d in a.docs if d.problem}
    for task, pool in a.holdout.items():
        assert not any((task, p) in stated for p in pool)


def test_worked_solutions_are_paraphrased() -> None:
    """Every step has 3 wordings; the corpus uses more than one wording of each step."""
    from iclr25.methods.procedural_influence.corpus import N_WORDINGS, n_steps

    assert N_WORDINGS == 3
    for task, p in (("arithmetic", (3, 4, 2)), ("slope", (1, 2, 3, 6)), ("linear", (2, 1, 7))):
        for t in (0, 1):
            sols = valid_solutions(task, p, t)
            assert len(sols) == N_WORDINGS ** n_steps(task)
            assert len({s.split()[-1] for s in sols}) == 1  # one answer, every wording
    corpus = make_corpus(CorpusConfig(n_arithmetic=60, n_slope=10, n_linear=0, n_procedures=2, n_facts=2,
                                      n_filler=2, holdout_problems=3), 0)  # fmt: skip
    first_words = {d.text.split(" solution : ")[1].split()[0] for d in corpus.docs
                   if d.kind == "worked" and d.task == "arithmetic" and d.template == 0}  # fmt: skip
    assert first_words == {"x", "first", "add"}


def test_planted_leak_trips_the_assertion() -> None:
    corpus = make_corpus(CorpusConfig(n_arithmetic=20, n_slope=20, n_linear=0, n_procedures=2, n_facts=3,
                                      n_filler=2, holdout_problems=3), 0)  # fmt: skip
    held = corpus.holdout["arithmetic"][0]
    q = Query("p", "c", "arithmetic", problem=held)
    assert_no_leak(corpus, [q])
    seen = next(d.problem for d in corpus.docs if d.task == "arithmetic" and d.problem)
    with pytest.raises(ValueError, match="leak"):
        assert_no_leak(corpus, [Query("p", "c", "arithmetic", problem=seen)])


def test_replay_without_removals_reproduces_training_and_queries_are_flagged(tiny_world) -> None:
    corpus, tok, model, data, _, lm_cfg = tiny_world
    m1 = build_lm(len(tok), lm_cfg, seed=0)
    _, ckpt = train_lm(m1, data, lm_cfg, seed=0, checkpoint_epoch=lm_cfg.epochs - 1)
    assert all(
        torch.equal(x, y) for x, y in zip(m1.state_dict().values(), model.state_dict().values(), strict=True)
    )
    m2 = build_lm(len(tok), lm_cfg, seed=0)
    train_lm(m2, data, lm_cfg, seed=0, start=ckpt)
    assert all(
        torch.equal(x, y) for x, y in zip(m1.state_dict().values(), m2.state_dict().values(), strict=True)
    )
    m3 = build_lm(len(tok), lm_cfg, seed=0)
    train_lm(m3, data, lm_cfg, seed=0, start=ckpt, exclude={0, 1, 2})
    assert not all(
        torch.equal(x, y) for x, y in zip(m1.state_dict().values(), m3.state_dict().values(), strict=True)
    )
    qs = make_queries(
        corpus, model, tok, n_factual=2, n_reasoning=2, n_control=1, context=lm_cfg.context, seed=0
    )
    assert [q.group for q in qs].count("factual") == 2 and [q.group for q in qs].count("control_slope") == 1
    assert all(q.completion.strip() for q in qs) and all(
        q.correct for q in qs if q.group.startswith("control")
    )
    with pytest.raises(ValueError, match="held-out"):
        make_queries(
            corpus, model, tok, n_factual=1, n_reasoning=9, n_control=9, context=lm_cfg.context, seed=0
        )
    assert_no_leak(corpus, qs)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="max_operand"):
        CorpusConfig(max_operand=30)
    with pytest.raises(ValueError, match="n_head"):
        LMConfig(d_model=10, n_head=4)
    with pytest.raises(ValueError, match="strategy"):
        InfluenceConfig(strategy="exact")
    with pytest.raises(ValueError, match="damping"):
        InfluenceConfig(damping_factor=-1.0)
    with pytest.raises(ValueError, match="oracle_epochs"):
        ClaimConfig(oracle_epochs=50)
    with pytest.raises(ValueError, match="damping_sweep"):
        ClaimConfig(damping_sweep=(0.01,))
    assert InfluenceConfig().damping_factor is None  # the paper's rule, passed explicitly
    assert np.isclose(ClaimConfig().lm.lr, 5e-3)
