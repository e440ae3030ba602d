"""Bernoulli diffusion of the transcoder: schedule, posterior, logits, wBCE, zero init, CFG."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from iclr25.methods.bigr import (
    BernoulliTranscoder,
    BitHead,
    flip_to_x0_logit,
    keep_factor,
    posterior_one,
    q_sample,
    sample_timesteps,
    weighted_bce,
)


@pytest.mark.parametrize("T", [8, 64, 256])
def test_keep_factor_is_the_product_of_betas(T: int) -> None:
    prod = 1.0
    for t in range(1, T + 1):
        prod *= 1 - 1 / (T - t + 1)  # beta_t
        assert math.isclose(float(keep_factor(torch.tensor(t), T)), prod, abs_tol=1e-6)
    assert float(keep_factor(torch.tensor(T), T)) == 0.0  # pure coin flips: P(z_T = 1 | z_0) = 0.5


def test_empirical_flip_rate_matches_schedule() -> None:
    T, n, k = 64, 4000, 8
    gen = torch.Generator().manual_seed(0)
    z0 = torch.randint(0, 2, (n, k), generator=gen).float()
    for t in (1, 16, 48, 64):
        zt = q_sample(z0, torch.full((n,), t), T, generator=gen)
        rate = float((zt != z0).float().mean())
        expect = (1 - (1 - t / T)) / 2
        bound = 4 * math.sqrt(max(expect * (1 - expect), 1e-4) / (n * k))
        assert abs(rate - expect) <= bound + 1e-9, (t, rate, expect)


def _one_step(T: int, t: int) -> torch.Tensor:
    """Transition matrix P[z_{t-1}, z_t] of one forward step with beta_t."""
    beta = 1 - 1 / (T - t + 1)
    stay = beta + (1 - beta) / 2
    return torch.tensor([[stay, 1 - stay], [1 - stay, stay]], dtype=torch.float64)


@pytest.mark.parametrize(("t", "t_prev"), [(5, 4), (8, 7), (8, 3), (6, 1), (7, 2)])
def test_posterior_equals_brute_force_bayes(t: int, t_prev: int) -> None:
    T = 8
    chain = torch.eye(2, dtype=torch.float64)
    for s in range(t_prev + 1, t + 1):
        chain = chain @ _one_step(T, s)  # P[z_{t'}, z_t] composed from one-step betas
    marg = torch.eye(2, dtype=torch.float64)
    for s in range(1, t_prev + 1):
        marg = marg @ _one_step(T, s)  # P[x0, z_{t'}]
    for p_hat, z_t in itertools.product((0.1, 0.5, 0.93), (0, 1)):
        joint = [
            sum(px * marg[x0, zp] for x0, px in ((0, 1 - p_hat), (1, p_hat))) * chain[zp, z_t]
            for zp in (0, 1)
        ]
        brute = float(joint[1] / (joint[0] + joint[1]))
        got = posterior_one(
            torch.tensor(p_hat, dtype=torch.float64), torch.tensor(float(z_t), dtype=torch.float64),
            1 - t / T, 1 - t_prev / T,
        )  # fmt: skip
        assert math.isclose(float(got), brute, rel_tol=1e-9), (t, t_prev, p_hat, z_t)


def test_flip_to_x0_logit_for_both_states() -> None:
    logit = torch.tensor([2.0, 2.0, -1.0, -1.0])
    z_t = torch.tensor([0.0, 1.0, 0.0, 1.0])
    assert flip_to_x0_logit(logit, z_t).tolist() == [2.0, -2.0, -1.0, 1.0]
    # P(x0 = 1) = P(f = 1) when z_t = 0 and P(f = 0) when z_t = 1
    p_f = torch.sigmoid(logit)
    torch.testing.assert_close(
        torch.sigmoid(flip_to_x0_logit(logit, z_t)), torch.where(z_t > 0, 1 - p_f, p_f)
    )


def test_weighted_bce_hand_example() -> None:
    # one token, K = 4, flips [1, 0, 0, 0]: r = 1/4, weight on the flip 1 - 1/4 + 1/4 = 1,
    # weight on keeps 1/4 + 1/4 = 1/2; logits 0 so every BCE term is log 2.
    flips = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    loss = weighted_bce(torch.zeros(1, 4), flips)
    assert math.isclose(float(loss), (1.0 + 3 * 0.5) * math.log(2) / 4, rel_tol=1e-6)
    # the weights come from each token's own rate: a second token with no flip changes nothing above
    two = weighted_bce(torch.zeros(2, 4), torch.tensor([[1.0, 0, 0, 0], [0.0, 0, 0, 0]]))
    assert math.isclose(float(two), ((1.0 + 1.5) + 4 * 0.25) * math.log(2) / 8, rel_tol=1e-6)


def test_sample_timesteps_sub_sample_linearly() -> None:
    assert sample_timesteps(256, 100)[0] == 256 and sample_timesteps(256, 100)[-1] == 1
    assert len(sample_timesteps(256, 100)) == 100
    assert sample_timesteps(8, 8) == list(range(8, 0, -1))
    with pytest.raises(ValueError):
        sample_timesteps(8, 9)


def _head() -> BernoulliTranscoder:
    torch.manual_seed(0)
    return BernoulliTranscoder(code_dim=6, cond_dim=8, width=16, depth=2, timesteps=16)


def test_zero_initialised_transcoder_outputs_one_half() -> None:
    head = _head()
    p = head.prob(torch.randn(5, 8), torch.Generator().manual_seed(0), steps=4)
    torch.testing.assert_close(p, torch.full((5, 6), 0.5))
    bit = BitHead(code_dim=6, cond_dim=8)
    torch.testing.assert_close(bit.prob(torch.randn(5, 8)), torch.full((5, 6), 0.5))


def test_cfg_one_is_the_conditional_path_and_zero_the_null_path() -> None:
    head = _head()
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.3)
    c, u = torch.randn(7, 8), torch.randn(7, 8)

    def run(cond: torch.Tensor, **kw: object) -> torch.Tensor:
        return head.prob(cond, torch.Generator().manual_seed(3), steps=5, **kw)  # type: ignore[arg-type]

    torch.testing.assert_close(run(c, cond_null=u, cfg_scale=1.0), run(c))
    torch.testing.assert_close(run(c, cond_null=u, cfg_scale=0.0), run(u))
    assert not torch.allclose(run(c, cond_null=u, cfg_scale=3.0), run(c))
    with pytest.raises(ValueError, match="cond_null"):
        head.prob(c, steps=4, cfg_scale=2.0)


@pytest.mark.slow
def test_transcoder_learns_a_joint_two_mode_distribution() -> None:
    """Tokens are either all ones or all zeros: the diffusion head draws whole codes, the per-bit
    head (independent Bernoullis at 0.5) mixes bits. The paper's reason for the transcoder."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    k = 6
    head = BernoulliTranscoder(code_dim=k, cond_dim=4, width=64, depth=2, timesteps=16)
    opt = torch.optim.Adam(head.parameters(), lr=3e-3)
    cond = torch.zeros(256, 4)
    for _ in range(300):
        z0 = torch.randint(0, 2, (256, 1), generator=gen).float().expand(-1, k)
        loss = head.loss(z0, cond, generator=gen)
        opt.zero_grad()
        loss.backward()
        opt.step()
    p = head.prob(torch.zeros(400, 4), gen, steps=16)
    bits = torch.bernoulli(p, generator=gen)
    coherent = float(((bits.sum(-1) == 0) | (bits.sum(-1) == k)).float().mean())
    assert coherent > 0.8  # independent bits at 0.5 would give 2 / 2^6 = 3 %
