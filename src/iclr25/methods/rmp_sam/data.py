"""Shapes-world data for RMP-SAM: panoptic scenes, video clips with stable ids, and click prompts.

Targets follow the paper's three sources (Sec. 3.3): COCO-Panoptic (things + stuff segments),
YouTube-VIS (thing tubes) and COCO-SAM (a point drawn uniformly inside an instance, target that
instance's mask).

References: Xu et al., RMP-SAM (ICLR 2025), arXiv:2401.10228.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["SegData", "from_shapes_world", "panoptic_targets"]


@dataclass
class SegData:
    """Images, panoptic targets and videos of one split.

    Attributes:
        images: (S, 3, H, W) float in [0, 1].
        targets: per scene ``{"labels" (M,), "masks" (M, H, W) bool, "isthing" (M,) bool}``.
        rendered: the shapes-world records (for clicks and torchmetrics export).
        videos: (V, T, 3, H, W) float.
        video_targets: per video ``{"labels" (M,), "masks" (M, T, H, W) bool}`` (thing tracks).
        num_things: thing classes.
    """

    images: torch.Tensor
    targets: list[dict[str, torch.Tensor]]
    rendered: list
    videos: torch.Tensor
    video_targets: list[dict[str, torch.Tensor]]
    num_things: int


def panoptic_targets(semantic: np.ndarray, instance: np.ndarray, num_things: int) -> dict[str, torch.Tensor]:
    """Thing instances and merged stuff regions of one image as (labels, masks, isthing).

    Example:
        >>> sem = np.array([[0, 4], [5, 5]]); ins = np.array([[1, 0], [0, 0]])
        >>> t = panoptic_targets(sem, ins, 4)
        >>> t["labels"].tolist(), t["masks"].sum((1, 2)).tolist()
        ([0, 4, 5], [1, 1, 2])
    """
    labels, masks, things = [], [], []
    for oid in np.unique(instance[instance > 0]):
        m = instance == oid
        labels.append(int(semantic[m][0]))
        masks.append(m)
        things.append(True)
    stuff = (instance == 0) & (semantic >= num_things)
    for c in np.unique(semantic[stuff]):
        labels.append(int(c))
        masks.append(stuff & (semantic == c))
        things.append(False)
    h, w = semantic.shape
    return {
        "labels": torch.tensor(labels, dtype=torch.long),
        "masks": torch.from_numpy(np.stack(masks)) if masks else torch.zeros(0, h, w, dtype=torch.bool),
        "isthing": torch.tensor(things, dtype=torch.bool),
    }


def from_shapes_world(world, n_scenes: int, n_videos: int, *, split: str, num_frames: int = 4) -> SegData:
    """Render ``n_scenes`` panoptic scenes and ``n_videos`` videos of a ``ShapesWorld`` split."""
    nt = len(world.config.shapes)
    rendered = [world.panoptic(i, split=split) for i in range(n_scenes)]
    images = torch.from_numpy(np.stack([r.image for r in rendered])).permute(0, 3, 1, 2).float() / 255.0
    targets = [panoptic_targets(r.semantic, r.instance, nt) for r in rendered]
    vids, vt = [], []
    for i in range(n_videos):
        v = world.video(i, split=split, num_frames=num_frames)
        vids.append(v.frames)
        labels, masks = [], []
        for tr in v.tracks:
            m = v.instance == tr.object.id  # (T, H, W)
            if m.any():
                labels.append(world.config.shapes.index(tr.object.shape))
                masks.append(m)
        size = world.config.image_size
        vt.append(
            {
                "labels": torch.tensor(labels, dtype=torch.long),
                "masks": torch.from_numpy(np.stack(masks))
                if masks
                else torch.zeros(0, num_frames, size, size, dtype=torch.bool),
            }
        )
    if vids:
        videos = torch.from_numpy(np.stack(vids)).permute(0, 1, 4, 2, 3).float() / 255.0
    else:
        videos = torch.zeros(0, num_frames, 3, world.config.image_size, world.config.image_size)
    return SegData(images, targets, rendered, videos, vt, nt)
