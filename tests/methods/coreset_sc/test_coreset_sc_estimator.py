"""The scikit-learn estimator: inputs, errors, determinism, clone, estimator checks, loaders."""

import math
import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.cluster import MiniBatchKMeans, SpectralClustering
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from iclr25.methods.coreset_sc import (
    CoresetKernelKMeans,
    CoresetSpectralClustering,
    degrees,
    from_networkx,
    load_graph,
    sbm,
)
from iclr25.methods.coreset_sc.estimator import auto_n_neighbors

# kNN graphs of random features give an indefinite kernel; the estimator says so on purpose
# (tested in test_coreset_sc_sampling.py), and sklearn's generic checks would repeat it dozens of times.
pytestmark = pytest.mark.filterwarnings("ignore:negative squared kernel distances:UserWarning")


@pytest.fixture(scope="module")
def easy():
    return sbm(60, 5, 0.5, 0.003, random_state=0)


def test_fitted_attributes_and_quality(easy):
    A, y = easy
    est = CoresetSpectralClustering(5, coreset_ratio=0.4, random_state=0).fit(A)
    assert adjusted_rand_score(y, est.labels_) > 0.9
    m = est.coreset_indices_.size
    assert est.coreset_weights_.shape == (m,) and est.coreset_labels_.shape == (m,)
    assert est.coreset_graph_.shape == (m, m)
    assert est.seeds_.size == 11 and est.seeds_[0] == np.argmin(A.diagonal() / degrees(A) ** 2)
    assert est.closest_cluster_distance_.shape == (300,)
    np.testing.assert_array_equal(est.degrees_, degrees(A))
    assert est.n_kernel_evals_ == 300 + sum(A.indptr[c + 1] - A.indptr[c] - 1 for c in est.seeds_)
    cond = est.compute_conductances()
    assert cond.shape == (5,) and np.all((cond >= 0) & (cond <= 1))


def test_input_types_give_identical_labels(easy):
    A, _ = easy
    ref = CoresetSpectralClustering(5, coreset_ratio=0.4, random_state=1).fit_predict(A)
    for X in (
        sp.csr_matrix(A),
        sp.csr_array(A),
        sp.coo_array(A),
        sp.coo_matrix(A),
        A.toarray(),
        nx.from_scipy_sparse_array(A),
    ):
        lab = CoresetSpectralClustering(5, coreset_ratio=0.4, random_state=1).fit_predict(X)
        np.testing.assert_array_equal(lab, ref)


@pytest.mark.parametrize(
    "backends", [("numpy", "numpy"), pytest.param(("numpy", "numba"), marks=pytest.mark.slow)]
)
def test_determinism_and_backends(easy, backends):
    A, _ = easy
    if "numba" in backends and not _has_numba():
        pytest.skip("numba not installed")
    runs = [
        CoresetSpectralClustering(5, coreset_ratio=0.3, random_state=42, backend=b).fit(A) for b in backends
    ]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.labels_, runs[0].labels_)
        np.testing.assert_array_equal(r.coreset_indices_, runs[0].coreset_indices_)
        np.testing.assert_array_equal(r.coreset_weights_, runs[0].coreset_weights_)
    other = CoresetSpectralClustering(5, coreset_ratio=0.3, random_state=43).fit(A)
    assert not np.array_equal(other.coreset_indices_, runs[0].coreset_indices_)


def _has_numba():
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def test_custom_kmeans_is_seeded(easy):
    A, _ = easy
    km = MiniBatchKMeans(n_clusters=2, n_init=3)
    a = CoresetSpectralClustering(5, coreset_ratio=0.4, kmeans=km, random_state=0).fit_predict(A)
    b = CoresetSpectralClustering(5, coreset_ratio=0.4, kmeans=km, random_state=0).fit_predict(A)
    np.testing.assert_array_equal(a, b)
    assert km.n_clusters == 2  # the user's estimator is cloned, not modified


def test_clone_round_trips():
    est = CoresetSpectralClustering(7, coreset_ratio=0.05, shift=1.0, sampling="uniform", random_state=3)
    assert clone(est).get_params() == est.get_params()
    assert (
        CoresetSpectralClustering(n_clusters=3.5).get_params()["n_clusters"] == 3.5
    )  # __init__ does not validate


def test_ckkm_shares_the_coreset(easy):
    A, _ = easy
    a = CoresetSpectralClustering(5, coreset_ratio=0.3, random_state=9).fit(A)
    b = CoresetKernelKMeans(5, coreset_ratio=0.3, random_state=9).fit(A)
    np.testing.assert_array_equal(a.coreset_indices_, b.coreset_indices_)
    np.testing.assert_array_equal(a.coreset_weights_, b.coreset_weights_)


@pytest.mark.parametrize(
    ("X", "kw", "match"),
    [
        (np.array([[1.0, 1.0], [0.0, 1.0]]), {}, "symmetric"),
        (np.ones((3, 4)), {}, "square"),
        (np.array([[1.0, -1.0], [-1.0, 1.0]]), {}, "negative"),
        (np.array([[0.0, 1.0], [1.0, 0.0]]), {}, "setdiag"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), {}, "NaN"),
        (sp.csr_array((4, 4)), {}, "empty"),
        (np.eye(3), {"n_clusters": 4}, "exceeds"),
        (np.eye(3), {"n_clusters": 2, "oversampling": 2.0}, "k'"),
        (np.eye(3), {"n_clusters": 1, "coreset_ratio": 0.0}, "coreset_ratio"),
        (np.eye(3), {"n_clusters": 1, "coreset_ratio": 1.5}, "coreset_ratio"),
        (np.eye(3), {"n_clusters": 1, "sampling": "bogus"}, "sampling"),
    ],
)
def test_bad_input_errors(X, kw, match):
    params = {"n_clusters": 1, "coreset_ratio": 0.5, **kw}
    with pytest.raises(ValueError, match=match):
        CoresetSpectralClustering(**params).fit(X)


def test_self_loops_add_mode():
    A = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    est = CoresetSpectralClustering(1, coreset_ratio=1.0, self_loops="add", random_state=0).fit(A)
    np.testing.assert_array_equal(est.affinity_matrix_.diagonal(), np.ones(3))


def test_feature_input_nearest_neighbors():
    rng = np.random.RandomState(0)
    X = np.vstack([rng.normal(c, 0.2, size=(40, 2)) for c in ((0, 0), (5, 5), (0, 5))])
    y = np.repeat([0, 1, 2], 40)
    est = CoresetSpectralClustering(
        3, coreset_ratio=0.5, affinity="nearest_neighbors", n_neighbors=30, random_state=0
    )
    assert adjusted_rand_score(y, est.fit_predict(X)) == 1.0
    assert est.n_features_in_ == 2


@pytest.mark.filterwarnings("ignore:Graph is not fully connected:UserWarning")  # sklearn's reference
def test_make_blobs_nearest_neighbors_first_try_clusters():
    # The first try: blobs, a kNN graph, ratio 0.3. With sklearn's fixed n_neighbors=10 the coreset keeps
    # ≈ 3 neighbours per vertex, its graph falls into dozens of components and ARI was 0.01–0.2.
    X, y = make_blobs(n_samples=1000, centers=5, random_state=0)
    sk_labels = SpectralClustering(5, affinity="nearest_neighbors", random_state=0).fit_predict(X)
    sk = adjusted_rand_score(y, sk_labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the density warning must not fire
        aris = [
            adjusted_rand_score(
                y,
                CoresetSpectralClustering(5, coreset_ratio=0.3, affinity="nearest_neighbors", random_state=r)
                .fit(X)
                .labels_,
            )
            for r in range(3)
        ]
    assert np.median(aris) >= sk - 0.1  # sklearn on the whole graph: 0.885; ours 0.76–0.84
    with pytest.warns(UserWarning, match="n_neighbors=None"):
        old = CoresetSpectralClustering(
            5, coreset_ratio=0.3, affinity="nearest_neighbors", n_neighbors=10, random_state=0
        ).fit_predict(X)
    assert adjusted_rand_score(y, old) < 0.3


def test_auto_n_neighbors():
    X = np.random.RandomState(0).normal(size=(200, 2))
    est = CoresetSpectralClustering(2, coreset_ratio=0.2, affinity="nearest_neighbors", random_state=0).fit(X)
    assert est.n_neighbors_ == auto_n_neighbors(200, 0.2) == 41  # ⌈8/0.2⌉ + 1
    assert auto_n_neighbors(200, 0.2, coreset_size=100) == 17
    assert auto_n_neighbors(200, 1.0) == 10 and auto_n_neighbors(20, 0.01) == 19
    est = CoresetSpectralClustering(2, coreset_ratio=0.2, affinity="nearest_neighbors", n_neighbors=5)
    assert est.fit(X).n_neighbors_ == 5
    with pytest.raises(ValueError, match="n_neighbors"):
        CoresetSpectralClustering(2, affinity="nearest_neighbors", n_neighbors=0).fit(X)


@parametrize_with_checks(
    [
        CoresetSpectralClustering(
            n_clusters=3, coreset_ratio=0.5, affinity="nearest_neighbors", random_state=0
        )
    ],
    expected_failed_checks=lambda est: {},
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# With a precomputed graph the estimator validates X as an adjacency (square, symmetric, non-negative,
# positive diagonal); these checks feed feature matrices or random sparse matrices instead.
_PRECOMPUTED_FAILS = {
    "check_clustering": "feeds a (50, 2) feature matrix; a precomputed graph must be square",
    "check_fit2d_1sample": "feeds a 1×10 matrix; the 'not square' error names no sample count",
}
_NO_DIAGONAL = "random sparse matrices have empty diagonals: self_loops='require' raises"
_REQUIRE_FAILS = {
    **_PRECOMPUTED_FAILS,
    "check_estimator_sparse_array": _NO_DIAGONAL,
    "check_estimator_sparse_matrix": _NO_DIAGONAL,
    "check_estimator_sparse_tag": _NO_DIAGONAL,
    "check_fit2d_1feature": "a 10×1 matrix is read as a graph with one vertex and no self-loop",
}


@parametrize_with_checks(
    [
        CoresetSpectralClustering(n_clusters=3, coreset_ratio=0.5, random_state=0),
        CoresetSpectralClustering(n_clusters=3, coreset_ratio=0.5, self_loops="add", random_state=0),
    ],
    expected_failed_checks=lambda est: _REQUIRE_FAILS if est.self_loops == "require" else _PRECOMPUTED_FAILS,
)
def test_sklearn_estimator_checks_precomputed(estimator, check):
    check(estimator)


def test_loaders_and_networkx(tmp_path):
    (tmp_path / "g.txt").write_text("# comment\n10 20\n20 30\n30 10\n")
    A = load_graph(tmp_path / "g.txt")
    assert A.shape == (3, 3) and A.nnz == 9
    (tmp_path / "g.csv").write_text("0,1,2.5\n1,2,1.0\n")
    B = load_graph(tmp_path / "g.csv")
    assert B[0, 1] == B[1, 0] == 2.5
    sp.save_npz(tmp_path / "g.npz", sp.csr_matrix(A))
    np.testing.assert_array_equal(load_graph(tmp_path / "g.npz").toarray(), A.toarray())
    from scipy.io import mmwrite

    mmwrite(tmp_path / "g.mtx", sp.coo_matrix(B))
    np.testing.assert_allclose(load_graph(tmp_path / "g.mtx").toarray(), B.toarray())
    with pytest.raises(FileNotFoundError):
        load_graph(tmp_path / "missing.txt")
    G = nx.path_graph(4)
    assert from_networkx(G).shape == (4, 4)
    with pytest.raises(ValueError, match="setdiag"):
        CoresetSpectralClustering(1, coreset_ratio=1.0).fit(G)


def test_sbm_generator_properties():
    A, y = sbm(50, 4, 0.5, 0.01, random_state=0)
    assert (A - A.T).nnz == 0 and np.all(A.diagonal() == 1) and set(A.data) == {1.0}
    intra = np.mean([A[y == j][:, y == j].sum() - 50 for j in range(4)]) / (50 * 49)
    assert abs(intra - (1 - math.exp(-0.5))) < 0.05  # deduplicated endpoint draws
    B, _ = sbm(50, 4, 0.5, 0.01, random_state=0, degree_corrected=True)
    assert (B - B.T).nnz == 0 and np.all(B.diagonal() == 1)
    d = degrees(B)
    assert d.std() / d.mean() > degrees(A).std() / degrees(A).mean()


def test_reference_wheel_agrees_on_easy_sbm():
    pytest.importorskip("coreset_sc")
    from iclr25.methods.coreset_sc import reference_coreset_sc

    A, y = sbm(200, 10, 0.5, 1 / 2000, random_state=0)
    ours = adjusted_rand_score(
        y, CoresetSpectralClustering(10, coreset_ratio=0.1, random_state=0).fit_predict(A)
    )
    theirs = adjusted_rand_score(y, reference_coreset_sc(A, 10, coreset_ratio=0.1))
    assert ours >= theirs - 0.05
