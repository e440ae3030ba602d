"""EMT-labelled data: specialised Cu–Au clusters, a broad multi-element set, extxyz I/O, labelled sets.

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009). The paper distils onto chemical subsets (SPICE
monomers, solvated amino acids, iodine-containing molecules; MPtrj subsets; MD22); here the
specialised subset is 13-atom Cu–Au icosahedral clusters sampled from short Langevin MD at
300–600 K, with ASE's EMT as the reference ("DFT") energies and forces.

Many clusters are simulated in one ``ase.Atoms`` on a grid far apart (exact for EMT, whose
energy is a sum over fragments farther apart than its cutoff), so one EMT call advances all.

:func:`make_broad_set` builds the stand-in for a foundation model's training data (teacher
mode B): rattled, strained clusters and small periodic fcc(111)/(100) slabs over several EMT
metals (Al, Ni, Cu, Pd, Ag, Pt, Au), single elements and alloys, labelled by EMT.
:func:`specialised_subset` selects the chemical subset a student is distilled on (by element set
and structure kind), as the paper selects SPICE/MPtrj subsets of the teacher's domain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr25._core.registry import require

from .batch import AtomsBatch
from .calculator import _thermalize
from .teachers import ASECalculatorTeacher

__all__ = [
    "BROAD_ELEMENTS",
    "LabelledStructures",
    "make_broad_set",
    "make_clusters",
    "read_structures",
    "specialised_subset",
    "write_structures",
]

#: fcc metals that ASE's EMT parametrises (Al, Ni, Cu, Pd, Ag, Pt, Au), by atomic number.
BROAD_ELEMENTS: tuple[int, ...] = (13, 28, 29, 46, 47, 78, 79)
_KINDS = ("cluster", "fcc111", "fcc100")


def make_clusters(
    n_trajectories: int,
    frames_per_trajectory: int,
    *,
    seed: int,
    elements: tuple[int, int] = (29, 79),
    temperature_K: tuple[float, float] = (300.0, 600.0),
    warmup_steps: int = 20,
    steps_between: int = 3,
    timestep_fs: float = 5.0,
    friction: float = 0.02,
    separation: float = 30.0,
    prefix: str = "c",
) -> list[Any]:
    """Binary 13-atom icosahedral clusters sampled from Langevin MD, labelled by EMT.

    Each trajectory gets a random composition (each atom is ``elements[1]`` with probability
    p ~ U(0.2, 0.8)) and a temperature drawn uniformly from ``temperature_K``.

    Args:
        n_trajectories: independent trajectories (clusters).
        frames_per_trajectory: frames kept per trajectory.
        seed: seed of compositions, temperatures and thermostat noise.
        elements: the two atomic numbers (default Cu, Au).
        temperature_K: range of thermostat temperatures.
        warmup_steps: MD steps before the first frame.
        steps_between: MD steps between kept frames.
        timestep_fs: MD time step in fs.
        friction: Langevin friction in 1/fs.
        separation: grid spacing (Å) of the clusters simulated together.
        prefix: id prefix; ids are ``f"{prefix}{trajectory}-{frame}"``.

    Returns:
        ``ase.Atoms`` list (trajectory-major) with a single-point calculator holding EMT energy and
        forces, ``info["id"]``, ``info["trajectory"]`` and ``info["temperature_K"]``.

    Example:
        >>> atoms = make_clusters(2, 2, seed=0, warmup_steps=2, steps_between=1)
        >>> len(atoms), len(atoms[0]), atoms[0].info["id"]
        (4, 13, 'c0-0')
    """
    ase = require("ase", "hessian_distill")
    cluster = require("ase.cluster", "hessian_distill")
    emt = require("ase.calculators.emt", "hessian_distill")
    lang = require("ase.md.langevin", "hessian_distill")
    units = require("ase.units", "hessian_distill")
    sp = require("ase.calculators.singlepoint", "hessian_distill")
    if n_trajectories < 1 or frames_per_trajectory < 1:
        raise ValueError("n_trajectories and frames_per_trajectory must be >= 1")
    if len(elements) != 2:
        raise ValueError(f"elements must be two atomic numbers, got {elements}")
    rng = np.random.default_rng([seed, 7])
    base = cluster.Icosahedron("Cu", noshells=2)
    n = len(base)
    temps = rng.uniform(*temperature_K, size=n_trajectories)
    frames: dict[int, list[Any]] = {t: [] for t in range(n_trajectories)}
    side = int(np.ceil(n_trajectories ** (1 / 3)))
    for t in range(n_trajectories):
        p_b = rng.uniform(0.2, 0.8)
        numbers = np.where(rng.random(n) < p_b, elements[1], elements[0])
        a = ase.Atoms(numbers=numbers, positions=base.positions * _lattice_scale(numbers))
        a.positions += rng.normal(scale=0.05, size=(n, 3))
        frames[t] = [a]
    # All trajectories run in one Atoms on a grid; the thermostat takes one temperature per atom.
    big = ase.Atoms()
    for t in range(n_trajectories):
        c = frames[t][0].copy()
        grid = np.array([t % side, (t // side) % side, t // side**2], dtype=np.float64)
        c.positions += grid * separation
        big += c
    big.calc = emt.EMT()
    temp_atom = np.repeat(temps, n)[:, None]  # [N, 1] per-atom target temperature
    _thermalize(big, float(temps.mean()), rng)
    mom = big.get_momenta().reshape(n_trajectories, n, 3)
    mom -= mom.mean(axis=1, keepdims=True)  # no drift of any cluster
    big.set_momenta(mom.reshape(-1, 3) * np.sqrt(temp_atom / temps.mean()))
    dyn = lang.Langevin(
        big,
        timestep=timestep_fs * units.fs,
        temperature_K=temp_atom,
        friction=friction / units.fs,
        fixcm=False,
        rng=rng,
    )
    dyn.run(warmup_steps)
    for f in range(frames_per_trajectory):
        if f > 0:
            dyn.run(steps_between)
        e_atom = big.get_potential_energies()
        forces = big.get_forces()
        for t in range(n_trajectories):
            sl = slice(t * n, (t + 1) * n)
            a = ase.Atoms(numbers=big.numbers[sl], positions=big.positions[sl])
            a.positions -= a.positions.mean(axis=0)
            a.calc = sp.SinglePointCalculator(a, energy=float(e_atom[sl].sum()), forces=forces[sl].copy())
            a.info.update(id=f"{prefix}{t}-{f}", trajectory=t, temperature_K=float(temps[t]))
            if f == 0:
                frames[t] = []
            frames[t].append(a)
    return [a for t in range(n_trajectories) for a in frames[t]]


def make_broad_set(
    n_clusters: int,
    n_slabs: int,
    *,
    seed: int,
    elements: Sequence[int] = BROAD_ELEMENTS,
    max_elements: int | None = None,
    rattle: float = 0.1,
    strain: float = 0.03,
    slab_size: tuple[int, int, int] = (2, 2, 3),
    vacuum: float = 6.0,
    min_distance: float = 1.5,
    prefix: str = "b",
) -> list[Any]:
    """A broad, multi-element set of clusters and periodic slabs labelled by EMT (teacher mode B).

    Every structure draws 1..``max_elements`` distinct elements of ``elements`` and a random
    composition; the lattice constant is the composition average of the elements' fcc lattice
    constants (Vegard's law, ``ase.data.reference_states``), scaled by a random isotropic strain
    ``1 + U(-strain, strain)``, and every atom is displaced by Gaussian noise of std ``rattle``.

    - Clusters: 13-atom icosahedra or cuboctahedra (``ase.cluster``), non-periodic.
    - Slabs: ``ase.build.fcc111`` / ``fcc100`` of ``slab_size`` atoms, periodic in x and y,
      ``vacuum`` Å on each side in z.

    Labels come from :class:`~iclr25.methods.hessian_distill.ASECalculatorTeacher` (EMT), and the
    structures are checked like any batch (no pair closer than ``min_distance``).

    Args:
        n_clusters: number of clusters.
        n_slabs: number of slabs (alternating (111) and (100) surfaces).
        seed: seed of compositions, strains and displacements.
        elements: atomic numbers to draw from (a subset of :data:`BROAD_ELEMENTS`).
        max_elements: most distinct elements in one structure (default: 2, or 1 for one element).
        rattle: std (Å) of the Gaussian displacement of every atom.
        strain: largest relative isotropic strain of the lattice.
        slab_size: slab repeats (x, y, layers).
        vacuum: vacuum (Å) above and below a slab.
        min_distance: structures with a pair closer than this (Å) raise an error.
        prefix: id prefix; ids are ``f"{prefix}-{kind}-{k}"``.

    Returns:
        ``ase.Atoms`` list (clusters first, then slabs) with a single-point calculator holding EMT
        energy and forces and ``info["id"]``, ``info["kind"]`` (``"cluster"``, ``"fcc111"`` or
        ``"fcc100"``).

    Raises:
        ValueError: bad counts, an element EMT does not parametrise as an fcc metal, or
            overlapping atoms.

    Example:
        >>> atoms = make_broad_set(2, 2, seed=0, elements=(13, 29, 79))
        >>> [a.info["kind"] for a in atoms], [bool(a.pbc.any()) for a in atoms]
        (['cluster', 'cluster', 'fcc111', 'fcc100'], [False, False, True, True])
    """
    cluster = require("ase.cluster", "hessian_distill")
    build = require("ase.build", "hessian_distill")
    ase_data = require("ase.data", "hessian_distill")
    sp = require("ase.calculators.singlepoint", "hessian_distill")
    if n_clusters < 0 or n_slabs < 0 or n_clusters + n_slabs < 1:
        raise ValueError(
            f"need n_clusters, n_slabs >= 0 and at least one structure, got {n_clusters}, {n_slabs}"
        )
    elems = [int(z) for z in elements]
    bad = sorted(set(elems) - set(BROAD_ELEMENTS))
    if not elems or bad or len(set(elems)) != len(elems):
        raise ValueError(
            f"elements must be distinct EMT fcc metals from {BROAD_ELEMENTS}, got {tuple(elems)}"
        )
    if max_elements is None:
        max_elements = min(2, len(elems))
    if not 1 <= max_elements <= len(elems):
        raise ValueError(f"max_elements must be in [1, {len(elems)}], got {max_elements}")
    if rattle < 0 or not 0 <= strain < 1 or vacuum <= 0 or min(slab_size) < 1:
        raise ValueError("need rattle >= 0, 0 <= strain < 1, vacuum > 0 and slab_size >= 1")
    rng = np.random.default_rng([seed, 11])
    structures: list[Any] = []
    kinds = ["cluster"] * n_clusters + [("fcc111", "fcc100")[k % 2] for k in range(n_slabs)]
    for k, kind in enumerate(kinds):
        k_el = int(rng.integers(1, max_elements + 1))
        chosen = rng.choice(elems, size=k_el, replace=False)
        base_symbol = ase_data.chemical_symbols[int(chosen[0])]
        if kind == "cluster":
            a = (
                cluster.Icosahedron(base_symbol, noshells=2)
                if rng.random() < 0.5
                else cluster.Octahedron(base_symbol, length=3, cutoff=1)
            )
        else:
            make = build.fcc111 if kind == "fcc111" else build.fcc100
            a = make(base_symbol, size=tuple(slab_size), vacuum=vacuum, periodic=False)
        a = a.copy()
        a.set_constraint()
        a.info = {}  # drop builder metadata (adsorption sites); ids and kinds are set below
        n = len(a)
        a.numbers = chosen[rng.integers(0, k_el, size=n)] if k_el > 1 else np.full(n, chosen[0])
        # Vegard's law: lattice constant of the composition over that of the base element
        lat = np.array([ase_data.reference_states[int(z)]["a"] for z in a.numbers])
        scale = lat.mean() / ase_data.reference_states[int(chosen[0])]["a"]
        scale *= 1.0 + rng.uniform(-strain, strain)
        if kind == "cluster":
            a.positions = (a.positions - a.positions.mean(axis=0)) * scale
        else:
            # stretch the periodic directions with the cell; keep the vacuum in z
            a.set_cell(a.cell.array * np.array([scale, scale, 1.0])[:, None], scale_atoms=False)
            frac = a.get_scaled_positions(wrap=False)
            a.positions = frac @ a.cell.array
            z0 = a.positions[:, 2].mean()
            a.positions[:, 2] = z0 + (a.positions[:, 2] - z0) * scale
        a.positions += rng.normal(0.0, rattle, size=(n, 3))
        a.info.update(id=f"{prefix}-{kind}-{k}", kind=kind)
        structures.append(a)
    # the same overlap check as every batch the models see
    AtomsBatch.from_atoms(structures, cutoff=min_distance + 0.5, min_distance=min_distance)
    teacher = ASECalculatorTeacher()
    for group in (
        [a for a in structures if not a.pbc.any()],
        [a for a in structures if a.pbc.any()],
    ):
        if not group:
            continue
        energies, forces = teacher.label(group)
        for a, e, f in zip(group, energies, forces, strict=True):
            a.calc = sp.SinglePointCalculator(a, energy=float(e), forces=np.asarray(f).copy())
    return structures


def specialised_subset(
    atoms_list: Sequence[Any],
    *,
    elements: Sequence[int],
    kinds: Sequence[str] | None = None,
) -> list[Any]:
    """The structures made only of ``elements`` (and, if given, of one of ``kinds``).

    This is how a "specialised" chemical subset is cut from a broad set, as the paper distils
    onto SPICE or MPtrj subsets inside the foundation model's domain.

    Args:
        atoms_list: the broad set (e.g. from :func:`make_broad_set`).
        elements: allowed atomic numbers; a structure qualifies when all its atoms are in it.
        kinds: allowed ``info["kind"]`` values (``"cluster"``, ``"fcc111"``, ``"fcc100"``);
            ``None`` keeps all kinds.

    Returns:
        The selected structures (same objects, original order).

    Raises:
        ValueError: ``elements`` is empty or ``kinds`` names an unknown kind.

    Example:
        >>> broad = make_broad_set(6, 0, seed=0, elements=(29, 79, 46))
        >>> sub = specialised_subset(broad, elements=(29, 79), kinds=("cluster",))
        >>> all(set(a.numbers) <= {29, 79} for a in sub)
        True
    """
    allowed = {int(z) for z in elements}
    if not allowed:
        raise ValueError("elements must not be empty")
    if kinds is not None and not set(kinds) <= set(_KINDS):
        raise ValueError(f"kinds must be among {_KINDS}, got {tuple(kinds)}")
    return [
        a
        for a in atoms_list
        if set(int(z) for z in a.numbers) <= allowed and (kinds is None or a.info.get("kind") in kinds)
    ]


def _lattice_scale(numbers: np.ndarray) -> float:
    """Scale of the Cu icosahedron so the mean nearest-neighbour distance fits the composition."""
    frac_au = float(np.mean(numbers == 79))
    return 1.0 + 0.13 * frac_au  # Vegard-like: Au-Au (2.88 Å) vs Cu-Cu (2.55 Å)


def write_structures(path: str | Path, atoms_list: Sequence[Any]) -> None:
    """Write labelled structures to extxyz (energies, forces and info keys included)."""
    io = require("ase.io", "hessian_distill")
    io.write(str(path), list(atoms_list), format="extxyz")


def read_structures(path: str | Path) -> list[Any]:
    """Read structures from a local extxyz (or any ``ase.io`` format) file.

    Raises:
        FileNotFoundError: the file does not exist.
    """
    io = require("ase.io", "hessian_distill")
    if not Path(path).is_file():
        raise FileNotFoundError(f"structure file {path} not found")
    return list(io.read(str(path), index=":"))


@dataclass
class LabelledStructures:
    """Structures with reference energies and forces, as one :class:`AtomsBatch`.

    Args:
        batch: the structures.
        energy: reference energies ``[B]`` in eV.
        forces: reference forces ``[N, 3]`` in eV/Å.

    Example:
        >>> ds = LabelledStructures.from_atoms(make_clusters(1, 2, seed=0, warmup_steps=1))
        >>> len(ds), ds.forces.shape
        (2, torch.Size([26, 3]))
    """

    batch: AtomsBatch
    energy: torch.Tensor
    forces: torch.Tensor

    @classmethod
    def from_atoms(
        cls, atoms_list: Sequence[Any], *, cutoff: float = 5.0, dtype: torch.dtype = torch.float32
    ) -> LabelledStructures:
        """Read energies and forces from each structure's attached calculator.

        Raises:
            ValueError: a structure has no energy/forces attached.
        """
        energies, forces = [], []
        for k, a in enumerate(atoms_list):
            if a.calc is None:
                raise ValueError(f"structure {k} has no attached energies/forces (label it first)")
            energies.append(a.get_potential_energy())
            forces.append(a.get_forces())
        return cls(
            batch=AtomsBatch.from_atoms(atoms_list, cutoff=cutoff, dtype=dtype),
            energy=torch.as_tensor(np.asarray(energies), dtype=dtype),
            forces=torch.as_tensor(np.concatenate(forces), dtype=dtype),
        )

    def __len__(self) -> int:
        return self.batch.num_structures

    def select(self, index: Sequence[int]) -> LabelledStructures:
        """A subset, in the given order."""
        idx = [int(i) for i in index]
        sub = self.batch.select(idx)
        atom_idx = torch.cat([torch.arange(int(self.batch.ptr[b]), int(self.batch.ptr[b + 1])) for b in idx])
        return LabelledStructures(sub, self.energy[idx], self.forces[atom_idx])

    def to(self, device: torch.device | str) -> LabelledStructures:
        """A copy with every tensor on ``device``."""
        return LabelledStructures(self.batch.to(device), self.energy.to(device), self.forces.to(device))
