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
from iclr25.methods.hessian_distill.claim import CLAIM, _speed

_CRITERIA = {c.name: c for c in CLAIM.criteria}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models: one torch thread (extra threads only spin on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    assert smoke.report_only and not full.report_only and full.seeds == 3
    assert full.seeds * full.seconds <= 900
    assert smoke.config.distill.lambda_h == full.config.distill.lambda_h == 400.0
    gates = {c.name for c in CLAIM.criteria if c.gating and not c.control}
    assert gates == {"force_mae_ratio", "drift_vs_direct"}
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
    """The report-only ``flops_ratio``: fixed by the two architectures, the same on every call."""
    cfg = dataclasses.replace(ClaimConfig(), speed_cell_repeat=2, speed_calls=1)
    runs = []
    for _ in range(2):
        m: dict[str, dict[str, float]] = {"teacher_arch": {}, "student_arch": {}}
        _speed(cfg, 0, m)
        runs.append(m)
    flops = _CRITERIA["flops_ratio"]
    assert not flops.gating
    assert flops.holds(flops.statistic(runs[0]))
    assert [r["teacher_arch"]["flops"] for r in runs] == [runs[0]["teacher_arch"]["flops"]] * 2
    assert runs[0]["student_arch"]["flops"] == runs[1]["student_arch"]["flops"]
