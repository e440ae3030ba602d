"""The claim at smoke budget: every arm and figure present, exactness metrics, and plumbing."""

from __future__ import annotations

import math

from iclr25._core.claims import Verdict, judge
from iclr25.methods.hessian_distill.claim import CLAIM


def test_smoke_covers_arms_figures_and_exactness(smoke_runs) -> None:
    run, _ = smoke_runs("hessian_distill")
    m = run.metrics
    assert set(m) == set(CLAIM.arms)
    for arm in ("distilled", "undistilled", "shuffled", "direct"):
        assert math.isfinite(m[arm]["force_mae"]) and m[arm]["force_mae"] > 0
    assert m["exactness"]["vjp_fd_rel_err"] < 1e-5  # VJP rows are exact in float64
    assert m["rows_vs_columns"]["vjp_fd_rel_err"] > 1e-3  # direct forces: rows != columns
    assert m["teacher_arch"]["flops"] > m["student_arch"]["flops"] > 0
    assert {"validation", "force_parity", "force_error", "md_energy"} <= set(run.series)
    md = run.series["md_energy"]
    assert md.x[0] == 0.0 and len(md.lines) == 2
    judgement = judge(CLAIM, "smoke", [run])
    assert judgement.verdict is Verdict.INCONCLUSIVE and "report-only" in judgement.reason


def test_smoke_and_full_budgets_are_consistent() -> None:
    smoke, full = CLAIM.budgets["smoke"], CLAIM.budgets["full"]
    assert smoke.report_only and not full.report_only and full.seeds == 2
    assert smoke.config.distill.lambda_h == full.config.distill.lambda_h == 400.0
    gating_controls = [c for c in CLAIM.criteria if c.control and c.gating]
    assert {c.name for c in gating_controls} == {
        "ctrl_shuffled_rows",
        "ctrl_direct_drift",
        "ctrl_rows_vs_columns",
    }
