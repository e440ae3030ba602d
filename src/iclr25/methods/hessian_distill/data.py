"""Specialised data: Cu–Au clusters from Langevin MD labelled by EMT, extxyz I/O, labelled sets.

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009). The paper distils onto chemical subsets (SPICE
monomers, solvated amino acids, iodine-containing molecules; MPtrj subsets; MD22); here the
specialised subset is 13-atom Cu–Au icosahedral clusters sampled from short Langevin MD at
300–600 K, with ASE's EMT as the reference ("DFT") energies and forces.

Many clusters are simulated in one ``ase.Atoms`` on a grid far apart (exact for EMT, whose
energy is a sum over fragments farther apart than its cutoff), so one EMT call advances all.
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

__all__ = ["LabelledStructures", "make_clusters", "read_structures", "write_structures"]


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
    vd = require("ase.md.velocitydistribution", "hessian_distill")
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
    vd.MaxwellBoltzmannDistribution(big, temperature_K=float(temps.mean()), rng=rng)
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
