"""BiGR's sampler: entropy/confidence-ordered unmasking with Gumbel noise and CFG; zero-shot uses.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 3.3 (entropy-ordered sampling: after
    iteration s, floor(N cos(pi s / (2S))) tokens stay masked; the most confident masked tokens are
    revealed, their bits drawn from Bernoulli(p)) and Sec. 4.3 (inpainting, outpainting, editing,
    class interpolation).

CFG batches are [cond; null]; ``cfg_scale == 1`` runs one un-doubled conditional pass and
``cfg_scale == 0`` one null pass (the official code breaks for cfg <= 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from iclr25.common import rng
from iclr25.methods.bigr.model import BiGR

__all__ = ["SampleOutput", "generate", "generate_causal", "outpaint_mask", "unmask_schedule"]


@dataclass
class SampleOutput:
    """Sampled tokens and what they cost.

    Attributes:
        bits: (B, N, K) in {0, 1}.
        passes: sequential backbone passes (S for BiGR).
        network_evals: backbone evaluations counting the CFG doubling.
    """

    bits: torch.Tensor
    passes: int
    network_evals: int


def unmask_schedule(n: int, num_iter: int) -> list[int]:
    """Masked tokens left after each iteration s = 1..S: floor(N cos(pi s / (2S))) (last: 0)."""
    return [math.floor(n * math.cos(math.pi * s / (2 * num_iter))) for s in range(1, num_iter)] + [0]


def outpaint_mask(grid: int, keep: int) -> torch.Tensor:
    """(N,) bool mask of *unknown* tokens for outpainting: the central ``keep`` x ``keep`` block is known."""
    m = torch.ones(grid, grid, dtype=torch.bool)
    a = (grid - keep) // 2
    m[a : a + keep, a : a + keep] = False
    return m.reshape(-1)  # (N,)


def _conditions(
    model: BiGR, bits: torch.Tensor, labels: torch.Tensor | None, class_emb: torch.Tensor | None,
    mask: torch.Tensor, cfg_scale: float,
) -> tuple[torch.Tensor, torch.Tensor | None, int]:  # fmt: skip
    b = len(bits)
    null = torch.full((b,), model.null_class, dtype=torch.long)
    if cfg_scale == 1.0:
        return model(bits, labels, mask, class_emb=class_emb), None, 1
    if cfg_scale == 0.0:
        return model(bits, null, mask), None, 1
    ce = class_emb if class_emb is not None else model.backbone.class_embedding(labels)  # type: ignore[arg-type]
    ce_both = torch.cat([ce, model.backbone.class_embedding(null)])
    both = model(torch.cat([bits, bits]), None, torch.cat([mask, mask]), class_emb=ce_both)  # [cond; null]
    return both[:b], both[b:], 2


@torch.no_grad()
def generate(
    model: BiGR,
    labels: torch.Tensor | None,
    *,
    num_iter: int = 20,
    cfg_scale: float = 3.0,
    gumbel_temp: float = 0.01,
    gumbel_schedule: Literal["constant", "down", "up"] = "constant",
    diffusion_steps: int = 100,
    temperature: float = 1.0,
    order: Literal["confidence", "entropy", "random", "anti"] = "confidence",
    deterministic: bool = False,
    known_bits: torch.Tensor | None = None,
    known_mask: torch.Tensor | None = None,
    class_emb: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> SampleOutput:
    """Generate binary tokens by ordered unmasking.

    Args:
        model: a bidirectional :class:`BiGR`.
        labels: class ids (B,) (or None with ``class_emb``).
        num_iter: S, iterations (1 <= S <= number of unknown tokens).
        cfg_scale: s >= 0 (1: conditional only, 0: null only).
        gumbel_temp: temperature of the Gumbel noise added to confidences.
        gumbel_schedule: constant, "down" (g (1 - s/S)) or "up" (g s/S).
        diffusion_steps: reverse steps of the transcoder.
        temperature: logit temperature of the head.
        order: "confidence" (mean |2p - 1|), "entropy" (-mean binary entropy), "random" (a baseline)
            or "anti" (least confident first: a broken order, used as a control).
        deterministic: argmax everywhere (bits = 1[p > 0.5], no Gumbel, deterministic head): a control.
        known_bits: (B, N, K) bits of known tokens (inpainting); with ``known_mask``.
        known_mask: (B, N) bool, True where the token is known (kept bit-identical).
        class_emb: class embeddings (B, D) instead of labels (interpolation).
        generator: RNG of every draw.

    Returns:
        A :class:`SampleOutput`.
    """
    cfg = model.cfg
    if cfg.causal:
        raise ValueError("generate needs a bidirectional model (causal=False)")
    if cfg_scale < 0:
        raise ValueError(f"cfg_scale must be >= 0, got {cfg_scale}")
    if labels is None and class_emb is None:
        raise ValueError("give labels or class_emb")
    if labels is not None and ((labels < 0).any() or (labels >= cfg.num_classes).any()):
        raise ValueError(f"labels must lie in [0, {cfg.num_classes})")
    b = len(labels) if labels is not None else len(class_emb)  # type: ignore[arg-type]
    n, k = cfg.num_tokens, cfg.code_dim
    bits = torch.zeros(b, n, k)
    mask = torch.ones(b, n, dtype=torch.bool)  # True = still masked
    if known_mask is not None:
        if known_bits is None or known_mask.shape != (b, n):
            raise ValueError("known_mask (B, N) needs known_bits (B, N, K)")
        bits = torch.where(known_mask[..., None], known_bits, bits)
        mask = ~known_mask
    unknown = int(mask.sum(1).max())
    if not 1 <= num_iter <= max(unknown, 1):
        raise ValueError(f"num_iter must lie in [1, {unknown}] (unknown tokens), got {num_iter}")
    total = mask.sum(1)  # (B,) unknown tokens per image
    passes = evals = 0
    for s in range(1, num_iter + 1):
        c, cu, mult = _conditions(model, bits, labels, class_emb, mask, cfg_scale)
        passes, evals = passes + 1, evals + mult
        # the head runs on still-masked tokens only; the others keep p = 0.5 and are never picked
        rows = mask.reshape(-1)  # (B N,)
        p = torch.full((b * n, k), 0.5)
        p[rows] = model.head.prob(
            c.reshape(b * n, -1)[rows], generator, steps=diffusion_steps,
            cond_null=None if cu is None else cu.reshape(b * n, -1)[rows],
            cfg_scale=cfg_scale if cu is not None else 1.0, temperature=temperature,
            deterministic=deterministic,
        )  # fmt: skip
        p = p.reshape(b, n, k)
        if order == "confidence":
            conf = (2 * p - 1).abs().mean(-1)
        elif order == "entropy":
            q = p.clamp(1e-6, 1 - 1e-6)
            conf = (q * q.log() + (1 - q) * (1 - q).log()).mean(-1)  # -binary entropy
        elif order == "anti":
            conf = -(2 * p - 1).abs().mean(-1)
        elif order == "random":
            conf = rng.rand(b, n, generator=generator, device=p.device)
        else:
            raise ValueError(f"unknown order {order!r}")
        conf = conf.masked_fill(~mask, -math.inf)  # unmasked tokens never picked again
        g = gumbel_temp * {"constant": 1.0, "down": 1 - s / num_iter, "up": s / num_iter}[gumbel_schedule]
        if g > 0 and not deterministic:
            u = rng.rand(b, n, generator=generator, device=p.device).clamp(1e-10, 1 - 1e-10)
            conf = conf + g * -torch.log(-torch.log(u))
        # after iteration s, floor(U cos(pi s / 2S)) of each image's U unknown tokens stay masked
        left = (
            torch.floor(total * math.cos(math.pi * s / (2 * num_iter))).long() if s < num_iter else 0 * total
        )
        reveal = (mask.sum(1) - left).clamp_min(1)  # at least one token per iteration
        rank = conf.argsort(1, descending=True).argsort(1)  # rank of each token by confidence
        pick = (rank < reveal[:, None]) & mask
        new = (p > 0.5).float() if deterministic else rng.bernoulli(p, generator=generator)
        bits = torch.where(pick[..., None], new, bits)
        mask = mask & ~pick
    return SampleOutput(bits, passes, evals)


@torch.no_grad()
def generate_causal(
    model: BiGR,
    labels: torch.Tensor,
    *,
    cfg_scale: float = 3.0,
    diffusion_steps: int = 100,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> SampleOutput:
    """Raster-order sampling of a ``causal=True`` BiGR: one backbone pass per token.

    Token i is drawn from the transcoder conditioned on the output at sequence position i of
    [class; x_1 .. x_{i-1}] (final norm plus position embedding i), as the causal variant is
    trained; its bits are drawn from Bernoulli(p). CFG as in :func:`generate`.

    Args:
        model: a BiGR built with ``causal=True``.
        labels: class ids (B,).
        cfg_scale: s >= 0 (1: conditional only, 0: null only).
        diffusion_steps: reverse steps of the transcoder.
        temperature: logit temperature of the transcoder.
        generator: RNG of every draw.

    Returns:
        A :class:`SampleOutput` with ``passes`` = N.
    """
    cfg = model.cfg
    if not cfg.causal:
        raise ValueError("generate_causal needs a model with causal=True (use generate otherwise)")
    if cfg_scale < 0:
        raise ValueError(f"cfg_scale must be >= 0, got {cfg_scale}")
    if (labels < 0).any() or (labels >= cfg.num_classes).any():
        raise ValueError(f"labels must lie in [0, {cfg.num_classes})")
    b, n, k = len(labels), cfg.num_tokens, cfg.code_dim
    null = torch.full((b,), model.null_class, dtype=torch.long)
    if cfg_scale == 1.0:
        lab, mult = labels, 1
    elif cfg_scale == 0.0:
        lab, mult = null, 1
    else:
        lab, mult = torch.cat([labels, null]), 2  # one [cond; null] batch
    seq = torch.zeros(b, 0, k)
    evals = 0
    for i in range(n):
        x = model.bit_proj(seq.repeat(mult, 1, 1))  # (mult B, i, D)
        hs = model.backbone(x, lab)
        c = model.norm(hs[-1][:, -1]) + model.pos_emb[0, i]  # condition of token i, (mult B, D)
        evals += mult
        cond, cond_null = (c[:b], c[b:]) if mult == 2 else (c, None)
        p = model.head.prob(
            cond, generator, steps=diffusion_steps, cond_null=cond_null,
            cfg_scale=cfg_scale if mult == 2 else 1.0, temperature=temperature,
        )  # fmt: skip
        seq = torch.cat([seq, rng.bernoulli(p, generator=generator)[:, None]], 1)
    return SampleOutput(seq, n, evals)
