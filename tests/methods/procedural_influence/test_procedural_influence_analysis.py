"""Exact values of the analyses on known inputs."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.methods.procedural_influence import (
    answer_in_topk,
    compare_slopes,
    group_correlations,
    kind_share_topk,
    normalize_per_nat,
    permute_per_query,
    powerlaw_slope,
    query_correlation_matrix,
    source_overrepresentation,
    topk_coverage,
    topk_indices,
)


def test_correlation_is_numpy_corrcoef_and_row_scale_invariant() -> None:
    rng = np.random.default_rng(0)
    s = rng.normal(size=(4, 30))
    assert np.allclose(query_correlation_matrix(s), np.corrcoef(s))
    scaled = s * np.array([[1.0], [3.0], [0.5], [10.0]])
    assert np.allclose(query_correlation_matrix(scaled), np.corrcoef(s))
    with pytest.raises(ValueError, match="constant"):
        query_correlation_matrix(np.vstack([s[:1], np.ones((1, 30))]))


def test_normalize_per_nat() -> None:
    s = np.array([[2.0, -4.0], [1.0, 3.0]])
    assert np.allclose(normalize_per_nat(s, np.array([2.0, 0.5])), [[1.0, -2.0], [2.0, 6.0]])
    for bad in ([0.0, 1.0], [-1.0, 1.0], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="positive"):
            normalize_per_nat(s, np.array(bad))


def test_group_correlations_means_by_pair_type() -> None:
    corr = np.array([[1.0, 0.5, 0.1], [0.5, 1.0, 0.3], [0.1, 0.3, 1.0]])
    out = group_correlations(corr, lambda i, j: "a" if j == 1 else "b")
    assert out == {"a": 0.5, "b": pytest.approx(0.2)}
    out = group_correlations(corr, lambda i, j: "x", mask=[True, False, True])
    assert out == {"x": 0.1}


def test_topk_coverage_modes_and_tails() -> None:
    s = np.array([[4.0, 3.0, 2.0, 1.0, -1.0, -5.0, 0.0, 0.0]])
    # 4 positive documents: 50 % -> top 2 (4 + 3), 10 % -> ceil(0.4) = 1
    assert np.allclose(topk_coverage(s, [50, 10]), [[7.0, 4.0]])
    assert np.allclose(topk_coverage(s, [50], relative=True), [[0.7]])
    assert np.allclose(topk_coverage(s, [1, 3], mode="absolute"), [[4.0, 9.0]])
    assert np.allclose(topk_coverage(s, [50], tail="negative"), [[5.0]])
    assert np.allclose(topk_coverage(s, [100], tail="negative", relative=True), [[1.0]])
    assert np.allclose(topk_coverage(-np.abs(s) - 1, [50]), [[0.0]])  # no positive document
    with pytest.raises(ValueError):
        topk_coverage(s, [0])
    with pytest.raises(ValueError):
        topk_coverage(s, [10], mode="bad")


@pytest.mark.parametrize("alpha", [0.7, 1.3])
def test_powerlaw_slope_recovers_zipf(alpha: float) -> None:
    vals = 5.0 * np.arange(1, 201, dtype=float) ** -alpha
    rng = np.random.default_rng(0)
    shuffled = np.concatenate([rng.permutation(vals), -vals[:10]])
    assert powerlaw_slope(shuffled, top=100) == pytest.approx(alpha, abs=1e-9)
    with pytest.raises(ValueError):
        powerlaw_slope(np.array([1.0, -1.0]), top=10)


def test_compare_slopes_separates_groups() -> None:
    t, p = compare_slopes([1.0, 1.1, 1.2, 1.05], [0.5, 0.55, 0.6, 0.52])
    assert t > 0 and p < 0.01


def test_answer_in_topk_union_and_single() -> None:
    scores = np.array([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    docs = [{"a"}, {"b"}, {"a", "b"}, {"c"}]
    need = [{"a", "b"}, {"a", "b"}]
    # top 2: q0 -> docs 0, 1 ({a}, {b}); q1 -> docs 3, 2 ({c}, {a, b})
    assert answer_in_topk(scores, docs, need, 2).tolist() == [True, True]
    assert answer_in_topk(scores, docs, need, 2, rule="single").tolist() == [False, True]
    assert answer_in_topk(scores, docs, [{"a", "c"}, {"a", "c"}], 2).tolist() == [False, True]
    assert answer_in_topk(scores, docs, [set(), {"c"}], 1).tolist() == [False, True]


def test_kind_share_and_sources_and_topk() -> None:
    scores = np.array([[5.0, 4.0, 0.0, 0.0], [0.0, 0.0, 4.0, 5.0]])
    assert topk_indices(scores, 2).tolist() == [[0, 1], [3, 2]]
    assert kind_share_topk(scores, np.array([1, 0, 0, 0], bool), 2).tolist() == [0.5, 0.0]
    over = source_overrepresentation(scores, ["a", "a", "b", "c"], 1)
    # top-1s: doc 0 (a) and doc 3 (c): a has share 0.5 of the tops and 0.5 of the corpus
    assert over == {"a": 1.0, "b": 0.0, "c": 2.0}


def test_permute_per_query_keeps_each_rows_values() -> None:
    s = np.arange(12.0).reshape(2, 6)
    p = permute_per_query(s, seed=0)
    assert sorted(p[0]) == sorted(s[0]) and sorted(p[1]) == sorted(s[1]) and not np.array_equal(p, s)
