"""Click and box prompts from masks, and the next-click rule of interactive segmentation (NoC).

Points are (x, y) pixel centres: the pixel at (row r, col c) gives (c + 0.5, r + 0.5). Boxes are
XYXY with x2 = max_col + 1, as ``torchvision.ops.masks_to_boxes`` plus one.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy import ndimage

__all__ = ["center_click", "clicks", "mask_to_box", "next_click"]


def _check_mask(mask: np.ndarray, name: str = "mask") -> np.ndarray:
    mask = np.asarray(mask)
    if mask.ndim != 2:
        raise ValueError(f"{name} must be 2-D (H, W), got shape {mask.shape}")
    return mask.astype(bool)


def center_click(mask: np.ndarray) -> tuple[float, float]:
    """The point farthest from the mask's boundary (the image border counts as boundary).

    The arg-max of the Euclidean distance transform of the zero-padded mask; ties go to the
    lowest raster position (first row, then first column).

    Example:
        >>> m = np.zeros((5, 5), bool); m[1:4, 1:4] = True
        >>> center_click(m)
        (2.5, 2.5)
    """
    mask = _check_mask(mask)
    if not mask.any():
        raise ValueError("center_click needs a non-empty mask")
    dist = ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
    r, c = np.unravel_index(int(np.argmax(dist)), dist.shape)  # argmax takes the first maximum
    return float(c) + 0.5, float(r) + 0.5


def clicks(
    mask: np.ndarray,
    n: int,
    *,
    mode: Literal["uniform", "center"] = "uniform",
    generator: np.random.Generator | None = None,
) -> np.ndarray:
    """``n`` positive clicks inside ``mask`` as an (n, 2) float array of (x, y).

    Args:
        mask: (H, W) bool mask of the object.
        n: number of clicks.
        mode: "uniform" (random mask pixels, needs ``generator``) or "center" (the
            :func:`center_click`, repeated).
        generator: numpy generator for uniform clicks.
    """
    mask = _check_mask(mask)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not mask.any():
        raise ValueError("clicks need a non-empty mask")
    if mode == "center":
        return np.tile(np.asarray(center_click(mask)), (n, 1))
    if mode != "uniform":
        raise ValueError(f"unknown click mode {mode!r}; known: uniform, center")
    if generator is None:
        raise ValueError("uniform clicks need a numpy generator (generator=np.random.default_rng(seed))")
    rows, cols = np.nonzero(mask)
    pick = generator.integers(0, rows.size, size=n)
    return np.stack([cols[pick] + 0.5, rows[pick] + 0.5], axis=1).astype(np.float64)


def next_click(pred: np.ndarray, gt: np.ndarray) -> tuple[tuple[float, float], bool]:
    """The next corrective click of the usual NoC protocol.

    Take the larger error region (false negatives, or false positives; ties go to false
    negatives) and click its point farthest from the region's boundary. A false-negative click
    is positive (``True``), a false-positive click negative (``False``).

    Raises:
        ValueError: the prediction already equals the ground truth.
    """
    pred, gt = _check_mask(pred, "pred"), _check_mask(gt, "gt")
    if pred.shape != gt.shape:
        raise ValueError(f"pred and gt shapes differ: {pred.shape} vs {gt.shape}")
    fn, fp = gt & ~pred, pred & ~gt
    if not fn.any() and not fp.any():
        raise ValueError("the prediction equals the ground truth: no click to give")
    positive = int(fn.sum()) >= int(fp.sum())
    return center_click(fn if positive else fp), positive


def mask_to_box(mask: np.ndarray) -> np.ndarray:
    """XYXY float32 box of a non-empty mask, x2 = max_col + 1 and y2 = max_row + 1."""
    mask = _check_mask(mask)
    rows, cols = np.nonzero(mask)
    if rows.size == 0:
        raise ValueError("mask_to_box needs a non-empty mask")
    return np.array([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1], dtype=np.float32)
