"""Backdoor triggers in [0, 1] pixel space: BadNets, Blend and SIG.

The triggers of Sec. 4.1 of *Wicked Oddities* (Nguyen et al., ICLR 2025, arXiv:2407.10825):
a checkerboard patch near the bottom-right corner (BadNets), ``x' = (1 - a) x + a P`` (Blend) and
a horizontal sinusoid ``x' = clip(x + d sin(2 pi j f / m))`` (SIG). Every output is clamped to
[0, 1]; the BadNets checkerboard is {0, 1} rather than the official +-1 (trap 9).

References:
    Gu et al., BadNets, 2017; Chen et al., Blend, 2017; Barni et al., SIG, ICIP 2019.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

__all__ = ["BadNetsTrigger", "BlendTrigger", "SIGTrigger", "Trigger", "load_trigger"]


def _as_batch(x: object) -> tuple[torch.Tensor, bool]:
    """Check ``x`` is a float image (C, H, W) or batch (N, C, H, W) in [0, 1]; return it as a batch.

    Returns:
        The images as (N, C, H, W) and whether the input was a single image.

    Raises:
        TypeError: not a tensor (e.g. a PIL image), or not floating point (e.g. uint8).
        ValueError: wrong rank, channels-last layout, or values outside [0, 1].
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"triggers take float tensors in [0, 1], got {type(x).__name__}; convert PIL images first, "
            "e.g. with v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])"
        )
    if not x.is_floating_point():
        raise TypeError(
            f"images must be floating point in [0, 1], got {x.dtype}; for uint8 use "
            "v2.ToDtype(torch.float32, scale=True) first"
        )
    if x.ndim not in (3, 4):
        raise ValueError(f"images must have shape (C, H, W) or (N, C, H, W), got {tuple(x.shape)}")
    c, w = x.shape[-3], x.shape[-1]
    if w in (1, 3, 4) and c > 4:
        # (H, W, C) read as (C, H, W): a channels-last image, as numpy and PIL give them
        raise ValueError(f"images look channels-last (H, W, C) = {tuple(x.shape[-3:])}; use (C, H, W)")
    if x.numel() and (float(x.min()) < 0.0 or float(x.max()) > 1.0):
        raise ValueError(
            "image values must lie in [0, 1] (apply the trigger to raw pixels, before normalisation)"
        )
    single = x.ndim == 3
    return (x[None] if single else x), single


class Trigger:
    """Base class: a transform on one image (C, H, W) or a batch (N, C, H, W) of floats in [0, 1].

    ``apply(x)`` (or calling the trigger) returns triggered copies, clamped to [0, 1], with shape
    and dtype kept, so a trigger can sit inside ``torchvision.transforms.v2.Compose`` after
    ``ToImage`` and ``ToDtype(torch.float32, scale=True)`` and before any normalisation.
    Subclasses implement ``_apply`` on a batch; ``pattern`` is saveable.
    """

    kind: str = ""

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        """Return triggered copies of ``x`` ((C, H, W) or (N, C, H, W) in [0, 1]), dtype and shape kept."""
        batch, single = _as_batch(x)
        out = self._apply(batch)
        return out[0] if single else out

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.apply(x)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.state().items() if not isinstance(v, torch.Tensor))
        return f"{type(self).__name__}({args})"

    def state(self) -> dict[str, object]:
        """The trigger's parameters (tensors and numbers)."""
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Save kind and parameters with ``torch.save`` (loaded by :func:`load_trigger`)."""
        torch.save({"kind": self.kind, **self.state()}, Path(path))


class BadNetsTrigger(Trigger):
    """A ``size x size`` {0, 1} checkerboard, ``offset`` pixels in from the bottom-right corner.

    Args:
        size: patch side in pixels.
        offset: gap between the patch and the bottom and right borders.

    Example:
        >>> BadNetsTrigger(2, 0).apply(torch.full((1, 1, 4, 4), 0.5))[0, 0, 2:, 2:].tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """

    kind = "badnets"

    def __init__(self, size: int = 3, offset: int = 1) -> None:
        if size < 1 or offset < 0:
            raise ValueError(f"need size >= 1 and offset >= 0, got size={size}, offset={offset}")
        self.size, self.offset = size, offset
        ij = torch.arange(size)
        self.pattern = ((ij[:, None] + ij[None, :]) % 2 == 0).float()  # (size, size), 1 at top-left

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        r0, c0 = h - self.offset - self.size, w - self.offset - self.size
        if r0 < 0 or c0 < 0:
            raise ValueError(f"patch of {self.size} at offset {self.offset} does not fit {h}x{w}")
        out = x.clone()
        out[..., r0 : r0 + self.size, c0 : c0 + self.size] = self.pattern.to(x)
        return out

    def state(self) -> dict[str, object]:
        return {"size": self.size, "offset": self.offset}


class BlendTrigger(Trigger):
    """``x' = (1 - alpha) x + alpha P``, with P an image-sized pattern in [0, 1].

    Args:
        pattern: (C, H, W) or (1, H, W) in [0, 1] (e.g. :meth:`noise`).
        alpha: blend weight in (0, 1].

    Example:
        >>> t = BlendTrigger(torch.ones(1, 2, 2), 0.25)
        >>> t.apply(torch.zeros(1, 1, 2, 2)).unique().tolist()
        [0.25]
    """

    kind = "blend"

    def __init__(self, pattern: torch.Tensor, alpha: float = 0.2) -> None:
        if pattern.ndim != 3:
            raise ValueError(f"pattern must have shape (C, H, W), got {tuple(pattern.shape)}")
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must lie in (0, 1], got {alpha}")
        if pattern.min() < 0 or pattern.max() > 1:
            raise ValueError("pattern values must lie in [0, 1]")
        self.pattern, self.alpha = pattern.float(), float(alpha)

    @classmethod
    def noise(cls, shape: tuple[int, int, int], alpha: float = 0.2, *, seed: int = 0) -> BlendTrigger:
        """A seeded uniform-noise pattern of ``shape`` (C, H, W)."""
        gen = torch.Generator().manual_seed(seed)
        return cls(torch.rand(shape, generator=gen), alpha)

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        p = self.pattern.to(x)  # dtype and device of the images
        return ((1 - self.alpha) * x + self.alpha * p).clamp(0.0, 1.0)

    def state(self) -> dict[str, object]:
        return {"pattern": self.pattern, "alpha": self.alpha}


class SIGTrigger(Trigger):
    """``x' = clip(x + delta sin(2 pi j f / m))`` over columns j, m the width.

    Args:
        delta: amplitude.
        freq: cycles across the width; must be <= width / 4 (trap 10: f = 6 aliases on 16 px).

    Example:
        >>> SIGTrigger(0.1, 1).apply(torch.full((1, 1, 1, 4), 0.5))[0, 0, 0].tolist()
        [0.5, 0.6000000238418579, 0.5, 0.4000000059604645]
    """

    kind = "sig"

    def __init__(self, delta: float = 20 / 255, freq: float = 6.0) -> None:
        if delta <= 0 or freq <= 0:
            raise ValueError(f"need delta > 0 and freq > 0, got delta={delta}, freq={freq}")
        self.delta, self.freq = float(delta), float(freq)

    def signal(self, width: int) -> torch.Tensor:
        """The sinusoid over ``width`` columns, shape (width,)."""
        if self.freq > width / 4:
            raise ValueError(f"SIG frequency {self.freq} aliases on {width} columns (keep f <= {width / 4})")
        j = torch.arange(width, dtype=torch.float64)
        return (self.delta * torch.sin(2 * math.pi * j * self.freq / width)).float()

    def _apply(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.signal(x.shape[-1]).to(x)).clamp(0.0, 1.0)

    def state(self) -> dict[str, object]:
        return {"delta": self.delta, "freq": self.freq}


def load_trigger(path: str | Path) -> Trigger:
    """Load a trigger written by :meth:`Trigger.save`.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "t.pt")
        >>> SIGTrigger(0.1, 2).save(p); load_trigger(p).freq
        2.0
    """
    state = torch.load(Path(path), weights_only=True)
    kind = state.pop("kind")
    if kind == "badnets":
        return BadNetsTrigger(**state)
    if kind == "blend":
        return BlendTrigger(**state)
    if kind == "sig":
        return SIGTrigger(**state)
    raise ValueError(f"unknown trigger kind {kind!r}")
