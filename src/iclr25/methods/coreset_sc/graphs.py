"""Graph inputs: a vectorised sparse stochastic block model, local file loaders, networkx conversion.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. The paper evaluates on planted-partition SBM graphs (Sec. 5) and on real
graphs; this module builds the former procedurally and loads the latter from local files only.

The SBM draws, for every block and for the inter-block part, a binomial number of edges and then random
endpoints; the edges are symmetrised and deduplicated, and unit self-loops are added. Drawing endpoints
with replacement merges repeated pairs, so a block's realised edge density is ``1 − (1 − 1/P)^{pP} ≈
1 − e^{−p}`` for ``P`` vertex pairs (about 0.39 at p = 0.5), matching the generator of the reference code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from iclr25._core.registry import require

__all__ = ["from_networkx", "load_graph", "sbm"]


def _assemble(u: np.ndarray, v: np.ndarray, n: int) -> sp.csr_array:
    """Symmetrise and deduplicate an edge list into a 0/1 adjacency with unit self-loops."""
    keep = u != v
    u, v = u[keep], v[keep]
    rows = np.concatenate([u, v, np.arange(n)])
    cols = np.concatenate([v, u, np.arange(n)])
    A = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    A.sum_duplicates()
    A.data[:] = 1.0
    A.sort_indices()
    return A


def sbm(
    n_per: int,
    k: int,
    p: float,
    q: float,
    *,
    random_state: Any = None,
    degree_corrected: bool = False,
    theta_sigma: float = 0.5,
) -> tuple[sp.csr_array, np.ndarray]:
    """A k-block stochastic block model as a sparse 0/1 adjacency with unit self-loops.

    Args:
        n_per: vertices per block.
        k: number of blocks.
        p: intra-block edge probability (per drawn pair; see the module note on deduplication).
        q: inter-block edge probability.
        random_state: seed, ``np.random.RandomState`` or None.
        degree_corrected: draw endpoints ∝ θ_v (log-normal, mean 1 in each block) instead of uniformly.
        theta_sigma: log-standard deviation of θ in the degree-corrected model.

    Returns:
        ``(A, labels)``: ``csr_array`` of shape (n_per·k, n_per·k) and planted labels, shape (n_per·k,).

    Example:
        >>> A, y = sbm(10, 3, 0.5, 0.05, random_state=0)
        >>> A.shape, (A.diagonal() == 1).all()
        ((30, 30), np.True_)
    """
    if n_per < 1 or k < 1:
        raise ValueError(f"n_per and k must be ≥ 1, got n_per={n_per}, k={k}")
    if not (0.0 <= p <= 1.0 and 0.0 <= q <= 1.0):
        raise ValueError(f"p and q must be probabilities, got p={p}, q={q}")
    rng = check_random_state(random_state)
    n = n_per * k
    labels = np.repeat(np.arange(k), n_per)
    if degree_corrected:
        theta = rng.lognormal(0.0, theta_sigma, size=(k, n_per))  # (k, n_per)
        cum = np.cumsum(theta / theta.sum(axis=1, keepdims=True), axis=1)
        cum[:, -1] = 1.0
        cum_flat = (cum + np.arange(k)[:, None]).ravel()  # block b occupies (b, b+1]

        def endpoints(blocks: np.ndarray) -> np.ndarray:
            pos = np.searchsorted(cum_flat, blocks + rng.uniform(0.0, 1.0, blocks.size), side="right")
            return np.minimum(pos, (blocks + 1) * n_per - 1)
    else:

        def endpoints(blocks: np.ndarray) -> np.ndarray:
            return blocks * n_per + rng.randint(n_per, size=blocks.size)

    intra_pairs = n_per * (n_per - 1) // 2
    counts = rng.binomial(intra_pairs, p, size=k)
    blocks = np.repeat(np.arange(k), counts)
    u_in, v_in = endpoints(blocks), endpoints(blocks)
    inter_pairs = n_per * n_per * k * (k - 1) // 2
    m_out = rng.binomial(inter_pairs, q) if k > 1 else 0
    bu = rng.randint(k, size=m_out)
    bv = (bu + rng.randint(1, max(k, 2), size=m_out)) % k  # a different block, uniformly
    u_out, v_out = endpoints(bu), endpoints(bv)
    A = _assemble(np.concatenate([u_in, u_out]), np.concatenate([v_in, v_out]), n)
    return A, labels


def from_networkx(G: Any, *, weight: str | None = "weight") -> sp.csr_array:
    """The adjacency of a networkx graph as a float64 ``csr_array`` (node order of ``G.nodes``).

    Args:
        G: an undirected ``networkx`` graph.
        weight: edge attribute holding weights (missing → 1), or None for 0/1.

    Returns:
        ``csr_array`` of shape (n, n). Self-loops are kept as they are in ``G``.

    Example:
        >>> import networkx as nx
        >>> from_networkx(nx.path_graph(3)).toarray().tolist()
        [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    """
    nx = require("networkx", "coreset_sc")
    if G.is_directed():
        raise ValueError("networkx graph is directed; pass G.to_undirected()")
    A = nx.to_scipy_sparse_array(G, weight=weight, dtype=np.float64, format="csr")
    return sp.csr_array(A)


def load_graph(path: str | Path, *, self_loops: bool = True) -> sp.csr_array:
    """Load a graph from a local file: an edge list (``.txt/.tsv/.csv``, 2 or 3 columns), ``.npz``, ``.mtx``.

    Edge lists may contain ``#`` or ``%`` comment lines; vertex ids are remapped to ``0..n−1`` in sorted
    order; repeated lines are summed and an edge and its reverse are merged by taking the larger weight.

    Args:
        path: the file.
        self_loops: set a unit self-loop on every vertex (the kernel needs positive self-loops).

    Returns:
        A symmetric float64 ``csr_array``.

    Example:
        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "g.txt"
        >>> _ = f.write_text("0 1\\n1 2\\n")
        >>> load_graph(f).shape
        (3, 3)
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"graph file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        A = sp.csr_array(sp.load_npz(path), dtype=np.float64)
    elif suffix == ".mtx":
        from scipy.io import mmread

        A = sp.csr_array(mmread(path), dtype=np.float64)
    elif suffix in (".txt", ".tsv", ".csv", ".edges", ".el"):
        delim = "," if suffix == ".csv" else None
        rows = []
        with path.open() as fh:
            for line in fh:
                line = line.strip()
                if not line or line[0] in "#%":
                    continue
                rows.append(line.replace(",", " ").split() if delim else line.split())
        if not rows:
            raise ValueError(f"no edges in {path}")
        width = len(rows[0])
        if width not in (2, 3) or any(len(r) != width for r in rows):
            raise ValueError(f"{path}: every line must have 2 (u v) or 3 (u v weight) columns")
        arr = np.asarray(rows)
        ids, inv = np.unique(arr[:, :2].astype(np.int64).ravel(), return_inverse=True)
        inv = inv.reshape(-1, 2)
        w = arr[:, 2].astype(np.float64) if width == 3 else np.ones(len(rows))
        A = sp.csr_array(sp.coo_array((w, (inv[:, 0], inv[:, 1])), shape=(ids.size, ids.size)).tocsr())
        A.sum_duplicates()
    else:
        raise ValueError(
            f"unsupported graph file type {suffix!r}; use .txt/.tsv/.csv edge lists, .npz or .mtx"
        )
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"{path}: adjacency is not square, shape {A.shape}")
    A = sp.csr_array(A.maximum(A.T))
    if self_loops:
        A = A.tolil()
        A.setdiag(1.0)
        A = sp.csr_array(A)
    A.sort_indices()
    return A
