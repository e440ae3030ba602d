"""Falsifiers of claim gates that no control arm of the claim's own run measures.

Each test feeds a broken variant of the mechanism the paper credits through the claim's own
criterion (``Criterion.statistic`` and ``Criterion.holds``) and asserts that the gate fails on it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from iclr25._core.claims import RunResult
from iclr25._core.seeding import claim_scope
from iclr25.methods.vbll_bo import ContinualVBLL, FitConfig, benchmark, run_bo
from iclr25.methods.vbll_bo import baselines as baselines_module
from iclr25.methods.vbll_bo.claim import CLAIM


class _RawTargetStatistic(ContinualVBLL):
    """The event trigger with a realistic bug: its log-likelihood reads the raw targets, not the
    standardised ones the model predicts, so on a problem whose values are far from unit scale
    every new point looks surprising."""

    @torch.no_grad()
    def log_likelihood(self, X: Tensor, Y: Tensor) -> float:
        Xt, _ = self.model.transform_data(X, Y)
        return -float(self.model.head_nll(Xt, Y.to(Xt)))


def test_v2_cost_fails_when_the_event_statistic_skips_standardisation(monkeypatch) -> None:
    """Branin's values run into the hundreds: the broken trigger retrains after every point, so
    continual training costs as many gradient steps as retraining every step and ``v2_cost`` fails."""
    gate = next(c for c in CLAIM.criteria if c.name == "v2_cost")
    full = CLAIM.budgets["full"].config
    assert full.continual.retrain == "event"  # the claim's own trigger, with its threshold and max_gap
    kw = {"fit_config": FitConfig(max_epochs=15, patience=3, lr=1e-2), "width": 8, "depth": 1,
          "num_restarts": 1, "raw_samples": 16}  # fmt: skip
    problem, n_init, n_iter = benchmark("branin"), 4, 3
    with claim_scope(0):  # one thread, as the claim runs
        every = run_bo(problem, "vbll", "ts", n_init, n_iter, 0, **kw)
        monkeypatch.setattr(baselines_module, "ContinualVBLL", _RawTargetStatistic)
        broken = run_bo(problem, "vbll", "ts", n_init, n_iter, 0, continual=full.continual, **kw)
    assert broken.decisions == ["retrain"] * n_iter
    metrics = {
        "vbll_cl": {"nn10_grad_steps_after_init": float(broken.n_grad_steps_after_init)},
        "vbll_every": {"nn10_grad_steps_after_init": float(every.n_grad_steps_after_init)},
    }
    stat = gate.statistic(RunResult(metrics=metrics).metrics)
    assert not gate.holds(stat), stat
