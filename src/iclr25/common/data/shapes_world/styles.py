"""Render styles: how an object's coverage turns into colour and opacity.

Each style returns an RGB layer and an opacity (alpha) over the object's pixel block. The
object's mask is ``alpha >= 0.5``, so hollow (outline) and blurred objects get the masks they
show. Patterned styles (striped, dotted, noisy, checkered) keep the full shape opaque and vary
the colour between the object's colour and a darkened copy, so the colour word stays true.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

__all__ = ["DARKEN", "style_layer"]

#: Factor of the darker colour in patterned styles.
DARKEN = 0.35


def style_layer(
    style: str,
    cov: np.ndarray,
    rgb: tuple[int, int, int],
    radius: float,
    row0: int,
    col0: int,
    style_seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Colour and opacity of one object over its pixel block.

    Args:
        style: style name.
        cov: (h, w) coverage of the block.
        rgb: the object's (jittered) colour.
        radius: the object's radius in pixels (sets pattern scales).
        row0, col0: position of the block in the image (patterns are anchored to the image).
        style_seed: seed of the style's own randomness (stripe angle, noise).

    Returns:
        ``(layer, alpha)``: float64 (h, w, 3) colour in [0, 255] and (h, w) opacity in [0, 1].
    """
    h, w = cov.shape
    base = np.asarray(rgb, dtype=np.float64)
    layer = np.broadcast_to(base, (h, w, 3)).copy()  # (h, w, 3)
    alpha = cov.copy()
    rows = np.arange(row0, row0 + h)[:, None] + 0.5
    cols = np.arange(col0, col0 + w)[None, :] + 0.5
    rng = np.random.default_rng(style_seed)
    if style == "filled":
        pass
    elif style == "outline":
        width = max(1, int(np.rint(radius / 4.0)))
        solid = np.pad(cov >= 0.5, width)  # padded so the block edge does not erode the shape
        interior = ndimage.binary_erosion(solid, iterations=width)[width:-width, width:-width]
        alpha = np.where(interior, 0.0, cov)
    elif style in ("striped", "dotted", "checkered"):
        if style == "striped":
            angle = rng.uniform(0.0, np.pi)
            period = max(2.0, rng.uniform(0.5, 1.0) * radius)
            light = np.sin(2 * np.pi * (cols * np.cos(angle) + rows * np.sin(angle)) / period) >= 0
        elif style == "dotted":
            step = max(3.0, radius / 2.0)
            dr = (rows % step) - step / 2
            dc = (cols % step) - step / 2
            light = dr * dr + dc * dc <= (step / 3.0) ** 2
        else:
            cell = max(2.0, radius / 2.0)
            light = ((rows // cell) + (cols // cell)) % 2 == 0
        light = np.broadcast_to(light, (h, w))
        layer = np.where(light[..., None], layer, layer * DARKEN)
    elif style == "noisy":
        layer = np.clip(layer + rng.normal(0.0, 30.0, size=(h, w, 3)), 0.0, 255.0)
    elif style == "blurred":
        alpha = np.clip(ndimage.gaussian_filter(cov, sigma=max(0.8, radius / 5.0), mode="constant"), 0.0, 1.0)
    else:
        raise ValueError(f"unknown style {style!r}")
    return layer, alpha
