"""Seeding and determinism.

Claims seed everything they use from the seed they are given; library code takes an explicit
``torch.Generator`` or ``numpy.random.Generator`` and never touches the global RNG.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

__all__ = ["numpy_rng", "one_thread", "seed_everything"]


def seed_everything(seed: int, *, deterministic: bool = True) -> torch.Generator:  # noqa: F821
    """Seed Python, NumPy and torch, and switch torch to deterministic kernels.

    Args:
        seed: a non-negative integer.
        deterministic: also request deterministic algorithms (warn-only where none exists).

    Returns:
        A CPU ``torch.Generator`` seeded with ``seed``, for code that takes a generator.
    """
    import torch

    if seed < 0:
        raise ValueError(f"seed must be non-negative, got {seed}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def numpy_rng(seed: int, *streams: int) -> np.random.Generator:
    """An independent NumPy generator for ``seed`` and optional stream ids (e.g. graph vs data)."""
    return np.random.default_rng([seed, *streams])


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch and the BLAS/OpenMP pools on one thread inside the block; restore them afterwards.

    Claims train tiny models, which run fastest on one thread, and two claims side by side
    (``iclr25 check --jobs 2``) then do not fight over cores. Only pools already loaded are limited,
    so import a library that brings its own (scikit-learn, say) before entering.

    Example:
        >>> import torch
        >>> before = torch.get_num_threads()
        >>> with one_thread():
        ...     torch.get_num_threads()
        1
        >>> torch.get_num_threads() == before
        True
    """
    import torch
    from threadpoolctl import threadpool_limits

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            yield
    finally:
        torch.set_num_threads(threads)
