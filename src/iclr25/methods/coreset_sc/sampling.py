"""Sum tree, sparse D² seeding with neighbour-only repairs, coreset sampling and the coreset graph.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227.

Implements the coreset construction of the paper (Sec. 4, "fast coreset construction"):

1. D² seeding in the kernel space of :mod:`.kernel` in ``Õ(n·min(k, d_avg))`` time. A reference seed
   ``x* = argmin_v s_v`` is inserted first so every ``Δ_v`` starts at the exact distance to a
   non-neighbouring seed, ``s_v + s_{x*}``; every later seed can then only improve its neighbours, and a
   sum tree over ``d_v Δ_v`` keeps sampling and updates at ``O(log n)``.
2. Sensitivity sampling of ``m`` vertices with ``p_v ∝ d_vΔ_v/cost + d_v/W*`` and weights
   ``d_v/(m p_v)``; duplicates are merged by summing their weights.
3. The coreset graph ``A_C = W_C K[C,C] W_C`` (Theorem: an α-approximate Ncut of ``A_C`` is an
   ``O(α)``-approximate Ncut of the graph).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

from iclr25.methods.coreset_sc.kernel import (
    INDEFINITE_MESSAGE,
    _row_distances,
    check_adjacency,
    degrees,
    self_affinities,
)

__all__ = [
    "SeedingResult",
    "SumTree",
    "coreset_graph",
    "sample_coreset",
    "sampling_probabilities",
    "sparse_kernel_seeding",
]

Sampling = Literal["smoothed", "sensitivity", "uniform", "degree"]


class SumTree:
    """A complete binary tree whose internal nodes hold the sums of their leaves.

    Leaf updates cost ``O(log n)`` per changed leaf (parents are recomputed from their children, so the
    root is always the exact sum of the current leaves) and :meth:`sample` draws a leaf with probability
    proportional to its value in ``O(log n)``.

    Args:
        values: non-negative leaf values, shape (n,).

    Example:
        >>> t = SumTree([1.0, 3.0])
        >>> t.total, t.find(0.5), t.find(1.5)
        (4.0, 0, 1)
    """

    def __init__(self, values: Any) -> None:
        v = np.asarray(values, dtype=np.float64)
        if v.ndim != 1 or v.size == 0:
            raise ValueError("SumTree needs a non-empty 1-D array of values")
        if np.any(v < 0) or not np.all(np.isfinite(v)):
            raise ValueError("SumTree values must be finite and non-negative")
        self.n = v.size
        self.size = 1 << max(0, int(np.ceil(np.log2(self.n))))
        self.tree = np.zeros(2 * self.size, dtype=np.float64)
        self.tree[self.size : self.size + self.n] = v
        for lo in _levels(self.size):
            idx = np.arange(lo, 2 * lo)
            self.tree[idx] = self.tree[2 * idx] + self.tree[2 * idx + 1]

    @property
    def total(self) -> float:
        """The sum of all leaves (the root)."""
        return float(self.tree[1])

    @property
    def leaves(self) -> np.ndarray:
        """A view of the leaf values, shape (n,)."""
        return self.tree[self.size : self.size + self.n]

    def update(self, index: Any, values: Any) -> None:
        """Set leaves ``index`` to ``values`` and recompute every ancestor from its children."""
        idx = np.asarray(index, dtype=np.int64).ravel()
        vals = np.broadcast_to(np.asarray(values, dtype=np.float64), idx.shape)
        if idx.size == 0:
            return
        node = idx + self.size
        self.tree[node] = vals
        node = np.unique(node >> 1)
        while node[0] >= 1:
            self.tree[node] = self.tree[2 * node] + self.tree[2 * node + 1]
            if node[0] == 1:
                break
            node = np.unique(node >> 1)

    def find(self, u: float) -> int:
        """The leaf where the prefix sum first exceeds ``u`` (``0 ≤ u < total``)."""
        i = 1
        tree = self.tree
        while i < self.size:
            left = tree[2 * i]
            if u < left or tree[2 * i + 1] <= 0.0:
                i = 2 * i
            else:
                u -= left
                i = 2 * i + 1
        return min(i - self.size, self.n - 1)

    def sample(self, rng: np.random.RandomState) -> int:
        """Draw a leaf with probability ``value / total``."""
        return self.find(rng.uniform(0.0, self.total))


def _levels(size: int) -> list[int]:
    """Start indices of the internal levels, bottom-up: size/2, size/4, ..., 1."""
    out = []
    lo = size >> 1
    while lo >= 1:
        out.append(lo)
        lo >>= 1
    return out


@dataclass
class SeedingResult:
    """Output of D² seeding in kernel space.

    Args:
        seeds: seed vertices in insertion order, shape (k'+1,) (the reference ``x*`` first).
        delta: ``Δ_v``, squared kernel distance of each vertex to its nearest seed, shape (n,).
        assignment: index into ``seeds`` of each vertex's nearest seed, shape (n,).
        n_evals: number of kernel-distance evaluations performed.
        reference: ``x*`` (``-1`` if it was not inserted).
    """

    seeds: np.ndarray
    delta: np.ndarray
    assignment: np.ndarray
    n_evals: int
    reference: int


def _seed_draws(n: int, n_seeds: int, rng: np.random.RandomState) -> tuple[int, np.ndarray]:
    """The random numbers of seeding, drawn up front so every backend consumes ``rng`` identically."""
    first = int(rng.randint(n))
    return first, rng.random_sample(max(n_seeds - 1, 0))


def _sparse_seeding(
    A: sp.csr_array,
    d: np.ndarray,
    s: np.ndarray,
    n_seeds: int,
    rng: np.random.RandomState,
    *,
    insert_reference: bool = True,
) -> SeedingResult:
    """Sparse D² seeding on a validated graph (``insert_reference=False`` exists only to test the trap)."""
    n = d.size
    indptr, indices, data = A.indptr, A.indices, A.data
    ref = int(np.argmin(s))
    # Every vertex starts at its distance to a non-neighbouring x*: s_v + s_{x*}. Since s_{x*} is the
    # smallest self-affinity, a non-neighbour c of v is never closer than this: s_v + s_c ≥ s_v + s_{x*}.
    delta = s + s[ref]
    assignment = np.zeros(n, dtype=np.int64)
    tree = SumTree(d * delta)
    seeds: list[int] = []
    n_evals = n
    clipped = False

    def add_seed(c: int) -> None:
        nonlocal n_evals, clipped
        slot = len(seeds)
        seeds.append(c)
        nb, dist = _row_distances(indptr, indices, data, d, s, c)
        n_evals += nb.size
        if np.any(dist < 0):
            clipped = True
            dist = np.maximum(dist, 0.0)
        better = dist < delta[nb]
        changed = nb[better]
        delta[changed] = dist[better]
        assignment[changed] = slot
        delta[c] = 0.0
        assignment[c] = slot
        changed = np.append(changed, c)
        tree.update(changed, d[changed] * delta[changed])

    first, uniforms = _seed_draws(n, n_seeds, rng)
    if insert_reference:
        add_seed(ref)
    if n_seeds >= 1:
        add_seed(first)
    for u in uniforms:
        total = tree.total
        # With every vertex on a seed (total 0) the draw falls back to a uniform vertex.
        c = tree.find(total * u) if total > 0.0 else min(int(u * n), n - 1)
        add_seed(c)
    if clipped:
        warnings.warn(INDEFINITE_MESSAGE, UserWarning, stacklevel=3)
    return SeedingResult(
        seeds=np.asarray(seeds, dtype=np.int64),
        delta=delta,
        assignment=assignment,
        n_evals=int(n_evals),
        reference=ref if insert_reference else -1,
    )


def sparse_kernel_seeding(
    A: Any, n_seeds: int, *, shift: float = 0.0, random_state: Any = None, check_input: bool = True
) -> SeedingResult:
    """D² (k-means++) seeding in the kernel space of the graph, touching only neighbours of seeds.

    Inserts ``x* = argmin s``, then one uniformly random seed, then ``n_seeds − 1`` seeds drawn with
    probability ∝ ``d_v Δ_v``; after each insertion only the seed's neighbours are repaired.

    Args:
        A: adjacency with positive self-loops, shape (n, n).
        n_seeds: k', the number of sampled seeds (the reference seed comes on top).
        shift: σ, the kernel's diagonal shift.
        random_state: seed, ``np.random.RandomState`` or None.
        check_input: validate ``A`` with :func:`check_adjacency` (O(nnz), with a transpose for the
            symmetry test). Pass False only for a ``csr_array`` that ``check_adjacency`` returned, e.g.
            to time the seeding alone.

    Returns:
        A :class:`SeedingResult`; ``n_evals = n + Σ_seeds |N(c) \\ {c}|``.

    References:
        Sec. 4 of the paper; Arthur and Vassilvitskii (2007) for D² sampling.

    Example:
        >>> from iclr25.methods.coreset_sc import sbm
        >>> A, _ = sbm(20, 3, 0.5, 0.01, random_state=0)
        >>> sparse_kernel_seeding(A, 6, random_state=0).seeds.shape
        (7,)
    """
    A = check_adjacency(A) if check_input else A
    n = A.shape[0]
    if not 1 <= n_seeds <= n:
        raise ValueError(f"n_seeds must be in [1, n={n}], got {n_seeds}")
    d = degrees(A)
    s = self_affinities(A, d, shift)
    return _sparse_seeding(A, d, s, int(n_seeds), check_random_state(random_state))


def sampling_probabilities(
    d: np.ndarray, seeding: SeedingResult, sampling: Sampling = "smoothed"
) -> np.ndarray:
    """The coreset sampling distribution ``p`` (sums to 1).

    Args:
        d: degrees, shape (n,).
        seeding: the seeding the distribution is built from.
        sampling: ``"smoothed"``: ``p_v ∝ d_vΔ_v/cost + d_v/W*`` with ``W*`` the total degree of the seeds;
            ``"sensitivity"``: ``p_v ∝ d_vΔ_v/cost + d_v/vol(seed cluster of v)``; ``"uniform"``;
            ``"degree"``: ``p_v ∝ d_v``.

    Returns:
        float64 array, shape (n,).

    Example:
        >>> import numpy as np
        >>> res = SeedingResult(np.array([0]), np.zeros(2), np.zeros(2, int), 2, 0)
        >>> sampling_probabilities(np.array([1.0, 3.0]), res, "degree").tolist()
        [0.25, 0.75]
    """
    d = np.asarray(d, dtype=np.float64)
    n = d.size
    if sampling == "uniform":
        return np.full(n, 1.0 / n)
    if sampling == "degree":
        return d / d.sum()
    dd = d * seeding.delta
    cost = dd.sum()
    # With zero cost (every vertex on a seed) the D² term vanishes and only the degree term remains.
    p = dd / cost if cost > 0 else np.zeros(n)
    if sampling == "smoothed":
        p = p + d / d[np.unique(seeding.seeds)].sum()
    elif sampling == "sensitivity":
        vol = np.bincount(seeding.assignment, weights=d, minlength=seeding.seeds.size)
        p = p + d / vol[seeding.assignment]
    else:
        raise ValueError(f"sampling must be smoothed/sensitivity/uniform/degree, got {sampling!r}")
    return p / p.sum()


def sample_coreset(
    d: np.ndarray,
    seeding: SeedingResult,
    size: int,
    *,
    sampling: Sampling = "smoothed",
    probabilities: np.ndarray | None = None,
    random_state: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``size`` vertices i.i.d. from :func:`sampling_probabilities`, weight and merge them.

    Each draw of ``v`` carries weight ``d_v/(m p_v)``; a vertex drawn ``c`` times gets ``c·d_v/(m p_v)``,
    so the expected total weight is ``vol(V)``.

    Args:
        d: degrees, shape (n,).
        seeding: the seeding result.
        size: m, the number of draws.
        sampling: see :func:`sampling_probabilities`.
        probabilities: a distribution ``p`` over the vertices to draw from instead (shape (n,),
            positive where it can be drawn, summing to 1); ``sampling`` is then ignored. Weights stay
            ``d_v/(m p_v)``, so the coreset is unbiased for any ``p``.
        random_state: seed, ``np.random.RandomState`` or None.

    Returns:
        ``(indices, weights)``: distinct sorted vertices, shape (|C|,), and their merged weights.

    Example:
        >>> from iclr25.methods.coreset_sc import sbm, degrees
        >>> A, _ = sbm(20, 3, 0.5, 0.01, random_state=0)
        >>> seeding = sparse_kernel_seeding(A, 6, random_state=0)
        >>> idx, w = sample_coreset(degrees(A), seeding, 30, random_state=0)
        >>> idx.size == w.size
        True
    """
    if size < 1:
        raise ValueError(f"coreset size must be ≥ 1, got {size}")
    rng = check_random_state(random_state)
    d = np.asarray(d, dtype=np.float64)
    if probabilities is None:
        p = sampling_probabilities(d, seeding, sampling)
    else:
        p = np.asarray(probabilities, dtype=np.float64)
        if p.shape != d.shape or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
            raise ValueError(f"probabilities must be a distribution of shape {d.shape}")
    cdf = np.cumsum(p)
    draws = np.searchsorted(cdf, rng.uniform(0.0, cdf[-1], size=size), side="right")
    draws = np.minimum(draws, d.size - 1)
    idx, counts = np.unique(draws, return_counts=True)
    return idx, counts * d[idx] / (size * p[idx])


def coreset_graph(
    A: Any,
    indices: np.ndarray,
    weights: np.ndarray,
    *,
    shift: float = 0.0,
    degrees_: np.ndarray | None = None,
) -> sp.csr_array:
    """The reweighted coreset graph ``A_C = W_C K[C,C] W_C``.

    Off-diagonal entries are ``w_i w_j A_ij/(d_i d_j)`` and diagonal entries ``w_i² A_ii/d_i² + σ w_i²/d_i``.
    No entry is pruned: the diagonal is about ``d²`` times the off-diagonal entries.

    Args:
        A: adjacency (validated), shape (n, n).
        indices: coreset vertices, shape (|C|,).
        weights: their weights, shape (|C|,).
        shift: σ.
        degrees_: degrees of ``A`` if already computed.

    Returns:
        float64 ``csr_array``, shape (|C|, |C|).

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> A = sp.csr_array([[1.0, 1.0], [1.0, 1.0]])
        >>> coreset_graph(A, np.array([0, 1]), np.array([2.0, 2.0])).toarray().tolist()
        [[1.0, 1.0], [1.0, 1.0]]
    """
    A = sp.csr_array(A, dtype=np.float64)
    d = degrees(A) if degrees_ is None else degrees_
    idx = np.asarray(indices, dtype=np.int64)
    scale = np.asarray(weights, dtype=np.float64) / d[idx]
    sub = sp.csr_array(A[idx][:, idx])
    S = sp.dia_array((scale[None, :], [0]), shape=(idx.size, idx.size))
    out = S @ sub @ S
    if shift != 0.0:
        out = out + sp.dia_array(((shift * weights**2 / d[idx])[None, :], [0]), shape=(idx.size, idx.size))
    out = sp.csr_array(out)
    out.sort_indices()
    return out
