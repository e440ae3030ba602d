"""Baselines and the BO driver: GPs (BoTorch ``SingleTaskGP`` with its default kernel or an ARD
Matern-5/2 kernel; LogEI, or Thompson sampling through pathwise Matheron samples), a deep ensemble
with Thompson sampling, uniform random search, and ``run_bo`` that runs all of them and VBLL-TS,
VBLL-logEI and VBLL-CL on the same problems and seeds.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.

Implements the experimental protocol of Sec. 5 at CPU scale: a Sobol initial design
(``draw_sobol_samples``), one evaluation per iteration, simple regret f* - max_t y_t; the GP baseline
uses library code only (``SingleTaskGP``, ``fit_gpytorch_mll``, ``LogExpectedImprovement``,
``optimize_acqf``, ``draw_matheron_paths``). The deep ensemble (Lakshminarayanan et al., NeurIPS
2017, arXiv:1612.01474) is one of the neural surrogates the paper compares against: M small MLPs
with Gaussian heads, each trained on the Gaussian NLL from its own initialisation; its Thompson
sample is one member chosen at random, whose mean is maximised.

References:
    arXiv:2412.09477, Sec. 5; arXiv:1612.01474 (deep ensembles).
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
from .thompson import maximize_path

__all__ = ["BOResult", "DeepEnsemble", "exact_gp_linear", "fit_gp", "gaussian_nll", "is_duplicate", "run_bo"]

Surrogate = Literal["vbll", "gp", "gp_matern", "gp_ibnn", "ensemble", "random"]
Acquisition = Literal["ts", "logei", "random"]
_SUPPORTED = {
    ("vbll", "ts"), ("vbll", "logei"), ("gp", "ts"), ("gp", "logei"), ("gp_matern", "ts"),
    ("gp_matern", "logei"), ("gp_ibnn", "logei"), ("ensemble", "ts"), ("random", "random"),
}  # fmt: skip

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


def fit_gp(train_X: Tensor, train_Y: Tensor, bounds: Tensor, kernel: str = "default") -> object:
    """BoTorch ``SingleTaskGP`` (``Normalize``, ``Standardize``) fit by ``fit_gpytorch_mll``.

    Args:
        train_X: ``(n, d)`` inputs.
        train_Y: ``(n, 1)`` outputs.
        bounds: ``(2, d)`` input box (for ``Normalize``).
        kernel: ``"default"``, BoTorch's default (an ARD RBF kernel with dimension-scaled log-normal
            lengthscale priors), or ``"matern"``, an ARD Matern-5/2 kernel with BoTorch's Gamma
            priors (``get_matern_kernel_with_gamma_prior``, BoTorch's default before 0.12) and the
            matching Gamma noise prior, or ``"ibnn"``, BoTorch's ``InfiniteWidthBNNKernel`` (the
            infinite-width Bayesian neural network, I-BNN, depth 3, its weight and bias variances
            fitted with the rest) under a ``ScaleKernel``.

    Returns:
        The fitted ``SingleTaskGP``.
    """
    if kernel not in ("default", "matern", "ibnn"):
        raise ValueError(f"kernel must be 'default', 'matern' or 'ibnn', got {kernel!r}")
    models = require("botorch.models", "vbll_bo")
    tf = require("botorch.models.transforms", "vbll_bo")
    botorch = require("botorch", "vbll_bo")
    mlls = require("gpytorch.mlls", "vbll_bo")
    extra = {}
    if kernel == "matern":
        modules = require("botorch.models.utils.gpytorch_modules", "vbll_bo")
        extra = {
            "covar_module": modules.get_matern_kernel_with_gamma_prior(ard_num_dims=train_X.shape[-1]),
            "likelihood": modules.get_gaussian_likelihood_with_gamma_prior(),
        }
    elif kernel == "ibnn":
        kernels = require("botorch.models.kernels", "vbll_bo")
        scale = require("gpytorch.kernels", "vbll_bo").ScaleKernel
        extra = {"covar_module": scale(kernels.InfiniteWidthBNNKernel(depth=3)).to(train_X)}
    gp = models.SingleTaskGP(
        train_X, train_Y, input_transform=tf.Normalize(train_X.shape[-1], bounds=bounds),
        outcome_transform=tf.Standardize(train_Y.shape[-1]), **extra,
    )  # fmt: skip
    botorch.fit_gpytorch_mll(mlls.ExactMarginalLogLikelihood(gp.likelihood, gp))
    return gp


class _Member(nn.Module):
    """One ensemble member: an MLP with a Gaussian head, ``forward`` gives ``(mean, log variance)``."""

    def __init__(self, d: int, width: int, depth: int, generator: torch.Generator) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i in range(depth):
            layers += [nn.Linear(d if i == 0 else width, width, dtype=torch.float64), nn.ELU()]
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(width if depth else d, 2, dtype=torch.float64)
        with torch.no_grad():
            for lin in [m for m in self.modules() if isinstance(m, nn.Linear)]:
                bound = 1.0 / math.sqrt(lin.in_features)  # PyTorch's default uniform init, seeded
                lin.weight.uniform_(-bound, bound, generator=generator)
                lin.bias.uniform_(-bound, bound, generator=generator)

    def forward(self, X: Tensor) -> tuple[Tensor, Tensor]:
        h = self.out(self.body(X))  # (..., 2)
        return h[..., 0], h[..., 1].clamp(-10.0, 5.0)


class _MemberMean(nn.Module):
    """The mean of one member as a path ``(..., d) -> (..., 1)`` in original units (for TS)."""

    def __init__(self, ensemble: DeepEnsemble, k: int) -> None:
        super().__init__()
        self.ensemble, self.k = ensemble, k

    def forward(self, X: Tensor) -> Tensor:
        ens = self.ensemble
        mean, _ = ens.members_[self.k]((X - ens.lo_) / ens.width_)
        return (mean * ens.y_std_ + ens.y_mean_).unsqueeze(-1)


class DeepEnsemble:
    """Deep ensemble surrogate: M MLPs with Gaussian heads trained on the Gaussian NLL.

    Inputs are scaled to the unit cube with ``bounds`` and targets standardised at each ``fit``;
    each member starts from its own seeded initialisation and is trained full batch with Adam.
    A warm ``fit`` continues from the current weights for ``refit_steps`` steps.

    Args:
        bounds: ``(2, d)`` input box.
        n_members: M.
        width: hidden width.
        depth: hidden layers (ELU).
        steps: Adam steps of a fit from scratch.
        refit_steps: Adam steps of a warm fit.
        lr: Adam learning rate.
        generator: randomness of the initialisations.

    References:
        Lakshminarayanan, Pritzel, Blundell, NeurIPS 2017, arXiv:1612.01474.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> X = torch.rand(20, 2, dtype=torch.float64, generator=g)
        >>> b = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
        >>> ens = DeepEnsemble(b, n_members=2, steps=50, generator=g).fit(X, X.sum(-1, keepdim=True))
        >>> ens.predict(X)[0].shape
        torch.Size([20])
    """

    def __init__(
        self,
        bounds: Tensor,
        *,
        n_members: int = 5,
        width: int = 32,
        depth: int = 2,
        steps: int = 300,
        refit_steps: int = 50,
        lr: float = 1e-2,
        generator: torch.Generator | None = None,
    ) -> None:
        if n_members < 1 or width < 1 or depth < 0 or steps < 1 or refit_steps < 1 or lr <= 0:
            raise ValueError("n_members, width, steps, refit_steps must be >= 1, depth >= 0 and lr > 0")
        self.bounds = bounds.to(torch.float64)
        self.n_members, self.width, self.depth = n_members, width, depth
        self.steps, self.refit_steps, self.lr = steps, refit_steps, lr
        self.generator = generator if generator is not None else torch.Generator().manual_seed(0)
        self.members_: list[_Member] = []

    def fit(self, X: Tensor, Y: Tensor, *, warm: bool = False) -> DeepEnsemble:
        """Train every member on ``(X, Y)`` (``(n, d)``, ``(n, 1)``); returns self."""
        if X.dim() != 2 or Y.shape != (X.shape[0], 1):
            raise ValueError(f"X must be (n, d) and Y (n, 1), got {tuple(X.shape)}, {tuple(Y.shape)}")
        if not bool(torch.isfinite(Y).all()):
            raise ValueError("targets contain NaN or inf")
        self.lo_, self.width_ = self.bounds[0], self.bounds[1] - self.bounds[0]
        self.y_mean_, self.y_std_ = Y.mean(), Y.std().clamp_min(1e-9)
        Xt, yt = (X - self.lo_) / self.width_, ((Y - self.y_mean_) / self.y_std_)[:, 0]
        if not (warm and self.members_):
            d = X.shape[-1]
            self.members_ = [
                _Member(d, self.width, self.depth, self.generator) for _ in range(self.n_members)
            ]
        steps = self.refit_steps if warm and self.members_ else self.steps
        for member in self.members_:
            opt = torch.optim.Adam(member.parameters(), lr=self.lr)
            for _ in range(steps):
                mean, log_var = member(Xt)
                loss = 0.5 * (log_var + (yt - mean).pow(2) / log_var.exp()).mean()  # Gaussian NLL
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        return self

    @torch.no_grad()
    def predict(self, X: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and variance of the moment-matched mixture at ``X`` ``(n, d)``, original units."""
        Xt = (X - self.lo_) / self.width_
        means, vars_ = zip(*[(m, lv.exp()) for m, lv in (mem(Xt) for mem in self.members_)], strict=True)
        mu, var = torch.stack(means), torch.stack(vars_)  # (M, n)
        mix_mean = mu.mean(0)
        mix_var = (var + mu.pow(2)).mean(0) - mix_mean.pow(2)
        return mix_mean * self.y_std_ + self.y_mean_, mix_var * self.y_std_**2

    def sample_path(self, generator: torch.Generator | None = None) -> nn.Module:
        """A Thompson sample: the mean of one member chosen uniformly at random."""
        k = int(torch.randint(self.n_members, (1,), generator=generator))
        return _MemberMean(self, k)


class _GPPath(nn.Module):
    """One pathwise (Matheron) sample of a fitted GP as a path ``(..., d) -> (..., 1)``."""

    def __init__(self, gp: object) -> None:
        super().__init__()
        pathwise = require("botorch.sampling.pathwise", "vbll_bo")
        self.path = pathwise.draw_matheron_paths(gp, sample_shape=torch.Size([1]))  # global RNG, seeded

    def forward(self, X: Tensor) -> Tensor:
        return self.path(X)[0].unsqueeze(-1)  # (1, ...) -> (..., 1)


def run_bo(
    problem: nn.Module,
    surrogate: Surrogate,
    acquisition: Acquisition,
    n_init: int,
    n_iter: int,
    seed: int,
    *,
    continual: ContinualConfig | None = None,
    fit_config: FitConfig | None = None,
    refit_config: FitConfig | None = None,
    head: HeadConfig | None = None,
    width: int = 64,
    depth: int = 3,
    num_restarts: int = 10,
    raw_samples: int = 512,
    ensemble_steps: tuple[int, int] = (300, 50),
    progress: ProgressFn | None = None,
) -> BOResult:
    """Run one BO loop (maximisation) and record its simple-regret curve.

    Args:
        problem: a BoTorch test function to maximise (``bounds``, ``optimal_value``).
        surrogate: ``"vbll"``, ``"gp"`` (BoTorch's default ``SingleTaskGP``), ``"gp_matern"`` (ARD
            Matern-5/2 with Gamma priors), ``"gp_ibnn"`` (the I-BNN kernel), ``"ensemble"``
            (:class:`DeepEnsemble`, 5 members) or
            ``"random"`` (uniform proposals, the control).
        acquisition: ``"ts"`` (Thompson sampling: a VBLL sample path, a pathwise Matheron sample of
            the GP, or a random ensemble member, maximised by multi-start L-BFGS-B), ``"logei"``
            (``LogExpectedImprovement`` via ``optimize_acqf``; VBLL and GPs) or ``"random"``.
        n_init: Sobol points before BO.
        n_iter: BO iterations (one evaluation each).
        seed: seeds the design, the surrogate and the acquisition.
        continual: VBLL schedule; None retrains every step (VBLL-TS/-logEI); ``retrain="event"`` is
            VBLL-CL.
        fit_config: VBLL training settings (the initial fit, and the retrains unless
            ``refit_config``).
        refit_config: VBLL settings of the warm-started retrains after the initial fit.
        head: VBLL head settings.
        width: VBLL backbone width.
        depth: VBLL hidden layers.
        num_restarts: restarts of the acquisition optimiser.
        raw_samples: raw samples of the acquisition optimiser.
        ensemble_steps: Adam steps of the deep ensemble's first fit and of its warm refits.
        progress: called as ``progress("BO iteration", done, n_iter)`` after each iteration.

    Returns:
        A :class:`BOResult`.
    """
    if (surrogate, acquisition) not in _SUPPORTED:
        raise ValueError(
            f"unsupported surrogate/acquisition {surrogate!r}/{acquisition!r}; "
            f"supported: {sorted(_SUPPORTED)}"
        )
    # Some BoTorch internals (initial conditions, GP fit retries, pathwise samples) draw from torch's
    # global RNG: fork it and seed it here, so the run depends on ``seed`` only and the caller's
    # state is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return _run_bo(problem, surrogate, acquisition, n_init, n_iter, seed, continual, fit_config,
                       refit_config, head, width, depth, num_restarts, raw_samples, ensemble_steps,
                       progress)  # fmt: skip


def _run_bo(
    problem: nn.Module,
    surrogate: str,
    acquisition: str,
    n_init: int,
    n_iter: int,
    seed: int,
    continual: ContinualConfig | None,
    fit_config: FitConfig | None,
    refit_config: FitConfig | None,
    head: HeadConfig | None,
    width: int,
    depth: int,
    num_restarts: int,
    raw_samples: int,
    ensemble_steps: tuple[int, int],
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
    ensemble = None
    if surrogate == "vbll":
        model = VBLLModel(
            X, Y, width=width, depth=depth, head=head, input_transform=tf.Normalize(d, bounds=bounds),
            outcome_transform=tf.Standardize(1), generator=g,
        )  # fmt: skip
        cl = ContinualVBLL(
            model, continual or ContinualConfig(retrain="every"), fit_config, refit_config
        ).initial_fit()
    elif surrogate == "ensemble":
        t0 = time.perf_counter()
        ensemble = DeepEnsemble(
            bounds, steps=ensemble_steps[0], refit_steps=ensemble_steps[1], generator=g
        ).fit(X, Y)
        res.surrogate_seconds += time.perf_counter() - t0
        res.n_retrains += 1
    for it in range(n_iter):
        if surrogate == "random":
            x = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(1, d, generator=g, dtype=torch.float64)
        else:
            if cl is not None:
                model = cl.model
            elif ensemble is not None:
                model = ensemble
            else:
                t0 = time.perf_counter()
                kernel = {"gp_matern": "matern", "gp_ibnn": "ibnn"}.get(surrogate, "default")
                model = fit_gp(X, Y, bounds, kernel=kernel)
                res.surrogate_seconds += time.perf_counter() - t0
                res.n_retrains += 1
            if acquisition == "ts":
                path = model.sample_path(g) if cl is not None or ensemble is not None else _GPPath(model)
                x, _ = maximize_path(
                    path, bounds, num_restarts=num_restarts, raw_samples=raw_samples, generator=g
                )
            else:
                ei = acqf.LogExpectedImprovement(model, best_f=Y.max())
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
        if ensemble is not None:
            t0 = time.perf_counter()
            ensemble.fit(X, Y, warm=True)
            res.surrogate_seconds += time.perf_counter() - t0
            res.n_retrains += 1
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
