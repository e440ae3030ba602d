"""Closed-form identities of the VBLL head: BLR posterior, recursive updates, GP equality, KL, loss."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.methods.vbll_bo import (
    HeadConfig,
    VBLLHead,
    blr_posterior,
    cholesky_rank1_update,
    exact_gp_linear,
    recursive_update,
)

F64 = torch.float64


def _data(T: int = 15, N: int = 4, m: int = 1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    phi = torch.randn(T, N, generator=g, dtype=F64)
    y = phi @ torch.randn(N, m, generator=g, dtype=F64) + 0.1 * torch.randn(T, m, generator=g, dtype=F64)
    return phi, y


def _head(N: int, m: int = 1, sigma: float = 0.3, **kw: object) -> VBLLHead:
    head = VBLLHead(N, m, generator=torch.Generator().manual_seed(1), **kw)  # type: ignore[arg-type]
    with torch.no_grad():
        head.log_noise.fill_(math.log(sigma))
    return head


def test_blr_posterior_matches_hand_formula() -> None:
    phi, y = _data()
    s0, sigma = 0.25, 0.3
    mean, cov = blr_posterior(phi, y, s0, torch.tensor([sigma], dtype=F64))
    prec = torch.eye(4, dtype=F64) / s0 + phi.T @ phi / sigma**2
    want_cov = torch.linalg.inv(prec)
    torch.testing.assert_close(cov[0], want_cov, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(mean[0], want_cov @ phi.T @ y[:, 0] / sigma**2, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("parameterization", ["dense", "dense_precision"])
def test_recursive_updates_equal_batch_posterior(parameterization: str) -> None:
    phi, y = _data(T=30, N=5, m=2)
    head = _head(5, 2, parameterization=parameterization)
    s0 = head.prior_var
    head.set_gaussian(torch.zeros(2, 5, dtype=F64), s0 * torch.eye(5, dtype=F64).expand(2, 5, 5))
    for t in range(30):
        head.condition(phi[t : t + 1], y[t : t + 1])
    mean, cov = blr_posterior(phi, y, s0, head.noise_std().detach())
    assert (head.mean - mean).abs().max() <= 1e-8
    assert (head.covariance() - cov).abs().max() <= 1e-8
    # the functional covariance form too, in one call
    prior = s0 * torch.eye(5, dtype=F64).expand(2, 5, 5)
    m2, c2 = recursive_update(torch.zeros(2, 5, dtype=F64), prior, phi, y,
                              head.noise_std().detach().pow(2))  # fmt: skip
    assert (m2 - mean).abs().max() <= 1e-8 and (c2 - cov).abs().max() <= 1e-8


def test_cholesky_rank1_update() -> None:
    g = torch.Generator().manual_seed(0)
    A = torch.randn(5, 5, generator=g, dtype=F64)
    A = A @ A.T + torch.eye(5, dtype=F64)
    x = torch.randn(5, generator=g, dtype=F64)
    L = cholesky_rank1_update(torch.linalg.cholesky(A), x)
    torch.testing.assert_close(L @ L.T, A + torch.outer(x, x))
    assert torch.equal(L, torch.tril(L))


def test_head_optimum_is_closed_form_and_broken_variants_are_not() -> None:
    phi, y = _data(T=15, N=4)
    sigma = 0.3
    mean_star, cov_star = blr_posterior(phi, y, 1.0 / 4, torch.tensor([sigma], dtype=F64))

    def optimise(reg: float, ablation: str | None = None) -> float:
        head = _head(4, sigma=sigma)
        head.log_noise.requires_grad_(False)
        params = [head.mean, head.cov_logdiag, head.cov_offdiag]
        opt = torch.optim.LBFGS(params, max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-16,
                                line_search_fn="strong_wolfe")  # fmt: skip

        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = head.loss(phi, y, reg, ablation=ablation)  # type: ignore[arg-type]
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            return max(float((head.mean - mean_star).norm() / mean_star.norm()),
                       float((head.covariance() - cov_star).norm() / cov_star.norm()))  # fmt: skip

    assert optimise(1.0 / 15) <= 1e-3
    assert optimise(1.0) > 1e-2
    assert optimise(1.0 / 15, "no_trace") > 1e-2
    assert optimise(1.0 / 15, "noise_as_variance") > 1e-2


def test_predictive_equals_gpytorch_linear_kernel_gp() -> None:
    phi, y = _data(T=20, N=6)
    phi_test = torch.randn(7, 6, generator=torch.Generator().manual_seed(5), dtype=F64)
    head = _head(6, sigma=0.2, prior_scale=3.0)
    head.set_exact_posterior(phi, y)
    with torch.no_grad():
        mu, var = head.predictive(phi_test, joint=False)
    gp_mu, gp_var = exact_gp_linear(phi, y[:, 0], phi_test, head.prior_var, 0.04)
    assert (mu[:, 0] - gp_mu).abs().max() <= 1e-6
    assert (var[:, 0] - gp_var).abs().max() <= 1e-6


@pytest.mark.parametrize("parameterization", ["dense", "dense_precision", "diagonal", "lowrank"])
def test_kl_equals_analytic_gaussian_kl_up_to_constant(parameterization: str) -> None:
    head = VBLLHead(
        4, 2, parameterization=parameterization, cov_rank=2, generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        head.cov_logdiag.add_(0.3)
        if hasattr(head, "cov_offdiag"):
            head.cov_offdiag.normal_(0, 0.1, generator=torch.Generator().manual_seed(2))
    mean, cov = head.gaussian()
    q = torch.distributions.MultivariateNormal(mean, covariance_matrix=cov)
    p = torch.distributions.MultivariateNormal(
        torch.zeros_like(mean), head.prior_var * torch.eye(4, dtype=F64)
    )
    exact = torch.distributions.kl_divergence(q, p).sum()
    # the dropped constant is -N/2 per output
    torch.testing.assert_close(head.kl() - 2 * 4 / 2, exact)


def test_loss_terms_by_hand() -> None:
    phi, y = _data(T=6, N=3)
    head = _head(3, sigma=0.5)
    reg = 0.2
    mean, cov = head.gaussian()
    mu = phi @ mean[0]
    ll = -0.5 * math.log(2 * math.pi) - math.log(0.5) - 0.5 * (y[:, 0] - mu) ** 2 / 0.25
    tr = 0.5 * torch.einsum("ni,ij,nj->n", phi, cov[0], phi) / 0.25
    nu = (1.0 + 1 + 1) / 2
    wishart = nu * (-2 * math.log(0.5)) - 0.5 * 0.01 * (1 / 0.25)
    want = -((ll - tr).mean() + reg * (wishart - head.kl()))
    torch.testing.assert_close(head.loss(phi, y, reg), want)


def test_loss_equals_vbll_regression() -> None:
    vbll = pytest.importorskip("vbll")
    phi, y = _data(T=9, N=4)
    head = VBLLHead(
        4, 1, prior_scale=2.0, wishart_scale=0.05, dof=2.0, generator=torch.Generator().manual_seed(3)
    )
    with torch.no_grad():
        head.cov_offdiag.normal_(0, 0.1, generator=torch.Generator().manual_seed(4))
    ref = vbll.Regression(
        4, 1, 0.3, parameterization="dense", prior_scale=2.0, wishart_scale=0.05, dof=2.0
    ).double()
    with torch.no_grad():
        ref.W_mean.copy_(head.mean)
        ref.W_logdiag.copy_(head.cov_logdiag)
        ref.W_offdiag.copy_(head.cov_offdiag)
        ref.noise_logdiag.copy_(head.log_noise)
    torch.testing.assert_close(head.loss(phi, y, 0.3), ref(phi).train_loss_fn(y))


def test_multi_output_trace_uses_each_outputs_noise() -> None:
    phi, y = _data(T=5, N=3, m=2)
    head = VBLLHead(3, 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        head.log_noise.copy_(torch.tensor([0.0, math.log(2.0)], dtype=F64))
    full = head.loss(phi, y, 0.0) - head.loss(phi, y, 0.0, ablation="no_trace")
    quad = torch.einsum("ni,kij,nj->nk", phi, head.covariance(), phi)
    want = (0.5 * quad / torch.tensor([1.0, 4.0], dtype=F64)).sum(-1).mean()
    torch.testing.assert_close(full, want)


def test_head_errors() -> None:
    with pytest.raises(ValueError, match="parameterization"):
        VBLLHead(3, parameterization="full")
    with pytest.raises(ValueError, match="parameterization"):
        HeadConfig(parameterization="full")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cov_rank"):
        VBLLHead(3, parameterization="lowrank")
    head = VBLLHead(3)
    phi, y = _data(T=4, N=3)
    with pytest.raises(ValueError, match="NaN"):
        head.loss(phi, torch.full_like(y, float("nan")), 0.1)
    with pytest.raises(ValueError, match="inf"):
        head.loss(phi, torch.full_like(y, float("inf")), 0.1)
    with pytest.raises(ValueError, match="shape"):
        head.loss(phi, y[:3], 0.1)
    with pytest.raises(ValueError, match="dense"):
        VBLLHead(3, parameterization="diagonal").condition(phi, y)


def test_noise_init_unit_by_default_and_port_on_request() -> None:
    assert HeadConfig().noise_init == "unit"
    unit = VBLLHead(3, 5, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(unit.noise_std(), torch.ones(5, dtype=F64))  # log sigma_0 = 0
    port = VBLLHead(3, 5, noise_init="port", generator=torch.Generator().manual_seed(0))
    assert float(port.noise_std().detach().max()) > 5.0  # the port's draw: some outputs start far above 1
    # the two differ in the noise only: the same generator stream gives the same q(w)
    torch.testing.assert_close(unit.mean, port.mean)
    torch.testing.assert_close(unit.cov_logdiag, port.cov_logdiag)
    with pytest.raises(ValueError, match="noise_init"):
        VBLLHead(3, noise_init="zero")
    with pytest.raises(ValueError, match="noise_init"):
        HeadConfig(noise_init="zero")  # type: ignore[arg-type]


def test_port_noise_init_is_a_clamped_log_std() -> None:
    head = VBLLHead(3, 5, wishart_scale=0.01, noise_init="port", generator=torch.Generator().manual_seed(0))
    assert (head.log_noise >= 0).all()
    raw = VBLLHead(
        3, 5, wishart_scale=0.01, noise_init="port", clamp_noise_init=False,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    torch.testing.assert_close(head.log_noise, raw.log_noise.clamp(min=0))
    torch.testing.assert_close(head.noise_std(), head.log_noise.exp())
