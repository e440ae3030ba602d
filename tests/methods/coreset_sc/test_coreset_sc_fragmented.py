"""A coreset graph with at least k connected components: no silent collapse into one cluster."""

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import adjusted_rand_score

from iclr25.methods.coreset_sc import CoresetSpectralClustering, sbm

FRAGMENTED = r"the (coreset )?graph has \d+ connected components"


@pytest.fixture(scope="module")
def sparse_dc_sbm():
    """A sparse degree-corrected SBM (θ log-normal, σ = 1), 20 blocks of 500, p = 0.02, q = 2/n.

    About 11 neighbours per vertex; 375 vertices of low θ have none (a graph of 377 components).
    """
    return sbm(500, 20, 0.02, 2 / 10_000, degree_corrected=True, theta_sigma=1.0, random_state=0)


def _largest_share(labels):
    return np.bincount(labels).max() / labels.size


def test_fragmented_coreset_warns_with_its_component_counts(sparse_dc_sbm):
    # Uniform sampling at ratio 0.1 keeps ≈ 1 coreset neighbour per vertex. Leaving the single coreset
    # vertices to the labelling step still leaves ≥ 20 components, which no spectral step can separate:
    # the fit must say so (before, it returned ARI 0.001 with 80 % of the vertices in one cluster).
    A, _ = sparse_dc_sbm
    est = CoresetSpectralClustering(20, coreset_ratio=0.1, sampling="uniform", random_state=0)
    with pytest.warns(UserWarning, match="the coreset graph has") as record:
        est.fit(A)
    (msg,) = [str(w.message) for w in record if "the coreset graph has" in str(w.message)]
    pattern = (
        r"has (\d+) connected components for n_clusters=20 \((\d+) single coreset vertices.*?(\d+) larger"
    )
    total, singles, larger = map(int, re.search(pattern, msg).groups())
    comp = connected_components(est.coreset_graph_, directed=False)[1]
    sizes = np.bincount(comp)
    assert total == est.coreset_n_components_ == sizes.size
    assert singles == np.count_nonzero(sizes == 1) and larger == total - singles >= 20
    assert "coreset_ratio" in msg


def test_whole_graph_with_isolated_vertices_does_not_collapse(sparse_dc_sbm):
    # Each of the graph's 375 isolated vertices is an exact eigenvector of the eigenvalue 1; the spectral
    # step used to spend its 20 eigenvectors on them and put 96 % of the vertices in one cluster (ARI 0).
    # Left out of the spectral step and labelled afterwards, they cost little: ARI 0.84–0.86 on 3 seeds.
    A, y = sparse_dc_sbm
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=FRAGMENTED, category=UserWarning)
        est = CoresetSpectralClustering(20, coreset_ratio=1.0, random_state=0).fit(A)
    assert adjusted_rand_score(y, est.labels_) >= 0.8
    assert _largest_share(est.labels_) <= 0.2
    # The paper's spectral step keeps every vertex, so the graph's 377 components are its to cluster.
    with pytest.warns(UserWarning, match="the graph has 377 connected components for n_clusters=20"):
        CoresetSpectralClustering(20, coreset_ratio=1.0, spectral_backend="power", random_state=0).fit(A)


def test_paper_step_warns_on_a_fragmented_coreset():
    A, _ = sbm(500, 20, 0.02, 2 / 10_000, random_state=0)  # ≈ 12 neighbours, no isolated vertex
    est = CoresetSpectralClustering(20, coreset_ratio=0.1, spectral_backend="power", random_state=0)
    with pytest.warns(UserWarning, match="all kept by the paper's spectral step"):
        est.fit(A)
    assert est.coreset_n_components_ >= 20


def test_whole_graph_with_more_components_than_clusters_warns():
    A = sp.block_diag([np.ones((3, 3))] * 4, format="csr")  # 4 components, 2 clusters asked for
    match = "the graph has 4 connected components with more than one vertex for n_clusters=2"
    with pytest.warns(UserWarning, match=match):
        est = CoresetSpectralClustering(2, coreset_ratio=1.0, random_state=0).fit(A)
    assert est.coreset_n_components_ == 4


def test_no_fragmentation_warning_when_components_are_the_clusters():
    # k disconnected blocks, and a coreset dense enough to keep each one connected: c = k is the exact
    # zero-cut partition, which spectral clustering recovers.
    A, y = sbm(60, 4, 0.5, 0.0, random_state=0)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=FRAGMENTED, category=UserWarning)
        est = CoresetSpectralClustering(4, coreset_ratio=0.5, random_state=0).fit(A)
        whole = CoresetSpectralClustering(4, coreset_ratio=1.0, random_state=0).fit(A)
    assert est.coreset_n_components_ == whole.coreset_n_components_ == 4
    assert adjusted_rand_score(y, est.labels_) == adjusted_rand_score(y, whole.labels_) == 1.0


def test_isolated_coreset_vertices_are_labelled_by_the_labelling_step(sparse_dc_sbm):
    A, _ = sparse_dc_sbm
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=FRAGMENTED, category=UserWarning)
        est = CoresetSpectralClustering(20, coreset_ratio=0.3, random_state=0).fit(A)
    G = est.coreset_graph_
    isolated = np.diff(G.indptr) == 1  # only the diagonal entry
    assert isolated.any()
    # Left out of the spectral step, they carry the labels the labelling step gives them.
    np.testing.assert_array_equal(est.coreset_labels_[isolated], est.labels_[est.coreset_indices_[isolated]])
