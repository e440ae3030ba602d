"""Generic, task-free images: smoothed random fields through random palettes, soft blobs, stripes.

Used to pre-train decoders and image priors without any of the world's classes; the shape
rasteriser is never called here.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from .scene import item_rng

__all__ = ["texture_images"]


def _one(rng: np.random.Generator, size: int) -> np.ndarray:
    palette = rng.uniform(0, 255, size=(3, 3))  # three random colours
    field = ndimage.gaussian_filter(rng.normal(size=(size, size)), sigma=rng.uniform(1.0, size / 6.0))
    field = (field - field.min()) / (np.ptp(field) + 1e-9)  # (H, W) in [0, 1]
    t = field[..., None]
    img = palette[0] * (1 - t) + palette[1] * t  # (H, W, 3)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    for _ in range(int(rng.integers(0, 4))):  # soft blobs
        cx, cy, s = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(size / 12, size / 4)
        w = np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * s * s))[..., None]
        img = img * (1 - w) + palette[2] * w
    if rng.random() < 0.5:  # faint stripes
        angle, period = rng.uniform(0, np.pi), rng.uniform(3, size / 2)
        stripes = np.sin(2 * np.pi * (xx * np.cos(angle) + yy * np.sin(angle)) / period)
        img = img + 20.0 * stripes[..., None]
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def texture_images(n: int, *, seed: int, size: int = 64, split: str = "train") -> np.ndarray:
    """``n`` texture images, uint8 (n, size, size, 3); image i depends only on (seed, split, i).

    Example:
        >>> texture_images(2, seed=0, size=8).shape
        (2, 8, 8, 3)
    """
    if n < 0 or size < 4:
        raise ValueError(f"need n >= 0 and size >= 4, got n={n}, size={size}")
    out = np.empty((n, size, size, 3), dtype=np.uint8)
    for i in range(n):
        out[i] = _one(item_rng(seed, split, "texture", i), size)
    return out
