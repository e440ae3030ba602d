"""``VBLLModel``: a BoTorch ``Model`` with a neural feature map and a VBLL head.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.

Implements the surrogate of Sec. 3: f(x) = W phi_theta(x) with q(w_k) = N(w_bar_k, S_k), whose
latent predictive over q points is the joint Gaussian N(Phi w_bar_k, Phi S_k Phi^T) (the GP with
kernel s0 phi(x)^T phi(x') when q(w) is the exact posterior), plus sigma_k^2 I with observation
noise; and the exact recursive conditioning of Sec. 4, used by ``condition_on_observations`` and
therefore by ``fantasize``.

References:
    arXiv:2412.09477, Sec. 3-4.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from iclr25._core.claims import ProgressFn
from iclr25._core.registry import require

from .config import FitConfig, HeadConfig
from .head import VBLLHead, predictive_from, recursive_update
from .training import FitResult, fit_vbll

__all__ = ["ThompsonPath", "VBLLModel", "default_backbone"]

# BoTorch is first imported here. Its dependency linear_operator decorates functions with
# ``torch.jit.script`` at import, which recent torch answers with a FutureWarning; nothing in this
# package scripts anything, so that one warning is silenced for this import only.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*deprecated", category=FutureWarning)
    _bt_model = require("botorch.models.model", "vbll_bo")
_Model, _FantasizeMixin = _bt_model.Model, _bt_model.FantasizeMixin
_InputDataWarning = require("botorch.exceptions", "vbll_bo").InputDataWarning


def default_backbone(
    in_features: int,
    *,
    width: int = 64,
    depth: int = 3,
    activation: type[nn.Module] = nn.ELU,
    generator: torch.Generator | None = None,
) -> nn.Sequential:
    """``Linear(d, width) + act`` then ``depth`` x ``[Linear(width, width) + act]``, in float64.

    Args:
        in_features: d.
        width: hidden width (the feature width N).
        depth: number of hidden width x width layers.
        activation: activation class.
        generator: initialisation randomness.

    Returns:
        The backbone phi_theta.

    Example:
        >>> net = default_backbone(3, width=8, depth=1, generator=torch.Generator().manual_seed(0))
        >>> net(torch.zeros(2, 3, dtype=torch.float64)).shape
        torch.Size([2, 8])
    """
    layers: list[nn.Module] = [nn.Linear(in_features, width, dtype=torch.float64), activation()]
    for _ in range(depth):
        layers += [nn.Linear(width, width, dtype=torch.float64), activation()]
    net = nn.Sequential(*layers)
    _reset_linear(net, generator)
    return net


@torch.no_grad()
def _reset_linear(module: nn.Module, generator: torch.Generator | None) -> None:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for every Linear, drawn from ``generator``."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            bound = 1.0 / math.sqrt(layer.in_features)
            w, b = layer.weight, layer.bias
            w.copy_((torch.rand(w.shape, generator=generator, dtype=w.dtype) * 2 - 1) * bound)
            if b is not None:
                b.copy_((torch.rand(b.shape, generator=generator, dtype=b.dtype) * 2 - 1) * bound)


def _check_data(X: Tensor, Y: Tensor, d: int | None = None, m: int | None = None) -> None:
    if not isinstance(X, Tensor) or not isinstance(Y, Tensor):
        raise TypeError("X and Y must be torch tensors")
    if X.dim() < 2 or Y.dim() < 2:
        raise ValueError(f"X must be (n, d) and Y (n, m); got {tuple(X.shape)} and {tuple(Y.shape)}")
    if X.shape[-2] != Y.shape[-2]:
        raise ValueError(f"X and Y have different numbers of points: {X.shape[-2]} and {Y.shape[-2]}")
    if X.dtype != Y.dtype:
        raise TypeError(f"X and Y must share a dtype, got {X.dtype} and {Y.dtype}")
    if not X.dtype.is_floating_point:
        raise TypeError(f"X must be floating point, got {X.dtype}")
    if d is not None and X.shape[-1] != d:
        raise ValueError(f"X must have {d} columns (the input dimension), got {X.shape[-1]}")
    if m is not None and Y.shape[-1] != m:
        raise ValueError(f"Y must have {m} columns (the number of outputs), got {Y.shape[-1]}")
    for name, t in (("Y", Y), ("X", X)):
        if torch.isnan(t).any():
            raise ValueError(f"{name} contains NaN")
        if torch.isinf(t).any():
            raise ValueError(f"{name} contains inf; every value must be finite")


def _warn_single_precision(*tensors: Tensor) -> None:
    """Warn (BoTorch's ``InputDataWarning``) when data is not float64; the model computes in float64.

    The data is still cast to float64, as BoTorch's own models accept float32 with this warning;
    values already rounded to float32 stay rounded, which is why the user is told.
    """
    low = sorted({str(t.dtype) for t in tensors if t.dtype != torch.float64})
    if low:
        warnings.warn(
            f"the data is of type {', '.join(low)}; VBLLModel computes in torch.float64 and casts it. "
            "Pass float64 tensors: single precision loses accuracy in the closed-form conditioning.",
            _InputDataWarning,
            stacklevel=3,
        )


class VBLLModel(_Model, _FantasizeMixin):
    """A BoTorch ``Model`` whose last layer is a variational Bayesian linear regression.

    The posterior over ``b x q`` points is the full joint Gaussian (a ``MultivariateNormal``, or a
    ``MultitaskMultivariateNormal`` with independent outputs for m > 1) wrapped in a
    ``GPyTorchPosterior``; ``observation_noise=True`` adds sigma_k^2 I. Input transforms apply before
    phi; outcome transforms are learned at every full fit and frozen in between.

    Args:
        train_X: inputs, ``(n, d)``.
        train_Y: outputs, ``(n, m)``.
        backbone: a feature map ``(.., d) -> (.., N)`` in float64; default :func:`default_backbone`.
        width: width of the default backbone.
        depth: hidden layers of the default backbone.
        activation: activation of the default backbone.
        head: :class:`HeadConfig` of the last layer.
        kl_scale: lambda = kl_scale / T at every fit (1 is the exact ELBO).
        input_transform: e.g. ``Normalize(d)``.
        outcome_transform: e.g. ``Standardize(m)``.
        device: where parameters live (the caller's choice; None keeps them where created).
        generator: randomness of initialisation, minibatches and Thompson paths.

    References:
        arXiv:2412.09477, Sec. 3-4.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> X = torch.rand(12, 2, dtype=torch.float64, generator=g)
        >>> model = VBLLModel(X, X.sum(-1, keepdim=True), width=16, depth=1, generator=g)
        >>> _ = model.fit(FitConfig(max_epochs=5))
        >>> post = model.posterior(torch.rand(4, 3, 2, dtype=torch.float64, generator=g))
        >>> tuple(post.mean.shape), tuple(post.mvn.covariance_matrix.shape)
        ((4, 3, 1), (4, 3, 3))
    """

    def __init__(
        self,
        train_X: Tensor,
        train_Y: Tensor,
        *,
        backbone: nn.Module | None = None,
        width: int = 64,
        depth: int = 3,
        activation: type[nn.Module] = nn.ELU,
        head: HeadConfig | None = None,
        kl_scale: float = 1.0,
        input_transform: nn.Module | None = None,
        outcome_transform: nn.Module | None = None,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        _check_data(train_X, train_Y)
        _warn_single_precision(train_X, train_Y)
        if train_X.dim() != 2 or train_Y.dim() != 2:
            raise ValueError(f"train_X must be (n, d) and train_Y (n, m), got {tuple(train_X.shape)}")
        if kl_scale <= 0:
            raise ValueError(f"kl_scale must be > 0, got {kl_scale}")
        super().__init__()
        head = head or HeadConfig()
        self._has_transformed_inputs = True  # inputs are transformed explicitly where needed
        self.likelihood = None  # noise is inferred (sigma); read by BoTorch's fantasize
        self._dim, self._m = train_X.shape[-1], train_Y.shape[-1]
        self.kl_scale, self.kl_weight = float(kl_scale), float(kl_scale) / train_X.shape[0]
        self.head_config = head
        opts = {"dtype": torch.float64, "device": device}
        self.train_X, self.train_Y = train_X.to(**opts), train_Y.to(**opts)
        if input_transform is not None:
            self.input_transform = input_transform.to(**opts)
        if outcome_transform is not None:
            self.outcome_transform = outcome_transform.to(**opts)
        self.backbone = (
            backbone if backbone is not None
            else default_backbone(
                self._dim, width=width, depth=depth, activation=activation, generator=generator
            )
        ).to(**opts)  # fmt: skip
        self.refresh_transforms()
        with torch.no_grad():
            n_feat = self.backbone(self.train_inputs_transformed[:1]).shape[-1]
        self.head = VBLLHead(
            n_feat, self._m, prior_scale=head.prior_scale, wishart_scale=head.wishart_scale, dof=head.dof,
            parameterization=head.parameterization, cov_rank=head.cov_rank,
            noise_init=head.noise_init, clamp_noise_init=head.clamp_noise_init, generator=generator,
        ).to(**opts)  # fmt: skip
        self._generator = generator
        self._cond: tuple[Tensor, Tensor] | None = None
        self.eval()

    def train(self, mode: bool = True) -> VBLLModel:
        """Train/eval mode of backbone and head; the transforms stay frozen (eval) outside fits."""
        nn.Module.train(self, mode)
        for name in ("input_transform", "outcome_transform"):
            if hasattr(self, name):
                getattr(self, name).eval()
        return self

    def eval(self) -> VBLLModel:
        """Evaluation mode (see :meth:`train`)."""
        return self.train(False)

    # ---- data and transforms -------------------------------------------------------------------
    @torch.no_grad()
    def refresh_transforms(self) -> None:
        """Re-learn the input and outcome transforms on all training data (done at every fit)."""
        X, Y = self.train_X, self.train_Y
        if hasattr(self, "input_transform"):
            self.input_transform.train()
            X = self.input_transform(X)
            self.input_transform.eval()
        if hasattr(self, "outcome_transform"):
            self.outcome_transform.train()
            Y, _ = self.outcome_transform(Y)
            self.outcome_transform.eval()
        self.train_inputs_transformed, self.train_targets_transformed = X, Y

    def transform_data(self, X: Tensor, Y: Tensor) -> tuple[Tensor, Tensor]:
        """Inputs and targets in model space with the current (frozen) transforms."""
        _check_data(X, Y, self._dim, self._m)
        _warn_single_precision(X, Y)
        X, Y = X.to(self.train_X), Y.to(self.train_X)
        Xt = self.transform_inputs(X)
        if hasattr(self, "outcome_transform"):
            self.outcome_transform.eval()
            Y, _ = self.outcome_transform(Y)
        return Xt, Y

    def append_data(self, X: Tensor, Y: Tensor) -> None:
        """Add observations to the stored data, transformed with the frozen statistics."""
        Xt, Yt = self.transform_data(X, Y)
        self.train_X = torch.cat([self.train_X, X.to(self.train_X)])
        self.train_Y = torch.cat([self.train_Y, Y.to(self.train_Y)])
        self.train_inputs_transformed = torch.cat([self.train_inputs_transformed, Xt])
        self.train_targets_transformed = torch.cat([self.train_targets_transformed, Yt])

    def features(self, X: Tensor) -> Tensor:
        """phi_theta(T(x)) for raw inputs x, shape ``(*b, n, N)``."""
        if X.shape[-1] != self._dim:
            raise ValueError(f"X must have {self._dim} columns (the input dimension), got {X.shape[-1]}")
        return self.backbone(self.transform_inputs(X.to(self.train_X)))

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Re-initialise every Linear of the backbone and the head from ``generator``."""
        _reset_linear(self.backbone, generator)
        self.head.reset_parameters(generator)
        self._cond = None

    def clear_conditioning(self) -> None:
        """Drop a batched conditioned state (fantasies); the head's own Gaussian is used again."""
        self._cond = None

    def gaussian(self) -> tuple[Tensor, Tensor]:
        """The current q(w) as ``(w_bar, S)``: ``(*batch, m, N)`` and ``(*batch, m, N, N)``."""
        return self._cond if self._cond is not None else self.head.gaussian()

    def head_nll(self, Xt: Tensor, Yt: Tensor) -> Tensor:
        """Mean predictive NLL (with noise) of model-space inputs and targets."""
        mu, var = predictive_from(*self.gaussian(), self.backbone(Xt), joint=False)
        var = var + self.head.noise_std().pow(2)
        return (0.5 * (math.log(2 * math.pi) + var.log() + (Yt - mu).pow(2) / var)).sum(-1).mean()

    # ---- BoTorch Model API ---------------------------------------------------------------------
    @property
    def num_outputs(self) -> int:
        """m, the number of outputs."""
        return self._m

    @property
    def batch_shape(self) -> torch.Size:
        """Empty, or the fantasy batch shape after batched conditioning."""
        if self._cond is None:
            return torch.Size([])
        return torch.broadcast_shapes(self._cond[0].shape[:-2], self._cond[1].shape[:-3])

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Joint Gaussian posterior over ``b x q`` points.

        Args:
            X: ``(*b, q, d)`` inputs in original units.
            output_indices: outputs to return (all if None).
            observation_noise: False for the latent f; True adds sigma_k^2 I; a tensor ``(*b, q, m)``
                adds that noise (outcome-transformed units).
            posterior_transform: an optional BoTorch ``PosteriorTransform``.

        Returns:
            A ``GPyTorchPosterior`` in original units, shape ``(*b, q, m)``.
        """
        gp = require("gpytorch.distributions", "vbll_bo")
        posteriors = require("botorch.posteriors.gpytorch", "vbll_bo")
        if X.dim() < 2:
            raise ValueError(f"X must be (*b, q, d), got {tuple(X.shape)}")
        phi = self.features(X)
        mu, cov = predictive_from(*self.gaussian(), phi)  # (*b, q, m), (*b, m, q, q)
        cov = cov.expand(*mu.shape[:-2], *cov.shape[-3:])  # fantasies: the covariance does not depend on y
        eye = torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        if isinstance(observation_noise, Tensor):
            cov = cov + torch.diag_embed(observation_noise.to(cov).transpose(-1, -2).expand(cov.shape[:-1]))
        elif observation_noise:
            cov = cov + self.head.noise_std().pow(2)[:, None, None] * eye
        idx = list(range(self._m)) if output_indices is None else list(output_indices)
        mu, cov = mu[..., idx], cov[..., idx, :, :]
        # Phi S Phi^T has rank <= N: a lazy operator lets GPyTorch factor it with its PSD-safe jitter
        lazy = require("linear_operator", "vbll_bo").to_linear_operator
        if len(idx) == 1:
            mvn = gp.MultivariateNormal(mu[..., 0], lazy(cov[..., 0, :, :]))
        else:
            batch = gp.MultivariateNormal(mu.transpose(-1, -2), lazy(cov))  # (*b, m) batch of q-dim MVNs
            mvn = gp.MultitaskMultivariateNormal.from_batch_mvn(batch, task_dim=-1)
        post = posteriors.GPyTorchPosterior(mvn)
        if hasattr(self, "outcome_transform"):
            tf = (
                self.outcome_transform
                if output_indices is None
                else self.outcome_transform.subset_output(idx)
            )
            post = tf.untransform_posterior(post, X=X)
        if posterior_transform is not None:
            return posterior_transform(post)
        return post

    def _copy(self) -> VBLLModel:
        cond, self._cond = self._cond, None
        try:
            new = copy.deepcopy(self)
        finally:
            self._cond = cond
        new._cond = cond
        return new

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs: Any
    ) -> VBLLModel:
        """A copy conditioned on (X, Y) by the exact recursive update (features and sigma frozen).

        Args:
            X: ``(*b, n, d)`` inputs in original units.
            Y: ``(*s, *b, n, m)`` outputs in original units (leading fantasy dimensions allowed).
            noise: optional observation noise variances ``(*b, n, m)`` in outcome-transformed units;
                default sigma_k^2.

        Returns:
            The conditioned model. Unbatched observations are also appended to its data and written
            into its head; batched ones (fantasies) give a model with that batch shape.
        """
        _check_data(X, Y, self._dim, self._m)
        Yt = Y.to(self.train_X)
        if hasattr(self, "outcome_transform"):
            self.outcome_transform.eval()
            Yt, _ = self.outcome_transform(Yt)
        noise_var = self.head.noise_std().pow(2) if noise is None else noise.to(Yt)
        phi = self.features(X)
        mean, cov = recursive_update(*self.gaussian(), phi, Yt, noise_var)
        new = self._copy()
        plain = X.dim() == 2 and Y.dim() == 2 and self._cond is None
        if plain and noise is None and self.head.parameterization in ("dense", "dense_precision"):
            new.append_data(X, Y)
            new.head.set_gaussian(mean.detach(), cov.detach())
        new._cond = (mean, cov)
        return new

    def update(self, X: Tensor, Y: Tensor) -> None:
        """In place: append (X, Y) and condition the head on it recursively (the continual step)."""
        _check_data(X, Y, self._dim, self._m)
        if X.dim() != 2 or Y.dim() != 2:
            raise ValueError("update takes unbatched (n, d) and (n, m) observations")
        Xt, Yt = self.transform_data(X, Y)
        self.append_data(X, Y)
        with torch.no_grad():
            self.head.condition(self.backbone(Xt), Yt)
        self._cond = None

    def subset_output(self, idcs: list[int]) -> VBLLModel:
        """A copy restricted to the outputs ``idcs``."""
        new = self._copy()
        idx = torch.as_tensor(idcs, dtype=torch.long)
        h = new.head
        with torch.no_grad():
            for name in ("mean", "cov_logdiag", "cov_offdiag", "cov_factor", "log_noise"):
                if hasattr(h, name):
                    setattr(h, name, nn.Parameter(getattr(h, name)[idx].clone()))
        h.out_features = new._m = len(idcs)
        new.train_Y, new.train_targets_transformed = (
            new.train_Y[:, idx],
            new.train_targets_transformed[:, idx],
        )
        if hasattr(new, "outcome_transform"):
            new.outcome_transform = new.outcome_transform.subset_output(list(idcs))
        if new._cond is not None:
            new._cond = (new._cond[0][..., idx, :], new._cond[1][..., idx, :, :])
        return new

    # ---- training and sampling -----------------------------------------------------------------
    def fit(
        self,
        config: FitConfig | None = None,
        warm_start: Mapping[str, Any] | None = None,
        *,
        val_X: Tensor | None = None,
        val_Y: Tensor | None = None,
        progress: ProgressFn | None = None,
    ) -> FitResult:
        """Train backbone and head (see :func:`fit_vbll`); lambda is re-set to kl_scale / T.

        Without ``warm_start`` this re-initialises everything (backbone, head and noise) from the
        model's generator before training; pass ``warm_start=model.state_dict()`` to continue from
        the current state instead.

        The default ``FitConfig`` is the port's: up to 10,000 epochs, patience 100, lr 1e-3, so a
        fit can take minutes. With the default 64-wide backbone an epoch has ceil(T / 32) gradient
        steps of 6-20 ms each on one CPU core: on 20 Branin points the default fit ran 6,640 epochs
        in 41 s, on 100 points 2,119 epochs in 170 s (a shared 2-core machine). Progress goes to
        the ``progress`` callback after every epoch and to this package's logger (INFO, at most
        every 10 s).

        Args:
            config: training settings; default ``FitConfig(kl_scale=self.kl_scale)``.
            warm_start: a ``state_dict`` to start from (None: fresh initialisation of everything).
            val_X: optional validation inputs for early stopping.
            val_Y: their targets.
            progress: optional callback ``(stage, done, total)``, called as
                ``("fit epoch", epoch, max_epochs)`` after every epoch.

        Returns:
            A :class:`FitResult` (gradient steps, epochs, best loss, lambda, seconds).
        """
        config = config or FitConfig(kl_scale=self.kl_scale)
        return fit_vbll(
            self, config, warm_start=warm_start, val_X=val_X, val_Y=val_Y, generator=self._generator,
            progress=progress,
        )  # fmt: skip

    def sample_path(self, generator: torch.Generator | None = None) -> ThompsonPath:
        """One Thompson sample path f(x) = w^T phi(x) with a single w ~ q(w) (no observation noise)."""
        if self._cond is not None and self._cond[0].dim() > 2:
            raise ValueError("sample paths need an unbatched model")
        mean, cov = self.gaussian()
        with torch.no_grad():
            L = torch.linalg.cholesky(
                cov + 1e-12 * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
            )
            z = torch.randn(mean.shape, generator=generator, dtype=mean.dtype).to(mean.device)
            w = mean + (L @ z.unsqueeze(-1)).squeeze(-1)  # (m, N)
        return ThompsonPath(self, w.detach())


class ThompsonPath(nn.Module):
    """A sample path f(x) = w^T phi(x) of a :class:`VBLLModel`, in original output units.

    Args:
        model: the surrogate (its backbone and transforms are shared, not copied).
        weights: the sampled w, ``(m, N)``.

    Shape:
        ``(*b, d) -> (*b, m)``.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> X = torch.rand(8, 2, dtype=torch.float64, generator=g)
        >>> model = VBLLModel(X, X[:, :1], width=8, depth=0, generator=g)
        >>> model.sample_path(g)(X).shape
        torch.Size([8, 1])
    """

    def __init__(self, model: VBLLModel, weights: Tensor) -> None:
        super().__init__()
        self._model = [model]  # not registered as a submodule: the path owns only w
        self.register_buffer("weights", weights)

    def forward(self, X: Tensor) -> Tensor:
        model = self._model[0]
        f = model.features(X) @ self.weights.transpose(-1, -2)  # (*b, m)
        if hasattr(model, "outcome_transform"):
            f, _ = model.outcome_transform.untransform(f.unsqueeze(-2))
            f = f.squeeze(-2)
        return f
