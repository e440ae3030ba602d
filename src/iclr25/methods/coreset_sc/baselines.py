"""Baselines of coreset spectral clustering: coreset kernel k-means, the O(nk) construction, full SC.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. The paper compares CSC (Sec. 5) with coreset kernel k-means (CKKM; the
coreset of Jiang et al., then weighted kernel k-means++ and Lloyd iterations on it), with the older
``O(nk)`` coreset construction that evaluates every kernel distance during D² seeding, and with
spectral clustering of the full graph. This module implements those comparators, a nearest-coreset-point
labelling used as an ablation of the labelling step, and a thin wrapper of the reference wheel.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state

from iclr25._core.registry import require
from iclr25.methods.coreset_sc.estimator import _CoresetMixin
from iclr25.methods.coreset_sc.kernel import INDEFINITE_MESSAGE, check_adjacency, degrees, self_affinities
from iclr25.methods.coreset_sc.labelling import label_full_graph
from iclr25.methods.coreset_sc.sampling import SeedingResult, _seed_draws
from iclr25.methods.coreset_sc.spectral import eigsh_embedding, make_kmeans

__all__ = [
    "CoresetKernelKMeans",
    "dense_kernel_seeding",
    "full_spectral_clustering",
    "nearest_point_labels",
    "reference_coreset_sc",
    "weighted_kernel_kmeans",
]


def dense_kernel_seeding(
    A: Any, n_seeds: int, *, shift: float = 0.0, random_state: Any = None, check_input: bool = True
) -> SeedingResult:
    """The O(nk) construction: D² seeding that evaluates the distance of every vertex to every new seed.

    Same seed order as :func:`sparse_kernel_seeding` (reference ``x*``, one uniform seed, then D²
    draws), but each seed costs n kernel-distance evaluations: ``n_evals = n(k'+1)``.

    Args:
        A: adjacency with positive self-loops, shape (n, n).
        n_seeds: k'.
        shift: σ.
        random_state: seed, ``np.random.RandomState`` or None.
        check_input: validate ``A`` with :func:`check_adjacency`; pass False only for a
            ``csr_array`` that ``check_adjacency`` returned (as :func:`sparse_kernel_seeding`).

    Returns:
        A :class:`SeedingResult`.

    Example:
        >>> from iclr25.methods.coreset_sc import sbm
        >>> A, _ = sbm(20, 3, 0.5, 0.01, random_state=0)
        >>> dense_kernel_seeding(A, 6, random_state=0).n_evals
        420
    """
    A = check_adjacency(A) if check_input else A
    n = A.shape[0]
    if not 1 <= n_seeds <= n:
        raise ValueError(f"n_seeds must be in [1, n={n}], got {n_seeds}")
    rng = check_random_state(random_state)
    d = degrees(A)
    s = self_affinities(A, d, shift)
    ref = int(np.argmin(s))
    delta = np.full(n, np.inf)
    assignment = np.zeros(n, dtype=np.int64)
    seeds: list[int] = []
    n_evals = 0
    clipped = False

    def add_seed(c: int) -> None:
        nonlocal n_evals, clipped
        row = np.zeros(n)
        lo, hi = A.indptr[c], A.indptr[c + 1]
        row[A.indices[lo:hi]] = A.data[lo:hi]
        dist = s[c] + s - 2.0 * row / (d[c] * d)  # all n distances, shape (n,)
        dist[c] = 0.0
        n_evals += n
        if np.any(dist < 0):
            clipped = True
            dist = np.maximum(dist, 0.0)
        better = dist < delta
        delta[better] = dist[better]
        assignment[better] = len(seeds)
        seeds.append(c)

    first, uniforms = _seed_draws(n, n_seeds, rng)
    add_seed(ref)
    add_seed(first)
    for u in uniforms:
        cdf = np.cumsum(d * delta)
        total = cdf[-1]
        c = int(np.searchsorted(cdf, total * u, side="right")) if total > 0 else int(u * n)
        add_seed(min(c, n - 1))
    if clipped:
        warnings.warn(INDEFINITE_MESSAGE, UserWarning, stacklevel=2)
    return SeedingResult(np.asarray(seeds, dtype=np.int64), delta, assignment, n_evals, ref)


def weighted_kernel_kmeans(
    K: Any,
    weights: np.ndarray,
    n_clusters: int,
    *,
    n_init: int = 10,
    max_iter: int = 100,
    random_state: Any = None,
) -> tuple[np.ndarray, float]:
    """Weighted kernel k-means (k-means++ seeding, then Lloyd) on a small sparse kernel matrix.

    Args:
        K: kernel matrix of the points, shape (m, m) (sparse or dense; dense work arrays are m×k).
        weights: point weights, shape (m,).
        n_clusters: k.
        n_init: restarts; the lowest-cost run is kept.
        max_iter: Lloyd iterations per restart.
        random_state: seed, ``np.random.RandomState`` or None.

    Returns:
        ``(labels, cost)`` with labels in ``[0, k)``, shape (m,).

    Example:
        >>> import numpy as np
        >>> lab, cost = weighted_kernel_kmeans(np.eye(4), np.ones(4), 4, random_state=0)
        >>> sorted(lab.tolist()), cost
        ([0, 1, 2, 3], 0.0)
    """
    rng = check_random_state(random_state)
    K = sp.csr_array(K, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    m = K.shape[0]
    if not 1 <= n_clusters <= m:
        raise ValueError(f"n_clusters must be in [1, m={m}], got {n_clusters}")
    diag = K.diagonal()
    best_lab, best_cost = None, math.inf
    for _ in range(n_init):
        # k-means++ in kernel space with weights: D² ∝ w_a · min_c ‖φ_a − φ_c‖².
        centres = [int(rng.choice(m, p=w / w.sum()))]
        near = diag + diag[centres[0]] - 2.0 * K[[centres[0]]].toarray().ravel()
        near = np.maximum(near, 0.0)
        for _ in range(n_clusters - 1):
            p = w * near
            c = int(rng.choice(m, p=p / p.sum())) if p.sum() > 0 else int(rng.randint(m))
            centres.append(c)
            dist = np.maximum(diag + diag[c] - 2.0 * K[[c]].toarray().ravel(), 0.0)
            near = np.minimum(near, dist)
        Kc = K[:, centres].toarray()  # (m, k)
        dist = diag[:, None] + diag[centres][None, :] - 2.0 * Kc
        lab = np.argmin(dist, axis=1)
        for _ in range(max_iter):
            onehot = sp.csr_array((w, (np.arange(m), lab)), shape=(m, n_clusters))
            W = np.asarray(onehot.sum(axis=0)).ravel()
            S = np.asarray((K @ onehot).toarray())  # (m, k): Σ_{b∈C_j} w_b K_ab
            inner = np.bincount(lab, weights=w * S[np.arange(m), lab], minlength=n_clusters)
            with np.errstate(divide="ignore", invalid="ignore"):
                norms = np.where(W > 0, inner / np.where(W > 0, W, 1.0) ** 2, np.inf)
                dist = diag[:, None] - 2.0 * S / np.where(W > 0, W, 1.0)[None, :] + norms[None, :]
            new = np.argmin(dist, axis=1)
            if np.array_equal(new, lab):
                break
            lab = new
        cost = float(np.sum(w * dist[np.arange(m), lab]))
        if cost < best_cost:
            best_lab, best_cost = lab.copy(), cost
    return np.asarray(best_lab, dtype=np.int64), best_cost


class CoresetKernelKMeans(_CoresetMixin, ClusterMixin, BaseEstimator):
    """Coreset kernel k-means (CKKM): the same coreset as CSC, then weighted kernel k-means on it.

    Uses the coreset construction and labelling step of :class:`CoresetSpectralClustering` (same
    ``random_state`` → same coreset), but clusters the coreset with weighted kernel k-means++ and Lloyd
    iterations on ``K[C,C]`` with weights ``w`` instead of spectral clustering of ``W K W``.

    Args:
        n_clusters: k.
        coreset_ratio: m/n in (0, 1).
        coreset_size: m, overrides the ratio.
        oversampling: k'/k.
        shift: σ.
        sampling: coreset distribution (see :func:`sampling_probabilities`).
        n_init: k-means++/Lloyd restarts on the coreset (lowest cost kept).
        max_iter: Lloyd iterations per restart.
        self_loops: ``"require"`` or ``"add"``.
        backend: seeding backend (``"auto"``, ``"numpy"``, ``"numba"``).
        random_state: seed.

    Example:
        >>> from iclr25.methods.coreset_sc import CoresetKernelKMeans, sbm
        >>> A, y = sbm(50, 4, 0.5, 0.005, random_state=0)
        >>> CoresetKernelKMeans(4, coreset_ratio=0.5, random_state=0).fit(A).labels_.shape
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
        n_init: int = 10,
        max_iter: int = 100,
        self_loops: str = "require",
        backend: str = "auto",
        random_state: Any = None,
    ) -> None:
        self.n_clusters = n_clusters
        self.coreset_ratio = coreset_ratio
        self.coreset_size = coreset_size
        self.oversampling = oversampling
        self.shift = shift
        self.sampling = sampling
        self.n_init = n_init
        self.max_iter = max_iter
        self.self_loops = self_loops
        self.backend = backend
        self.random_state = random_state

    def fit(self, X: Any, y: Any = None) -> CoresetKernelKMeans:
        """Cluster the graph ``X`` (adjacency or networkx graph); returns self."""
        A = self._graph_from_input(X)
        n = A.shape[0]
        k, k_prime, m = self._check_common(n)
        if m is None:
            m = n
        rng = check_random_state(self.random_state)
        d = degrees(A)
        s = self_affinities(A, d, float(self.shift))
        core = self._build_coreset(A, d, s, k, k_prime, m, rng)
        # K[C,C] = W⁻¹ A_C W⁻¹, the kernel among coreset points.
        winv = sp.dia_array(((1.0 / core.weights)[None, :], [0]), shape=core.graph.shape)
        K = sp.csr_array(winv @ core.graph @ winv)
        lab, _ = weighted_kernel_kmeans(
            K, core.weights, k, n_init=self.n_init, max_iter=self.max_iter, random_state=rng
        )
        self._store(A, d, core, lab)
        self.labels_, self.closest_cluster_distance_ = label_full_graph(
            A, core.indices, core.weights, self.coreset_labels_, k, shift=float(self.shift), A_C=core.graph
        )
        return self


def nearest_point_labels(
    A: Any, coreset_indices: np.ndarray, coreset_labels: np.ndarray, *, shift: float = 0.0
) -> np.ndarray:
    """Ablation of the labelling step: each vertex takes the label of its nearest coreset point.

    Coreset points keep their own label; other vertices take the label of the coreset neighbour ``a``
    with the smallest ``‖φ_x − φ_a‖² = s_x + s_a − 2A_xa/(d_x d_a)``; vertices with no coreset neighbour
    take the label of the coreset point with the smallest ``s_a`` (their nearest non-neighbour).

    Args:
        A: adjacency with positive self-loops, shape (n, n).
        coreset_indices: coreset vertices, shape (|C|,).
        coreset_labels: their labels, shape (|C|,).
        shift: σ.

    Returns:
        int64 labels, shape (n,).

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> A = sp.csr_array(np.ones((3, 3)))
        >>> nearest_point_labels(A, np.array([0]), np.array([5])).tolist()
        [5, 5, 5]
    """
    A = sp.csr_array(A, dtype=np.float64)
    n = A.shape[0]
    d = degrees(A)
    s = self_affinities(A, d, shift)
    idx = np.asarray(coreset_indices, dtype=np.int64)
    lab_c = np.asarray(coreset_labels, dtype=np.int64)
    sub = sp.coo_array(A[:, idx])
    r, c = sub.row, sub.col
    dist = s[r] + s[idx[c]] - 2.0 * sub.data / (d[r] * d[idx[c]])
    out = np.full(n, lab_c[int(np.argmin(s[idx]))], dtype=np.int64)
    best = np.full(n, np.inf)
    best_default = s + s[idx].min()
    order = np.lexsort((c, dist, r))
    first = order[np.r_[True, r[order][1:] != r[order][:-1]]] if r.size else order
    rr, cc, dd = r[first], c[first], dist[first]
    take = dd <= best_default[rr]
    out[rr[take]] = lab_c[cc[take]]
    best[rr[take]] = dd[take]
    out[idx] = lab_c
    return out


def full_spectral_clustering(
    A: Any, n_clusters: int, *, solver: str = "sklearn", random_state: Any = None
) -> np.ndarray:
    """Spectral clustering of the whole graph.

    Args:
        A: adjacency, shape (n, n).
        n_clusters: k.
        solver: ``"sklearn"`` — ``sklearn.cluster.SpectralClustering(affinity="precomputed")`` (with
            ``eigen_solver="amg"`` when pyamg is installed); ``"eigsh"`` — top-k eigenvectors of
            ``D^{-1/2}AD^{-1/2}``, row-normalised, then ``KMeans(n_init=10)``.
        random_state: seed.

    Returns:
        int64 labels, shape (n,).

    Example:
        >>> from iclr25.methods.coreset_sc import sbm
        >>> A, y = sbm(20, 2, 0.6, 0.01, random_state=0)
        >>> full_spectral_clustering(A, 2, solver="eigsh", random_state=0).shape
        (40,)
    """
    rng = check_random_state(random_state)
    A = sp.csr_array(A, dtype=np.float64)
    if solver == "sklearn":
        from sklearn.cluster import SpectralClustering

        try:
            import pyamg  # noqa: F401

            eigen_solver = "amg"
        except ImportError:
            eigen_solver = None
        sc = SpectralClustering(
            n_clusters=n_clusters,
            affinity="precomputed",
            eigen_solver=eigen_solver,
            random_state=rng.randint(np.iinfo(np.int32).max),
        )
        return sc.fit_predict(sp.csr_matrix(A)).astype(np.int64)
    if solver == "eigsh":
        U = eigsh_embedding(A, n_clusters, random_state=rng)
        U /= np.maximum(np.linalg.norm(U, axis=1, keepdims=True), 1e-300)
        return make_kmeans(None, n_clusters, rng).fit_predict(U).astype(np.int64)
    raise ValueError(f"solver must be 'sklearn' or 'eigsh', got {solver!r}")


def reference_coreset_sc(
    A: Any, n_clusters: int, *, coreset_ratio: float = 0.01, oversampling: float = 2.0, shift: float = 0.0
) -> np.ndarray:
    """Labels from the official ``coreset-sc`` wheel (extra ``[coreset_sc_reference]``; not seedable).

    Args:
        A: adjacency with positive self-loops, shape (n, n).
        n_clusters: k.
        coreset_ratio: m/n.
        oversampling: k'/k.
        shift: σ.

    Returns:
        int64 labels, shape (n,).
    """
    mod = require("coreset_sc", "coreset_sc_reference")
    A = sp.csr_matrix(check_adjacency(A))
    est = mod.CoresetSpectralClustering(
        num_clusters=int(n_clusters),
        coreset_ratio=float(coreset_ratio),
        k_over_sampling_factor=float(oversampling),
        shift=float(shift),
        ignore_warnings=True,
    )
    est.fit(A)
    return np.asarray(est.labels_, dtype=np.int64)
