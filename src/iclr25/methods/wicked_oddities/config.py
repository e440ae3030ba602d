"""Configuration of Wicked Oddities (selective clean-label backdoor poisoning).

Paper: *Wicked Oddities: Selectively Poisoning for Effective Clean-Label Backdoor Attacks*,
Quang H. Nguyen, Ngoc-Hieu Nguyen, The-Anh Ta, Thanh Nguyen-Tang, Kok-Seng Wong,
Hoang Thanh-Tung, Khoa D. Doan, ICLR 2025, arXiv:2407.10825.

:class:`SelectionConfig` says which target-class images are poisoned, :class:`TriggerConfig`
which trigger they carry, :class:`SurrogateConfig` how the attacker's surrogates (a SimCLR-style
encoder and an OOD classifier) are trained, :class:`VictimConfig` how the victim is trained, and
:class:`ClaimConfig` sizes the claim check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "SelectionConfig", "SurrogateConfig", "TriggerConfig", "VictimConfig"]


def _positive(name: str, v: float) -> None:
    if not v > 0:
        raise ValueError(f"{name} must be positive, got {v}")


@dataclass(frozen=True)
class SelectionConfig:
    """Which target-class images get the trigger (Sec. 3 of the paper).

    Example:
        >>> SelectionConfig().strategy, SelectionConfig().k
        ('knn', 50)
    """

    strategy: Literal["knn", "mean", "ood_loss", "random"] = param(
        "knn",
        doc="hardness score: kNN typicality, mean similarity, OOD loss, or none",
        source="paper: Sec. 3.2",
    )
    k: int = param(50, doc="neighbours in the kNN typicality score", source="paper: k = 50")
    budget_frac: float = param(
        0.1, doc="poisoned share of the target class (not of the training set)", source="paper: rate 0.1"
    )
    mode: Literal["hard", "easy", "window"] = param(
        "hard",
        doc="hard = least typical, easy = most typical (control), window = percentile start",
        source="paper: hard selection",
    )
    percentile: float | None = param(
        None, doc="window start p in most-to-least-typical order (mode='window')", source="paper: ablation"
    )

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if not 0.0 < self.budget_frac <= 1.0:
            raise ValueError(f"budget_frac must lie in (0, 1], got {self.budget_frac}")
        if self.mode == "window" and self.percentile is None:
            raise ValueError("mode='window' needs a percentile")


@dataclass(frozen=True)
class TriggerConfig:
    """The backdoor trigger (Sec. 4.1 of the paper), applied in [0, 1] pixel space.

    Example:
        >>> TriggerConfig().blend_alpha
        0.2
    """

    patch_size: int = param(3, doc="BadNets checkerboard side in pixels", source="paper: 3 x 3 patch")
    patch_offset: int = param(
        1,
        doc="gap between the patch and the bottom-right corner",
        source="deviation: 16 px images (paper: 5 px at 32)",
    )
    blend_alpha: float = param(0.2, doc="alpha of the blend trigger", source="paper: alpha = 0.2")
    sig_delta: float = param(0.1, doc="SIG amplitude delta", source="deviation: 0.1 on 16 px (paper: 20/255)")
    sig_freq: float = param(
        2.0, doc="SIG frequency f (cycles over the width)", source="deviation: f <= width/4"
    )

    def __post_init__(self) -> None:
        _positive("patch_size", self.patch_size)
        if not 0.0 < self.blend_alpha <= 1.0:
            raise ValueError(f"blend_alpha must lie in (0, 1], got {self.blend_alpha}")


@dataclass(frozen=True)
class SurrogateConfig:
    """The attacker's surrogates: a SimCLR-style encoder and an OOD (K+1)-way classifier.

    Example:
        >>> SurrogateConfig().temperature
        0.5
    """

    embed_dim: int = param(
        64, doc="encoder feature size (scored without the head)", source="deviation: toy CNN"
    )
    proj_dim: int = param(32, doc="projection-head output size", source="deviation: toy CNN")
    temperature: float = param(0.5, doc="NT-Xent temperature tau", source="paper: SimCLR tau = 0.5")
    epochs: int = param(30, doc="encoder passes over the public pool", source="deviation: CPU budget")
    batch_size: int = param(
        128, doc="images per contrastive batch (2x views)", source="deviation: CPU budget"
    )
    lr: float = param(3e-3, doc="Adam learning rate of the encoder", source="deviation: toy scale")
    crop_min: float = param(
        0.6, doc="smallest area kept by the random resized crop", source="deviation: spec"
    )
    rotation: float = param(15.0, doc="max rotation in degrees", source="deviation: spec")
    translate: float = param(0.1, doc="max shift as a share of the width", source="deviation: spec")
    noise: float = param(0.05, doc="std of added pixel noise", source="deviation: spec")
    ood_epochs: int = param(60, doc="OOD classifier epochs", source="deviation: CPU budget (paper: 100)")
    ood_hidden: int = param(128, doc="OOD MLP hidden width", source="deviation: toy MLP (paper: ResNet-18)")
    ood_lr: float = param(1e-3, doc="Adam learning rate of the OOD MLP", source="deviation: toy scale")

    def __post_init__(self) -> None:
        _positive("temperature", self.temperature)
        if not 0.0 < self.crop_min <= 1.0:
            raise ValueError(f"crop_min must lie in (0, 1], got {self.crop_min}")


@dataclass(frozen=True)
class VictimConfig:
    """The victim's training recipe (the attacker does not choose it).

    Example:
        >>> VictimConfig().epochs
        60
    """

    epochs: int = param(
        60, doc="training epochs; the final epoch is used", source="deviation: spec's 60 (paper: 300)"
    )
    batch_size: int = param(64, doc="images per step", source="deviation: toy (paper: 128)")
    lr: float = param(1e-3, doc="Adam learning rate", source="deviation: Adam on toy (paper: SGD 0.01)")
    weight_decay: float = param(5e-4, doc="weight decay", source="paper: 5e-4")
    shift: int = param(
        1, doc="max random shift in pixels (augmentation after poisoning)", source="deviation: toy"
    )
    channels: tuple[int, int] = param(
        (16, 32), doc="channels of the two conv layers", source="deviation: spec's toy CNN (paper: ResNet-18)"
    )
    schedule: Literal["constant", "cosine"] = param(
        "cosine", doc="learning-rate schedule over the epochs", source="paper: cosine annealing"
    )

    def __post_init__(self) -> None:
        _positive("epochs", self.epochs)
        _positive("batch_size", self.batch_size)
        if self.shift < 0:
            raise ValueError(f"shift must be >= 0, got {self.shift}")
        if self.schedule not in ("constant", "cosine"):
            raise ValueError(f"schedule must be 'constant' or 'cosine', got {self.schedule!r}")


@dataclass(frozen=True)
class ClaimConfig:
    """Size of the claim check: the shapes world (gated) and digits (a second, reported bed).

    Example:
        >>> ClaimConfig().budget_frac, ClaimConfig().shapes_n_train
        (0.1, 2000)
    """

    budget_frac: float = param(
        0.1, doc="poisoned share of the target class, both beds", source="paper: rate 0.1 (Tables 2-3)"
    )
    trigger_name: str = param("badnets", doc="the gated trigger", source="paper: BadNets (Tables 2-3)")
    k: int = param(10, doc="kNN neighbours, capped at n_t - 1", source="deviation: spec k = min(10, n_t - 1)")
    shapes_target: int = param(0, doc="target class on the shapes world", source="deviation: one target")
    shapes_n_train: int = param(
        2000,
        doc="shapes world training images (4 shape classes); sized so the victim reaches CA >= 0.85",
        source="deviation: calibrated (README)",
    )
    shapes_n_val: int = param(
        400, doc="shapes world validation images (convergence curves only)", source="deviation: toy"
    )
    shapes_n_test: int = param(800, doc="shapes world test images", source="deviation: toy")
    shapes_n_public: int = param(
        600, doc="shapes world public pool (the attacker's encoder)", source="deviation: toy"
    )
    digits: bool = param(True, doc="also run the digits bed (its own part)", source="deviation: spec's data")
    digits_target: int = param(8, doc="target class on digits", source="deviation: one of the spec's 0, 3, 8")
    digits_val_share: float = param(
        0.1, doc="share of the digits training pool held out for the curves", source="deviation: toy"
    )
    n_ood_per_class: int = param(
        40, doc="letter images per OOD class (10 classes A-J)", source="deviation: spec"
    )
    eval_every: int = param(1, doc="epochs between validation readings", source="deviation: curves")
    surrogate: SurrogateConfig = param(SurrogateConfig(), doc="surrogates", source="deviation: see fields")
    victim: VictimConfig = param(
        VictimConfig(epochs=80),
        doc="victim recipe on the shapes world",
        source="deviation: 80 epochs, so the curves plateau (calibration, README)",
    )
    digits_victim: VictimConfig = param(
        VictimConfig(), doc="victim recipe on digits", source="deviation: see fields"
    )
    trigger: TriggerConfig = param(
        TriggerConfig(patch_size=2),
        doc="triggers",
        source="deviation: 2 x 2 patch on 16 px (calibrated; paper 3 x 3 on 32 px)",
    )

    def __post_init__(self) -> None:
        if self.trigger_name not in ("badnets", "blend", "sig"):
            raise ValueError(f"trigger_name must be badnets, blend or sig, got {self.trigger_name!r}")
        if not 0.0 < self.budget_frac <= 1.0:
            raise ValueError(f"budget_frac must lie in (0, 1], got {self.budget_frac}")
        _positive("eval_every", self.eval_every)
