"""MACE foundation models (MACE-OFF, MACE-MP-0) from a local file, as autograd-row teachers.

The paper (Amin, Raja, Krishnapriyan, ICLR 2025, arXiv:2501.09009, Sec. 4) distils MACE-OFF and
MACE-MP-0 (and JMP-L, a GemNet, whose package is not installable here). MACE releases its models
as ``.model`` files: a whole pickled ``torch.nn.Module`` of the ``mace-torch`` package.
:func:`load_mace_teacher` reads one from a local path and wraps it as a :class:`TorchTeacher`, so
the teacher's Hessian rows are exact autograd rows of MACE's energy, taken on this package's
:class:`AtomsBatch` (its pairs and cell shifts follow MACE's convention: the edge vector is
``pos[j] - pos[i] + shift @ cell``). The ``mace-torch`` calculator (``MACECalculator``) works
too, through :class:`ASECalculatorTeacher`, with finite-difference rows.

Unpickling runs code from the file: load only models from a source you trust (the MACE
releases). Nothing is downloaded.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr25._core.registry import require

from .batch import AtomsBatch
from .teachers import EnergyFunctionModel, TorchTeacher

__all__ = ["MACEEnergyModel", "load_mace_model", "load_mace_teacher"]

#: The extra that installs ``mace-torch``.
EXTRA = "hessian_distill_mace"
#: ``import mace`` sets this for the whole process (every later ``torch.load`` would unpickle);
#: the import below restores it.
_WEIGHTS_ONLY_ENV = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


def _import_mace() -> None:
    """Import ``mace.modules`` (and e3nn, whose constants need an unpickling load) without
    leaving the process's ``torch.load`` default changed."""
    before = os.environ.get(_WEIGHTS_ONLY_ENV)
    try:
        require("mace", EXTRA)
        importlib.import_module("mace.modules")
    finally:
        if before is None:
            os.environ.pop(_WEIGHTS_ONLY_ENV, None)
        else:
            os.environ[_WEIGHTS_ONLY_ENV] = before


class MACEEnergyModel(EnergyFunctionModel):
    """A ``mace-torch`` model (``MACE``, ``ScaleShiftMACE``) as an energy model on :class:`AtomsBatch`.

    Args:
        mace_model: the MACE module (``r_max``, ``atomic_numbers`` and, for multi-head models,
            ``heads`` are read from it).
        head: which readout head to use (default: the first; MACE-MP-0 and MACE-OFF have one).

    Raises:
        TypeError: ``mace_model`` lacks ``r_max`` or ``atomic_numbers``.
        ValueError: ``head`` is not one of the model's heads.
    """

    def __init__(self, mace_model: nn.Module, *, head: str | None = None) -> None:
        if not all(hasattr(mace_model, a) for a in ("r_max", "atomic_numbers")):
            raise TypeError(
                f"expected a MACE model (with r_max and atomic_numbers), got {type(mace_model).__name__}"
            )
        super().__init__(None, cutoff=float(mace_model.r_max))
        self.mace = mace_model
        heads = list(getattr(mace_model, "heads", None) or ["Default"])
        if head is not None and head not in heads:
            raise ValueError(f"head {head!r} is not one of the model's heads {heads}")
        self.head = heads.index(head) if head is not None else 0
        self.elements = [int(z) for z in mace_model.atomic_numbers]
        table = torch.full((max(self.elements) + 1,), -1, dtype=torch.long)
        table[self.elements] = torch.arange(len(self.elements))
        self.register_buffer("element_index", table, persistent=False)

    def energy(self, pos: torch.Tensor, batch: AtomsBatch) -> torch.Tensor:
        """MACE's energies ``[B]`` (interaction plus the isolated-atom energies E0)."""
        z = batch.numbers
        known = z < len(self.element_index)
        idx = torch.where(known, self.element_index[z.clamp(max=len(self.element_index) - 1)], -1)
        if bool((idx < 0).any()):
            missing = sorted({int(v) for v in z[idx < 0].tolist()})
            raise ValueError(f"atomic numbers {missing} are not among the model's elements {self.elements}")
        cell = batch.cell.to(pos.dtype)
        sender = batch.edge_index[0]
        shift = batch.shift.to(pos.dtype)
        data: dict[str, Any] = {
            "positions": pos,
            "node_attrs": nn.functional.one_hot(idx, len(self.elements)).to(pos.dtype),
            "edge_index": batch.edge_index,
            "shifts": torch.einsum("ek,ekl->el", shift, cell[batch.batch[sender]]),
            "unit_shifts": shift,
            "cell": cell.reshape(-1, 3),
            "batch": batch.batch,
            "ptr": batch.ptr,
            "head": torch.full((batch.num_structures,), self.head, dtype=torch.long, device=pos.device),
        }
        return self.mace(data, training=True, compute_force=False)["energy"]


def load_mace_model(path: str | os.PathLike[str], *, device: str | torch.device = "cpu") -> nn.Module:
    """The MACE module pickled in a local ``.model`` file (as MACE releases its models).

    Raises:
        FileNotFoundError: no file at ``path``.
        MissingExtraError: ``mace-torch`` is not installed.
        TypeError: the file holds something else than a MACE model.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no MACE model file at {path}")
    _import_mace()
    model = torch.load(path, map_location=device, weights_only=False)  # a whole module (trusted files only)
    if not isinstance(model, nn.Module) or not hasattr(model, "atomic_numbers"):
        raise TypeError(f"{path} holds a {type(model).__name__}, not a MACE model")
    return model


def load_mace_teacher(
    path: str | os.PathLike[str],
    *,
    head: str | None = None,
    dtype: torch.dtype = torch.float64,
    device: str | torch.device | None = None,
) -> TorchTeacher:
    """A MACE foundation model from a local ``.model`` file as a :class:`TorchTeacher`.

    Args:
        path: the ``.model`` file (e.g. MACE-OFF23's ``MACE-OFF23_small.model``).
        head: the readout head of a multi-head model (default: the first).
        dtype: the dtype rows are taken in (float64: exact rows, as the paper's).
        device: where the model runs (default: the CPU).

    Returns:
        A teacher whose ``hessian_rows`` are autograd rows of MACE's energy.

    Example:
        >>> teacher = load_mace_teacher("MACE-OFF23_small.model", device="cuda")  # doctest: +SKIP
    """
    model = MACEEnergyModel(load_mace_model(path), head=head)
    return TorchTeacher(model, dtype=dtype, device=device)
