"""Baselines and negative controls of Hessian distillation.

Part of the claim check of *Towards Fast, Specialized Machine Learning Force Fields: Distilling
Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S. Krishnapriyan;
ICLR 2025; arXiv:2501.09009):

- the undistilled student is :meth:`DistillConfig.undistilled` (same run, λ_H = 0);
- :func:`direct_student`: the same architecture with a direct (non-conservative) force head,
  the MD-stability control (Sec. 5: direct forces do not conserve energy);
- :func:`shuffled_labels`: teacher rows moved to other structures of the same size (a control
  that keeps the label statistics but destroys the structure-specific curvature);
- :func:`sign_flipped_labels`: teacher rows with the wrong sign (diagnostic);
- :func:`random_teacher_labels`: rows of a randomly initialised teacher of the same architecture,
  rescaled to the true rows' root mean square: the same training cost, row count and row
  magnitude, but the curvature of an energy that knows nothing about the reference (the control
  that separates the teacher's curvature from the extra compute of the Hessian term).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .config import StudentConfig
from .labels import TeacherLabelStore
from .models import TinyPaiNN
from .teachers import TorchTeacher

__all__ = [
    "direct_student",
    "make_student",
    "random_teacher_labels",
    "shuffled_labels",
    "sign_flipped_labels",
]


def make_student(config: StudentConfig, *, elements: tuple[int, ...] = (29, 79), seed: int = 0) -> TinyPaiNN:
    """A :class:`TinyPaiNN` from a :class:`StudentConfig`.

    Example:
        >>> make_student(StudentConfig()).conservative
        True
    """
    return TinyPaiNN(
        hidden=config.hidden,
        layers=config.layers,
        n_rbf=config.n_rbf,
        cutoff=config.cutoff,
        activation=config.activation,
        conservative=config.conservative,
        elements=elements,
        seed=seed,
    )


def direct_student(
    config: StudentConfig, *, elements: tuple[int, ...] = (29, 79), seed: int = 0
) -> TinyPaiNN:
    """The same student with direct forces from a vector head (not ``-∂E/∂x``).

    Example:
        >>> direct_student(StudentConfig()).conservative
        False
    """
    cfg = StudentConfig(**{**config.__dict__, "conservative": False})
    return make_student(cfg, elements=elements, seed=seed)


def shuffled_labels(store: TeacherLabelStore, generator: torch.Generator, sizes: dict[str, int]) -> Any:
    """Teacher rows of each structure replaced by those of another structure of the same size.

    Args:
        store: the true labels.
        generator: seeded permutation.
        sizes: structure id -> atom count (donors are drawn among ids of equal size).

    Returns:
        A new in-memory store (every structure gets another structure's rows when possible).
    """
    by_size: dict[int, list[str]] = {}
    for sid in store.ids():
        by_size.setdefault(sizes[sid], []).append(sid)
    mapping: dict[str, str] = {}
    for ids in by_size.values():
        if len(ids) < 2:
            continue
        # a cyclic shift of a random order: nobody keeps its own rows
        order = [ids[int(k)] for k in torch.randperm(len(ids), generator=generator)]
        for k, sid in enumerate(order):
            mapping[sid] = order[(k + 1) % len(order)]
    return store.transformed(permutation=mapping)


def sign_flipped_labels(store: TeacherLabelStore) -> Any:
    """Teacher rows with flipped sign (a diagnostic control)."""
    return store.transformed(sign=-1.0)


def random_teacher_labels(
    reference: TeacherLabelStore,
    atoms: Sequence[Any],
    architecture: StudentConfig,
    *,
    elements: tuple[int, ...],
    seed: int,
    rows_per_structure: int | None = None,
) -> TeacherLabelStore:
    """Rows of a randomly initialised teacher, rescaled to the root mean square of ``reference``.

    The random network has the teacher's architecture and is never trained, so its Hessian is
    that of a smooth, rotation-invariant energy unrelated to the reference. One global factor
    (not per structure) brings its rows to the magnitude of the true teacher's rows, so that a
    student distilled from them pays the same cost per step and sees rows of the same size.

    Args:
        reference: the true teacher's rows (only their root mean square is used).
        atoms: the structures to label (with ``info["id"]``, as for ``reference``).
        architecture: the teacher's architecture.
        elements: atomic numbers the random teacher accepts.
        seed: its initialisation and the choice of rows.
        rows_per_structure: rows per structure (``None``: all 3N, the full Jacobian).

    Returns:
        An in-memory store of the rescaled random rows.

    Example:
        >>> from iclr25.methods.hessian_distill import ASECalculatorTeacher, make_clusters
        >>> atoms = make_clusters(1, 2, seed=0, warmup_steps=1)
        >>> ref = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms, rows_per_structure=2, seed=0)
        >>> arch = StudentConfig(hidden=8, layers=1, n_rbf=4)
        >>> rnd = random_teacher_labels(ref, atoms, arch, elements=(29, 79), seed=1, rows_per_structure=2)
        >>> round(rnd.rms() / ref.rms(), 6)
        1.0
    """
    model = make_student(architecture, elements=elements, seed=seed)
    teacher = TorchTeacher(model, dtype=torch.float32)
    store = TeacherLabelStore().precompute(
        teacher, list(atoms), rows_per_structure=rows_per_structure, seed=seed, cutoff=architecture.cutoff
    )
    rms = store.rms()
    if not rms > 0:
        raise ValueError("the random teacher's rows are all zero; use another seed")
    out = store.transformed(sign=reference.rms() / rms)
    out.meta["random_teacher"] = {"seed": seed, "scale": reference.rms() / rms}
    return out
