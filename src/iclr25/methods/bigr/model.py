"""The BiGR generator: masked binary-token modelling with a bidirectional Llama backbone.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 3.2 (masked modelling of binary codes,
    Linear(K, D) input, one learned mask embedding, class token with label dropout, output
    c_i = final RMSNorm + learned position embedding) and Sec. 3.4 (representation: all tokens
    visible, null class, an intermediate layer's pre-norm output, average pooling).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from iclr25.common import rng
from iclr25.methods.bigr.backbone import LlamaBackbone
from iclr25.methods.bigr.checkpoint import _restore_train_state, _train_state
from iclr25.methods.bigr.config import BiGRConfig
from iclr25.methods.bigr.transcoder import BernoulliTranscoder, BitHead

__all__ = ["BiGR", "check_bits", "masked_count", "train_bigr"]


def check_bits(bits: torch.Tensor, code_dim: int, num_tokens: int) -> None:
    """Raise ``ValueError`` unless ``bits`` is (B, N, K) with values in {0, 1}."""
    if bits.ndim != 3 or bits.shape[1:] != (num_tokens, code_dim):
        raise ValueError(f"bits must have shape (B, {num_tokens}, {code_dim}), got {tuple(bits.shape)}")
    if not ((bits == 0) | (bits == 1)).all():
        raise ValueError("bits must be binary (0 or 1)")


def masked_count(s: int, n: int) -> int:
    """m = max(1, floor(N cos(pi s / (2N)))) for s in [0, N - 1] (cosine mask schedule)."""
    return max(1, math.floor(n * math.cos(math.pi * s / (2 * n))))


class BiGR(nn.Module):
    """Bidirectional masked generator over binary tokens, with a transcoder (or per-bit) head.

    Args:
        cfg: the :class:`BiGRConfig`.

    Example:
        >>> from iclr25.methods.bigr.config import tiny
        >>> model = BiGR(tiny())
        >>> bits = torch.randint(0, 2, (2, 16, 8)).float()
        >>> out = model.loss(bits, torch.tensor([0, 1]), generator=torch.Generator().manual_seed(0))
        >>> sorted(out), model.extract_features(bits, layer=1).shape
        (['loss', 'masked'], torch.Size([2, 64]))
    """

    def __init__(self, cfg: BiGRConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d, n = cfg.dim, cfg.num_tokens
        self.bit_proj = nn.Linear(cfg.code_dim, d)
        self.mask_emb = nn.Parameter(torch.randn(d) * 0.02)
        self.backbone = LlamaBackbone(
            dim=d, depth=cfg.depth, heads=cfg.heads, grid=cfg.grid, num_classes=cfg.num_classes,
            dropout=cfg.dropout, causal=cfg.causal,
        )  # fmt: skip
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.pos_emb = nn.Parameter(torch.randn(1, n, d) * 0.02)
        tc = cfg.transcoder
        self.head: BernoulliTranscoder | BitHead
        if cfg.head == "transcoder":
            self.head = BernoulliTranscoder(
                code_dim=cfg.code_dim,
                cond_dim=d,
                width=tc.width,
                depth=tc.depth,
                timesteps=tc.timesteps,
                freq_dim=tc.freq_dim,
            )
        else:
            self.head = BitHead(code_dim=cfg.code_dim, cond_dim=d)

    @property
    def null_class(self) -> int:
        """Id of the null (unconditional) class."""
        return self.cfg.num_classes

    def _embed(self, bits: torch.Tensor, token_mask: torch.Tensor | None) -> torch.Tensor:
        x = self.bit_proj(bits)  # (B, N, D)
        if token_mask is not None:
            x = torch.where(token_mask[..., None], self.mask_emb.to(x.dtype), x)
        return x

    def forward(
        self,
        bits: torch.Tensor,
        labels: torch.Tensor | None,
        token_mask: torch.Tensor | None = None,
        *,
        class_emb: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Per-token conditions c_i.

        Args:
            bits: (B, N, K) in {0, 1} (values at masked positions are ignored).
            labels: class ids (B,), or None with ``class_emb``.
            token_mask: (B, N) bool, True = masked.
            class_emb: class embeddings (B, D) (interpolation).

        Returns:
            c, shape (B, N, D).
        """
        hs = self.backbone(self._embed(bits, token_mask), labels, class_emb=class_emb)
        return self.norm(hs[-1][:, 1:]) + self.pos_emb  # drop the class token

    def loss(
        self, bits: torch.Tensor, labels: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        """Masked-token loss (bidirectional) or next-token loss on all tokens (``causal=True``).

        One masked count m per batch from the cosine schedule, positions random per sample;
        labels drop to the null class with probability ``class_dropout``.

        Returns:
            ``{"loss": scalar, "masked": m}``.
        """
        cfg = self.cfg
        check_bits(bits, cfg.code_dim, cfg.num_tokens)
        b, n, k = bits.shape
        if (labels < 0).any() or (labels >= cfg.num_classes).any():
            raise ValueError(f"labels must lie in [0, {cfg.num_classes})")
        drop = rng.rand(b, generator=generator, device=bits.device) < cfg.class_dropout
        labels = torch.where(drop, torch.full_like(labels, self.null_class), labels)
        if cfg.causal:
            # token i is predicted from [class, x_1 .. x_{i-1}]: shift the input right by one
            x = self.bit_proj(bits[:, :-1])  # (B, N - 1, D)
            hs = self.backbone(x, labels)
            cond = self.norm(hs[-1]) + self.pos_emb  # (B, N, D): class-token output predicts x_1
            loss = self.head.loss(bits.reshape(b * n, k), cond.reshape(b * n, -1), generator=generator)
            return {"loss": loss, "masked": torch.tensor(n)}
        s = int(rng.randint(0, n, (1,), generator=generator))
        m = masked_count(s, n)
        order = rng.rand(b, n, generator=generator, device=bits.device).argsort(1)
        token_mask = torch.zeros(b, n, dtype=torch.bool, device=bits.device)
        token_mask.scatter_(1, order[:, :m], True)
        cond = self(bits, labels, token_mask)  # (B, N, D)
        loss = self.head.loss(bits[token_mask], cond[token_mask], generator=generator)  # masked only
        return {"loss": loss, "masked": torch.tensor(m)}

    @torch.no_grad()
    def extract_features(
        self, bits: torch.Tensor, *, layer: int, labels: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Pooled representation: all tokens visible, null class by default, pre-norm output of block
        ``layer`` (1-based), class token dropped, averaged over tokens; shape (B, D).

        ``layer=0`` pools the input encoding Linear(K, D) of the bits itself (no block run): the
        floor that separates what the blocks learned from what the input encoding already gives.
        """
        check_bits(bits, self.cfg.code_dim, self.cfg.num_tokens)
        if not 0 <= layer <= self.cfg.depth:
            raise ValueError(f"layer must lie in [0, {self.cfg.depth}], got {layer}")
        if layer == 0:
            return self.bit_proj(bits).mean(1)
        if labels is None:
            labels = torch.full((len(bits),), self.null_class, dtype=torch.long)
        hs = self.backbone(self.bit_proj(bits), labels, stop_at=layer)
        return hs[-1][:, 1:].mean(1)


def train_bigr(
    model: nn.Module,
    bits_fn: Callable[[torch.Tensor], torch.Tensor],
    labels: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 0.02,
    betas: tuple[float, float] = (0.9, 0.95),
    clip: float = 1.0,
    ema_decay: float | None = None,
    generator: torch.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_eval: Callable[[int, nn.Module], None] | None = None,
    eval_every: int = 0,
    stop: int | None = None,
    state: Mapping[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    checkpoint_every: int = 500,
) -> tuple[list[float], nn.Module | None]:
    """AdamW training of any model with ``loss(bits, labels, generator=) -> {"loss": ...}``.

    Weight decay skips 1-D parameters (norms, biases, embeddings' offsets), as in the paper's recipe.

    Args:
        model: BiGR or the AR baseline (trained in place).
        bits_fn: index tensor (batch,) -> bits (batch, N, K) (e.g. fresh Bernoulli draws).
        labels: class ids of the whole training set (n,).
        steps: optimiser steps.
        batch_size: images per step.
        lr: AdamW learning rate (constant).
        weight_decay: AdamW weight decay on >= 2-D parameters.
        betas: AdamW betas.
        clip: gradient-norm clip.
        ema_decay: keep an EMA copy with this decay (None: no EMA).
        generator: RNG of batches, masks and noise.
        progress: ``progress(done, total)`` called every 50 steps.
        on_eval: ``on_eval(step, model)`` called after every ``eval_every`` steps (and after the
            last) with the model inference would use: the EMA copy if there is one, else the
            trained model (in eval mode for the call). Its RNG draws must not touch ``generator``.
        eval_every: steps between ``on_eval`` calls (0: never).
        stop: end the run after this many steps (replaying the first steps of a longer run).
        state: what ``checkpoint`` received in an interrupted run: training goes on from there
            exactly as if never stopped (weights, EMA, optimiser, ``generator`` and torch's RNG).
        checkpoint: called with the training state every ``checkpoint_every`` steps (after that
            step's ``on_eval``), except after the last.
        checkpoint_every: steps between checkpoints.

    Returns:
        ``(losses, ema_model_or_None)``.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError("steps and batch_size must be >= 1")
    if ema_decay is not None and not 0.0 <= ema_decay < 1.0:
        raise ValueError(f"ema_decay must lie in [0, 1), got {ema_decay}")
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr, betas=betas,
    )  # fmt: skip
    ema = copy.deepcopy(model).eval() if ema_decay is not None else None
    start, losses = 0, []
    if state is not None:
        start, losses = _restore_train_state(dict(state), model, opt, None, generator)
        if ema is not None:
            ema.load_state_dict(state["ema"])
    end = steps if stop is None else min(stop, steps)
    model.train()
    for step in range(start, end):
        idx = rng.randint(0, len(labels), (batch_size,), generator=generator, device=labels.device)
        loss = model.loss(bits_fn(idx), labels[idx], generator=generator)["loss"]
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        losses.append(loss.item())
        if ema is not None:
            with torch.no_grad():
                for pe, pm in zip(ema.parameters(), model.parameters(), strict=True):
                    pe.lerp_(pm, 1 - ema_decay)  # type: ignore[operator]
        if progress and (step + 1) % 50 == 0:
            progress(step + 1, steps)
        if on_eval is not None and eval_every > 0 and ((step + 1) % eval_every == 0 or step + 1 == steps):
            target = ema if ema is not None else model
            target.eval()
            with torch.no_grad():
                on_eval(step + 1, target)
            model.train()
        if checkpoint is not None and (step + 1) % checkpoint_every == 0 and step + 1 < end:
            saved = _train_state(step + 1, losses, model, opt, None, generator)
            checkpoint({**saved, "ema": None if ema is None else ema.state_dict()})
    model.eval()
    return losses, ema
