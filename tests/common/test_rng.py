"""Seeded draws that follow the tensors' device: on the CPU they are torch's own draws."""

from __future__ import annotations

import pytest
import torch

from iclr25.common import rng


def _g() -> torch.Generator:
    return torch.Generator().manual_seed(3)


@pytest.mark.parametrize(
    ("ours", "torchs"),
    [
        (lambda g: rng.rand(4, 5, generator=g), lambda g: torch.rand(4, 5, generator=g)),
        (lambda g: rng.randn(7, generator=g), lambda g: torch.randn(7, generator=g)),
        (lambda g: rng.randint(0, 9, (6,), generator=g), lambda g: torch.randint(0, 9, (6,), generator=g)),
        (lambda g: rng.randperm(8, generator=g), lambda g: torch.randperm(8, generator=g)),
        (lambda g: rng.bernoulli(torch.full((5,), 0.3), generator=g),
         lambda g: torch.bernoulli(torch.full((5,), 0.3), generator=g)),
        (lambda g: rng.multinomial(torch.ones(3, 4), 2, generator=g),
         lambda g: torch.multinomial(torch.ones(3, 4), 2, generator=g)),
    ],
)  # fmt: skip
def test_cpu_draws_are_torchs_own(ours, torchs) -> None:
    assert torch.equal(ours(_g()), torchs(_g()))


def test_a_cpu_generator_draws_on_the_cpu_and_hands_over_to_the_target_device() -> None:
    out = rng.rand(3, generator=_g(), device="meta")
    assert out.device.type == "meta" and out.shape == (3,)
    assert rng.randint(0, 5, (2,), generator=_g(), device="meta").device.type == "meta"
