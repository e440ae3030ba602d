"""VBLLModel as a BoTorch model: joint posterior, noise, transforms, conditioning, training, hygiene."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from iclr25._core.config import to_dict
from iclr25.methods.vbll_bo import (
    ContinualConfig,
    ContinualVBLL,
    EarlyStopping,
    FitConfig,
    HeadConfig,
    VBLLModel,
    blr_posterior,
)

F64 = torch.float64


def _xy(n: int = 12, d: int = 2, m: int = 1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    Y = torch.cat([torch.sin(3 * X).sum(-1, keepdim=True) + k for k in range(m)], dim=-1)
    return X, Y


def _model(m: int = 1, transforms: bool = False, seed: int = 0, **kw: object) -> VBLLModel:
    X, Y = _xy(m=m, seed=seed)
    extra: dict[str, object] = {}
    if transforms:
        from botorch.models.transforms import Normalize, Standardize

        extra = {"input_transform": Normalize(2), "outcome_transform": Standardize(m)}
    model = VBLLModel(X, Y, width=8, depth=1, generator=torch.Generator().manual_seed(seed), **extra, **kw)
    model.fit(FitConfig(max_epochs=5))
    return model


def test_posterior_shapes_joint_covariance_and_noise() -> None:
    model = _model()
    X = torch.rand(4, 3, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    post = model.posterior(X)
    assert post.mean.shape == (4, 3, 1)
    cov = post.mvn.covariance_matrix
    assert cov.shape == (4, 3, 3)
    with torch.no_grad():
        phi = model.features(X)
        _, S = model.gaussian()
        torch.testing.assert_close(cov.detach(), phi @ S[0] @ phi.transpose(-1, -2))
        assert torch.linalg.eigvalsh(cov).min() >= -1e-10
        assert cov[..., 0, 1].abs().max() > 0  # not diagonal
        noisy = model.posterior(X, observation_noise=True).mvn.covariance_matrix
        sigma2 = model.head.noise_std().pow(2)
        torch.testing.assert_close(noisy - cov, sigma2 * torch.eye(3, dtype=F64).expand(4, 3, 3))
    one = model.posterior(X[0, :1])  # a single q = 1 point
    assert one.mean.shape == (1, 1) and one.variance.shape == (1, 1)


def test_output_indices_and_scalarized_transform() -> None:
    from botorch.acquisition.objective import ScalarizedPosteriorTransform

    model = _model(m=2)
    X = torch.rand(5, 2, dtype=F64, generator=torch.Generator().manual_seed(1))
    full = model.posterior(X)
    assert full.mean.shape == (5, 2) and model.num_outputs == 2
    sub = model.posterior(X, output_indices=[1])
    torch.testing.assert_close(sub.mean[:, 0], full.mean[:, 1])
    w = torch.tensor([0.5, 2.0], dtype=F64)
    scal = model.posterior(X, posterior_transform=ScalarizedPosteriorTransform(w))
    torch.testing.assert_close(scal.mean[:, 0], full.mean @ w)
    sm = model.subset_output([1])
    torch.testing.assert_close(sm.posterior(X).mean[:, 0], full.mean[:, 1])


def test_transforms_posterior_equals_manual_untransform() -> None:
    model = _model(transforms=True)
    X = (
        torch.rand(3, 2, dtype=F64, generator=torch.Generator().manual_seed(2)) * 2
    )  # outside the data box too
    post = model.posterior(X)
    Y = model.train_Y
    mu0, sd0 = Y.mean(), Y.std()
    lo, hi = model.train_X.min(0).values, model.train_X.max(0).values
    with torch.no_grad():
        phi = model.backbone((X - lo) / (hi - lo))
        mean, cov = model.gaussian()
        want_mean = (phi @ mean[0]) * sd0 + mu0
        want_cov = phi @ cov[0] @ phi.T * sd0**2
    torch.testing.assert_close(post.mean[:, 0].detach(), want_mean)
    torch.testing.assert_close(post.mvn.covariance_matrix.detach(), want_cov)


def test_condition_on_observations_equals_closed_form_refit() -> None:
    model = _model(transforms=True)
    with torch.no_grad():
        phi = model.backbone(model.train_inputs_transformed)
    model.head.set_exact_posterior(phi, model.train_targets_transformed)
    Xn, Yn = _xy(n=3, seed=7)
    new = model.condition_on_observations(Xn, Yn)
    assert new.train_X.shape == (15, 2) and model.train_X.shape == (12, 2)
    Xt, Yt = model.transform_data(Xn, Yn)  # frozen statistics
    with torch.no_grad():
        phi_all = torch.cat([phi, model.backbone(Xt)])
        y_all = torch.cat([model.train_targets_transformed, Yt])
        mean, cov = blr_posterior(phi_all, y_all, model.head.prior_var, model.head.noise_std())
        got_mean, got_cov = new.gaussian()
    assert (got_mean - mean).abs().max() < 1e-8 and (got_cov - cov).abs().max() < 1e-8


def test_fantasize_batched_shapes() -> None:
    from botorch.sampling import SobolQMCNormalSampler

    model = _model(transforms=True)
    X = torch.rand(5, 2, 2, dtype=F64, generator=torch.Generator().manual_seed(3))
    sampler = SobolQMCNormalSampler(torch.Size([4]), seed=0)
    fm = model.fantasize(X, sampler)
    assert fm.batch_shape == (4, 5)
    post = fm.posterior(torch.rand(5, 3, 2, dtype=F64))
    assert post.mean.shape == (4, 5, 3, 1)
    assert post.mvn.covariance_matrix.shape == (4, 5, 3, 3)
    assert model.batch_shape == torch.Size([])


def test_fit_resets_kl_weight_to_one_over_T() -> None:
    model = _model()
    assert model.kl_weight == pytest.approx(1 / 12)
    model.append_data(*_xy(n=4, seed=9))
    r = model.fit(FitConfig(max_epochs=2, kl_scale=2.0))
    assert r.kl_weight == model.kl_weight == pytest.approx(2.0 / 16)


def test_early_stopping_restores_deep_copied_best_state() -> None:
    lin = nn.Linear(1, 1)
    stop = EarlyStopping(patience=2)
    losses = [5.0, 3.0, 4.0, 4.5]
    values = [0.0, 1.0, 2.0, 3.0]
    stopped = []
    for loss, v in zip(losses, values, strict=True):
        with torch.no_grad():
            lin.weight.fill_(v)  # the state at this epoch
        stopped.append(stop.step(loss, lin))
    assert stopped == [False, False, False, True]
    with torch.no_grad():
        lin.weight.fill_(9.0)
    stop.restore(lin)
    assert float(lin.weight.detach()) == 1.0  # the best epoch's weights, not the live (last) ones


def test_warm_start_loads_the_given_state() -> None:
    model = _model()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.fit(FitConfig(max_epochs=1, lr=1e-300), warm_start=state)
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, state[k])
    with torch.no_grad():
        model.head.log_noise.fill_(2.0)
    model.fit(FitConfig(max_epochs=1, lr=1e-300))  # cold: everything re-initialised, noise included
    assert not torch.equal(model.head.mean, state["head.mean"])
    assert not torch.equal(model.backbone[0].weight, state["backbone.0.weight"])
    torch.testing.assert_close(model.head.log_noise, torch.zeros(1, dtype=F64))


def test_fit_reports_progress_by_callback_and_logging(monkeypatch, caplog) -> None:
    import logging

    from iclr25.methods.vbll_bo import training

    calls: list[tuple[str, int, int]] = []
    model = _model()
    with caplog.at_level(logging.DEBUG, logger=training.__name__):
        r = model.fit(FitConfig(max_epochs=4, patience=100), progress=lambda *a: calls.append(a))
    assert calls == [("fit epoch", e, 4) for e in range(1, 5)] and r.n_epochs == 4
    assert not any(rec.levelno == logging.INFO for rec in caplog.records)  # short fits stay quiet
    assert any("fit done" in rec.getMessage() for rec in caplog.records)
    caplog.clear()
    monkeypatch.setattr(training, "_LOG_EVERY_S", 0.0)
    with caplog.at_level(logging.INFO, logger=training.__name__):
        model.fit(FitConfig(max_epochs=3, patience=100))
    lines = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.INFO]
    assert len(lines) == 3 and lines[-1].startswith("VBLL fit: epoch 3 of at most 3")


def _branin_fit(seed: int, noise_init: str) -> tuple[float, float]:
    """The claim's BO fit (64 x 3 backbone, 300 epochs, patience 30, lr 1e-2) on 20 Sobol points of
    Branin; returns sigma and the RMSE of the posterior mean on those points, standardised units."""
    from botorch.models.transforms import Normalize, Standardize
    from botorch.utils.sampling import draw_sobol_samples

    from iclr25.methods.vbll_bo import benchmark

    problem = benchmark("branin")
    bounds = problem.bounds.to(F64)
    X = draw_sobol_samples(bounds=bounds, n=20, q=1, seed=seed).squeeze(-2)
    Y = problem(X).unsqueeze(-1)
    model = VBLLModel(
        X, Y, width=64, depth=3, head=HeadConfig(noise_init=noise_init),  # type: ignore[arg-type]
        input_transform=Normalize(2, bounds=bounds), outcome_transform=Standardize(1),
        generator=torch.Generator().manual_seed(seed),
    )  # fmt: skip
    model.fit(FitConfig(max_epochs=300, patience=30, lr=1e-2))
    with torch.no_grad():
        rmse = float(((model.posterior(X).mean - Y) / Y.std()).pow(2).mean().sqrt())
        return float(model.head.noise_std()), rmse


def test_default_noise_init_never_ends_predicting_noise_on_branin() -> None:
    """No seed of the default head ends predicting noise: sigma < 1 and RMSE < 0.6 on 5 seeds.

    Falsifier: the port's initialisation (``noise_init="port"``) starts seed 0 at sigma_0 = 33 and
    ends there predicting noise (sigma = 24, RMSE = 0.98), so the same rule fails on it.
    """
    from iclr25._core.seeding import claim_scope

    with claim_scope(0):  # one thread, as the claim runs (many threads on a shared machine crawl)
        fits = [_branin_fit(seed, "unit") for seed in range(5)]
        sigma, rmse = _branin_fit(0, "port")
    for seed, (s, e) in enumerate(fits):
        assert s < 1.0 and e < 0.6, (seed, s, e)
    assert not (sigma < 1.0 and rmse < 0.6), (sigma, rmse)


def test_continual_schedules_and_counters() -> None:
    model = _model(transforms=True)
    cl = ContinualVBLL(
        model, ContinualConfig(retrain="event", event_threshold=-1e9, max_gap=3), FitConfig(max_epochs=2)
    )
    cl.initial_fit()
    Xn, Yn = _xy(n=4, seed=5)
    out = [cl.observe(Xn[i : i + 1], Yn[i : i + 1]) for i in range(4)]
    assert out == ["recursive", "recursive", "retrain", "recursive"]
    assert cl.n_retrains == 2 and cl.n_recursive == 3 and cl.n_grad_steps == 2 * 2
    assert cl.n_grad_steps_initial == 2
    assert model.train_X.shape[0] == 16
    cl2 = ContinualVBLL(
        _model(), ContinualConfig(retrain="event", event_threshold=1e9), FitConfig(max_epochs=1)
    )
    assert cl2.observe(Xn[:1], Yn[:1]) == "retrain"


def test_seeded_determinism_and_state_dict_roundtrip(tmp_path) -> None:
    a, b = _model(seed=3), _model(seed=3)
    X = torch.rand(4, 2, dtype=F64)
    torch.testing.assert_close(a.posterior(X).mean, b.posterior(X).mean, rtol=0, atol=0)
    cfg = HeadConfig(prior_scale=2.0)
    (tmp_path / "head.json").write_text(json.dumps(to_dict(cfg)))
    assert HeadConfig(**json.loads((tmp_path / "head.json").read_text())) == cfg
    torch.save(a.state_dict(), tmp_path / "model.pt")
    c = _model(seed=99)
    c.load_state_dict(torch.load(tmp_path / "model.pt"))
    torch.testing.assert_close(c.posterior(X).mean, a.posterior(X).mean)


def test_user_backbone_paper_scale_path(tmp_path) -> None:
    X, Y = _xy()
    net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh()).double()
    model = VBLLModel(X, Y, backbone=net, generator=torch.Generator().manual_seed(0), device="cpu")
    model.fit(FitConfig(max_epochs=3, patience=100))
    torch.save(model.state_dict(), tmp_path / "surrogate.pt")
    net2 = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh()).double()
    again = VBLLModel(X, Y, backbone=net2)
    again.fit(FitConfig(max_epochs=1, lr=1e-300), warm_start=torch.load(tmp_path / "surrogate.pt"))
    torch.testing.assert_close(again.posterior(X).mean, model.posterior(X).mean)


def test_default_dtype_unchanged_and_float64_parameters() -> None:
    assert torch.get_default_dtype() == torch.float32
    model = _model()
    assert all(p.dtype == F64 for p in model.parameters())
    assert torch.get_default_dtype() == torch.float32


def test_bad_input_errors() -> None:
    X, Y = _xy()
    with pytest.raises(ValueError, match="NaN"):
        VBLLModel(X, torch.full_like(Y, float("nan")))
    Y_inf = Y.clone()
    Y_inf[3] = float("inf")
    with pytest.raises(ValueError, match="Y contains inf"):
        VBLLModel(X, Y_inf)
    with pytest.raises(ValueError, match="X contains inf"):
        VBLLModel(torch.full_like(X, float("-inf")), Y)
    with pytest.raises(ValueError, match="numbers of points"):
        VBLLModel(X, Y[:5])
    with pytest.raises(TypeError, match="dtype"):
        VBLLModel(X, Y.float())
    with pytest.raises(ValueError, match=r"\(n, d\)"):
        VBLLModel(X[0], Y[0])
    model = _model()
    with pytest.raises(ValueError, match="input dimension"):
        model.posterior(torch.rand(3, 5, dtype=F64))
    with pytest.raises(ValueError, match="NaN"):
        model.condition_on_observations(X[:1], torch.tensor([[float("nan")]], dtype=F64))
    with pytest.raises(ValueError, match="parameterization"):
        VBLLModel(X, Y, head=HeadConfig(parameterization="bogus"))  # type: ignore[arg-type]


def test_config_validation() -> None:
    from iclr25.methods.vbll_bo import ClaimConfig

    with pytest.raises(ValueError, match="retrain"):
        ContinualConfig(retrain="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="period"):
        ContinualConfig(period=0)
    with pytest.raises(ValueError, match="patience"):
        FitConfig(patience=0)
    with pytest.raises(ValueError, match="lr"):
        FitConfig(lr=0.0)
    with pytest.raises(ValueError, match="bo_iters"):
        ClaimConfig(bo_iters=0)
    with pytest.raises(ValueError, match="cov_rank"):
        HeadConfig(parameterization="lowrank")


def test_early_stopping_monitors_validation_nll_on_val_X() -> None:
    model = _model(transforms=True)
    vX, vY = _xy(n=6, seed=11)
    r = model.fit(FitConfig(max_epochs=4, patience=100), val_X=vX, val_Y=vY)
    with torch.no_grad():
        nll = float(model.head_nll(*model.transform_data(vX, vY)))
    assert r.best_loss == pytest.approx(nll, rel=1e-10)
    with pytest.raises(ValueError, match="val_Y"):
        model.fit(FitConfig(max_epochs=1), val_X=vX)


def test_float32_data_warns_like_botorch_and_float64_does_not() -> None:
    import warnings

    from botorch.exceptions import InputDataWarning

    X, Y = _xy()
    with pytest.warns(InputDataWarning, match=r"torch\.float32.*float64"):
        model = VBLLModel(X.float(), Y.float(), width=8, depth=1)
    assert model.train_X.dtype == F64  # computed in float64 after the warning
    with pytest.warns(InputDataWarning, match=r"torch\.float32"):
        model.condition_on_observations(X[:1].float(), Y[:1].float())
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputDataWarning)
        model = VBLLModel(X, Y, width=8, depth=1)
        model.condition_on_observations(X[:1], Y[:1])
