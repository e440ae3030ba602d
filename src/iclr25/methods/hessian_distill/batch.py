"""A batch of atomic structures as flat tensors, with a fixed neighbour list per structure.

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009). Hessian rows (Sec. 3, Eq. 2) are indexed by
``(structure, atom, component)``; :class:`AtomsBatch` holds the offsets (``ptr``) that turn a
structure-local atom index into a batch row (Trap 4 of the method: offsets and atom order).

Neighbour pairs come from ``ase.neighborlist.neighbor_list`` (periodic images included) and stay
fixed while positions move by finite-difference steps; the models use a smooth cutoff envelope, so
the energy is C² across a pair entering or leaving the cutoff.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from iclr25._core.registry import require

__all__ = ["AtomsBatch", "numbers_hash"]


def numbers_hash(numbers: Sequence[int] | np.ndarray) -> str:
    """A short hash of a structure's atomic numbers in order (labels are verified against it).

    Args:
        numbers: atomic numbers of one structure, in atom order.

    Returns:
        A 16-character hex digest.

    Example:
        >>> numbers_hash([29, 79]) == numbers_hash([29, 79]) != numbers_hash([79, 29])
        True
    """
    arr = np.asarray(numbers, dtype=np.int64)
    return hashlib.sha1(arr.tobytes()).hexdigest()[:16]


@dataclass
class AtomsBatch:
    """Structures concatenated along the atom axis.

    Args:
        pos: Cartesian positions in Å.
        numbers: atomic numbers.
        cell: one 3x3 cell per structure (rows are lattice vectors; zeros for clusters).
        pbc: periodic flags per structure.
        batch: structure index of each atom.
        ptr: cumulative atom counts; structure ``b`` owns atoms ``ptr[b]:ptr[b+1]``.
        fixed: atoms held fixed (``FixAtoms``); they are excluded from Hessian rows and columns.
        ids: one string id per structure (labels are keyed by it).
        edge_index: neighbour pairs ``(i, j)`` as batch atom indices; the edge vector is
            ``pos[j] - pos[i] + shift @ cell``.
        shift: integer cell shifts of each pair (float dtype, for differentiable strain).
        cutoff: the radius the pairs were built with.

    Shape:
        pos ``[N, 3]``, numbers ``[N]``, cell ``[B, 3, 3]``, pbc ``[B, 3]``, batch ``[N]``,
        ptr ``[B + 1]``, fixed ``[N]``, edge_index ``[2, E]``, shift ``[E, 3]``.

    Example:
        >>> from ase import Atoms
        >>> b = AtomsBatch.from_atoms([Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.5]])], cutoff=4.0)
        >>> b.pos.shape, b.edge_index.shape, b.ptr.tolist()
        (torch.Size([2, 3]), torch.Size([2, 2]), [0, 2])
    """

    pos: torch.Tensor
    numbers: torch.Tensor
    cell: torch.Tensor
    pbc: torch.Tensor
    batch: torch.Tensor
    ptr: torch.Tensor
    fixed: torch.Tensor
    ids: list[str]
    edge_index: torch.Tensor
    shift: torch.Tensor
    cutoff: float

    @classmethod
    def from_atoms(
        cls,
        atoms_list: Sequence[Any],
        *,
        cutoff: float = 5.0,
        dtype: torch.dtype = torch.float32,
        min_distance: float = 0.5,
        ids: Sequence[str] | None = None,
    ) -> AtomsBatch:
        """Build a batch from ``ase.Atoms`` objects.

        Args:
            atoms_list: the structures (non-empty).
            cutoff: neighbour radius in Å (at least the model's cutoff).
            dtype: floating dtype of positions and cells.
            min_distance: any pair closer than this (Å) is rejected as overlapping atoms.
            ids: structure ids; default ``atoms.info["id"]`` or the list index.

        Returns:
            The batch.

        Raises:
            ValueError: an empty list, non-finite positions, overlapping atoms, or wrong ids.
        """
        nl = require("ase.neighborlist", "hessian_distill")
        constraints = require("ase.constraints", "hessian_distill")
        if len(atoms_list) == 0:
            raise ValueError("atoms_list is empty")
        if cutoff <= 0:
            raise ValueError(f"cutoff must be > 0, got {cutoff}")
        if ids is not None and len(ids) != len(atoms_list):
            raise ValueError(f"{len(ids)} ids for {len(atoms_list)} structures")
        pos, nums, cells, pbcs, fixed, edges, shifts, id_list, sizes = [], [], [], [], [], [], [], [], []
        offset = 0
        for k, atoms in enumerate(atoms_list):
            p = np.asarray(atoms.get_positions(), dtype=np.float64)
            n = len(atoms)
            if n == 0:
                raise ValueError(f"structure {k} has no atoms")
            if not np.isfinite(p).all():
                raise ValueError(f"structure {k} has non-finite (NaN or inf) positions")
            i, j, d, s = nl.neighbor_list("ijdS", atoms, cutoff)
            if len(d) and d.min() < min_distance:
                a = int(np.argmin(d))
                raise ValueError(
                    f"structure {k}: atoms {i[a]} and {j[a]} are {d[a]:.3f} Å apart, closer than "
                    f"min_distance={min_distance} Å (overlapping atoms)"
                )
            fx = np.zeros(n, dtype=bool)
            for c in atoms.constraints:
                if isinstance(c, constraints.FixAtoms):
                    fx[np.asarray(c.get_indices(), dtype=np.int64)] = True
            pos.append(p)
            nums.append(np.asarray(atoms.get_atomic_numbers(), dtype=np.int64))
            cells.append(np.asarray(atoms.get_cell().array, dtype=np.float64))
            pbcs.append(np.asarray(atoms.get_pbc(), dtype=bool))
            fixed.append(fx)
            edges.append(np.stack([i, j]) + offset)
            shifts.append(s.astype(np.float64))
            id_list.append(str(ids[k]) if ids is not None else str(atoms.info.get("id", k)))
            sizes.append(n)
            offset += n
        if len(set(id_list)) != len(id_list):
            raise ValueError("structure ids must be unique")
        sizes_t = torch.tensor(sizes, dtype=torch.long)
        return cls(
            pos=torch.as_tensor(np.concatenate(pos), dtype=dtype),
            numbers=torch.as_tensor(np.concatenate(nums)),
            cell=torch.as_tensor(np.stack(cells), dtype=dtype),
            pbc=torch.as_tensor(np.stack(pbcs)),
            batch=torch.repeat_interleave(torch.arange(len(sizes)), sizes_t),
            ptr=torch.cat([torch.zeros(1, dtype=torch.long), sizes_t.cumsum(0)]),
            fixed=torch.as_tensor(np.concatenate(fixed)),
            ids=id_list,
            edge_index=torch.as_tensor(np.concatenate(edges, axis=1), dtype=torch.long),
            shift=torch.as_tensor(np.concatenate(shifts), dtype=dtype),
            cutoff=float(cutoff),
        )

    @property
    def num_structures(self) -> int:
        """Number of structures ``B``."""
        return int(self.ptr.numel() - 1)

    @property
    def sizes(self) -> torch.Tensor:
        """Atoms per structure, ``[B]``."""
        return self.ptr[1:] - self.ptr[:-1]

    def with_positions(self, pos: torch.Tensor) -> AtomsBatch:
        """The same batch (same neighbour pairs) at new positions ``[N, 3]``."""
        if pos.shape != self.pos.shape:
            raise ValueError(f"pos must have shape {tuple(self.pos.shape)}, got {tuple(pos.shape)}")
        return dataclasses.replace(self, pos=pos)

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> AtomsBatch:
        """Move tensors to a device and/or cast floating tensors to ``dtype``."""

        def mv(t: torch.Tensor) -> torch.Tensor:
            if t.is_floating_point() and dtype is not None:
                return t.to(device=device, dtype=dtype)
            return t.to(device=device)

        return dataclasses.replace(
            self,
            **{
                f.name: mv(getattr(self, f.name))
                for f in dataclasses.fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)
            },
        )

    def select(self, index: Sequence[int]) -> AtomsBatch:
        """A sub-batch of the given structures, in the given order (offsets recomputed)."""
        idx = [int(b) for b in index]
        if not idx or min(idx) < 0 or max(idx) >= self.num_structures:
            raise ValueError(f"structure indices must lie in [0, {self.num_structures})")
        sizes = self.sizes[idx]
        new_ptr = torch.cat([torch.zeros(1, dtype=torch.long), sizes.cumsum(0)])
        atom_idx = torch.cat([torch.arange(int(self.ptr[b]), int(self.ptr[b + 1])) for b in idx])
        # pairs are stored grouped by structure, so each structure owns a contiguous edge range;
        # a structure may be selected several times (finite-difference copies)
        counts = torch.bincount(self.batch[self.edge_index[0]], minlength=self.num_structures)
        eptr = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)]).tolist()
        old_ptr = self.ptr.tolist()
        edges = [
            self.edge_index[:, eptr[b] : eptr[b + 1]] - old_ptr[b] + int(new_ptr[k])
            for k, b in enumerate(idx)
        ]
        shifts = [self.shift[eptr[b] : eptr[b + 1]] for b in idx]
        return AtomsBatch(
            pos=self.pos[atom_idx],
            numbers=self.numbers[atom_idx],
            cell=self.cell[idx],
            pbc=self.pbc[idx],
            batch=torch.repeat_interleave(torch.arange(len(idx)), sizes),
            ptr=new_ptr,
            fixed=self.fixed[atom_idx],
            ids=[self.ids[b] for b in idx],
            edge_index=torch.cat(edges, dim=1),
            shift=torch.cat(shifts),
            cutoff=self.cutoff,
        )
