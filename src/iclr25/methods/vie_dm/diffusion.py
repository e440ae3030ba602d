"""Gaussian diffusion over sequences of word embeddings (the DiffuSeq base of VIE-DM).

Implements the forward process q(x_t | x_0) = N(sqrt(abar_t) x_0, (1 - abar_t) I), the "sqrt"
schedule abar(t) = 1 - sqrt(t/T + s) (Diffusion-LM, DiffuSeq) discretised into betas, the DDPM
posterior q(x_{t-1} | x_t, x_0), respacing (betas recomputed from abar at the kept steps), the
DiffuSeq training loss (x_0 prediction MSE + prior term + rounding NLL through the tied LM head),
the loss-aware timestep sampler with its importance weights 1/(T p_t), and DDPM / DDIM reverse
steps with optional clamping to the nearest word embedding.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025.
    Gong et al., "DiffuSeq: Sequence to Sequence Text Generation with Diffusion Models", ICLR 2023.
    Li et al., "Diffusion-LM Improves Controllable Text Generation", NeurIPS 2022.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from iclr25.common import rng

__all__ = [
    "GaussianSequenceDiffusion",
    "LossAwareSampler",
    "UniformSampler",
    "betas_for_alpha_bar",
    "clamp_to_embeddings",
    "make_betas",
    "round_to_tokens",
]


def betas_for_alpha_bar(T: int, alpha_bar: Callable[[float], float], max_beta: float = 0.999) -> Tensor:
    """Betas whose cumulative product follows ``alpha_bar``: beta_t = 1 - abar((t+1)/T) / abar(t/T).

    So abar_t = prod_{i<=t} (1 - beta_i) = abar((t+1)/T) / abar(0) wherever no beta is clipped.
    Returns float64 of shape (T,).
    """
    betas = [min(1.0 - alpha_bar((i + 1) / T) / alpha_bar(i / T), max_beta) for i in range(T)]
    return torch.tensor(betas, dtype=torch.float64)


def make_betas(schedule: str, T: int, *, offset: float = 1e-4) -> Tensor:
    """The betas of a named schedule: "sqrt" (abar(t) = 1 - sqrt(t + s)), "linear" or "cosine"."""
    if T < 1:
        raise ValueError(f"T must be >= 1, got {T}")
    if schedule == "sqrt":
        return betas_for_alpha_bar(T, lambda t: 1.0 - math.sqrt(t + offset))
    if schedule == "linear":
        scale = 1000.0 / T
        return torch.linspace(scale * 1e-4, scale * 0.02, T, dtype=torch.float64)
    if schedule == "cosine":
        return betas_for_alpha_bar(T, lambda t: math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2)
    raise ValueError(f"unknown schedule {schedule!r}; known: sqrt, linear, cosine")


def round_to_tokens(x: Tensor, weight: Tensor) -> Tensor:
    """Ids (...) of the nearest row of ``weight`` (V, d) to every vector of x (..., d) (Euclidean)."""
    flat = x.reshape(-1, x.shape[-1])  # (N, d)
    return torch.cdist(flat, weight).argmin(-1).reshape(x.shape[:-1])


def clamp_to_embeddings(x: Tensor, weight: Tensor) -> Tensor:
    """Replace every vector of x (..., d) by its nearest row of ``weight`` (V, d) (Euclidean)."""
    return weight[round_to_tokens(x, weight)]


class UniformSampler:
    """Timesteps drawn uniformly; every weight is 1."""

    def __init__(self, T: int) -> None:
        self.T = T

    def probs(self) -> Tensor:
        """p_t = 1/T."""
        return torch.full((self.T,), 1.0 / self.T, dtype=torch.float64)

    def sample(self, n: int, *, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """``(t, weight)`` of n draws, weight = 1 / (T p_t)."""
        p = self.probs()
        # drawn where the generator lives, returned on the CPU (the sampler's state stays there)
        t = rng.multinomial(p, n, replacement=True, generator=generator)
        return t, (1.0 / (self.T * p[t])).float()

    def update(self, t: Tensor, losses: Tensor) -> None:
        """No state."""


class LossAwareSampler(UniformSampler):
    """DiffuSeq's loss-second-moment sampler: p_t proportional to sqrt(E[loss_t^2]) over the last
    ``history`` losses of each t, mixed with ``uniform`` of the uniform law; uniform until every t
    has a full history. Each draw carries the importance weight 1/(T p_t), so the weighted loss is
    an unbiased estimate of the uniform-t loss.

    Args:
        T: timesteps.
        history: losses remembered per t.
        uniform: mixing weight of the uniform distribution.
    """

    def __init__(self, T: int, history: int = 10, uniform: float = 0.001) -> None:
        super().__init__(T)
        self.history, self.uniform = history, uniform
        self._losses = torch.zeros(T, history, dtype=torch.float64)
        self._counts = torch.zeros(T, dtype=torch.long)

    def warmed_up(self) -> bool:
        """Whether every t has a full loss history."""
        return bool((self._counts == self.history).all())

    def probs(self) -> Tensor:
        """The current p_t."""
        if not self.warmed_up():
            return super().probs()
        w = self._losses.pow(2).mean(-1).sqrt()
        w = w / w.sum()
        return w * (1 - self.uniform) + self.uniform / self.T

    def update(self, t: Tensor, losses: Tensor) -> None:
        """Record per-sample (unweighted) losses of timesteps t (a queue per t)."""
        for ti, li in zip(t.tolist(), losses.detach().double().tolist(), strict=True):
            c = int(self._counts[ti])
            if c == self.history:
                self._losses[ti, :-1] = self._losses[ti, 1:].clone()
                self._losses[ti, -1] = li
            else:
                self._losses[ti, c] = li
                self._counts[ti] = c + 1


class GaussianSequenceDiffusion:
    """The diffusion process of DiffuSeq over (batch, L, d_emb) embedding sequences.

    Args:
        betas: beta_t of shape (T,); their cumulative product is abar_t.
        timestep_map: original timestep index of each step (identity unless respaced).

    Example:
        >>> d = GaussianSequenceDiffusion.from_schedule("sqrt", 100)
        >>> bool((d.alphas_cumprod[1:] < d.alphas_cumprod[:-1]).all())
        True
        >>> r = d.respaced([0, 49, 99])
        >>> torch.allclose(r.alphas_cumprod, d.alphas_cumprod[[0, 49, 99]])
        True
    """

    def __init__(self, betas: Tensor, timestep_map: Sequence[int] | None = None) -> None:
        betas = betas.double()
        if betas.ndim != 1 or not bool(((betas > 0) & (betas < 1)).all()):
            raise ValueError("betas must be a 1-d tensor in (0, 1)")
        self.betas = betas
        self.T = len(betas)
        self.alphas = 1.0 - betas
        self.alphas_cumprod = torch.cumprod(self.alphas, 0)
        self.alphas_cumprod_prev = torch.cat([torch.ones(1, dtype=torch.float64), self.alphas_cumprod[:-1]])
        ac, acp = self.alphas_cumprod, self.alphas_cumprod_prev
        # q(x_{t-1} | x_t, x_0) = N(c1 x_0 + c2 x_t, var): the DDPM posterior (Ho et al., Eq. 7)
        self.posterior_variance = betas * (1.0 - acp) / (1.0 - ac)
        self.posterior_log_variance = torch.log(
            torch.cat([self.posterior_variance[1:2], self.posterior_variance[1:]])
        )
        self.posterior_coef1 = betas * acp.sqrt() / (1.0 - ac)
        self.posterior_coef2 = (1.0 - acp) * self.alphas.sqrt() / (1.0 - ac)
        self.timestep_map = torch.tensor(list(timestep_map) if timestep_map is not None else range(self.T))

    @classmethod
    def from_schedule(cls, schedule: str, T: int, *, offset: float = 1e-4) -> GaussianSequenceDiffusion:
        """A process with the betas of :func:`make_betas`."""
        return cls(make_betas(schedule, T, offset=offset))

    def respaced(self, use_timesteps: Sequence[int]) -> GaussianSequenceDiffusion:
        """The process restricted to ``use_timesteps``: betas recomputed from abar at the kept steps,
        beta'_k = 1 - abar_{t_k} / abar_{t_{k-1}}, so abar is unchanged there (not a mere skip)."""
        keep = sorted(set(int(t) for t in use_timesteps))
        if not keep or keep[0] < 0 or keep[-1] >= self.T:
            raise ValueError(f"timesteps must lie in [0, {self.T - 1}]")
        betas, last = [], 1.0
        for t in keep:
            ab = float(self.alphas_cumprod[t])
            betas.append(1.0 - ab / last)
            last = ab
        mapped = [int(self.timestep_map[t]) for t in keep]
        return GaussianSequenceDiffusion(torch.tensor(betas, dtype=torch.float64), mapped)

    def spaced(self, steps: int) -> GaussianSequenceDiffusion:
        """Respaced to ``steps`` evenly spaced timesteps (the last one always kept)."""
        if not 1 <= steps <= self.T:
            raise ValueError(f"sampling steps must be in [1, T={self.T}], got {steps}")
        if steps == self.T:
            return self
        idx = torch.linspace(0, self.T - 1, steps).round().long().tolist()
        return self.respaced(idx)

    # ----- forward process ------------------------------------------------------------------------
    @staticmethod
    def _take(a: Tensor, t: Tensor, like: Tensor) -> Tensor:
        return a.to(like.device)[t].to(like.dtype).reshape(-1, *([1] * (like.ndim - 1)))

    def q_sample(self, x0: Tensor, t: Tensor, noise: Tensor) -> Tensor:
        """x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps."""
        return (
            self._take(self.alphas_cumprod.sqrt(), t, x0) * x0
            + self._take((1 - self.alphas_cumprod).sqrt(), t, x0) * noise
        )

    def q_posterior(self, x0: Tensor, xt: Tensor, t: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and variance of q(x_{t-1} | x_t, x_0)."""
        mean = self._take(self.posterior_coef1, t, xt) * x0 + self._take(self.posterior_coef2, t, xt) * xt
        return mean, self._take(self.posterior_variance, t, xt).expand_as(xt)

    # ----- training -------------------------------------------------------------------------------
    def training_losses(
        self,
        model_fn: Callable[[Tensor, Tensor], Tensor],
        embedding: Tensor,
        token_ids: Tensor,
        t: Tensor,
        *,
        generator: torch.Generator | None = None,
    ) -> dict[str, Tensor]:
        """Per-sample DiffuSeq loss terms.

        x_0 ~ N(Emb(w), (1 - abar_0) I) (a noisy copy of the embeddings, not Emb(w) itself);
        x_t = q_sample(x_0, t); x0_hat = model_fn(x_t, t). ``mse`` = ||x0_hat - x_0||^2 (with Emb(w)
        as the target where t = 0); ``prior`` = ||sqrt(abar_T) x_0||^2; ``nll`` = -log p(w | x_0)
        through the LM head tied to the embedding. ``loss`` is their sum; all are means over
        positions and dimensions.

        Args:
            model_fn: ``(x_t, t) -> x0_hat``, t in original timestep indices.
            embedding: the word-embedding matrix Emb (V, d_emb) in use.
            token_ids: (B, L) ids.
            t: (B,) step indices of this process, on the device of ``embedding``.
            generator: source of the noise (drawn on the generator's device, or on the CPU
                without one, then moved to the device of ``embedding``).

        Returns:
            dict of (B,) tensors: loss, mse, prior, nll.
        """
        mean = F.embedding(token_ids, embedding)  # (B, L, d)
        std0 = math.sqrt(1.0 - float(self.alphas_cumprod[0]))
        x0 = mean + std0 * rng.randn(*mean.shape, generator=generator, dtype=mean.dtype).to(mean.device)
        noise = rng.randn(*x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
        xt = self.q_sample(x0, t, noise)
        x0_hat = model_fn(xt, self.timestep_map.to(t.device)[t])
        mse = (x0_hat - x0).pow(2).mean((1, 2))
        mse0 = (x0_hat - mean).pow(2).mean((1, 2))
        mse = torch.where(t == 0, mse0, mse)
        prior = (float(self.alphas_cumprod[-1]) ** 0.5 * x0).pow(2).mean((1, 2))
        logits = x0 @ embedding.t()  # (B, L, V): the tied rounding head
        nll = F.cross_entropy(logits.transpose(1, 2), token_ids, reduction="none").mean(1)
        return {"loss": mse + prior + nll, "mse": mse, "prior": prior, "nll": nll}

    # ----- sampling -------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(
        self,
        model_fn: Callable[[Tensor, Tensor], Tensor],
        shape: tuple[int, ...],
        embedding: Tensor,
        *,
        clamp: bool = True,
        clamp_below: int = -1,
        ddim_eta: float | None = None,
        noise: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Reverse process from x_T ~ N(0, I) to x_0 (shape ``shape``); returns the last x0_hat.

        Each step predicts x0_hat = model_fn(x_t, t); with ``clamp`` (at original timesteps below
        ``clamp_below``, or every step when it is -1) x0_hat is replaced by its nearest row of
        ``embedding``; then x_{t-1} ~ q(x_{t-1} | x_t, x0_hat) (DDPM), or the DDIM update with
        ``ddim_eta`` (eta = 0 is deterministic given the start noise). The process runs on the
        device of ``embedding``; the noise is drawn on the generator's device (the CPU without one)
        and moved there, so a CPU generator gives the same draws whatever the device.
        """
        device = embedding.device
        x = noise.to(device) if noise is not None else rng.randn(*shape, generator=generator).to(device)
        x0_hat = x
        for i in reversed(range(self.T)):
            t = torch.full((shape[0],), i, dtype=torch.long, device=device)
            orig = self.timestep_map.to(device)[t]
            x0_hat = model_fn(x, orig)
            if clamp and (clamp_below < 0 or int(orig[0]) < clamp_below):
                x0_hat = clamp_to_embeddings(x0_hat, embedding)
            if i == 0:
                break
            z = rng.randn(*shape, generator=generator).to(device)
            if ddim_eta is None:
                mean, var = self.q_posterior(x0_hat, x, t)
                x = mean + var.sqrt() * z
            else:
                ab, abp = float(self.alphas_cumprod[i]), float(self.alphas_cumprod_prev[i])
                eps = (x - math.sqrt(ab) * x0_hat) / math.sqrt(1 - ab)
                sigma = ddim_eta * math.sqrt((1 - abp) / (1 - ab) * (1 - ab / abp))
                x = math.sqrt(abp) * x0_hat + math.sqrt(max(1 - abp - sigma**2, 0.0)) * eps + sigma * z
        return x0_hat
