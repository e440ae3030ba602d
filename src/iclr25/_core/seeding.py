"""Seeding and determinism.

Claims seed everything they use from the seed they are given; library code takes an explicit
``torch.Generator`` or ``numpy.random.Generator`` and never touches the global RNG.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

__all__ = ["claim_scope", "numpy_rng", "one_thread", "seed_everything"]


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


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@contextmanager
def claim_scope(seed: int, *, threads: int = 1) -> Iterator[None]:
    """Run a claim with every process-wide setting that can change its numbers fixed, then restore.

    Inside the block: torch, the BLAS/OpenMP pools and numba (when loaded) use ``threads``
    threads; Python's, NumPy's and torch's global RNGs are seeded with ``seed``; torch uses
    deterministic kernels and full-precision float32 matmuls. Afterwards each setting is put back
    as it was. A claim's numbers then do not depend on what ran before it in the process, nor on
    how many workers ``iclr25 check --jobs`` started (each would otherwise get its own share of
    the cores, and a different thread count changes the order of floating-point sums).

    Args:
        seed: the claim's seed.
        threads: threads for torch, BLAS and numba inside the block.

    Example:
        >>> import random
        >>> with claim_scope(3):
        ...     a = random.random()
        >>> with claim_scope(3):
        ...     b = random.random()
        >>> a == b
        True
    """
    import torch
    from threadpoolctl import threadpool_limits

    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    saved_threads = torch.get_num_threads()
    saved_det = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    saved_precision = torch.get_float32_matmul_precision()
    saved_py, saved_np, saved_torch = random.getstate(), np.random.get_state(), torch.get_rng_state()
    numba = sys.modules.get("numba")
    saved_numba = numba.get_num_threads() if numba is not None else None
    # Pools a library loads inside the block (an OpenMP or BLAS runtime imported lazily) read
    # these when they start; pools already loaded are limited by threadpoolctl below.
    saved_env = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: str(threads) for k in _THREAD_VARS})
    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision("highest")
    if numba is not None:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    seed_everything(seed)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(saved_threads)
        torch.use_deterministic_algorithms(saved_det[0], warn_only=saved_det[1])
        torch.set_float32_matmul_precision(saved_precision)
        random.setstate(saved_py)
        np.random.set_state(saved_np)
        torch.set_rng_state(saved_torch)
        if numba is not None and saved_numba is not None:
            numba.set_num_threads(saved_numba)
        for key, val in saved_env.items():
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val
