"""An exactly solvable lattice-protein world: compact structures, MJ contact energy, MCMC MSAs.

Test bed for *Fast Uncovering of Protein Sequence Diversity from Structure*, Luca Alessandro Silva,
Barthelemy Meynard-Piganeau, Carlo Lucibello, Christoph Feinauer, ICLR 2025, arXiv:2406.11975.
The paper trains on CATH domains with MMseqs2 MSAs and checks folding with AlphaFold2; here every
quantity is exact instead:

- structures: all maximally compact self-avoiding walks (Hamiltonian paths) of a grid, one per
  distinct contact map (the 8 grid symmetries share a map);
- energy ``E(s, S) = sum_{(i,j) in contacts(S)} MJ(s_i, s_j)`` with the Miyazawa–Jernigan (1996)
  residue contact energies (Table 3, in units of RT);
- fold stability ``P_nat(s|S*) = exp(-E(s,S*)/T) / sum_S exp(-E(s,S)/T)`` over the whole set;
- natural-like MSAs: parallel Metropolis chains on ``pi(s) ∝ P_nat(s|S*)^beta``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .data import LATTICE_ALPHABET

__all__ = [
    "MJ_ORDER",
    "MJ_TABLE",
    "LatticeStructure",
    "LatticeWorld",
    "contact_energy",
    "count_hamiltonian_paths_dp",
    "enumerate_compact_walks",
    "mj_matrix",
    "sample_msa",
]

#: Residue order of the Miyazawa–Jernigan table below.
MJ_ORDER = "CMFILVWYAGTSNQDEHRKP"

# Miyazawa & Jernigan (1996), J. Mol. Biol. 256:623, Table 3: contact energies e_ij in RT units,
# upper triangle, rows in MJ_ORDER (row r lists e_{r, r..19}).
_MJ_UPPER = (
    "-5.44 -4.99 -5.80 -5.50 -5.83 -4.96 -4.95 -4.16 -3.57 -3.16 -3.11 -2.86 -2.59 -2.85 -2.41 -2.27 -3.60 "
    "-2.57 -1.95 -3.07 "
    "-5.46 -6.56 -6.02 -6.41 -5.32 -5.55 -4.91 -3.94 -3.39 -3.51 -3.03 -2.95 -3.30 -2.57 -2.89 -3.98 -3.12 "
    "-2.48 -3.45 "
    "-7.26 -6.84 -7.28 -6.29 -6.16 -5.66 -4.81 -4.13 -4.28 -4.02 -3.75 -4.10 -3.48 -3.56 -4.77 -3.98 -3.36 "
    "-4.25 "
    "-6.54 -7.04 -6.05 -5.78 -5.25 -4.58 -3.78 -4.03 -3.52 -3.24 -3.67 -3.17 -3.27 -4.14 -3.63 -3.01 -3.76 "
    "-7.37 -6.48 -6.14 -5.67 -4.91 -4.16 -4.34 -3.92 -3.74 -4.04 -3.40 -3.59 -4.54 -4.03 -3.37 -4.20 "
    "-5.52 -5.18 -4.62 -4.04 -3.38 -3.46 -3.05 -2.83 -3.07 -2.48 -2.67 -3.58 -3.07 -2.49 -3.32 "
    "-5.06 -4.66 -3.82 -3.42 -3.22 -2.99 -3.07 -3.11 -2.84 -2.99 -3.98 -3.41 -2.69 -3.73 "
    "-4.17 -3.36 -3.01 -3.01 -2.78 -2.76 -2.97 -2.76 -2.79 -3.52 -3.16 -2.60 -3.19 "
    "-2.72 -2.31 -2.32 -2.01 -1.84 -1.89 -1.70 -1.51 -2.41 -1.83 -1.31 -2.03 "
    "-2.24 -2.08 -1.82 -1.74 -1.66 -1.59 -1.22 -2.15 -1.72 -1.15 -1.87 "
    "-2.12 -1.96 -1.88 -1.90 -1.80 -1.74 -2.42 -1.90 -1.31 -1.90 "
    "-1.67 -1.58 -1.49 -1.63 -1.48 -2.11 -1.62 -1.05 -1.57 "
    "-1.68 -1.71 -1.68 -1.51 -2.08 -1.64 -1.21 -1.53 "
    "-1.54 -1.46 -1.42 -1.98 -1.80 -1.29 -1.73 "
    "-1.21 -1.02 -2.32 -2.29 -1.68 -1.33 "
    "-0.91 -2.15 -2.27 -1.80 -1.26 "
    "-3.05 -2.16 -1.35 -2.25 "
    "-1.55 -0.59 -1.70 "
    "-0.12 -0.97 "
    "-1.75"
)


def mj_matrix(alphabet: str = LATTICE_ALPHABET) -> np.ndarray:
    """The symmetric 20×20 Miyazawa–Jernigan contact-energy matrix in a given residue order.

    Args:
        alphabet: a permutation of the 20 amino-acid letters.

    Returns:
        ``MJ[a, b]`` in RT units, float64, symmetric.

    Shape:
        ``[20, 20]``.

    References:
        Miyazawa & Jernigan (1996), Table 3.

    Example:
        >>> m = mj_matrix()
        >>> bool(np.allclose(m, m.T)), float(m[LATTICE_ALPHABET.index("L"), LATTICE_ALPHABET.index("L")])
        (True, -7.37)
    """
    if sorted(alphabet) != sorted(MJ_ORDER):
        raise ValueError(f"alphabet must be a permutation of {MJ_ORDER!r}, got {alphabet!r}")
    vals = [float(v) for v in _MJ_UPPER.split()]
    m = np.zeros((20, 20))
    iu = np.triu_indices(20)
    m[iu] = vals  # row-major upper triangle matches the table's layout
    m = m + np.triu(m, 1).T
    perm = [MJ_ORDER.index(a) for a in alphabet]
    return m[np.ix_(perm, perm)]


#: The MJ matrix in the lattice alphabet's order (``LATTICE_ALPHABET``).
MJ_TABLE = mj_matrix()


def contact_energy(kind: str = "mj", scale: float = 1.0) -> np.ndarray:
    """A 20×20 contact energy derived from the MJ table.

    ``"mj"`` is the table itself. ``"mj_residual"`` removes its additive part (row and column means,
    ``e_ab - e_a. - e_.b + e_..``): the additive part is a per-residue hydrophobicity that, on compact
    structures with equal contact counts, only rewards burying residues (conservation, no covariation);
    the residual is the pair-specific part that makes contacting residues coevolve.

    Args:
        kind: "mj" or "mj_residual".
        scale: multiplies the matrix.

    Returns:
        ``[20, 20]`` symmetric, in ``LATTICE_ALPHABET`` order.

    Example:
        >>> r = contact_energy("mj_residual")
        >>> bool(abs(r.mean(0)).max() < 1e-12)
        True
    """
    if kind == "mj":
        m = MJ_TABLE.copy()
    elif kind == "mj_residual":
        m = MJ_TABLE - MJ_TABLE.mean(0, keepdims=True) - MJ_TABLE.mean(1, keepdims=True) + MJ_TABLE.mean()
    else:
        raise ValueError(f"kind must be 'mj' or 'mj_residual', got {kind!r}")
    return scale * m


def _grid_nodes(shape: tuple[int, ...]) -> tuple[np.ndarray, list[list[int]]]:
    coords = np.array(list(np.ndindex(*shape)), dtype=np.int64)
    index = {tuple(c): i for i, c in enumerate(coords.tolist())}
    nbrs: list[list[int]] = []
    for c in coords.tolist():
        row = []
        for ax in range(len(shape)):
            for step in (-1, 1):
                d = list(c)
                d[ax] += step
                if 0 <= d[ax] < shape[ax]:
                    row.append(index[tuple(d)])
        nbrs.append(row)
    return coords, nbrs


@functools.lru_cache(maxsize=8)
def enumerate_compact_walks(shape: tuple[int, ...]) -> np.ndarray:
    """All directed Hamiltonian walks (maximally compact conformations) of a grid, by DFS.

    Args:
        shape: grid side lengths, e.g. ``(5, 5)`` or ``(3, 3, 3)``.

    Returns:
        Walks as site indices into ``np.ndindex(*shape)`` order, int64 array (cached, read-only).

    Shape:
        ``[n_walks, prod(shape)]``; 552 walks on 4×4 and 8,648 on 5×5.

    Example:
        >>> enumerate_compact_walks((3, 3)).shape
        (40, 9)
    """
    if len(shape) not in (2, 3) or min(shape) < 1:
        raise ValueError(f"shape must be a 2-D or 3-D grid, got {shape}")
    _, nbrs = _grid_nodes(shape)
    n = len(nbrs)
    full = (1 << n) - 1
    out: list[list[int]] = []
    path: list[int] = []

    def dfs(v: int, mask: int) -> None:
        path.append(v)
        if mask == full:
            out.append(list(path))
        else:
            for w in nbrs[v]:
                if not mask >> w & 1:
                    dfs(w, mask | 1 << w)
        path.pop()

    for start in range(n):
        dfs(start, 1 << start)
    arr = np.array(out, dtype=np.int64).reshape(-1, n)
    arr.setflags(write=False)
    return arr


def count_hamiltonian_paths_dp(shape: tuple[int, ...]) -> int:
    """Count directed Hamiltonian paths by dynamic programming over visited sets (Held–Karp style).

    Independent of the DFS in :func:`enumerate_compact_walks`; feasible up to about 16 sites.

    Args:
        shape: grid side lengths.

    Returns:
        The number of directed Hamiltonian paths.

    Example:
        >>> count_hamiltonian_paths_dp((2, 2))
        8
    """
    _, nbrs = _grid_nodes(shape)
    n = len(nbrs)
    if n > 20:
        raise ValueError(f"{n} sites is too many for the subset DP (at most 20)")
    dp = np.zeros((1 << n, n), dtype=np.int64)  # dp[mask, v]: paths covering mask ending at v
    for v in range(n):
        dp[1 << v, v] = 1
    for mask in range(1, 1 << n):
        row = dp[mask]
        for v in np.flatnonzero(row):
            for w in nbrs[v]:
                if not mask >> w & 1:
                    dp[mask | 1 << w, w] += row[v]
    return int(dp[(1 << n) - 1].sum())


@dataclass(frozen=True, eq=False)
class LatticeStructure:
    """One compact lattice conformation.

    Args:
        coords: lattice coordinates of residues 0..L-1, ``[L, D]`` int.
        contacts: non-bonded lattice-neighbour pairs ``(i, j)``, ``i < j``, ``[C, 2]`` int.
        name: identifier (used as the domain id).

    Example:
        >>> s = LatticeStructure.from_coords(np.array([[0, 0], [0, 1], [1, 1], [1, 0]]))
        >>> s.contacts.tolist(), s.contact_map().shape
        ([[0, 3]], (4, 4))
    """

    coords: np.ndarray
    contacts: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        if self.coords.ndim != 2 or len(self.coords) < 2:
            raise ValueError(f"coords must be [L>=2, D], got shape {self.coords.shape}")
        if self.contacts.ndim != 2 or self.contacts.shape[1] != 2 or len(self.contacts) == 0:
            raise ValueError(f"structure {self.name!r} has no contacts; a fold needs at least one contact")

    @property
    def length(self) -> int:
        """Number of residues L."""
        return len(self.coords)

    @classmethod
    def from_coords(cls, coords: np.ndarray, name: str = "") -> LatticeStructure:
        """Build from a self-avoiding walk's coordinates; contacts are unit-distance, non-bonded pairs."""
        coords = np.asarray(coords, dtype=np.int64)
        d = np.abs(coords[:, None, :] - coords[None, :, :]).sum(-1)
        i, j = np.nonzero(np.triu(d == 1, k=2))
        return cls(coords=coords, contacts=np.stack([i, j], 1).astype(np.int64), name=name)

    def contact_map(self) -> np.ndarray:
        """Symmetric 0/1 contact map ``[L, L]`` (float32)."""
        c = np.zeros((self.length, self.length), dtype=np.float32)
        c[self.contacts[:, 0], self.contacts[:, 1]] = 1.0
        return c + c.T


class LatticeWorld:
    """All distinct compact structures of a grid and exact MJ folding thermodynamics.

    Args:
        shape: grid, e.g. ``(4, 4)``, ``(5, 5)`` or ``(3, 3, 3)``.
        temperature: T in ``P_nat``, in the MJ table's RT units.
        energy: the 20×20 contact-energy matrix (default: the MJ table); see :func:`contact_energy`.

    Attributes:
        structures: one :class:`LatticeStructure` per distinct contact map.
        pairs: every residue pair that is a contact in some structure, ``[P, 2]``.
        membership: ``[n_structures, P]`` 0/1 float32; structure S's energy is
            ``membership[S] @ MJ[s_i, s_j]``.

    Example:
        >>> w = LatticeWorld((4, 4))
        >>> len(w.structures), w.length
        (69, 16)
    """

    def __init__(
        self, shape: tuple[int, ...], temperature: float = 1.0, energy: np.ndarray | None = None
    ) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        energy = MJ_TABLE if energy is None else np.asarray(energy, dtype=np.float64)
        if energy.shape != (20, 20) or not np.allclose(energy, energy.T) or not np.isfinite(energy).all():
            raise ValueError("energy must be a finite symmetric 20x20 matrix")
        self.energy = energy
        self.shape = tuple(shape)
        self.temperature = float(temperature)
        self.structures = _distinct_structures(self.shape)
        self.length = self.structures[0].length
        pair_index: dict[tuple[int, int], int] = {}
        for s in self.structures:
            for i, j in s.contacts.tolist():
                pair_index.setdefault((i, j), len(pair_index))
        self.pairs = np.array(sorted(pair_index), dtype=np.int64)
        lookup = {tuple(p): k for k, p in enumerate(self.pairs.tolist())}
        mem = np.zeros((len(self.structures), len(self.pairs)), dtype=np.float32)
        for n, s in enumerate(self.structures):
            mem[n, [lookup[tuple(p)] for p in s.contacts.tolist()]] = 1.0
        self.membership = mem
        self._mem_t = torch.from_numpy(mem)
        self._mj_t = torch.from_numpy(energy.astype(np.float32))
        self._pi = torch.from_numpy(self.pairs[:, 0])
        self._pj = torch.from_numpy(self.pairs[:, 1])
        # pairs touching each site: mutations only change these pair energies
        self._site_pairs = [
            torch.from_numpy(np.flatnonzero((self.pairs == i).any(1))) for i in range(self.length)
        ]

    def _check(self, seqs: Tensor | np.ndarray) -> Tensor:
        # the world computes on the CPU: tokens on another device are copied here
        if isinstance(seqs, Tensor):
            t = seqs.detach().cpu().long()
        else:
            t = torch.as_tensor(np.asarray(seqs), dtype=torch.long)
        if t.ndim == 1:
            t = t[None]
        if t.ndim != 2 or t.shape[1] != self.length:
            raise ValueError(f"sequences must be [N, {self.length}], got {tuple(t.shape)}")
        if t.numel() and (t.min() < 0 or t.max() >= 20):
            raise ValueError("sequence tokens must lie in [0, 20)")
        return t

    def pair_energies(self, seqs: Tensor | np.ndarray) -> Tensor:
        """``MJ(s_i, s_j)`` for every candidate contact pair, ``[N, P]`` float32."""
        t = self._check(seqs)
        return self._mj_t[t[:, self._pi], t[:, self._pj]]

    def energies(self, seqs: Tensor | np.ndarray) -> Tensor:
        """``E(s, S)`` for every sequence and every structure, ``[N, n_structures]`` float32."""
        return self.pair_energies(seqs) @ self._mem_t.T

    def log_p_nat(self, seqs: Tensor | np.ndarray, target: int | Sequence[int]) -> Tensor:
        """``log P_nat(s | S_target)`` (exact, over all structures).

        Args:
            seqs: ``[N, L]`` tokens in ``LATTICE_ALPHABET``.
            target: one structure index for all rows, or one per row.

        Returns:
            ``[N]`` float32 log-probabilities.
        """
        e = self.energies(seqs)
        return _log_p_from_energies(e, target, self.temperature)

    def p_nat(self, seqs: Tensor | np.ndarray, target: int | Sequence[int]) -> Tensor:
        """``P_nat(s | S_target)``, ``[N]``."""
        return self.log_p_nat(seqs, target).exp()

    def delta_energies(self, seqs: Tensor, site: int, new: Tensor) -> Tensor:
        """Energy change of every structure when ``seqs[:, site]`` becomes ``new`` (only site's pairs).

        Returns:
            ``[N, n_structures]``.
        """
        idx = self._site_pairs[site]
        pi, pj = self._pi[idx], self._pj[idx]
        old_e = self._mj_t[seqs[:, pi], seqs[:, pj]]
        s2 = seqs.clone()
        s2[:, site] = new
        new_e = self._mj_t[s2[:, pi], s2[:, pj]]
        return (new_e - old_e) @ self._mem_t[:, idx].T


def _heat_bath(
    world: LatticeWorld, targets: Tensor, s: Tensor, gamma: float, sweeps: int, generator: torch.Generator
) -> Tensor:
    """Heat-bath sweeps on ``exp(-gamma E(s, S_target))`` (contacts of each chain's own target only)."""
    n, length = s.shape
    # neighbour table: contact partners of each site in each target, padded with index `length`
    deg = 2 * len(world.shape) - 1  # lattice neighbours minus at least one bond
    nb = torch.full((len(world.structures), length, deg), length, dtype=torch.long)
    fill = torch.zeros(len(world.structures), length, dtype=torch.long)
    for k, st in enumerate(world.structures):
        for i, j in st.contacts.tolist():
            nb[k, i, fill[k, i]] = j
            nb[k, j, fill[k, j]] = i
            fill[k, i] += 1
            fill[k, j] += 1
    nb = nb[targets]  # [n, L, deg]
    mj = torch.cat([world._mj_t, torch.zeros(20, 1)], 1)  # column 20: empty partner
    s_ext = torch.cat([s, torch.full((n, 1), 20, dtype=torch.long)], 1)
    rows = torch.arange(n)[:, None]
    for _ in range(sweeps):
        for i in range(length):
            partners = s_ext[rows, nb[:, i]]  # [n, deg]
            field = mj[:, partners].sum(-1).T  # [n, 20]: E contribution of each letter at i
            p = torch.softmax(-gamma * field, -1).cumsum(-1)
            u = torch.rand(n, 1, generator=generator)
            s_ext[:, i] = (p < u).sum(-1).clamp(max=19)
    return s_ext[:, :length].clone()


def _log_p_from_energies(e: Tensor, target: int | Sequence[int] | Tensor, temperature: float) -> Tensor:
    """``log P_nat`` from all-structure energies: ``-E_t/T - logsumexp_S(-E_S/T)`` (stable, in place)."""
    tgt = torch.as_tensor(target, dtype=torch.long).expand(e.shape[0]).contiguous()
    x = e * (-1.0 / temperature)
    m = x.amax(1, keepdim=True)
    z = x.sub_(m).exp_().sum(1)
    return -e.gather(1, tgt[:, None])[:, 0] / temperature - m[:, 0] - z.log()


@functools.lru_cache(maxsize=8)
def _distinct_structures(shape: tuple[int, ...]) -> tuple[LatticeStructure, ...]:
    walks = enumerate_compact_walks(shape)
    coords, _ = _grid_nodes(shape)
    seen: set[bytes] = set()
    out = []
    for w in walks:
        s = LatticeStructure.from_coords(coords[w])
        key = s.contacts.tobytes()
        if key not in seen:
            seen.add(key)
            out.append(LatticeStructure(s.coords, s.contacts, name=f"{'x'.join(map(str, shape))}-{len(out)}"))
    return tuple(out)


def sample_msa(
    world: LatticeWorld,
    targets: int | Sequence[int],
    *,
    n_seqs: int,
    beta: float,
    n_chains: int,
    burn_in_sweeps: int,
    thin_sweeps: int,
    generator: torch.Generator,
    gamma: float = 0.0,
    warm_sweeps: int = 0,
) -> tuple[Tensor, Tensor]:
    """Natural-like sequences by parallel Metropolis chains on ``P_nat(s|S*)^beta exp(-gamma E(s,S*))``.

    Chains of all folds run together. Each step proposes one random residue at one site for every
    chain (systematic scan, so the energy update of all structures is one small matrix product);
    sequences are read every ``thin_sweeps`` sweeps after ``burn_in_sweeps``.

    Args:
        world: the lattice world.
        targets: index (or indices) of the folds S*.
        n_seqs: sequences per fold (``ceil(n_seqs / n_chains)`` reads per chain, then truncated).
        beta: selection strength β.
        n_chains: parallel chains per fold.
        burn_in_sweeps: sweeps (L steps each) before the first read.
        thin_sweeps: sweeps between reads.
        generator: torch RNG.
        gamma: γ, optional extra selection on the folding energy ``E(s, S*)`` (0: stability only).
        warm_sweeps: heat-bath sweeps on ``exp(-gamma E(s, S*))`` alone before the Metropolis chains
            start (a cheap warm start: O(q · contacts) per site; the chains' target law is unchanged).

    Returns:
        ``(seqs [F, n_seqs, L] long, log_p_nat [F, n_seqs])`` for ``F`` folds. Rows are chain-major:
        row ``c * reads + r`` is read ``r`` of chain ``c``, so a block of rows is a set of chains.

    Example:
        >>> w = LatticeWorld((3, 3))
        >>> s, lp = sample_msa(w, [0, 1], n_seqs=4, beta=2.0, n_chains=2, burn_in_sweeps=1,
        ...                    thin_sweeps=1, generator=torch.Generator().manual_seed(0))
        >>> s.shape, lp.shape
        (torch.Size([2, 4, 9]), torch.Size([2, 4]))
    """
    if n_seqs < 1 or n_chains < 1 or beta <= 0 or thin_sweeps < 1 or burn_in_sweeps < 0:
        raise ValueError("n_seqs, n_chains, thin_sweeps must be >= 1, beta > 0, burn_in_sweeps >= 0")
    tg = torch.as_tensor(np.atleast_1d(np.asarray(targets)), dtype=torch.long)
    n_folds, length = len(tg), world.length
    chain_target = tg.repeat_interleave(n_chains)  # [F * n_chains]
    n = len(chain_target)
    s = torch.randint(0, 20, (n, length), generator=generator)
    if warm_sweeps and gamma:
        s = _heat_bath(world, chain_target, s, gamma, warm_sweeps, generator)
    e = world.energies(s)
    lp = _log_p_from_energies(e, chain_target, world.temperature)
    reads = -(-n_seqs // n_chains)
    out_s, out_lp = [], []
    for sweep in range(burn_in_sweeps + reads * thin_sweeps):
        for i in range(length):
            new = torch.randint(0, 20, (n,), generator=generator)
            e_new = e + world.delta_energies(s, i, new)
            lp_new = _log_p_from_energies(e_new, chain_target, world.temperature)
            # Metropolis rule for log pi = beta log P_nat - gamma E(s, S*), symmetric proposal
            log_ratio = beta * (lp_new - lp)
            if gamma:
                log_ratio = log_ratio - gamma * (e_new - e).gather(1, chain_target[:, None])[:, 0]
            acc = torch.rand(n, generator=generator).log() < log_ratio
            s[acc, i] = new[acc]
            e = torch.where(acc[:, None], e_new, e)
            lp = torch.where(acc, lp_new, lp)
        if sweep >= burn_in_sweeps and (sweep - burn_in_sweeps + 1) % thin_sweeps == 0:
            out_s.append(s.view(n_folds, n_chains, length).clone())
            out_lp.append(lp.view(n_folds, n_chains).clone())
    seqs = torch.stack(out_s, 2).reshape(n_folds, -1, length)[:, :n_seqs]  # [F, reads*chains, L]
    logp = torch.stack(out_lp, 2).reshape(n_folds, -1)[:, :n_seqs]
    return seqs, logp
