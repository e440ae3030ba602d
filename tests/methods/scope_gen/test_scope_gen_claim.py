"""The claim check: smoke run, gate statistics, the falsifier of the abstention gate, controls."""

import math
import warnings

import numpy as np
import pytest

from iclr25._core.claims import judge
from iclr25.methods.scope_gen import QASimulator, ScopeGen, evaluate
from iclr25.methods.scope_gen.claim import (
    CLAIM,
    MATCHED,
    METRICS,
    _oracle_call_lines,
    _random_scores,
    _tag,
    _variants,
    _worst_task_metrics,
    run,
)
from iclr25.methods.scope_gen.config import ScopeGenCheckConfig


def test_smoke_runs_deterministically(smoke_runs):
    a, b = smoke_runs("scope_gen")
    assert a.metrics == b.metrics
    for arm in CLAIM.arms:
        assert arm in a.metrics
    for ms in a.metrics.values():
        assert all(math.isfinite(v) for v in ms.values())
    j = judge(CLAIM, "smoke", [a])
    assert j.verdict.value == "INCONCLUSIVE" and len(j.outcomes) == len(CLAIM.criteria)
    assert all(not math.isnan(o.median) for o in j.outcomes)
    assert set(a.series) == {
        "coverage",
        "oracle_calls",
        "size_vs_clm_matched",
        "set_size_qa",
        "calibration_size_coverage",
        "calibration_size_set_size",
    }
    assert any(c.control for c in CLAIM.criteria)


def _criterion(name: str):
    return next(c for c in CLAIM.criteria if c.name == name)


@pytest.mark.parametrize("alpha", [0.3, 0.4])
def test_abstention_gate_fails_when_every_set_abstains(alpha):
    """Broken variant: SCOPE-Gen calibrated on too few prompts for α has λ_1 = +inf and abstains
    on every test prompt; the claim's abstention gate must reject it, and accept the method
    calibrated on a proper split."""
    cfg = ScopeGenCheckConfig()
    arr = QASimulator(n_prompts=600, seed=0).to_arrays(cfg.m_max, np.random.default_rng(0))
    gate = _criterion(f"S3_abstention_{_tag(alpha)}")
    kw = _variants(cfg, alpha, cfg.m_max)["scope_gen"]
    test = np.arange(300, 600)
    out = {}
    for n_cal in (6, 300):  # 6 prompts: 2 per stage split, ceil(3 * (1 - α_1)) = 3 > 2
        cal = np.arange(n_cal)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            model = ScopeGen(random_state=0, **kw).calibrate_arrays(
                arr.qualities[cal], arr.similarities[cal], arr.oracle(cal)
            )
        too_small = [w for w in rec if "calibration set too small" in str(w.message)]
        assert len(too_small) == (n_cal == 6)
        ev = evaluate(model, arr.qualities[test], arr.similarities[test], arr.labels[test])
        metrics = {"scope_gen": {f"max_task_abstention_{_tag(alpha)}": ev["abstention"]}}
        out[n_cal] = gate.holds(gate.statistic(metrics))
    assert out == {6: False, 300: True}


def test_oracle_calls_figure_shows_clm_and_eager_when_they_coincide():
    metrics = {
        "scope_gen": {"unique_calls_qa_a30": 3.0, "unique_calls_qa_a40": 2.5},
        "clm": {"unique_calls_qa_a30": 20.0, "unique_calls_qa_a40": 20.0},
        "eager": {"unique_calls_qa_a30": 20.0, "unique_calls_qa_a40": 20.0},
    }
    lines = _oracle_call_lines(metrics, ["a30", "a40"], ["qa"])
    assert len(lines) == 2 and lines["scope_gen (qa)"] == [3.0, 2.5]
    (both,) = [k for k in lines if k != "scope_gen (qa)"]
    assert "clm" in both and "eager" in both and "coincide" in both and "qa" in both
    assert lines[both] == [20.0, 20.0]
    metrics["eager"]["unique_calls_qa_a40"] = 19.0  # distinct lines stay separate
    assert set(_oracle_call_lines(metrics, ["a30", "a40"], ["qa"])) == {
        "scope_gen (qa)",
        "clm (qa)",
        "eager (qa)",
    }


def _per_task(rows: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """Per-task results at α = 0.3 from ``{task: {arm: [coverage, size, abstention, unique, raw]}}``;
    arms not given copy CLM's row (the matched arms with CLM's coverage as their target)."""
    out = {}
    for task, arms in rows.items():
        full = {arm: arms.get(arm, arms["clm"]) for arm in ("scope_gen", "flipped", "same_alpha", "gen_only")}
        full |= {
            arm: arms.get(arm, arms["clm"]) for arm in ("one_split", "eager", "random_filters", "clm_k10")
        }
        full |= {arm: arms.get(arm, [*arms["clm"], arms["clm"][0]]) for arm in MATCHED}
        full["clm"] = arms["clm"]
        out[task] = {(arm, 0.3): np.array(v, dtype=float) for arm, v in full.items()}
    return out


def test_joint_rule_counts_tasks_that_buy_small_sets_by_undercovering():
    """S3a's statistic counts a task as failing when the sets are larger than CLM's *or* the
    coverage is below 1 - α - 0.03; a smaller set at too low a coverage does not pass."""
    assert METRICS == ("coverage", "size", "abstention", "unique_calls", "raw_calls")
    clm = [0.78, 4.0, 0.0, 20.0, 20.0]
    per_task = _per_task(
        {
            "a": {
                "clm": clm,
                "scope_gen": [0.70, 3.0, 0.0, 5.0, 2.0],
                "same_alpha": [0.40, 1.0, 0.0, 5.0, 2.0],
            },
            "b": {
                "clm": clm,
                "scope_gen": [0.67, 4.0, 0.0, 4.0, 2.0],
                "same_alpha": [0.66, 2.0, 0.0, 5.0, 2.0],
            },
            "c": {
                "clm": clm,
                "scope_gen": [0.75, 4.4, 0.0, 4.0, 2.0],
                "same_alpha": [0.72, 3.0, 0.0, 5.0, 2.0],
            },
        }
    )
    m = _worst_task_metrics(per_task, (0.3,))
    # scope_gen: a passes; b sits exactly at the bar 0.67 with the same size (passes); c is larger.
    assert m["scope_gen"]["tasks_failing_joint_a30"] == 1.0
    assert m["scope_gen"]["worst_task_size_vs_clm_a30"] == pytest.approx(1.1)
    assert m["scope_gen"]["min_task_coverage_a30"] == pytest.approx(0.67)
    assert m["scope_gen"]["worst_task_calls_vs_clm_a30"] == pytest.approx(0.25)
    # same_alpha: smaller sets everywhere, but a and b under-cover.
    assert m["same_alpha"]["worst_task_size_vs_clm_a30"] < 1.0
    assert m["same_alpha"]["tasks_failing_joint_a30"] == 2.0
    gate, control = _criterion("S3a_smaller_sets_a30"), _criterion("S3a_control_same_alpha_a30")
    assert not gate.holds(gate.statistic(m)) and control.holds(control.statistic(m))
    # A CLM with no finite sets (nothing certified) makes the comparison undefined: a failure.
    per_task["a"][("clm", 0.3)][1] = np.nan
    m = _worst_task_metrics(per_task, (0.3,))
    assert m["scope_gen"]["tasks_failing_joint_a30"] == 2.0
    assert math.isnan(m["scope_gen"]["worst_task_size_vs_clm_a30"])


def test_filter_shrinkage_gate_reads_the_worst_task():
    clm = [0.78, 4.0, 0.0, 20.0, 20.0]
    per_task = _per_task(
        {
            "a": {"clm": clm, "scope_gen": [0.7, 2.0, 0, 5, 2], "gen_only": [0.7, 4.0, 0, 3, 1]},
            "b": {"clm": clm, "scope_gen": [0.7, 3.8, 0, 5, 2], "gen_only": [0.7, 4.0, 0, 3, 1]},
        }
    )
    m = _worst_task_metrics(per_task, (0.3,))
    assert m["scope_gen"]["worst_task_size_vs_gen_only_a30"] == pytest.approx(0.95)
    gate = _criterion("S3b_filters_shrink_a30")
    assert not gate.holds(gate.statistic(m))  # task b shrinks by 5% only


def test_controls_must_miss_on_every_task():
    """A control reads its best task: reaching the bar on one task of several (here the random
    filters shrink the sets by 15% on task b) counts as reaching it, and S3b's control holds only
    when it misses on every task."""
    clm = [0.78, 4.0, 0.0, 20.0, 20.0]
    rows = {
        "a": {"clm": clm, "gen_only": [0.7, 4.0, 0, 3, 1], "random_filters": [0.7, 4.4, 0, 3, 1]},
        "b": {"clm": clm, "gen_only": [0.7, 4.0, 0, 3, 1], "random_filters": [0.7, 3.4, 0, 3, 1]},
    }
    control = _criterion("S3b_control_random_filters_a30")
    m = _worst_task_metrics(_per_task(rows), (0.3,))
    assert m["random_filters"]["worst_task_size_vs_gen_only_a30"] == pytest.approx(1.1)
    assert m["random_filters"]["best_task_size_vs_gen_only_a30"] == pytest.approx(0.85)
    assert not control.holds(control.statistic(m))
    rows["b"]["random_filters"] = [0.7, 4.0, 0, 3, 1]  # no shrinkage on either task
    m = _worst_task_metrics(_per_task(rows), (0.3,))
    assert control.holds(control.statistic(m))
    # S1's control likewise: the no-allocation variant must under-cover on every task.
    s1 = _criterion("S1_control_same_alpha_a30")
    rows["a"]["same_alpha"], rows["b"]["same_alpha"] = [0.40, 1, 0, 3, 1], [0.66, 2, 0, 3, 1]
    m = _worst_task_metrics(_per_task(rows), (0.3,))
    assert m["same_alpha"]["max_task_coverage_a30"] == pytest.approx(0.66)
    assert not s1.holds(s1.statistic(m))


def test_matched_gate_reads_each_arm_against_its_own_matched_clm():
    """S3a's gate divides SCOPE-Gen's size by the CLM tuned to SCOPE-Gen's coverage, and its
    control divides the random-filter variant's size by the CLM tuned to *its* coverage."""
    clm = [0.78, 4.0, 0.0, 20.0, 20.0]
    rows = {
        "a": {
            "clm": clm,
            "scope_gen": [0.72, 3.0, 0, 5, 2],
            "clm_matched": [0.73, 3.5, 0, 20, 20, 0.72],
            "random_filters": [0.71, 4.2, 0, 5, 2],
            "clm_matched_random": [0.71, 3.4, 0, 20, 20, 0.71],
        },
        "b": {
            "clm": clm,
            "scope_gen": [0.72, 2.1, 0, 5, 2],
            "clm_matched": [0.70, 2.0, 0, 20, 20, 0.72],
            "random_filters": [0.72, 2.9, 0, 5, 2],
            "clm_matched_random": [0.73, 2.5, 0, 20, 20, 0.72],
        },
    }
    m = _worst_task_metrics(_per_task(rows), (0.3,))
    assert m["scope_gen"]["worst_task_size_vs_clm_matched_a30"] == pytest.approx(1.05)
    assert m["random_filters"]["best_task_size_vs_clm_matched_a30"] == pytest.approx(1.16)
    assert m["clm_matched"]["max_task_coverage_gap_a30"] == pytest.approx(0.02)
    gate, control = _criterion("S3a_matched_a30"), _criterion("S3a_control_random_filters_a30")
    assert not gate.holds(gate.statistic(m))  # task b: 5% larger than the matched CLM
    assert control.holds(control.statistic(m))  # larger on both tasks: the control misses
    rows["b"]["random_filters"][1] = 2.4  # the blind filters beat their matched CLM on task b
    m = _worst_task_metrics(_per_task(rows), (0.3,))
    assert not control.holds(control.statistic(m))


def test_admissible_rate_preconditions():
    """The generator must sit in the paper's regime: fewer than 1 - max α of its samples
    admissible (one sample must not already reach the target), at least one admissible sample
    per prompt on average."""
    high, low = _criterion("S0_admissible_rate_max"), _criterion("S0_admissible_samples_min")
    assert high.precondition and low.precondition
    ok = {"all_samples": {"max_task_admissible_rate": 0.40, "min_task_admissible_per_prompt": 4.5}}
    assert high.holds(high.statistic(ok)) and low.holds(low.statistic(ok))
    easy = {"all_samples": {"max_task_admissible_rate": 0.60, "min_task_admissible_per_prompt": 12}}
    hard = {"all_samples": {"max_task_admissible_rate": 0.03, "min_task_admissible_per_prompt": 0.6}}
    assert not high.holds(high.statistic(easy)) and not low.holds(low.statistic(hard))


def test_reports_task_runs_through_the_claim():
    """The long-form report task (tiny LM, ROUGE oracle) end to end through the claim's run."""
    pytest.importorskip("rouge_score")
    cfg = ScopeGenCheckConfig(
        tasks=("reports",),
        n_prompts_reports=110,
        n_cal=60,
        n_test=40,
        repetitions=2,
        reports_lm_steps=20,
        clm_n_lambdas=4,
        calibration_sizes=(60,),
        sensitivity_repetitions=1,
    )
    seen = []
    result = run(cfg, seed=0, progress=lambda stage, done, total: seen.append(stage))
    assert any("reports" in s for s in seen)
    assert "coverage_reports_a30" in result.metrics["scope_gen"]
    assert "set_size_reports" in result.series
    assert any(n.startswith("reports: 110 prompts, 20 samples") for n in result.notes)
    for arm in ("scope_gen", "clm", "clm_k10"):
        assert math.isfinite(result.metrics[arm]["unique_calls_reports_a30"])
    assert result.metrics["clm_k10"]["raw_calls_reports_a30"] == 10.0
    assert result.metrics["clm"]["raw_calls_reports_a30"] == 20.0


def test_random_scores_are_valid_and_blind():
    q, s = _random_scores((50, 7), np.random.default_rng(0))
    assert q.shape == (50, 7) and s.shape == (50, 7, 7)
    assert np.allclose(s, s.transpose(0, 2, 1)) and np.allclose(s[:, range(7), range(7)], 1.0)
    assert s.min() >= 0.0 and s.max() <= 1.0 and q.min() >= 0.0 and q.max() < 1.0
    q2, s2 = _random_scores((50, 7), np.random.default_rng(0))
    assert np.array_equal(q, q2) and np.array_equal(s, s2)


def test_every_gate_names_a_falsifier_and_explains_itself():
    for c in CLAIM.criteria:
        assert c.explain, c.name
        if c.gating and not c.control and not c.precondition:
            assert c.falsifier, c.name
