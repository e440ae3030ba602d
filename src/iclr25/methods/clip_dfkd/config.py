"""Configuration of CLIP-DFKD: the tiny teachers, text-driven inversion and (meta) distillation.

Paper: *Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation*, Yongxian Wei,
Zixuan Hu, Li Shen, Zhenyi Wang, Chun Yuan, Dacheng Tao, ICLR 2025 (OpenReview 1aF2D2CPHi).
:class:`TeacherConfig` builds and trains a tiny CLIP-style teacher on the shapes world,
:class:`InversionConfig` is Stage 1 (surrogate-set inversion, Sec. 4), :class:`DistillConfig`
is Stage 2 (KD and meta-KD). ``tiny()`` presets are the CPU scale, ``paper()`` the paper's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["DEFAULT_STYLES", "DistillConfig", "InversionConfig", "TeacherConfig", "TeacherRecipe"]

#: The style dictionary of SDD on the shapes world: the words the world's captions use for its six
#: training render styles. The paper's dictionary (photo, sketch, painting, cartoon, ...) is not
#: listed in full; the held-out style ("checkered") is deliberately absent.
DEFAULT_STYLES: tuple[str, ...] = ("solid", "outlined", "striped", "dotted", "noisy", "blurry")

#: The paper's real-world style dictionary, for paper-scale use (partly unconfirmed).
PAPER_STYLES: tuple[str, ...] = (
    "photo", "sketch", "painting", "cartoon", "drawing", "art", "toy", "sculpture", "rendering",
    "tattoo", "embroidery", "origami",
)  # fmt: skip


def _positive(obj: object, *names: str) -> None:
    for name in names:
        v = getattr(obj, name)
        if v <= 0:
            raise ValueError(f"{name} must be positive, got {v}")


@dataclass(frozen=True)
class TeacherConfig:
    """A tiny CLIP-style teacher (open_clip ``CLIP`` with ``pretrained=None``) and its training.

    Example:
        >>> TeacherConfig.tiny("resnet").distractor_p
        0.8
    """

    arch: Literal["vit", "resnet"] = param(
        "vit",
        doc="image tower: ViT (no BatchNorm) or ModifiedResNet (BatchNorm)",
        source="paper: ViT-B/32, RN50",
    )
    image_size: int = param(
        32, doc="input pixels (height = width)", source="deviation: 224 in the paper; CPU"
    )
    embed_dim: int = param(32, doc="joint embedding width", source="deviation: 512/1024 in the paper; CPU")
    vision_width: int = param(64, doc="ViT width, or ResNet stem width / 2 x 4", source="deviation: tiny")
    vision_layers: int = param(2, doc="ViT blocks, or blocks per ResNet stage", source="deviation: tiny")
    patch_size: int = param(4, doc="ViT patch size", source="deviation: 32 in ViT-B/32; 8 x 8 patches here")
    text_width: int = param(64, doc="text transformer width", source="deviation: 512 in the paper")
    text_layers: int = param(2, doc="text transformer blocks", source="deviation: 12 in the paper")
    context_length: int = param(
        12, doc="tokens per prompt", source="deviation: 77 in CLIP; prompts are short"
    )
    distractor_p: float = param(
        0.0, doc="share of training images with the face-like distractor", source="deviation: confounder"
    )
    n_images: int = param(3000, doc="training images", source="deviation: CPU scale")
    epochs: int = param(8, doc="passes over the training images", source="deviation: CPU scale")
    batch_size: int = param(64, doc="images per contrastive batch", source="deviation: CPU scale")
    lr: float = param(3e-3, doc="AdamW learning rate (OneCycle peak)", source="deviation: set in a pilot")
    p_drop: float = param(
        0.5, doc="chance to drop the style / colour word of a caption", source="deviation: varied captions"
    )
    seed: int = param(
        1234, doc="seed of the teacher's data and initialisation", source="deviation: fixed teacher"
    )

    def __post_init__(self) -> None:
        if self.arch not in ("vit", "resnet"):
            raise ValueError(f"arch must be 'vit' or 'resnet', got {self.arch!r}")
        _positive(
            self, "image_size", "embed_dim", "vision_width", "vision_layers", "text_width", "text_layers"
        )
        _positive(self, "n_images", "epochs", "batch_size", "lr", "context_length")
        if not 0.0 <= self.distractor_p <= 1.0 or not 0.0 <= self.p_drop < 1.0:
            raise ValueError("distractor_p must lie in [0, 1] and p_drop in [0, 1)")
        if self.arch == "vit" and self.image_size % self.patch_size:
            raise ValueError(
                f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.arch == "resnet" and self.image_size % 32:
            raise ValueError(f"a ModifiedResNet needs image_size divisible by 32, got {self.image_size}")

    @classmethod
    def tiny(cls, arch: Literal["vit", "resnet"] = "vit") -> TeacherConfig:
        """The CPU teachers of the claim: ViT without BN, or a BN ResNet on confounded data."""
        if arch == "resnet":
            return cls(arch="resnet", vision_width=16, vision_layers=1, distractor_p=0.8, lr=1e-2)
        return cls(arch="vit")


@dataclass(frozen=True)
class TeacherRecipe:
    """How the shipped teacher is trained: a stream of fresh shapes-world image-caption pairs.

    Step ``s`` renders training images ``s * batch_size`` to ``(s + 1) * batch_size - 1``, so
    no pair is seen twice; AdamW with a linear warm-up and cosine decay to zero.

    Example:
        >>> r = TeacherRecipe()
        >>> r.steps * r.batch_size  # image-caption pairs seen
        1024000
    """

    teacher: TeacherConfig = param(
        TeacherConfig.tiny("resnet"), doc="the architecture and its data", source="deviation: tiny RN50"
    )
    steps: int = param(8000, doc="optimiser steps", source="deviation: to the zero-shot plateau")
    batch_size: int = param(128, doc="pairs per contrastive batch", source="deviation: CPU scale")
    lr: float = param(3e-3, doc="AdamW peak learning rate", source="deviation: set in a pilot")
    warmup: int = param(400, doc="linear warm-up steps", source="deviation: common practice")
    weight_decay: float = param(0.05, doc="AdamW weight decay", source="deviation: common practice")
    eval_every: int = param(500, doc="steps between zero-shot readings", source="deviation: the curve")
    eval_per_style: int = param(
        60, doc="real renders per style in each zero-shot reading (7 styles)", source="deviation: cost"
    )

    def __post_init__(self) -> None:
        _positive(self, "steps", "batch_size", "lr", "eval_every", "eval_per_style")
        if not 0 <= self.warmup < self.steps or self.weight_decay < 0:
            raise ValueError("warmup must lie in [0, steps) and weight_decay must be non-negative")


@dataclass(frozen=True)
class InversionConfig:
    """Stage 1: synthesise a surrogate set from text (Sec. 4.1-4.3).

    ``mode`` picks the objective: "sdd_ccm" (the paper: SDD + CCM), "sdd" (SDD only), "match_ccm"
    (class-prompt matching + CCM), "match" (plain image-text matching), "ce" (CE on the zero-shot
    head only).

    Example:
        >>> InversionConfig.paper().steps, InversionConfig.tiny().steps
        (400, 120)
    """

    mode: Literal["sdd_ccm", "sdd", "match_ccm", "match", "ce"] = param(
        "sdd_ccm", doc="inversion objective", source="paper: Eq. for L_SDD + L_CCM"
    )
    images_per_class: int = param(64, doc="synthetic images per class", source="paper: 64")
    steps: int = param(400, doc="Adam steps per image batch", source="paper: 400")
    lr: float = param(0.1, doc="Adam learning rate of the parameterisation", source="paper: 0.1")
    sdd_tau: float = param(
        0.1, doc="temperature of the SDD contrastive loss", source="deviation: unstated; CLIP-like"
    )
    ccm_weight: float = param(1.0, doc="weight of L_CCM", source="paper: best weight 1.0")
    proto_weight: float = param(
        1.0, doc="weight of the prototype matching term (few-shot)", source="deviation: unstated"
    )
    tv_weight: float = param(
        0.05, doc="total-variation prior weight", source="deviation: image prior, unstated"
    )
    base_size: int = param(
        16, doc="pixel grid of PixelParam before bilinear upsampling", source="deviation: 8-16 px grid"
    )
    init_std: float = param(0.5, doc="std of the initial pixel logits", source="deviation: unstated")
    batch_size: int = param(96, doc="images optimised together", source="deviation: CPU scale")
    style_template: str = param(
        "a {style} {name}",
        doc="SDD prompt",
        source="deviation: the world's grammar for 'a [style] of a [class]'",
    )
    class_template: str = param(
        "a {}", doc="class prompt of matching, CCM and KD", source="deviation: one template"
    )

    def __post_init__(self) -> None:
        if "{style}" not in self.style_template or "{name}" not in self.style_template:
            raise ValueError(f"style_template needs {{style}} and {{name}}, got {self.style_template!r}")
        if "{}" not in self.class_template:
            raise ValueError(f"class_template needs one '{{}}' slot, got {self.class_template!r}")
        if self.mode not in ("sdd_ccm", "sdd", "match_ccm", "match", "ce"):
            raise ValueError(f"unknown inversion mode {self.mode!r}")
        _positive(self, "images_per_class", "lr", "sdd_tau", "base_size", "batch_size")
        if self.steps < 0 or min(self.ccm_weight, self.proto_weight, self.tv_weight, self.init_std) < 0:
            raise ValueError("steps and the loss weights must be non-negative")

    def replace(self, **changes: object) -> InversionConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def tiny(cls) -> InversionConfig:
        """CPU scale: 32 images per class, 120 steps."""
        return cls(images_per_class=32, steps=120)

    @classmethod
    def paper(cls) -> InversionConfig:
        """The paper's setting (with a pixel parameterisation here in place of VQGAN)."""
        return cls(images_per_class=64, steps=400, batch_size=64, base_size=56)


@dataclass(frozen=True)
class DistillConfig:
    """Stage 2: KD from the teacher's zero-shot head into a small student (Sec. 4.4).

    Example:
        >>> DistillConfig().meta, DistillConfig(meta=False).meta
        (True, False)
    """

    epochs: int = param(60, doc="passes over the synthetic set", source="deviation: CPU scale")
    batch_size: int = param(64, doc="synthetic images per step", source="deviation: CPU scale")
    lr: float = param(3e-3, doc="Adam learning rate of the student", source="deviation: unstated")
    tau: float = param(4.0, doc="τ: KD temperature", source="deviation: unstated in the paper")
    meta: bool = param(True, doc="meta-KD (MLDG over styles) after the warm-up", source="paper: MKD")
    warmup_epochs: int = param(20, doc="plain-KD epochs before meta-KD", source="paper: warm-up needed")
    inner_lr: float = param(0.1, doc="α: inner SGD step of the meta-train loss", source="deviation: unstated")
    meta_weight: float = param(1.0, doc="β: weight of the meta-test loss", source="deviation: unstated")
    first_order: bool = param(
        False, doc="drop the Hessian term of the meta-gradient", source="paper: second order"
    )

    def __post_init__(self) -> None:
        _positive(self, "epochs", "batch_size", "lr", "tau", "inner_lr")
        if self.warmup_epochs < 0 or self.meta_weight < 0:
            raise ValueError("warmup_epochs and meta_weight must be non-negative")

    def replace(self, **changes: object) -> DistillConfig:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)
