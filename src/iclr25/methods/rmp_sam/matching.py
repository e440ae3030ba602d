"""Hungarian matching and point sampling (Mask2Former-style training of RMP-SAM).

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.3: object and video batches are matched with the cost
``2 CE + 5 BCE + 5 Dice`` on uniformly sampled points; losses use importance-sampled points
(uncertainty ``-|logit|``, oversample 3, ratio 0.75). Prompt batches are never matched.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

__all__ = ["fixed_assignment", "hungarian_match", "importance_points", "match_cost", "point_sample"]


def point_sample(maps: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Values of maps at points in [0, 1] x [0, 1] (x, y), bilinear, ``align_corners=False``.

    Shape:
        maps (B, N, H, W), points (B, P, 2) -> (B, N, P).

    Example:
        >>> m = torch.arange(4.0).view(1, 1, 2, 2)
        >>> point_sample(m, torch.tensor([[[0.25, 0.25], [0.75, 0.75]]])).tolist()
        [[[0.0, 3.0]]]
    """
    grid = (2.0 * points - 1.0).unsqueeze(2)  # (B, P, 1, 2)
    return F.grid_sample(maps, grid.to(maps.dtype), mode="bilinear", align_corners=False).squeeze(-1)


def importance_points(
    logits: torch.Tensor,
    num_points: int,
    oversample: float,
    importance: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Importance sampling of points: oversample uniformly, keep the most uncertain ``importance``
    fraction (uncertainty ``-|logit|``) and fill up with uniform points.

    Shape:
        logits (M, 1, H, W) -> points (M, num_points, 2) in [0, 1].
    """
    m = logits.shape[0]
    n_over = int(num_points * oversample)
    cand = torch.rand(m, n_over, 2, generator=generator, dtype=logits.dtype).to(logits.device)
    unc = -point_sample(logits.detach(), cand).abs().squeeze(1)  # (M, n_over)
    n_imp = int(importance * num_points)
    idx = unc.topk(n_imp, dim=1).indices
    chosen = torch.gather(cand, 1, idx[..., None].expand(-1, -1, 2))
    rest = torch.rand(m, num_points - n_imp, 2, generator=generator, dtype=logits.dtype).to(logits.device)
    return torch.cat([chosen, rest], dim=1)


def match_cost(
    logits: torch.Tensor,
    masks: torch.Tensor,
    labels: torch.Tensor,
    gt_masks: torch.Tensor,
    points: torch.Tensor,
    *,
    class_weight: float = 2.0,
    mask_weight: float = 5.0,
    dice_weight: float = 5.0,
) -> torch.Tensor:
    """Cost matrix (N, M) of one image: ``-w_c p[label] + w_m BCE + w_d Dice`` on shared points.

    Shape:
        logits (N, K + 1), masks (N, h, w), labels (M,), gt_masks (M, H, W), points (P, 2) -> (N, M).
    """
    prob = logits.softmax(-1)[:, labels]  # (N, M)
    pm = point_sample(masks[None], points[None])[0]  # (N, P)
    pg = point_sample(gt_masks[None].to(masks.dtype), points[None])[0]  # (M, P)
    p = pm.shape[1]
    pos = F.binary_cross_entropy_with_logits(pm, torch.ones_like(pm), reduction="none")
    neg = F.binary_cross_entropy_with_logits(pm, torch.zeros_like(pm), reduction="none")
    bce = (pos @ pg.T + neg @ (1 - pg).T) / p
    s = pm.sigmoid()
    dice = 1 - (2 * s @ pg.T + 1) / (s.sum(-1)[:, None] + pg.sum(-1)[None, :] + 1)
    return class_weight * -prob + mask_weight * bce + dice_weight * dice


def hungarian_match(cost: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimum-cost one-to-one assignment (``scipy.optimize.linear_sum_assignment``).

    Returns:
        (query indices, target indices), both long tensors of length min(N, M).

    Example:
        >>> hungarian_match(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        (tensor([0, 1]), tensor([1, 0]))
    """
    c = cost.detach().cpu().numpy()
    if not np.isfinite(c).all():
        raise ValueError("matching cost has non-finite entries")
    rows, cols = linear_sum_assignment(c)
    return torch.as_tensor(rows, dtype=torch.long), torch.as_tensor(cols, dtype=torch.long)


def fixed_assignment(num_queries: int, num_targets: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The negative control: query i <-> target i, no matching."""
    k = min(num_queries, num_targets)
    return torch.arange(k), torch.arange(k)
