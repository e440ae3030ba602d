"""Overlays for RMP-SAM results: panoptic maps, tracked clips and click masks as uint8 RGB arrays.

References: Xu et al., RMP-SAM (ICLR 2025), arXiv:2401.10228.
"""

from __future__ import annotations

import numpy as np

__all__ = ["click_overlay", "panoptic_overlay", "track_frames"]

_PALETTE = np.array(
    [
        [230, 25, 75],
        [60, 180, 75],
        [255, 225, 25],
        [0, 130, 200],
        [245, 130, 48],
        [145, 30, 180],
        [70, 240, 240],
        [240, 50, 230],
        [210, 245, 60],
        [250, 190, 212],
        [0, 128, 128],
        [220, 190, 255],
        [170, 110, 40],
        [128, 0, 0],
        [170, 255, 195],
        [128, 128, 0],
    ],
    dtype=np.float32,
)


def _upscale(img: np.ndarray, k: int) -> np.ndarray:
    return np.repeat(np.repeat(img, k, axis=0), k, axis=1)


def panoptic_overlay(
    image: np.ndarray, segmentation: np.ndarray, alpha: float = 0.55, scale: int = 3
) -> np.ndarray:
    """Each segment id (> 0) in its palette colour over the image; boundaries darkened."""
    out = image.astype(np.float32).copy()
    for sid in np.unique(segmentation):
        if sid <= 0:
            continue
        m = segmentation == sid
        out[m] = (1 - alpha) * out[m] + alpha * _PALETTE[int(sid) % len(_PALETTE)]
    edge = np.zeros(segmentation.shape, bool)
    edge[:-1] |= segmentation[:-1] != segmentation[1:]
    edge[:, :-1] |= segmentation[:, :-1] != segmentation[:, 1:]
    out[edge] *= 0.3
    return _upscale(out.clip(0, 255).astype(np.uint8), scale)


def track_frames(
    frames: np.ndarray, masks: list[np.ndarray], ids: list[int], scale: int = 3
) -> list[np.ndarray]:
    """Frames (T, H, W, 3) with each track's masks (T, H, W) in a colour fixed by its id."""
    out = []
    for t in range(frames.shape[0]):
        seg = np.zeros(frames.shape[1:3], np.int64)
        for m, k in zip(masks, ids, strict=True):
            seg[m[t] & (seg == 0)] = k + 1
        out.append(panoptic_overlay(frames[t], seg, scale=scale))
    return out


def click_overlay(
    image: np.ndarray, pred: np.ndarray, gt: np.ndarray, point: tuple[float, float], scale: int = 3
) -> np.ndarray:
    """Prediction in green, missed ground truth in red, the click as a white-and-black dot."""
    out = image.astype(np.float32).copy()
    out[pred] = 0.45 * out[pred] + 0.55 * np.array([40, 220, 40])
    miss = gt & ~pred
    out[miss] = 0.45 * out[miss] + 0.55 * np.array([230, 30, 30])
    big = _upscale(out.clip(0, 255).astype(np.uint8), scale)
    cx, cy = int(point[0] * scale), int(point[1] * scale)
    big[max(cy - 2, 0) : cy + 3, max(cx - 2, 0) : cx + 3] = 0
    big[max(cy - 1, 0) : cy + 2, max(cx - 1, 0) : cx + 2] = 255
    return big
