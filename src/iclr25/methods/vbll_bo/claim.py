"""Claim check of VBLL Bayesian optimisation: the head's optimum is the exact BLR posterior, continual
training is much cheaper than retraining at similar regret, and VBLL matches or beats a GP.

V1 (exactness, every budget, reported only: the unit tests cover it): with features frozen,
optimising the head recovers the closed form; recursive updates equal the batch posterior; the
predictive equals a GPyTorch linear-kernel GP. Broken variants: lambda = 1 instead of 1/T, the trace
term dropped, the noise std read as a variance.
V2 (continual cost, full): NNDraw-10D, VBLL-CL (event-triggered) vs retraining every step.
V3 (quality): (a) test NLL on NNDraw-20D vs a GP, with a frozen-random-backbone control; (b) BO
regret vs GP-LogEI on the V2 runs; (c) Branin. Uniform random proposals are the BO control.
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
from iclr25._core.registry import require
from iclr25.methods.vbll_bo import (
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


def _bo(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    series: dict[str, Series],
    nn10: NNDraw,
    progress: ProgressFn = no_progress,
) -> None:
    """V2 and V3b on ``nn10`` (NNDraw-10D), V3c on Branin."""
    fc = _fit_config(cfg, cfg.bo_lr)
    vb = {"fit_config": fc, "width": cfg.width, "depth": cfg.depth, "num_restarts": cfg.ts_restarts,
          "raw_samples": cfg.ts_raw_samples}  # fmt: skip
    gpkw = {"num_restarts": cfg.gp_restarts, "raw_samples": cfg.gp_raw_samples}
    problems = {
        "nn10": (nn10, cfg.bo_init, cfg.bo_iters),
        "branin": (benchmark("branin"), cfg.branin_init, cfg.branin_iters),
    }
    for key, (problem, n_init, n_iter) in problems.items():

        def report(arm: str, key: str = key) -> ProgressFn:
            return lambda _, done, total: progress(f"BO {key} {arm}", done, total)

        runs = {
            "vbll_cl": run_bo(problem, "vbll", "ts", n_init, n_iter, seed, continual=cfg.continual, **vb,
                              progress=report("vbll_cl")),
            "gp": run_bo(problem, "gp", "logei", n_init, n_iter, seed, **gpkw, progress=report("gp")),
            "random": run_bo(problem, "random", "random", n_init, n_iter, seed),
        }  # fmt: skip
        if key == "nn10":
            runs["vbll_every"] = run_bo(
                problem, "vbll", "ts", n_init, n_iter, seed, **vb, progress=report("vbll_every")
            )
        for arm, r in runs.items():
            m[arm][f"{key}_regret"] = r.final_regret
            m[arm][f"{key}_regret_floored"] = max(r.final_regret, 1e-3)
            m[arm][f"{key}_duplicates"] = float(r.n_duplicates)  # report only (Thompson repeats)
            if arm.startswith("vbll"):
                m[arm][f"{key}_grad_steps"] = float(r.n_grad_steps)
                m[arm][f"{key}_grad_steps_after_init"] = float(r.n_grad_steps_after_init)
                m[arm][f"{key}_retrains"] = float(r.n_retrains)
            m[arm][f"{key}_surrogate_s"] = r.surrogate_seconds
        x = list(range(n_iter + 1))
        name = f"NNDraw-{cfg.bo_dim}D" if key == "nn10" else "Branin"
        curves = {
            arm: [math.log10(max(float(v), 1e-6)) for v in r.regret[n_init - 1 :]] for arm, r in runs.items()
        }
        series[f"regret_{key}"] = Series(
            title=f"Simple regret on {name} (seed {seed})",
            xlabel="BO iteration", ylabel="simple regret (log10)", x=[float(i) for i in x],
            lines=curves,
        )  # fmt: skip


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
    arms = ("exact", "kl_weight_1", "no_trace", "noise_as_variance", "vbll", "vbll_frozen", "vbll_cl",
            "vbll_every", "gp", "random", "cl_update", "ref_refit")  # fmt: skip
    m: dict[str, dict[str, float]] = {a: {} for a in arms}
    series: dict[str, Series] = {}
    progress("V1 exactness", 0, 1)
    _v1(config, seed, m)
    progress("V3a test NLL", 0, 1)
    _v3a(config, seed, m)
    nn10 = NNDraw(config.bo_dim, seed=seed)  # the V2 problem, shared by the side-by-side update
    progress("side-by-side update", 0, 1)
    _reference_update(config, seed, m, nn10)
    if config.run_bo:
        _bo(config, seed, m, series, nn10, progress)
    notes = []
    if config.run_bo:
        notes.append(
            f"NNDraw-{config.bo_dim}D: VBLL-CL {m['vbll_cl']['nn10_retrains']:.0f} retrains, "
            f"{m['vbll_cl']['nn10_grad_steps_after_init']:.0f} gradient steps after the initial fit; "
            f"every-step retraining {m['vbll_every']['nn10_grad_steps_after_init']:.0f}"
        )
        repeats = ", ".join(
            f"{arm} {m[arm][f'{key}_duplicates']:.0f}"
            for key in ("nn10", "branin")
            for arm in ("vbll_cl", "vbll_every", "gp")
            if f"{key}_duplicates" in m[arm]
        )
        notes.append(f"proposals repeating an observed point (nn10 then branin): {repeats}")
    return RunResult(metrics={a: v for a, v in m.items() if v}, series=series, notes=notes)


_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    v1_features=8, v1_points=20, max_epochs=20, patience=5, width=16, depth=1, bo_dim=3, bo_init=4,
    bo_iters=3, branin_init=4, branin_iters=3,
    nll_dim=4, nll_train=30, nll_test=50, ts_restarts=2, ts_raw_samples=32, gp_restarts=1, gp_raw_samples=16,
    continual=ContinualConfig(retrain="periodic", period=2),
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
    arms={
        "exact": "V1: VBLL head on frozen features (lambda = 1/T), its recursive updates and predictive",
        "kl_weight_1": "V1 control: the head optimised with lambda = 1 instead of 1/T",
        "no_trace": "V1 control: the head optimised without the phi^T S phi / (2 sigma^2) term",
        "noise_as_variance": "V1 control: the head optimised reading the noise std as a variance",
        "vbll": "V3a: VBLL surrogate (64 x 4 ELU backbone, trained)",
        "vbll_frozen": "V3a control: VBLL with its backbone frozen at random initialisation",
        "vbll_cl": "VBLL-TS with continual training (event-triggered retrains, recursive updates between)",
        "vbll_every": "VBLL-TS retrained (warm start) after every observation",
        "gp": "BoTorch SingleTaskGP (default priors) + LogEI via optimize_acqf",
        "random": "control: uniform random proposals",
        "cl_update": "ours absorbing one new point by condition_on_observations (exact, no gradient steps)",
        "ref_refit": "botorch_community VBLLModel absorbing the same point by a warm-started refit",
    },
    criteria=(
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
        ratio(
            "vbll_every.nn10_regret",
            "gp.nn10_regret",
            "<=",
            1.0,
            name="v3b_bo_vs_gp",
            falsifier="ctrl_v3b_random",
            explain="VBLL Thompson sampling ends BO on NNDraw-10D with no more simple regret than the GP "
            "with LogEI.",
        ),
        fails(
            ratio(
                "random.nn10_regret",
                "gp.nn10_regret",
                "<=",
                1.0,
                name="ctrl_v3b_random",
                explain="Uniform random proposals end with more regret than the GP.",
            )
        ),
        ratio(
            "vbll_cl.branin_regret_floored",
            "gp.branin_regret_floored",
            "<=",
            2.0,
            name="v3c_branin",
            falsifier="ctrl_v3c_random",
            explain="On Branin, continual VBLL ends with at most twice the GP's simple regret (both "
            "floored at 1e-3).",
        ),
        fails(
            ratio(
                "random.branin_regret_floored",
                "gp.branin_regret_floored",
                "<=",
                2.0,
                name="ctrl_v3c_random",
                explain="Uniform random proposals end with more than twice the GP's regret on Branin.",
            )
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
        "full": Budget("full", _FULL, seeds=3, seconds=250.0),
    },
    run_fn=run,
    headline="v2_cost",
    deviations=(
        "NNdraw is our seeded tanh MLP (2 x 50, N(0, 1/fan_in)); the paper's construction is not published.",
        "CPU sizes: width 64 x 4 layers, <= 300 epochs, patience 30, batch 32; 3 seeds.",
        "BO fits (T <= 30, so <= 300 Adam steps) use lr 1e-2; the V3a fit (T = 100) keeps the port's 1e-3.",
        "BO runs 10 + 30 iterations on NNDraw-10D and 10 + 20 on Branin, as the spec asks.",
        "The noise starts at sigma = 1 (HeadConfig.noise_init='unit'); the port's random draw is 'port'.",
        "V2 cost counts gradient steps after the initial fit, which both arms share.",
        "The event trigger (predictive log-likelihood < -2 or 10 steps without retrain) is our assumption.",
        "Simple regret on noise-free objectives; GP-LogEI: optimize_acqf(num_restarts=4, raw_samples=128).",
        "The community VBLLModel absorbs a new point by a warm refit of `patience` epochs (report only).",
    ),
)
