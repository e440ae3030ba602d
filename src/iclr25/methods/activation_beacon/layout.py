"""Chunk layout of Activation Beacon: where beacons go, their positions and the 4-D attention masks.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3.1 (a chunk of w raw
tokens split into w/α units, one ⟨b⟩ after each unit), Section 3.2 (attention schemes:
full coverage, stepwise expansion, segmentation) and the compressed-stream positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["ChunkLayout", "additive_mask", "chunk_layout", "chunk_visibility"]


@dataclass(frozen=True)
class ChunkLayout:
    """The items of one chunk after beacon insertion.

    Args:
        is_beacon: (T,) bool, True at ⟨b⟩ items.
        unit: (T,) long, 1-based unit index of each item (a beacon carries the unit it closes).
        order: (T,) long, index into ``cat([raw, beacons])`` giving each item.
        n_raw: raw tokens in the chunk.
    """

    is_beacon: torch.Tensor
    unit: torch.Tensor
    order: torch.Tensor
    n_raw: int

    @property
    def n_beacon(self) -> int:
        """Beacons in the chunk."""
        return int(self.is_beacon.sum())

    def __len__(self) -> int:
        return int(self.is_beacon.numel())


def chunk_layout(n_raw: int, alpha: int, *, pos: str = "interleave") -> ChunkLayout:
    """Place w/α beacons among ``n_raw`` raw tokens.

    With ``interleave`` the beacon of unit j sits at in-chunk offset j(α+1) − 1 (α, 2α+1, …);
    with ``append`` all beacons follow the raw tokens. α = 0 means no beacons.

    Args:
        n_raw: raw tokens in the chunk.
        alpha: compression ratio α; must divide ``n_raw`` when positive.
        pos: "interleave" or "append".

    Returns:
        The :class:`ChunkLayout`.

    Shape:
        every tensor is (n_raw + n_raw // α,).

    References:
        Zhang et al., ICLR 2025, Sec. 3.1.

    Example:
        >>> lay = chunk_layout(4, 2)
        >>> lay.is_beacon.nonzero().flatten().tolist()
        [2, 5]
    """
    if n_raw < 0 or alpha < 0:
        raise ValueError(f"n_raw and alpha must be non-negative, got {n_raw}, {alpha}")
    if alpha and n_raw % alpha:
        raise ValueError(f"alpha={alpha} must divide the chunk length {n_raw}")
    n_b = n_raw // alpha if alpha else 0
    raw_unit = torch.arange(n_raw) // alpha + 1 if alpha else torch.ones(n_raw, dtype=torch.long)
    b_unit = torch.arange(1, n_b + 1)
    if pos == "interleave" and n_b:
        # item sort key: raw token t -> t + (t // α); beacon j -> j(α+1) − 1
        raw_slot = torch.arange(n_raw) + torch.arange(n_raw) // alpha
        b_slot = b_unit * (alpha + 1) - 1
    elif pos in ("interleave", "append"):
        raw_slot = torch.arange(n_raw)
        b_slot = n_raw + torch.arange(n_b)
    else:
        raise ValueError(f"pos must be 'interleave' or 'append', got {pos!r}")
    slots = torch.cat([raw_slot, b_slot])
    order = torch.argsort(slots)  # item i is source order[i] of cat([raw, beacons])
    is_beacon = torch.cat([torch.zeros(n_raw, dtype=torch.bool), torch.ones(n_b, dtype=torch.bool)])[order]
    unit = torch.cat([raw_unit, b_unit])[order]
    return ChunkLayout(is_beacon=is_beacon, unit=unit, order=order, n_raw=n_raw)


def chunk_visibility(layout: ChunkLayout, mem_len: int, mode: str = "full-coverage") -> torch.Tensor:
    """Which keys each chunk item may attend to, over ``[memory | chunk]``.

    Memory is always visible. Inside the chunk (query i, key j):
    ``full-coverage``: j ≤ i (plain causal). ``step-expansion``: a raw token sees earlier raw
    tokens; beacon of unit u sees raw tokens of units ≤ u and itself. ``segmentation``: a raw
    token sees earlier raw tokens; beacon of unit u sees raw tokens of unit u and itself.

    Args:
        layout: the chunk layout.
        mem_len: memory entries M before the chunk.
        mode: the attention scheme.

    Returns:
        (T, M + T) bool, True where attention is allowed.

    References:
        Zhang et al., ICLR 2025, Sec. 3.2 (attention schemes).

    Example:
        >>> chunk_visibility(chunk_layout(2, 2), 1).int().tolist()
        [[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    """
    t = len(layout)
    idx = torch.arange(t)
    causal = idx[None, :] <= idx[:, None]
    if mode == "full-coverage":
        inner = causal
    elif mode in ("step-expansion", "segmentation"):
        raw_k = ~layout.is_beacon[None, :]
        raw_q = ~layout.is_beacon[:, None]
        same_unit = layout.unit[None, :] == layout.unit[:, None]
        unit_ok = (layout.unit[None, :] <= layout.unit[:, None]) if mode == "step-expansion" else same_unit
        eye = idx[None, :] == idx[:, None]
        inner = (raw_q & raw_k & causal) | (~raw_q & ((raw_k & unit_ok & causal) | eye))
    else:
        raise ValueError(f"unknown attention mode {mode!r}")
    return torch.cat([torch.ones(t, mem_len, dtype=torch.bool), inner], dim=1)


def additive_mask(visible: torch.Tensor, batch: int, dtype: torch.dtype) -> torch.Tensor:
    """Turn a (T, K) visibility matrix into the additive float mask HF attention adds to scores.

    Args:
        visible: (T, K) bool.
        batch: batch size B.
        dtype: float dtype of the model.

    Returns:
        (B, 1, T, K) tensor with 0 where visible and the dtype's minimum elsewhere.

    Example:
        >>> additive_mask(torch.tensor([[True, False]]), 1, torch.float32)[0, 0, 0, 0].item()
        0.0
    """
    if not bool(visible.any(dim=-1).all()):
        raise ValueError("every query row needs at least one visible key")
    m = torch.zeros(visible.shape, dtype=dtype)
    m = m.masked_fill(~visible, torch.finfo(dtype).min)
    return m[None, None].expand(batch, 1, *visible.shape)  # (B, 1, T, K)
