"""Baselines and negative controls of Hessian distillation.

Part of the claim check of *Towards Fast, Specialized Machine Learning Force Fields: Distilling
Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S. Krishnapriyan;
ICLR 2025; arXiv:2501.09009):

- the undistilled student is :meth:`DistillConfig.undistilled` (same run, λ_H = 0);
- :func:`direct_student`: the same architecture with a direct (non-conservative) force head,
  the MD-stability control (Sec. 5: direct forces do not conserve energy);
- :func:`shuffled_labels`: teacher rows moved to other structures of the same size (a control
  that keeps the label statistics but destroys the structure-specific curvature);
- :func:`sign_flipped_labels`: teacher rows with the wrong sign (diagnostic).
"""

from __future__ import annotations

from typing import Any

import torch

from .config import StudentConfig
from .labels import TeacherLabelStore
from .models import TinyPaiNN

__all__ = ["direct_student", "make_student", "shuffled_labels", "sign_flipped_labels"]


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
