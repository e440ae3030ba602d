"""Decoupled adapters of RMP-SAM: one object adapter and one prompt adapter after the shared stages.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.2 ("decoupled adapter"). The object adapter is one more kernel update on
hard-mask-pooled features with its own class projection (final output for panoptic and video);
the prompt adapter lets each prompt query cross-attend to every pixel of F and has its own IoU
head (final output for interactive segmentation). No kernel update on the prompt side, as in the
released config. ``head_layout="mlp"`` gives each adapter its own mask MLP and MLP class / IoU heads;
``head_layout="official"`` is the released layout: the mask is the adapted query against F, the class
embedding (or the class logits of a linear head) is one Linear and so is the IoU head.
"""

from __future__ import annotations

import torch
from torch import nn

from iclr25.methods.rmp_sam.decoder import (
    ClassHead,
    KernelUpdate,
    cosine_logits,
    dynamic_masks,
    hard_mask_pool,
    mlp,
)

__all__ = ["ObjectAdapter", "PromptAdapter"]

_HEADS = ("mlp", "official")


def _check_heads(heads: str) -> None:
    if heads not in _HEADS:
        raise ValueError(f"head_layout must be one of {_HEADS}, got {heads!r}")


def _mask_mlp(c: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(c, c), nn.LayerNorm(c), nn.ReLU(inplace=True), nn.Linear(c, c))


class ObjectAdapter(nn.Module):
    """Kernel update on pooled features + a new class head (and, with ``head_layout="mlp"``, a mask head).

    Args:
        c: query width C.
        num_classes: K (without no-object).
        class_kind: "linear" or "cosine".
        embed_dim: class-embedding width (cosine).
        logit_scale: cosine scale.
        threshold: hard-mask threshold.
        head_layout: "mlp" (``cls``: Linear-LN-ReLU + classifier, ``mask_head``: Linear-LN-ReLU-Linear) or
            "official" (``cls_fc``: one Linear; masks from the adapted query itself).

    Shape:
        queries (B, N, C), masks (B, N, H, W), features (B, C, H, W) -> outputs of a stage.
    """

    def __init__(
        self,
        c: int,
        num_classes: int,
        class_kind: str,
        embed_dim: int,
        logit_scale: float,
        threshold: float = 0.5,
        *,
        head_layout: str = "mlp",
    ) -> None:
        super().__init__()
        _check_heads(head_layout)
        self.threshold = threshold
        self.head_layout = head_layout
        self.class_kind = class_kind
        self.logit_scale = logit_scale
        self.update = KernelUpdate(c)
        if head_layout == "mlp":
            self.cls = ClassHead(c, num_classes, class_kind, embed_dim, logit_scale)
            self.mask_head = _mask_mlp(c)
        else:
            self.cls_fc = nn.Linear(c, embed_dim if class_kind == "cosine" else num_classes + 1)

    def forward(
        self,
        queries: torch.Tensor,
        masks: torch.Tensor,
        features: torch.Tensor,
        class_embed: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        q = self.update(hard_mask_pool(masks, features, self.threshold), queries)
        # the adapter output is not divided by the temperature
        if self.head_layout == "mlp":
            logits, kernel = self.cls(q, class_embed), self.mask_head(q)
        else:
            h = self.cls_fc(q)
            logits = h if self.class_kind == "linear" else cosine_logits(h, class_embed, self.logit_scale)
            kernel = q
        return {
            "queries": q,
            "logits": logits,
            "masks": dynamic_masks(kernel, features),
            "iou": torch.zeros(q.shape[:2], dtype=q.dtype, device=q.device),
        }


class PromptAdapter(nn.Module):
    """Prompt queries cross-attend to all pixels of F (+ LN), then a mask kernel and an IoU score.

    Cross-attention treats every query independently, so prompts stay isolated here too.

    Args:
        c: query width C.
        heads: attention heads.
        num_classes: K (the adapter's class logits are zeros of width K + 1).
        head_layout: "mlp" (``mask_head``: Linear-LN-ReLU-Linear, ``iou_head``: a 3-layer MLP) or
            "official" (``iou_fc``: one Linear; masks from the adapted query itself).

    Shape:
        queries (B, P, C), features (B, C, H, W) -> outputs of a stage.
    """

    def __init__(self, c: int, heads: int, num_classes: int, *, head_layout: str = "mlp") -> None:
        super().__init__()
        _check_heads(head_layout)
        self.num_classes = num_classes
        self.head_layout = head_layout
        self.cross = nn.MultiheadAttention(c, heads, batch_first=True)
        self.norm = nn.LayerNorm(c)
        if head_layout == "mlp":
            self.mask_head = _mask_mlp(c)
            self.iou_head = mlp(c, c, 1, 3)
        else:
            self.iou_fc = nn.Linear(c, 1)

    def forward(self, queries: torch.Tensor, features: torch.Tensor) -> dict[str, torch.Tensor]:
        pix = features.flatten(2).transpose(1, 2)  # (B, HW, C)
        q = self.norm(queries + self.cross(queries, pix, pix, need_weights=False)[0])
        logits = torch.zeros(*q.shape[:2], self.num_classes + 1, dtype=q.dtype, device=q.device)
        if self.head_layout == "mlp":
            kernel, iou = self.mask_head(q), self.iou_head(q)
        else:
            kernel, iou = q, self.iou_fc(q)
        return {
            "queries": q,
            "logits": logits,
            "masks": dynamic_masks(kernel, features),
            "iou": iou.squeeze(-1),
        }
