"""Label-free orders of the SCOPE-Gen filter stages.

Implements, from *Conformal Generative Modeling with Improved Sample Efficiency through
Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach;
ICLR 2025; arXiv 2410.01660), Sec. 4: the greedy orders along which each filter keeps a prefix.
Orders never look at admissibility labels.

- quality order: descending quality, stable in the incoming order;
- diversity order: farthest-point order from a random start (drawn from the pipeline's seeded
  generator), repeatedly appending the element whose largest similarity to those already chosen
  is smallest (ties go to the earliest position).

Both are batched over instances; each returns, per row, a permutation of positions ``0..m-1``
whose first ``size[b]`` entries order the instance's set and whose rest are the padding.
"""

from __future__ import annotations

import numpy as np

__all__ = ["farthest_point_order", "quality_order"]


def _valid(size: np.ndarray, m: int) -> np.ndarray:
    return np.arange(m)[None, :] < np.asarray(size)[:, None]  # (B, m)


def quality_order(qualities: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Stable descending-quality order of each set.

    Args:
        qualities: qualities of each set's elements in the incoming order.
        size: number of valid elements per row.

    Returns:
        Positions, best quality first; ties keep the incoming order; padding last.

    Shape:
        qualities: (B, m); size: (B,) -> (B, m).

    Example:
        >>> quality_order(np.array([[0.1, 0.9, 0.9, 0.5]]), np.array([4])).tolist()
        [[1, 2, 3, 0]]
    """
    q = np.asarray(qualities, dtype=float)
    key = np.where(_valid(size, q.shape[1]), -q, np.inf)
    return np.argsort(key, axis=1, kind="stable")


def farthest_point_order(similarities: np.ndarray, size: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Greedy farthest-point (max-min diversity) order of each set.

    Starting from ``start[b]``, repeatedly append the element whose maximum similarity to the
    elements chosen so far is smallest.

    Args:
        similarities: pairwise similarities in [0, 1] in the incoming order.
        size: number of valid elements per row.
        start: first position per row (``0 <= start < size``; ignored for empty rows).

    Returns:
        Positions in farthest-point order; padding last.

    Shape:
        similarities: (B, m, m); size: (B,); start: (B,) -> (B, m).

    Example:
        >>> s = np.array([[[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]]])
        >>> farthest_point_order(s, np.array([3]), np.array([0])).tolist()
        [[0, 2, 1]]
    """
    s = np.asarray(similarities, dtype=float)
    b, m, _ = s.shape
    rows = np.arange(b)
    valid = _valid(size, m)
    start = np.where(np.asarray(size) > 0, np.asarray(start), 0).astype(int)
    order = np.empty((b, m), dtype=int)
    order[:, 0] = start
    chosen = np.zeros((b, m), dtype=bool)
    chosen[rows, start] = True
    closest = s[rows, start, :].copy()  # (B, m): max similarity to the chosen elements
    for t in range(1, m):
        # Valid candidates are ranked by similarity (<= 1); padding (2) comes after them.
        cand = np.where(chosen, np.inf, np.where(valid, closest, 2.0))
        nxt = np.argmin(cand, axis=1)
        order[:, t] = nxt
        chosen[rows, nxt] = True
        closest = np.maximum(closest, s[rows, nxt, :])
    return order
