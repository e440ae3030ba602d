"""Random draws that work whichever device the generator and the tensors live on.

Shared by the methods whose seeded draws meet models that may live on a GPU (BiGR's masks and
Bernoulli draws, GenSE's decoding, CLIP-DFKD's augmentations, VBLL's initialisation and batch
orders).

A ``torch.Generator`` draws only on its own device. Each helper draws where the generator
lives (the CPU for the usual CPU generator, so CPU runs repeat bit for bit whatever device the
model is on) and moves the result to the device of the tensors it meets. Without a generator
the draw uses the global RNG of the target device.
"""

from __future__ import annotations

import torch

__all__ = ["bernoulli", "multinomial", "rand", "randint", "randn", "randperm"]

Device = torch.device | str


def _source(generator: torch.Generator | None, device: Device) -> torch.device:
    return generator.device if generator is not None else torch.device(device)


def rand(
    *shape: int,
    generator: torch.Generator | None = None,
    device: Device = "cpu",
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``torch.rand(shape)`` drawn on the generator's device, returned on ``device``."""
    return torch.rand(*shape, generator=generator, device=_source(generator, device), dtype=dtype).to(device)


def randn(
    *shape: int,
    generator: torch.Generator | None = None,
    device: Device = "cpu",
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``torch.randn(shape)`` drawn on the generator's device, returned on ``device``."""
    return torch.randn(*shape, generator=generator, device=_source(generator, device), dtype=dtype).to(device)


def randint(
    low: int,
    high: int,
    shape: tuple[int, ...],
    *,
    generator: torch.Generator | None = None,
    device: Device = "cpu",
) -> torch.Tensor:
    """``torch.randint(low, high, shape)`` drawn on the generator's device, returned on ``device``."""
    return torch.randint(low, high, shape, generator=generator, device=_source(generator, device)).to(device)


def randperm(n: int, *, generator: torch.Generator | None = None, device: Device = "cpu") -> torch.Tensor:
    """``torch.randperm(n)`` drawn on the generator's device, returned on ``device``."""
    return torch.randperm(n, generator=generator, device=_source(generator, device)).to(device)


def bernoulli(p: torch.Tensor, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """``torch.bernoulli(p)`` drawn on the generator's device, returned on ``p``'s."""
    src = _source(generator, p.device)
    return torch.bernoulli(p.to(src), generator=generator).to(p.device)


def multinomial(
    probs: torch.Tensor,
    num_samples: int,
    *,
    replacement: bool = False,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``torch.multinomial(probs, num_samples)`` drawn on the generator's device, returned on ``probs``'."""
    src = _source(generator, probs.device)
    out = torch.multinomial(probs.to(src), num_samples, replacement=replacement, generator=generator)
    return out.to(probs.device)
