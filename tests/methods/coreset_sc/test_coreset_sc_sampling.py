"""Sum tree, sparse seeding (exact Δ after every repair), counters, coreset weights and graph."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from coreset_sc_helpers import dense_distances, dense_kernel, random_graph
from scipy.stats import chisquare

from iclr25.methods.coreset_sc import (
    SumTree,
    coreset_graph,
    degrees,
    dense_kernel_seeding,
    sample_coreset,
    sampling_probabilities,
    sbm,
    self_affinities,
    sparse_kernel_seeding,
)
from iclr25.methods.coreset_sc._numba import numba_sparse_seeding
from iclr25.methods.coreset_sc.sampling import _sparse_seeding


def test_sum_tree_draw_frequencies_match_probabilities():
    rng = np.random.RandomState(0)
    values = rng.uniform(0, 1, size=13)
    values[4] = 0.0
    tree = SumTree(values)
    draws = np.array([tree.sample(rng) for _ in range(20000)])
    counts = np.bincount(draws, minlength=13)
    assert counts[4] == 0
    keep = values > 0
    expected = values[keep] / values.sum() * draws.size
    assert chisquare(counts[keep], expected).pvalue > 1e-3


def test_sum_tree_root_equals_sum_after_every_update():
    rng = np.random.RandomState(1)
    values = rng.uniform(0, 1, size=37)
    tree = SumTree(values)
    for _ in range(50):
        idx = rng.choice(37, size=rng.randint(1, 6), replace=False)
        new = rng.uniform(0, 1, size=idx.size)
        values[idx] = new
        tree.update(idx, new)
        assert tree.total == pytest.approx(values.sum(), rel=1e-13)
        np.testing.assert_array_equal(tree.leaves, values)


def _brute_delta(A, shift, seeds):
    D = dense_distances(dense_kernel(A, shift))
    return D[:, seeds].min(axis=1)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("shift", [0.0, 0.3, 1.0])
def test_delta_after_every_repair_equals_brute_force(graph200, shift):
    # Runs with n_seeds = 1..k' share their random numbers, so run t is the state after repair t.
    for t in range(1, 16):
        res = sparse_kernel_seeding(graph200, t, shift=shift, random_state=7)
        assert res.seeds.size == t + 1 and res.seeds[0] == res.reference
        np.testing.assert_allclose(
            res.delta, _brute_delta(graph200, shift, res.seeds), rtol=1e-12, atol=1e-15
        )
        D = dense_distances(dense_kernel(graph200, shift))[:, res.seeds]
        np.testing.assert_allclose(D[np.arange(200), res.assignment], res.delta, rtol=1e-12, atol=1e-15)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_delta_without_reference_seed_is_wrong(graph200):
    A = graph200
    d = degrees(A)
    s = self_affinities(A, d, 0.0)
    res = _sparse_seeding(A, d, s, 10, np.random.RandomState(7), insert_reference=False)
    assert not np.allclose(res.delta, _brute_delta(A, 0.0, res.seeds), rtol=1e-9)


def test_evaluation_counters_closed_forms():
    # path 0-1-2-3 plus a star 4-{5,6}, unit self-loops
    n = 7
    A = np.eye(n)
    for u, v in [(0, 1), (1, 2), (2, 3), (4, 5), (4, 6)]:
        A[u, v] = A[v, u] = 1
    A = sp.csr_array(A)
    nbrs = np.array([1, 2, 2, 1, 2, 1, 1])  # neighbours other than self
    for kp in (1, 3, 5):
        res = sparse_kernel_seeding(A, kp, random_state=0)
        assert res.n_evals == n + nbrs[res.seeds].sum()
        assert dense_kernel_seeding(A, kp, random_state=0).n_evals == n * (kp + 1)


def test_dense_seeding_matches_sparse_seeding():
    A, _ = sbm(30, 4, 0.5, 0.02, random_state=3)
    a = sparse_kernel_seeding(A, 8, random_state=11)
    b = dense_kernel_seeding(A, 8, random_state=11)
    np.testing.assert_array_equal(a.seeds, b.seeds)
    np.testing.assert_allclose(a.delta, b.delta, rtol=1e-12, atol=1e-15)


def test_check_input_false_skips_only_the_validation():
    A, _ = sbm(30, 4, 0.5, 0.02, random_state=3)
    for seeding in (sparse_kernel_seeding, dense_kernel_seeding):
        a = seeding(A, 8, random_state=11)
        b = seeding(A, 8, random_state=11, check_input=False)
        np.testing.assert_array_equal(a.seeds, b.seeds)
        np.testing.assert_array_equal(a.delta, b.delta)
        assert a.n_evals == b.n_evals


def test_numba_backend_is_bit_identical(graph200):
    pytest.importorskip("numba")
    d = degrees(graph200)
    s = self_affinities(graph200, d, 0.5)
    a = _sparse_seeding(graph200, d, s, 30, np.random.RandomState(4))
    b = numba_sparse_seeding(graph200, d, s, 30, np.random.RandomState(4))
    np.testing.assert_array_equal(a.seeds, b.seeds)
    np.testing.assert_array_equal(a.delta, b.delta)
    np.testing.assert_array_equal(a.assignment, b.assignment)
    assert a.n_evals == b.n_evals


def test_indefinite_kernel_warns_and_names_fix():
    A = sp.csr_array(np.array([[0.1, 5.0], [5.0, 0.1]]))
    with pytest.warns(UserWarning, match="shift=1"):
        sparse_kernel_seeding(A, 2, shift=0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sparse_kernel_seeding(A, 2, shift=1.0, random_state=0)


@pytest.mark.parametrize("sampling", ["smoothed", "sensitivity", "uniform", "degree"])
def test_weights_are_d_over_mp_with_duplicates_merged(graph200, sampling):
    d = degrees(graph200)
    seeding = sparse_kernel_seeding(graph200, 10, shift=1.0, random_state=0)
    p = sampling_probabilities(d, seeding, sampling)
    assert p.sum() == pytest.approx(1.0)
    m = 150
    idx, w = sample_coreset(d, seeding, m, sampling=sampling, random_state=5)
    assert np.all(np.diff(idx) > 0)  # distinct, sorted
    # replay the draws to count duplicates
    rng = np.random.RandomState(5)
    cdf = np.cumsum(p)
    draws = np.minimum(np.searchsorted(cdf, rng.uniform(0.0, cdf[-1], size=m), side="right"), 199)
    counts = np.bincount(draws, minlength=200)
    assert counts.max() > 1 or sampling == "uniform"
    np.testing.assert_allclose(w, counts[idx] * d[idx] / (m * p[idx]), rtol=1e-13)


def test_smoothed_probabilities_formula(graph200):
    d = degrees(graph200)
    res = sparse_kernel_seeding(graph200, 10, shift=1.0, random_state=0)
    raw = d * res.delta / np.sum(d * res.delta) + d / d[np.unique(res.seeds)].sum()
    np.testing.assert_allclose(sampling_probabilities(d, res, "smoothed"), raw / raw.sum(), rtol=1e-13)


def test_total_weight_is_unbiased_for_volume(graph200):
    d = degrees(graph200)
    seeding = sparse_kernel_seeding(graph200, 10, shift=1.0, random_state=0)
    totals = [sample_coreset(d, seeding, 60, random_state=r)[1].sum() for r in range(400)]
    assert np.mean(totals) == pytest.approx(d.sum(), rel=0.03)


@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_coreset_graph_equals_dense_wkw(graph200, shift):
    rng = np.random.RandomState(0)
    idx = np.sort(rng.choice(200, 40, replace=False))
    w = rng.uniform(1, 5, 40)
    K = dense_kernel(graph200, shift)
    expected = np.diag(w) @ K[np.ix_(idx, idx)] @ np.diag(w)
    np.testing.assert_allclose(coreset_graph(graph200, idx, w, shift=shift).toarray(), expected, rtol=1e-12)


def test_seeding_rejects_bad_k_prime(graph200):
    with pytest.raises(ValueError, match="n_seeds"):
        sparse_kernel_seeding(graph200, 201)
    A = random_graph(10, 0.3, seed=0)
    with pytest.warns(UserWarning, match="clipped"):  # this small graph's kernel is indefinite
        assert sparse_kernel_seeding(A, 10, random_state=0).seeds.size == 11


@pytest.mark.filterwarnings("ignore:negative squared kernel distances:UserWarning")
def test_sample_coreset_with_explicit_probabilities(graph200):
    d = degrees(graph200)
    seeding = sparse_kernel_seeding(graph200, 10, random_state=0)
    p = sampling_probabilities(d, seeding, "smoothed")
    a = sample_coreset(d, seeding, 80, random_state=3)
    b = sample_coreset(d, seeding, 80, probabilities=p, random_state=3)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    # a permuted distribution (the claim's C3 control): weights stay d_v/(m p_v) for the p drawn from
    q = p[np.random.RandomState(0).permutation(200)]
    idx, w = sample_coreset(d, seeding, 80, probabilities=q, random_state=3)
    draws = np.minimum(
        np.searchsorted(
            np.cumsum(q), np.random.RandomState(3).uniform(0.0, np.cumsum(q)[-1], 80), side="right"
        ),
        199,
    )
    counts = np.bincount(draws, minlength=200)
    np.testing.assert_allclose(w, counts[idx] * d[idx] / (80 * q[idx]), rtol=1e-13)
    with pytest.raises(ValueError, match="distribution"):
        sample_coreset(d, seeding, 80, probabilities=p[:-1], random_state=0)
    with pytest.raises(ValueError, match="distribution"):
        sample_coreset(d, seeding, 80, probabilities=2 * p, random_state=0)
