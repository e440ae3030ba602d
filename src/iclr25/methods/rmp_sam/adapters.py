"""Decoupled adapters of RMP-SAM: one object adapter and one prompt adapter after the shared stages.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.2 ("decoupled adapter"). The object adapter is one more kernel update on
hard-mask-pooled features with its own class projection (final output for panoptic and video);
the prompt adapter lets each prompt query cross-attend to every pixel of F and has its own IoU
head (final output for interactive segmentation). No kernel update on the prompt side, as in the
released config.
"""

from __future__ import annotations

import torch
from torch import nn

from iclr25.methods.rmp_sam.decoder import ClassHead, KernelUpdate, dynamic_masks, hard_mask_pool, mlp

__all__ = ["ObjectAdapter", "PromptAdapter"]


class ObjectAdapter(nn.Module):
    """Kernel update on pooled features + a new class head and mask head.

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
    ) -> None:
        super().__init__()
        self.threshold = threshold
        self.update = KernelUpdate(c)
        self.cls = ClassHead(c, num_classes, class_kind, embed_dim, logit_scale)
        self.mask_head = nn.Sequential(
            nn.Linear(c, c), nn.LayerNorm(c), nn.ReLU(inplace=True), nn.Linear(c, c)
        )

    def forward(
        self,
        queries: torch.Tensor,
        masks: torch.Tensor,
        features: torch.Tensor,
        class_embed: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        q = self.update(hard_mask_pool(masks, features, self.threshold), queries)
        return {
            "queries": q,
            "logits": self.cls(q, class_embed),  # the adapter output is not divided by the temperature
            "masks": dynamic_masks(self.mask_head(q), features),
            "iou": torch.zeros(q.shape[:2], dtype=q.dtype, device=q.device),
        }


class PromptAdapter(nn.Module):
    """Prompt queries cross-attend to all pixels of F (+ LN), then a mask head and a new IoU head.

    Cross-attention treats every query independently, so prompts stay isolated here too.
    """

    def __init__(self, c: int, heads: int, num_classes: int) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.cross = nn.MultiheadAttention(c, heads, batch_first=True)
        self.norm = nn.LayerNorm(c)
        self.mask_head = nn.Sequential(
            nn.Linear(c, c), nn.LayerNorm(c), nn.ReLU(inplace=True), nn.Linear(c, c)
        )
        self.iou_head = mlp(c, c, 1, 3)

    def forward(self, queries: torch.Tensor, features: torch.Tensor) -> dict[str, torch.Tensor]:
        pix = features.flatten(2).transpose(1, 2)  # (B, HW, C)
        q = self.norm(queries + self.cross(queries, pix, pix, need_weights=False)[0])
        logits = torch.zeros(*q.shape[:2], self.num_classes + 1, dtype=q.dtype, device=q.device)
        return {
            "queries": q,
            "logits": logits,
            "masks": dynamic_masks(self.mask_head(q), features),
            "iou": self.iou_head(q).squeeze(-1),
        }
