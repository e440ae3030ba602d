"""Fast spectral clustering: the power method spans eigsh's subspace; ratio = 1 is fast SC."""

import numpy as np
import scipy.sparse as sp

from iclr25.methods.coreset_sc import (
    CoresetSpectralClustering,
    degrees,
    eigsh_embedding,
    fast_spectral_clustering,
    power_method_embedding,
    sbm,
)


def _projector(Y):
    Q, _ = np.linalg.qr(Y)
    return Q @ Q.T


def test_power_method_spans_eigsh_subspace():
    A, _ = sbm(30, 4, 0.6, 0.01, random_state=0)
    U = eigsh_embedding(A, 5, random_state=0)
    # without projection, k columns converge to the top-k eigenvectors (trivial one included)
    Y = power_method_embedding(A, 4, 300, project=False, random_state=1)
    assert np.linalg.norm(_projector(Y) - _projector(U[:, :4])) < 1e-6
    # with projection, k-1 columns converge to eigenvectors 2..k
    Y = power_method_embedding(A, 3, 300, project=True, random_state=1)
    assert np.linalg.norm(_projector(Y) - _projector(U[:, 1:4])) < 1e-6


def test_projection_removes_trivial_eigenvector():
    A, _ = sbm(20, 3, 0.5, 0.05, random_state=2)
    triv = np.sqrt(degrees(A))
    Y = power_method_embedding(A, 2, 5, random_state=0)
    assert np.abs(triv @ Y).max() < 1e-9 * np.abs(Y).max() * np.linalg.norm(triv)


def test_ratio_one_takes_the_fast_sc_path():
    A, _ = sbm(40, 5, 0.5, 0.01, random_state=1)
    est = CoresetSpectralClustering(5, coreset_ratio=1.0, random_state=3).fit(A)
    np.testing.assert_array_equal(est.labels_, fast_spectral_clustering(A, 5, random_state=3))
    np.testing.assert_array_equal(est.coreset_indices_, np.arange(200))
    assert est.seeds_.size == 0 and est.n_kernel_evals_ == 0
    assert sp.linalg.norm(est.coreset_graph_ - A) == 0


def test_eigsh_backend_recovers_easy_sbm():
    A, y = sbm(40, 4, 0.5, 0.005, random_state=1)
    lab = fast_spectral_clustering(A, 4, backend="eigsh", random_state=0)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, lab) == 1.0
