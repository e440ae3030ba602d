"""Claim check of VBLL Bayesian optimisation: the head's optimum is the exact BLR posterior, continual
training is much cheaper than retraining at similar regret, and VBLL matches or beats a GP.

V1 (exactness, every budget, reported only: the unit tests cover it): with features frozen,
optimising the head recovers the closed form; recursive updates equal the batch posterior; the
predictive equals a GPyTorch linear-kernel GP. Broken variants: lambda = 1 instead of 1/T, the trace
term dropped, the noise std read as a variance.
V2 (continual cost, full): NNDraw-10D, VBLL-CL (event-triggered) vs retraining every step.
V3 (quality): (a) test NLL on NNDraw-20D vs a GP, with a frozen-random-backbone control; (b) BO on a
non-stationary ReLU NNDraw-10D, VBLL-TS vs GP-TS (pathwise samples), the same acquisition for both;
(c) BO on Branin, VBLL-LogEI vs GP-LogEI. Uniform random proposals are the BO control. V3's VBLL
arms follow the paper's schedule (re-initialised and fitted from scratch to early stopping after
every evaluation); preconditions compare their last fit with one three times as long. Report only:
VBLL-CL with Thompson sampling, an ARD Matern GP with LogEI, a deep ensemble and (long budget) an
I-BNN GP with LogEI.
Side by side (report only, every budget): the cost of absorbing one new observation, ours by the
exact recursive update (``condition_on_observations``) against the wheel's ``botorch_community``
``VBLLModel``, which has no such update and must be refit; optimiser steps, seconds, test NLL after.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    diff,
    fails,
    no_progress,
    ratio,
    value,
)
from iclr25._core.convergence import converged
from iclr25._core.registry import require
from iclr25.methods.vbll_bo import (
    BOResult,
    ClaimConfig,
    ContinualConfig,
    FitConfig,
    NNDraw,
    VBLLHead,
    VBLLModel,
    benchmark,
    blr_posterior,
    default_backbone,
    exact_gp_linear,
    fit_gp,
    gaussian_nll,
    recursive_update,
    run_bo,
)

__all__ = ["CLAIM", "run"]

_F64 = torch.float64
_UPDATE_REPS = 5  # timed repetitions of one update; the median is reported
_UPDATE_TEST = 200  # held-out points for the NLL after the update
_REGRET_FLOOR = 1e-3  # V3 regrets are floored here before log10 (as the spec's V3c floor)
_NS_DRAW_OFFSET = 1000  # V3b draws ReLU NNDraw problems 1000 + BO seed (the pilot used 100-104)
#: Largest loss gap (nats per point) between a V3 refit and one three times as long: V3a's margin.
_REFIT_EPS = 0.1


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def _v1(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]]) -> None:
    """Exactness with frozen features: head optimum, recursive = batch, GP equality; broken variants."""
    g = torch.Generator().manual_seed(seed)
    T, N, sigma = cfg.v1_points, cfg.v1_features, cfg.v1_noise_std
    X = torch.rand(T + 20, 3, generator=g, dtype=_F64)
    with torch.no_grad():
        phi_all = default_backbone(3, width=N, depth=1, activation=nn.Tanh, generator=g)(X)
    phi, phi_test = phi_all[:T], phi_all[T:]
    y = (phi @ torch.randn(N, 1, generator=g, dtype=_F64)) + sigma * torch.randn(
        T, 1, generator=g, dtype=_F64
    )
    noise = torch.tensor([sigma], dtype=_F64)
    s0 = 1.0 / N  # prior_scale 1
    mean_star, cov_star = blr_posterior(phi, y, s0, noise)

    def head_optimum(reg: float, ablation: str | None) -> float:
        head = VBLLHead(N, generator=torch.Generator().manual_seed(seed + 1))
        with torch.no_grad():
            head.log_noise.fill_(math.log(sigma))
        head.log_noise.requires_grad_(False)  # sigma fixed
        params = [head.mean, head.cov_logdiag, head.cov_offdiag]
        opt = torch.optim.LBFGS(
            params, lr=1.0, max_iter=cfg.v1_lbfgs_iters, tolerance_grad=1e-12, tolerance_change=1e-16,
            history_size=50, line_search_fn="strong_wolfe",
        )  # fmt: skip

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = head.loss(phi, y, reg, ablation=ablation)  # type: ignore[arg-type]
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            return max(_rel(head.mean, mean_star), _rel(head.covariance(), cov_star))

    m["exact"]["head_opt_rel_err"] = head_optimum(1.0 / T, None)
    m["kl_weight_1"]["head_opt_rel_err"] = head_optimum(1.0, None)
    m["no_trace"]["head_opt_rel_err"] = head_optimum(1.0 / T, "no_trace")
    m["noise_as_variance"]["head_opt_rel_err"] = head_optimum(1.0 / T, "noise_as_variance")

    # T recursive updates from the prior equal the batch posterior, in covariance and precision form.
    prior_mean, prior_cov = torch.zeros(1, N, dtype=_F64), s0 * torch.eye(N, dtype=_F64)[None]
    rm, rc = recursive_update(prior_mean, prior_cov, phi, y, noise.pow(2))
    err = max(float((rm - mean_star).abs().max()), float((rc - cov_star).abs().max()))
    head = VBLLHead(N, parameterization="dense_precision")
    with torch.no_grad():
        head.log_noise.fill_(math.log(sigma))
    head.set_gaussian(prior_mean, prior_cov)
    for t in range(T):
        head.condition(phi[t : t + 1], y[t : t + 1])
    with torch.no_grad():
        err = max(
            err, float((head.mean - mean_star).abs().max()), float((head.covariance() - cov_star).abs().max())
        )
    m["exact"]["recursive_err"] = err

    # Predictive mean and variance equal the ExactGP with kernel s0 phi^T phi' and noise sigma^2.
    head.set_exact_posterior(phi, y)
    with torch.no_grad():
        mu, var = head.predictive(phi_test, joint=False)
    gp_mu, gp_var = exact_gp_linear(phi, y[:, 0], phi_test, s0, sigma**2)
    m["exact"]["gp_equiv_err"] = max(
        float((mu[:, 0] - gp_mu).abs().max()), float((var[:, 0] - gp_var).abs().max())
    )


def _fit_config(cfg: ClaimConfig, lr: float) -> FitConfig:
    return FitConfig(max_epochs=cfg.max_epochs, patience=cfg.patience, lr=lr)


#: V3's VBLL schedule (the paper's): a fresh fit from scratch after every evaluation.
_V3_SCHEDULE = ContinualConfig(retrain="every", warm_start=False)


def _v3_fit_config(cfg: ClaimConfig) -> FitConfig:
    return FitConfig(max_epochs=cfg.refit_epochs, patience=cfg.refit_patience, lr=cfg.bo_lr)


def _log10_regret(regret: float) -> float:
    """log10 of the simple regret, floored at 1e-3 (below that a problem counts as solved)."""
    return math.log10(max(regret, _REGRET_FLOOR))


def _record(m: dict[str, dict[str, float]], arm: str, key: str, r: BOResult) -> None:
    m[arm][f"{key}_regret"] = r.final_regret
    m[arm][f"{key}_duplicates"] = float(r.n_duplicates)  # report only (repeated proposals)
    m[arm][f"{key}_surrogate_s"] = r.surrogate_seconds
    if r.n_grad_steps:
        m[arm][f"{key}_grad_steps"] = float(r.n_grad_steps)
        m[arm][f"{key}_grad_steps_after_init"] = float(r.n_grad_steps_after_init)
        m[arm][f"{key}_retrains"] = float(r.n_retrains)


def _curve(r: BOResult, n_init: int) -> list[float]:
    return [math.log10(max(float(v), 1e-6)) for v in r.regret[n_init - 1 :]]


def _v2(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    series: dict[str, Series],
    nn10: NNDraw,
    progress: ProgressFn = no_progress,
) -> None:
    """V2 on ``nn10`` (NNDraw-10D): continual VBLL-TS against VBLL-TS retrained every step."""
    vb = {"fit_config": _fit_config(cfg, cfg.bo_lr), "width": cfg.width, "depth": cfg.depth,
          "num_restarts": cfg.ts_restarts, "raw_samples": cfg.ts_raw_samples}  # fmt: skip

    def report(arm: str) -> ProgressFn:
        return lambda _, done, total: progress(f"V2 NNDraw-{cfg.bo_dim}D {arm}", done, total)

    n_init, n_iter = cfg.bo_init, cfg.bo_iters
    runs = {
        "vbll_cl": run_bo(nn10, "vbll", "ts", n_init, n_iter, seed, continual=cfg.continual, **vb,
                          progress=report("vbll_cl")),
        "vbll_every": run_bo(nn10, "vbll", "ts", n_init, n_iter, seed, **vb, progress=report("vbll_every")),
        "random": run_bo(nn10, "random", "random", n_init, n_iter, seed),
    }  # fmt: skip
    for arm, r in runs.items():
        _record(m, arm, "nn10", r)
    series["regret_nn10"] = Series(
        title=f"V2: simple regret on NNDraw-{cfg.bo_dim}D (seed {seed})",
        xlabel="BO iteration", ylabel="simple regret (log10)", x=[float(i) for i in range(n_iter + 1)],
        lines={arm: _curve(r, n_init) for arm, r in runs.items()},
    )  # fmt: skip


def _v3_bo(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    series: dict[str, Series],
    notes: list[str],
    progress: ProgressFn = no_progress,
) -> dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]:
    """V3b (ReLU NNDraw, Thompson sampling for both surrogates) and V3c (Branin, LogEI for both).

    Each runs ``cfg.bo_repeats`` BO repeats (BO seeds ``seed * bo_repeats + r``; V3b draws a new
    problem per repeat); an arm's metric is the median over the repeats of its floored log10 final
    regret. The report-only arms run on repeat 0 only and are compared with repeat 0 (``_r0``);
    one whose GP fit fails (``ModelFittingError``) reads NaN and adds a line to ``notes``.

    Returns:
        Per problem (``"ns"``, ``"branin"``), the inputs, values, bounds and Sobol-point count of
        the gated VBLL arm in repeat 0 (for the refit check and the V3c diagnosis).
    """
    evaluated: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]] = {}
    fitting_error = require("botorch.exceptions.errors", "vbll_bo").ModelFittingError
    fit = _fit_config(cfg, cfg.bo_lr)
    # The paper's schedule for the gated VBLL arms: re-initialise and fit from scratch to early
    # stopping after every evaluation (V2 compares schedules and keeps its own).
    scratch = {"fit_config": _v3_fit_config(cfg), "continual": _V3_SCHEDULE}
    net = {"width": cfg.width, "depth": cfg.depth}
    # one acquisition-optimiser setting for every V3 arm (Thompson paths and LogEI alike)
    ts = ei = {"num_restarts": cfg.gp_restarts, "raw_samples": cfg.gp_raw_samples}
    ens_steps = (cfg.ensemble_steps, cfg.ensemble_refit_steps)
    # (surrogate, acquisition, keyword arguments, gated)
    arms_ns = {
        "vbll_ts": ("vbll", "ts", {**scratch, **net, **ts}, True),
        "gp_ts": ("gp", "ts", ts, True),
        "random": ("random", "random", {}, True),
        "vbll_cl": ("vbll", "ts", {"fit_config": fit, "continual": cfg.continual, **net, **ts}, False),
        "gp_matern": ("gp_matern", "logei", ei, False),
        "gp_ibnn": ("gp_ibnn", "logei", ei, False),
        "ensemble": ("ensemble", "ts", {**ts, "ensemble_steps": ens_steps}, False),
    }  # fmt: skip
    arms_branin = {
        "vbll_ei": ("vbll", "logei", {**scratch, **net, **ei}, True),
        "gp": ("gp", "logei", ei, True),
        "random": ("random", "random", {}, True),
        "vbll_cl": ("vbll", "ts", {"fit_config": fit, "continual": cfg.continual, **net, **ts}, False),
        "gp_ibnn": ("gp_ibnn", "logei", ei, False),
    }
    if not cfg.run_baselines:
        arms_ns = {k: v for k, v in arms_ns.items() if k not in ("gp_matern", "ensemble")}
    if not cfg.run_ibnn:
        arms_ns = {k: v for k, v in arms_ns.items() if k != "gp_ibnn"}
        arms_branin = {k: v for k, v in arms_branin.items() if k != "gp_ibnn"}
        # not measured in this budget: its report-only rows read NaN (counted as unmeasured)
        m["gp_ibnn"]["ns_log10_regret_r0"] = m["gp_ibnn"]["branin_log10_regret_r0"] = math.nan
    problems = (
        ("ns", f"ReLU NNDraw-{cfg.ns_dim}D", arms_ns, cfg.ns_init, cfg.ns_iters),
        ("branin", "Branin", arms_branin, cfg.branin_init, cfg.branin_iters),
    )
    for key, title, arms, n_init, n_iter in problems:
        logs: dict[str, list[float]] = {arm: [] for arm in arms}
        for rep in range(cfg.bo_repeats):
            bo_seed = seed * cfg.bo_repeats + rep
            problem = (
                NNDraw(cfg.ns_dim, seed=_NS_DRAW_OFFSET + bo_seed, activation="relu",
                       weight_var=cfg.ns_weight_var)
                if key == "ns"
                else benchmark("branin")
            )  # fmt: skip
            curves: dict[str, list[float]] = {}
            for arm, (surrogate, acquisition, kw, gated) in arms.items():
                if not gated and rep > 0:
                    continue

                def report(
                    _: str, done: int, total: int, stage: str = f"V3 {title} {arm} (repeat {rep + 1})"
                ) -> None:
                    progress(stage, done, total)

                try:
                    r = run_bo(
                        problem, surrogate, acquisition, n_init, n_iter, bo_seed, progress=report, **kw
                    )
                except fitting_error as err:
                    if gated:
                        raise
                    # a report-only GP whose hyperparameter fit fails reads NaN, and the note says so
                    m[arm][f"{key}_log10_regret_r0"] = math.nan
                    notes.append(f"{title} {arm} (BO seed {bo_seed}): GP fit failed ({type(err).__name__})")
                    continue
                if arm in ("vbll_ts", "vbll_ei") and rep == 0:
                    evaluated[key] = (r.X, r.Y, problem.bounds, n_init)
                logs[arm].append(_log10_regret(r.final_regret))
                if rep == 0:
                    _record(m, arm, key, r)
                    m[arm][f"{key}_log10_regret_r0"] = logs[arm][0]
                    curves[arm] = _curve(r, n_init)
            if rep == 0:
                series[f"regret_{key}"] = Series(
                    title=f"V3: simple regret on {title} (BO seed {bo_seed})",
                    xlabel="BO iteration", ylabel="simple regret (log10)",
                    x=[float(i) for i in range(n_iter + 1)], lines=curves,
                )  # fmt: skip
        for arm, values in logs.items():
            if values and arms[arm][3]:
                m[arm][f"{key}_log10_regret"] = statistics.median(values)
    return evaluated


def _refit_sizes(n_init: int, n_total: int, k: int) -> list[int]:
    """``k`` data sizes evenly spaced from ``n_init`` (the initial fit) to ``n_total`` (the last refit).

    Example:
        >>> _refit_sizes(10, 50, 3)
        [10, 30, 50]
    """
    if k == 1:
        return [n_total]
    return sorted({round(n_init + j * (n_total - n_init) / (k - 1)) for j in range(k)})


def _refit_convergence(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    evaluated: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]],
) -> dict[str, VBLLModel]:
    """Do V3's fits converge? A sample of the refits of each gated VBLL arm (BO repeat 0), replayed.

    The sample is ``refit_check_sample`` of the arm's fits, evenly spaced from the initial fit (on
    the Sobol points) to the last refit (on every evaluated point). Each is replayed on the same
    data from scratch with the V3 settings and, from the same initialisation, by a fit
    ``refit_check_factor`` times as long (epochs and patience). The gap of their final training
    losses (the early-stopping monitor, nats per point in standardised units) is read per refit;
    the precondition takes the largest gap of the sample. Runs after everything else, on
    generators of its own.

    Returns:
        Per problem, the replayed V3 fit on every evaluated point (for the V3c diagnosis).
    """
    tf = require("botorch.models.transforms", "vbll_bo")
    fit = _v3_fit_config(cfg)
    longer = fit.replace(
        max_epochs=cfg.refit_check_factor * fit.max_epochs, patience=cfg.refit_check_factor * fit.patience
    )
    last: dict[str, VBLLModel] = {}
    for key, arm in (("ns", "vbll_ts"), ("branin", "vbll_ei")):
        X_all, Y_all, bounds, n_init = evaluated[key]
        gaps = []
        for n in _refit_sizes(n_init, X_all.shape[0], cfg.refit_check_sample):
            X, Y = X_all[:n], Y_all[:n]
            losses, models = [], []
            for config in (fit, longer):
                model = VBLLModel(
                    X, Y, width=cfg.width, depth=cfg.depth,
                    input_transform=tf.Normalize(X.shape[-1], bounds=bounds.to(_F64)),
                    outcome_transform=tf.Standardize(1),
                    generator=torch.Generator().manual_seed(seed + 7 + n),
                )  # fmt: skip
                losses.append(model.fit(config).best_loss)
                models.append(model)
            gaps.append(losses[0] - losses[1])
            m[arm][f"{key}_refit_loss_gap_n{n}"] = gaps[-1]
        # the last sampled refit is the one on every evaluated point
        m[arm][f"{key}_refit_loss"], m[arm][f"{key}_refit_3x_loss"] = losses
        m[arm][f"{key}_refit_loss_gap"] = max(gaps)
        # report only: how far the longer fit moves the prediction (posterior-mean RMSE over the box,
        # in standardised units), to tell a loss that still falls from a surrogate that still changes
        g = torch.Generator().manual_seed(seed + 13)
        lo, hi = bounds[0].to(_F64), bounds[1].to(_F64)
        Xte = lo + (hi - lo) * torch.rand(cfg.diag_test, X_all.shape[-1], generator=g, dtype=_F64)
        with torch.no_grad():
            means = [mod.posterior(Xte).mean[:, 0] for mod in models]
        change = (means[0] - means[1]).pow(2).mean().sqrt() / Y_all.std()
        m[arm][f"{key}_refit_3x_pred_change"] = float(change)
        last[key] = models[0]
    return last


def _participation_ratio(phi: torch.Tensor) -> float:
    """Effective number of feature directions: (sum of eigenvalues)^2 / sum of squared eigenvalues
    of the centred feature covariance (1 for a rank-one map, N for N equal directions)."""
    eig = torch.linalg.eigvalsh(torch.cov(phi.T)).clamp_min(0.0)
    return float(eig.sum() ** 2 / eig.pow(2).sum())


def _v3c_diagnosis(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    evaluated: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]],
    vbll_fit: VBLLModel,
) -> None:
    """Report only: why VBLL-LogEI lags the GP on Branin. Both surrogates on the same points.

    On the points VBLL-LogEI evaluated (BO repeat 0), the V3 VBLL fit (replayed by the refit check)
    and BoTorch's default GP fitted on those points are compared on ``diag_test`` uniform points of
    the box: test NLL and RMSE in the training data's standardised units, and RMSE on the best
    tenth of the test points (where LogEI has to be right to cut regret). Also recorded: the GP's
    two lengthscales (unit-cube units), VBLL's noise std (standardised units), the participation
    ratio of VBLL's features on the test points (how many directions its learned kernel uses)
    and the distance in the unit cube from the arm's best point to Branin's nearest optimum.
    """
    X, Y, bounds, _ = evaluated["branin"]
    problem = benchmark("branin")
    g = torch.Generator().manual_seed(seed + 11)
    lo, hi = bounds[0].to(_F64), bounds[1].to(_F64)
    Xte = lo + (hi - lo) * torch.rand(cfg.diag_test, X.shape[-1], generator=g, dtype=_F64)
    Yte = problem(Xte)
    mu0, sd0 = Y.mean(), Y.std()
    top = Yte >= torch.quantile(Yte, 0.9)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gp = fit_gp(X, Y, bounds)
    for arm, model in (("vbll_ei", vbll_fit), ("gp", gp)):
        with torch.no_grad():
            post = model.posterior(Xte, observation_noise=True)  # type: ignore[attr-defined]
            mean, var = post.mean[:, 0], post.variance[:, 0]
        z_mean, z_var, z_y = (mean - mu0) / sd0, var / sd0**2, (Yte - mu0) / sd0
        m[arm]["branin_diag_test_nll"] = gaussian_nll(z_mean, z_var, z_y)
        m[arm]["branin_diag_test_rmse"] = float((z_mean - z_y).pow(2).mean().sqrt())
        m[arm]["branin_diag_top_rmse"] = float((z_mean - z_y)[top].pow(2).mean().sqrt())
    lengthscale = gp.covar_module.lengthscale.detach().reshape(-1)  # type: ignore[attr-defined]
    for i, ell in enumerate(lengthscale.tolist()):
        m["gp"][f"branin_lengthscale_{i}"] = ell
    with torch.no_grad():
        m["vbll_ei"]["branin_noise_std"] = float(vbll_fit.head.noise_std().reshape(-1)[0])
        m["vbll_ei"]["branin_feature_dims"] = _participation_ratio(vbll_fit.features(Xte))
    optima = torch.tensor(problem._optimizers, dtype=_F64)  # Branin's three global optima
    best = X[Y[:, 0].argmax()]
    m["vbll_ei"]["branin_best_dist"] = float((((best - optima) / (hi - lo)).norm(dim=-1)).min())


def _v3a(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]]) -> None:
    """Test NLL (standardised units) on NNDraw-20D: VBLL vs GP vs VBLL with a frozen random backbone."""
    tf = __import__("botorch.models.transforms", fromlist=["Normalize", "Standardize"])
    f = NNDraw(cfg.nll_dim, seed=seed + 100)
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(cfg.nll_train + cfg.nll_test, cfg.nll_dim, generator=g, dtype=_F64)
    Y = f(X).unsqueeze(-1)
    Xtr, Ytr, Xte, Yte = X[: cfg.nll_train], Y[: cfg.nll_train], X[cfg.nll_train :], Y[cfg.nll_train :]
    mu0, sd0 = Ytr.mean(), Ytr.std()
    bounds = f.bounds

    def nll(post: object) -> float:
        mean, var = post.mean.detach()[..., 0], post.variance.detach()[..., 0]  # type: ignore[attr-defined]
        return gaussian_nll((mean - mu0) / sd0, var / sd0**2, (Yte[:, 0] - mu0) / sd0)

    for arm, freeze in (("vbll", False), ("vbll_frozen", True)):
        model = VBLLModel(
            Xtr, Ytr, width=cfg.width, depth=cfg.depth,
            input_transform=tf.Normalize(cfg.nll_dim, bounds=bounds),
            outcome_transform=tf.Standardize(1), generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        model.fit(dataclasses.replace(_fit_config(cfg, cfg.lr), freeze_backbone=freeze))
        with torch.no_grad():
            m[arm]["nn20_nll"] = nll(model.posterior(Xte, observation_noise=True))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        gp = fit_gp(Xtr, Ytr, bounds)
    with torch.no_grad():
        m["gp"]["nn20_nll"] = nll(gp.posterior(Xte, observation_noise=True))  # type: ignore[attr-defined]


def _count_steps_and_seconds(fn: Callable[[], Any]) -> tuple[int, float]:
    """Run ``fn`` once; return the optimiser steps taken inside it (any optimiser) and its seconds."""
    steps = [0]

    def hook(*_: Any) -> None:
        steps[0] += 1

    handle = register_optimizer_step_post_hook(hook)
    try:
        start = time.perf_counter()
        fn()
        seconds = time.perf_counter() - start
    finally:
        handle.remove()
    return steps[0], seconds


def _reference_update(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]], f: NNDraw) -> None:
    """Absorbing one new observation: our recursive update vs a refit of the community VBLLModel.

    Both models are fitted with the BO fit settings on the same T = bo_init + bo_iters points of
    ``f``, the V2 problem (standardised targets, inputs in the unit cube, no transforms), then
    absorb the same point. Ours: ``condition_on_observations`` (features and sigma frozen, no
    gradient steps). The reference has no working update, so it is refit through its documented
    ``fit``, warm-started from its fitted state, for exactly ``cfg.patience`` epochs with early
    stopping off. A fit that stops early with that patience runs at least ``patience + 1`` epochs,
    so this favours the reference. Optimiser steps are counted by a hook on every optimiser, the
    same for both.
    """
    vblls = require("botorch_community.models.vblls", "vbll_bo")
    T = cfg.bo_init + cfg.bo_iters
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(T + 1 + _UPDATE_TEST, cfg.bo_dim, generator=g, dtype=_F64)
    Y = f(X).unsqueeze(-1)
    Y = (Y - Y[:T].mean()) / Y[:T].std()  # standardised with the first T points' statistics
    Xtr, Ytr, Xn, Yn, Xte, Yte = X[:T], Y[:T], X[T : T + 1], Y[T : T + 1], X[T + 1 :], Y[T + 1 :]
    X1, Y1 = X[: T + 1], Y[: T + 1]
    fc = _fit_config(cfg, cfg.bo_lr)

    ours = VBLLModel(
        Xtr, Ytr, width=cfg.width, depth=cfg.depth, generator=torch.Generator().manual_seed(seed)
    )
    ours.fit(fc)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # the reference draws its init and minibatch order from the global RNG
        ref = vblls.VBLLModel(in_features=cfg.bo_dim, hidden_features=cfg.width, num_layers=cfg.depth,
                              device="cpu")  # fmt: skip
        settings = {"num_epochs": fc.max_epochs, "patience": fc.patience, "lr": fc.lr,
                    "batch_size": fc.batch_size, "wd": fc.weight_decay, "clip_val": fc.clip_grad}  # fmt: skip
        ref.fit(Xtr, Ytr, optimization_settings=settings)
        fitted = {k: v.detach().clone() for k, v in ref.model.state_dict().items()}
        refit = {**settings, "num_epochs": cfg.patience, "patience": cfg.patience + 1}

        def ref_update() -> None:
            ref.fit(X1, Y1, optimization_settings=refit, initialization_params=fitted)

        ref_runs = [_count_steps_and_seconds(ref_update) for _ in range(_UPDATE_REPS)]
    ours_runs = [
        _count_steps_and_seconds(lambda: ours.condition_on_observations(Xn, Yn)) for _ in range(_UPDATE_REPS)
    ]
    new = ours.condition_on_observations(Xn, Yn)
    for arm, runs in (("cl_update", ours_runs), ("ref_refit", ref_runs)):
        m[arm]["update_opt_steps"] = float(runs[0][0])
        m[arm]["update_s"] = statistics.median(s for _, s in runs)
    with torch.no_grad():
        po = new.posterior(Xte, observation_noise=True)
        pr = ref.posterior(Xte).distribution  # always includes the noise
        m["cl_update"]["update_nll"] = gaussian_nll(po.mean[:, 0], po.variance[:, 0], Yte[:, 0])
        m["ref_refit"]["update_nll"] = gaussian_nll(pr.mean, pr.variance, Yte[:, 0])
        # Exactness: from the closed-form head on T points, conditioning on the new point equals the
        # closed-form head refit on all T + 1 points with the same frozen features and sigma.
        phi = ours.features(Xtr)
        ours.head.set_exact_posterior(phi, Ytr)
        got_mean, got_cov = ours.condition_on_observations(Xn, Yn).gaussian()
        want_mean, want_cov = blr_posterior(ours.features(X1), Y1, ours.head.prior_var, ours.head.noise_std())
    m["cl_update"]["update_closed_form_err"] = max(
        float((got_mean - want_mean).abs().max()), float((got_cov - want_cov).abs().max())
    )


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """Run V1, V3a, the side-by-side update and (if ``config.run_bo``) V2/V3b/V3c for one seed.

    The harness runs it inside :func:`~iclr25._core.seeding.claim_scope` (one thread, seeded global
    RNGs). ``device`` is accepted for the common signature; the models are tiny and run on the CPU.

    Args:
        config: the sizes of the check.
        seed: seeds the problems, the models and the BO runs.
        device: ignored (CPU).
        progress: called with each stage, and with the iterations done from the BO loops.

    Returns:
        The per-arm metrics (arms without metrics left out), the regret curves and a note.
    """
    arms = tuple(ARMS)
    m: dict[str, dict[str, float]] = {a: {} for a in arms}
    series: dict[str, Series] = {}
    progress("V1 exactness", 0, 1)
    _v1(config, seed, m)
    progress("V3a test NLL", 0, 1)
    _v3a(config, seed, m)
    nn10 = NNDraw(config.bo_dim, seed=seed)  # the V2 problem, shared by the side-by-side update
    progress("side-by-side update", 0, 1)
    _reference_update(config, seed, m, nn10)
    notes = []
    if config.run_bo:
        _v2(config, seed, m, series, nn10, progress)
        evaluated = _v3_bo(config, seed, m, series, notes, progress)
        notes.append(
            f"NNDraw-{config.bo_dim}D: VBLL-CL {m['vbll_cl']['nn10_retrains']:.0f} retrains, "
            f"{m['vbll_cl']['nn10_grad_steps_after_init']:.0f} gradient steps after the initial fit; "
            f"every-step retraining {m['vbll_every']['nn10_grad_steps_after_init']:.0f}"
        )
        repeats = ", ".join(
            f"{key} {arm} {m[arm][f'{key}_duplicates']:.0f}"
            for key in ("nn10", "ns", "branin")
            for arm in ARMS
            if f"{key}_duplicates" in m[arm] and arm != "random"
        )
        notes.append(f"proposals repeating an observed point (BO repeat 0): {repeats}")
        progress("V3 refit check", 0, 1)
        last = _refit_convergence(config, seed, m, evaluated)
        progress("V3c diagnosis", 0, 1)
        _v3c_diagnosis(config, seed, m, evaluated, last["branin"])
    return RunResult(metrics={a: v for a, v in m.items() if v}, series=series, notes=notes)


ARMS = {
    "exact": "V1: VBLL head on frozen features (lambda = 1/T), its recursive updates and predictive",
    "kl_weight_1": "V1 control: the head optimised with lambda = 1 instead of 1/T",
    "no_trace": "V1 control: the head optimised without the phi^T S phi / (2 sigma^2) term",
    "noise_as_variance": "V1 control: the head optimised reading the noise std as a variance",
    "vbll": "V3a: VBLL surrogate (64 x 4 ELU backbone, trained)",
    "vbll_frozen": "V3a control: VBLL with its backbone frozen at random initialisation",
    "vbll_cl": "VBLL-TS with continual training (event-triggered retrains, recursive updates between)",
    "vbll_every": "V2: VBLL-TS retrained (warm start, full fit settings) after every observation",
    "vbll_ts": "V3b: VBLL-TS, re-initialised and fitted from scratch after every observation",
    "vbll_ei": "V3c: VBLL-LogEI, re-initialised and fitted from scratch after every observation",
    "gp": "BoTorch SingleTaskGP (default priors) + LogEI via optimize_acqf",
    "gp_ts": "V3b: BoTorch SingleTaskGP + Thompson sampling by pathwise (Matheron) samples",
    "gp_matern": "report only: SingleTaskGP with an ARD Matern-5/2 kernel and Gamma priors + LogEI",
    "gp_ibnn": "report only: SingleTaskGP with BoTorch's infinite-width BNN kernel (I-BNN, depth 3) + LogEI",
    "ensemble": "report only: deep ensemble (5 MLPs 32 x 2, Gaussian heads) + Thompson sampling",
    "random": "control: uniform random proposals",
    "cl_update": "ours absorbing one new point by condition_on_observations (exact, no gradient steps)",
    "ref_refit": "botorch_community VBLLModel absorbing the same point by a warm-started refit",
}


#: ``full``: one BO repeat per claim seed for V3b/V3c (3 BO seeds), to fit the 15-minute budget
#: with the from-scratch V3 fits; ``long``: two repeats (6 BO seeds), longer V3 fits (<= 1,000
#: epochs, the same patience) and the I-BNN baseline.
_FULL = ClaimConfig(bo_repeats=1)
_LONG = ClaimConfig(bo_repeats=2, refit_epochs=1000, run_ibnn=True)
_SMOKE = ClaimConfig(
    v1_features=8, v1_points=20, max_epochs=20, patience=5, width=16, depth=1, bo_dim=3, bo_init=4,
    bo_iters=3, branin_init=4, branin_iters=3, bo_repeats=1, ns_dim=3, ns_init=4, ns_iters=3, refit_epochs=5,
    refit_patience=2, ensemble_steps=20, ensemble_refit_steps=5,
    nll_dim=4, nll_train=30, nll_test=50, ts_restarts=2, ts_raw_samples=32, gp_restarts=1, gp_raw_samples=16,
    continual=ContinualConfig(retrain="periodic", period=2), run_ibnn=True, refit_check_sample=2,
    diag_test=100,
)  # fmt: skip

CLAIM = Claim(
    name="vbll_bo",
    paper=PaperRef(
        title="Bayesian Optimization via Continual Variational Last Layer Training",
        authors="Paul Brunzema, Mikkel Jordahn, John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison",
        arxiv="2412.09477",
        code="",
    ),
    statement=(
        "Variational Bayesian last layers give a BO surrogate whose last layer can be conditioned exactly "
        "(it is a GP with a learned linear kernel on the features), so continual training with recursive "
        "updates and occasional retraining cuts surrogate cost at similar regret; VBLL is competitive with "
        "GPs on standard benchmarks and better on problems with complex input correlations."
    ),
    arms=ARMS,
    criteria=(
        converged(
            "vbll_ts",
            _REFIT_EPS,
            metric="ns_refit_loss_gap",
            name="v3b_refit_converged",
            explain="Precondition: V3b's VBLL fits converge. A sample of VBLL-TS's fits on ReLU NNDraw "
            "(BO repeat 0: the initial fit, one midway and the last; from scratch, the V3 epochs and "
            "patience), replayed, each ends within 0.1 nats per point of the training loss of a fit three "
            "times as long from the same initialisation (the largest gap counts). 0.1 nats per point is "
            "V3a's margin, the smallest NLL difference this check reads as real; it was fixed before any "
            "refit was measured.",
        ),
        converged(
            "vbll_ei",
            _REFIT_EPS,
            metric="branin_refit_loss_gap",
            name="v3c_refit_converged",
            explain="Precondition: V3c's VBLL fits converge. The same replay for VBLL-LogEI on Branin "
            "(BO repeat 0).",
        ),
        diff(
            "vbll_ei.branin_diag_test_nll",
            "gp.branin_diag_test_nll",
            "<=",
            0.1,
            name="v3c_diag_fit_nll",
            gating=False,
            explain="Reported only (V3c diagnosis): on the points VBLL-LogEI evaluated on Branin (BO repeat "
            "0), its last fit's test NLL over the box (standardised units) is within 0.1 nats of BoTorch's "
            "default GP fitted on the same points. Also recorded: test and top-tenth RMSE, the GP's "
            "lengthscales, VBLL's noise std and feature participation ratio, and the best point's distance "
            "to the nearest optimum.",
        ),
        ratio(
            "vbll_ei.branin_diag_top_rmse",
            "gp.branin_diag_top_rmse",
            "<=",
            2.0,
            name="v3c_diag_top_rmse",
            gating=False,
            explain="Reported only (V3c diagnosis): on the best tenth of the test points, where LogEI must "
            "be accurate to cut regret, VBLL's RMSE is at most twice the GP's (same points as above).",
        ),
        value(
            "exact.head_opt_rel_err",
            "<=",
            1e-3,
            name="v1_head_optimum",
            paper="exact (Sec. 4)",
            gating=False,
            explain="Reported only (an exactness check): with the features frozen, training the head "
            "recovers the closed-form Bayesian linear regression posterior.",
        ),
        value(
            "exact.recursive_err",
            "<=",
            1e-8,
            name="v1_recursive",
            gating=False,
            explain="Reported only (an exactness check): one-point recursive updates end at the batch "
            "posterior.",
        ),
        value(
            "exact.gp_equiv_err",
            "<=",
            1e-6,
            name="v1_gp_equivalence",
            gating=False,
            explain="Reported only (an exactness check): the head's predictive equals a GP with a linear "
            "kernel on the features.",
        ),
        fails(
            value(
                "kl_weight_1.head_opt_rel_err",
                "<=",
                1e-3,
                name="ctrl_kl_weight_1",
                gating=False,
                explain="Reported only: with KL weight 1 instead of 1/T the head misses the closed form.",
            )
        ),
        fails(
            value(
                "no_trace.head_opt_rel_err",
                "<=",
                1e-3,
                name="ctrl_no_trace",
                gating=False,
                explain="Reported only: without the trace term the head misses the closed form.",
            )
        ),
        fails(
            value(
                "noise_as_variance.head_opt_rel_err",
                "<=",
                1e-3,
                name="ctrl_noise_as_variance",
                gating=False,
                explain="Reported only: reading the noise std as a variance misses the closed form.",
            )
        ),
        ratio(
            "vbll_cl.nn10_grad_steps_after_init",
            "vbll_every.nn10_grad_steps_after_init",
            "<=",
            0.4,
            name="v2_cost",
            paper="large speed-up of continual training",
            falsifier="tests/methods/vbll_bo/test_vbll_bo_falsifiers.py::"
            "test_v2_cost_fails_when_the_event_statistic_skips_standardisation",
            explain="After the initial fit, which both arms share, continual training (exact last-layer "
            "updates, retraining only when triggered) takes at most 40 % of the gradient steps of "
            "retraining after every observation on NNDraw-10D.",
        ),
        ratio(
            "vbll_cl.nn10_regret",
            "vbll_every.nn10_regret",
            "<=",
            1.5,
            name="v2_regret",
            falsifier="ctrl_v2_random_regret",
            explain="Continual training ends with at most 1.5 times the simple regret of retraining "
            "after every observation.",
        ),
        fails(
            ratio(
                "random.nn10_regret",
                "vbll_every.nn10_regret",
                "<=",
                1.5,
                name="ctrl_v2_random_regret",
                explain="Uniform random proposals end with more than 1.5 times that regret.",
            )
        ),
        ratio(
            "vbll_cl.nn10_surrogate_s",
            "vbll_every.nn10_surrogate_s",
            "<=",
            0.4,
            name="v2_time_s",
            gating=False,
            explain="Reported only: continual training spends at most 40 % of the surrogate wall-clock.",
        ),
        diff(
            "vbll.nn20_nll",
            "gp.nn20_nll",
            "<=",
            -0.1,
            name="v3a_nll",
            paper="VBLL better on NNdraw",
            falsifier="ctrl_v3a_frozen",
            explain="On NNDraw-20D (100 training points) VBLL's test NLL is at least 0.1 nats below the "
            "GP's.",
        ),
        fails(
            diff(
                "vbll_frozen.nn20_nll",
                "gp.nn20_nll",
                "<=",
                -0.1,
                name="ctrl_v3a_frozen",
                explain="VBLL with its backbone left at random initialisation does not beat the GP so.",
            )
        ),
        diff(
            "vbll_ts.ns_log10_regret",
            "gp_ts.ns_log10_regret",
            "<=",
            -0.1,
            name="v3b_nonstationary",
            paper="VBLLs outperform GPs on complex input correlations (Fig. 3, bottom)",
            falsifier="ctrl_v3b_random",
            explain="On ReLU NNDraw-10D (a non-stationary draw; 20 + 30 evaluations, Thompson sampling "
            "for both surrogates) VBLL's median log10 simple regret is at least 0.1 below the GP's (a "
            "20 % lower regret).",
        ),
        fails(
            diff(
                "random.ns_log10_regret",
                "gp_ts.ns_log10_regret",
                "<=",
                -0.1,
                name="ctrl_v3b_random",
                explain="Uniform random proposals do not beat GP-TS by that margin.",
            )
        ),
        diff(
            "vbll_ei.branin_log10_regret",
            "gp.branin_log10_regret",
            "<=",
            1.0,
            name="v3c_branin",
            paper="VBLLs match well-tuned GPs on classic benchmarks (Fig. 3, top)",
            falsifier="ctrl_v3c_random",
            explain="On Branin (10 + 40 evaluations, LogEI for both surrogates) VBLL's median log10 "
            "simple regret (floored at 1e-3) is within one decade of the GP's.",
        ),
        fails(
            diff(
                "random.branin_log10_regret",
                "gp.branin_log10_regret",
                "<=",
                1.0,
                name="ctrl_v3c_random",
                explain="Uniform random proposals end more than one decade above the GP on Branin.",
            )
        ),
        diff(
            "vbll_cl.branin_log10_regret_r0",
            "gp.branin_log10_regret_r0",
            "<=",
            1.0,
            name="v3c_branin_cl_ts",
            gating=False,
            explain="Reported only: VBLL-CL with Thompson sampling on Branin, within one decade of "
            "GP-LogEI (BO repeat 0).",
        ),
        diff(
            "vbll_cl.ns_log10_regret_r0",
            "gp_ts.ns_log10_regret_r0",
            "<=",
            0.0,
            name="ns_cl_vs_gp_ts",
            gating=False,
            explain="Reported only: VBLL-CL (Thompson sampling) against GP-TS on ReLU NNDraw (repeat 0).",
        ),
        diff(
            "vbll_ts.ns_log10_regret_r0",
            "gp_matern.ns_log10_regret_r0",
            "<=",
            0.0,
            name="ns_vs_gp_matern",
            gating=False,
            explain="Reported only: VBLL-TS against an ARD Matern-5/2 GP with LogEI (repeat 0).",
        ),
        diff(
            "vbll_ts.ns_log10_regret_r0",
            "gp_ibnn.ns_log10_regret_r0",
            "<=",
            0.0,
            name="ns_vs_gp_ibnn",
            gating=False,
            explain="Reported only: VBLL-TS against an I-BNN GP with LogEI (repeat 0).",
        ),
        diff(
            "vbll_ei.branin_log10_regret_r0",
            "gp_ibnn.branin_log10_regret_r0",
            "<=",
            1.0,
            name="branin_vs_gp_ibnn",
            gating=False,
            explain="Reported only: VBLL-LogEI on Branin, within one decade of an I-BNN GP with LogEI "
            "(repeat 0).",
        ),
        diff(
            "vbll_ts.ns_log10_regret_r0",
            "ensemble.ns_log10_regret_r0",
            "<=",
            0.0,
            name="ns_vs_ensemble",
            gating=False,
            explain="Reported only: VBLL-TS against a deep ensemble with Thompson sampling (repeat 0).",
        ),
        ratio(
            "cl_update.update_opt_steps",
            "ref_refit.update_opt_steps",
            "<=",
            0.4,
            name="ref_update_steps",
            gating=False,
            explain="Reported only: optimiser steps to absorb one point, ours (an exact update) against "
            "a refit of the community model.",
        ),
        ratio(
            "cl_update.update_s",
            "ref_refit.update_s",
            "<=",
            0.4,
            name="ref_update_time_s",
            gating=False,
            explain="Reported only: the wall-clock of that update against the refit.",
        ),
        diff(
            "cl_update.update_nll",
            "ref_refit.update_nll",
            "<=",
            0.25,
            name="ref_update_nll",
            gating=False,
            explain="Reported only: the test NLL after the update is no worse than the refit's by more "
            "than 0.25.",
        ),
        value(
            "cl_update.update_closed_form_err",
            "<=",
            1e-8,
            name="ref_update_exact",
            gating=False,
            explain="Reported only (an exactness check): the update equals the closed form on all "
            "T + 1 points.",
        ),
    ),
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=15.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=270.0),
        "long": Budget("long", _LONG, seeds=3, seconds=700.0),
    },
    run_fn=run,
    headline="v2_cost",
    deviations=(
        "NNdraw is our seeded tanh MLP (2 x 50, N(0, 1/fan_in)); the paper's construction is not published.",
        "CPU sizes: width 64 x 4 layers, <= 300 epochs, patience 30, batch 32; 3 seeds.",
        "BO fits (T <= 30, so <= 300 Adam steps) use lr 1e-2; the V3a fit (T = 100) keeps the port's 1e-3.",
        "V2 runs 10 + 30 evaluations on NNDraw-10D; V3b 20 + 30 on ReLU NNDraw-10D (weights 4/fan_in); "
        "V3c 10 + 40 on Branin; V3b/V3c run 1 BO repeat per claim seed in full (3 BO seeds), 2 in long (6).",
        "V3 VBLL arms are re-initialised and fitted from scratch after every evaluation (the paper's "
        "schedule) for <= 300 (full) or <= 1,000 (long) epochs at lr 1e-2 with the paper's patience 100 "
        "(paper: <= 10,000 epochs at lr 1e-3).",
        "V3 gates compare median log10 simple regret floored at 1e-3; report-only baselines run repeat 0.",
        "The refit precondition replays 3 of each V3 VBLL arm's fits (the first, one midway, the last; BO "
        "repeat 0) against fits 3x as long, not every refit.",
        "Every V3 arm optimises its acquisition (TS path or LogEI) with 4 restarts from 128 raw samples.",
        "The noise starts at sigma = 1 (HeadConfig.noise_init='unit'); the port's random draw is 'port'.",
        "V2 cost counts gradient steps after the initial fit, which both arms share.",
        "The event trigger (predictive log-likelihood < -2 or 10 steps without retrain) is our assumption.",
        "Simple regret on noise-free objectives; GP-LogEI: optimize_acqf(num_restarts=4, raw_samples=128).",
        "The community VBLLModel absorbs a new point by a warm refit of `patience` epochs (report only).",
    ),
)
