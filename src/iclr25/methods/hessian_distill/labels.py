"""Teacher Hessian-row labels: computed once, stored in chunks, keyed by structure id and atom order.

Part of the implementation of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009), Sec. 3: teacher rows are precomputed before
training (full Jacobians, or a subsample of rows per structure) and looked up per step.

Each entry holds the flat coordinates ``r = 3a + c`` whose rows were computed and the rows
themselves (``[k, 3n]``, eV/Å², raw teacher units: scaling by σ_F happens in the loss only,
Trap 5), and is verified against a hash of the structure's atomic numbers (Trap 4). Files are
``.npz`` chunks plus a JSON index; reads load one chunk at a time. Missing labels raise an error
(nothing prompts), or are computed on demand in ``lazy`` mode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from .batch import AtomsBatch, numbers_hash
from .hessian import check_rows
from .teachers import batch_to_atoms

__all__ = ["TeacherLabelStore"]


class TeacherLabelStore:
    """Teacher Hessian rows per structure, in memory or as chunked ``.npz`` files.

    Args:
        path: folder of the store (``None``: in memory only).
        format: "npz" (zarr and LMDB back-ends are not implemented).
        chunk_size: structures per chunk file.

    Example:
        >>> from ase.cluster import Icosahedron
        >>> from iclr25.methods.hessian_distill import ASECalculatorTeacher
        >>> a = Icosahedron("Cu", 2); a.info["id"] = "c0"
        >>> store = TeacherLabelStore().precompute(ASECalculatorTeacher(), [a], rows_per_structure=2, seed=0)
        >>> store.available("c0").shape, store.get("c0", a.numbers)[1].shape
        (torch.Size([2]), torch.Size([2, 39]))
    """

    def __init__(
        self, path: str | Path | None = None, *, format: Literal["npz"] = "npz", chunk_size: int = 64
    ) -> None:
        if format != "npz":
            raise ValueError(f"format {format!r} is not supported (supported: 'npz')")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self.path = None if path is None else Path(path)
        self.format = format
        self.chunk_size = chunk_size
        self.meta: dict[str, Any] = {}
        self._entries: dict[str, tuple[str, np.ndarray, np.ndarray]] = {}  # id -> (hash, coords, rows)
        self._index: dict[str, tuple[int, str]] = {}  # id -> (chunk, hash) for on-disk entries
        self._chunk_cache: tuple[int, dict[str, np.ndarray]] | None = None
        self._teacher: Any = None
        self._lazy_cutoff = 5.0
        self._lazy_rows: int | None = None
        self._rng = np.random.default_rng(0)

    # ----------------------------------------------------------------- building
    def add(self, sid: str, numbers: Sequence[int], coords: Sequence[int], rows: np.ndarray) -> None:
        """Store rows ``[k, 3n]`` of flat coordinates ``coords`` for structure ``sid``."""
        coords_a = np.asarray(coords, dtype=np.int64)
        rows_a = np.asarray(rows, dtype=np.float64)
        n3 = 3 * len(numbers)
        if rows_a.shape != (len(coords_a), n3):
            raise ValueError(
                f"structure {sid!r}: rows must have shape ({len(coords_a)}, {n3}), got {rows_a.shape}"
            )
        if len(coords_a) and (coords_a.min() < 0 or coords_a.max() >= n3):
            raise ValueError(f"structure {sid!r}: coordinates out of range [0, {n3})")
        self._entries[str(sid)] = (numbers_hash(numbers), coords_a, rows_a)

    def precompute(
        self,
        teacher: Any,
        atoms_list: Sequence[Any],
        *,
        rows_per_structure: int | None = None,
        seed: int = 0,
        cutoff: float = 5.0,
    ) -> TeacherLabelStore:
        """Compute and store teacher rows for every structure (all rows, or a seeded subsample).

        Args:
            teacher: an :class:`ASECalculatorTeacher` (``rows``) or :class:`TorchTeacher`.
            atoms_list: the structures; ids from ``atoms.info["id"]`` (else the list index).
            rows_per_structure: rows kept per structure (``None``: the full Jacobian).
            seed: seed of the row subsample.
            cutoff: neighbour cutoff for torch teachers.

        Returns:
            ``self`` (saved to disk when the store has a path).
        """
        rng = np.random.default_rng(seed)
        coords = []
        for a in atoms_list:
            n3 = 3 * len(a)
            if rows_per_structure is not None and not 1 <= rows_per_structure <= n3:
                raise ValueError(f"rows_per_structure must be in [1, {n3}], got {rows_per_structure}")
            k = n3 if rows_per_structure is None else rows_per_structure
            coords.append(np.sort(rng.choice(n3, size=k, replace=False)) if k < n3 else np.arange(n3))
        values = self._teacher_rows(teacher, list(atoms_list), coords, cutoff)
        for k, (a, cs, vals) in enumerate(zip(atoms_list, coords, values, strict=True)):
            self.add(str(a.info.get("id", k)), a.get_atomic_numbers(), cs, vals)
        self.meta.update(
            teacher=type(teacher).__name__,
            convention=getattr(teacher, "convention", "rows"),
            fd_step=getattr(teacher, "fd_step", None),
            rows_per_structure=rows_per_structure,
        )
        if self.path is not None:
            self.save()
        return self

    @staticmethod
    def _teacher_rows(
        teacher: Any, atoms_list: list, coords: list, cutoff: float, chunk: int = 32
    ) -> list[np.ndarray]:
        if hasattr(teacher, "rows"):
            return teacher.rows(atoms_list, coords)
        out = []
        # torch teachers: ``chunk`` structures per batch, so that one VJP yields one row of
        # every structure in it (the force Jacobian of a batch is block-diagonal)
        for lo in range(0, len(atoms_list), chunk):
            part, cs_part = atoms_list[lo : lo + chunk], coords[lo : lo + chunk]
            b = AtomsBatch.from_atoms(part, cutoff=cutoff, dtype=torch.float64)
            flat = [torch.as_tensor(cs, dtype=torch.long) for cs in cs_part]
            r = torch.cat(
                [torch.stack([torch.full_like(c, k), c // 3, c % 3], 1) for k, c in enumerate(flat)]
            )  # [R, 3] (structure, atom, component)
            vals = teacher.hessian_rows(b, r).double()  # [R, N_max, 3]
            start = 0
            for a, cs in zip(part, cs_part, strict=True):
                n = len(a)
                out.append(vals[start : start + len(cs), :n].reshape(len(cs), 3 * n).numpy())
                start += len(cs)
        return out

    def lazy(
        self, teacher: Any, *, rows_per_structure: int | None = None, seed: int = 0, cutoff: float = 5.0
    ) -> TeacherLabelStore:
        """Compute missing structures on first request (instead of raising)."""
        self._teacher = teacher
        self._lazy_rows = rows_per_structure
        self._lazy_cutoff = cutoff
        self._rng = np.random.default_rng(seed)
        return self

    # ------------------------------------------------------------------ disk I/O
    def save(self) -> None:
        """Write the entries as ``.npz`` chunks plus ``index.json``."""
        if self.path is None:
            raise ValueError("this store has no path")
        self.path.mkdir(parents=True, exist_ok=True)
        ids = sorted(self._entries)
        index: dict[str, list] = {}
        for c, start in enumerate(range(0, len(ids), self.chunk_size)):
            arrays = {}
            for sid in ids[start : start + self.chunk_size]:
                h, cs, rows = self._entries[sid]
                arrays[f"{sid}/coords"], arrays[f"{sid}/rows"] = cs, rows
                index[sid] = [c, h]
            np.savez(self.path / f"chunk_{c:05d}.npz", **arrays)
        (self.path / "index.json").write_text(json.dumps({"meta": self.meta, "index": index}))

    @classmethod
    def open(cls, path: str | Path) -> TeacherLabelStore:
        """Open a store written by :meth:`save` (chunks are read on demand).

        Raises:
            FileNotFoundError: the folder or its index is missing.
        """
        path = Path(path)
        if not (path / "index.json").is_file():
            raise FileNotFoundError(f"no label store at {path} (index.json missing); precompute labels first")
        store = cls(path)
        data = json.loads((path / "index.json").read_text())
        store.meta = data["meta"]
        store._index = {sid: (int(c), str(h)) for sid, (c, h) in data["index"].items()}
        return store

    def _load(self, sid: str) -> tuple[str, np.ndarray, np.ndarray]:
        if sid in self._entries:
            return self._entries[sid]
        if sid in self._index:
            c, h = self._index[sid]
            if self._chunk_cache is None or self._chunk_cache[0] != c:
                assert self.path is not None
                with np.load(self.path / f"chunk_{c:05d}.npz") as z:
                    self._chunk_cache = (c, {k: z[k] for k in z.files})
            arrays = self._chunk_cache[1]
            return h, arrays[f"{sid}/coords"], arrays[f"{sid}/rows"]
        raise KeyError(f"no teacher labels for structure {sid!r}")

    # ------------------------------------------------------------------- reading
    def __contains__(self, sid: object) -> bool:
        return sid in self._entries or sid in self._index

    def __len__(self) -> int:
        return len(set(self._entries) | set(self._index))

    def ids(self) -> list[str]:
        """All stored structure ids."""
        return sorted(set(self._entries) | set(self._index))

    def _ensure(self, batch: AtomsBatch, b: int) -> None:
        sid = batch.ids[b]
        if sid in self or self._teacher is None:
            return
        atoms = batch_to_atoms(batch.select([b]))
        n3 = 3 * len(atoms[0])
        k = n3 if self._lazy_rows is None else min(self._lazy_rows, n3)
        cs = np.sort(self._rng.choice(n3, size=k, replace=False)) if k < n3 else np.arange(n3)
        vals = self._teacher_rows(self._teacher, atoms, [cs], self._lazy_cutoff)[0]
        self.add(sid, atoms[0].get_atomic_numbers(), cs, vals)

    def get(self, sid: str, numbers: Sequence[int] | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``(coords [k], rows [k, 3n])`` of a structure, checked against its atomic numbers.

        Raises:
            KeyError: no labels for ``sid``.
            ValueError: the stored atom-order hash differs from ``numbers`` (wrong structure or
                reordered atoms).
        """
        h, cs, rows = self._load(str(sid))
        if h != numbers_hash(np.asarray(numbers)):
            raise ValueError(
                f"structure {sid!r}: atomic-number hash mismatch (labels were computed for another "
                "structure or atom order)"
            )
        return torch.as_tensor(cs), torch.as_tensor(rows)

    def available(self, sid: str) -> torch.Tensor:
        """Flat coordinates with stored rows for ``sid``."""
        return torch.as_tensor(self._load(str(sid))[1])

    def allowed_for(self, batch: AtomsBatch) -> dict[str, torch.Tensor]:
        """id -> available coordinates for every structure of a batch (computes lazily)."""
        for b in range(batch.num_structures):
            self._ensure(batch, b)
        return {sid: self.available(sid) for sid in batch.ids}

    def rows_for(self, batch: AtomsBatch, rows: torch.Tensor) -> torch.Tensor:
        """Teacher rows ``[R, N_max, 3]`` for a batch (float64, eV/Å²).

        Raises:
            KeyError: a structure or a requested row is not stored.
            ValueError: rows out of range, or an atom-order hash mismatch.
        """
        rows = check_rows(batch, rows)
        n_max = int(batch.sizes.max())
        out = torch.zeros(rows.shape[0], n_max, 3, dtype=torch.float64)
        for b in sorted(set(rows[:, 0].tolist())):
            self._ensure(batch, b)
            lo, hi = int(batch.ptr[b]), int(batch.ptr[b + 1])
            cs, vals = self.get(batch.ids[b], batch.numbers[lo:hi].numpy())
            where = {int(c): m for m, c in enumerate(cs.tolist())}
            for k in torch.nonzero(rows[:, 0] == b).flatten().tolist():
                r = 3 * int(rows[k, 1]) + int(rows[k, 2])
                if r not in where:
                    raise KeyError(f"structure {batch.ids[b]!r}: row {r} was not precomputed")
                out[k, : hi - lo] = vals[where[r]].reshape(hi - lo, 3)
        return out

    def rms(self) -> float:
        """Root mean square of every stored row entry (eV/Å², before the σ_F scaling).

        Example:
            >>> store = TeacherLabelStore()
            >>> store.add("a", [29], [0, 1, 2], np.full((3, 3), 2.0))
            >>> store.rms()
            2.0
        """
        total, count = 0.0, 0
        for sid in self.ids():
            rows = self._load(sid)[2]
            total += float(np.square(rows, dtype=np.float64).sum())
            count += rows.size
        if count == 0:
            raise ValueError("the store holds no rows")
        return math.sqrt(total / count)

    def transformed(
        self, *, permutation: dict[str, str] | None = None, sign: float = 1.0
    ) -> TeacherLabelStore:
        """An in-memory copy whose entries are moved between ids and/or multiplied by ``sign``.

        Used by the negative controls: ``permutation`` maps a receiving id to a donor id of the
        same atom count (the donor's rows are re-keyed to the receiver, hash included), so the
        student is trained on rows of the wrong structure; ``sign`` is any factor (-1 flips the
        rows, a positive factor rescales them).
        """
        new = TeacherLabelStore(chunk_size=self.chunk_size)
        new.meta = {**self.meta, "transformed": True}
        for sid in self.ids():
            donor = permutation.get(sid, sid) if permutation else sid
            h_recv = self._load(sid)[0]
            _, cs, rows = self._load(donor)
            new._entries[sid] = (h_recv, cs.copy(), sign * rows)
        return new
