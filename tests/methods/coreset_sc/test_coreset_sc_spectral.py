"""Fast spectral clustering: the power method spans eigsh's subspace; ratio = 1 is fast SC."""

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg  # noqa: F401  (sp.linalg.eigsh)
from sklearn.metrics import adjusted_rand_score

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
    for backend, inner, unit_rows in (
        ("power", "power", False),
        ("power_normalized", "power", True),
        ("eigsh", "eigsh", True),
    ):
        est = CoresetSpectralClustering(5, coreset_ratio=1.0, spectral_backend=backend, random_state=3).fit(A)
        expected = fast_spectral_clustering(A, 5, backend=inner, normalize_rows=unit_rows, random_state=3)
        np.testing.assert_array_equal(est.labels_, expected)
    np.testing.assert_array_equal(est.coreset_indices_, np.arange(200))
    assert est.seeds_.size == 0 and est.n_kernel_evals_ == 0
    assert sp.linalg.norm(est.coreset_graph_ - A) == 0


def test_eigsh_backend_recovers_easy_sbm():
    A, y = sbm(40, 4, 0.5, 0.005, random_state=1)
    lab = fast_spectral_clustering(A, 4, backend="eigsh", random_state=0)
    assert adjusted_rand_score(y, lab) == 1.0


def _components_graph():
    """Ten disconnected blocks plus one component of four weakly linked blocks (14 clusters)."""
    A, y = sbm(20, 10, 0.5, 0.0, random_state=0)
    B, yb = sbm(20, 4, 0.5, 0.01, random_state=1)
    return sp.csr_array(sp.block_diag([A, B])), np.r_[y, yb + 10]


def test_eigsh_embedding_is_exact_on_a_disconnected_graph():
    # The eigenvalue 1 has 11 copies (one per component); the next three belong to the linked blocks.
    A, y = _components_graph()
    d = degrees(A)
    N = A.toarray() / np.sqrt(np.outer(d, d))
    vals, vecs = np.linalg.eigh(N)
    assert np.allclose(np.sort(vals)[::-1][:11], 1.0) and np.sort(vals)[::-1][14] < 0.7
    top = vecs[:, np.argsort(-vals)[:14]]
    U = eigsh_embedding(A, 14, random_state=0)
    np.testing.assert_allclose(U.T @ U, np.eye(14), atol=1e-10)
    assert np.linalg.norm(_projector(U) - _projector(top)) < 1e-8
    # One Lanczos run on N (the former backend) misses copies of the repeated eigenvalue.
    _, V = sp.linalg.eigsh(sp.csr_array(N), k=14, which="LA", v0=np.random.RandomState(0).uniform(-1, 1, 280))
    assert np.linalg.norm(_projector(V) - _projector(top)) > 0.5
    assert adjusted_rand_score(y, fast_spectral_clustering(A, 14, backend="eigsh", random_state=0)) == 1.0


def test_eigsh_embedding_with_more_components_than_vectors():
    A, _ = _components_graph()
    U = eigsh_embedding(A, 5, random_state=0)
    # the five largest-volume components, each as D^{1/2}1_S/‖·‖: unit columns with disjoint support
    np.testing.assert_allclose(U.T @ U, np.eye(5), atol=1e-12)
    assert np.all((U > 0).sum(axis=1) <= 1)


def test_default_backend_matches_eigsh_at_ratio_one():
    # A noisy SBM (half of each vertex's edges leave its block): the O(log k)-vector power method
    # gives ARI 0.39–0.49 here; the default ("auto") resolves to eigsh at this size.
    A, y = sbm(100, 20, 0.1, 0.005, random_state=0)
    default = CoresetSpectralClustering(20, coreset_ratio=1.0, random_state=0).fit(A)
    eig = CoresetSpectralClustering(20, coreset_ratio=1.0, spectral_backend="eigsh", random_state=0).fit(A)
    assert default.spectral_backend_ == "eigsh"
    ari_default, ari_eig = adjusted_rand_score(y, default.labels_), adjusted_rand_score(y, eig.labels_)
    assert abs(ari_default - ari_eig) <= 0.02 and ari_default >= 0.9
