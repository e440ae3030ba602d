"""Losses of Hessian distillation: energy, force (L2MAE), Hessian rows, and the adaptive weight.

Implements the objective of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009), Sec. 3, Eq. 3:
``L = λ_E·L_E + λ_F·L_F + λ_H·L_H`` with L_E the per-atom energy MAE, L_F the mean over atoms of
``‖F_pred − F_ref‖₂`` and L_H the Hessian-row term

``ℓ_b = mean_{r∈S_b} Σ_j ‖J^S_r[j] − J^T_r[j]‖₂`` and ``L_H = world_size · Σ_b ℓ_b / Σ_b N_free,b``,

all in force-normalised units (divided by σ_F only, no mean subtraction). The adaptive rule
switches λ_H off once the student's validation force error beats the teacher's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from .batch import AtomsBatch

__all__ = ["AdaptiveHessianWeight", "HessianDistillationLoss", "energy_force_loss"]


def energy_force_loss(
    pred: dict[str, torch.Tensor],
    energy: torch.Tensor,
    forces: torch.Tensor,
    batch: AtomsBatch,
    *,
    force_std: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-atom energy MAE and force L2MAE (over free atoms), both divided by σ_F.

    Args:
        pred: the model output (``energy [B]``, ``forces [N, 3]``).
        energy: reference energies ``[B]`` (eV).
        forces: reference forces ``[N, 3]`` (eV/Å).
        batch: the structures.
        force_std: σ_F, the force normaliser.

    Returns:
        ``(L_E, L_F)``.

    Example:
        >>> from ase import Atoms
        >>> b = AtomsBatch.from_atoms([Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.5]])])
        >>> pred = {"energy": torch.tensor([1.0]), "forces": torch.zeros(2, 3)}
        >>> le, lf = energy_force_loss(pred, torch.tensor([0.0]), torch.ones(2, 3), b)
        >>> round(le.item(), 3), round(lf.item(), 3)
        (0.5, 1.732)
    """
    n = batch.sizes.to(energy.dtype)
    l_e = ((pred["energy"] - energy).abs() / n).mean() / force_std
    free = ~batch.fixed
    l_f = (pred["forces"][free] - forces[free]).norm(dim=-1).mean() / force_std
    return l_e, l_f


@dataclass
class HessianDistillationLoss:
    """The Hessian-row term L_H (Sec. 3), normalised by the batch's free-atom count.

    Args:
        rows_per_structure: s, Hessian rows drawn per structure per step (paper config: 1).
        outlier_threshold: if ``max |J^T_r|`` (eV/Å²) exceeds it, the structure's ℓ_b is
            multiplied by 1e-8 (outlier guard).
        force_std: σ_F; student and teacher rows are both divided by it.
        world_size: number of data-parallel workers (the official normalisation multiplies by it).

    Example:
        >>> from ase import Atoms
        >>> b = AtomsBatch.from_atoms([Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.5]])])
        >>> rows = torch.tensor([[0, 0, 2]])
        >>> s = torch.zeros(1, 2, 3)
        >>> t = torch.tensor([[[0.0, 0.0, 3.0], [0.0, 4.0, 0.0]]])
        >>> HessianDistillationLoss()(s, t, rows, b).item()  # (3 + 4) / 2 free atoms
        3.5
    """

    rows_per_structure: int = 1
    outlier_threshold: float = 1e4
    force_std: float = 1.0
    world_size: int = 1

    def __post_init__(self) -> None:
        if self.rows_per_structure < 1:
            raise ValueError(f"rows_per_structure must be >= 1, got {self.rows_per_structure}")
        if self.force_std <= 0:
            raise ValueError(f"force_std must be > 0, got {self.force_std}")
        if self.outlier_threshold <= 0:
            raise ValueError(f"outlier_threshold must be > 0, got {self.outlier_threshold}")

    def __call__(
        self,
        student_rows: torch.Tensor,
        teacher_rows: torch.Tensor,
        rows: torch.Tensor,
        batch: AtomsBatch,
    ) -> torch.Tensor:
        """L_H for one batch.

        Args:
            student_rows: ``[R, N_max, 3]`` student rows (eV/Å²).
            teacher_rows: ``[R, N_max, 3]`` teacher rows (eV/Å², detached).
            rows: ``[R, 3]`` (structure, atom, component) the rows belong to.
            batch: the structures.

        Returns:
            The scalar L_H.

        Shape:
            Padding slots beyond a structure's atoms are ignored.
        """
        if student_rows.shape != teacher_rows.shape:
            raise ValueError(
                f"student rows {tuple(student_rows.shape)} != teacher {tuple(teacher_rows.shape)}"
            )
        if rows.shape[0] != student_rows.shape[0]:
            raise ValueError(f"{rows.shape[0]} row indices for {student_rows.shape[0]} rows")
        teacher_rows = teacher_rows.detach().to(student_rows.dtype)
        struct = rows[:, 0]
        n_max = student_rows.shape[1]
        # column mask: real (non-padding) and free atoms of each row's structure; Trap 4 offsets
        local = torch.arange(n_max)
        sizes = batch.sizes[struct]  # [R]
        real = local[None, :] < sizes[:, None]  # [R, N_max]
        atom = (batch.ptr[struct][:, None] + local[None, :]).clamp(max=batch.pos.shape[0] - 1)
        mask = real & ~batch.fixed[atom]
        row_fixed = batch.fixed[batch.ptr[struct] + rows[:, 1]]  # rows of fixed atoms are dropped
        diff = (student_rows - teacher_rows) / self.force_std
        err = (diff.norm(dim=-1) * mask).sum(dim=1)  # [R]: Σ_j ‖ΔJ_r[j]‖₂
        keep = (~row_fixed).to(err.dtype)
        outlier = teacher_rows.abs().flatten(1).amax(dim=1) > self.outlier_threshold
        err = err * torch.where(outlier, torch.full_like(err, 1e-8), torch.ones_like(err))
        n_struct = batch.num_structures
        sum_err = torch.zeros(n_struct, dtype=err.dtype).index_add(0, struct, err * keep)
        count = torch.zeros(n_struct, dtype=err.dtype).index_add(0, struct, keep)
        ell = sum_err / count.clamp_min(1.0)  # ℓ_b, mean over the structure's rows
        n_free = (~batch.fixed).sum().clamp_min(1).to(err.dtype)
        return self.world_size * ell.sum() / n_free


State = Literal["on", "ramped", "off", "disabled"]


@dataclass
class AdaptiveHessianWeight:
    """λ_H schedule: switch the Hessian term off once the student beats the teacher (Sec. 3).

    A state machine, checked every ``every`` steps against the student's validation force MAE
    ``m_S`` and the teacher's ``m_T`` (measured once, the same per-atom definition; Trap 8):

    - ``m_S < m_T`` -> ``off`` (λ_H = 0);
    - ``m_T ≤ m_S ≤ m_T (1 + band_percent/100)`` -> ``ramped`` (λ_H = ramp · base);
    - above the band -> unchanged (an ``off`` weight stays off, as in the official code), or back
      to ``on`` if ``restore=True``;
    - ``m_T ≤ 0`` (a perfect teacher, e.g. the reference itself) -> ``disabled``: the percentage
      band is undefined, so the rule never fires and λ_H stays at ``base`` (Trap 7).

    Args:
        base: λ_H (paper: 400 on SPICE).
        teacher_val_force_mae: the teacher's validation force MAE against the reference labels.
        band_percent: width of the ramp band in percent.
        every: steps between checks.
        ramp: the factor inside the band (one official version: 0.25).
        restore: return to ``on`` when the student falls back above the band.

    Example:
        >>> w = AdaptiveHessianWeight(base=400, teacher_val_force_mae=0.10, every=1)
        >>> w.update(1, 0.20), w.update(2, 0.104), w.update(3, 0.09), w.update(4, 0.2)
        (400.0, 100.0, 0.0, 0.0)
    """

    base: float = 400.0
    teacher_val_force_mae: float = 0.0
    band_percent: float = 5.0
    every: int = 20
    ramp: float = 0.25
    restore: bool = False
    state: State = "on"
    history: list[tuple[int, str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.base < 0 or self.band_percent < 0 or not 0 <= self.ramp <= 1:
            raise ValueError("base and band_percent must be >= 0 and ramp in [0, 1]")
        if self.every < 1:
            raise ValueError(f"every must be >= 1, got {self.every}")
        if self.teacher_val_force_mae <= 0:
            self.state = "disabled"
            self.history.append((0, "disabled", self.base))

    @property
    def weight(self) -> float:
        """The current λ_H."""
        base = float(self.base)
        return {"on": base, "disabled": base, "ramped": self.ramp * base, "off": 0.0}[self.state]

    def update(self, step: int, student_val_force_mae: float) -> float:
        """Apply the rule at ``step`` (only when ``step % every == 0``) and return λ_H."""
        if self.state == "disabled" or step % self.every != 0:
            return self.weight
        m_t = self.teacher_val_force_mae
        before = self.state
        if student_val_force_mae < m_t:
            self.state = "off"
        elif student_val_force_mae <= m_t * (1 + self.band_percent / 100):
            self.state = "ramped"
        elif self.restore:
            self.state = "on"
        if self.state != before:
            self.history.append((step, self.state, self.weight))
        return self.weight
