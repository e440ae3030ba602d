"""The claim at smoke budget: every arm and figure present, exactness metrics, and plumbing."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from hessian_distill_helpers import cluster

from iclr25._core.claims import Verdict, judge
from iclr25.methods.hessian_distill import (
    ClaimConfig,
    StudentCalculator,
    StudentConfig,
    direct_student,
    energy_drift,
    make_student,
    run_nve,
)
from iclr25.methods.hessian_distill.claim import CLAIM, _cell_cost

_CRITERIA = {c.name: c for c in CLAIM.criteria}


pytestmark = pytest.mark.usefixtures("one_thread")


def test_smoke_covers_arms_figures_and_exactness(smoke_runs) -> None:
    run, _ = smoke_runs("hessian_distill")
    m = run.metrics
    cfg = CLAIM.budgets["smoke"].config
    assert set(m) == set(CLAIM.arms)
    for arm in ("distilled", "undistilled", "undistilled_matched", "shuffled", "direct", "teacher"):
        assert math.isfinite(m[arm]["force_mae"]) and m[arm]["force_mae"] > 0
    # the teacher is an imperfect network; its error on the validation set drives the adaptive rule
    assert m["teacher"]["val_force_mae"] > 0 and m["teacher"]["flops"] > 0
    assert m["exactness"]["vjp_fd_rel_err"] < 1e-5  # VJP rows are exact in float64
    assert m["rows_vs_columns"]["vjp_fd_rel_err"] > 1e-3  # direct forces: rows != columns
    # the compute-matched run gets the distilled run's FLOPs: more epochs than the equal-epoch one
    assert m["distilled"]["step_flops"] > 2 * m["undistilled"]["step_flops"]
    assert cfg.distill.epochs < m["undistilled_matched"]["epochs"] <= cfg.undistilled_epochs
    assert m["undistilled_matched"]["epochs"] == math.ceil(m["distilled"]["flops_epochs"] - 1e-9)
    assert m["undistilled"]["best_epoch"] <= cfg.distill.epochs
    assert all(0 <= m[a]["val_plateau_rel"] < math.inf for a in ("distilled", "undistilled"))
    assert m["undistilled_matched"]["best_epoch"] <= m["undistilled_matched"]["epochs"]
    assert m["teacher"]["md_step_s"] > 0 and m["distilled"]["md_step_s"] > 0
    assert {"validation", "compute", "budget_ratio", "force_parity", "force_error", "md_energy"} <= set(
        run.series
    )
    assert len(run.series["validation"].x) == cfg.undistilled_epochs
    md = run.series["md_energy"]
    assert md.x[0] == 0.0 and len(md.lines) == 2
    judgement = judge(CLAIM, "smoke", [run])
    assert judgement.verdict is Verdict.INCONCLUSIVE and "report-only" in judgement.reason


def test_smoke_and_full_budgets_are_consistent() -> None:
    smoke, full = CLAIM.budgets["smoke"], CLAIM.budgets["full"]
    assert smoke.report_only and not full.report_only and full.seeds == 3
    assert full.seeds * full.seconds <= 900
    assert smoke.config.distill.lambda_h == full.config.distill.lambda_h == 400.0
    assert full.config.teacher == "nn" and full.config.adaptive and full.config.data.label_rows == 0
    assert full.config.distill.epochs * 3 <= full.config.undistilled_epochs
    long = CLAIM.budgets["long"]  # convergence: >= 150 equal epochs, the same teacher and data
    assert long.seeds >= 3 and long.total_seconds <= 3600 and long.config.distill.epochs >= 150
    assert long.config.distill.epochs * 3 <= long.config.undistilled_epochs
    assert (long.config.foundation, long.config.data) == (full.config.foundation, full.config.data)
    gates = {c.name for c in CLAIM.criteria if c.gating and not c.control and not c.precondition}
    assert gates == {"force_mae_ratio", "drift_vs_direct"}
    pre = {c.name for c in CLAIM.criteria if c.precondition and c.convergence}
    assert pre == {"distilled_converged", "undistilled_converged"}
    assert {c.name for c in CLAIM.criteria if c.control and c.gating} == {"ctrl_shuffled_rows"}
    assert all(c.explain for c in CLAIM.criteria)


def _drift(model: torch.nn.Module) -> float:
    """NVE drift (meV/atom) of a tiny model on a Cu-Au cluster, as the claim measures it."""
    model.set_normalisation(0.3, {29: -0.1, 79: -0.2})
    atoms = cluster(0)
    md = run_nve(atoms, StudentCalculator(model), steps=100, rng=np.random.default_rng([0, 5]))
    return energy_drift(md["total"], len(atoms))


def test_drift_gate_fails_for_a_student_without_conservative_forces() -> None:
    """Falsifier of ``drift_vs_direct``: with a direct-force student in the distilled slot, the
    gate's rule fails; with a conservative student there, it holds."""
    gate = _CRITERIA["drift_vs_direct"]
    arch = StudentConfig(hidden=8, layers=2, n_rbf=6)
    direct = _drift(direct_student(arch, seed=0))
    broken = {"direct": {"drift_mev_per_atom": direct}}
    broken["distilled"] = {"drift_mev_per_atom": _drift(direct_student(arch, seed=1))}
    assert not gate.holds(gate.statistic(broken))
    sound = {"direct": broken["direct"], "distilled": {"drift_mev_per_atom": _drift(make_student(arch))}}
    assert gate.holds(gate.statistic(sound))


def test_flops_ratio_follows_from_the_architectures() -> None:
    """The report-only ``flops_ratio``: fixed by the two architectures (weights do not matter)."""
    cfg = dataclasses.replace(ClaimConfig(), speed_cell_repeat=2, speed_calls=1)
    runs = []
    for seed in range(2):
        m: dict[str, dict[str, float]] = {"teacher": {}, "distilled": {}}
        teacher = make_student(cfg.foundation.architecture, elements=(28, 29, 46, 47, 79), seed=seed)
        _cell_cost(cfg, teacher, make_student(cfg.student, seed=seed), m)
        runs.append(m)
    flops = _CRITERIA["flops_ratio"]
    assert not flops.gating
    assert flops.holds(flops.statistic(runs[0]))
    for arm in ("teacher", "distilled"):
        assert runs[0][arm]["flops"] == runs[1][arm]["flops"] > 0
