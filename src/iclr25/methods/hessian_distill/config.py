"""Configs of Hessian distillation: the student, the distillation run, the data and the claim check."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "DataConfig", "DistillConfig", "StudentConfig"]


@dataclass(frozen=True)
class StudentConfig:
    """Architecture of a :class:`~iclr25.methods.hessian_distill.TinyPaiNN`.

    Example:
        >>> StudentConfig().hidden, StudentConfig.paper_painn_small().hidden
        (32, 128)
    """

    hidden: int = param(
        32, doc="feature width F", source="deviation: spec TinyPaiNN (paper PaiNN small: 128)"
    )
    layers: int = param(3, doc="message-passing blocks", source="deviation: spec TinyPaiNN (paper: 4)")
    n_rbf: int = param(16, doc="Gaussian radial basis functions", source="deviation: spec (paper: 128)")
    cutoff: float = param(
        4.0,
        doc="neighbour cutoff in Å",
        source="deviation: 4 Å covers two neighbour shells of a 13-atom cluster at 60% of the 5 Å cost",
    )
    activation: Literal["silu", "softplus", "tanh", "relu"] = param(
        "silu", doc="activation (C²-smooth unless relu)", source="paper: SiLU"
    )
    conservative: bool = param(True, doc="forces as -∂E/∂x (else a direct head)", source="paper: GemNet-dT")

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "n_rbf"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.cutoff <= 0:
            raise ValueError(f"cutoff must be > 0, got {self.cutoff}")
        if self.activation not in ("silu", "softplus", "tanh", "relu"):
            raise ValueError(f"activation must be silu, softplus, tanh or relu, got {self.activation!r}")

    @classmethod
    def nn_teacher(cls) -> StudentConfig:
        """The NN teacher of mode B: hidden 128, 5 layers, 32 RBFs, 5 Å, conservative.

        The same size as the teacher architecture timed by the claim check (spec: PaiNN hidden
        128-256, 4-6 layers).

        Example:
            >>> StudentConfig.nn_teacher().hidden
            128
        """
        return cls(hidden=128, layers=5, n_rbf=32, cutoff=5.0)

    @classmethod
    def paper_painn_small(cls) -> StudentConfig:
        """The paper's PaiNN "small" student (hidden 128, 4 layers, 128 RBFs, 12 Å, direct forces)."""
        return cls(hidden=128, layers=4, n_rbf=128, cutoff=12.0, conservative=False)


@dataclass(frozen=True)
class DistillConfig:
    """One student training run (Sec. 3 objective and Sec. 4 optimiser).

    Example:
        >>> DistillConfig().lambda_h, DistillConfig().undistilled().lambda_h
        (400.0, 0.0)
    """

    lambda_e: float = param(5.0, doc="λ_E, weight of the per-atom energy MAE", source="paper: SPICE config 5")
    lambda_f: float = param(100.0, doc="λ_F, weight of the force L2MAE", source="paper: SPICE config 100")
    lambda_h: float = param(
        400.0, doc="λ_H, weight of the Hessian-row loss", source="paper: SPICE config 400"
    )
    rows_per_structure: int = param(
        1, doc="s, Hessian rows drawn per structure per step", source="paper: config shows 1 (spec: 2)"
    )
    row_strategy: Literal["uniform", "hard"] = param(
        "uniform", doc="row sampling: uniform or hard mining", source="paper: uniform (first code version)"
    )
    hessian_mode: Literal["vjp", "fd", "fd_columns"] = param(
        "fd_columns",
        doc="student rows: VJP, full FD, or FD columns (= rows for conservative students)",
        source="paper: a newer SPICE config uses FD student rows; cheaper than VJP on CPU",
    )
    fd_step: float = param(1e-3, doc="h in Å for finite-difference student rows", source="deviation: float32")
    adaptive_every: int = param(20, doc="steps between checks of the adaptive λ_H rule", source="paper: 20")
    adaptive_band_percent: float = param(5.0, doc="ramp band above the teacher's MAE (%)", source="paper: 5%")
    adaptive_restore: bool = param(
        False, doc="turn λ_H back on above the band", source="paper: never restored"
    )
    teacher_val_force_mae: float = param(
        0.0,
        doc="teacher validation force MAE (eV/Å); <= 0 disables the adaptive rule",
        source="deviation: the EMT teacher is the reference itself (MAE 0, Trap 7)",
    )
    epochs: int = param(
        50, doc="passes over the training set", source="deviation: CPU budget (spec: 200-300)"
    )
    batch_size: int = param(4, doc="structures per step", source="paper: 4 (spec: 16)")
    lr: float = param(5e-3, doc="AdamW learning rate", source="deviation: 5x paper's 1e-3 for few epochs")
    weight_decay: float = param(2e-6, doc="AdamW weight decay", source="paper: 2e-6")
    eps: float = param(1e-7, doc="AdamW epsilon", source="paper: 1e-7")
    amsgrad: bool = param(True, doc="AMSGrad", source="paper: amsgrad")
    plateau_factor: float = param(0.8, doc="ReduceLROnPlateau factor", source="paper: 0.8")
    plateau_patience: int = param(5, doc="ReduceLROnPlateau patience (epochs)", source="paper: 5-10")
    ema_decay: float = param(
        0.99, doc="EMA decay of the weights used at evaluation", source="deviation: 0.999 with few steps"
    )
    clip_grad: float = param(10.0, doc="gradient-norm clip", source="paper: 10")
    seed: int = param(
        0, doc="seed of initialisation, batch order and row sampling", source="deviation: explicit"
    )

    def __post_init__(self) -> None:
        for name in ("lambda_e", "lambda_f", "lambda_h", "weight_decay", "adaptive_band_percent"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("rows_per_structure", "adaptive_every", "epochs", "batch_size", "plateau_patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("lr", "eps", "fd_step", "clip_grad"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if not 0 < self.plateau_factor < 1:
            raise ValueError(f"plateau_factor must be in (0, 1), got {self.plateau_factor}")
        if self.row_strategy not in ("uniform", "hard"):
            raise ValueError(f"row_strategy must be 'uniform' or 'hard', got {self.row_strategy!r}")
        if self.hessian_mode not in ("vjp", "fd", "fd_columns"):
            raise ValueError(f"hessian_mode must be vjp, fd or fd_columns, got {self.hessian_mode!r}")

    def undistilled(self) -> DistillConfig:
        """The same run without the Hessian term (λ_H = 0)."""
        return dataclasses.replace(self, lambda_h=0.0)

    @classmethod
    def paper(cls) -> DistillConfig:
        """The paper's SPICE settings: lr 1e-3, batch 4, EMA 0.999, one row per structure."""
        return cls(lr=1e-3, batch_size=4, ema_decay=0.999, epochs=100, plateau_patience=10)


@dataclass(frozen=True)
class DataConfig:
    """The specialised Cu–Au cluster data (EMT labels) and the teacher labels.

    Example:
        >>> DataConfig().n_train
        50
    """

    train_trajectories: int = param(
        25,
        doc="Langevin trajectories (compositions) of the training set",
        source="deviation: CPU, 50 structures",
    )
    val_trajectories: int = param(10, doc="trajectories of the validation set", source="deviation: CPU")
    test_trajectories: int = param(
        100, doc="trajectories of the test set", source="deviation: 200 test structures"
    )
    frames_per_trajectory: int = param(
        2, doc="frames kept per trajectory", source="deviation: many compositions"
    )
    warmup_steps: int = param(20, doc="Langevin steps before the first frame", source="deviation: CPU")
    steps_between: int = param(3, doc="Langevin steps between frames", source="deviation: CPU")
    label_rows: int = param(
        16,
        doc="teacher rows precomputed per training structure (of 39); 0 = the full Jacobian",
        source="deviation: row-subsampled labels (paper option hessian_percent) for EMT cost",
    )
    fd_step: float = param(
        1e-4, doc="h in Å of the EMT teacher's float64 central differences", source="paper: 1e-4"
    )

    def __post_init__(self) -> None:
        for name in ("train_trajectories", "val_trajectories", "test_trajectories", "frames_per_trajectory"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps < 0 or self.steps_between < 1:
            raise ValueError("warmup_steps must be >= 0 and steps_between >= 1")
        if not 0 <= self.label_rows <= 39:
            raise ValueError(f"label_rows must be in [0, 39], got {self.label_rows}")
        if self.fd_step <= 0:
            raise ValueError(f"fd_step must be > 0, got {self.fd_step}")

    @property
    def n_train(self) -> int:
        """Training structures."""
        return self.train_trajectories * self.frames_per_trajectory


@dataclass(frozen=True)
class ClaimConfig:
    """The claim check: data, student, training, MD and speed settings.

    Example:
        >>> ClaimConfig().md_steps
        500
    """

    data: DataConfig = param(
        DataConfig(), doc="specialised data", source="deviation: CPU-scale Cu–Au clusters"
    )
    student: StudentConfig = param(StudentConfig(), doc="student architecture", source="deviation: TinyPaiNN")
    distill: DistillConfig = param(DistillConfig(), doc="training run", source="paper: SPICE loss weights")
    teacher_hidden: int = param(
        128,
        doc="width of the NN teacher architecture timed against the student",
        source="deviation: spec 128-256",
    )
    teacher_layers: int = param(5, doc="depth of the NN teacher architecture", source="deviation: spec 4-6")
    speed_cell_repeat: int = param(
        4, doc="fcc Cu supercell repeat for speed (4 -> 256 atoms)", source="deviation: spec 256-atom cell"
    )
    speed_calls: int = param(1, doc="timed energy+force calls per model", source="deviation: CPU")
    md_steps: int = param(500, doc="NVE velocity-Verlet steps (1 fs)", source="deviation: spec 2000, CPU")
    md_temperature_K: float = param(
        300.0, doc="initial Maxwell-Boltzmann temperature", source="deviation: 300 K"
    )
    md_timestep_fs: float = param(1.0, doc="MD time step in fs", source="deviation: spec 1 fs")
    drift_bound_mev: float = param(
        1.0, doc="drift bound in meV/atom (R2)", source="deviation: spec 1 meV/atom"
    )

    def __post_init__(self) -> None:
        for name in ("teacher_hidden", "teacher_layers", "speed_cell_repeat", "speed_calls", "md_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.md_timestep_fs <= 0 or self.md_temperature_K <= 0 or self.drift_bound_mev <= 0:
            raise ValueError("md_timestep_fs, md_temperature_K and drift_bound_mev must be > 0")
        if not self.student.conservative:
            raise ValueError("student.conservative must be True (the direct student is the control)")
