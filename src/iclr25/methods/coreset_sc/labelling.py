"""Labelling the full graph through kernel-space coreset centres.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. Implements the final step of the algorithm (Sec. 4): each vertex goes to
the nearest weighted kernel centre ``μ_j = Σ_{a∈C_j} w_a φ_a / W_j`` among the clusters of its coreset
neighbours and the default cluster ``j0 = argmin_j ‖μ_j‖²`` (the nearest centre of any vertex with no
coreset neighbour in that cluster). Cost ``O(nnz(A[:, C]))``; no n×k table is built.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from iclr25.methods.coreset_sc.kernel import degrees, self_affinities

__all__ = ["centre_norms", "label_full_graph"]


def _kernel_columns(A: sp.csr_array, idx: np.ndarray, d: np.ndarray, shift: float) -> sp.csr_array:
    """``K[:, C]`` as a sparse (n, |C|) array: ``A_xa/(d_x d_a)`` plus ``σ/d_a`` where ``x = a``."""
    n = A.shape[0]
    sub = sp.csr_array(A[:, idx])  # (n, |C|)
    Kc = sp.dia_array(((1.0 / d)[None, :], [0]), shape=(n, n)) @ sub
    Kc = Kc @ sp.dia_array(((1.0 / d[idx])[None, :], [0]), shape=(idx.size, idx.size))
    if shift != 0.0:
        diag = sp.csr_array((shift / d[idx], (idx, np.arange(idx.size))), shape=(n, idx.size))
        Kc = Kc + diag
    return sp.csr_array(Kc)


def centre_norms(
    A_C: sp.sparray | sp.spmatrix, weights: np.ndarray, labels: np.ndarray, n_clusters: int
) -> tuple[np.ndarray, np.ndarray]:
    """``‖μ_j‖² = Σ_{a,b∈C_j} (A_C)_ab / W_j²`` and ``W_j``, from the coreset graph ``A_C = W K W``.

    Args:
        A_C: coreset graph, shape (|C|, |C|).
        weights: coreset weights, shape (|C|,).
        labels: coreset labels in ``[0, k)``, shape (|C|,).
        n_clusters: k.

    Returns:
        ``(norms, W)``, each shape (k,); empty clusters get ``inf`` norm and ``W = 0``.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> centre_norms(sp.csr_array(np.eye(2)), np.ones(2), np.array([0, 1]), 2)[0].tolist()
        [1.0, 1.0]
    """
    coo = sp.coo_array(A_C)
    lab = np.asarray(labels, dtype=np.int64)
    same = lab[coo.row] == lab[coo.col]
    inner = np.bincount(lab[coo.row[same]], weights=coo.data[same], minlength=n_clusters)
    W = np.bincount(lab, weights=weights, minlength=n_clusters)
    with np.errstate(divide="ignore", invalid="ignore"):
        norms = np.where(W > 0, inner / np.where(W > 0, W, 1.0) ** 2, np.inf)
    return norms, W


def label_full_graph(
    A: Any,
    coreset_indices: np.ndarray,
    coreset_weights: np.ndarray,
    coreset_labels: np.ndarray,
    n_clusters: int,
    *,
    shift: float = 0.0,
    A_C: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Assign every vertex to its nearest kernel-space coreset centre among its candidate clusters.

    For vertex x the score of cluster j is ``‖μ_j‖² − 2⟨φ_x, μ_j⟩`` with
    ``⟨φ_x, μ_j⟩ = Σ_{a∈C_j∩N(x)} w_a K_xa / W_j``; candidates are ``j0 = argmin_j ‖μ_j‖²`` and the clusters
    of x's coreset neighbours (ties go to the smaller cluster index).

    Args:
        A: adjacency (validated, positive self-loops), shape (n, n).
        coreset_indices: coreset vertices, shape (|C|,).
        coreset_weights: their weights, shape (|C|,).
        coreset_labels: their labels in ``[0, k)``, shape (|C|,).
        n_clusters: k.
        shift: σ.
        A_C: the coreset graph, if already built (else rebuilt from ``A``).

    Returns:
        ``(labels, distances)``: int64 labels, shape (n,), and the squared kernel distance
        ``s_x + ‖μ_j‖² − 2⟨φ_x, μ_j⟩`` to the chosen centre, shape (n,).

    Example:
        >>> import numpy as np
        >>> from iclr25.methods.coreset_sc import sbm
        >>> A, _ = sbm(10, 2, 0.9, 0.0, random_state=0)
        >>> lab, dist = label_full_graph(A, np.array([0, 10]), np.array([50.0, 50.0]), np.array([0, 1]), 2)
        >>> lab[:10].tolist() == [0] * 10
        True
    """
    from iclr25.methods.coreset_sc.sampling import coreset_graph

    A = sp.csr_array(A, dtype=np.float64)
    n = A.shape[0]
    idx = np.asarray(coreset_indices, dtype=np.int64)
    w = np.asarray(coreset_weights, dtype=np.float64)
    lab = np.asarray(coreset_labels, dtype=np.int64)
    d = degrees(A)
    if A_C is None:
        A_C = coreset_graph(A, idx, w, shift=shift, degrees_=d)
    norms, W = centre_norms(A_C, w, lab, n_clusters)
    j0 = int(np.argmin(norms))
    # Z[x, j] = Σ_{a∈C_j∩N(x)} w_a K_xa / W_j, a sparse (n, k) array with nnz ≤ nnz(A[:, C]).
    Kc = _kernel_columns(A, idx, d, shift)  # (n, |C|)
    onehot = sp.csr_array((w / W[lab], (np.arange(idx.size), lab)), shape=(idx.size, n_clusters))
    Z = sp.csr_array(Kc @ onehot)
    Z.sum_duplicates()
    Z.sort_indices()
    rows = np.repeat(np.arange(n), np.diff(Z.indptr))
    score = norms[Z.indices] - 2.0 * Z.data
    # Default candidate j0 for every vertex (its inner product may be stored in Z or be zero).
    z0 = np.asarray(Z[:, [j0]].toarray()).ravel()
    best_col = np.full(n, j0, dtype=np.int64)
    best = norms[j0] - 2.0 * z0
    if rows.size:
        order = np.lexsort((Z.indices, score, rows))  # per row: lowest score, then lowest cluster index
        first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
        r, c, v = rows[first], Z.indices[first], score[first]
        take = (v < best[r]) | ((v == best[r]) & (c < j0))
        best_col[r[take]] = c[take]
        best[r[take]] = v[take]
    s = self_affinities(A, d, shift)
    return best_col, s + best
