"""Image parameterisations x = G(z) optimised by inversion (Sec. 4.1).

The paper decodes VQGAN latents; :class:`PixelParam` is the light alternative (a coarse pixel grid,
upsampled and squashed to [0, 1]), which the CPU check uses. Any object with ``forward() -> images
in [0, 1]`` and trainable ``parameters()`` fits the :class:`ImageParameterization` protocol.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ImageParameterization", "PixelParam"]


@runtime_checkable
class ImageParameterization(Protocol):
    """What inversion optimises: ``forward()`` gives (N, 3, H, W) images in [0, 1]."""

    def __call__(self) -> torch.Tensor: ...

    def parameters(self) -> object: ...


class PixelParam(nn.Module):
    """x = sigmoid(upsample(z)) with z a (N, 3, base, base) grid of logits.

    A coarse grid upsampled bilinearly is a smoothness prior that keeps inversion away from
    high-frequency adversarial patterns.

    Args:
        n: images.
        size: output pixels (height = width).
        base: grid size of the logits (at most ``size``).
        init_std: std of the initial logits (0 gives flat grey images).
        generator: the RNG of the initial logits.

    Shape:
        forward() -> (n, 3, size, size) in [0, 1].

    Example:
        >>> p = PixelParam(2, size=16, base=8, generator=torch.Generator().manual_seed(0))
        >>> x = p(); x.shape, bool(x.min() >= 0) and bool(x.max() <= 1)
        (torch.Size([2, 3, 16, 16]), True)
    """

    def __init__(
        self,
        n: int,
        *,
        size: int,
        base: int = 16,
        init_std: float = 0.5,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if n < 1 or size < 1 or not 1 <= base <= size:
            raise ValueError(f"need n >= 1 and 1 <= base <= size, got n={n}, base={base}, size={size}")
        self.size = size
        self.z = nn.Parameter(init_std * torch.randn(n, 3, base, base, generator=generator))

    def forward(self) -> torch.Tensor:
        z = F.interpolate(self.z, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return torch.sigmoid(z)  # (n, 3, size, size)
