"""BiGR's backbone: Llama blocks with 2D RoPE and adaLN-single class conditioning.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 3.2: LlamaGen-style blocks (RMSNorm,
    SwiGLU, rotary attention) made bidirectional, conditioned through adaLN-single (PixArt-alpha: one
    shared zero-initialised Linear(D, 6D) on the class embedding plus a learned per-layer offset).

The class token is prepended at sequence position 0. As in LlamaGen, its rotary row is all zeros
(cos = sin = 0), so its query and key vanish: it acts on the image tokens only through values and
adaLN. Reproduced on purpose so official checkpoints load and behave the same.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LlamaBackbone", "apply_rope", "rope_2d"]


def rope_2d(grid: int, head_dim: int, *, base: float = 10000.0, cls_tokens: int = 1) -> torch.Tensor:
    """2D rotary table: half of each head's rotary pairs encode the row, half the column.

    Args:
        grid: side of the token grid (N = grid ** 2).
        head_dim: per-head width (divisible by 4).
        base: rotary base.
        cls_tokens: leading rows set to zero (the class token: cos = sin = 0).

    Returns:
        Shape (cls_tokens + N, head_dim // 2, 2): (cos, sin) per rotary pair.
    """
    if head_dim % 4:
        raise ValueError(f"head_dim must be divisible by 4, got {head_dim}")
    quarter = head_dim // 4
    freqs = 1.0 / base ** (torch.arange(quarter, dtype=torch.float32) / quarter)  # (hd/4,)
    pos = torch.arange(grid, dtype=torch.float32)
    ang = torch.outer(pos, freqs)  # (grid, hd/4)
    rows = ang[:, None, :].expand(grid, grid, quarter)  # row angle for token (r, c)
    cols = ang[None, :, :].expand(grid, grid, quarter)  # column angle
    theta = torch.cat([rows, cols], -1).reshape(grid * grid, 2 * quarter)  # (N, hd/2)
    table = torch.stack([theta.cos(), theta.sin()], -1)  # (N, hd/2, 2)
    return torch.cat([torch.zeros(cls_tokens, 2 * quarter, 2), table])  # (cls + N, hd/2, 2)


def apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of x: (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos).

    Shape:
        x: (B, H, L, hd); table: (L, hd/2, 2); output like x.
    """
    xr = x.float().reshape(*x.shape[:-1], -1, 2)  # (B, H, L, hd/2, 2)
    cos, sin = table[..., 0], table[..., 1]  # (L, hd/2)
    out = torch.stack([xr[..., 0] * cos - xr[..., 1] * sin, xr[..., 0] * sin + xr[..., 1] * cos], -1)
    return out.reshape(x.shape).type_as(x)


def _swiglu_hidden(dim: int) -> int:
    hidden = int(2 * (4 * dim) / 3)
    return 256 * ((hidden + 255) // 256)  # round_up(8D/3, 256)


class _Block(nn.Module):
    """One Llama block with adaLN-single modulation (shift/scale/gate for both sublayers)."""

    def __init__(self, dim: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.norm1, self.norm2 = nn.RMSNorm(dim, eps=1e-5), nn.RMSNorm(dim, eps=1e-5)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        hidden = _swiglu_hidden(dim)
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.drop = nn.Dropout(dropout)
        # per-layer learned offset added to the shared adaLN output (PixArt's scale_shift_table)
        self.ada_offset = nn.Parameter(torch.randn(1, 1, 6, dim) / dim**0.5)

    def forward(self, x: torch.Tensor, ada: torch.Tensor, rope: torch.Tensor, causal: bool) -> torch.Tensor:
        b, n, d = x.shape
        shift1, scale1, gate1, shift2, scale2, gate2 = (ada + self.ada_offset).unbind(2)  # each (B, 1, D)
        h = self.norm1(x) * (1 + scale1) + shift1
        q, k, v = self.qkv(h).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = apply_rope(q, rope), apply_rope(k, rope)  # each (B, H, n, hd)
        p = self.dropout if self.training else 0.0
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=causal)  # (B, H, n, hd)
        x = x + gate1 * self.drop(self.proj(o.transpose(1, 2).reshape(b, n, d)))
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.drop(self.w2(F.silu(self.w1(h)) * self.w3(h)))


class LlamaBackbone(nn.Module):
    """Stack of Llama blocks over [class token; N image tokens] with adaLN-single.

    Args:
        dim: D.
        depth: number of blocks.
        heads: attention heads.
        grid: token grid side.
        num_classes: class labels; id ``num_classes`` is the null class.
        dropout: attention / residual dropout.
        causal: causal attention (LlamaGen) instead of bidirectional (BiGR).

    Example:
        >>> bb = LlamaBackbone(dim=32, depth=2, heads=2, grid=2, num_classes=3)
        >>> hs = bb(torch.zeros(1, 4, 32), torch.tensor([0]))
        >>> len(hs), hs[-1].shape
        (2, torch.Size([1, 5, 32]))
    """

    def __init__(
        self, *, dim: int, depth: int, heads: int, grid: int, num_classes: int, dropout: float = 0.0,
        causal: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        self.dim, self.grid, self.num_classes, self.causal = dim, grid, num_classes, causal
        self.class_emb = nn.Embedding(num_classes + 1, dim)
        nn.init.normal_(self.class_emb.weight, std=0.02)
        self.ada = nn.Linear(dim, 6 * dim)  # adaLN-single: shared across blocks, zero-initialised
        nn.init.zeros_(self.ada.weight)
        nn.init.zeros_(self.ada.bias)
        self.blocks = nn.ModuleList(_Block(dim, heads, dropout) for _ in range(depth))
        self.register_buffer("rope", rope_2d(grid, dim // heads), persistent=False)

    def class_embedding(self, labels: torch.Tensor) -> torch.Tensor:
        """Class ids (B,) -> embeddings (B, D); checks the range."""
        if labels.dtype not in (torch.int64, torch.int32) or labels.ndim != 1:
            raise ValueError("labels must be a 1-D integer tensor")
        if (labels < 0).any() or (labels > self.num_classes).any():
            raise ValueError(f"labels must lie in [0, {self.num_classes}] ({self.num_classes} = null)")
        return self.class_emb(labels)

    def forward(
        self,
        tokens: torch.Tensor,
        labels: torch.Tensor | None = None,
        *,
        class_emb: torch.Tensor | None = None,
        stop_at: int | None = None,
    ) -> list[torch.Tensor]:
        """Run the blocks.

        Args:
            tokens: input embeddings of the image tokens, shape (B, L, D) with L <= N.
            labels: class ids (B,), or None with ``class_emb`` given.
            class_emb: class embeddings (B, D) (e.g. an interpolation of two classes).
            stop_at: run only the first ``stop_at`` blocks.

        Returns:
            Hidden states after each block run, each (B, 1 + L, D), before any final norm.
        """
        if class_emb is None:
            if labels is None:
                raise ValueError("give labels or class_emb")
            class_emb = self.class_embedding(labels)
        b, n, _ = tokens.shape
        x = torch.cat([class_emb[:, None], tokens], 1)  # (B, 1 + L, D)
        ada = self.ada(F.silu(class_emb)).reshape(b, 1, 6, self.dim)  # (B, 1, 6, D)
        rope = self.rope[: n + 1]
        out = []
        for block in self.blocks[:stop_at]:
            x = block(x, ada, rope, self.causal)
            out.append(x)
        return out
