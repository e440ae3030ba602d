"""Configuration of InvMSAFold (structure → low-rank Potts model) and of its lattice claim check.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Silva, Meynard-Piganeau, Lucibello,
Feinauer, ICLR 2025, arXiv:2406.11975. :class:`DecoderConfig` is the network (Sec. 3, App.),
:class:`TrainConfig` its optimisation, :class:`SampleConfig` the samplers, :class:`LatticeConfig`
the lattice-protein world and :class:`ClaimConfig` the whole check. Paper-scale presets:
:meth:`DecoderConfig.paper`, :meth:`TrainConfig.paper_pw`, :meth:`TrainConfig.paper_ar`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from iclr25._core.config import param

__all__ = ["ClaimConfig", "DecoderConfig", "LatticeConfig", "SampleConfig", "TrainConfig"]


def _positive(obj: object, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise ValueError(f"{type(obj).__name__}.{n} must be > 0, got {v!r}")


@dataclass(frozen=True)
class DecoderConfig:
    """The InvMSAFold network: embeddings → transformer → low-rank factors V and fields h.

    Example:
        >>> DecoderConfig.paper().rank
        48
    """

    embed_dim: int = param(
        512, doc="E, per-residue input embedding width", source="paper: ESM-IF1 encoder, 512-d"
    )
    d_model: int = param(512, doc="d, transformer width", source="paper: App., d = 512")
    n_layers: int = param(6, doc="transformer encoder layers (each followed by a ReLU)", source="paper: App.")
    n_heads: int = param(8, doc="attention heads", source="paper: App.")
    dim_feedforward: int = param(2048, doc="feed-forward width", source="paper: PyTorch default width")
    rank: int = param(48, doc="K, rank of the coupling matrix J", source="paper: App., K = 48")
    q: int = param(21, doc="number of Potts states (21 with the gap for proteins)", source="paper: Sec. 3")
    dropout: float = param(0.1, doc="dropout in the transformer layers", source="paper: App.")

    def __post_init__(self) -> None:
        _positive(self, "embed_dim", "d_model", "n_layers", "n_heads", "dim_feedforward", "rank", "q")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"DecoderConfig.d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
            )
        if not 0 <= self.dropout < 1:
            raise ValueError(f"DecoderConfig.dropout must be in [0, 1), got {self.dropout}")

    @classmethod
    def paper(cls) -> DecoderConfig:
        """The paper's decoder over 512-d ESM-IF1 embeddings."""
        return cls()

    def replace(self, **kw: object) -> DecoderConfig:
        """A copy with fields changed."""
        return dataclasses.replace(self, **kw)


@dataclass(frozen=True)
class TrainConfig:
    """Training of InvMSAFold (PW or AR) and of the autoregressive baseline.

    Example:
        >>> TrainConfig.paper_ar().msa_rows
        64
    """

    steps: int = param(300, doc="optimizer steps", source="deviation: CPU budget (paper: ~94-100 epochs)")
    lr: float = param(3.5e-4, doc="AdamW learning rate", source="paper: App., 3.5e-4 for PW (1.27e-4 AR)")
    weight_decay: float = param(0.01, doc="AdamW weight decay", source="paper: AdamW defaults")
    batch_structures: int = param(4, doc="structures per step", source="paper: App., 4 (PW) / 8 (AR)")
    msa_rows: int = param(128, doc="M, MSA rows per structure, drawn with replacement", source="paper: App.")
    eta_j: float = param(2.15e-6, doc="η_J, weight of ‖J‖²_F / B", source="paper: App.")
    eta_h: float = param(6.51e-4, doc="η_h, weight of ‖h‖² / B", source="paper: App.")
    noise: float = param(
        0.02, doc="σ of Gaussian noise added to embeddings while training", source="paper: App."
    )

    def __post_init__(self) -> None:
        _positive(self, "steps", "lr", "batch_structures", "msa_rows")
        for n in ("weight_decay", "eta_j", "eta_h", "noise"):
            if getattr(self, n) < 0:
                raise ValueError(f"TrainConfig.{n} must be >= 0, got {getattr(self, n)}")

    @classmethod
    def paper_pw(cls) -> TrainConfig:
        """PW: 4 structures × 128 rows, lr 3.5e-4 (steps: set per data set, ~94-100 epochs)."""
        return cls(steps=100_000, lr=3.5e-4, batch_structures=4, msa_rows=128)

    @classmethod
    def paper_ar(cls) -> TrainConfig:
        """AR: 8 structures × 64 rows, lr 1.27e-4."""
        return cls(steps=100_000, lr=1.27e-4, batch_structures=8, msa_rows=64)

    def replace(self, **kw: object) -> TrainConfig:
        """A copy with fields changed."""
        return dataclasses.replace(self, **kw)


@dataclass(frozen=True)
class SampleConfig:
    """How sequences are drawn and measured.

    Example:
        >>> SampleConfig().n_speed
        10000
    """

    n_eval: int = param(
        80,
        doc="samples per fold for the metrics (= held-out rows)",
        source="deviation: equal-size sets (spec trap 8)",
    )
    n_speed: int = param(
        10_000, doc="sequences sampled in the timing comparison", source="paper: Sec. 4, 10^4 samples"
    )
    gibbs_sweeps: int = param(
        30, doc="Gibbs sweeps per chain for InvMSAFold-PW", source="deviation: CPU budget"
    )
    gibbs_burn_in: int = param(20, doc="Gibbs burn-in sweeps", source="deviation: CPU budget")
    temperature: float = param(1.0, doc="sampling temperature of every model", source="paper: T = 1")

    def __post_init__(self) -> None:
        _positive(self, "n_eval", "n_speed", "gibbs_sweeps", "temperature")
        if self.gibbs_burn_in < 0 or self.gibbs_burn_in >= self.gibbs_sweeps:
            raise ValueError("SampleConfig.gibbs_burn_in must be in [0, gibbs_sweeps)")


@dataclass(frozen=True)
class LatticeConfig:
    """The lattice-protein world (replaces CATH + MMseqs2 MSAs + AlphaFold2).

    Example:
        >>> LatticeConfig().shape
        (5, 5)
    """

    shape: tuple[int, ...] = param(
        (5, 5), doc="grid of the compact structures", source="deviation: lattice world (spec: 5x5 full)"
    )
    energy: str = param(
        "mj_residual",
        doc="contact energy: 'mj' or 'mj_residual' (pair-specific MJ part)",
        source="deviation: raw MJ gave no covariation (measured)",
    )
    energy_scale: float = param(
        6.0, doc="factor on the contact-energy matrix", source="deviation: calibrated once"
    )
    temperature: float = param(
        1.0, doc="T in P_nat (energy units)", source="deviation: calibrated once (not in the paper)"
    )
    beta: float = param(
        10.0,
        doc="β, selection on log P_nat in the MSA chains",
        source="deviation: calibrated for mean P_nat ~0.9",
    )
    gamma: float = param(
        2.0,
        doc="γ, selection on the folding energy E(s,S*) in the MSA chains",
        source="deviation: calibrated once",
    )
    warm_sweeps: int = param(
        40, doc="heat-bath warm-start sweeps on exp(-γE) before the chains", source="deviation: mixing"
    )
    n_train_folds: int = param(
        320, doc="folds whose MSAs train the models", source="deviation: hundreds of folds (spec: 60)"
    )
    n_test_folds: int = param(
        16,
        doc="unseen folds, drawn from the held-out pool (the gated evaluation set)",
        source="deviation: CPU budget (spec: 15)",
    )
    heldout_pool: int = param(
        100,
        doc="contact maps no model trains on (a fixed split; test folds are drawn from it)",
        source="paper: held-out-structure split",
    )
    n_report_folds: int = param(
        12,
        doc="training folds with a deep MSA split 80/20 (the report-only 'MSA test' rows)",
        source="deviation: CPU budget",
    )
    train_seqs_per_fold: int = param(
        64, doc="MSA rows of the other training folds", source="deviation: CPU budget (MSA sampling cost)"
    )
    train_chains: int = param(
        16, doc="Metropolis chains per other training fold", source="deviation: CPU budget"
    )
    seqs_per_fold: int = param(
        400,
        doc="MSA rows per report fold (and 2 x n_eval rows per unseen fold)",
        source="deviation: spec, full budget",
    )
    heldout_frac: float = param(
        0.2, doc="fraction of each MSA held out (the paper's 'MSA test')", source="deviation: spec, 80/20"
    )
    n_chains: int = param(
        80,
        doc="parallel Metropolis chains per fold (held-out rows are whole chains)",
        source="deviation: CPU budget",
    )
    burn_in_sweeps: int = param(
        4, doc="Metropolis sweeps before the first MSA row", source="deviation: CPU budget"
    )
    thin_sweeps: int = param(2, doc="sweeps between MSA rows of one chain", source="deviation: CPU budget")

    def __post_init__(self) -> None:
        if len(self.shape) not in (2, 3) or min(self.shape) < 2:
            raise ValueError(f"LatticeConfig.shape must be a 2-D or 3-D grid, got {self.shape}")
        _positive(
            self,
            "temperature",
            "beta",
            "n_train_folds",
            "n_test_folds",
            "seqs_per_fold",
            "n_chains",
            "thin_sweeps",
        )
        if not 0 < self.heldout_frac < 1:
            raise ValueError(f"LatticeConfig.heldout_frac must be in (0, 1), got {self.heldout_frac}")
        if self.burn_in_sweeps < 0 or self.warm_sweeps < 0 or self.gamma < 0:
            raise ValueError("LatticeConfig.burn_in_sweeps, warm_sweeps and gamma must be >= 0")
        if self.energy not in ("mj", "mj_residual"):
            raise ValueError(f"LatticeConfig.energy must be 'mj' or 'mj_residual', got {self.energy!r}")
        if self.seqs_per_fold % self.n_chains:
            raise ValueError("LatticeConfig.seqs_per_fold must be a multiple of n_chains")
        _positive(self, "heldout_pool", "n_report_folds", "train_seqs_per_fold", "train_chains")
        if self.n_report_folds > self.n_train_folds or self.n_test_folds > self.heldout_pool:
            raise ValueError(
                "LatticeConfig needs n_report_folds <= n_train_folds, n_test_folds <= heldout_pool"
            )


@dataclass(frozen=True)
class ClaimConfig:
    """The claim check: world, models, training and sampling at one budget.

    Example:
        >>> ClaimConfig().decoder.rank
        16
    """

    lattice: LatticeConfig = param(LatticeConfig(), doc="lattice world", source="deviation: lattice world")
    decoder: DecoderConfig = param(
        DecoderConfig(
            embed_dim=64, d_model=64, n_layers=2, n_heads=4, dim_feedforward=256, rank=16, q=20, dropout=0.0
        ),
        doc="InvMSAFold decoder",
        source="deviation: CPU size (d = 64, 2 layers, K = 16, q = 20)",
    )
    train: TrainConfig = param(
        TrainConfig(steps=1000, lr=1e-3, batch_structures=8, msa_rows=48),
        doc="training of every model",
        source="deviation: CPU budget, one lr for all models (set from training losses)",
    )
    sample: SampleConfig = param(SampleConfig(), doc="sampling and metrics", source="deviation: CPU budget")
    encoder_layers: int = param(
        2, doc="LatticeEncoder transformer layers", source="deviation: spec (2 layers)"
    )
    baseline_layers: int = param(2, doc="IF-AR decoder layers", source="deviation: spec (2 layers, d = 64)")
    ar_steps: int = param(
        3000,
        doc="steps of InvMSAFold-AR and of the native-only control (the other models: train.steps)",
        source="deviation: convergence (at 1000 steps the AR validation NLL still fell 0.07 nats over "
        "the last fifth with 320 folds; PW had plateaued; measured)",
    )
    ar_lr: float | None = param(
        None,
        doc="learning rate of InvMSAFold-AR and of the native-only control (None: train.lr)",
        source="paper: App., 1.27e-4 for AR (the long budget; full keeps train.lr for its step budget)",
    )
    pretrained_ifar: bool = param(
        True,
        doc="use the shipped IF-AR (trained on the natives of every trainable fold); False trains it here",
        source="deviation: ESM-IF1 stand-in pretrained once",
    )
    ifar_steps: int = param(
        1000, doc="IF-AR steps when trained here (pretrained_ifar=False)", source="deviation: CPU budget"
    )
    finetune_rows: int = param(
        16, doc="MSA rows per structure in that fine-tuning", source="deviation: CPU budget"
    )
    finetune_steps: int = param(
        100,
        doc="steps of the report-only IF-AR fine-tuned on the training MSAs",
        source="deviation: CPU budget (paper: ESM-IF1 fine-tuned on MSAs)",
    )
    val_every: int = param(
        50, doc="steps between validation losses of the trained arms", source="deviation: convergence reading"
    )
    speed_folds: int = param(
        1, doc="folds timed for the 10^4-sample comparison", source="deviation: CPU budget"
    )

    def __post_init__(self) -> None:
        _positive(
            self,
            "encoder_layers",
            "baseline_layers",
            "ifar_steps",
            "finetune_steps",
            "val_every",
            "speed_folds",
        )
        if self.decoder.q != 20:
            raise ValueError("ClaimConfig.decoder.q must be 20 (the lattice alphabet)")
        if self.ar_lr is not None and not self.ar_lr > 0:
            raise ValueError(f"ClaimConfig.ar_lr must be positive or None, got {self.ar_lr}")
