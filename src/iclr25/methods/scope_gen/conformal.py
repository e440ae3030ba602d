"""Split-conformal building blocks of SCOPE-Gen: the quantile, the α allocation and the splits.

Implements, from *Conformal Generative Modeling with Improved Sample Efficiency through
Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach;
ICLR 2025; arXiv 2410.01660):

- the calibrated threshold of each stage (Sec. 3, the empirical quantile at level
  ``ceil((n+1)(1-α_s))/n``; a level above 1 gives ``+inf``, never a cap at 1);
- the α allocation over stages, ``Π_s (1-α_s) = 1-α`` (Sec. 3, the Markov-chain factorisation
  of the coverage event);
- disjoint calibration splits, one per calibrated stage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "allocate_alphas",
    "check_alpha",
    "conformal_quantile",
    "disjoint_splits",
    "min_calibration_size",
]


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """Return ``alpha`` as a float, or raise ``ValueError`` unless it lies in the open interval (0, 1)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(alpha).__name__}")
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"{name} must lie in (0, 1), got {alpha}")
    return float(alpha)


def conformal_quantile(scores: np.ndarray | Sequence[float], alpha: float) -> float:
    """The split-conformal threshold of a calibration score sample.

    NaN scores (instances a stage does not use) are dropped first; ``+inf`` scores are kept.
    With ``n`` scores left, the level is ``ceil((n+1)(1-α))/n``; the threshold is
    ``numpy.quantile(scores, level, method="higher")``. If the level exceeds 1 (too few
    scores for the requested coverage) or no score is left, the threshold is ``+inf``, which
    the caller turns into an abstention (generation) or a pass-through (filters).

    Args:
        scores: calibration scores, any shape; NaN means "not used".
        alpha: miscoverage α in (0, 1).

    Returns:
        The threshold λ (a float, possibly ``+inf``).

    Shape:
        scores: (n,) or any shape (flattened).

    References:
        Kladny et al., ICLR 2025, Sec. 3; Vovk et al., *Algorithmic Learning in a Random World*.

    Example:
        >>> conformal_quantile([1.0, 2.0, 3.0, 4.0], 0.5)
        4.0
        >>> conformal_quantile([1.0, 2.0], 0.1)
        inf
    """
    alpha = check_alpha(alpha)
    s = np.asarray(scores, dtype=float).ravel()
    s = s[~np.isnan(s)]
    n = s.size
    if n == 0:
        return math.inf
    # ceil of (n+1)(1-α); the tiny slack keeps an exact integer from rounding up through fp error.
    rank = math.ceil((n + 1) * (1.0 - alpha) - 1e-9)
    if rank > n:
        return math.inf
    return float(np.quantile(s, rank / n, method="higher"))


def min_calibration_size(alpha: float) -> int:
    """The fewest calibration scores that give a finite split-conformal threshold at level α.

    The threshold is finite iff ``ceil((n+1)(1-α)) <= n``, i.e. ``n >= (1-α)/α``; with fewer
    scores :func:`conformal_quantile` returns ``+inf``.

    Args:
        alpha: miscoverage α in (0, 1).

    Returns:
        The smallest ``n >= 1`` with ``ceil((n+1)(1-α)) <= n``.

    Example:
        >>> min_calibration_size(0.1), min_calibration_size(0.2), min_calibration_size(0.01)
        (9, 4, 99)
    """
    alpha = check_alpha(alpha)
    n = max(1, math.floor((1.0 - alpha) / alpha) - 1)
    # step up to the exact boundary with the same rounding rule as conformal_quantile
    while math.ceil((n + 1) * (1.0 - alpha) - 1e-9) > n:
        n += 1
    return n


def allocate_alphas(alpha: float, parts: Sequence[int] = (3, 1, 1), chunks: int = 5) -> tuple[float, ...]:
    """Split a total miscoverage α over stages so that the stage coverages multiply to ``1-α``.

    With ``c = (1-α)^(1/M)`` (``M = chunks``), stage ``s`` gets ``α_s = 1 - c^{parts_s}``; since
    the parts sum to ``M``, ``Π_s (1-α_s) = c^M = 1-α``.

    Args:
        alpha: total miscoverage α in (0, 1).
        parts: positive integer chunk counts per stage; must sum to ``chunks``.
        chunks: M, the number of equal chunks of ``log(1-α)``.

    Returns:
        The per-stage miscoverage levels ``(α_1, ..., α_K)``.

    Raises:
        ValueError: α outside (0, 1), a non-positive part, or parts that do not sum to ``chunks``.

    References:
        Kladny et al., ICLR 2025, Sec. 3 (default split 3:1:1 over 5 chunks, from the official configs).

    Example:
        >>> a = allocate_alphas(0.3)
        >>> round((1 - a[0]) * (1 - a[1]) * (1 - a[2]), 12)
        0.7
    """
    alpha = check_alpha(alpha)
    if int(chunks) != chunks or chunks < 1:
        raise ValueError(f"chunks must be a positive integer, got {chunks}")
    if len(parts) == 0:
        raise ValueError("parts must name at least one stage")
    for p in parts:
        if isinstance(p, bool) or int(p) != p or p < 1:
            raise ValueError(f"parts must be positive integers, got {tuple(parts)}")
    if sum(parts) != chunks:
        raise ValueError(f"parts {tuple(parts)} sum to {sum(parts)}, expected chunks={chunks}")
    log_c = math.log1p(-alpha) / chunks  # log c, c = (1-α)^(1/M)
    return tuple(float(-math.expm1(p * log_c)) for p in parts)


def disjoint_splits(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle ``range(n)`` and cut it into ``k`` disjoint parts of (near-)equal size.

    Args:
        n: number of calibration instances.
        k: number of parts (calibrated stages).
        rng: the seeded generator of the caller.

    Returns:
        ``k`` index arrays, disjoint, covering ``range(n)``.
    """
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    if n < k:
        raise ValueError(f"need at least one calibration instance per split: n={n} < k={k}")
    return [np.sort(p) for p in np.array_split(rng.permutation(n), k)]
