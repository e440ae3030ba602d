"""Quantile, α allocation, scores and orders of SCOPE-Gen."""

import math

import numpy as np
import pytest

from iclr25.methods.scope_gen import (
    allocate_alphas,
    conformal_quantile,
    disjoint_splits,
    diversity_scores,
    farthest_point_order,
    generation_scores,
    min_calibration_size,
    quality_order,
    quality_scores,
)


@pytest.mark.parametrize("alpha", [0.05, 0.3, 0.4, 0.9])
@pytest.mark.parametrize("parts,chunks", [((3, 1, 1), 5), ((1, 1, 1), 3), ((2, 5), 7), ((1,), 1)])
def test_stage_alphas_multiply_out(alpha, parts, chunks):
    alphas = allocate_alphas(alpha, parts, chunks)
    assert len(alphas) == len(parts)
    assert abs(np.prod([1 - a for a in alphas]) - (1 - alpha)) < 1e-12
    assert all(0 < a < alpha or len(parts) == 1 for a in alphas)


def test_default_allocation_values():
    c = 0.7 ** (1 / 5)
    assert allocate_alphas(0.3) == pytest.approx((1 - c**3, 1 - c, 1 - c), abs=1e-15)


@pytest.mark.parametrize("parts,chunks", [((3, 1), 5), ((3, 1, 2), 5), ((0, 5), 5), ((2.5, 2.5), 5)])
def test_bad_parts_raise(parts, chunks):
    with pytest.raises(ValueError):
        allocate_alphas(0.3, parts, chunks)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5])
def test_alpha_outside_unit_interval_raises(alpha):
    with pytest.raises(ValueError, match="alpha"):
        allocate_alphas(alpha)
    with pytest.raises(ValueError, match="alpha"):
        conformal_quantile([1.0, 2.0], alpha)


def _brute_higher(scores, alpha):
    s = sorted(x for x in scores if not math.isnan(x))
    n = len(s)
    k = math.ceil((n + 1) * (1 - alpha))
    if n == 0 or k > n:
        return math.inf
    # numpy's "higher" quantile at level k/n: the element at sorted index ceil((n-1) k / n).
    return s[math.ceil((n - 1) * k / n)]


def test_quantile_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        scores = rng.normal(size=n).round(1).tolist()  # ties included
        alpha = float(rng.uniform(0.02, 0.9))
        q = conformal_quantile(scores, alpha)
        assert q == _brute_higher(scores, alpha)
        # Never below the ceil((n+1)(1-α))-th order statistic (validity).
        k = math.ceil((n + 1) * (1 - alpha))
        if k <= n:
            assert q >= sorted(scores)[k - 1]


def test_quantile_exact_small_case():
    # n = 9, α = 0.2: ceil(10 * 0.8) = 8, level 8/9, index ceil(8 * 8/9) = 8 -> largest.
    assert conformal_quantile(np.arange(1.0, 10.0), 0.2) == 9.0
    # n = 19, α = 0.5: ceil(20 * 0.5) = 10, index ceil(18 * 10/19) = 10 -> 11th smallest.
    assert conformal_quantile(np.arange(19.0), 0.5) == 10.0


def test_quantile_drops_nan_keeps_inf():
    assert conformal_quantile([np.nan, 1.0, 2.0, 3.0, np.nan], 0.25) == _brute_higher([1.0, 2.0, 3.0], 0.25)
    assert conformal_quantile([1.0, np.inf, np.inf, np.inf], 0.5) == math.inf
    assert conformal_quantile([np.nan, np.nan], 0.3) == math.inf


@pytest.mark.parametrize("alpha", [0.5, 0.3, 0.2, 0.1, 0.05, 0.01, 0.00201])
def test_min_calibration_size_is_where_the_quantile_becomes_finite(alpha):
    n = min_calibration_size(alpha)
    assert math.isfinite(conformal_quantile(np.arange(n, dtype=float), alpha))
    if n > 1:
        assert conformal_quantile(np.arange(n - 1, dtype=float), alpha) == math.inf


def test_quantile_too_small_calibration_set_is_infinite():
    # ceil((n+1)(1-α)) > n  <=>  n < (1-α)/α; n = 3, α = 0.2: ceil(3.2) = 4 > 3.
    assert conformal_quantile([0.1, 0.2, 0.3], 0.2) == math.inf
    assert conformal_quantile([0.5], 0.3) == math.inf
    assert conformal_quantile([0.1, 0.2, 0.3, 0.4], 0.2) == 0.4


def test_disjoint_splits():
    parts = disjoint_splits(10, 3, np.random.default_rng(0))
    flat = np.concatenate(parts)
    assert sorted(flat.tolist()) == list(range(10)) and [len(p) for p in parts] == [4, 3, 3]
    with pytest.raises(ValueError):
        disjoint_splits(2, 3, np.random.default_rng(0))


def test_generation_scores_hand_values():
    q = np.array([[0.2, 0.6, 0.1]])
    assert generation_scores(q, "count").tolist() == [[1.0, 2.0, 3.0]]
    assert np.allclose(generation_scores(q, "sum"), [[0.7, 1.8, 2.4]])
    assert np.allclose(generation_scores(q, "max"), [[0.3, 0.8, 0.9]])
    with pytest.raises(ValueError):
        generation_scores(q, "mean")


def test_filter_scores_hand_values():
    assert np.allclose(quality_scores(np.array([[0.9, 0.4, 0.6]])), [[-0.4, 0.6, 1.1]])
    s = np.array([[[1.0, 0.2, 0.7], [0.2, 1.0, 0.1], [0.7, 0.1, 1.0]]])
    assert np.allclose(diversity_scores(s), [[-1.0, 0.4, 1.0]])
    assert diversity_scores(np.ones((1, 1, 1))).tolist() == [[-1.0]]


def test_scores_strictly_increasing():
    rng = np.random.default_rng(1)
    q = rng.random((50, 12))
    s = rng.random((50, 12, 12))
    s = (s + s.transpose(0, 2, 1)) / 2
    for sc in (
        *(generation_scores(q, k) for k in ("count", "sum", "max")),
        quality_scores(q),
        diversity_scores(s),
    ):
        assert (np.diff(sc, axis=1) > 0).all()


def test_quality_order_stable_descending():
    q = np.array([[0.5, 0.9, 0.5, 0.9, 0.1, 7.0]])
    assert quality_order(q, np.array([5])).tolist() == [[1, 3, 0, 2, 4, 5]]


def test_farthest_point_hand_example_and_determinism():
    s = np.array(
        [
            [1.0, 0.9, 0.2, 0.5],
            [0.9, 1.0, 0.3, 0.4],
            [0.2, 0.3, 1.0, 0.6],
            [0.5, 0.4, 0.6, 1.0],
        ]
    )[None]
    # From 0: max similarity to the chosen set is (1: .9, 2: .2, 3: .5) -> 2;
    # then (1: max(.9, .3) = .9, 3: max(.5, .6) = .6) -> 3; then 1.
    assert farthest_point_order(s, np.array([4]), np.array([0])).tolist() == [[0, 2, 3, 1]]
    assert farthest_point_order(s, np.array([4]), np.array([1])).tolist() == [[1, 2, 3, 0]]
    # Padding (size 3) comes last.
    assert farthest_point_order(s, np.array([3]), np.array([0])).tolist() == [[0, 2, 1, 3]]
