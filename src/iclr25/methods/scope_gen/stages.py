"""The stages of SCOPE-Gen, batched over instances: generation, greedy filters, and the lazy label search.

Implements, from *Conformal Generative Modeling with Improved Sample Efficiency through
Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach;
ICLR 2025; arXiv 2410.01660), Sec. 3-4 (Algorithm 1, sequential greedy filtering):

- generation (test): keep the longest sampled prefix whose score is at most λ_1; the empty set
  if the first score already exceeds λ_1; abstain ("cannot certify") if the score never reaches
  λ_1 within ``m_max`` samples (always the case for λ_1 = +inf);
- filter (test): keep the longest prefix of the stage's order whose score is at most λ_s; with
  λ_s = NaN or +inf the input passes through unchanged;
- calibration: query labels along the stage's own order up to the first admissible element
  (the oracle cost of one calibration instance);
- the optional uncalibrated duplicate removal.

A set is stored as ``idx`` (B, m) — sample indices, the first ``size[b]`` valid — and ``size`` (B,).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from iclr25.methods.scope_gen.orders import farthest_point_order, quality_order
from iclr25.methods.scope_gen.scores import diversity_scores, quality_scores

__all__ = [
    "DUPLICATE_SIMILARITY",
    "LabelFn",
    "drop_duplicates",
    "filter_stage",
    "first_admissible",
    "generation_stage",
    "order_set",
]

#: ``label(rows, sample_indices) -> bool array``: the (counting) oracle behind a stage.
LabelFn = Callable[[np.ndarray, np.ndarray], np.ndarray]

#: Similarity at or above which two samples are duplicates.
DUPLICATE_SIMILARITY = 1.0 - 1e-9


def _finite(lam: float) -> bool:
    return not (math.isnan(lam) or math.isinf(lam))


def generation_stage(scores: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Test-time generation stage on precomputed prefix scores.

    Args:
        scores: generation score of every prefix length in sampling order (increasing in ``j``).
        lam: the calibrated threshold λ_1 (``+inf`` or NaN: every instance abstains).

    Returns:
        ``(size, abstained)``: the kept prefix length (0 = empty set) and the abstention flag.

    Shape:
        scores: (B, m) -> (B,), (B,).

    Example:
        >>> generation_stage(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 2.5]]), 2.7)
        (array([2, 0]), array([False,  True]))
    """
    s = np.asarray(scores, dtype=float)
    if math.isnan(lam) or math.isinf(lam):
        return np.zeros(s.shape[0], dtype=int), np.ones(s.shape[0], dtype=bool)
    size = (s <= lam).sum(axis=1)
    abstained = s[:, -1] < lam  # the score never reaches λ_1 within m_max samples
    return np.where(abstained, 0, size), abstained


def filter_stage(scores: np.ndarray, size: np.ndarray, lam: float) -> np.ndarray:
    """Test-time filter: the longest prefix of the stage's order with score at most λ_s.

    Args:
        scores: filter score of every prefix of the stage's order.
        size: current set size per instance.
        lam: the calibrated threshold λ_s; NaN or +inf passes the input through.

    Returns:
        The new set size per instance (a prefix of the stage's order).

    Shape:
        scores: (B, m); size: (B,) -> (B,).

    Example:
        >>> filter_stage(np.array([[-1.0, 0.4, 0.9]]), np.array([3]), 0.5).tolist()
        [2]
    """
    size = np.asarray(size)
    if not _finite(lam):
        return size.copy()
    valid = np.arange(scores.shape[1])[None, :] < size[:, None]
    return ((np.asarray(scores) <= lam) & valid).sum(axis=1)


def first_admissible(label: LabelFn, rows: np.ndarray, idx: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Lazily query labels along each instance's order up to its first admissible element.

    Element ``t`` of row ``b`` is queried only if elements ``0..t-1`` are inadmissible, so the
    number of queries per instance is its first-admissible position + 1, or its set size if none
    is admissible.

    Args:
        label: the oracle, ``label(rows, sample_indices) -> bool``.
        rows: instance ids passed to ``label``.
        idx: sample indices in the stage's order.
        size: set size per instance.

    Returns:
        The position of the first admissible element per instance, ``-1`` if there is none.

    Shape:
        rows: (B,); idx: (B, m); size: (B,) -> (B,).
    """
    b, m = idx.shape
    pos = np.full(b, -1, dtype=int)
    for t in range(m):
        active = np.flatnonzero((pos < 0) & (t < size))
        if active.size == 0:
            break
        lab = np.asarray(label(rows[active], idx[active, t]))
        if lab.dtype != bool or lab.shape != active.shape:
            raise TypeError("the oracle must return one boolean per query")
        pos[active[lab]] = t
    return pos


def order_set(
    kind: str,
    qualities: np.ndarray,
    similarities: np.ndarray,
    idx: np.ndarray,
    size: np.ndarray,
    start_u: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Order each set for a filter stage and score every prefix of that order.

    Args:
        kind: "quality" or "diversity".
        qualities: per-sample qualities of each instance.
        similarities: per-sample pairwise similarities of each instance.
        idx: current sets (sample indices, first ``size`` valid).
        size: set sizes.
        start_u: uniforms in [0, 1) from the pipeline's generator; the farthest-point start of
            row ``b`` is ``floor(start_u[b] * size[b])``.

    Returns:
        ``(ordered_idx, prefix_scores)``.

    Shape:
        qualities: (B, M); similarities: (B, M, M); idx: (B, m); size, start_u: (B,) ->
        (B, m), (B, m).
    """
    b, _m = idx.shape
    rows = np.arange(b)[:, None]
    q = qualities[rows, idx]  # (B, m): qualities of the set in its incoming order
    if kind == "quality":
        perm = quality_order(q, size)
        new_idx = np.take_along_axis(idx, perm, axis=1)
        return new_idx, quality_scores(np.take_along_axis(q, perm, axis=1))
    if kind == "diversity":
        s = similarities[rows[:, :, None], idx[:, :, None], idx[:, None, :]]  # (B, m, m)
        start = np.minimum((start_u * size).astype(int), np.maximum(size - 1, 0))
        perm = farthest_point_order(s, size, start)
        new_idx = np.take_along_axis(idx, perm, axis=1)
        s_ord = similarities[rows[:, :, None], new_idx[:, :, None], new_idx[:, None, :]]  # (B, m, m)
        return new_idx, diversity_scores(s_ord)
    raise ValueError(f"unknown filter stage {kind!r}")


def drop_duplicates(
    similarities: np.ndarray, idx: np.ndarray, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Remove later duplicates (similarity 1 to an earlier kept element), keeping the order.

    Shape:
        similarities: (B, M, M); idx: (B, m); size: (B,) -> (B, m), (B,).
    """
    b, m = idx.shape
    rows = np.arange(b)
    keep = np.zeros((b, m), dtype=bool)
    for t in range(m):
        dup = np.zeros(b, dtype=bool)
        if t:
            s = similarities[rows[:, None], idx[:, t : t + 1], idx[:, :t]]  # (B, t)
            dup = ((s >= DUPLICATE_SIMILARITY) & keep[:, :t]).any(axis=1)
        keep[:, t] = (t < size) & ~dup
    perm = np.argsort(~keep, axis=1, kind="stable")
    return np.take_along_axis(idx, perm, axis=1), keep.sum(axis=1)
