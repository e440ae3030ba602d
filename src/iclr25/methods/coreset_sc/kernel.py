"""Graph kernel of weighted kernel k-means, its sparse distances, and normalised-cut quantities.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227.

Implements the kernel view of normalised cut (Sec. 2 and 3 of the paper, after Dhillon et al. 2007):
with degrees ``d = A·1`` as point weights and the kernel ``K = D⁻¹AD⁻¹ + σD⁻¹``, the weighted kernel
k-means cost of a partition equals ``Ncut + Σ_v A_vv/d_v + σ(n−k) − k``. The squared kernel distance
``‖φ_u − φ_v‖² = s_u + s_v − 2A_uv/(d_u d_v)`` (``s_v = A_vv/d_v² + σ/d_v``) differs from ``s_u + s_v``
only for neighbours, which is what makes the sparse construction of :mod:`.sampling` possible.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

__all__ = [
    "check_adjacency",
    "conductances",
    "degrees",
    "kernel_kmeans_cost",
    "normalized_cut",
    "self_affinities",
    "sparse_kernel_distances",
]

INDEFINITE_MESSAGE = (
    "negative squared kernel distances were clipped to 0: the kernel D⁻¹AD⁻¹ is indefinite for this "
    "graph. The clipping only affects D² seeding probabilities and is usually harmless; shift=1.0 makes "
    "K positive semi-definite and removes it without changing the labelling rule, but it adds σw²/d to "
    "the coreset graph's diagonal, which lowers accuracy with spectral_backend='power'"
)


def check_adjacency(A: Any, *, self_loops: Literal["require", "add"] = "require") -> sp.csr_array:
    """Validate an adjacency matrix and return it as a float64 CSR array.

    Args:
        A: a square, symmetric, non-negative scipy sparse matrix/array or dense array.
        self_loops: ``"require"`` raises if any diagonal entry is ≤ 0; ``"add"`` sets a unit diagonal.

    Returns:
        A canonical ``scipy.sparse.csr_array`` (float64, sorted indices, no explicit zeros).

    Raises:
        TypeError: ``A`` is not a matrix.
        ValueError: non-square, empty, NaN/inf, negative, asymmetric, or missing self-loops.

    Example:
        >>> import scipy.sparse as sp
        >>> check_adjacency(sp.eye(3, format="csr")).shape
        (3, 3)
    """
    if self_loops not in ("require", "add"):
        raise ValueError(f"self_loops must be 'require' or 'add', got {self_loops!r}")
    if sp.issparse(A):
        M = sp.csr_array(A, dtype=np.float64)
    else:
        try:
            arr = np.asarray(A, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"adjacency must be a sparse matrix or 2-D array, got {type(A).__name__}"
            ) from err
        if arr.ndim != 2:
            raise ValueError(f"adjacency must be 2-D, got {arr.ndim}-D")
        M = sp.csr_array(arr)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"adjacency must be square, got shape {M.shape}")
    if M.shape[0] == 0:
        raise ValueError("adjacency is empty (0 vertices)")
    M.sum_duplicates()
    if not np.all(np.isfinite(M.data)):
        raise ValueError("adjacency contains NaN or infinite weights")
    if np.any(M.data < 0):
        raise ValueError("Negative values in data: adjacency weights must be non-negative")
    M.eliminate_zeros()
    if M.nnz == 0:
        raise ValueError("adjacency is empty (no edges)")
    asym = abs(M - M.T)
    tol = 1e-10 * float(np.max(M.data))
    if asym.nnz and float(asym.max()) > tol:
        raise ValueError("adjacency is not symmetric; pass (A + A.T) / 2 or A.maximum(A.T)")
    if self_loops == "add":
        M = M.tolil()
        M.setdiag(1.0)
        M = sp.csr_array(M)
    elif np.any(M.diagonal() <= 0):
        bad = int(np.sum(M.diagonal() <= 0))
        raise ValueError(
            f"{bad} vertices have no positive self-loop; the kernel needs them (they set every degree and "
            "self-affinity). Call A.setdiag(1) yourself or pass self_loops='add'"
        )
    M.sort_indices()
    return M


def degrees(A: sp.sparray | sp.spmatrix) -> np.ndarray:
    """Weighted degrees ``d = A·1`` (self-loops included).

    Args:
        A: adjacency, shape (n, n).

    Returns:
        float64 array, shape (n,).

    Example:
        >>> import scipy.sparse as sp
        >>> degrees(sp.eye(2)).tolist()
        [1.0, 1.0]
    """
    return np.asarray(A.sum(axis=1), dtype=np.float64).ravel()


def self_affinities(A: sp.sparray | sp.spmatrix, d: np.ndarray, shift: float = 0.0) -> np.ndarray:
    """Kernel diagonal ``s_v = K_vv = A_vv/d_v² + σ/d_v``.

    Args:
        A: adjacency, shape (n, n).
        d: degrees, shape (n,).
        shift: σ, the diagonal shift of the kernel.

    Returns:
        float64 array, shape (n,).

    Example:
        >>> import scipy.sparse as sp
        >>> self_affinities(sp.eye(2), [1.0, 1.0], shift=1.0).tolist()
        [2.0, 2.0]
    """
    d = np.asarray(d, dtype=np.float64)
    return np.asarray(A.diagonal(), dtype=np.float64) / d**2 + shift / d


def _row_distances(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, d: np.ndarray, s: np.ndarray, c: int
) -> tuple[np.ndarray, np.ndarray]:
    """Neighbours of ``c`` (``c`` excluded) and their squared kernel distances to ``c`` (unclipped)."""
    lo, hi = indptr[c], indptr[c + 1]
    nb = indices[lo:hi]
    w = data[lo:hi]
    keep = nb != c
    nb, w = nb[keep], w[keep]
    # ‖φ_c − φ_u‖² = s_c + s_u − 2 K_cu, K_cu = A_cu / (d_c d_u) for u ≠ c.
    return nb, s[c] + s[nb] - 2.0 * w / (d[c] * d[nb])


def sparse_kernel_distances(
    A: sp.sparray | sp.spmatrix, centre: int, *, shift: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Squared kernel distances from ``centre`` to its neighbours; non-neighbours are at ``s_c + s_v``.

    Args:
        A: a validated adjacency (see :func:`check_adjacency`), shape (n, n).
        centre: vertex index.
        shift: σ.

    Returns:
        ``(neighbours, distances)``: the neighbours of ``centre`` other than itself and
        ``s_c + s_u − 2A_cu/(d_c d_u)`` for each, clipped at 0 (with a warning if any was negative).

    Example:
        >>> import scipy.sparse as sp
        >>> A = sp.csr_array([[1.0, 1.0], [1.0, 1.0]])
        >>> sparse_kernel_distances(A, 0)[1].tolist()
        [0.0]
    """
    A = sp.csr_array(A)
    d = degrees(A)
    s = self_affinities(A, d, shift)
    nb, dist = _row_distances(A.indptr, A.indices, A.data, d, s, int(centre))
    if np.any(dist < 0):
        warnings.warn(INDEFINITE_MESSAGE, UserWarning, stacklevel=2)
        dist = np.maximum(dist, 0.0)
    return nb, dist


def _within_weights(A: sp.csr_array, labels: np.ndarray, n_labels: int) -> np.ndarray:
    """``w(S_j, S_j) = Σ_{u,v ∈ S_j} A_uv`` for every label ``j`` (self-loops included)."""
    coo = A.tocoo()
    same = labels[coo.row] == labels[coo.col]
    return np.bincount(labels[coo.row[same]], weights=coo.data[same], minlength=n_labels)


def _as_labels(labels: Any, n: int) -> tuple[np.ndarray, int]:
    lab = np.asarray(labels)
    if lab.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {lab.shape}")
    _, inv = np.unique(lab, return_inverse=True)
    return inv.astype(np.int64), int(inv.max()) + 1


def conductances(A: sp.sparray | sp.spmatrix, labels: Any) -> np.ndarray:
    """Conductance ``φ(S_j) = 1 − w(S_j,S_j)/vol(S_j)`` of every cluster.

    Args:
        A: adjacency, shape (n, n).
        labels: cluster label per vertex, shape (n,); any hashable values (sorted order is kept).

    Returns:
        float64 array, shape (number of distinct labels,).

    Example:
        >>> import scipy.sparse as sp
        >>> conductances(sp.csr_array([[1.0, 1.0], [1.0, 1.0]]), [0, 1]).tolist()
        [0.5, 0.5]
    """
    A = sp.csr_array(A, dtype=np.float64)
    lab, k = _as_labels(labels, A.shape[0])
    vol = np.bincount(lab, weights=degrees(A), minlength=k)
    return 1.0 - _within_weights(A, lab, k) / vol


def normalized_cut(A: sp.sparray | sp.spmatrix, labels: Any) -> float:
    """Normalised cut ``Ncut = Σ_j (1 − w(S_j,S_j)/vol(S_j))``.

    Args:
        A: adjacency, shape (n, n).
        labels: cluster label per vertex, shape (n,).

    Returns:
        The normalised cut (a float in ``[0, k]``).

    Example:
        >>> import scipy.sparse as sp
        >>> normalized_cut(sp.csr_array([[1.0, 1.0], [1.0, 1.0]]), [0, 0])
        0.0
    """
    return float(np.sum(conductances(A, labels)))


def kernel_kmeans_cost(
    A: sp.sparray | sp.spmatrix, labels: Any, *, shift: float = 0.0, weights: np.ndarray | None = None
) -> float:
    """Weighted kernel k-means cost ``Σ_v w_v ‖φ_v − μ_{j(v)}‖²`` with ``K = D⁻¹AD⁻¹ + σD⁻¹``.

    Computed from the kernel directly (``Σ_v w_v K_vv − Σ_j Σ_{u,v∈S_j} w_u w_v K_uv / W_j``), never
    densified. With ``weights=None`` (``w = d``) it equals ``Ncut + Σ_v A_vv/d_v + σ(n−k) − k``.

    Args:
        A: adjacency with positive self-loops, shape (n, n).
        labels: cluster label per vertex, shape (n,).
        shift: σ.
        weights: point weights ``w`` (default: the degrees).

    Returns:
        The cost.

    Example:
        >>> import scipy.sparse as sp
        >>> A = sp.csr_array([[1.0, 1.0], [1.0, 1.0]])
        >>> round(kernel_kmeans_cost(A, [0, 0]), 12)
        0.0
    """
    A = sp.csr_array(A, dtype=np.float64)
    n = A.shape[0]
    d = degrees(A)
    w = d if weights is None else np.asarray(weights, dtype=np.float64)
    lab, k = _as_labels(labels, n)
    s = self_affinities(A, d, shift)
    coo = A.tocoo()
    same = lab[coo.row] == lab[coo.col]
    r, c = coo.row[same], coo.col[same]
    # Σ_{u,v∈S_j} w_u w_v K_uv: off-diagonal part A_uv/(d_u d_v) plus the σ/d_v diagonal shift.
    pair = w[r] * w[c] * coo.data[same] / (d[r] * d[c])
    inner = np.bincount(lab[r], weights=pair, minlength=k) + np.bincount(
        lab, weights=shift * w**2 / d, minlength=k
    )
    W = np.bincount(lab, weights=w, minlength=k)
    return float(np.sum(w * s) - np.sum(inner / W))
