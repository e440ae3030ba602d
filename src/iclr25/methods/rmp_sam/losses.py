"""Losses of RMP-SAM (Sec. 3.3 of arXiv:2401.10228; Mask2Former-style set prediction).

Object / video batches: CE over every query (no-object weight 0.1), point BCE and point Dice on
matched pairs, with deep supervision on every stage and the adapter. Prompt batches: query i is
supervised by its prompt's mask (BCE + Dice) and the IoU head regresses the Dice coefficient (MSE
x 10); the class loss is zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from iclr25.methods.rmp_sam.config import LossConfig
from iclr25.methods.rmp_sam.matching import (
    fixed_assignment,
    hungarian_match,
    importance_points,
    match_cost,
    point_sample,
)

__all__ = ["dice_loss", "point_mask_losses", "prompt_loss", "set_loss", "sigmoid_bce"]


def dice_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-mask Dice loss ``1 - (2 |s t| + 1) / (|s| + |t| + 1)`` on sigmoid probabilities.

    Shape:
        logits (M, P), targets (M, P) -> (M,).

    Example:
        >>> round(float(dice_loss(torch.tensor([[0.0]]), torch.tensor([[1.0]]))[0]), 4)
        0.2
    """
    s = logits.sigmoid()
    return 1 - (2 * (s * targets).sum(-1) + 1) / (s.sum(-1) + targets.sum(-1) + 1)


def sigmoid_bce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-mask mean BCE with logits. Shape: (M, P) -> (M,)."""
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none").mean(-1)


def point_mask_losses(
    pred: torch.Tensor, gt: torch.Tensor, cfg: LossConfig, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-mask BCE and Dice on importance-sampled points.

    Shape:
        pred (M, h, w) logits, gt (M, H, W) -> two (M,) tensors.
    """
    pts = importance_points(pred[:, None], cfg.num_points, cfg.oversample, cfg.importance, generator)
    pp = _ps(pred, pts)
    pg = _ps(gt.to(pred.dtype), pts)
    return sigmoid_bce(pp, pg), dice_loss(pp, pg)


def _ps(maps: torch.Tensor, pts: torch.Tensor) -> torch.Tensor:
    # each mask with its own points: (M, H, W), (M, P, 2) -> (M, P)
    return point_sample(maps[:, None], pts).squeeze(1)


def set_loss(
    outputs: list[dict[str, torch.Tensor]],
    targets: list[dict[str, torch.Tensor]],
    cfg: LossConfig,
    num_classes: int,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """Matched set loss summed over the supervised outputs (stages + adapter).

    Args:
        outputs: per supervised output, ``logits`` (B, N, K + 1) and ``masks`` (B, N, h, w).
        targets: per image, ``labels`` (M,) and ``masks`` (M, H, W) bool.
        cfg: weights, points and the matcher ("hungarian" or the "fixed" control).
        num_classes: K.
        generator: randomness of the sampled points.
    """
    device = outputs[0]["logits"].device
    n_masks = max(sum(int(t["labels"].numel()) for t in targets), 1)
    total = {
        "loss_cls": torch.zeros((), device=device),
        "loss_mask": torch.zeros((), device=device),
        "loss_dice": torch.zeros((), device=device),
    }
    weight = torch.ones(num_classes + 1, device=device)
    weight[-1] = cfg.no_object_weight
    for out in outputs:
        logits, masks = out["logits"], out["masks"]
        b, n = logits.shape[:2]
        cls_target = torch.full((b, n), num_classes, dtype=torch.long, device=device)
        preds, gts = [], []
        for i, t in enumerate(targets):
            m = int(t["labels"].numel())
            if m == 0:
                continue
            if cfg.matcher == "fixed":
                qi, ti = fixed_assignment(n, m)
            else:
                with torch.no_grad():
                    pts = torch.rand(cfg.num_points, 2, generator=generator).to(device)
                    cost = match_cost(
                        logits[i].float(),
                        masks[i].float(),
                        t["labels"],
                        t["masks"],
                        pts,
                        class_weight=cfg.class_weight,
                        mask_weight=cfg.mask_weight,
                        dice_weight=cfg.dice_weight,
                    )
                qi, ti = hungarian_match(cost)
            qi, ti = qi.to(device), ti.to(device)
            cls_target[i, qi] = t["labels"][ti]
            preds.append(masks[i, qi])
            gts.append(t["masks"][ti])
        total["loss_cls"] = total["loss_cls"] + cfg.class_weight * F.cross_entropy(
            logits.flatten(0, 1), cls_target.flatten(), weight=weight
        )
        if preds:
            bce, dice = point_mask_losses(torch.cat(preds), torch.cat(gts), cfg, generator)
            total["loss_mask"] = total["loss_mask"] + cfg.mask_weight * bce.sum() / n_masks
            total["loss_dice"] = total["loss_dice"] + cfg.dice_weight * dice.sum() / n_masks
    return total


def prompt_loss(
    outputs: list[dict[str, torch.Tensor]],
    gt_masks: torch.Tensor,
    valid: torch.Tensor,
    cfg: LossConfig,
    generator: torch.Generator | None = None,
) -> dict[str, torch.Tensor]:
    """Prompt-batch loss: no matching, query i <-> prompt i's mask; BCE + Dice + IoU regression.

    Args:
        outputs: per supervised output, ``logits``, ``masks`` (B, P, h, w) and ``iou`` (B, P).
        gt_masks: (B, P, H, W) mask of each prompt's instance.
        valid: (B, P) bool, False on padding prompts.
        cfg: weights.
        generator: randomness of the sampled points.
    """
    n = max(int(valid.sum()), 1)
    total: dict[str, torch.Tensor] = {}
    for out in outputs:
        pred, iou = out["masks"][valid], out["iou"][valid]
        bce, dice = point_mask_losses(pred, gt_masks[valid], cfg, generator)
        parts = {
            "loss_mask": cfg.mask_weight * bce.sum() / n,
            "loss_dice": cfg.dice_weight * dice.sum() / n,
            # IoU head regresses the Dice coefficient 1 - Dice loss (detached target)
            "loss_iou": cfg.iou_weight * F.mse_loss(iou, (1 - dice).detach(), reduction="sum") / n,
            # zero-weighted: keeps the class head in the graph
            "loss_cls": 0.0 * out["logits"].sum(),
        }
        for k, v in parts.items():
            total[k] = total.get(k, torch.zeros_like(v)) + v
    return total
