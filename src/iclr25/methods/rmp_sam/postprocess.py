"""Post-processing of RMP-SAM outputs into panoptic segments (Mask2Former rule).

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228 (panoptic inference as in Mask2Former, Cheng et al., CVPR 2022). Queries whose
best class is an object with score above ``object_mask_threshold`` compete per pixel by
``score * sigmoid(mask)``; a segment survives when at least ``overlap_threshold`` of its own mask
wins; stuff segments of one class are merged. The output has the shape of ``transformers``'
``post_process_panoptic_segmentation``: segment id 0 is "no segment".
"""

from __future__ import annotations

import torch

__all__ = ["panoptic_inference", "to_torchmetrics"]


def panoptic_inference(
    logits: torch.Tensor,
    mask_logits: torch.Tensor,
    num_things: int,
    *,
    object_mask_threshold: float = 0.8,
    overlap_threshold: float = 0.8,
) -> dict[str, object]:
    """Panoptic segmentation of one image.

    Args:
        logits: (N, K + 1) class logits (last column no-object).
        mask_logits: (N, H, W) mask logits at the output size.
        num_things: classes ``< num_things`` are things, the rest stuff.
        object_mask_threshold: minimum class score of a kept query.
        overlap_threshold: minimum fraction of a query's mask that must win.

    Returns:
        ``{"segmentation": (H, W) int32 segment ids (0: none), "segments_info": [{"id", "label_id",
        "category_id", "isthing", "was_fused", "score", "area"}]}``; ``category_id`` is 1-based (COCO).
    """
    probs = logits.softmax(-1)
    scores, labels = probs.max(-1)
    num_classes = logits.shape[-1] - 1
    keep = (labels != num_classes) & (scores > object_mask_threshold)
    h, w = mask_logits.shape[-2:]
    seg = torch.zeros((h, w), dtype=torch.int32, device=logits.device)
    info: list[dict[str, object]] = []
    if not keep.any():
        return {"segmentation": seg, "segments_info": info}
    s, lab, m = scores[keep], labels[keep], mask_logits[keep].sigmoid()
    winner = (s[:, None, None] * m).argmax(0)  # (H, W)
    stuff_ids: dict[int, int] = {}
    next_id = 0
    for k in range(s.shape[0]):
        c = int(lab[k])
        own = m[k] >= 0.5
        region = (winner == k) & own
        area, orig = int(region.sum()), int(own.sum())
        if area == 0 or orig == 0 or area / orig < overlap_threshold:
            continue
        isthing = c < num_things
        if not isthing and c in stuff_ids:
            sid = stuff_ids[c]
            seg[region] = sid
            rec = next(r for r in info if r["id"] == sid)
            rec["was_fused"] = True
            rec["area"] = int(rec["area"]) + area  # type: ignore[call-overload]
            continue
        next_id += 1
        seg[region] = next_id
        if not isthing:
            stuff_ids[c] = next_id
        info.append(
            {
                "id": next_id,
                "label_id": c,
                "category_id": c + 1,
                "isthing": int(isthing),
                "was_fused": False,
                "score": float(s[k]),
                "area": area,
            }
        )
    return {"segmentation": seg, "segments_info": info}


def to_torchmetrics(result: dict[str, object], void_category: int) -> torch.Tensor:
    """(H, W, 2) of (category, instance) for ``torchmetrics``' PanopticQuality; unassigned pixels get
    ``void_category``; stuff instances are 0."""
    seg = result["segmentation"]
    assert isinstance(seg, torch.Tensor)
    cat = torch.full(seg.shape, void_category, dtype=torch.long)
    inst = torch.zeros(seg.shape, dtype=torch.long)
    for r in result["segments_info"]:  # type: ignore[attr-defined]
        sel = seg.cpu() == r["id"]
        cat[sel] = int(r["label_id"])
        inst[sel] = int(r["id"]) if r["isthing"] else 0
    return torch.stack([cat, inst], dim=-1)
