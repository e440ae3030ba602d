"""Video in RMP-SAM: tube layout for training and MinVIS-style clip linking at inference.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.2-3.3. Training concatenates the T frame features of a clip along the
height, so each query predicts a tube mask matched at tube level. Inference runs clips and links
the queries of consecutive clips by Hungarian matching on the cosine distance of their embeddings
(MinVIS, Huang et al., NeurIPS 2022).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from iclr25.methods.rmp_sam.matching import hungarian_match

__all__ = ["frames_to_tube", "link_clips", "tube_to_frames"]


def frames_to_tube(x: torch.Tensor) -> torch.Tensor:
    """Concatenate frames along the height.

    Shape:
        (B, T, C, H, W) -> (B, C, T * H, W).

    Example:
        >>> frames_to_tube(torch.zeros(2, 3, 4, 5, 6)).shape
        torch.Size([2, 4, 15, 6])
    """
    b, t, c, h, w = x.shape
    return x.permute(0, 2, 1, 3, 4).reshape(b, c, t * h, w)


def tube_to_frames(x: torch.Tensor, num_frames: int) -> torch.Tensor:
    """Split a height-concatenated map back into frames.

    Shape:
        (B, N, T * H, W) -> (B, T, N, H, W).
    """
    b, n, th, w = x.shape
    if th % num_frames:
        raise ValueError(f"tube height {th} is not a multiple of T = {num_frames}")
    h = th // num_frames
    return x.reshape(b, n, num_frames, h, w).permute(0, 2, 1, 3, 4)


def link_clips(prev: torch.Tensor, cur: torch.Tensor) -> torch.Tensor:
    """Order of the current clip's queries that follows the previous clip's (cosine-distance Hungarian).

    Shape:
        prev (N, C), cur (N, C) -> perm (N,) with ``cur[perm[i]]`` continuing ``prev[i]``.

    Example:
        >>> q = torch.eye(3)
        >>> link_clips(q, q[[2, 0, 1]]).tolist()
        [1, 2, 0]
    """
    if prev.shape != cur.shape:
        raise ValueError(f"clip query shapes differ: {tuple(prev.shape)} vs {tuple(cur.shape)}")
    cost = 1 - F.normalize(prev, dim=-1) @ F.normalize(cur, dim=-1).T
    rows, cols = hungarian_match(cost)
    perm = torch.empty_like(rows)
    perm[rows] = cols
    return perm
