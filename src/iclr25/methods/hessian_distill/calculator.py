"""ASE integration: a trained force field as an ``ase`` Calculator, and NVE energy drift.

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009), Sec. 5 (MD stability of distilled students:
conservative students keep energy; direct-force models drift).

:class:`StudentCalculator` follows the shape of ``MACECalculator``/``SpkCalculator``:
``implemented_properties`` energy and forces (plus stress for periodic cells), float64 arrays
out, weights from a local folder. :func:`run_nve` runs ASE's ``VelocityVerlet``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr25._core.registry import require

from .batch import AtomsBatch
from .models import load_model

_calc = require("ase.calculators.calculator", "hessian_distill")

__all__ = ["StudentCalculator", "energy_drift", "run_nve"]


class StudentCalculator(_calc.Calculator):
    """An :class:`~iclr25.methods.hessian_distill.EnergyModel` as an ASE calculator.

    Used for students and, through :meth:`TorchTeacher.as_calculator`, for NN teachers.

    Args:
        model: the force field (copied; evaluated in ``dtype``).
        dtype: evaluation dtype (float64 by default: MD energies without float32 noise).
        device: torch device of the model.
        min_distance: atoms closer than this (Å) raise a ``ValueError``.
        **kwargs: passed to ``ase.calculators.calculator.Calculator``.

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from iclr25.methods.hessian_distill import TinyPaiNN
        >>> atoms = Icosahedron("Cu", 2)
        >>> atoms.calc = StudentCalculator(TinyPaiNN(hidden=8, layers=1, n_rbf=4))
        >>> atoms.get_forces().dtype, atoms.get_forces().shape
        (dtype('float64'), (13, 3))
    """

    implemented_properties = ["energy", "free_energy", "forces", "stress"]  # noqa: RUF012

    def __init__(
        self,
        model: nn.Module,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
        min_distance: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model = copy.deepcopy(model).to(device=device, dtype=dtype).eval()
        self.dtype = dtype
        self.device = torch.device(device)
        self.min_distance = min_distance
        self.cutoff = float(getattr(model, "cutoff", 5.0))

    @classmethod
    def from_pretrained(cls, path: str | Path, **kwargs: Any) -> StudentCalculator:
        """A calculator for a checkpoint folder written by ``TinyPaiNN.save_pretrained``.

        Raises:
            FileNotFoundError: the folder or its files are missing.
        """
        return cls(load_model(path), **kwargs)

    def calculate(
        self,
        atoms: Any = None,
        properties: list[str] | tuple[str, ...] = ("energy",),
        system_changes: list[str] = _calc.all_changes,
    ) -> None:
        """Compute energy, forces and (periodic cells, when asked) stress for ``atoms``."""
        super().calculate(atoms, properties, system_changes)
        a = self.atoms
        periodic = bool(np.any(a.pbc))
        if "stress" in properties and not periodic:
            raise _calc.PropertyNotImplementedError("stress needs a periodic cell")
        batch = AtomsBatch.from_atoms(
            [a], cutoff=self.cutoff, dtype=self.dtype, min_distance=self.min_distance
        )
        batch = batch.to(device=self.device)
        # ask for stress only when needed, so models without a stress option (any
        # ``positions -> energy`` model) serve energy and forces
        extra = {"compute_stress": True} if periodic and "stress" in properties else {}
        out = self.model(batch, create_graph=False, **extra)
        energy = float(out["energy"].detach().double().sum())
        self.results["energy"] = energy
        self.results["free_energy"] = energy
        self.results["forces"] = out["forces"].detach().double().cpu().numpy()
        if "stress" in out:
            s = out["stress"][0].detach().double().cpu().numpy()
            s = 0.5 * (s + s.T)
            self.results["stress"] = np.array([s[0, 0], s[1, 1], s[2, 2], s[1, 2], s[0, 2], s[0, 1]])


def run_nve(
    atoms: Any,
    calc: Any,
    *,
    steps: int,
    timestep_fs: float = 1.0,
    temperature_K: float = 300.0,
    rng: np.random.Generator,
    record_every: int = 1,
) -> dict[str, np.ndarray]:
    """NVE molecular dynamics with ASE's ``VelocityVerlet``; records energies over time.

    Velocities are drawn from Maxwell–Boltzmann at ``temperature_K`` with zero total momentum
    and angular momentum.

    Args:
        atoms: the starting structure (copied).
        calc: the ASE calculator.
        steps: MD steps.
        timestep_fs: time step in fs.
        temperature_K: initial temperature.
        rng: generator of the initial velocities.
        record_every: record every this many steps.

    Returns:
        ``{"time_fs", "total", "potential", "kinetic"}`` arrays (eV), plus ``"n_atoms"``.

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from ase.calculators.emt import EMT
        >>> md = run_nve(Icosahedron("Cu", 2), EMT(), steps=5, rng=np.random.default_rng(0))
        >>> md["total"].shape
        (6,)
    """
    verlet = require("ase.md.verlet", "hessian_distill")
    vd = require("ase.md.velocitydistribution", "hessian_distill")
    units = require("ase.units", "hessian_distill")
    if steps < 1 or record_every < 1:
        raise ValueError("steps and record_every must be >= 1")
    a = atoms.copy()
    a.calc = calc
    _thermalize(a, temperature_K, rng)
    vd.Stationary(a)
    if not a.pbc.any():
        vd.ZeroRotation(a)
    rec: dict[str, list[float]] = {"time_fs": [], "total": [], "potential": [], "kinetic": []}

    def log() -> None:
        epot, ekin = a.get_potential_energy(), a.get_kinetic_energy()
        rec["time_fs"].append(dyn.nsteps * timestep_fs)
        rec["potential"].append(epot)
        rec["kinetic"].append(ekin)
        rec["total"].append(epot + ekin)

    dyn = verlet.VelocityVerlet(a, timestep=timestep_fs * units.fs)
    dyn.attach(log, interval=record_every)
    dyn.run(steps)
    out = {k: np.asarray(v) for k, v in rec.items()}
    out["n_atoms"] = np.asarray(len(a))
    return out


def _thermalize(atoms: Any, temperature_K: float, rng: np.random.Generator | None) -> None:
    """Draw Maxwell–Boltzmann momenta at ``temperature_K`` (ASE's ``thermalize_momenta``).

    ASE 3.29 renamed ``MaxwellBoltzmannDistribution`` (now deprecated) to ``thermalize_momenta``;
    both draw the same numbers, and the old name is used only on older ASE.
    """
    vd = require("ase.md.velocitydistribution", "hessian_distill")
    if hasattr(vd, "thermalize_momenta"):
        vd.thermalize_momenta(atoms, temperature_K, rng=rng)
    else:  # ASE < 3.29
        vd.MaxwellBoltzmannDistribution(atoms, temperature_K=temperature_K, rng=rng)


def energy_drift(total: np.ndarray, n_atoms: int, *, window: float = 0.1) -> float:
    """Total-energy drift in meV/atom: |mean of the last window − mean of the first window| / N.

    Averaging over the first and last ``window`` fraction of the trajectory removes the
    bounded velocity-Verlet fluctuation and keeps the secular drift.

    Example:
        >>> round(energy_drift(np.linspace(0.0, 0.013, 101), 13), 6)
        0.91
    """
    total = np.asarray(total, dtype=np.float64)
    if total.ndim != 1 or total.size < 2:
        raise ValueError("total must be a 1-D array with at least 2 entries")
    k = max(1, round(window * total.size))
    return float(abs(total[-k:].mean() - total[:k].mean()) / n_atoms * 1000.0)
