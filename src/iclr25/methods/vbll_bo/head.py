"""The variational Bayesian last layer (VBLL) regression head and its exact Gaussian updates.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477. The head
is the regression VBLL of Harrison, Willes, Snoek, *Variational Bayesian Last Layers* (ICLR 2024).

Implements:
    - the model y = W phi(x) + eps, eps ~ N(0, diag sigma^2), with sigma stored as a log standard
      deviation, prior w_k ~ N(0, s0 I), s0 = prior_scale / N, and q(w_k) = N(w_bar_k, S_k) (Sec. 3);
    - the training objective (the negative of Eq. 6 of the VBLL paper as used in Sec. 3):
      mean_t[log N(y_t | w_bar^T phi_t, sigma^2) - phi_t^T S phi_t / (2 sigma^2)]
      + lambda [nu logdet Sigma^-1 - psi/2 tr Sigma^-1 - KL(q || p)], lambda = kl_scale / T;
    - the closed-form Bayesian linear regression posterior that maximises it when the features
      and sigma are fixed (Sec. 4, "exact conditioning"), and its recursive (Kalman) form, in
      covariance form and as a rank-1 Cholesky update of the precision.

References:
    arXiv:2412.09477, Sec. 3-4.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor, nn

from iclr25.common import rng

__all__ = ["VBLLHead", "blr_posterior", "cholesky_rank1_update", "recursive_update"]

Ablation = Literal["no_trace", "noise_as_variance"] | None


def blr_posterior(phi: Tensor, y: Tensor, prior_var: float, noise_std: Tensor) -> tuple[Tensor, Tensor]:
    """Closed-form posterior of Bayesian linear regression, one independent row per output.

    S_k^-1 = I / s0 + Phi^T Phi / sigma_k^2,  w_bar_k = S_k Phi^T y_k / sigma_k^2.

    Args:
        phi: features Phi.
        y: targets.
        prior_var: s0, the prior variance of every weight.
        noise_std: sigma_k per output.

    Returns:
        ``(mean, cov)``: w_bar and S.

    Shape:
        phi ``(T, N)``, y ``(T, m)``, noise_std ``(m,)`` -> mean ``(m, N)``, cov ``(m, N, N)``.

    Example:
        >>> phi = torch.eye(2, dtype=torch.float64)
        >>> mean, cov = blr_posterior(phi, torch.ones(2, 1, dtype=torch.float64), 1.0, torch.ones(1))
        >>> mean.round(decimals=6).tolist(), cov[0].diagonal().round(decimals=6).tolist()
        ([[0.5, 0.5]], [0.5, 0.5])
    """
    n_feat = phi.shape[-1]
    eye = torch.eye(n_feat, dtype=phi.dtype, device=phi.device)
    noise_var = noise_std.to(phi).pow(2)  # (m,)
    gram = phi.transpose(-1, -2) @ phi  # (N, N)
    prec = eye / prior_var + gram.unsqueeze(0) / noise_var[:, None, None]  # (m, N, N)
    chol = torch.linalg.cholesky(prec)
    cov = torch.cholesky_inverse(chol)
    rhs = (phi.transpose(-1, -2) @ y).transpose(-1, -2) / noise_var[:, None]  # (m, N)
    mean = torch.cholesky_solve(rhs.unsqueeze(-1), chol).squeeze(-1)
    return mean, 0.5 * (cov + cov.transpose(-1, -2))


def recursive_update(
    mean: Tensor, cov: Tensor, phi: Tensor, y: Tensor, noise_var: Tensor
) -> tuple[Tensor, Tensor]:
    """Absorb points one at a time into a Gaussian over the last layer (Kalman update, O(N^2) each).

    g = S phi / (sigma^2 + phi^T S phi);  w_bar <- w_bar + g (y - w_bar^T phi);  S <- S - g phi^T S.

    Args:
        mean: w_bar.
        cov: S.
        phi: features of the new points.
        y: the new targets.
        noise_var: sigma_k^2 per output (or per point and output).

    Returns:
        The updated ``(mean, cov)``; leading batch dimensions broadcast (batched fantasies).

    Shape:
        mean ``(*b, m, N)``, cov ``(*b, m, N, N)``, phi ``(*b, n, N)``, y ``(*b, n, m)``,
        noise_var ``(m,)`` or ``(*b, n, m)``.

    Example:
        >>> m0, s0 = torch.zeros(1, 2, dtype=torch.float64), torch.eye(2, dtype=torch.float64)[None]
        >>> phi = torch.eye(2, dtype=torch.float64)
        >>> m1, s1 = recursive_update(m0, s0, phi, torch.ones(2, 1, dtype=torch.float64), torch.ones(1))
        >>> m1.tolist()
        [[0.5, 0.5]]
    """
    n = phi.shape[-2]
    noise_var = noise_var.to(phi)
    if noise_var.dim() == 1:
        noise_var = noise_var.expand(*phi.shape[:-2], n, noise_var.shape[-1])
    for i in range(n):
        f = phi[..., i, :].unsqueeze(-2)  # (*b, 1, N): shared by all m outputs
        s_phi = (cov @ f.unsqueeze(-1)).squeeze(-1)  # (*b, m, N)
        denom = noise_var[..., i, :] + (s_phi * f).sum(-1)  # (*b, m)
        gain = s_phi / denom.unsqueeze(-1)  # (*b, m, N)
        innov = y[..., i, :] - (mean * f).sum(-1)  # (*b, m)
        mean = mean + gain * innov.unsqueeze(-1)
        cov = cov - gain.unsqueeze(-1) * s_phi.unsqueeze(-2)  # S - g (S phi)^T
        cov = 0.5 * (cov + cov.transpose(-1, -2))
    return mean, cov


def cholesky_rank1_update(chol: Tensor, x: Tensor) -> Tensor:
    """Lower Cholesky factor of ``L L^T + x x^T`` from that of ``L L^T`` in O(N^2).

    Args:
        chol: lower-triangular L with a positive diagonal.
        x: the update vector.

    Returns:
        The updated lower-triangular factor.

    Shape:
        chol ``(*b, N, N)``, x ``(*b, N)`` -> ``(*b, N, N)``.

    Example:
        >>> L = torch.eye(2, dtype=torch.float64)
        >>> x = torch.tensor([1.0, 1.0], dtype=torch.float64)
        >>> new = cholesky_rank1_update(L, x)
        >>> torch.allclose(new @ new.T, torch.eye(2, dtype=torch.float64) + torch.outer(x, x))
        True
    """
    L = chol.clone()
    x = x.clone()
    n = L.shape[-1]
    for k in range(n):
        lkk = L[..., k, k]
        r = torch.sqrt(lkk * lkk + x[..., k] * x[..., k])
        c, s = r / lkk, x[..., k] / lkk
        L[..., k, k] = r
        if k + 1 < n:
            col = (L[..., k + 1 :, k] + s.unsqueeze(-1) * x[..., k + 1 :]) / c.unsqueeze(-1)
            x[..., k + 1 :] = c.unsqueeze(-1) * x[..., k + 1 :] - s.unsqueeze(-1) * col
            L[..., k + 1 :, k] = col
    return L


class VBLLHead(nn.Module):
    """Variational Bayesian last layer for regression, in float64.

    q(w_k) = N(w_bar_k, S_k) for each output k; the covariance is stored as a dense Cholesky factor
    of S (``"dense"``), of the precision S^-1 (``"dense_precision"``), as a diagonal, or as
    diagonal plus low rank. The noise is sigma = exp(``log_noise``), a standard deviation.

    Args:
        in_features: N, the feature width.
        out_features: m, the number of outputs.
        prior_scale: the prior variance is s0 = prior_scale / N (the port's and vbll 0.4.9's scaling).
            Larger values give wider, "messier" uncertainty; the default 1.0 suits standardised outputs.
        wishart_scale: psi, scale of the Wishart prior on the noise precision; with
            ``noise_init="port"`` it also sets the initial noise, log sigma ~ randn * log(psi).
        dof: Wishart degrees of freedom; nu = (dof + m + 1) / 2.
        parameterization: ``"dense"``, ``"dense_precision"``, ``"diagonal"`` or ``"lowrank"``.
        cov_rank: rank of the low-rank factor (``"lowrank"`` only).
        noise_init: ``"unit"`` (default) starts at log sigma = 0, i.e. sigma = 1 in standardised
            units; ``"port"`` draws log sigma ~ randn * log(psi) as the BoTorch port does, which
            starts some seeds at sigma of 5 to 400.
        clamp_noise_init: clamp the initial log sigma at >= 0 (``"port"`` only).
        generator: the random initialisation's generator.

    Shape:
        features ``(n, N)``, targets ``(n, m)``.

    References:
        arXiv:2412.09477, Sec. 3.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> head = VBLLHead(4, generator=g)
        >>> phi = torch.randn(10, 4, dtype=torch.float64, generator=g)
        >>> mean, cov = head.predictive(phi[:3])
        >>> tuple(mean.shape), tuple(cov.shape)
        ((3, 1), (1, 3, 3))
    """

    def __init__(
        self,
        in_features: int,
        out_features: int = 1,
        *,
        prior_scale: float = 1.0,
        wishart_scale: float = 0.01,
        dof: float = 1.0,
        parameterization: str = "dense",
        cov_rank: int | None = None,
        noise_init: str = "unit",
        clamp_noise_init: bool = True,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if noise_init not in ("unit", "port"):
            raise ValueError(f"noise_init must be 'unit' or 'port', got {noise_init!r}")
        if parameterization not in ("dense", "dense_precision", "diagonal", "lowrank"):
            raise ValueError(
                "parameterization must be 'dense', 'dense_precision', 'diagonal' or 'lowrank', "
                f"got {parameterization!r}"
            )
        if parameterization == "lowrank" and (cov_rank is None or cov_rank < 1):
            raise ValueError(f"cov_rank must be >= 1 for 'lowrank', got {cov_rank}")
        if in_features < 1 or out_features < 1:
            raise ValueError(f"in_features and out_features must be >= 1, got {in_features}, {out_features}")
        if prior_scale <= 0 or wishart_scale <= 0 or dof <= 0:
            raise ValueError("prior_scale, wishart_scale and dof must be > 0")
        self.in_features, self.out_features = in_features, out_features
        self.parameterization = parameterization
        self.prior_scale, self.wishart_scale = float(prior_scale), float(wishart_scale)
        self.dof = (float(dof) + out_features + 1.0) / 2.0  # nu
        self.cov_rank = cov_rank
        self.noise_init, self.clamp_noise_init = noise_init, clamp_noise_init
        opts = {"dtype": torch.float64}
        m, n = out_features, in_features
        self.mean = nn.Parameter(torch.zeros(m, n, **opts))
        self.cov_logdiag = nn.Parameter(torch.zeros(m, n, **opts))
        if parameterization in ("dense", "dense_precision"):
            self.cov_offdiag = nn.Parameter(torch.zeros(m, n, n, **opts))
        elif parameterization == "lowrank":
            self.cov_factor = nn.Parameter(torch.zeros(m, n, int(cov_rank or 1), **opts))
        self.log_noise = nn.Parameter(torch.zeros(m, **opts))
        self.reset_parameters(generator)

    @property
    def prior_var(self) -> float:
        """s0 = prior_scale / N."""
        return self.prior_scale / self.in_features

    @torch.no_grad()
    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Random initialisation near the prior: w_bar ~ N(0, s0), S ~ s0 I, and the noise.

        The noise is log sigma = 0 (``noise_init="unit"``) or randn * log(psi) (``"port"``). The
        port's normal draw is made in both modes, so the two differ in the noise only and the rest
        of the generator's stream (minibatch order, Thompson paths) is the same.
        """
        # drawn on the generator's device (the CPU for a CPU generator), then moved to the head's
        opts = {"dtype": torch.float64, "device": self.mean.device, "generator": generator}
        m, n = self.out_features, self.in_features
        sd = math.sqrt(self.prior_var)
        self.mean.copy_(rng.randn(m, n, **opts) * sd)
        jitter = 1e-2 * rng.randn(m, n, **opts)
        if self.parameterization == "dense_precision":
            self.cov_logdiag.copy_(-math.log(sd) + jitter)  # Cholesky of the precision I / s0
            self.cov_offdiag.zero_()
        else:
            self.cov_logdiag.copy_(math.log(sd) + jitter)
            if self.parameterization == "dense":
                self.cov_offdiag.zero_()
            elif self.parameterization == "lowrank":
                self.cov_factor.copy_(1e-3 * sd * rng.randn(*self.cov_factor.shape, **opts))
        noise = rng.randn(m, **opts) * math.log(self.wishart_scale)
        if self.noise_init == "unit":
            self.log_noise.zero_()
        else:
            self.log_noise.copy_(noise.clamp(min=0.0) if self.clamp_noise_init else noise)

    # ---- the Gaussian q(w) -------------------------------------------------------------------
    def _tril(self) -> Tensor:
        return torch.tril(self.cov_offdiag, diagonal=-1) + torch.diag_embed(self.cov_logdiag.exp())

    def noise_std(self) -> Tensor:
        """sigma_k = exp(log_noise), shape ``(m,)``."""
        return self.log_noise.exp()

    def covariance(self) -> Tensor:
        """S_k for each output, shape ``(m, N, N)``."""
        p = self.parameterization
        if p == "dense":
            L = self._tril()
            return L @ L.transpose(-1, -2)
        if p == "dense_precision":
            return torch.cholesky_inverse(self._tril())
        diag = torch.diag_embed(self.cov_logdiag.mul(2).exp())
        if p == "diagonal":
            return diag
        return self.cov_factor @ self.cov_factor.transpose(-1, -2) + diag

    def logdet_covariance(self) -> Tensor:
        """log det S_k, shape ``(m,)``."""
        p = self.parameterization
        if p in ("dense", "diagonal"):
            return 2.0 * self.cov_logdiag.sum(-1)
        if p == "dense_precision":
            return -2.0 * self.cov_logdiag.sum(-1)
        return torch.linalg.slogdet(self.covariance())[1]

    def kl(self, cov: Tensor | None = None) -> Tensor:
        """KL(q || p) summed over outputs, without its constant -N/2 per output.

        KL = 1/2 sum_k [ |w_bar_k|^2 / s0 + tr S_k / s0 + N log s0 - log det S_k ].
        """
        s0, n = self.prior_var, self.in_features
        cov = self.covariance() if cov is None else cov
        trace = cov.diagonal(dim1=-2, dim2=-1).sum(-1)
        mse = self.mean.pow(2).sum(-1)
        return 0.5 * (mse / s0 + trace / s0 + n * math.log(s0) - self.logdet_covariance()).sum()

    def gaussian(self) -> tuple[Tensor, Tensor]:
        """``(w_bar, S)`` with shapes ``(m, N)`` and ``(m, N, N)``."""
        return self.mean, self.covariance()

    # ---- objective and predictive ------------------------------------------------------------
    def loss(self, phi: Tensor, y: Tensor, reg_weight: float, *, ablation: Ablation = None) -> Tensor:
        """Negative VBLL objective on a minibatch (Eq. 6 of the VBLL paper, Sec. 3 here).

        Args:
            phi: features of the minibatch.
            y: targets of the minibatch.
            reg_weight: lambda; the exact ELBO needs lambda = kl_scale / T with kl_scale = 1.
            ablation: negative controls only: ``"no_trace"`` drops the phi^T S phi term,
                ``"noise_as_variance"`` reads exp(log_noise) as a variance instead of a std.

        Returns:
            A scalar loss.

        Shape:
            phi ``(n, N)``, y ``(n, m)``.
        """
        if ablation not in (None, "no_trace", "noise_as_variance"):
            raise ValueError(f"unknown ablation {ablation!r}")
        _check_xy(phi, y, self.in_features, self.out_features)
        sigma = self.noise_std()
        log_sigma = self.log_noise
        if ablation == "noise_as_variance":  # the broken convention: the std parameter is a variance
            sigma, log_sigma = sigma.sqrt(), 0.5 * self.log_noise
        var = sigma.pow(2)  # (m,)
        cov = self.covariance()
        mu = phi @ self.mean.transpose(-1, -2)  # (n, m)
        loglik = -0.5 * math.log(2 * math.pi) - log_sigma - 0.5 * (y - mu).pow(2) / var
        quad = torch.einsum("ni,kij,nj->nk", phi, cov, phi)  # phi^T S_k phi, (n, m)
        trace = 0.0 if ablation == "no_trace" else 0.5 * quad / var  # each output by its own sigma_k^2
        data = (loglik - trace).sum(-1).mean()
        wishart = self.dof * (-2.0 * log_sigma).sum() - 0.5 * self.wishart_scale * (1.0 / var).sum()
        return -(data + reg_weight * (wishart - self.kl(cov)))

    def predictive(self, phi: Tensor, joint: bool = True) -> tuple[Tensor, Tensor]:
        """Latent predictive N(Phi w_bar_k, Phi S_k Phi^T) (no observation noise).

        Args:
            phi: features.
            joint: full covariance over the points if True, else marginal variances.

        Returns:
            ``(mean, cov)`` with mean ``(*b, n, m)`` and cov ``(*b, m, n, n)`` (joint) or
            variances ``(*b, n, m)``.
        """
        mean, cov = self.gaussian()
        return predictive_from(mean, cov, phi, joint=joint)

    # ---- exact conditioning --------------------------------------------------------------------
    @torch.no_grad()
    def set_gaussian(self, mean: Tensor, cov: Tensor) -> None:
        """Store a Gaussian (w_bar, S) in the head's parameters (dense forms only)."""
        if self.parameterization not in ("dense", "dense_precision"):
            raise ValueError(
                f"exact conditioning needs parameterization 'dense' or 'dense_precision', "
                f"not {self.parameterization!r}"
            )
        cov = 0.5 * (cov + cov.transpose(-1, -2))
        if self.parameterization == "dense":
            L = torch.linalg.cholesky(cov)
        else:
            L = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(cov)))
        self._set_tril(L)
        self.mean.copy_(mean)

    @torch.no_grad()
    def _set_tril(self, L: Tensor) -> None:
        self.cov_logdiag.copy_(L.diagonal(dim1=-2, dim2=-1).log())
        self.cov_offdiag.copy_(torch.tril(L, diagonal=-1))

    @torch.no_grad()
    def set_exact_posterior(self, phi: Tensor, y: Tensor) -> None:
        """Set q(w) to the closed-form BLR posterior on (Phi, Y) at the current sigma."""
        _check_xy(phi, y, self.in_features, self.out_features)
        self.set_gaussian(*blr_posterior(phi, y, self.prior_var, self.noise_std()))

    @torch.no_grad()
    def condition(self, phi: Tensor, y: Tensor) -> None:
        """Absorb new points recursively (features and sigma fixed), in place.

        In covariance form this is the Kalman update of :func:`recursive_update`; in precision form
        Lambda <- Lambda + phi phi^T / sigma^2 (a rank-1 Cholesky update per point and output)
        with the same mean update.

        Args:
            phi: features of the new points, ``(n, N)``.
            y: their targets, ``(n, m)``.
        """
        _check_xy(phi, y, self.in_features, self.out_features)
        if self.parameterization == "dense":
            mean, cov = recursive_update(self.mean, self.covariance(), phi, y, self.noise_std().pow(2))
            self.set_gaussian(mean, cov)
            return
        if self.parameterization != "dense_precision":
            self.set_gaussian(self.mean, self.covariance())  # raises the clear error
        sigma = self.noise_std()  # (m,)
        L = self._tril()  # precision Cholesky, (m, N, N)
        mean = self.mean.clone()
        for i in range(phi.shape[0]):
            f = phi[i].expand(self.out_features, -1)  # (m, N)
            s_phi = torch.cholesky_solve(f.unsqueeze(-1), L).squeeze(-1)  # S phi, (m, N)
            denom = sigma.pow(2) + (s_phi * f).sum(-1)
            mean = mean + s_phi / denom.unsqueeze(-1) * (y[i] - (mean * f).sum(-1)).unsqueeze(-1)
            L = cholesky_rank1_update(L, f / sigma.unsqueeze(-1))
        self._set_tril(L)
        self.mean.copy_(mean)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"parameterization={self.parameterization!r}, prior_scale={self.prior_scale}, "
            f"wishart_scale={self.wishart_scale}"
        )


def predictive_from(mean: Tensor, cov: Tensor, phi: Tensor, joint: bool = True) -> tuple[Tensor, Tensor]:
    """N(Phi w_bar_k, Phi S_k Phi^T) for (possibly batched) Gaussians; see :meth:`VBLLHead.predictive`."""
    mu = (phi.unsqueeze(-3) @ mean.unsqueeze(-1)).squeeze(-1).transpose(-1, -2)  # (*b, n, m)
    if joint:
        f = phi.unsqueeze(-3)  # (*b, 1, n, N)
        return mu, f @ cov @ f.transpose(-1, -2)  # (*b, m, n, n)
    var = torch.einsum("...ni,...kij,...nj->...nk", phi, cov, phi)
    return mu, var


def _check_xy(phi: Tensor, y: Tensor, n_feat: int, m: int) -> None:
    if phi.dim() != 2 or phi.shape[-1] != n_feat:
        raise ValueError(f"features must have shape (n, {n_feat}), got {tuple(phi.shape)}")
    if y.dim() != 2 or y.shape != (phi.shape[0], m):
        raise ValueError(f"targets must have shape ({phi.shape[0]}, {m}), got {tuple(y.shape)}")
    if phi.dtype != y.dtype:
        raise TypeError(f"features and targets must share a dtype, got {phi.dtype} and {y.dtype}")
    if torch.isnan(y).any():
        raise ValueError("targets contain NaN")
    if torch.isinf(y).any():
        raise ValueError("targets contain inf; every value must be finite")
