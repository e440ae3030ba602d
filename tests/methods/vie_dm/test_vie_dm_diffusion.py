"""Sequence diffusion of VIE-DM: schedule, forward process, posterior, respacing, losses, sampler."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.methods.vie_dm import (
    GaussianSequenceDiffusion,
    LossAwareSampler,
    UniformSampler,
    clamp_to_embeddings,
    make_betas,
    round_to_tokens,
)


def test_sqrt_schedule_decreases_in_unit_interval_and_matches_closed_form(one_thread) -> None:
    T, s = 200, 1e-4
    d = GaussianSequenceDiffusion(make_betas("sqrt", T, offset=s))
    ab = d.alphas_cumprod
    assert bool(((ab > 0) & (ab < 1)).all()) and bool((ab[1:] < ab[:-1]).all())
    f = lambda t: 1 - math.sqrt(t + s)  # noqa: E731
    unclipped = d.betas < 0.999
    for t in range(T):
        if bool(unclipped[: t + 1].all()):
            assert float(ab[t]) == pytest.approx(f((t + 1) / T) / f(0.0), rel=1e-9)
    assert bool(unclipped[: T - 1].all())  # only the last beta may be clipped


def test_q_sample_moments_match_closed_form(one_thread) -> None:
    d = GaussianSequenceDiffusion.from_schedule("sqrt", 100)
    gen = torch.Generator().manual_seed(0)
    x0 = torch.full((20000, 1, 1), 2.0)
    t = torch.full((20000,), 30)
    xt = d.q_sample(x0, t, torch.randn(x0.shape, generator=gen))
    ab = float(d.alphas_cumprod[30])
    assert float(xt.mean()) == pytest.approx(2 * math.sqrt(ab), abs=0.02)
    assert float(xt.var()) == pytest.approx(1 - ab, rel=0.05)


def test_posterior_equals_gaussian_bayes_rule(one_thread) -> None:
    d = GaussianSequenceDiffusion.from_schedule("sqrt", 50)
    x0, xt = torch.tensor([[[0.7]]]), torch.tensor([[[-0.3]]])
    for t in (1, 10, 49):
        ab_prev, a, beta = float(d.alphas_cumprod[t - 1]), float(d.alphas[t]), float(d.betas[t])
        # prior x_{t-1} ~ N(sqrt(ab_prev) x0, 1 - ab_prev);
        # likelihood x_t | x_{t-1} ~ N(sqrt(a) x_{t-1}, beta)
        prec = 1 / (1 - ab_prev) + a / beta
        mean = (math.sqrt(ab_prev) * 0.7 / (1 - ab_prev) + math.sqrt(a) * -0.3 / beta) / prec
        m, v = d.q_posterior(x0, xt, torch.tensor([t]))
        assert float(m) == pytest.approx(mean, rel=1e-6) and float(v) == pytest.approx(1 / prec, rel=1e-6)


def test_respacing_keeps_alpha_bar_and_maps_timesteps(one_thread) -> None:
    d = GaussianSequenceDiffusion.from_schedule("sqrt", 200)
    keep = [0, 13, 77, 150, 199]
    r = d.respaced(keep)
    assert torch.allclose(r.alphas_cumprod, d.alphas_cumprod[keep])
    assert r.timestep_map.tolist() == keep
    assert not torch.allclose(r.betas, d.betas[keep])  # betas are recomputed, not skipped
    sp = d.spaced(40)
    assert sp.T == 40 and int(sp.timestep_map[-1]) == 199 and int(sp.timestep_map[0]) == 0
    with pytest.raises(ValueError, match="sampling steps"):
        d.spaced(201)


def test_loss_aware_weights_give_the_uniform_mean_by_enumeration(one_thread) -> None:
    T = 7
    sampler = LossAwareSampler(T, history=3, uniform=0.05)
    table = torch.tensor([0.3, 2.0, 1.1, 5.0, 0.2, 0.9, 3.3])
    for _ in range(3):
        sampler.update(torch.arange(T), table)
    assert sampler.warmed_up()
    p = sampler.probs()
    assert float(p.sum()) == pytest.approx(1.0) and not torch.allclose(p, UniformSampler(T).probs())
    weights = 1.0 / (T * p)
    # E_{t~p}[w_t L_t] = sum_t p_t L_t / (T p_t) = mean_t L_t exactly
    assert float((p * weights * table.double()).sum()) == pytest.approx(
        float(table.double().mean()), rel=1e-12
    )
    t, w = sampler.sample(1000, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(w.double(), (1.0 / (T * p[t])), rtol=1e-6)
    # unweighted (the bug the weights prevent) would over-count the large losses
    assert float((p * table.double()).sum()) > float(table.mean())


def test_clamping_returns_exact_rows_and_rounding_recovers_tokens(one_thread) -> None:
    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(12, 8, generator=gen)
    ids = torch.randint(0, 12, (3, 5), generator=gen)
    noisy = emb[ids] + 0.05 * torch.randn(3, 5, 8, generator=gen)
    clamped = clamp_to_embeddings(noisy, emb)
    assert torch.equal(clamped, emb[ids])
    assert torch.equal(round_to_tokens(emb[ids], emb), ids)


def test_training_loss_terms_and_prior(one_thread) -> None:
    d = GaussianSequenceDiffusion.from_schedule("sqrt", 20)
    emb = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    ids = torch.tensor([[1, 2, 0], [3, 0, 0]])
    perfect = lambda x, t: x * 0  # noqa: E731
    out = d.training_losses(
        perfect, emb, ids, torch.tensor([0, 19]), generator=torch.Generator().manual_seed(0)
    )
    assert set(out) == {"loss", "mse", "prior", "nll"}
    assert torch.allclose(out["loss"], out["mse"] + out["prior"] + out["nll"])
    # t = 0 uses Emb(w) itself as the target: a zero prediction costs mean(Emb(w)^2)
    assert float(out["mse"][0]) == pytest.approx(float(emb[ids[0]].pow(2).mean()), rel=1e-5)
