"""The FTCT claim's parts, its convergence preconditions and its zero-shot diagnostics."""

import numpy as np
import pytest

from iclr25._core.claims import RunResult, judge
from iclr25.methods.ftct import (
    CausalGraph,
    FTCTConfig,
    FTCTTokenizer,
    count_long_paths,
    longest_letter_path,
    make_compositional_tests,
    make_training_corpus,
)
from iclr25.methods.ftct.claim import CLAIM, FEW, ZERO, _first_step_question

CFG = FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=40, n_fragment=80)


@pytest.fixture(scope="module")
def world():
    graph = CausalGraph.random(CFG, np.random.default_rng(0))
    tok = FTCTTokenizer(CFG.n_letters, CFG.modulus, CFG.context_div)
    return graph, tok, make_compositional_tests(graph, tok, CFG, 0, 24, np.random.default_rng(1))


def _metrics(**over: float) -> dict[str, dict[str, float]]:
    """One seed's metrics at every criterion's bar on the passing side, with overrides."""
    base = {
        "few_shot": {
            "tr_ver": 1.0,
            "tr_val": 1.0,
            "whole": 0.9,
            "order_at_m1": 1.0,
            "whole_lenient": 0.9,
            "final": 0.9,
            "te_val": 1.0,
        },
        "zero_shot": {"whole": 0.0},
        "cross_chain": {"whole": 0.0},
        "shuffled": {"whole": 0.0},
        "one_layer_one_head": {"whole": 0.0},
        "training": {"curve_whole_k1_plateau_gap": 0.02, "curve_whole_k0_plateau_gap": 0.0},
    }
    for ref, v in over.items():
        arm, name = ref.split("__")
        base[arm][name] = v
    return base


def test_criteria_name_the_two_parts_and_share_the_skill_preconditions():
    parts = {c.name: c.part for c in CLAIM.criteria}
    assert parts["few_shot_whole"] == FEW and parts["zero_shot_whole"] == ZERO
    assert parts["shuffled_control"] == FEW and parts["shallow_control"] == FEW
    for name in ("in_dist_order", "in_dist_value"):  # no part: they cover both
        c = next(c for c in CLAIM.criteria if c.name == name)
        assert c.precondition and c.convergence and c.part == ""
    assert parts["few_shot_converged"] == FEW and parts["zero_shot_converged"] == ZERO


def test_part_verdicts_split_a_zero_shot_success_from_the_few_shot_result():
    seeds = [RunResult(metrics=_metrics(zero_shot__whole=0.8)) for _ in range(3)]
    j = judge(CLAIM, "full", seeds)
    assert j.verdict.value == "NOT_SUPPORTED"
    assert j.parts[FEW][0].value == "SUPPORTED" and j.parts[ZERO][0].value == "NOT_SUPPORTED"


def test_an_unfinished_curve_or_unlearnt_copying_is_not_converged():
    climbing = [RunResult(metrics=_metrics(training__curve_whole_k1_plateau_gap=0.4)) for _ in range(3)]
    j = judge(CLAIM, "full", climbing)
    assert j.verdict.value == "INCONCLUSIVE" and j.kind == "not converged"
    assert j.part_kinds[FEW] == "not converged" and j.parts[ZERO][0].value == "SUPPORTED"
    no_copy = [RunResult(metrics=_metrics(few_shot__tr_ver=0.6)) for _ in range(3)]
    j = judge(CLAIM, "full", no_copy)
    assert j.kind == "not converged" and all(k == "not converged" for k in j.part_kinds.values())
    # one seed of three that did not learn copying does not stop the verdict (2 of 3 suffice)
    mixed = [RunResult(metrics=_metrics(few_shot__tr_ver=0.17))] + [RunResult(metrics=_metrics())] * 2
    assert judge(CLAIM, "full", mixed).verdict.value == "SUPPORTED"


def test_letter_paths_count_vertex_orders_without_values():
    graph = CausalGraph(
        levels=(("A",), ("B",), ("C",)),
        edges={("A", "B"): ("+", 1), ("B", "C"): ("+", 1)},
        roots=(0,),
        modulus=10,
    )
    assert longest_letter_path(graph, ["A", "X", "B", "Y", "C"]) == 3
    assert longest_letter_path(graph, ["C", "B", "A"]) == 1 and longest_letter_path(graph, ["X"]) == 0
    traces = [[("A", 0), ("B", 1), ("C", 2)], [("A", 5), ("B", 9), ("C", 0)], [("A", 0), ("B", 1)]]
    assert count_long_paths(graph, traces, 3) == {"consistent": 1, "letters": 2}
    with pytest.raises(ValueError, match="min_len"):
        count_long_paths(graph, traces, 0)


def test_training_data_holds_no_consistent_chain_longer_than_m():
    graph = CausalGraph.random(CFG, np.random.default_rng(0))
    tok = FTCTTokenizer(CFG.n_letters, CFG.modulus, CFG.context_div)
    corpus = make_training_corpus(graph, tok, CFG, np.random.default_rng(1))
    traces = [t for ts in corpus.traces for t in ts]
    counts = count_long_paths(graph, traces, CFG.max_child_len + 1)
    assert counts["consistent"] == 0 and counts["letters"] >= 0


def test_first_step_question_names_the_root_and_keeps_the_rest(world):
    _, tok, items = world
    it = items[0]
    q = _first_step_question(tok, it)
    assert q.prompt_ids[it.query_start] == tok.letter_id(it.chain[0])
    assert it.prompt_ids[it.query_start] == tok.letter_id(it.chain[-1])
    assert q.prompt_ids[it.query_start + 1 :] == it.prompt_ids[it.query_start + 1 :]
    assert q.gold_ids == it.gold_ids
    with pytest.raises(ValueError, match="question"):
        _first_step_question(tok, q)
