"""Cost of a force evaluation: counted FLOPs (deterministic) and wall time (report-only).

Part of the speed comparison of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009), Sec. 5 ("up to 20x faster" students): the teacher
and student architectures are compared per energy+force call on the same periodic cell.
FLOPs are counted with ``torch.utils.flop_counter.FlopCounterMode`` (matrix products of the
forward and backward pass), so the ratio is a deterministic cost proxy.
"""

from __future__ import annotations

import time

from torch import nn

from .batch import AtomsBatch

__all__ = ["count_flops", "time_calls"]


def count_flops(model: nn.Module, batch: AtomsBatch) -> int:
    """FLOPs of one energy+force evaluation (forward and force backward).

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from iclr25.methods.hessian_distill import TinyPaiNN
        >>> b = AtomsBatch.from_atoms([Icosahedron("Cu", 2)])
        >>> count_flops(TinyPaiNN(hidden=8, layers=1), b) < count_flops(TinyPaiNN(hidden=16, layers=2), b)
        True
    """
    from torch.utils.flop_counter import FlopCounterMode

    model.eval()
    with FlopCounterMode(display=False) as counter:
        model(batch, create_graph=False)
    return int(counter.get_total_flops())


def time_calls(model: nn.Module, batch: AtomsBatch, *, calls: int = 3, warmup: int = 1) -> float:
    """Median wall time (s) of one energy+force call (report-only: wall-clock is noisy)."""
    model.eval()
    for _ in range(warmup):
        model(batch, create_graph=False)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        model(batch, create_graph=False)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]
