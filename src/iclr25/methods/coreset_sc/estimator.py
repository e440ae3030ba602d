"""``CoresetSpectralClustering``: the scikit-learn estimator of coreset spectral clustering.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. Implements the full algorithm of Sec. 4: sparse D² seeding in the kernel
space (with the reference seed x*), sensitivity sampling with merged duplicates, the reweighted coreset
graph ``W_C K[C,C] W_C``, fast spectral clustering of that graph (Macgregor 2023), and the labelling of
every vertex by its nearest kernel-space coreset centre with the default-cluster rule.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.neighbors import kneighbors_graph
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from iclr25.methods.coreset_sc.graphs import from_networkx
from iclr25.methods.coreset_sc.kernel import check_adjacency, conductances, degrees, self_affinities
from iclr25.methods.coreset_sc.labelling import label_full_graph
from iclr25.methods.coreset_sc.sampling import SeedingResult, _sparse_seeding, coreset_graph, sample_coreset
from iclr25.methods.coreset_sc.spectral import fast_spectral_clustering

__all__ = ["CoresetSpectralClustering"]

_SAMPLINGS = ("smoothed", "sensitivity", "uniform", "degree")
_SPECTRAL_BACKENDS = ("power", "power_normalized", "eigsh")
_NUMBA_MIN_N = 200_000
# spectral_backend="auto": eigsh while |C|·k² is at most this, the power method with unit rows above it.
# The k-means on the k-dimensional eigsh embedding dominates (|C|·k² per Lloyd step): on 2 shared cores
# it took 4.7 s for |C| = 1900, k = 100 (|C|·k² ≈ 1.9·10⁷) against 0.6 s for eigsh itself.
_EIGSH_MAX_WORK = 10_000_000
# The density rule of the README: coreset_ratio × intra-cluster degree ≳ 8 coreset neighbours per vertex.
_MIN_CORESET_NEIGHBOURS = 8.0


def resolve_spectral_backend(backend: str, n: int, n_clusters: int) -> str:
    """The spectral backend to use for a graph of ``n`` vertices and ``n_clusters`` clusters.

    Args:
        backend: ``"auto"``, ``"power"``, ``"power_normalized"`` or ``"eigsh"``.
        n: vertices of the graph that is clustered spectrally (the coreset graph, or G at ratio 1).
        n_clusters: k.

    Returns:
        The backend; ``"auto"`` picks ``"eigsh"`` when ``n·k² ≤ 10⁷`` (cheap there, and exact where the
        O(log k)-vector power method loses accuracy on noisy graphs), else ``"power_normalized"``.

    Raises:
        ValueError: unknown backend.

    Example:
        >>> resolve_spectral_backend("auto", 1000, 10), resolve_spectral_backend("auto", 10**6, 100)
        ('eigsh', 'power_normalized')
    """
    if backend not in ("auto", *_SPECTRAL_BACKENDS):
        raise ValueError(f"spectral_backend must be 'auto' or one of {_SPECTRAL_BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "eigsh" if n * n_clusters**2 <= _EIGSH_MAX_WORK else "power_normalized"
    return backend


def _warn_if_sparse_coreset(A: sp.csr_array, m: int, *, knn: bool = False) -> None:
    """Warn when ``m/n × (mean neighbours per vertex) < 8``, the README's coreset density rule.

    The neighbour count includes inter-cluster edges, so it bounds the intra-cluster degree from
    above: the warning fires only where the rule certainly fails.
    """
    n = A.shape[0]
    n_neighbours = (A.nnz - int(np.count_nonzero(A.diagonal()))) / n
    expected = m / n * n_neighbours
    if expected < _MIN_CORESET_NEIGHBOURS:
        need = min(1.0, _MIN_CORESET_NEIGHBOURS / max(n_neighbours, 1e-12))
        warnings.warn(
            f"the coreset is too sparse to label the graph reliably: {m} draws for {n} vertices with "
            f"{n_neighbours:.1f} neighbours on average give {expected:.2f} expected coreset neighbours per "
            f"vertex (< {_MIN_CORESET_NEIGHBOURS:g}; rule: coreset_ratio × intra-cluster degree ≳ 8). "
            f"Use coreset_ratio ≥ {need:.3g}, or more if clusters have many outside edges"
            + (
                "; or leave n_neighbors=None, which builds a kNN graph dense enough for the coreset"
                if knn
                else ""
            ),
            UserWarning,
            stacklevel=3,
        )


def _isolated_vertices(G: sp.csr_array) -> np.ndarray:
    """Vertices whose only entry in ``G`` is their diagonal (no neighbour), as a boolean mask (n,)."""
    return np.diff(G.indptr) - (G.diagonal() != 0) == 0


def _warn_if_fragmented(
    A: sp.csr_array,
    G: sp.csr_array,
    n_clusters: int,
    *,
    n_left_out: int,
    drops_isolated: bool,
    coreset: bool,
    knn: bool = False,
) -> int:
    """Count the connected components of the graph that is clustered spectrally; warn at ≥ k of them.

    A graph with c components has c zero-cut groups of vertices, so with ``c ≥ k`` every grouping of
    whole components into k clusters has normalised cut 0 and the spectral step cannot tell them
    apart: a component is an exact eigenvector of the eigenvalue 1, its vertices share one point of the
    embedding (up to scale), and k-means merges many components, often most of the graph, into one
    cluster. On a coreset graph this comes from a coreset too small for the graph's degree (a larger
    ratio fixes it); when the graph itself has more than k such components, no coreset can fix it.
    The one harmless case is c = k equal to the graph's own count: the components are then the zero-cut
    partition into k clusters, which spectral clustering returns.

    Args:
        A: the validated graph, shape (n, n).
        G: the graph clustered spectrally: the coreset graph (or the whole graph at ratio 1) without
            the ``n_left_out`` isolated vertices that the labelling step labels instead.
        n_clusters: k.
        n_left_out: isolated vertices left out of ``G`` (0 with the paper's spectral step).
        drops_isolated: whether the spectral step leaves isolated vertices out (all but the paper's).
        coreset: whether ``G`` comes from a coreset graph (else from the whole graph).
        knn: whether ``A`` is a kNN graph built by the estimator (the fix then names ``n_neighbors``).

    Returns:
        The number of connected components of the coreset graph (``G`` and the left-out vertices).
    """
    n_comp, comp = connected_components(G, directed=False)
    total = int(n_comp) + n_left_out
    if n_clusters < 2 or n_comp < n_clusters:
        return total
    # The graph's own components, counted as the spectral step counts them (only on this rare path).
    n_graph, comp_graph = connected_components(A, directed=False)
    if drops_isolated:
        n_graph = int(np.count_nonzero(np.bincount(comp_graph) > 1))
    if n_graph > n_clusters:
        warnings.warn(
            f"the graph has {n_graph} connected components "
            + ("with more than one vertex " if drops_isolated else "")
            + f"for n_clusters={n_clusters}: every grouping of whole components into clusters has zero "
            "normalised cut, so spectral clustering returns unions of components and may merge most of "
            "the graph into one cluster. Cluster its components separately, or ask for at least as many "
            "clusters as components"
            + (
                ""
                if drops_isolated
                else "; the default spectral_backend leaves vertices without neighbours out of the "
                "spectral step and labels them afterwards"
            ),
            UserWarning,
            stacklevel=3,
        )
    elif coreset and not (n_comp == n_clusters == n_graph):
        if drops_isolated:
            parts = (
                f"{n_left_out} single coreset vertices, which the labelling step labels, and {n_comp} "
                "larger ones, too many for the spectral step"
            )
        else:
            singles = int(np.count_nonzero(np.bincount(comp) == 1))
            parts = f"{singles} of them single coreset vertices, all kept by the paper's spectral step"
        warnings.warn(
            f"the coreset graph has {total} connected components for n_clusters={n_clusters} ({parts}): "
            "every grouping of whole components has zero normalised cut, so spectral clustering cannot "
            "separate the clusters and may merge most of the graph into one cluster. Use a larger "
            "coreset_ratio (rule: coreset_ratio × intra-cluster degree ≳ 8)"
            + ("; or more n_neighbors (n_neighbors=None picks enough for the coreset)" if knn else ""),
            UserWarning,
            stacklevel=3,
        )
    return total


def auto_n_neighbors(n: int, coreset_ratio: float, coreset_size: int | None = None) -> int:
    """The kNN graph's ``n_neighbors`` for ``n_neighbors=None``: enough neighbours for the coreset.

    A coreset of m draws keeps about ``m/n × n_neighbors`` coreset neighbours per vertex of a kNN graph,
    and the density rule asks for ≳ 8, so ``n_neighbors = max(10, ⌈8n/m⌉ + 1)`` (the + 1 because
    ``kneighbors_graph(include_self=True)`` counts the vertex itself), at most ``n − 1``.

    Args:
        n: number of samples.
        coreset_ratio: m/n.
        coreset_size: m, overrides ``coreset_ratio`` when given.

    Returns:
        The number of neighbours, in ``[1, max(n − 1, 1)]``.

    Example:
        >>> auto_n_neighbors(1000, 0.3), auto_n_neighbors(1000, 1.0), auto_n_neighbors(50, 0.01)
        (28, 10, 49)
    """
    m = coreset_size if coreset_size is not None else math.floor(float(coreset_ratio) * n)
    want = 10 if m >= n else max(10, math.ceil(_MIN_CORESET_NEIGHBOURS * n / max(m, 1)) + 1)
    return max(1, min(want, n - 1))


def _is_networkx(X: Any) -> bool:
    return type(X).__module__.startswith("networkx")


def _numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass
class _Coreset:
    seeding: SeedingResult | None
    indices: np.ndarray
    weights: np.ndarray
    graph: sp.csr_array


class _CoresetMixin:
    """Input handling and coreset construction shared by the estimator and the kernel k-means baseline."""

    def _graph_from_input(self, X: Any) -> sp.csr_array:
        affinity = getattr(self, "affinity", "precomputed")
        if affinity == "nearest_neighbors":
            X = validate_data(
                self, X, accept_sparse=["csr", "csc", "coo"], dtype=np.float64, ensure_min_samples=2
            )
            n_neighbors = self.n_neighbors
            if n_neighbors is None:
                ratio, size = self.coreset_ratio, self.coreset_size
                valid = isinstance(ratio, numbers.Real) and 0.0 < float(ratio) <= 1.0
                valid &= size is None or (isinstance(size, numbers.Integral) and size >= 1)
                # Invalid sizes are reported by _check_common; build the graph with sklearn's 10 here.
                n_neighbors = auto_n_neighbors(X.shape[0], float(ratio), size) if valid else 10
            elif (
                not isinstance(n_neighbors, numbers.Integral)
                or isinstance(n_neighbors, bool)
                or n_neighbors < 1
            ):
                raise ValueError(f"n_neighbors must be a positive integer or None, got {n_neighbors!r}")
            self.n_neighbors_ = min(int(n_neighbors), X.shape[0] - 1) or 1
            # As sklearn's SpectralClustering: symmetrised kNN connectivity with self included.
            C = kneighbors_graph(X, n_neighbors=self.n_neighbors_, include_self=True)
            A = check_adjacency(0.5 * (C + C.T), self_loops="require")
        elif affinity == "precomputed":
            if _is_networkx(X):
                A = from_networkx(X)
            else:
                if not sp.issparse(X):
                    X = validate_data(self, X, dtype=np.float64, ensure_min_samples=1)
                elif X.ndim == 2:
                    self.n_features_in_ = X.shape[1]
                A = X
            A = check_adjacency(A, self_loops=self.self_loops)
            self.n_features_in_ = A.shape[0]
        else:
            raise ValueError(f"affinity must be 'precomputed' or 'nearest_neighbors', got {affinity!r}")
        return A

    def _check_common(self, n: int) -> tuple[int, int, int | None]:
        k = self.n_clusters
        if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 1:
            raise ValueError(f"n_clusters must be a positive integer, got {k!r}")
        if k > n:
            raise ValueError(f"n_clusters={k} exceeds the number of vertices n={n}")
        ratio = self.coreset_ratio
        if not isinstance(ratio, numbers.Real) or not 0.0 < float(ratio) <= 1.0:
            raise ValueError(f"coreset_ratio must be in (0, 1], got {ratio!r}")
        if self.coreset_size is not None and (
            not isinstance(self.coreset_size, numbers.Integral) or self.coreset_size < 1
        ):
            raise ValueError(f"coreset_size must be a positive integer or None, got {self.coreset_size!r}")
        if not isinstance(self.oversampling, numbers.Real) or self.oversampling <= 0:
            raise ValueError(f"oversampling must be positive, got {self.oversampling!r}")
        if not isinstance(self.shift, numbers.Real) or not math.isfinite(self.shift) or self.shift < 0:
            raise ValueError(f"shift must be a finite non-negative number, got {self.shift!r}")
        if self.sampling not in _SAMPLINGS:
            raise ValueError(f"sampling must be one of {_SAMPLINGS}, got {self.sampling!r}")
        k_prime = max(1, math.floor(k * self.oversampling))
        if k_prime > n:
            raise ValueError(
                f"k' = floor(n_clusters * oversampling) = {k_prime} exceeds n={n}; "
                "lower oversampling or n_clusters"
            )
        m = self.coreset_size if self.coreset_size is not None else math.floor(float(ratio) * n)
        return int(k), k_prime, (None if (float(ratio) == 1.0 and self.coreset_size is None) else int(m))

    def _build_coreset(
        self,
        A: sp.csr_array,
        d: np.ndarray,
        s: np.ndarray,
        k: int,
        k_prime: int,
        m: int,
        rng: np.random.RandomState,
    ) -> _Coreset:
        backend = getattr(self, "backend", "auto")
        # "auto" compiles only where the loop dominates (compilation costs about a second).
        if backend == "numba" or (backend == "auto" and A.shape[0] >= _NUMBA_MIN_N and _numba_available()):
            from iclr25.methods.coreset_sc._numba import numba_sparse_seeding

            seeding = numba_sparse_seeding(A, d, s, k_prime, rng)
        elif backend in ("numpy", "auto"):
            seeding = _sparse_seeding(A, d, s, k_prime, rng)
        else:
            raise ValueError(f"backend must be 'auto', 'numpy' or 'numba', got {backend!r}")
        idx, w = sample_coreset(d, seeding, m, sampling=self.sampling, random_state=rng)
        if idx.size < k:
            raise ValueError(
                f"the coreset has {idx.size} distinct vertices, fewer than n_clusters={k}; "
                "increase coreset_ratio or coreset_size"
            )
        return _Coreset(seeding, idx, w, coreset_graph(A, idx, w, shift=float(self.shift), degrees_=d))

    def _store(self, A: sp.csr_array, d: np.ndarray, core: _Coreset, coreset_labels: np.ndarray) -> None:
        self.affinity_matrix_ = A
        self.degrees_ = d
        self.coreset_indices_ = core.indices
        self.coreset_weights_ = core.weights
        self.coreset_graph_ = core.graph
        self.coreset_labels_ = np.asarray(coreset_labels, dtype=np.int64)
        self.seeds_ = core.seeding.seeds if core.seeding is not None else np.empty(0, dtype=np.int64)
        self.n_kernel_evals_ = core.seeding.n_evals if core.seeding is not None else 0

    def compute_conductances(self) -> np.ndarray:
        """Conductance ``1 − w(S_j,S_j)/vol(S_j)`` of each found cluster on the fitted graph.

        Returns:
            float64 array, one entry per distinct label of ``labels_``.
        """
        check_is_fitted(self, "labels_")
        return conductances(self.affinity_matrix_, self.labels_)


class CoresetSpectralClustering(_CoresetMixin, ClusterMixin, BaseEstimator):
    """Coreset spectral clustering (CSC) of a graph, or of features through a kNN graph.

    Normalised-cut clustering of a large sparse graph by spectral clustering of a small weighted coreset
    graph, then labelling every vertex through kernel-space centres.

    Args:
        n_clusters: k.
        coreset_ratio: m/n, the number of coreset draws as a fraction of n, in (0, 1]. ``1.0`` (with
            ``coreset_size=None``) runs fast spectral clustering on the whole graph.
        coreset_size: m, overrides ``coreset_ratio`` when given.
        oversampling: k'/k, the number of D² seeds per cluster.
        shift: σ in ``K = D⁻¹AD⁻¹ + σD⁻¹``. σ = 1 makes K positive semi-definite, which keeps the
            seeding distances non-negative (with σ = 0 negative ones are clipped to 0 with a warning).
            σ does not change the labelling rule (it adds the same cost to every choice), but it puts
            ``σ w_a²/d_a`` on the diagonal of the coreset graph, which flattens its spectrum: on
            ``sbm(200, 10, 0.5, 1/2000)`` at ratio 0.1, median ARI over 5 seeds is 0.99, 1.0 and 0.50
            at σ = 0, 0.1 and 1 with ``spectral_backend="power"`` (the official code: 0.99, 0.86,
            0.52), and 1.0, 1.0 and 0.999 with the default backend.
        sampling: coreset distribution: ``"smoothed"``, ``"sensitivity"``, ``"uniform"`` or ``"degree"``.
        spectral_backend: ``"auto"`` (``"eigsh"`` while |C|·k² ≤ 10⁷, else ``"power_normalized"``),
            ``"power"`` (the paper's fast SC: O(log k) vectors, k-means on the raw rows; 7 columns at
            k = 100), ``"power_normalized"`` (the same vectors, rows scaled to unit length before
            k-means) or ``"eigsh"`` (exact top-k eigenvectors, rows normalised; k-means on k columns).
            Raw power-method rows lie on rays whose length follows the coreset degree, and k-means cuts
            rays: on the claim's SBM at ratio 0.1 ``"power"`` gives ARI 0.89–0.96 where unit rows give
            0.99–1.0. The power method also loses accuracy on noisy graphs: at ``coreset_ratio=1.0`` on
            ``sbm(100, 20, 0.1, 0.005)`` it gives ARI 0.39–0.49 (0.46–0.58 with unit rows) where
            ``"eigsh"`` gives 0.99 (as sklearn's ``SpectralClustering``), and on kNN graphs of
            features, where the gap below the k-th eigenvalue is small. All but ``"power"`` leave
            coreset vertices without a coreset neighbour (components of one vertex) out of the
            spectral step and label them with the labelling step; ``"power"`` clusters them all, as
            the paper does.
        kmeans: k-means estimator to clone for the embedding (default ``KMeans(n_clusters, n_init=10)``).
        self_loops: ``"require"`` (raise when a diagonal entry is ≤ 0) or ``"add"`` (set a unit diagonal).
        affinity: ``"precomputed"`` (X is an adjacency or networkx graph) or ``"nearest_neighbors"``.
        n_neighbors: k of the kNN graph for ``affinity="nearest_neighbors"``; ``None`` (default) picks
            ``max(10, ⌈8n/m⌉ + 1)`` for m coreset draws, so that the coreset keeps ≈ 8 neighbours of
            every vertex (see :func:`auto_n_neighbors`). sklearn's fixed 10 suits the whole graph, not a
            coreset: at ratio 0.3 it leaves 3 coreset neighbours per vertex and the coreset graph falls
            apart into dozens of components (ARI ≈ 0.01–0.3 on ``make_blobs``).
        backend: seeding loops: ``"auto"`` (numba when installed and n ≥ 2·10⁵), ``"numpy"`` or ``"numba"``;
            identical output.
        random_state: seeds every random step (seeding, sampling, Gaussian vectors, k-means).

    Attributes:
        labels_: cluster of every vertex, shape (n,).
        coreset_indices_: coreset vertices, shape (|C|,).
        coreset_weights_: their merged weights, shape (|C|,).
        coreset_labels_: their clusters, shape (|C|,).
        coreset_graph_: ``W_C K[C,C] W_C``, shape (|C|, |C|).
        seeds_: D² seeds, ``x*`` first, shape (k'+1,).
        closest_cluster_distance_: squared kernel distance to the assigned centre, shape (n,).
        degrees_: vertex degrees, shape (n,).
        n_kernel_evals_: kernel-distance evaluations during seeding.
        coreset_n_components_: connected components of ``coreset_graph_``; at ``n_clusters`` or more
            the fit warns (the spectral step cannot separate clusters; see the README).
        spectral_backend_: the spectral backend used (``"auto"`` resolved).
        n_neighbors_: neighbours of the kNN graph (``affinity="nearest_neighbors"`` only).
        affinity_matrix_: the validated adjacency.

    References:
        Jourdan, Schwartzman, Macgregor, Sun. Coreset Spectral Clustering. ICLR 2025 (arXiv 2503.07227).

    Example:
        >>> from iclr25.methods.coreset_sc import CoresetSpectralClustering, sbm
        >>> A, y = sbm(50, 4, 0.5, 0.005, random_state=0)
        >>> csc = CoresetSpectralClustering(4, coreset_ratio=0.5, random_state=0).fit(A)
        >>> csc.labels_.shape
        (200,)
    """

    def __init__(
        self,
        n_clusters: int = 8,
        *,
        coreset_ratio: float = 0.01,
        coreset_size: int | None = None,
        oversampling: float = 2.0,
        shift: float = 0.0,
        sampling: str = "smoothed",
        spectral_backend: str = "auto",
        kmeans: Any = None,
        self_loops: str = "require",
        affinity: str = "precomputed",
        n_neighbors: int | None = None,
        backend: str = "auto",
        random_state: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.coreset_ratio = coreset_ratio
        self.coreset_size = coreset_size
        self.oversampling = oversampling
        self.shift = shift
        self.sampling = sampling
        self.spectral_backend = spectral_backend
        self.kmeans = kmeans
        self.self_loops = self_loops
        self.affinity = affinity
        self.n_neighbors = n_neighbors
        self.backend = backend
        self.random_state = random_state

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.affinity == "precomputed"
        # A precomputed graph has non-negative weights (negative ones raise ValueError).
        tags.input_tags.positive_only = self.affinity == "precomputed"
        tags.input_tags.sparse = True
        return tags

    def fit(self, X: Any, y: Any = None) -> CoresetSpectralClustering:
        """Cluster the graph (or the kNN graph of the features).

        Args:
            X: adjacency (scipy sparse or dense, shape (n, n)) or networkx graph; features (n, p) when
                ``affinity="nearest_neighbors"``.
            y: ignored.

        Returns:
            self.
        """
        resolve_spectral_backend(self.spectral_backend, 1, 1)  # validate before any work
        A = self._graph_from_input(X)
        n = A.shape[0]
        k, k_prime, m = self._check_common(n)
        rng = check_random_state(self.random_state)
        d = degrees(A)
        s = self_affinities(A, d, float(self.shift))
        if m is None:
            # coreset_ratio = 1: every vertex with weight d_v, so W K W = A + σD: fast SC of the graph.
            idx = np.arange(n)
            graph = sp.csr_array(A + sp.dia_array(((float(self.shift) * d)[None, :], [0]), shape=A.shape))
            core = _Coreset(None, idx, d.copy(), graph)
        else:
            _warn_if_sparse_coreset(A, m, knn=self.affinity == "nearest_neighbors")
            core = self._build_coreset(A, d, s, k, k_prime, m, rng)
        self.spectral_backend_ = resolve_spectral_backend(self.spectral_backend, core.indices.size, k)
        # A coreset vertex with no coreset neighbour is a connected component of its own: an exact
        # eigenvector of the eigenvalue 1, so with many of them eigsh spends its k vectors on single
        # vertices and merges the rest of the graph; the power method leaves it at its Gaussian start,
        # a point of its own for k-means. Our spectral steps leave such vertices out and label them
        # with the labelling step, as every vertex outside the coreset; the paper's ("power") keeps them.
        drops_isolated = self.spectral_backend_ != "power"
        keep = ~_isolated_vertices(core.graph)
        if not drops_isolated or keep.all() or np.count_nonzero(keep) < k:
            keep = np.ones(core.indices.size, dtype=bool)
        kept = np.flatnonzero(keep)
        G = core.graph if keep.all() else sp.csr_array(core.graph[kept][:, kept])
        self.coreset_n_components_ = _warn_if_fragmented(
            A,
            G,
            k,
            n_left_out=core.indices.size - kept.size,
            drops_isolated=drops_isolated,
            coreset=m is not None,
            knn=self.affinity == "nearest_neighbors",
        )
        kept_labels = fast_spectral_clustering(
            G,
            k,
            kmeans=self.kmeans,
            backend="eigsh" if self.spectral_backend_ == "eigsh" else "power",
            normalize_rows=self.spectral_backend_ != "power",
            random_state=rng,
        )
        labels, dist = label_full_graph(
            A,
            core.indices[kept],
            core.weights[kept],
            kept_labels,
            k,
            shift=float(self.shift),
            A_C=G,
        )
        coreset_labels = labels[core.indices]  # the labelling step's labels for left-out vertices
        coreset_labels[kept] = kept_labels
        self._store(A, d, core, coreset_labels)
        if m is None:
            labels = self.coreset_labels_.copy()
        self.labels_ = labels
        self.closest_cluster_distance_ = dist
        return self
