"""Claim plumbing of Activation Beacon at the smoke budget (numbers, not verdicts)."""

from __future__ import annotations

import pytest

from iclr25._core.claims import judge
from iclr25.methods.activation_beacon import beacon_kv_peak, beacon_kv_resident, beacon_score_entries
from iclr25.methods.activation_beacon.claim import CLAIM, make_recall_data


def test_smoke_counts_equal_the_formulas(smoke_runs):
    run, _ = smoke_runs("activation_beacon")
    cfg = CLAIM.budgets["smoke"].config
    c = run.metrics["counts"]
    args = (cfg.count_len, cfg.count_window, cfg.count_ratio, cfg.sink_size)
    assert c["kv_resident"] == beacon_kv_resident(*args)
    assert c["kv_peak"] == beacon_kv_peak(*args)
    assert c["scores_beacon"] == beacon_score_entries(*args)
    assert c["formula_match"] == 1.0
    assert run.metrics["raw_cache"]["kv_ratio_peak"] == 1.0  # the control keeps every raw K/V


def test_smoke_exactness_and_budget_match(smoke_runs):
    run, _ = smoke_runs("activation_beacon")
    assert run.metrics["exact"]["window_maxdiff"] <= 1e-5
    assert run.metrics["exact"]["alpha0_maxdiff"] <= 1e-4
    m = run.metrics
    assert m["streaming"]["kv_peak"] == m["beacon"]["kv_peak"]  # equal KV budget
    assert m["meanpool"]["kv_peak"] == m["beacon"]["kv_peak"]
    assert m["full"]["kv_peak"] > m["beacon"]["kv_peak"]


def test_smoke_judged_report_only(smoke_runs):
    run, _ = smoke_runs("activation_beacon")
    j = judge(CLAIM, "smoke", [run])
    assert j.reason == "smoke: report-only"
    assert {"recall_vs_kv", "arms_at_budget", "training"} <= set(run.series)


def test_only_recall_gates_and_each_names_a_control():
    """Exactness and counts are report-only; each recall gate is falsified by a control in the run."""
    by_name = {c.name: c for c in CLAIM.criteria}
    gates = {c.name for c in CLAIM.criteria if c.gating and not c.control}
    assert gates == {"g4_recall_vs_full", "g4_recall_vs_streaming"}
    for name in gates:
        control = by_name[by_name[name].falsifier]
        assert control.control and control.gating and control.threshold == by_name[name].threshold
    assert all(c.explain for c in CLAIM.criteria)
    assert CLAIM.budgets["full"].seeds == 3


def test_recall_data_layout():
    ids, labels = make_recall_data(3, 64, 16, seed=0)
    assert ids.shape == labels.shape == (3, 64)
    assert int((labels != -100).sum()) == 12  # 4 answers per sequence, in the last chunk
    assert bool((labels[:, :56] == -100).all())
    for i in range(3):
        facts = ids[i, :32][ids[i, :32] >= 64]
        assert sorted(facts.tolist()) == sorted(labels[i][labels[i] != -100].tolist())
    again, _ = make_recall_data(3, 64, 16, seed=0)
    assert (again == ids).all()


@pytest.mark.full
def test_full_budget_runs():
    run = CLAIM.run("full", seed=0)
    assert judge(CLAIM, "full", [run]).verdict.value in ("SUPPORTED", "NOT_SUPPORTED", "INCONCLUSIVE")
