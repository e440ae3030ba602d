"""Labelling through kernel-space centres equals a dense brute-force assignment."""

import numpy as np
import pytest
import scipy.sparse as sp
from coreset_sc_helpers import dense_kernel, random_graph

from iclr25.methods.coreset_sc import label_full_graph, nearest_point_labels


def _brute(A, idx, w, lab, k, shift):
    """Decide with the unshifted kernel; distances in the shifted one with centre shift part σ/W_j."""
    K0 = dense_kernel(A, 0.0)
    K = dense_kernel(A, shift)
    n = A.shape[0]
    W = np.array([w[lab == j].sum() for j in range(k)])
    norms = np.array(
        [w[lab == j] @ K0[np.ix_(idx[lab == j], idx[lab == j])] @ w[lab == j] / W[j] ** 2 for j in range(k)]
    )
    j0 = int(np.argmin(norms))
    Ad = A.toarray()
    out, dist = np.empty(n, int), np.empty(n)
    for x in range(n):
        inner = np.array([w[lab == j] @ K0[x, idx[lab == j]] / W[j] for j in range(k)])
        cands = sorted({j0} | {int(lab[a]) for a in range(idx.size) if Ad[x, idx[a]] > 0})
        scores = [norms[j] - 2 * inner[j] for j in cands]
        b = int(np.argmin(scores))  # first minimum = smallest cluster index among ties
        out[x] = cands[b]
        j = cands[b]
        own = x in idx and lab[list(idx).index(x)] == j
        dist[x] = K[x, x] + scores[b] + shift / W[j] - (2 * shift / W[j] if own else 0.0)
    return out, dist


@pytest.mark.parametrize("shift", [0.0, 0.1, 1.0])
def test_label_full_graph_equals_dense_brute_force(shift):
    A = random_graph(80, 0.03, seed=2)  # sparse enough that some vertices have no coreset neighbour
    rng = np.random.RandomState(0)
    idx = np.sort(rng.choice(80, 20, replace=False))
    w = rng.uniform(1, 4, 20)
    k = 4
    lab = np.arange(20) % k
    got, gd = label_full_graph(A, idx, w, lab, k, shift=shift)
    exp, ed = _brute(A, idx, w, lab, k, shift)
    Ad = A.toarray()
    assert np.any(Ad[:, idx].sum(axis=1) == 0)  # the default-cluster rule is exercised
    np.testing.assert_array_equal(got, exp)
    np.testing.assert_allclose(gd, ed, rtol=1e-10, atol=1e-14)


def test_nearest_point_labels_keeps_coreset_labels():
    A = random_graph(40, 0.1, seed=4)
    idx = np.array([1, 5, 9])
    lab = np.array([2, 0, 1])
    out = nearest_point_labels(A, idx, lab)
    np.testing.assert_array_equal(out[idx], lab)
    assert set(out) <= {0, 1, 2}


def test_isolated_vertex_gets_default_cluster():
    A = sp.csr_array(np.array([[1.0, 1, 0], [1, 1, 0], [0, 0, 1]]))
    lab, _ = label_full_graph(A, np.array([0, 1]), np.array([2.0, 2.0]), np.array([0, 1]), 2)
    assert lab[2] == 0  # equal norms: j0 = 0
