"""Labelling the full graph through kernel-space coreset centres.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. Implements the final step of the algorithm (Sec. 4): each vertex goes to
the nearest kernel-space centre ``μ_j`` among the clusters of its coreset neighbours and the default
cluster ``j0 = argmin_j ‖μ_j‖²`` (the nearest centre of any vertex with no coreset neighbour in that
cluster). Cost ``O(nnz(A[:, C]))``; no n×k table is built.

The shift σ (derivation). With ``K = K₀ + σD⁻¹`` (``K₀ = D⁻¹AD⁻¹``) every vertex v has the feature
``φ_v = (φ⁰_v, √(σ/d_v)·e_v)``: the shift adds a private axis per vertex.

1. *The centre.* The labelling stands in for the degree-weighted centre of the whole-graph cluster
   ``S_j``, ``μ_j = Σ_{v∈S_j} d_v φ_v / vol(S_j)``. Its private part has squared norm
   ``Σ_{v∈S_j} d_v²·(σ/d_v) / vol(S_j)² = σ/vol(S_j)`` and meets ``φ_x`` only on x's own axis
   (``σ/vol(S_j)`` if ``x ∈ S_j``). The coreset estimates ``vol(S_j)`` by ``W_j = Σ_{a∈C_j} w_a``
   (weights ``d_v/(m p_v)`` are unbiased for volumes), so ``‖μ_j‖² = ‖μ⁰_j‖² + σ/W_j``. The plug-in
   centre of the weighted coreset points, ``Σ_{a∈C_j} w_a φ_a / W_j``, gives ``σ Σ_a w_a²/d_a / W_j²``
   instead: a coreset vertex stands for about ``w_a/d_a`` vertices with orthogonal private axes, and
   the plug-in counts its one axis ``w_a/d_a`` times over, about ``σ/ratio`` times ``σ/W_j``. That
   overcount sent every vertex to the heaviest cluster (ARI 0.03 at σ = 1 where σ = 0 gives 1.0).
2. *The choice.* The shift adds the constant ``σ(n − k)`` to the cost of every partition
   (Ncut + constant), so it cannot change which cluster a vertex should join. Exactly: putting x into
   ``S_j`` raises the weighted kernel k-means cost by ``d_x W_j/(W_j + d_x)·‖φ_x − μ_j‖²``, whose σ
   part is ``d_x W_j/(W_j + d_x)·(σ/d_x + σ/W_j) = σ`` for every j. The nearest-centre rule, which
   drops the factor ``W_j/(W_j + d_x)`` as at σ = 0, therefore compares the unshifted
   ``‖μ⁰_j‖² − 2⟨φ⁰_x, μ⁰_j⟩`` with ``‖μ⁰_j‖² = Σ_{a,b∈C_j} w_a w_b K₀_ab / W_j²`` and
   ``⟨φ⁰_x, μ⁰_j⟩ = Σ_{a∈C_j∩N(x)} w_a K₀_xa / W_j``. Keeping ``+σ/W_j`` in the comparison (the
   shifted nearest-centre step for a vertex outside every cluster) would favour heavy clusters by
   a term as large as the signal (``1/W_j``) at σ = 1.

The returned distance is the shifted squared distance to the estimated centre,
``s_x + ‖μ⁰_j‖² − 2⟨φ⁰_x, μ⁰_j⟩ + σ/W_j`` (``−2σ/W_j`` more for a coreset vertex of cluster j), so
σ changes the distances but not the labels.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from iclr25.methods.coreset_sc.kernel import degrees, self_affinities

__all__ = ["centre_norms", "label_full_graph"]


def _kernel_columns(A: sp.csr_array, idx: np.ndarray, d: np.ndarray) -> sp.csr_array:
    """``K₀[:, C]`` as a sparse (n, |C|) array: ``A_xa/(d_x d_a)`` (the unshifted kernel)."""
    n = A.shape[0]
    sub = sp.csr_array(A[:, idx])  # (n, |C|)
    Kc = sp.dia_array(((1.0 / d)[None, :], [0]), shape=(n, n)) @ sub
    Kc = Kc @ sp.dia_array(((1.0 / d[idx])[None, :], [0]), shape=(idx.size, idx.size))
    return sp.csr_array(Kc)


def centre_norms(
    A_C: sp.sparray | sp.spmatrix,
    weights: np.ndarray,
    labels: np.ndarray,
    n_clusters: int,
    *,
    shift: float = 0.0,
    coreset_degrees: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Squared norms ``‖μ_j‖²`` of the kernel-space centres and the cluster weights ``W_j``.

    ``‖μ_j‖² = Σ_{a,b∈C_j} w_a w_b K₀_ab / W_j² + σ/W_j``, read off the coreset graph
    ``A_C = W K W`` (whose diagonal holds ``σ w_a²/d_a``, replaced here by the estimate ``σ/W_j`` of
    the shift part of the whole cluster's centre; see the module docstring).

    Args:
        A_C: coreset graph ``W_C K[C,C] W_C`` built with the same ``shift``, shape (|C|, |C|).
        weights: coreset weights, shape (|C|,).
        labels: coreset labels in ``[0, k)``, shape (|C|,).
        n_clusters: k.
        shift: σ, the shift ``A_C`` was built with.
        coreset_degrees: degrees in the full graph of the coreset vertices, shape (|C|,); needed
            when ``shift > 0``.

    Returns:
        ``(norms, W)``, each shape (k,); empty clusters get ``inf`` norm and ``W = 0``.

    Raises:
        ValueError: ``shift > 0`` without ``coreset_degrees``, or mismatched shapes.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> centre_norms(sp.csr_array(np.eye(2)), np.ones(2), np.array([0, 1]), 2)[0].tolist()
        [1.0, 1.0]
    """
    coo = sp.coo_array(A_C)
    lab = np.asarray(labels, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    if lab.shape != w.shape or coo.shape != (w.size, w.size):
        raise ValueError(
            f"A_C {coo.shape}, weights {w.shape} and labels {lab.shape} must describe the same coreset"
        )
    same = lab[coo.row] == lab[coo.col]
    inner = np.bincount(lab[coo.row[same]], weights=coo.data[same], minlength=n_clusters)
    W = np.bincount(lab, weights=w, minlength=n_clusters)
    if shift != 0.0:
        if coreset_degrees is None:
            raise ValueError("shift > 0 needs coreset_degrees (the full-graph degrees of the coreset)")
        dC = np.asarray(coreset_degrees, dtype=np.float64)
        if dC.shape != w.shape:
            raise ValueError(f"coreset_degrees must have shape {w.shape}, got {dC.shape}")
        # Drop the plug-in shift σ w_a²/d_a of A_C's diagonal; add σ W_j (so σ/W_j after dividing).
        inner = inner - np.bincount(lab, weights=shift * w**2 / dC, minlength=n_clusters) + shift * W
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

    For vertex x the score of cluster j is ``‖μ⁰_j‖² − 2⟨φ⁰_x, μ⁰_j⟩`` in the unshifted kernel
    ``K₀ = D⁻¹AD⁻¹`` with ``⟨φ⁰_x, μ⁰_j⟩ = Σ_{a∈C_j∩N(x)} w_a K₀_xa / W_j``: the shift σ adds the same
    amount to the cost of every choice (derivation in the module docstring), so it changes the
    returned distances but not the labels. Candidates are ``j0 = argmin_j ‖μ⁰_j‖²`` and the clusters of
    x's coreset neighbours (ties go to the smaller cluster index).

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
    norms_shifted, W = centre_norms(A_C, w, lab, n_clusters, shift=shift, coreset_degrees=d[idx])
    with np.errstate(divide="ignore"):
        shift_part = np.where(W > 0, shift / np.where(W > 0, W, 1.0), 0.0)  # σ/W_j
    norms = norms_shifted - shift_part  # ‖μ⁰_j‖², the norms that decide
    j0 = int(np.argmin(norms))
    # Z[x, j] = Σ_{a∈C_j∩N(x)} w_a K₀_xa / W_j, a sparse (n, k) array with nnz ≤ nnz(A[:, C]).
    Kc = _kernel_columns(A, idx, d)  # (n, |C|)
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
    # Shifted distance to the chosen centre: + σ/W_j, and − 2σ/W_j for a coreset vertex of cluster j.
    dist = self_affinities(A, d, shift) + best + shift_part[best_col]
    own = lab == best_col[idx]
    dist[idx[own]] -= 2.0 * shift_part[lab[own]]
    return best_col, dist
