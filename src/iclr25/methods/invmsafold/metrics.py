"""Sequence-set metrics: covariance correlation, Hamming diversity, PCA-KL.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Silva, Meynard-Piganeau, Lucibello,
Feinauer, ICLR 2025, arXiv:2406.11975, Sec. 4: Pearson correlation of connected covariances
``C_ij(a,b) = f_ij(a,b) - f_i(a) f_j(b)`` (i < j) between generated and natural MSAs; Hamming
distances to the native and within a set; KL divergence between 2-D histograms of the two sets
projected on the first two principal components of the natural one-hot MSA.

The metrics are numpy code: token tensors on any device are copied to the CPU first.
"""

from __future__ import annotations

import numpy as np
from torch import Tensor

__all__ = [
    "connected_covariance",
    "covariance_pearson",
    "hamming_to",
    "mean_pairwise_hamming",
    "nearest_row_distance",
    "pca_kl",
]


def _np(x: Tensor | np.ndarray) -> np.ndarray:
    """Tokens as a numpy array (a tensor on any device is copied to the CPU first)."""
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def _onehot(seqs: Tensor | np.ndarray, q: int) -> np.ndarray:
    s = _np(seqs)
    if s.ndim != 2:
        raise ValueError(f"sequences must be [N, L], got shape {s.shape}")
    if s.size and (s.min() < 0 or s.max() >= q):
        raise ValueError(f"tokens must lie in [0, {q})")
    return np.eye(q, dtype=np.float64)[s].reshape(len(s), -1)  # [N, L*q]


def connected_covariance(seqs: Tensor | np.ndarray, q: int) -> np.ndarray:
    """``C_ij(a,b)`` for all ``i < j``, flattened.

    Shape:
        ``[N, L] -> [L (L - 1) / 2 * q * q]``.

    Example:
        >>> connected_covariance(np.array([[0, 0], [1, 1]]), 2).tolist()
        [0.25, -0.25, -0.25, 0.25]
    """
    x = _onehot(seqs, q)
    L = _np(seqs).shape[1]
    f = x.mean(0)
    c = (x.T @ x) / len(x) - np.outer(f, f)  # [L*q, L*q]
    c = c.reshape(L, q, L, q).transpose(0, 2, 1, 3)  # [L, L, q, q]
    iu = np.triu_indices(L, k=1)
    return c[iu].reshape(-1)


def covariance_pearson(generated: Tensor | np.ndarray, natural: Tensor | np.ndarray, q: int) -> float:
    """Pearson r between the connected covariances of two sets of one fold.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> a = rng.integers(0, 3, (200, 4))
        >>> round(covariance_pearson(a, a, 3), 6)
        1.0
    """
    a, b = connected_covariance(generated, q), connected_covariance(natural, q)
    if a.std() == 0 or b.std() == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def hamming_to(seqs: Tensor | np.ndarray, reference: Tensor | np.ndarray) -> float:
    """Mean normalised Hamming distance of each sequence to one reference.

    Example:
        >>> hamming_to(np.array([[0, 1], [1, 1]]), np.array([0, 1]))
        0.25
    """
    s, r = _np(seqs), _np(reference)
    if s.ndim != 2 or r.shape != (s.shape[1],):
        raise ValueError(f"need seqs [N, L] and reference [L], got {s.shape} and {r.shape}")
    return float((s != r).mean())


def mean_pairwise_hamming(seqs: Tensor | np.ndarray) -> float:
    """Mean normalised Hamming distance over distinct pairs of a set.

    Example:
        >>> round(mean_pairwise_hamming(np.array([[0, 1], [1, 1], [0, 0]])), 4)
        0.6667
    """
    s = _np(seqs)
    n, L = s.shape
    if n < 2:
        raise ValueError("need at least 2 sequences")
    q = int(s.max()) + 1
    x = np.eye(q)[s].reshape(n, -1)
    same = x @ x.T  # matching sites per pair
    off = (same.sum() - np.trace(same)) / (n * (n - 1))
    return float(1.0 - off / L)


def nearest_row_distance(seqs: Tensor | np.ndarray, rows: Tensor | np.ndarray) -> float:
    """Mean over ``seqs`` of the normalised Hamming distance to the nearest of ``rows``.

    The memorisation guard: a sampler that copies its training rows scores 0.

    Shape:
        ``seqs [N, L]``, ``rows [M, L]``.

    Example:
        >>> nearest_row_distance(np.array([[0, 1], [1, 1]]), np.array([[0, 1], [0, 0]]))
        0.25
    """
    s, r = _np(seqs), _np(rows)
    if s.ndim != 2 or r.ndim != 2 or s.shape[1] != r.shape[1] or not len(r):
        raise ValueError(f"need [N, L] and [M >= 1, L] with one L, got {s.shape} and {r.shape}")
    d = (s[:, None, :] != r[None, :, :]).mean(-1)  # [N, M]
    return float(d.min(1).mean())


def pca_kl(
    generated: Tensor | np.ndarray,
    natural: Tensor | np.ndarray,
    q: int,
    *,
    bins: int = 10,
    pseudocount: float = 1.0,
) -> float:
    """KL(natural ‖ generated) of 2-D histograms on the natural MSA's first two principal components.

    The histogram grid spans the natural projection's range (points outside are clipped to the edge
    bins); ``pseudocount`` is added to every bin of both histograms.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> a = rng.integers(0, 3, (100, 5))
        >>> pca_kl(a, a, 3)
        0.0
    """
    from sklearn.decomposition import PCA

    xn, xg = _onehot(natural, q), _onehot(generated, q)
    pca = PCA(n_components=2, svd_solver="full").fit(xn)
    pn, pg = pca.transform(xn), pca.transform(xg)
    lo, hi = pn.min(0), pn.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)

    def hist(p: np.ndarray) -> np.ndarray:
        idx = np.clip(((p - lo) / span * bins).astype(int), 0, bins - 1)
        h = np.zeros((bins, bins))
        np.add.at(h, (idx[:, 0], idx[:, 1]), 1.0)
        h += pseudocount
        return h / h.sum()

    hn, hg = hist(pn), hist(pg)
    return float(max(0.0, (hn * np.log(hn / hg)).sum()))
