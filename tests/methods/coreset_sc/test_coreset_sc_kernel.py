"""Kernel view: sparse distances, Ncut identity, input validation."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from coreset_sc_helpers import dense_distances, dense_kernel, random_graph

from iclr25.methods.coreset_sc import (
    check_adjacency,
    conductances,
    degrees,
    kernel_kmeans_cost,
    normalized_cut,
    self_affinities,
    sparse_kernel_distances,
)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("shift", [0.0, 0.5, 1.0])
def test_sparse_distance_equals_dense_kernel(shift):
    A = random_graph(50, 0.1, seed=3)
    D = dense_distances(dense_kernel(A, shift))
    s = self_affinities(A, degrees(A), shift)
    for c in range(50):
        nb, dist = sparse_kernel_distances(A, c, shift=shift)
        expected = s[c] + s  # non-neighbours
        expected[nb] = dist
        expected[c] = 0.0
        np.testing.assert_allclose(expected, D[c], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shift", [0.0, 1.0])
def test_kernel_kmeans_cost_is_ncut_plus_constant_on_karate(shift):
    G = nx.karate_club_graph()
    A = sp.csr_array(nx.to_scipy_sparse_array(G, weight=None, dtype=float)) + sp.eye_array(34)
    A = sp.csr_array(A)
    d = degrees(A)
    K = dense_kernel(A, shift)
    rng = np.random.default_rng(0)
    for k in (2, 3, 5):
        for _ in range(5):
            lab = rng.permutation(np.arange(34) % k)
            # brute force weighted kernel k-means cost from the dense kernel
            cost = 0.0
            for j in range(k):
                S = lab == j
                w = d[S]
                KS = K[np.ix_(S, S)]
                cost += np.sum(w * np.diag(KS)) - w @ KS @ w / w.sum()
            const = np.sum(A.diagonal() / d) + shift * (34 - k) - k
            assert cost == pytest.approx(normalized_cut(A, lab) + const, rel=1e-12, abs=1e-12)
            assert kernel_kmeans_cost(A, lab, shift=shift) == pytest.approx(cost, rel=1e-12, abs=1e-12)


def test_conductances_and_ncut_exact():
    # two triangles joined by one edge, unit self-loops
    A = np.zeros((6, 6))
    for u, v in [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5), (2, 3)]:
        A[u, v] = A[v, u] = 1
    A += np.eye(6)
    lab = [0, 0, 0, 1, 1, 1]
    # vol = 3 self + 2*3 internal + 1 cut = 10; w(S,S) = 9
    np.testing.assert_allclose(conductances(sp.csr_array(A), lab), [0.1, 0.1])
    assert normalized_cut(sp.csr_array(A), lab) == pytest.approx(0.2)


def test_check_adjacency_errors_and_modes():
    good = sp.csr_array(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert check_adjacency(good).dtype == np.float64
    with pytest.raises(ValueError, match="symmetric"):
        check_adjacency(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="square"):
        check_adjacency(np.ones((2, 3)))
    with pytest.raises(ValueError, match="negative"):
        check_adjacency(np.array([[1.0, -1.0], [-1.0, 1.0]]))
    with pytest.raises(ValueError, match="setdiag"):
        check_adjacency(np.array([[0.0, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="NaN"):
        check_adjacency(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="empty"):
        check_adjacency(sp.csr_array((3, 3)))
    added = check_adjacency(np.array([[0.0, 1.0], [1.0, 0.0]]), self_loops="add")
    np.testing.assert_array_equal(added.diagonal(), [1.0, 1.0])
