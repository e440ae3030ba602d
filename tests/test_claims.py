"""The claim contract and the single judge() rule."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fake_claim import CLAIM
from iclr25._core.claims import Criterion, RunResult, Series, Verdict, diff, fails, judge, ratio, value


def _res(method: float, baseline: float = 0.5, control: float = 0.51) -> RunResult:
    return RunResult({"method": {"acc": method}, "baseline": {"acc": baseline}, "control": {"acc": control}})


def test_statistics_value_diff_ratio() -> None:
    m = {"a": {"x": 3.0}, "b": {"x": 2.0}}
    assert value("a.x", ">=", 1).statistic(m) == 3.0
    assert diff("a.x", "b.x", ">=", 0).statistic(m) == 1.0
    assert ratio("a.x", "b.x", ">=", 0).statistic(m) == 1.5
    assert ratio("a.x", "b.x", ">=", 0).statistic({"a": {"x": 1.0}, "b": {"x": 0.0}}) == math.inf
    assert math.isnan(ratio("a.x", "b.x", ">=", 0).statistic({"a": {"x": 0.0}, "b": {"x": 0.0}}))


def test_control_criterion_holds_only_when_bar_is_missed() -> None:
    c = fails(value("control.acc", ">=", 0.3))
    assert c.holds(0.1) and not c.holds(0.9)
    assert c.describe() == "fails: control.acc >= 0.3"
    assert not value("a.x", ">=", 0).holds(math.nan)
    assert not c.holds(math.nan)


def test_bad_criteria_raise() -> None:
    with pytest.raises(ValueError, match=r"arm\.metric"):
        value("acc", ">=", 1)
    with pytest.raises(ValueError, match="op"):
        Criterion("c", "value", "a.x", "==", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        Criterion("c", "diff", "a.x", ">=", 1)


def test_judge_supported_when_all_seeds_hold() -> None:
    j = judge(CLAIM, "full", [_res(0.9), _res(0.8), _res(0.85)])
    assert j.verdict is Verdict.SUPPORTED
    gain = j.outcomes[0]
    assert gain.held == 3 and gain.needed == 2 and gain.median == pytest.approx(0.35)


def test_judge_two_of_three_seeds_suffice() -> None:
    j = judge(CLAIM, "full", [_res(0.9), _res(0.5), _res(0.85)])
    assert j.verdict is Verdict.SUPPORTED


def test_judge_not_supported_when_clearly_failing() -> None:
    j = judge(CLAIM, "full", [_res(0.5), _res(0.52), _res(0.9)])
    assert j.verdict is Verdict.NOT_SUPPORTED
    assert "gain" in j.reason


# The five cases of the verdict rule: a control reaching its bar (method passing, method failing),
# a precondition unmet, and a bed that discriminates (method failing, method passing).
_CEILING = replace(value("baseline.acc", ">=", 0.4), name="ceiling", precondition=True)
_WITH_CEILING = replace(CLAIM, criteria=[*CLAIM.criteria, _CEILING])


@pytest.mark.parametrize(
    ("method", "control", "baseline", "verdict", "kind", "in_reason"),
    [
        (0.9, 0.9, 0.5, Verdict.INCONCLUSIVE, "cannot discriminate", "control control_gain"),
        (0.52, 0.9, 0.5, Verdict.INCONCLUSIVE, "cannot discriminate", "control control_gain"),
        (0.9, 0.51, 0.3, Verdict.INCONCLUSIVE, "not applicable", "ceiling"),
        (0.52, 0.51, 0.5, Verdict.NOT_SUPPORTED, "not supported", "failed: gain"),
        (0.9, 0.51, 0.5, Verdict.SUPPORTED, "supported", "1 control(s) missed"),
    ],
    ids=[
        "control-reaches-method-passes",
        "control-reaches-method-fails",
        "precondition-unmet",
        "discriminates-method-fails",
        "discriminates-method-passes",
    ],
)
def test_verdict_rule_five_cases(
    method: float, control: float, baseline: float, verdict: Verdict, kind: str, in_reason: str
) -> None:
    j = judge(_WITH_CEILING, "full", [_res(method, baseline, baseline + control - 0.5)] * 3)
    assert (j.verdict, j.kind) == (verdict, kind)
    assert in_reason in j.reason


def test_judge_control_that_passes_makes_claim_inconclusive() -> None:
    j = judge(CLAIM, "full", [_res(0.9, control=0.9)] * 3)
    assert j.verdict is Verdict.INCONCLUSIVE and j.kind == "cannot discriminate"
    assert "control_gain" in j.reason and "misses its bar in only 0/3 seeds" in j.reason
    # one seed of three reaching the bar still leaves the control missing it in 2/3: it discriminates
    j = judge(CLAIM, "full", [_res(0.9, control=0.9), _res(0.9), _res(0.9)])
    assert j.verdict is Verdict.SUPPORTED


def test_unmet_convergence_preconditions_read_not_converged() -> None:
    plateau = value(
        "method.plateau_gap", "<=", 0.01, name="method_converged", precondition=True, convergence=True
    )
    claim = replace(CLAIM, criteria=[*CLAIM.criteria, plateau])
    results = [_res(0.9) for _ in range(3)]
    for r in results:
        r.metrics["method"]["plateau_gap"] = 0.05
    j = judge(claim, "full", results)
    assert (j.verdict, j.kind) == (Verdict.INCONCLUSIVE, "not converged")
    assert "method_converged" in j.reason
    with pytest.raises(ValueError, match="convergence"):
        replace(plateau, precondition=False)


def test_judge_mixed_is_inconclusive() -> None:
    j = judge(CLAIM, "full", [_res(0.9), _res(0.5), _res(0.9), _res(0.5)])  # 2/4 hold, needs 3
    assert j.verdict is Verdict.INCONCLUSIVE


def test_judge_error_and_report_only() -> None:
    assert judge(CLAIM, "full", [None], ["Traceback\nRuntimeError: boom"]).verdict is Verdict.ERROR
    j = judge(CLAIM, "smoke", [_res(0.9)])
    assert j.verdict is Verdict.INCONCLUSIVE and j.reason == "smoke: report-only"
    assert all(not o.gating for o in j.outcomes)


def test_judge_missing_metric_is_error() -> None:
    j = judge(CLAIM, "full", [RunResult({"method": {"acc": 1.0}})])
    assert j.verdict is Verdict.ERROR and "missing" in j.reason


def test_budget_thresholds_replace_the_criterion_bar() -> None:
    budgets = dict(CLAIM.budgets)
    budgets["full"] = replace(budgets["full"], thresholds={"gain": 0.5})
    claim = replace(CLAIM, budgets=budgets)
    assert judge(claim, "full", [_res(0.9)] * 3).verdict is Verdict.NOT_SUPPORTED


def test_claim_validation() -> None:
    with pytest.raises(ValueError, match="headline"):
        replace(CLAIM, headline="nope")
    with pytest.raises(ValueError, match="unknown arms"):
        replace(CLAIM, arms={"method": "m"})
    with pytest.raises(ValueError, match="lacks the budget"):
        replace(CLAIM, budgets={"smoke": CLAIM.budgets["smoke"]})
    with pytest.raises(ValueError, match="threads"):
        replace(CLAIM, threads=0)


def test_a_falsifier_names_a_control_of_the_claim_or_a_test() -> None:
    gain = CLAIM.criteria[0]
    for bad in ("nope", "gain"):  # not a criterion; a criterion that is no control
        with pytest.raises(ValueError, match="falsifier"):
            replace(CLAIM, criteria=[replace(gain, falsifier=bad), *CLAIM.criteria[1:]])
    test_id = "tests/test_claims.py::test_judge_control_that_passes_makes_claim_inconclusive"
    replace(CLAIM, criteria=[replace(gain, falsifier=test_id), *CLAIM.criteria[1:]])


def test_report_only_rows_count_only_the_seeds_that_measured_them() -> None:
    extra = value("method.extra", ">=", 1.0, name="extra", gating=False)
    claim = replace(CLAIM, criteria=[*CLAIM.criteria, extra])
    results = [_res(0.9), _res(0.9), _res(0.9)]
    for r, v in zip(results, (2.0, math.nan, math.nan), strict=True):
        r.metrics["method"]["extra"] = v  # measured on one seed only
    outcome = judge(claim, "full", results).outcomes[-1]
    assert (outcome.held, outcome.measured, outcome.needed, outcome.state) == (1, 1, 1, "pass")
    gating = replace(extra, gating=True, falsifier="control_gain")
    outcome = judge(replace(claim, criteria=[*CLAIM.criteria, gating]), "full", results).outcomes[-1]
    assert outcome.measured == 3 and outcome.state == "fail"  # a gate counts the unmeasured seeds


def test_run_fixes_threads_and_global_rngs_and_restores_them() -> None:
    import random

    import torch

    seen = {}

    def run_fn(config, *, seed, device):
        seen["threads"] = torch.get_num_threads()
        seen["draw"] = random.random()
        return _res(0.9)

    torch.set_num_threads(2)
    claim = replace(CLAIM, run_fn=run_fn, threads=1)
    claim.run("full", seed=5)
    first = seen["draw"]
    random.random()  # another claim moves the global RNG; the next run must not notice
    state = random.getstate()
    claim.run("full", seed=5)
    assert seen == {"threads": 1, "draw": first}
    assert torch.get_num_threads() == 2 and random.getstate() == state


def test_result_types_are_checked() -> None:
    with pytest.raises(TypeError, match="float"):
        RunResult({"a": {"x": "1"}})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="points"):
        Series("t", "x", "y", [1, 2], {"l": [1.0]})


def test_unmet_precondition_makes_the_test_not_applicable() -> None:
    pre = replace(value("method.acc", ">=", 0.7), name="base_solves", precondition=True)
    claim = replace(CLAIM, criteria=[*CLAIM.criteria, pre])
    assert judge(claim, "full", [_res(0.9)] * 3).verdict is Verdict.SUPPORTED
    j = judge(claim, "full", [_res(0.6)] * 3)  # the gain fails too: the precondition wins
    assert j.verdict is Verdict.INCONCLUSIVE and "not applicable" in j.reason and "base_solves" in j.reason
    with pytest.raises(ValueError, match="precondition"):
        replace(pre, control=True)


def test_parts_get_their_own_verdicts() -> None:
    gain, *rest = CLAIM.criteria
    split = [replace(gain, part="fast"), *rest, replace(gain, name="gain_slow", threshold=0.5, part="slow")]
    claim = replace(CLAIM, criteria=split)
    j = judge(claim, "full", [_res(0.9)] * 3)
    assert j.parts["fast"][0] is Verdict.SUPPORTED
    assert j.parts["slow"][0] is Verdict.NOT_SUPPORTED and "gain_slow" in j.parts["slow"][1]
    assert j.verdict is Verdict.NOT_SUPPORTED  # the overall verdict still covers every gate


def test_a_precondition_of_one_part_leaves_the_other_parts_alone() -> None:
    gain, control = CLAIM.criteria
    pre = replace(value("baseline.acc", ">=", 0.9), name="slow_ceiling", precondition=True, part="slow")
    other = replace(gain, name="gain_slow", part="slow")
    claim = replace(CLAIM, criteria=[replace(gain, part="fast"), control, other, pre])
    j = judge(claim, "full", [_res(0.9)] * 3)
    assert j.part_kinds == {"fast": "supported", "slow": "not applicable"}
    assert (j.verdict, j.kind) == (Verdict.INCONCLUSIVE, "not applicable")  # overall: every precondition


def test_a_part_is_judged_with_the_controls_its_gates_name() -> None:
    gain, control = CLAIM.criteria
    other = value("method.acc", ">=", 0.0, name="other", part="other", falsifier="control_gain")
    claim = replace(CLAIM, criteria=[replace(gain, part="main"), control, other])
    j = judge(claim, "full", [_res(0.9, control=0.9)] * 3)
    assert j.part_kinds == {"main": "cannot discriminate", "other": "cannot discriminate"}
    free = replace(other, falsifier="tests/test_claims.py::test_parts_get_their_own_verdicts")
    claim = replace(CLAIM, criteria=[replace(gain, part="main"), control, free])
    assert judge(claim, "full", [_res(0.9, control=0.9)] * 3).part_kinds["other"] == "supported"
