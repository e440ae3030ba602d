"""Differentiable augmentations applied before the teacher encodes a synthetic image.

Without them inversion finds adversarial patterns the teacher scores highly but no student can
use (the VQGAN-CLIP practice of random cutouts). Random resized crops (through ``affine_grid``),
horizontal flips and brightness/contrast jitter, every draw from a ``torch.Generator`` so a seed
fixes them (kornia and torchvision draw from the global RNG).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from iclr25.common import rng

__all__ = ["random_augment"]


def random_augment(
    x: torch.Tensor,
    *,
    generator: torch.Generator | None = None,
    scale: tuple[float, float] = (0.7, 1.0),
    shift: float = 0.15,
    flip: bool = True,
    jitter: float = 0.1,
) -> torch.Tensor:
    """A random crop-and-resize, flip and brightness/contrast jitter per image; differentiable in x.

    Args:
        x: images in [0, 1].
        generator: RNG of every draw.
        scale: range of the crop's side as a fraction of the image side.
        shift: largest crop-centre shift as a fraction of the half-width.
        flip: flip horizontally with probability 1/2.
        jitter: largest brightness shift and relative contrast change.

    Shape:
        (N, 3, H, W) -> (N, 3, H, W), values clamped to [0, 1].

    Example:
        >>> x = torch.rand(4, 3, 8, 8)
        >>> random_augment(x, generator=torch.Generator().manual_seed(0)).shape
        torch.Size([4, 3, 8, 8])
    """
    n = x.shape[0]
    s = scale[0] + (scale[1] - scale[0]) * rng.rand(n, generator=generator)
    t = (2 * rng.rand(n, 2, generator=generator) - 1) * shift
    sign = torch.where(rng.rand(n, generator=generator) < 0.5, -1.0, 1.0) if flip else torch.ones(n)
    theta = torch.zeros(n, 2, 3)
    theta[:, 0, 0], theta[:, 1, 1] = s * sign, s  # the output samples a crop of side s (flipped)
    theta[:, :, 2] = t
    grid = F.affine_grid(theta.to(x), list(x.shape), align_corners=False)  # (N, H, W, 2)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    b = (2 * rng.rand(n, 1, 1, 1, generator=generator) - 1) * jitter
    c = 1 + (2 * rng.rand(n, 1, 1, 1, generator=generator) - 1) * jitter
    mean = out.mean(dim=(1, 2, 3), keepdim=True)
    return ((out - mean) * c.to(x) + mean + b.to(x)).clamp(0, 1)
