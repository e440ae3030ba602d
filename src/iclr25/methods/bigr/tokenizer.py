"""The binary autoencoder (B-AE) of BiGR: conv encoder, Bernoulli quantiser, conv decoder.

References:
    Hao et al., *BiGR: Harnessing Binary Latent Codes for Image Generation and Improved Visual
    Representation Capabilities*, ICLR 2025, arXiv:2410.14672, Sec. 3.1 (binary tokenizer), following
    Binary Latent Diffusion (Wang et al., CVPR 2023): p = sigmoid(.), b ~ Bernoulli(p), straight-through
    b_st = sg(b) + p - sg(p), decoder input sum_k b_k E_k.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.bigr.config import BinaryAEConfig

__all__ = [
    "SHAPES_TOKENIZER",
    "BernoulliQuantizer",
    "BinaryAutoencoder",
    "BinaryCodes",
    "load_tokenizer",
    "save_tokenizer",
    "train_tokenizer",
]

#: The B-AE shipped for the claim's 16 x 16 shapes world (``config.json``, ``bae.pt`` in the
#: official ``{"model", "ema"}`` layout, ``training.json``); ``experiments/bigr_tokenizer.py``
#: writes it.
SHAPES_TOKENIZER = Path(__file__).parent / "data" / "bae_shapes16"


class BinaryCodes(NamedTuple):
    """What :meth:`BinaryAutoencoder.encode` returns; each has shape (B, K, h, w).

    Attributes:
        probs: p = sigmoid(logits), the Bernoulli parameters.
        bits: b ~ Bernoulli(p) (stochastic; what the generator trains on).
        bits_det: 1[p > 0.5] (the thresholded mode).
    """

    probs: torch.Tensor
    bits: torch.Tensor
    bits_det: torch.Tensor


class BernoulliQuantizer(nn.Module):
    """1x1 conv to K logits, Bernoulli sampling with a straight-through gradient.

    Args:
        emb_dim: channels of the encoder output (and of the code embedding E).
        code_dim: K, bits per token.
    """

    def __init__(self, emb_dim: int, code_dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(emb_dim, code_dim, 1)
        # E in R^{K x emb_dim}: decoder input is sum_k b_k E_k, a bias-free 1x1 conv.
        self.embed = nn.Conv2d(code_dim, emb_dim, 1, bias=False)

    def forward(
        self, h: torch.Tensor, *, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, BinaryCodes]:
        """Quantise encoder features.

        Args:
            h: encoder output, shape (B, emb_dim, h, w).
            deterministic: use the 0.5-threshold mode instead of sampling.
            generator: RNG of the Bernoulli draw.

        Returns:
            ``(b_st, codes)``: the straight-through bits (value b, gradient of p), shape (B, K, h, w),
            and the :class:`BinaryCodes`.
        """
        p = torch.sigmoid(self.proj(h))
        b_det = (p > 0.5).to(p.dtype)
        b = b_det if deterministic else torch.bernoulli(p.detach(), generator=generator)
        b_st = b + p - p.detach()  # straight-through: forward b, d b_st / d p = 1
        return b_st, BinaryCodes(p, b, b_det)


def _norm(ch: int) -> nn.GroupNorm:
    """GroupNorm with at most 32 groups of at least 4 channels (paper widths: 32 groups).

    With one channel per group (``ch`` <= 32) GroupNorm becomes InstanceNorm: it removes every
    channel's per-image mean, and the output layer's norm then erases the image's mean colour.
    """
    return nn.GroupNorm(math.gcd(32, max(1, ch // 4)), ch, eps=1e-6)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.n1, self.c1 = _norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.n2, self.c2 = _norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class _Attn(nn.Module):
    """Single-head spatial self-attention (VQGAN's AttnBlock)."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.norm, self.qkv, self.out = _norm(ch), nn.Conv2d(ch, 3 * ch, 1), nn.Conv2d(ch, ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = (
            self.qkv(self.norm(x)).reshape(b, 3, c, h * w).transpose(-1, -2).unbind(1)
        )  # each (b, hw, c)
        o = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]  # (b, hw, c)
        return x + self.out(o.transpose(-1, -2).reshape(b, c, h, w))


class BinaryAutoencoder(nn.Module):
    """B-AE: VQGAN-style encoder/decoder around a :class:`BernoulliQuantizer`.

    Args:
        cfg: the :class:`BinaryAEConfig`.

    Example:
        >>> cfg = BinaryAEConfig(nf=8, ch_mult=(1, 2), num_res_blocks=1, attn_resolutions=(),
        ...                      emb_dim=16, code_dim=6, resolution=8)
        >>> ae = BinaryAutoencoder(cfg)
        >>> codes = ae.encode(torch.zeros(2, 3, 8, 8))
        >>> codes.bits.shape, ae.decode(codes.bits).shape
        (torch.Size([2, 6, 4, 4]), torch.Size([2, 3, 8, 8]))
    """

    def __init__(self, cfg: BinaryAEConfig) -> None:
        super().__init__()
        self.cfg = cfg
        chans = [cfg.nf * m for m in cfg.ch_mult]
        res = cfg.resolution
        enc: list[nn.Module] = [nn.Conv2d(cfg.in_channels, chans[0], 3, padding=1)]
        cin = chans[0]
        for i, ch in enumerate(chans):
            for _ in range(cfg.num_res_blocks):
                enc.append(_ResBlock(cin, ch))
                cin = ch
                if res in cfg.attn_resolutions:
                    enc.append(_Attn(ch))
            if i < len(chans) - 1:
                enc.append(nn.Conv2d(ch, ch, 3, stride=2, padding=1))
                res //= 2
        enc += [_ResBlock(cin, cin), _Attn(cin), _ResBlock(cin, cin), _norm(cin), nn.SiLU()]
        enc.append(nn.Conv2d(cin, cfg.emb_dim, 3, padding=1))
        self.encoder = nn.Sequential(*enc)
        self.quantize = BernoulliQuantizer(cfg.emb_dim, cfg.code_dim)
        dec: list[nn.Module] = [nn.Conv2d(cfg.emb_dim, chans[-1], 3, padding=1)]
        cin = chans[-1]
        dec += [_ResBlock(cin, cin), _Attn(cin), _ResBlock(cin, cin)]
        for i, ch in reversed(list(enumerate(chans))):
            for _ in range(cfg.num_res_blocks):
                dec.append(_ResBlock(cin, ch))
                cin = ch
                if res in cfg.attn_resolutions:
                    dec.append(_Attn(ch))
            if i > 0:
                dec += [nn.Upsample(scale_factor=2.0, mode="nearest"), nn.Conv2d(ch, ch, 3, padding=1)]
                res *= 2
        dec += [_norm(cin), nn.SiLU(), nn.Conv2d(cin, cfg.in_channels, 3, padding=1)]
        self.decoder = nn.Sequential(*dec)

    def _check_images(self, x: torch.Tensor) -> None:
        c, r = self.cfg.in_channels, self.cfg.resolution
        if x.ndim != 4 or x.shape[1] != c or x.shape[-2:] != (r, r):
            raise ValueError(f"images must have shape (B, {c}, {r}, {r}), got {tuple(x.shape)}")

    def encode(self, x: torch.Tensor, *, generator: torch.Generator | None = None) -> BinaryCodes:
        """Images in [-1, 1], shape (B, C, H, W) -> :class:`BinaryCodes` of shape (B, K, h, w)."""
        self._check_images(x)
        return self.quantize(self.encoder(x), generator=generator)[1]

    def decode(self, bits: torch.Tensor) -> torch.Tensor:
        """Bits (B, K, h, w) in {0, 1} (or straight-through values) -> images (B, C, H, W) in ~[-1, 1]."""
        if bits.ndim != 4 or bits.shape[1] != self.cfg.code_dim:
            raise ValueError(f"bits must have shape (B, {self.cfg.code_dim}, h, w), got {tuple(bits.shape)}")
        return self.decoder(self.quantize.embed(bits))

    def forward(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, BinaryCodes]:
        """Reconstruction through straight-through stochastic bits: ``(x_hat, codes)``."""
        self._check_images(x)
        b_st, codes = self.quantize(self.encoder(x), generator=generator)
        return self.decoder(self.quantize.embed(b_st)), codes

    @classmethod
    def from_pretrained(cls, path: str, cfg: BinaryAEConfig, *, key: str | None = "ema") -> BinaryAutoencoder:
        """Load a B-AE from a local checkpoint file (no download).

        Args:
            path: a ``torch.save`` file holding a state dict or a dict with ``key``.
            cfg: the architecture it was saved with.
            key: entry of the file holding the weights (``"ema"`` for released tokenizers), or None.
        """
        from iclr25.methods.bigr.checkpoint import load_state

        model = cls(cfg)
        load_state(model, path, key=key)
        return model


def train_tokenizer(
    ae: BinaryAutoencoder,
    images: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 2e-3,
    generator: torch.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
    perceptual: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    perceptual_weight: float = 1.0,
) -> list[float]:
    """Train a B-AE with L1 (+ ``perceptual_weight`` * perceptual) (+ ``code_weight`` * mean p(1 - p)).

    The paper's loss is L1 + LPIPS (weight 1) + a patch GAN; this trainer has no GAN term.

    Args:
        ae: the model (trained in place).
        images: shape (n, C, H, W), values in [-1, 1].
        steps: optimiser steps.
        batch_size: images per step.
        lr: Adam learning rate.
        generator: RNG of batches and Bernoulli draws.
        progress: ``progress(done, total)`` called every 50 steps.
        perceptual: ``perceptual(x_hat, x)`` -> scalar, e.g. a
            :class:`~iclr25.methods.bigr.perceptual.PerceptualLoss` or an LPIPS module; None for L1 only.
        perceptual_weight: its weight.

    Returns:
        The loss of every step.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError("steps and batch_size must be >= 1")
    if perceptual_weight < 0:
        raise ValueError(f"perceptual_weight must be non-negative, got {perceptual_weight}")
    opt = torch.optim.Adam(ae.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    losses = []
    ae.train()
    for step in range(steps):
        idx = torch.randint(0, len(images), (batch_size,), generator=generator)
        x = images[idx]
        x_hat, codes = ae(x, generator=generator)
        loss = (x_hat - x).abs().mean()
        if perceptual is not None and perceptual_weight:
            loss = loss + perceptual_weight * perceptual(x_hat, x)
        if ae.cfg.code_weight:
            loss = loss + ae.cfg.code_weight * (codes.probs * (1 - codes.probs)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if progress and (step + 1) % 50 == 0:
            progress(step + 1, steps)
    ae.eval()
    return losses


def save_tokenizer(
    ae: BinaryAutoencoder, directory: str | os.PathLike[str], *, training: dict[str, Any] | None = None
) -> Path:
    """Write ``config.json``, ``bae.pt`` (``{"model", "ema"}``) and, if given, ``training.json``.

    Returns:
        The folder.
    """
    from iclr25.methods.bigr.checkpoint import save_checkpoint

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(dataclasses.asdict(ae.cfg), indent=1) + "\n")
    save_checkpoint(d / "bae.pt", ae)
    if training is not None:
        (d / "training.json").write_text(json.dumps(training, indent=1) + "\n")
    return d


def load_tokenizer(directory: str | os.PathLike[str] = SHAPES_TOKENIZER) -> BinaryAutoencoder:
    """A B-AE saved by :func:`save_tokenizer` (by default the shipped shapes-world one), eval mode.

    Raises:
        FileNotFoundError: the folder lacks ``config.json`` or ``bae.pt``.
    """
    d = Path(directory)
    for f in ("config.json", "bae.pt"):
        if not (d / f).is_file():
            raise FileNotFoundError(f"tokenizer folder {str(d)!r} has no {f}")
    raw = json.loads((d / "config.json").read_text())
    cfg = BinaryAEConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    return BinaryAutoencoder.from_pretrained(str(d / "bae.pt"), cfg).eval()
