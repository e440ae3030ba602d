"""Visual prompts of RMP-SAM: a point becomes a +-3 px box, encoded as a prompt query.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.2 ("prompt encoder"). The box is built in input pixels, normalised by the
image size and converted to (cx, cy, w, h) in [0, 1]; each of the four coordinates is sine-encoded
(as the released code encodes the normalised box; no inverse sigmoid before the encoding) and a
linear layer maps the 512-d code to C; a point/box type embedding and a mask-token embedding are
added. Points are (x, y); masks are (row, col).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["PromptEncoder", "inverse_sigmoid", "point_to_box", "sine_encoding"]


def point_to_box(points: torch.Tensor, half: float, height: int, width: int) -> torch.Tensor:
    """XYXY boxes ``[x - half, y - half, x + half, y + half]`` clamped to the image.

    Shape:
        points (..., 2) as (x, y) -> (..., 4).

    Example:
        >>> point_to_box(torch.tensor([[10.5, 2.5]]), 3.0, 32, 32).tolist()
        [[7.5, 0.0, 13.5, 5.5]]
    """
    x, y = points[..., 0], points[..., 1]
    box = torch.stack([x - half, y - half, x + half, y + half], dim=-1)
    lim = torch.tensor([width, height, width, height], dtype=box.dtype, device=box.device)
    return torch.minimum(box.clamp_min(0.0), lim)


def inverse_sigmoid(x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """``log(x / (1 - x))`` after clamping ``x`` to [eps, 1 - eps] (a helper for box refinement; the
    prompt encoding itself uses the normalised box)."""
    x = x.clamp(eps, 1 - eps)
    return torch.log(x / (1 - x))


def sine_encoding(x: torch.Tensor, dim_per_coord: int = 128, temperature: float = 10000.0) -> torch.Tensor:
    """Sine positional encoding of each of the last-axis coordinates (scaled by 2 pi), concatenated.

    Shape:
        (..., D) -> (..., D * dim_per_coord).
    """
    i = torch.arange(dim_per_coord // 2, dtype=x.dtype, device=x.device)
    freq = temperature ** (2 * i / dim_per_coord)
    ang = x[..., None] * (2 * math.pi) / freq  # (..., D, dim/2)
    enc = torch.stack([ang.sin(), ang.cos()], dim=-1).flatten(-2)  # (..., D, dim)
    return enc.flatten(-2)


class PromptEncoder(nn.Module):
    """Points (or boxes) -> prompt queries of width C.

    The normalised (cx, cy, w, h) box is sine-encoded directly (4 x 128 = 512 dims), then
    ``Linear(512, C)``; type and mask-token embeddings are added.

    Args:
        c: query width C.
        pe_dim: width of the sine code of a box (4 coordinates).
        type_rows: 3 (``type_embed``: one row per kind) or 2 (``pb_embed``, the released layout: row 1
            for positive points and boxes, as the released pipeline gives every prompt, row 0 for
            negative points, which it does not take).

    Shape:
        boxes (B, P, 4) XYXY in pixels, kinds (B, P) long (0 positive point, 1 box, 2 negative
        point) -> (B, P, C).
    """

    def __init__(self, c: int, pe_dim: int = 512, *, type_rows: int = 3) -> None:
        super().__init__()
        if type_rows not in (2, 3):
            raise ValueError(f"type_rows must be 2 or 3, got {type_rows}")
        self.pe_dim = pe_dim
        self.type_rows = type_rows
        self.proj = nn.Linear(pe_dim, c)
        if type_rows == 3:
            self.type_embed = nn.Embedding(3, c)
        else:
            self.pb_embed = nn.Embedding(2, c)
        self.mask_token = nn.Parameter(torch.zeros(c))
        nn.init.normal_(self.mask_token, std=0.02)

    def forward(self, boxes: torch.Tensor, kinds: torch.Tensor, height: int, width: int) -> torch.Tensor:
        scale = torch.tensor([width, height, width, height], dtype=boxes.dtype, device=boxes.device)
        b = boxes / scale
        cxcywh = torch.stack(
            [
                (b[..., 0] + b[..., 2]) / 2,
                (b[..., 1] + b[..., 3]) / 2,
                b[..., 2] - b[..., 0],
                b[..., 3] - b[..., 1],
            ],
            dim=-1,
        )
        enc = sine_encoding(cxcywh, self.pe_dim // 4)  # (B, P, 512): the normalised box, encoded
        # 2 rows: positive points and boxes take row 1, negative points row 0
        kind = self.type_embed(kinds) if self.type_rows == 3 else self.pb_embed((kinds != 2).long())
        return self.proj(enc) + kind + self.mask_token
