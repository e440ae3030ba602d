"""Baselines and the BO driver: GP (BoTorch ``SingleTaskGP`` + LogEI), uniform random search, and
``run_bo`` that runs GP, VBLL-TS, VBLL-logEI and VBLL-CL on the same problems and seeds.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.

Implements the experimental protocol of Sec. 5 at CPU scale: a Sobol initial design
(``draw_sobol_samples``), one evaluation per iteration, simple regret f* - max_t y_t; the GP baseline
uses library code only (``SingleTaskGP``, ``fit_gpytorch_mll``, ``LogExpectedImprovement``,
``optimize_acqf``).

References:
    arXiv:2412.09477, Sec. 5.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn

from iclr25._core.claims import ProgressFn
from iclr25._core.registry import require

from .config import ContinualConfig, FitConfig, HeadConfig
from .continual import ContinualVBLL
from .model import VBLLModel
from .problems import simple_regret
from .thompson import thompson_candidates

__all__ = ["BOResult", "exact_gp_linear", "fit_gp", "gaussian_nll", "is_duplicate", "run_bo"]

logger = logging.getLogger(__name__)

DUPLICATE_TOL = 1e-6  # a proposal within this fraction of every box side of an observed point repeats it


@dataclass
class BOResult:
    """One BO run.

    Args:
        X: all evaluated inputs ``(n_init + n_iter, d)``.
        Y: their values ``(n_init + n_iter, 1)``.
        regret: simple regret after each evaluation ``(n_init + n_iter,)``.
        n_grad_steps: surrogate optimiser steps (VBLL; 0 for the GP and random search).
        n_grad_steps_after_init: VBLL optimiser steps after the initial fit (the cost of keeping
            the surrogate up to date; the initial fit is the same for every schedule).
        n_retrains: full surrogate fits.
        n_duplicates: proposals that repeat an already observed input (see :func:`is_duplicate`).
        surrogate_seconds: wall time spent fitting/updating surrogates.
        seconds: wall time of the run.
        decisions: ``"retrain"``/``"recursive"`` per iteration (VBLL) .
    """

    X: Tensor
    Y: Tensor
    regret: Tensor
    n_grad_steps: int = 0
    n_grad_steps_after_init: int = 0
    n_retrains: int = 0
    n_duplicates: int = 0
    surrogate_seconds: float = 0.0
    seconds: float = 0.0
    decisions: list[str] = field(default_factory=list)

    @property
    def final_regret(self) -> float:
        """Simple regret after the last evaluation."""
        return float(self.regret[-1])


def gaussian_nll(mean: Tensor, var: Tensor, y: Tensor) -> float:
    """Mean Gaussian negative log-likelihood of ``y`` under N(mean, var).

    Example:
        >>> round(gaussian_nll(torch.zeros(1), torch.ones(1), torch.zeros(1)), 4)
        0.9189
    """
    return float((0.5 * (math.log(2 * math.pi) + var.log() + (y - mean).pow(2) / var)).mean())


def is_duplicate(x: Tensor, X: Tensor, bounds: Tensor, tol: float = DUPLICATE_TOL) -> bool:
    """Whether ``x`` repeats a row of ``X``: every coordinate within ``tol`` of the box side.

    Args:
        x: ``(1, d)`` or ``(d,)`` proposal.
        X: ``(n, d)`` observed inputs.
        bounds: ``(2, d)`` box.
        tol: tolerance as a fraction of each side.

    Returns:
        True if some observed point matches ``x`` in every coordinate.

    Example:
        >>> b = torch.tensor([[0.0, 0.0], [10.0, 1.0]])
        >>> X = torch.tensor([[10.0, 0.0], [5.0, 0.5]])
        >>> is_duplicate(torch.tensor([10.0, 0.0]), X, b), is_duplicate(torch.tensor([9.0, 0.0]), X, b)
        (True, False)
    """
    if X.numel() == 0:
        return False
    width = (bounds[1] - bounds[0]).to(X)
    gap = ((X - x.reshape(1, -1).to(X)).abs() / width).amax(-1)
    return bool((gap <= tol).any())


def fit_gp(train_X: Tensor, train_Y: Tensor, bounds: Tensor) -> object:
    """BoTorch ``SingleTaskGP`` (default priors, ``Normalize``, ``Standardize``) fit by ``fit_gpytorch_mll``.

    Args:
        train_X: ``(n, d)`` inputs.
        train_Y: ``(n, 1)`` outputs.
        bounds: ``(2, d)`` input box (for ``Normalize``).

    Returns:
        The fitted ``SingleTaskGP``.
    """
    models = require("botorch.models", "vbll_bo")
    tf = require("botorch.models.transforms", "vbll_bo")
    botorch = require("botorch", "vbll_bo")
    mlls = require("gpytorch.mlls", "vbll_bo")
    gp = models.SingleTaskGP(
        train_X, train_Y, input_transform=tf.Normalize(train_X.shape[-1], bounds=bounds),
        outcome_transform=tf.Standardize(train_Y.shape[-1]),
    )  # fmt: skip
    botorch.fit_gpytorch_mll(mlls.ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


def run_bo(
    problem: nn.Module,
    surrogate: Literal["vbll", "gp", "random"],
    acquisition: Literal["ts", "logei", "random"],
    n_init: int,
    n_iter: int,
    seed: int,
    *,
    continual: ContinualConfig | None = None,
    fit_config: FitConfig | None = None,
    head: HeadConfig | None = None,
    width: int = 64,
    depth: int = 3,
    num_restarts: int = 10,
    raw_samples: int = 512,
    progress: ProgressFn | None = None,
) -> BOResult:
    """Run one BO loop (maximisation) and record its simple-regret curve.

    Args:
        problem: a BoTorch test function to maximise (``bounds``, ``optimal_value``).
        surrogate: ``"vbll"``, ``"gp"`` or ``"random"`` (uniform proposals, the control).
        acquisition: ``"ts"`` (VBLL Thompson sampling), ``"logei"`` (``LogExpectedImprovement`` via
            ``optimize_acqf``) or ``"random"``.
        n_init: Sobol points before BO.
        n_iter: BO iterations (one evaluation each).
        seed: seeds the design, the surrogate and the acquisition.
        continual: VBLL schedule; None retrains every step (VBLL-TS/-logEI); ``retrain="event"`` is
            VBLL-CL.
        fit_config: VBLL training settings.
        head: VBLL head settings.
        width: VBLL backbone width.
        depth: VBLL hidden layers.
        num_restarts: restarts of the acquisition optimiser.
        raw_samples: raw samples of the acquisition optimiser.
        progress: called as ``progress("BO iteration", done, n_iter)`` after each iteration.

    Returns:
        A :class:`BOResult`.
    """
    if surrogate not in ("vbll", "gp", "random") or acquisition not in ("ts", "logei", "random"):
        raise ValueError(f"unknown surrogate/acquisition {surrogate!r}/{acquisition!r}")
    if (surrogate == "random") != (acquisition == "random") or (surrogate == "gp" and acquisition == "ts"):
        raise ValueError(f"unsupported combination {surrogate!r} + {acquisition!r}")
    # Some BoTorch internals (initial conditions, GP fit retries) draw from torch's global RNG:
    # fork it and seed it here, so the run depends on ``seed`` only and the caller's state is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _run_bo(problem, surrogate, acquisition, n_init, n_iter, seed, continual, fit_config, head,
                       width, depth, num_restarts, raw_samples, progress)  # fmt: skip


def _run_bo(
    problem: nn.Module,
    surrogate: str,
    acquisition: str,
    n_init: int,
    n_iter: int,
    seed: int,
    continual: ContinualConfig | None,
    fit_config: FitConfig | None,
    head: HeadConfig | None,
    width: int,
    depth: int,
    num_restarts: int,
    raw_samples: int,
    progress: ProgressFn | None,
) -> BOResult:
    utils = require("botorch.utils.sampling", "vbll_bo")
    tf = require("botorch.models.transforms", "vbll_bo")
    acqf = require("botorch.acquisition", "vbll_bo")
    optim = require("botorch.optim", "vbll_bo")
    start = time.perf_counter()
    bounds = problem.bounds.to(torch.float64)
    d = bounds.shape[-1]
    g = torch.Generator().manual_seed(int(seed))
    X = utils.draw_sobol_samples(bounds=bounds, n=n_init, q=1, seed=int(seed)).squeeze(-2)  # (n_init, d)
    Y = problem(X).unsqueeze(-1)
    res = BOResult(X, Y, torch.empty(0))
    cl = None
    if surrogate == "vbll":
        model = VBLLModel(
            X, Y, width=width, depth=depth, head=head, input_transform=tf.Normalize(d, bounds=bounds),
            outcome_transform=tf.Standardize(1), generator=g,
        )  # fmt: skip
        cl = ContinualVBLL(model, continual or ContinualConfig(retrain="every"), fit_config).initial_fit()
    for it in range(n_iter):
        if surrogate == "random":
            x = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(1, d, generator=g, dtype=torch.float64)
        elif surrogate == "vbll":
            assert cl is not None
            if acquisition == "ts":
                x = thompson_candidates(
                    cl.model, bounds, q=1, num_restarts=num_restarts, raw_samples=raw_samples, generator=g
                )
            else:
                ei = acqf.LogExpectedImprovement(cl.model, best_f=Y.max())
                x, _ = optim.optimize_acqf(
                    ei, bounds, q=1, num_restarts=num_restarts, raw_samples=raw_samples,
                    options={"seed": int(seed) * 1000 + it},
                )  # fmt: skip
        else:
            t0 = time.perf_counter()
            gp = fit_gp(X, Y, bounds)
            res.surrogate_seconds += time.perf_counter() - t0
            res.n_retrains += 1
            ei = acqf.LogExpectedImprovement(gp, best_f=Y.max())
            x, _ = optim.optimize_acqf(
                ei, bounds, q=1, num_restarts=num_restarts, raw_samples=raw_samples,
                options={"seed": int(seed) * 1000 + it},
            )  # fmt: skip
        x = x.detach().reshape(1, d)
        if is_duplicate(x, X, bounds):
            res.n_duplicates += 1
            logger.info(
                "BO %s/%s seed %d, iteration %d: the proposal %s repeats an observed point",
                surrogate, acquisition, seed, it + 1, [round(v, 6) for v in x[0].tolist()],
            )  # fmt: skip
        y = problem(x).unsqueeze(-1)
        if cl is not None:
            res.decisions.append(cl.observe(x, y))
        X, Y = torch.cat([X, x]), torch.cat([Y, y])
        if progress is not None:
            progress("BO iteration", it + 1, n_iter)
    if cl is not None:
        res.n_grad_steps, res.n_retrains, res.surrogate_seconds = (
            cl.n_grad_steps,
            cl.n_retrains,
            cl.train_seconds,
        )
        res.n_grad_steps_after_init = cl.n_grad_steps - cl.n_grad_steps_initial
    res.X, res.Y = X, Y
    res.regret = simple_regret(problem, Y)
    res.seconds = time.perf_counter() - start
    return res


def exact_gp_linear(
    phi: Tensor, y: Tensor, phi_test: Tensor, prior_var: float, noise_var: float
) -> tuple[Tensor, Tensor]:
    """Latent predictive of a GPyTorch ``ExactGP`` with kernel prior_var * phi^T phi' and fixed noise.

    This is the GP that the exact VBLL posterior equals (Sec. 4): ``LinearKernel`` with variance s0,
    zero mean, ``FixedNoiseGaussianLikelihood`` with variance sigma^2.

    Args:
        phi: training features ``(T, N)``.
        y: training targets ``(T,)``.
        phi_test: test features ``(n, N)``.
        prior_var: s0.
        noise_var: sigma^2.

    Returns:
        ``(mean, var)`` of the latent f at the test features, each ``(n,)``.
    """
    gpytorch = require("gpytorch", "vbll_bo")

    class _LinearGP(gpytorch.models.ExactGP):
        def __init__(self, x: Tensor, t: Tensor, lik: object) -> None:
            super().__init__(x, t, lik)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.LinearKernel()

        def forward(self, x: Tensor) -> object:
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    lik = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=torch.full_like(y, noise_var))
    gp = _LinearGP(phi, y, lik).to(phi)
    gp.covar_module.variance = prior_var
    gp.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var(False), gpytorch.settings.max_cholesky_size(10**6):
        f = gp(phi_test)
        return f.mean, f.variance
