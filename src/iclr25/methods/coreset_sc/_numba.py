"""Numba-compiled sparse D² seeding (optional ``[coreset_sc]`` extra); same output as the numpy path.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. Implements the seeding of Sec. 4 (sum tree over ``d_vΔ_v``, reference seed
``x*``, neighbour-only repairs) as one compiled loop. It performs the same floating-point operations in
the same order as :func:`iclr25.methods.coreset_sc.sampling._sparse_seeding` and consumes the same
random numbers, so the seeds, Δ and assignment are bit-identical.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from iclr25._core.registry import require
from iclr25.methods.coreset_sc.kernel import INDEFINITE_MESSAGE
from iclr25.methods.coreset_sc.sampling import SeedingResult, SumTree, _seed_draws

_KERNEL = None


def _compile():  # pragma: no cover - exercised only when numba is installed
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    numba = require("numba", "coreset_sc")

    @numba.njit(cache=False)
    def update(tree, size, leaf, value):
        node = leaf + size
        tree[node] = value
        node >>= 1
        while node >= 1:
            tree[node] = tree[2 * node] + tree[2 * node + 1]
            node >>= 1

    @numba.njit(cache=False)
    def find(tree, size, n, u):
        i = 1
        while i < size:
            left = tree[2 * i]
            if u < left or tree[2 * i + 1] <= 0.0:
                i = 2 * i
            else:
                u -= left
                i = 2 * i + 1
        return min(i - size, n - 1)

    @numba.njit(cache=False)
    def add_seed(c, slot, indptr, indices, data, d, s, delta, assignment, tree, size, seeds):
        seeds[slot] = c
        evals = 0
        clipped = False
        for e in range(indptr[c], indptr[c + 1]):
            u = indices[e]
            if u == c:
                continue
            evals += 1
            dist = s[c] + s[u] - 2.0 * data[e] / (d[c] * d[u])
            if dist < 0.0:
                clipped = True
                dist = 0.0
            if dist < delta[u]:
                delta[u] = dist
                assignment[u] = slot
                update(tree, size, u, d[u] * delta[u])
        delta[c] = 0.0
        assignment[c] = slot
        update(tree, size, c, d[c] * delta[c])
        return evals, clipped

    @numba.njit(cache=False)
    def run(
        indptr, indices, data, d, s, ref, insert_ref, first, uniforms, n_seeds, delta, assignment, tree, size
    ):
        n = d.size
        total_seeds = n_seeds + (1 if insert_ref else 0)
        seeds = np.empty(total_seeds, dtype=np.int64)
        evals = n
        clipped = False
        slot = 0
        if insert_ref:
            e, cl = add_seed(ref, slot, indptr, indices, data, d, s, delta, assignment, tree, size, seeds)
            evals += e
            clipped = clipped or cl
            slot += 1
        if n_seeds >= 1:
            e, cl = add_seed(first, slot, indptr, indices, data, d, s, delta, assignment, tree, size, seeds)
            evals += e
            clipped = clipped or cl
            slot += 1
        for j in range(uniforms.size):
            total = tree[1]
            u = uniforms[j]
            c = find(tree, size, n, total * u) if total > 0.0 else min(int(u * n), n - 1)
            e, cl = add_seed(c, slot, indptr, indices, data, d, s, delta, assignment, tree, size, seeds)
            evals += e
            clipped = clipped or cl
            slot += 1
        return seeds, evals, clipped

    _KERNEL = run
    return run


def numba_sparse_seeding(
    A: sp.csr_array,
    d: np.ndarray,
    s: np.ndarray,
    n_seeds: int,
    rng: np.random.RandomState,
    *,
    insert_reference: bool = True,
) -> SeedingResult:
    """Compiled twin of ``_sparse_seeding`` on a validated graph (needs the ``[coreset_sc]`` extra: numba)."""
    run = _compile()
    n = d.size
    ref = int(np.argmin(s))
    delta = s + s[ref]
    assignment = np.zeros(n, dtype=np.int64)
    tree = SumTree(d * delta)
    first, uniforms = _seed_draws(n, n_seeds, rng)
    seeds, evals, clipped = run(
        A.indptr.astype(np.int64),
        A.indices.astype(np.int64),
        A.data,
        d,
        s,
        ref,
        insert_reference,
        first,
        uniforms,
        n_seeds,
        delta,
        assignment,
        tree.tree,
        tree.size,
    )
    if clipped:
        warnings.warn(INDEFINITE_MESSAGE, UserWarning, stacklevel=3)
    return SeedingResult(seeds, delta, assignment, int(evals), ref if insert_reference else -1)
