"""Small structures and models shared by the hessian_distill tests."""

from __future__ import annotations

import numpy as np
import torch
from ase import Atoms
from ase.cluster import Icosahedron

from iclr25.methods.hessian_distill import AtomsBatch, TinyPaiNN


def cluster(seed: int = 0, n_au: int = 4) -> Atoms:
    a = Icosahedron("Cu", 2)
    rng = np.random.default_rng(seed)
    a.numbers[rng.choice(13, size=n_au, replace=False)] = 79
    a.positions *= 1.04
    a.rattle(0.05, seed=seed)
    a.info["id"] = f"s{seed}"
    return a


def tetra(seed: int = 0) -> Atoms:
    rng = np.random.default_rng(seed)
    pos = np.array([[0, 0, 0], [2.5, 0, 0], [0, 2.5, 0], [0, 0, 2.5]], dtype=float) + rng.normal(
        0, 0.1, (4, 3)
    )
    return Atoms("Cu2Au2", positions=pos)


def model64(conservative: bool = True, seed: int = 0, cutoff: float = 4.0) -> TinyPaiNN:
    return TinyPaiNN(
        hidden=8, layers=2, n_rbf=6, cutoff=cutoff, conservative=conservative, seed=seed
    ).double()


def batch64(atoms_list, cutoff: float = 4.0) -> AtomsBatch:
    return AtomsBatch.from_atoms(atoms_list, cutoff=cutoff, dtype=torch.float64)
