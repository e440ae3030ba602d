"""SPICE HDF5 reader: conformations with DFT energies and forces, in the units the method uses.

The paper (Amin, Raja, Krishnapriyan, ICLR 2025, arXiv:2501.09009) distils onto SPICE subsets
(monomers, solvated amino acids, iodine-containing molecules). SPICE 2 (Eastman et al., Sci.
Data 2023) ships as one HDF5 file with one group per molecule holding

* ``atomic_numbers`` ``[N]``,
* ``conformations`` ``[C, N, 3]`` in bohr,
* ``dft_total_energy`` ``[C]`` in hartree,
* ``dft_total_gradient`` ``[C, N, 3]`` in hartree/bohr (the gradient, i.e. minus the force),

plus other fields this reader ignores (``smiles``, ``subset``, charges ...). The method, like
its extxyz reader (:func:`~.data.read_structures`), works in Å, eV and eV/Å, so positions are
multiplied by ``Bohr`` (Å), energies by ``Hartree`` (eV) and forces are
``-gradient * Hartree / Bohr`` (eV/Å), with ASE's CODATA constants. Conformations are read
one at a time; nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from iclr25._core.registry import require

__all__ = ["SPICE_FIELDS", "SpiceHDF5"]

#: the per-molecule datasets the reader needs.
SPICE_FIELDS: tuple[str, ...] = ("atomic_numbers", "conformations", "dft_total_energy", "dft_total_gradient")


def _open_h5(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"SPICE file {path} not found")
    try:
        import h5py
    except ImportError as err:
        raise ImportError(
            "reading SPICE HDF5 files needs h5py: pip install 'iclr25[hessian_distill]'"
        ) from err
    try:
        return h5py.File(path, "r")
    except OSError as err:
        raise ValueError(f"{path} is not a readable HDF5 file: {err}") from err


class SpiceHDF5(Dataset):
    """SPICE conformations as labelled ``ase.Atoms`` (one item per conformation), read lazily.

    Each item carries a ``SinglePointCalculator`` with the DFT energy (eV) and forces (eV/Å),
    and ``info`` ``{"spice_id": group name, "conformation": index}``, so a list of items goes
    straight into :meth:`~.data.LabelledStructures.from_atoms` like the extxyz reader's output.

    Args:
        source: the HDF5 file, or an open ``h5py.File`` / any mapping of group name to a
            mapping of the fields above (arrays with ``shape``).
        molecules: keep only these group names (in this order); None keeps every group, in the
            source's order (an HDF5 file lists its groups by name unless it tracks creation order).
        elements: keep only molecules made of these atomic numbers (e.g. ``(1, 6, 7, 8)``).
        where: keep only molecules for which ``where(name, atomic_numbers)`` is true (e.g.
            ``lambda name, z: 53 in z``, the paper's iodine-containing subset).
        max_conformations: keep at most this many conformations per molecule (the first ones).

    Raises:
        ImportError: ``source`` is a path and h5py is not installed
            (``pip install 'iclr25[hessian_distill]'``).
        FileNotFoundError: the file does not exist.
        ValueError: not an HDF5 file, a named molecule is absent, a group lacks a field
            (named), or the fields' shapes disagree.

    Example:
        >>> ds = SpiceHDF5("SPICE-2.0.1.hdf5", elements=(1, 6, 7, 8))  # doctest: +SKIP
        >>> labelled = LabelledStructures.from_atoms([ds[i] for i in range(64)])  # doctest: +SKIP
    """

    def __init__(
        self,
        source: str | Path | Mapping[str, Mapping[str, Any]],
        *,
        molecules: Sequence[str] | None = None,
        elements: Sequence[int] | None = None,
        where: Callable[[str, np.ndarray], bool] | None = None,
        max_conformations: int | None = None,
    ) -> None:
        if max_conformations is not None and max_conformations < 1:
            raise ValueError(f"max_conformations must be at least 1, got {max_conformations}")
        self.path = Path(source) if isinstance(source, (str, Path)) else None
        self._file = _open_h5(self.path) if self.path is not None else source
        names = list(self._file.keys()) if molecules is None else [str(m) for m in molecules]
        allowed = None if elements is None else {int(z) for z in elements}
        self.index: list[tuple[str, int]] = []
        for name in names:
            if name not in self._file:
                raise ValueError(f"molecule {name!r} is not in the SPICE file")
            group = self._file[name]
            if not hasattr(group, "keys"):
                raise ValueError(f"SPICE entry {name!r} is not a group of fields")
            missing = [f for f in SPICE_FIELDS if f not in group]
            if missing:
                raise ValueError(f"SPICE group {name!r} lacks field(s) {', '.join(missing)}")
            shapes = {f: tuple(group[f].shape) for f in SPICE_FIELDS}
            n = shapes["atomic_numbers"][0] if len(shapes["atomic_numbers"]) == 1 else -1
            c = shapes["dft_total_energy"][0] if len(shapes["dft_total_energy"]) == 1 else -1
            if (
                min(n, c) < 0
                or shapes["conformations"] != (c, n, 3)
                or shapes["dft_total_gradient"] != (c, n, 3)
            ):
                raise ValueError(
                    f"SPICE group {name!r} has inconsistent shapes {shapes} "
                    "(want atomic_numbers [N], conformations [C, N, 3], dft_total_energy [C], "
                    "dft_total_gradient [C, N, 3])"
                )
            if allowed is not None or where is not None:
                z = np.asarray(group["atomic_numbers"][()])
                if allowed is not None and not {int(v) for v in z} <= allowed:
                    continue
                if where is not None and not where(name, z):
                    continue
            keep = c if max_conformations is None else min(c, max_conformations)
            self.index.extend((name, k) for k in range(keep))

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, index: int) -> Any:
        """Conformation ``index`` as labelled ``ase.Atoms`` (Å, eV, eV/Å)."""
        ase = require("ase", "hessian_distill")
        units = require("ase.units", "hessian_distill")
        spc = require("ase.calculators.singlepoint", "hessian_distill")
        if self._file is None:  # after pickling (DataLoader workers): reopen
            self._file = _open_h5(self.path)
        name, k = self.index[index]
        g = self._file[name]
        numbers = np.asarray(g["atomic_numbers"][()], dtype=np.int64)
        pos = np.asarray(g["conformations"][k], dtype=np.float64) * units.Bohr
        energy = float(np.asarray(g["dft_total_energy"][k])) * units.Hartree
        forces = -np.asarray(g["dft_total_gradient"][k], dtype=np.float64) * (units.Hartree / units.Bohr)
        if not (np.isfinite(pos).all() and np.isfinite(energy) and np.isfinite(forces).all()):
            raise ValueError(f"SPICE conformation {k} of {name!r} has NaN or infinite values")
        atoms = ase.Atoms(numbers=numbers, positions=pos, pbc=False)
        atoms.calc = spc.SinglePointCalculator(atoms, energy=energy, forces=forces)
        atoms.info.update(spice_id=name, conformation=k)
        return atoms

    def atoms(self) -> list[Any]:
        """Every selected conformation (reads them all; pass a subset by indexing instead)."""
        return [self[i] for i in range(len(self))]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.path is not None:
            state["_file"] = None  # an h5py handle does not pickle; reopened on first read
        return state

    def close(self) -> None:
        """Close the HDF5 file this reader opened (a mapping passed in is left alone)."""
        if self.path is not None and self._file is not None:
            self._file.close()
            self._file = None
