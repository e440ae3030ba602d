"""The binary transcoder of BiGR: per-token Bernoulli diffusion over K bits, trained with weighted BCE.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 3.2 (binary transcoder), after Binary
    Latent Diffusion (Wang et al., CVPR 2023). Forward process with T steps and
    beta_t = 1 - 1 / (T - t + 1), so the keep factor k_t = prod_{s <= t} beta_s = 1 - t / T and
    q(z_t = 1 | z_0) = k_t z_0 + (1 - k_t) / 2. The network predicts logits of the flip indicator
    f = z_0 xor z_t; the x0-logit is l if z_t = 0 else -l. Loss: BCE weighted per token by its own
    flip rate r (weight 1 - r + 1/K on flips, r + 1/K on keeps).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common import rng

__all__ = [
    "BernoulliTranscoder",
    "BitHead",
    "flip_to_x0_logit",
    "keep_factor",
    "posterior_one",
    "q_sample",
    "sample_timesteps",
    "timestep_embedding",
    "weighted_bce",
]


def keep_factor(t: torch.Tensor, timesteps: int) -> torch.Tensor:
    """k_t = prod_{s <= t} beta_s = 1 - t / T (k_0 = 1, k_T = 0)."""
    return 1.0 - t.to(torch.float64 if t.dtype == torch.float64 else torch.float32) / timesteps


def q_sample(
    z0: torch.Tensor, t: torch.Tensor, timesteps: int, *, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Draw z_t ~ q(z_t | z_0): each bit flips with probability (1 - k_t) / 2.

    Shape:
        z0: (M, K) in {0, 1}; t: (M,) in [1, T]; output (M, K).
    """
    flip_p = (1.0 - keep_factor(t, timesteps))[:, None] / 2  # (M, 1)
    flips = rng.rand(*z0.shape, generator=generator, device=z0.device) < flip_p
    return torch.where(flips, 1 - z0, z0)


def flip_to_x0_logit(flip_logit: torch.Tensor, z_t: torch.Tensor) -> torch.Tensor:
    """x0-logit from the flip logit: l0 = l where z_t = 0, -l where z_t = 1 (x0 = z_t xor f)."""
    return torch.where(z_t > 0.5, -flip_logit, flip_logit)


def weighted_bce(flip_logit: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    """BiGR's wBCE: per token, r = mean_k f_k; weight 1 - r + 1/K on f = 1 and r + 1/K on f = 0.

    Shape:
        flip_logit, flips: (M, K). Returns the mean over all M K bits (a scalar).
    """
    k = flips.shape[-1]
    r = flips.mean(-1, keepdim=True)  # (M, 1): each token's own flip rate
    w = torch.where(flips > 0.5, 1 - r + 1 / k, r + 1 / k)
    return (w * F.binary_cross_entropy_with_logits(flip_logit, flips, reduction="none")).mean()


def posterior_one(p_x0: torch.Tensor, z_t: torch.Tensor, k_t: float, k_prev: float) -> torch.Tensor:
    """P(z_{t'} = 1 | z_t, p_hat) for t' < t, using the composed keep factor k_t / k_{t'}.

    P(z_{t'} = 1 | z_t) is proportional to P(z_t | z_{t'} = 1) [k_{t'} p_hat + (1 - k_{t'}) / 2],
    where P(z_t = z_{t'} | z_{t'}) = kappa + (1 - kappa) / 2 with kappa = k_t / k_{t'}.

    Args:
        p_x0: p_hat = P(x0 = 1), any shape.
        z_t: current bits, same shape.
        k_t: keep factor at t.
        k_prev: keep factor at t' (> 0).
    """
    kappa = k_t / k_prev
    stay, move = kappa + (1 - kappa) / 2, (1 - kappa) / 2
    like1 = move + (stay - move) * z_t  # P(z_t | z_{t'} = 1)
    like0 = stay - (stay - move) * z_t  # P(z_t | z_{t'} = 0)
    prior1 = k_prev * p_x0 + (1 - k_prev) / 2
    prior0 = k_prev * (1 - p_x0) + (1 - k_prev) / 2
    num = like1 * prior1
    return num / (num + like0 * prior0)


def sample_timesteps(timesteps: int, steps: int) -> list[int]:
    """Reverse-process timesteps: ``steps`` values sub-sampled linearly from T down to 1."""
    if not 1 <= steps <= timesteps:
        raise ValueError(f"steps must lie in [1, {timesteps}], got {steps}")
    ts = torch.linspace(timesteps, 1, steps).round().long().tolist()
    return sorted(set(ts), reverse=True)


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding (M,) -> (M, dim) (callers pass t - 1, as the paper's head does)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    emb = torch.cat([args.cos(), args.sin()], -1)
    return F.pad(emb, (0, dim % 2))


class _ResAdaLN(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.SiLU(), nn.Linear(width, width))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(width, 3 * width))

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = self.ada(c).chunk(3, -1)
        return x + gate * self.mlp(self.norm(x) * (1 + scale) + shift)


class BernoulliTranscoder(nn.Module):
    """Per-token Bernoulli-diffusion head: K flip logits from (z_t, c_i, t).

    Args:
        code_dim: K.
        cond_dim: width of the backbone's per-token condition c_i.
        width: MLP width.
        depth: residual adaLN blocks.
        timesteps: T.
        freq_dim: width of the sinusoidal timestep embedding fed to the timestep MLP (256 in the
            paper's head, as in DiT, whatever the MLP width).

    Example:
        >>> head = BernoulliTranscoder(code_dim=4, cond_dim=8, width=16, depth=1, timesteps=8)
        >>> head.prob(torch.randn(3, 8), torch.Generator().manual_seed(0), steps=4).shape
        torch.Size([3, 4])
    """

    def __init__(
        self, *, code_dim: int, cond_dim: int, width: int, depth: int, timesteps: int, freq_dim: int = 256
    ) -> None:
        super().__init__()
        self.code_dim, self.timesteps, self.width, self.freq_dim = code_dim, timesteps, width, freq_dim
        self.inp = nn.Linear(code_dim, width)
        self.cond = nn.Linear(cond_dim, width)
        self.t_mlp = nn.Sequential(nn.Linear(freq_dim, width), nn.SiLU(), nn.Linear(width, width))
        self.blocks = nn.ModuleList(_ResAdaLN(width) for _ in range(depth))
        self.final_norm = nn.LayerNorm(width, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(width, 2 * width))
        self.out = nn.Linear(width, code_dim)
        for m in (self.final_ada[1], self.out):  # zero-init: p = 0.5 at start
            nn.init.zeros_(m.weight)
            nn.init.zeros_(m.bias)

    def flip_logits(self, z_t: torch.Tensor, cond: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Flip-indicator logits.

        Shape:
            z_t: (M, K) bits; cond: (M, D); t: (M,) in [1, T]; output (M, K).
        """
        # t - 1 into the embedding, as the paper's head; one MLP call per distinct t
        t_uniq, inverse = torch.unique(t, return_inverse=True)
        c = self.cond(cond) + self.t_mlp(timestep_embedding(t_uniq - 1, self.freq_dim))[inverse]
        h = self.inp(2 * z_t - 1)  # bits -> +-1
        for block in self.blocks:
            h = block(h, c)
        shift, scale = self.final_ada(c).chunk(2, -1)
        return self.out(self.final_norm(h) * (1 + scale) + shift)

    def loss(
        self, z0: torch.Tensor, cond: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """wBCE of the flip indicator at t ~ U{1..T} per token (z0 (M, K), cond (M, D))."""
        t = rng.randint(1, self.timesteps + 1, (len(z0),), generator=generator, device=z0.device)
        z_t = q_sample(z0, t, self.timesteps, generator=generator)
        flips = (z0 != z_t).to(z0.dtype)
        return weighted_bce(self.flip_logits(z_t, cond, t), flips)

    @torch.no_grad()
    def prob(
        self,
        cond: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        steps: int = 100,
        cond_null: torch.Tensor | None = None,
        cfg_scale: float = 1.0,
        temperature: float = 1.0,
        deterministic: bool = False,
    ) -> torch.Tensor:
        """Reverse process from z_T ~ Bern(0.5); returns p_hat = P(x0 = 1) of the last step.

        Args:
            cond: conditional c_i, shape (M, D).
            generator: RNG of z_T and the posterior draws.
            steps: reverse steps (sub-sampled linearly from T).
            cond_null: null-class c_i (M, D) for CFG; needed when ``cfg_scale != 1``.
            cfg_scale: l = l_u + s (l_c - l_u) on the flip logits.
            temperature: logits are divided by it.
            deterministic: z_T = 0 and thresholded posteriors (the argmax control).

        Returns:
            p_hat, shape (M, K).
        """
        m, k = len(cond), self.code_dim
        if deterministic:
            z = torch.zeros(m, k, device=cond.device)
        else:
            z = rng.bernoulli(torch.full((m, k), 0.5, device=cond.device), generator=generator)
        ts = sample_timesteps(self.timesteps, steps)
        p = torch.full((m, k), 0.5, device=cond.device)
        for i, t in enumerate(ts):
            tt = torch.full((m,), t, dtype=torch.long, device=cond.device)
            if cfg_scale == 1.0 or cond_null is None:
                if cfg_scale != 1.0:
                    raise ValueError("cfg_scale != 1 needs cond_null")
                logit = self.flip_logits(z, cond, tt)
            elif cfg_scale == 0.0:
                logit = self.flip_logits(z, cond_null, tt)
            else:  # one batch [cond; null], split in halves
                both = self.flip_logits(torch.cat([z, z]), torch.cat([cond, cond_null]), torch.cat([tt, tt]))
                lc, lu = both[:m], both[m:]
                logit = lu + cfg_scale * (lc - lu)
            p = torch.sigmoid(flip_to_x0_logit(logit, z) / temperature)
            if i + 1 < len(ts):
                t_prev = ts[i + 1]
                post = posterior_one(p, z, 1 - t / self.timesteps, 1 - t_prev / self.timesteps)
                z = (post > 0.5).float() if deterministic else rng.bernoulli(post, generator=generator)
        return p


class BitHead(nn.Module):
    """The control head: independent per-bit logits Linear(D, K), trained with plain BCE.

    It has the transcoder's interface (``loss``, ``prob``) so the sampler treats both alike.
    """

    def __init__(self, *, code_dim: int, cond_dim: int) -> None:
        super().__init__()
        self.code_dim = code_dim
        self.out = nn.Linear(cond_dim, code_dim)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def loss(
        self, z0: torch.Tensor, cond: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Plain BCE of every bit given c_i (z0 (M, K), cond (M, D))."""
        return F.binary_cross_entropy_with_logits(self.out(cond), z0)

    @torch.no_grad()
    def prob(
        self,
        cond: torch.Tensor,
        generator: torch.Generator | None = None,
        *,
        steps: int = 1,
        cond_null: torch.Tensor | None = None,
        cfg_scale: float = 1.0,
        temperature: float = 1.0,
        deterministic: bool = False,
    ) -> torch.Tensor:
        """P(bit = 1) per bit, with CFG on the logits; shape (M, K)."""
        logit = self.out(cond)
        if cfg_scale != 1.0:
            if cond_null is None:
                raise ValueError("cfg_scale != 1 needs cond_null")
            lu = self.out(cond_null)
            logit = lu + cfg_scale * (logit - lu)
        return torch.sigmoid(logit / temperature)
