"""The paper's analyses over a [queries x documents] influence matrix.

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Ruis et al.,
ICLR 2025, arXiv:2411.12580: Sec. 5.1 (Pearson correlation of influence between queries),
Sec. 5.2 (top-k coverage of the positive influence and its power-law decay), Sec. 5.3 (whether the
answer appears in the top documents), Sec. 5.4 (what kind of document ranks high, and its source).

All functions are pure: NumPy arrays in, NumPy arrays or floats out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Literal

import numpy as np

__all__ = [
    "answer_in_topk",
    "compare_slopes",
    "group_correlations",
    "kind_share_topk",
    "normalize_per_nat",
    "paired_greater_p",
    "partial_spearman",
    "permute_per_query",
    "powerlaw_slope",
    "query_correlation_matrix",
    "shuffle_pairing",
    "source_overrepresentation",
    "topk_coverage",
    "topk_indices",
]


def normalize_per_nat(scores: np.ndarray, nats: np.ndarray) -> np.ndarray:
    """``I(d, q) / nats(q)`` with ``nats(q) = -log p(c | p)`` (influence per nat of the completion).

    Raises:
        ValueError: a nats value that is not positive and finite.

    Shape:
        scores [Q, D], nats [Q] -> [Q, D].
    """
    nats = np.asarray(nats, dtype=float)
    if nats.shape != (scores.shape[0],):
        raise ValueError(f"nats has shape {nats.shape}, expected ({scores.shape[0]},)")
    if not (np.isfinite(nats) & (nats > 0)).all():
        raise ValueError("every query's nats must be positive and finite")
    return scores / nats[:, None]


def query_correlation_matrix(scores: np.ndarray) -> np.ndarray:
    """Pearson r between the influence vectors of every pair of queries (``numpy.corrcoef``).

    Row scale does not matter, so per-nat normalisation leaves it unchanged (Trap 8).

    Raises:
        ValueError: a constant row (its correlation is undefined).

    Shape:
        [Q, D] -> [Q, Q].
    """
    if (np.ptp(scores, axis=1) == 0).any():
        raise ValueError("a query's influence vector is constant; its correlation is undefined")
    return np.corrcoef(scores)


def group_correlations(
    corr: np.ndarray, key: Callable[[int, int], str | None], mask: Sequence[bool] | None = None
) -> dict[str, float]:
    """Mean off-diagonal correlation per pair type.

    Args:
        corr: [Q, Q] correlation matrix.
        key: ``key(i, j)`` -> the pair type of queries i < j, or None to skip the pair.
        mask: keep only queries where True (e.g. correct ones).

    Returns:
        pair type -> mean r (pair types without pairs are absent).
    """
    q = corr.shape[0]
    keep = np.ones(q, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    sums: dict[str, list[float]] = {}
    for i in range(q):
        for j in range(i + 1, q):
            if keep[i] and keep[j]:
                k = key(i, j)
                if k is not None:
                    sums.setdefault(k, []).append(float(corr[i, j]))
    return {k: float(np.mean(v)) for k, v in sums.items()}


def topk_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of each query's k highest-scoring documents, best first (ties: lower index). [Q, k]."""
    if not 1 <= k <= scores.shape[1]:
        raise ValueError(f"k must lie in [1, {scores.shape[1]}], got {k}")
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def topk_coverage(
    scores: np.ndarray,
    ks: Sequence[float],
    *,
    mode: Literal["percentile", "absolute"] = "percentile",
    relative: bool = False,
    tail: Literal["positive", "negative"] = "positive",
) -> np.ndarray:
    """Influence summed over each query's top documents of one sign (Sec. 5.2, "reliance").

    Args:
        scores: [Q, D] (per-nat) influence.
        ks: percentiles in (0, 100] of the query's documents of that sign (``mode="percentile"``;
            their count varies by query, Trap 11), or absolute document counts.
        mode: "percentile" or "absolute".
        relative: divide by the query's total influence of that sign (a share in [0, 1]).
        tail: "positive" (helpful documents) or "negative" (harmful; magnitudes are summed).

    Returns:
        [Q, len(ks)]; 0 where a query has no document of that sign.
    """
    if mode not in ("percentile", "absolute"):
        raise ValueError(f"mode must be 'percentile' or 'absolute', got {mode!r}")
    if tail not in ("positive", "negative"):
        raise ValueError(f"tail must be 'positive' or 'negative', got {tail!r}")
    signed = scores if tail == "positive" else -scores
    out = np.zeros((scores.shape[0], len(ks)))
    for qi, row in enumerate(signed):
        vals = np.sort(row[row > 0])[::-1]
        if not len(vals):
            continue
        total = vals.sum()
        for j, k in enumerate(ks):
            if mode == "percentile":
                if not 0 < k <= 100:
                    raise ValueError(f"percentiles must lie in (0, 100], got {k}")
                n = max(1, math.ceil(len(vals) * k / 100))
            else:
                if k < 1:
                    raise ValueError(f"absolute k must be >= 1, got {k}")
                n = int(k)
            top = vals[:n].sum()
            out[qi, j] = top / total if relative else top
    return out


def powerlaw_slope(values: np.ndarray, top: int) -> float:
    """``alpha`` of ``log I = a - alpha log rank`` fitted by least squares on the ``top`` largest
    positive values (Sec. 5.2; the paper fits the top 500 of 5M documents).

    Raises:
        ValueError: fewer than 2 positive values.
    """
    vals = np.sort(np.asarray(values, dtype=float)[np.asarray(values) > 0])[::-1][:top]
    if len(vals) < 2:
        raise ValueError("a power law needs at least 2 positive values")
    rank = np.arange(1, len(vals) + 1)
    slope = np.polyfit(np.log(rank), np.log(vals), 1)[0]
    return float(-slope)


def compare_slopes(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's t-test of two groups' power-law slopes: ``(t, two-sided p)``."""
    from scipy.stats import ttest_ind

    res = ttest_ind(np.asarray(a, float), np.asarray(b, float), equal_var=False)
    return float(res.statistic), float(res.pvalue)


def answer_in_topk(
    scores: np.ndarray,
    doc_items: Sequence[Collection[Hashable]],
    query_items: Sequence[Collection[Hashable]],
    k: int,
    *,
    rule: Literal["union", "single"] = "union",
) -> np.ndarray:
    """Whether each query's needed items (its fact, or every step equation) are in its top-k
    documents (Sec. 5.3), found through document metadata, not strings (Trap 10).

    Args:
        scores: [Q, D].
        doc_items: per document, the items it contains (fact ids, step equations).
        query_items: per query, the items its answer needs.
        k: the top-k size.
        rule: "union" (the items may be spread over the top-k documents) or "single" (one
            document holds them all).

    Returns:
        Boolean [Q] (False for a query that needs nothing).
    """
    if len(doc_items) != scores.shape[1] or len(query_items) != scores.shape[0]:
        raise ValueError("doc_items / query_items do not match the score matrix")
    top = topk_indices(scores, k)
    out = np.zeros(scores.shape[0], dtype=bool)
    for qi, need in enumerate(query_items):
        need = set(need)
        if not need:
            continue
        if rule == "union":
            have = set().union(*(set(doc_items[d]) for d in top[qi]))
            out[qi] = need <= have
        elif rule == "single":
            out[qi] = any(need <= set(doc_items[d]) for d in top[qi])
        else:
            raise ValueError(f"rule must be 'union' or 'single', got {rule!r}")
    return out


def kind_share_topk(scores: np.ndarray, is_kind: np.ndarray, k: int) -> np.ndarray:
    """Share of each query's top-k documents for which ``is_kind`` holds. [Q, D] x [Q, D] or [D] -> [Q]."""
    top = topk_indices(scores, k)
    flags = np.broadcast_to(np.asarray(is_kind, dtype=bool), scores.shape)
    return np.take_along_axis(flags, top, axis=1).mean(1)


def source_overrepresentation(scores: np.ndarray, sources: Sequence[str], k: int) -> dict[str, float]:
    """Share of each source among the queries' top-k documents divided by its share of the
    corpus (Sec. 5.4; 1 = as often as chance, 10 = ten times as often).

    Returns:
        source -> ratio, for every source of the corpus.
    """
    sources = np.asarray(sources, dtype=object)
    if len(sources) != scores.shape[1]:
        raise ValueError("sources do not match the documents")
    top = topk_indices(scores, k).ravel()
    out = {}
    for s in sorted(set(sources.tolist())):
        base = float((sources == s).mean())
        out[s] = float((sources[top] == s).mean()) / base
    return out


def permute_per_query(scores: np.ndarray, seed: int) -> np.ndarray:
    """Negative control: each query's scores shuffled over documents independently. [Q, D]."""
    rng = np.random.default_rng(seed)
    return np.stack([row[rng.permutation(len(row))] for row in scores])


def shuffle_pairing(scores: np.ndarray, seed: int) -> np.ndarray:
    """Negative control: documents' scores paired with the wrong documents, one permutation shared
    by every query (query-query correlations are unchanged; which document scores what is not). [Q, D]."""
    rng = np.random.default_rng([seed, 43])
    return scores[:, rng.permutation(scores.shape[1])]


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x, method="average").astype(float)


def partial_spearman(scores: np.ndarray, indicator: np.ndarray, covariate: np.ndarray) -> np.ndarray:
    """Per query: the Spearman partial correlation of its scores with ``indicator`` given ``covariate``.

    Ranks of the scores and of the covariate (ties averaged) and the indicator are each regressed
    linearly on the covariate's ranks; the result is the Pearson r of the two residuals, i.e. the
    part of the association that the covariate (e.g. BM25 word overlap) does not explain.

    Args:
        scores: [Q, D] influence scores.
        indicator: [D] 0/1 (or real) document property.
        covariate: [Q, D] per-query covariate (e.g. BM25 scores of the same query).

    Returns:
        [Q] partial correlations (0 where a residual is constant).

    Raises:
        ValueError: mismatched shapes.
    """
    scores, covariate = np.asarray(scores, float), np.asarray(covariate, float)
    ind = np.asarray(indicator, float)
    if scores.shape != covariate.shape or scores.shape[1] != len(ind):
        raise ValueError(f"shapes {scores.shape}, {covariate.shape} and {ind.shape} do not match")
    out = np.zeros(len(scores))

    def resid(y: np.ndarray, design: np.ndarray) -> np.ndarray:
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        return y - design @ coef

    for i, (s, c) in enumerate(zip(scores, covariate, strict=True)):
        design = np.column_stack([np.ones(len(c)), _ranks(c)])
        rs = _ranks(s)
        a, b = resid(rs, design), resid(ind, design)
        na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
        # a residual at rounding level means the covariate explains everything: no partial r
        constant = na <= 1e-9 * max(1.0, float(np.linalg.norm(rs))) or nb <= 1e-9 * max(
            1.0, float(np.linalg.norm(ind))
        )
        out[i] = 0.0 if constant else float(a @ b) / (na * nb)
    return out


def paired_greater_p(a: np.ndarray, b: np.ndarray) -> float:
    """One-sided Wilcoxon signed-rank p-value that ``a`` exceeds ``b`` (paired; zeros dropped).

    Returns 1.0 when every difference is zero (no evidence either way).

    Raises:
        ValueError: mismatched or empty inputs.
    """
    from scipy.stats import wilcoxon

    d = np.asarray(a, float) - np.asarray(b, float)
    if d.ndim != 1 or len(d) == 0 or np.shape(a) != np.shape(b):
        raise ValueError(f"need two equally long non-empty vectors, got {np.shape(a)} and {np.shape(b)}")
    if not np.isfinite(d).all():
        raise ValueError("non-finite differences")
    if not (d != 0).any():
        return 1.0
    return float(wilcoxon(d, alternative="greater", zero_method="wilcox").pvalue)
