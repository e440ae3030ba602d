"""Baselines of the BiGR claim: a LlamaGen-style causal AR model over packed binary codes.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 4 (comparison with LlamaGen: the same Llama
    blocks with a causal mask, cross-entropy over token ids, raster order, one pass per token).
    The per-bit head and random-order sampling baselines are flags of :class:`BiGR`
    (``head="bit"``) and :func:`generate` (``order="random"``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common import rng
from iclr25.methods.bigr.backbone import LlamaBackbone
from iclr25.methods.bigr.model import check_bits

__all__ = ["CausalAR", "pack_bits", "unpack_bits"]


def pack_bits(bits: torch.Tensor) -> torch.Tensor:
    """(..., K) bits -> (...,) ids sum_k b_k 2^k."""
    k = bits.shape[-1]
    return (bits.long() * (2 ** torch.arange(k))).sum(-1)


def unpack_bits(ids: torch.Tensor, code_dim: int) -> torch.Tensor:
    """(...,) ids -> (..., K) float bits (inverse of :func:`pack_bits`)."""
    return ((ids[..., None] >> torch.arange(code_dim)) & 1).float()


class CausalAR(nn.Module):
    """LlamaGen-style class-conditional AR model over 2^K packed bit ids.

    Args:
        code_dim: K (<= 12 so that 2^K ids stay small).
        grid: token grid side.
        num_classes: class labels (one more id is the null class).
        dim, depth, heads, dropout, class_dropout: as in :class:`~iclr25.methods.bigr.config.BiGRConfig`.

    Example:
        >>> ar = CausalAR(code_dim=4, grid=2, num_classes=3, dim=32, depth=1, heads=2)
        >>> bits = torch.randint(0, 2, (2, 4, 4)).float()
        >>> float(ar.loss(bits, torch.tensor([0, 2]))["loss"]) > 0
        True
    """

    def __init__(
        self, *, code_dim: int, grid: int, num_classes: int, dim: int, depth: int, heads: int,
        dropout: float = 0.0, class_dropout: float = 0.1,
    ) -> None:  # fmt: skip
        super().__init__()
        if code_dim > 12:
            raise ValueError(f"code_dim must be <= 12 for 2^K ids, got {code_dim}")
        self.code_dim, self.grid, self.num_classes = code_dim, grid, num_classes
        self.num_tokens, self.class_dropout = grid * grid, class_dropout
        self.tok_emb = nn.Embedding(2**code_dim, dim)
        nn.init.normal_(self.tok_emb.weight, std=0.02)
        self.backbone = LlamaBackbone(
            dim=dim,
            depth=depth,
            heads=heads,
            grid=grid,
            num_classes=num_classes,
            dropout=dropout,
            causal=True,
        )
        self.norm = nn.RMSNorm(dim, eps=1e-5)
        self.out = nn.Linear(dim, 2**code_dim, bias=False)

    @property
    def null_class(self) -> int:
        """Id of the null class."""
        return self.num_classes

    def logits(
        self, ids: torch.Tensor, labels: torch.Tensor, *, class_emb: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Next-token logits for a prefix ``ids`` (B, L), L < N: shape (B, L + 1, 2^K)."""
        hs = self.backbone(self.tok_emb(ids), labels, class_emb=class_emb)
        return self.out(self.norm(hs[-1]))

    def loss(
        self, bits: torch.Tensor, labels: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> dict[str, torch.Tensor]:
        """Cross-entropy over packed ids in raster order (label dropout for CFG)."""
        check_bits(bits, self.code_dim, self.num_tokens)
        if (labels < 0).any() or (labels >= self.num_classes).any():
            raise ValueError(f"labels must lie in [0, {self.num_classes})")
        drop = rng.rand(len(labels), generator=generator, device=labels.device) < self.class_dropout
        labels = torch.where(drop, torch.full_like(labels, self.null_class), labels)
        ids = pack_bits(bits)  # (B, N)
        logits = self.logits(ids[:, :-1], labels)  # (B, N, 2^K)
        return {"loss": F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids.reshape(-1))}

    @torch.no_grad()
    def generate(
        self, labels: torch.Tensor, *, cfg_scale: float = 3.0, temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, int]:  # fmt: skip
        """Raster-order sampling with CFG on logits; returns ``(bits (B, N, K), sequential passes)``."""
        if cfg_scale < 0:
            raise ValueError(f"cfg_scale must be >= 0, got {cfg_scale}")
        b = len(labels)
        null = torch.full_like(labels, self.null_class)
        ids = torch.zeros(b, 0, dtype=torch.long, device=labels.device)
        for _ in range(self.num_tokens):
            if cfg_scale == 1.0:
                logit = self.logits(ids, labels)[:, -1]
            else:
                both = self.logits(torch.cat([ids, ids]), torch.cat([labels, null]))[:, -1]  # [cond; null]
                lc, lu = both[:b], both[b:]
                logit = lu + cfg_scale * (lc - lu)
            nxt = rng.multinomial(F.softmax(logit / temperature, -1), 1, generator=generator)  # (B, 1)
            ids = torch.cat([ids, nxt], 1)
        return unpack_bits(ids, self.code_dim), self.num_tokens

    @torch.no_grad()
    def extract_features(
        self, bits: torch.Tensor, *, layer: int, labels: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Pooled pre-norm features of block ``layer`` over the N token positions (null class); (B, D).

        ``layer=0`` pools the id embeddings of the tokens themselves (no block run).
        """
        check_bits(bits, self.code_dim, self.num_tokens)
        if not 0 <= layer <= len(self.backbone.blocks):
            raise ValueError(f"layer must lie in [0, {len(self.backbone.blocks)}], got {layer}")
        if layer == 0:
            return self.tok_emb(pack_bits(bits)).mean(1)
        if labels is None:
            labels = torch.full((len(bits),), self.null_class, dtype=torch.long)
        hs = self.backbone(self.tok_emb(pack_bits(bits)), labels, stop_at=layer)
        return hs[-1][:, 1:].mean(1)
