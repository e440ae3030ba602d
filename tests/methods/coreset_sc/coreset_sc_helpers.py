"""Small graphs and dense reference kernels shared by the coreset_sc tests."""

import numpy as np
import scipy.sparse as sp


def random_graph(n: int, density: float, seed: int, weighted: bool = True) -> sp.csr_array:
    """A symmetric sparse graph with positive self-loops (random weights when ``weighted``)."""
    rng = np.random.default_rng(seed)
    M = sp.random(n, n, density=density, random_state=rng, format="csr")
    if not weighted:
        M.data[:] = 1.0
    else:
        M.data = 0.5 + 1.5 * M.data
    A = sp.triu(M, 1)
    A = A + A.T
    diag = 0.5 + rng.random(n) if weighted else np.ones(n)
    A = sp.csr_array(A + sp.diags(diag))
    A.sort_indices()
    return A


def dense_kernel(A: sp.csr_array, shift: float) -> np.ndarray:
    """``K = D⁻¹AD⁻¹ + σD⁻¹`` as a dense array (tests only)."""
    d = np.asarray(A.sum(axis=1)).ravel()
    return A.toarray() / np.outer(d, d) + np.diag(shift / d)


def dense_distances(K: np.ndarray) -> np.ndarray:
    """Pairwise squared kernel distances, clipped at 0, zero diagonal."""
    g = np.diag(K)
    D = np.maximum(g[:, None] + g[None, :] - 2 * K, 0.0)
    np.fill_diagonal(D, 0.0)
    return D
