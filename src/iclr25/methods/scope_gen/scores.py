"""Nonconformity scores of SCOPE-Gen on ordered prefixes.

Implements, from *Conformal Generative Modeling with Improved Sample Efficiency through
Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach;
ICLR 2025; arXiv 2410.01660), Sec. 3-4: each stage scores the prefix ``y_1..y_j`` of its own
order with a function that is strictly increasing in ``j``, so "keep the longest prefix whose
score is at most λ" is a nested family of sets:

- generation, ``count``: ``j``; ``sum``: ``Σ_{i≤j} q_i + 0.5 j`` (``q ≥ 0``);
  ``max``: ``max_{i≤j} q_i + 0.1 j``;
- quality filter: ``-min_{i≤j} q_i + 0.5 j``;
- diversity filter: largest off-diagonal similarity inside the prefix ``+ 0.1 j``; ``-1`` for a
  singleton.

The constants 0.5 and 0.1 follow the official configuration files.

All functions are batched: row ``b`` holds one instance's values in its stage's order; positions
past an instance's set size hold arbitrary values that the caller masks out.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

__all__ = ["GenerationScore", "diversity_scores", "generation_scores", "quality_scores"]

GenerationScore = Literal["count", "sum", "max"]

#: γ constants of the prefix-length terms (official configuration files).
SUM_GAMMA = 0.5
MAX_GAMMA = 0.1
QUALITY_GAMMA = 0.5
DIVERSITY_GAMMA = 0.1


def _lengths(m: int) -> np.ndarray:
    return np.arange(1, m + 1, dtype=float)


def generation_scores(qualities: np.ndarray, kind: GenerationScore = "count") -> np.ndarray:
    """Generation-stage scores of every prefix in sampling order.

    Args:
        qualities: per-sample qualities in sampling order.
        kind: "count" (``j``), "sum" (``Σ q + 0.5 j``) or "max" (``max q + 0.1 j``).

    Returns:
        The score of each prefix length ``j = 1..m``.

    Shape:
        qualities: (B, m) -> (B, m).

    Example:
        >>> generation_scores(np.array([[0.2, 0.5]]), "sum").round(3).tolist()
        [[0.7, 1.7]]
    """
    q = np.asarray(qualities, dtype=float)
    if q.ndim != 2:
        raise ValueError(f"qualities must be (B, m), got shape {q.shape}")
    j = _lengths(q.shape[1])
    if kind == "count":
        return np.broadcast_to(j, q.shape).copy()
    if kind == "sum":
        return np.cumsum(q, axis=1) + SUM_GAMMA * j
    if kind == "max":
        return np.maximum.accumulate(q, axis=1) + MAX_GAMMA * j
    raise ValueError(f"generation score must be 'count', 'sum' or 'max', got {kind!r}")


def quality_scores(qualities: np.ndarray) -> np.ndarray:
    """Quality-filter scores ``-min_{i≤j} q_i + 0.5 j`` of every prefix of the quality order.

    Shape:
        qualities: (B, m) in the filter's order -> (B, m).

    Example:
        >>> quality_scores(np.array([[0.9, 0.4]])).round(3).tolist()
        [[-0.4, 0.6]]
    """
    q = np.asarray(qualities, dtype=float)
    if q.ndim != 2:
        raise ValueError(f"qualities must be (B, m), got shape {q.shape}")
    return -np.minimum.accumulate(q, axis=1) + QUALITY_GAMMA * _lengths(q.shape[1])


def diversity_scores(similarities: np.ndarray) -> np.ndarray:
    """Diversity-filter scores of every prefix of the diversity order.

    The prefix ``y_1..y_j`` scores ``max_{i<k≤j} s(y_k, y_i) + 0.1 j`` (its most similar pair),
    and a singleton scores ``-1``.

    Args:
        similarities: pairwise similarities with rows and columns in the filter's order.

    Shape:
        similarities: (B, m, m) -> (B, m).

    Example:
        >>> s = np.array([[[1.0, 0.3], [0.3, 1.0]]])
        >>> diversity_scores(s).round(3).tolist()
        [[-1.0, 0.5]]
    """
    s = np.asarray(similarities, dtype=float)
    if s.ndim != 3 or s.shape[1] != s.shape[2]:
        raise ValueError(f"similarities must be (B, m, m), got shape {s.shape}")
    _b, m, _ = s.shape
    # new[k] = max_{i<k} s[k, i]: the largest similarity the k-th element adds to the prefix.
    lower = np.where(np.tril(np.ones((m, m), dtype=bool), k=-1), s, -np.inf)  # (B, m, m)
    new = lower.max(axis=2)  # (B, m); -inf at k = 0
    out = np.maximum.accumulate(new, axis=1) + DIVERSITY_GAMMA * _lengths(m)
    out[:, 0] = -1.0
    return out
