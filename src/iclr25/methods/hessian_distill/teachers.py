"""Teachers: any ASE calculator (finite-difference rows) or any torch energy model (autograd rows).

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009), Sec. 3 (teacher Hessian rows, computed once before
training) and Sec. 4 (foundation-model teachers: MACE-OFF, MACE-MP-0, JMP-L).

:class:`ASECalculatorTeacher` wraps an ASE calculator (EMT by default) and takes central
differences in float64 with all ``±h`` copies of many structures evaluated in **one** calculator
call: the copies sit on a grid far apart, which is exact for calculators whose energy is a sum
over fragments farther apart than their cutoff (EMT and all short-range MLFFs).
:class:`TorchTeacher` wraps an :class:`~iclr25.methods.hessian_distill.EnergyModel` (e.g. a large
:class:`~iclr25.methods.hessian_distill.TinyPaiNN` or a model loaded from a local checkpoint) and
returns autograd rows; :class:`EnergyFunctionModel` turns any ``positions -> energy`` function into
such a model, so a real foundation model can be plugged in at paper scale.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr25._core.registry import require

from .batch import AtomsBatch
from .calculator import StudentCalculator
from .hessian import check_rows, hessian_rows
from .models import load_model

__all__ = ["ASECalculatorTeacher", "EnergyFunctionModel", "TorchTeacher", "batch_to_atoms"]


def batch_to_atoms(batch: AtomsBatch) -> list[Any]:
    """The structures of a batch as ``ase.Atoms`` (float64 positions, cells, pbc, ids in info)."""
    ase = require("ase", "hessian_distill")
    out = []
    for b in range(batch.num_structures):
        lo, hi = int(batch.ptr[b]), int(batch.ptr[b + 1])
        a = ase.Atoms(
            numbers=batch.numbers[lo:hi].cpu().numpy(),
            positions=batch.pos[lo:hi].detach().double().cpu().numpy(),
            cell=batch.cell[b].detach().double().cpu().numpy(),
            pbc=batch.pbc[b].cpu().numpy(),
        )
        a.info["id"] = batch.ids[b]
        out.append(a)
    return out


class ASECalculatorTeacher:
    """An ASE calculator as teacher; Hessian rows by float64 central differences.

    Args:
        calc: an ASE calculator (default: ``ase.calculators.emt.EMT()``).
        fd_step: h in Å (1e-4 in float64; Trap 6).
        conservative: the calculator's forces are ``-∂E/∂x``; then the FD column ``∂F/∂x_r``
            equals the row (symmetric Jacobian) and only 2 evaluations per row are needed.
            With ``False`` the full FD Jacobian is built and rows are sliced (Trap 1).
        separation: spacing (Å) of the grid the copies are placed on in one calculator call.
        chunk: copies per calculator call.
        combine: evaluate many copies in one call (clusters only; periodic cells are looped).

    Example:
        >>> from ase.cluster import Icosahedron
        >>> t = ASECalculatorTeacher()
        >>> t.jacobian(Icosahedron("Cu", 2)).shape
        (39, 39)
    """

    def __init__(
        self,
        calc: Any = None,
        *,
        fd_step: float = 1e-4,
        conservative: bool = True,
        separation: float = 30.0,
        chunk: int = 256,
        combine: bool = True,
    ) -> None:
        if calc is None:
            calc = require("ase.calculators.emt", "hessian_distill").EMT()
        if fd_step <= 0:
            raise ValueError(f"fd_step must be > 0, got {fd_step}")
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.calc = calc
        self.fd_step = fd_step
        self.conservative = conservative
        self.separation = separation
        self.chunk = chunk
        self.combine = combine
        self.convention = "rows (FD columns of a symmetric Jacobian)" if conservative else "rows (full FD)"

    def _evaluate(self, structures: Sequence[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Energies and forces of many structures, combined into few calculator calls."""
        ase = require("ase", "hessian_distill")
        energies = np.zeros(len(structures))
        forces: list[np.ndarray] = [np.zeros(0)] * len(structures)
        combinable = self.combine and not any(a.pbc.any() for a in structures)
        if not combinable:
            for k, a in enumerate(structures):
                a = a.copy()
                a.calc = self.calc
                energies[k] = a.get_potential_energy()
                forces[k] = a.get_forces()
            return energies, forces
        for start in range(0, len(structures), self.chunk):
            part = structures[start : start + self.chunk]
            side = int(np.ceil(len(part) ** (1 / 3)))
            nums, pos, sizes = [], [], []
            for k, a in enumerate(part):
                grid = np.array([k % side, (k // side) % side, k // side**2], dtype=np.float64)
                p = a.get_positions()
                pos.append(p - p.mean(0) + grid * self.separation)
                nums.append(a.get_atomic_numbers())
                sizes.append(len(a))
            big = ase.Atoms(numbers=np.concatenate(nums), positions=np.concatenate(pos))
            big.calc = self.calc
            e_atom = big.get_potential_energies()
            f = big.get_forces()
            split = np.cumsum(sizes)[:-1]
            for k, (ek, fk) in enumerate(zip(np.split(e_atom, split), np.split(f, split), strict=True)):
                energies[start + k] = ek.sum()
                forces[start + k] = fk
        return energies, forces

    def label(self, atoms_list: Sequence[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Reference energies ``[B]`` (eV) and forces (list of ``[n, 3]``, eV/Å)."""
        return self._evaluate(list(atoms_list))

    def columns(self, atoms_list: Sequence[Any], coords: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """FD columns ``∂F/∂x_r`` (``[k, 3n]`` per structure) for flat coordinates ``r = 3a + c``."""
        if len(coords) != len(atoms_list):
            raise ValueError(f"{len(coords)} coordinate lists for {len(atoms_list)} structures")
        copies, owner = [], []
        for b, (a, cs) in enumerate(zip(atoms_list, coords, strict=True)):
            n3 = 3 * len(a)
            for r in cs:
                if not 0 <= int(r) < n3:
                    raise ValueError(f"structure {b}: coordinate {r} out of range [0, {n3})")
                for sign in (1.0, -1.0):
                    c = a.copy()
                    c.positions[int(r) // 3, int(r) % 3] += sign * self.fd_step
                    copies.append(c)
            owner.append(len(cs))
        _, forces = self._evaluate(copies)
        out, k = [], 0
        for a, cnt in zip(atoms_list, owner, strict=True):
            cols = np.zeros((cnt, 3 * len(a)))
            for m in range(cnt):
                cols[m] = ((forces[k] - forces[k + 1]) / (2 * self.fd_step)).reshape(-1)
                k += 2
            out.append(cols)
        return out

    def jacobian(self, atoms: Any) -> np.ndarray:
        """The full FD force Jacobian ``J[i, j] = ∂F_i/∂x_j`` (``[3n, 3n]``, eV/Å²)."""
        return self.columns([atoms], [range(3 * len(atoms))])[0].T

    def rows(self, atoms_list: Sequence[Any], coords: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Rows ``∂F_r/∂X`` (``[k, 3n]`` per structure) of flat coordinates ``r``."""
        if self.conservative:
            return self.columns(atoms_list, coords)
        return [
            self.jacobian(a)[np.asarray(list(cs), dtype=np.int64)]
            for a, cs in zip(atoms_list, coords, strict=True)
        ]

    def hessian_rows(self, batch: AtomsBatch, rows: torch.Tensor) -> torch.Tensor:
        """Rows for a batch in the layout of :func:`~iclr25.methods.hessian_distill.hessian_rows`."""
        rows = check_rows(batch, rows)
        atoms = batch_to_atoms(batch)
        n_max = int(batch.sizes.max())
        out = torch.zeros(rows.shape[0], n_max, 3, dtype=torch.float64)
        structs = sorted(set(rows[:, 0].tolist()))
        sel = [torch.nonzero(rows[:, 0] == b).flatten().tolist() for b in structs]
        coords = [[3 * int(rows[k, 1]) + int(rows[k, 2]) for k in ks] for ks in sel]
        got = self.rows([atoms[b] for b in structs], coords)
        for b, ks, vals in zip(structs, sel, got, strict=True):
            n = int(batch.sizes[b])
            for m, k in enumerate(ks):
                out[k, :n] = torch.as_tensor(vals[m]).reshape(n, 3)
        return out


class TorchTeacher:
    """A torch energy model as teacher; rows by autograd (conservative or direct forces).

    Args:
        model: an energy model (``forward(batch) -> {"energy", "forces"}``).
        dtype: dtype the teacher is evaluated in (float64 for exact rows).
        device: where the model runs (default: where it already is). Batches move there;
            results come back on the CPU.

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from iclr25.methods.hessian_distill import TinyPaiNN
        >>> t = TorchTeacher(TinyPaiNN(hidden=8, layers=1, n_rbf=4))
        >>> b = AtomsBatch.from_atoms([Icosahedron("Cu", 2)])
        >>> t.hessian_rows(b, torch.tensor([[0, 0, 0]])).shape
        torch.Size([1, 13, 3])
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        dtype: torch.dtype = torch.float64,
        device: str | torch.device | None = None,
    ) -> None:
        self.model = model.to(dtype=dtype, device=device).eval()
        self.dtype = dtype
        self.conservative = bool(getattr(model, "conservative", True))
        self.convention = "rows (autograd VJP)"

    @classmethod
    def from_local(cls, path: str | Path, *, dtype: torch.dtype = torch.float64) -> TorchTeacher:
        """Load a teacher checkpoint folder (``config.json`` + ``model.pt``) from a local path.

        Raises:
            FileNotFoundError: the path does not exist (nothing is downloaded).
        """
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(
                f"teacher checkpoint {path} does not exist (weights load from local paths)"
            )
        return cls(load_model(path), dtype=dtype)

    def label(self, atoms_list: Sequence[Any], *, cutoff: float | None = None) -> tuple[np.ndarray, list]:
        """Teacher energies ``[B]`` and forces (list of ``[n, 3]``)."""
        cut = cutoff or float(getattr(self.model, "cutoff", 5.0))
        batch = AtomsBatch.from_atoms(list(atoms_list), cutoff=cut, dtype=self.dtype)
        out = self.model(batch.to(self._device()))
        f = out["forces"].detach().cpu().numpy()
        split = batch.ptr[1:-1].tolist()
        return out["energy"].detach().cpu().numpy(), list(np.split(f, split))

    def _device(self) -> torch.device:
        p = next(iter(self.model.parameters()), None)
        return p.device if p is not None else torch.device("cpu")

    def hessian_rows(self, batch: AtomsBatch, rows: torch.Tensor) -> torch.Tensor:
        """Autograd rows ``[R, N_max, 3]`` (detached, on ``batch``'s device)."""
        dev = self._device()
        out = hessian_rows(self.model, batch.to(device=dev, dtype=self.dtype), rows.to(dev)).detach()
        return out.to(batch.pos.device)

    def as_calculator(self, **kwargs: Any) -> StudentCalculator:
        """The teacher's model as an ASE calculator (energy, forces; stress for periodic cells).

        Args:
            **kwargs: passed to :class:`~iclr25.methods.hessian_distill.StudentCalculator`
                (default ``dtype``: the teacher's).

        Returns:
            A :class:`~iclr25.methods.hessian_distill.StudentCalculator` around a copy of the model.

        Example:
            >>> from ase.cluster import Icosahedron
            >>> from iclr25.methods.hessian_distill import TinyPaiNN
            >>> atoms = Icosahedron("Cu", 2)
            >>> atoms.calc = TorchTeacher(TinyPaiNN(hidden=8, layers=1, n_rbf=4)).as_calculator()
            >>> atoms.get_forces().shape
            (13, 3)
        """
        return StudentCalculator(self.model, **{"dtype": self.dtype, **kwargs})


class EnergyFunctionModel(nn.Module):
    """Any differentiable ``energy(pos, numbers, cell, pbc, batch) -> [B]`` as an energy model.

    Forces are ``-∂E/∂x`` by autograd, so rows and training work with, e.g., a wrapped
    foundation model.

    Args:
        energy_fn: the energy function (torch ops only); ``None`` in a subclass that overrides
            :meth:`energy`.
        cutoff: the neighbour cutoff the batch must carry (pairs are available as
            ``batch.edge_index`` but the function may ignore them).

    Example:
        >>> from ase import Atoms
        >>> harm = EnergyFunctionModel(lambda pos, z, cell, pbc, b: (pos**2).sum().reshape(1))
        >>> harm(AtomsBatch.from_atoms([Atoms("Cu", positions=[[1.0, 0, 0]])]))["forces"].tolist()
        [[-2.0, -0.0, -0.0]]
    """

    def __init__(self, energy_fn: Callable[..., torch.Tensor] | None, *, cutoff: float = 0.0) -> None:
        super().__init__()
        self.energy_fn = energy_fn
        self.cutoff = cutoff
        self.conservative = True

    def forward(self, batch: AtomsBatch, *, create_graph: bool | None = None) -> dict[str, torch.Tensor]:
        """Energies ``[B]`` and forces ``[N, 3]``."""
        pos = batch.pos
        keep = pos.requires_grad
        if create_graph is None:
            create_graph = keep
        with torch.enable_grad():
            if not keep:
                pos = pos.detach().requires_grad_(True)
            energy = self.energy(pos, batch)
            (grad,) = torch.autograd.grad(energy.sum(), pos, create_graph=create_graph)
        out = {"energy": energy, "forces": -grad}
        return out if create_graph or keep else {k: v.detach() for k, v in out.items()}

    def energy(self, pos: torch.Tensor, batch: AtomsBatch) -> torch.Tensor:
        """Energies ``[B]`` at positions ``pos`` (the batch's, made differentiable); a subclass
        that needs more of the batch (pairs, shifts) overrides this and passes no ``energy_fn``."""
        if self.energy_fn is None:
            raise NotImplementedError(
                f"{type(self).__name__} has no energy_fn and does not override energy()"
            )
        return self.energy_fn(pos, batch.numbers, batch.cell, batch.pbc, batch.batch)
