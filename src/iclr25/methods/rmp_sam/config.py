"""Configuration of RMP-SAM (real-time multi-purpose segment anything).

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Shilin Xu, Haobo Yuan, Qingyu
Shi, Lu Qi, Jingbo Wang, Yibo Yang, Yining Li, Kai Chen, Yunhai Tong, Bernard Ghanem, Xiangtai Li,
Ming-Hsuan Yang, ICLR 2025, arXiv:2401.10228. :class:`RMPSAMConfig` is the network (encoder, lite
neck, shared dynamic-convolution decoder, adapters), :class:`LossConfig` the matching and losses
(Sec. 3.3), :class:`TrainConfig` the co-training recipe and :class:`ClaimConfig` the CPU check.
Paper-scale presets are functions (:func:`r18`, :func:`r50`, :func:`convnext_l`) that only build
configs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from iclr25._core.config import param

__all__ = ["ClaimConfig", "LossConfig", "RMPSAMConfig", "TrainConfig", "convnext_l", "r18", "r50", "tiny"]


@dataclass(frozen=True)
class RMPSAMConfig:
    """The network.

    Example:
        >>> cfg = RMPSAMConfig()
        >>> cfg.channels, cfg.num_queries, cfg.num_stages
        (64, 16, 2)
    """

    num_things: int = param(
        4, doc="thing classes (first in the label order)", source="deviation: shapes world"
    )
    num_stuff: int = param(2, doc="stuff classes (after the things)", source="deviation: sky and ground")
    backbone: str = param(
        "convnet",
        doc="'convnet' (4-stage conv net) or a timm model name built with features_only=True",
        source="deviation: tiny random-init backbone instead of ResNet-18/50",
    )
    backbone_channels: tuple[int, ...] = param(
        (16, 32, 64, 128), doc="widths of the 4 conv-net stages (strides 4/8/16/32)", source="deviation: tiny"
    )
    pretrained: bool = param(False, doc="load timm weights (local cache only)", source="deviation: offline")
    frozen_backbone: bool = param(
        False, doc="freeze the backbone", source="paper: frozen only for ConvNeXt-L"
    )
    channels: int = param(64, doc="C, width of the neck output F and of the kernels", source="deviation: 256")
    agg_channels: int = param(64, doc="width of the neck's aggregation projections", source="deviation: 128")
    deform: bool = param(
        True, doc="DCNv2 in the neck's top-down path (False: plain 3x3 conv)", source="paper: YOSO neck"
    )
    num_queries: int = param(16, doc="N, learned object kernels", source="deviation: 100")
    num_stages: int = param(2, doc="shared dynamic-convolution stages", source="deviation: 3")
    num_heads: int = param(
        4, doc="heads of query self-attention and the prompt adapter", source="deviation: 8"
    )
    ffn_dim: int = param(256, doc="hidden width of the query FFN", source="deviation: 2048")
    class_head: Literal["linear", "cosine"] = param(
        "linear",
        doc="learned linear classifier or cosine against fixed class embeddings (plus a zero no-object)",
        source="deviation: spec allows a learned linear head at CPU scale",
    )
    embed_dim: int = param(64, doc="class-embedding width of the cosine head", source="deviation: CLIP 768")
    logit_scale: float = param(100.0, doc="cosine logit scale exp(4.6052)", source="paper: released config")
    stage_temperature: float = param(
        0.1, doc="stage class logits of the cosine head are divided by this", source="paper: released config"
    )
    dynamic_kernels: bool = param(
        True, doc="hard-mask pooling + gated kernel update (False: static kernels)", source="paper: Sec. 3.2"
    )
    adapters: bool = param(
        True, doc="decoupled object and prompt adapters after the shared stages", source="paper: Sec. 3.2"
    )
    prompt_isolation: bool = param(
        True, doc="prompt queries cannot attend to each other", source="paper: Sec. 3.2"
    )
    box_half: float = param(
        3.0, doc="a point becomes the box [x-3, y-3, x+3, y+3] in input pixels", source="paper: code"
    )
    mask_threshold: float = param(0.5, doc="sigmoid threshold of hard mask pooling", source="paper: K-Net")
    # module layout: the defaults are this package's; official_layout() switches to the released one
    neck_widths: Literal["uniform", "official"] = param(
        "uniform",
        doc="neck level widths: C at every level, or half each backbone level's width (c_i / 2)",
        source="deviation: uniform C; the released neck gives level i c_i / 2 channels",
    )
    neck_output_relu: bool = param(
        True, doc="ReLU after the neck's 3x3 output conv", source="deviation: the released neck has none"
    )
    head_bias: bool = param(
        True,
        doc="bias in the first Linear of each stage's class and mask branches",
        source="deviation: the released cls_fcs.0 / mask_fcs.0 have none",
    )
    iou_from: Literal["query", "mask"] = param(
        "query",
        doc="the stages' IoU MLP reads the query or the mask branch's hidden features (Linear-LN-ReLU)",
        source="deviation: the released IoU head reads the mask branch",
    )
    adapter_heads: Literal["mlp", "official"] = param(
        "mlp",
        doc="adapter heads: own mask, class and IoU MLPs, or masks from the adapted query and one Linear "
        "each for class and IoU",
        source="deviation: the released adapters have no mask head and one Linear per head",
    )
    prompt_type_rows: int = param(
        3,
        doc="prompt-type embedding rows: 3 (positive point, box, negative point) or 2 (row 1 for points "
        "and boxes, row 0 for negative points)",
        source="deviation: the released embedding has 2 rows and gives every prompt row 1",
    )

    @property
    def num_classes(self) -> int:
        """Things plus stuff (the no-object class is index ``num_classes``)."""
        return self.num_things + self.num_stuff

    def replace(self, **kw: object) -> RMPSAMConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **kw)

    def official_layout(self) -> RMPSAMConfig:
        """A copy with the released code's module layout (neck widths ``c_i / 2`` and no ReLU after its
        output conv, bias-free first head layers, IoU from the mask branch, single-Linear adapter
        heads, a 2-row prompt-type embedding), so that a released state dict loads strictly.

        Example:
            >>> RMPSAMConfig().official_layout().neck_widths
            'official'
        """
        return self.replace(
            neck_widths="official",
            neck_output_relu=False,
            head_bias=False,
            iou_from="mask",
            adapter_heads="official",
            prompt_type_rows=2,
        )

    def __post_init__(self) -> None:
        for name in (
            "channels",
            "agg_channels",
            "num_queries",
            "num_stages",
            "num_heads",
            "ffn_dim",
            "embed_dim",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.channels % self.num_heads:
            raise ValueError(f"channels ({self.channels}) must be divisible by num_heads ({self.num_heads})")
        if self.num_things < 1 or self.num_stuff < 0:
            raise ValueError("need at least one thing class and a non-negative number of stuff classes")
        if len(self.backbone_channels) != 4:
            raise ValueError(f"backbone_channels must have 4 entries, got {self.backbone_channels}")
        if self.class_head not in ("linear", "cosine"):
            raise ValueError(f"class_head must be 'linear' or 'cosine', got {self.class_head!r}")
        choices = {
            "neck_widths": ("uniform", "official"),
            "iou_from": ("query", "mask"),
            "adapter_heads": ("mlp", "official"),
            "prompt_type_rows": (2, 3),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.neck_widths == "official" and min(self.backbone_channels) < 2:
            raise ValueError(
                f"neck_widths='official' halves the backbone widths, got {self.backbone_channels}"
            )


@dataclass(frozen=True)
class LossConfig:
    """Matching and losses (Mask2Former-style, Sec. 3.3).

    Example:
        >>> LossConfig().class_weight, LossConfig().no_object_weight
        (2.0, 0.1)
    """

    class_weight: float = param(
        2.0, doc="CE weight (loss and matching cost)", source="paper: released config"
    )
    mask_weight: float = param(5.0, doc="point BCE weight", source="paper: released config")
    dice_weight: float = param(5.0, doc="point Dice weight", source="paper: released config")
    no_object_weight: float = param(
        0.1, doc="CE weight of the no-object class", source="paper: released config"
    )
    iou_weight: float = param(
        10.0, doc="MSE weight of the IoU head (prompt batches)", source="paper: released config"
    )
    num_points: int = param(
        1024, doc="sampled points per mask", source="deviation: 12544 at 1/4 of 64 px is 49x the pixels"
    )
    oversample: float = param(
        3.0, doc="oversample ratio of importance sampling", source="paper: released config"
    )
    importance: float = param(
        0.75, doc="fraction of points taken by uncertainty", source="paper: released config"
    )
    matcher: Literal["hungarian", "fixed"] = param(
        "hungarian",
        doc="Hungarian matching or the fixed-assignment control (query i <-> target i)",
        source="paper: Hungarian",
    )


@dataclass(frozen=True)
class TrainConfig:
    """Co-training (one task per batch).

    Example:
        >>> TrainConfig().tasks
        ('panoptic', 'video', 'interactive')
    """

    steps: int = param(1500, doc="optimiser steps", source="deviation: spec CPU scale")
    batch_size: int = param(8, doc="images per object / prompt batch", source="deviation: 16")
    video_batch: int = param(
        2, doc="clips per video batch", source="deviation: keeps a video step near an image step"
    )
    clip_len: int = param(2, doc="frames per training tube", source="deviation: short clips")
    tasks: tuple[str, ...] = param(
        ("panoptic", "video", "interactive"),
        doc="batch kinds, cycled 1:1:1",
        source="paper: one source per batch",
    )
    lr: float = param(1e-3, doc="AdamW learning rate", source="deviation: 1e-4 at batch 16 for 12 epochs")
    weight_decay: float = param(0.05, doc="AdamW weight decay", source="paper: released config")
    backbone_lr_mult: float = param(
        1.0, doc="backbone lr multiplier", source="deviation: 0.1 for a pre-trained backbone"
    )
    warmup: int = param(50, doc="linear warm-up steps", source="deviation: 500")
    milestones: tuple[float, ...] = param(
        (0.67, 0.92), doc="lr x0.1 at these fractions", source="paper: epochs 8 and 11 of 12"
    )
    grad_clip: float = param(1.0, doc="max gradient norm", source="deviation: 0.01 stalls a random-init net")
    max_prompts: int = param(
        8, doc="prompts per image (a point inside a random instance each)", source="deviation: 30"
    )
    point_noise: float = param(0.004, doc="box-noise scale of training points", source="paper: 0.4 / 100")


def tiny() -> RMPSAMConfig:
    """The CPU model of the claim check (4-stage conv net, C = 64, 16 queries, 2 stages)."""
    return RMPSAMConfig()


def r18(num_things: int = 80, num_stuff: int = 53) -> RMPSAMConfig:
    """ResNet-18 paper-scale network (C = 256, 100 queries, 3 stages) in the released code's module
    layout (:meth:`RMPSAMConfig.official_layout`), with the 768-d class embeddings of the ConvNeXt-L
    CLIP text tower that the released models read."""
    return RMPSAMConfig(
        num_things=num_things,
        num_stuff=num_stuff,
        backbone="resnet18",
        channels=256,
        agg_channels=128,
        num_queries=100,
        num_stages=3,
        num_heads=8,
        ffn_dim=2048,
        class_head="cosine",
        embed_dim=768,
    ).official_layout()


def r50(num_things: int = 80, num_stuff: int = 53) -> RMPSAMConfig:
    """ResNet-50 paper-scale network, the layout of the released ``rapsam_r50_12e.pth``."""
    return r18(num_things, num_stuff).replace(backbone="resnet50")


def convnext_l(num_things: int = 80, num_stuff: int = 53) -> RMPSAMConfig:
    """Frozen ConvNeXt-L network (OpenCLIP weights loaded by the caller into the timm model)."""
    return r18(num_things, num_stuff).replace(backbone="convnext_large", frozen_backbone=True)


@dataclass(frozen=True)
class ClaimConfig:
    """The CPU claim check.

    Example:
        >>> ClaimConfig.smoke().image_size
        32
    """

    image_size: int = param(64, doc="shapes-world image size", source="deviation: spec CPU scale")
    n_objects: tuple[int, int] = param((2, 5), doc="thing objects per scene", source="deviation: spec")
    n_train_scenes: int = param(800, doc="training scenes", source="deviation: spec CPU scale")
    n_train_videos: int = param(300, doc="training videos", source="deviation: spec CPU scale")
    n_test_scenes: int = param(60, doc="test scenes (PQ, clicks)", source="deviation: spec CPU scale")
    n_test_videos: int = param(20, doc="test videos (tube mAP)", source="deviation: spec CPU scale")
    video_frames: int = param(4, doc="frames per test video", source="deviation: spec")
    clip_size: int = param(
        2, doc="frames per inference clip (MinVIS linking across clips)", source="deviation: 5"
    )
    steps: int = param(1500, doc="training steps of every trained arm", source="deviation: spec")
    ablation_steps: int = param(1500, doc="training steps of the ablation arms", source="deviation: spec")
    ablations: bool = param(
        True, doc="train the no-adapter and no-isolation ablations", source="paper: Table 6"
    )
    n_val_scenes: int = param(
        16, doc="validation scenes (the arms' validation curves)", source="deviation: CPU scale"
    )
    n_val_videos: int = param(4, doc="validation videos", source="deviation: CPU scale")
    val_every: int = param(25, doc="training steps between validation passes", source="deviation: CPU scale")
    plateau_epsilon: float = param(
        0.05,
        doc="largest relative change of a validation loss over the last fifth of the constant-lr "
        "phase that counts as a plateau",
        source="deviation: stated before any run (DESIGN rule 8c)",
    )
    max_clicks: int = param(5, doc="clicks of the NoC@85 protocol", source="deviation: 20")
    latency_runs: int = param(20, doc="timed runs (median) of each decoder", source="deviation: spec")
    model: RMPSAMConfig = param(RMPSAMConfig(), doc="the network", source="deviation: tiny")
    loss: LossConfig = param(LossConfig(), doc="losses", source="paper: Sec. 3.3")
    train: TrainConfig = param(
        TrainConfig(milestones=(0.85, 0.95)),
        doc="training",
        source="deviation: CPU scale; the lr steps come late, after the validation curves are read",
    )

    @staticmethod
    def smoke() -> ClaimConfig:
        """Seconds: 32 px, a few steps, tiny sets."""
        return ClaimConfig(
            image_size=32,
            n_train_scenes=16,
            n_train_videos=8,
            n_test_scenes=4,
            n_test_videos=2,
            n_val_scenes=4,
            n_val_videos=2,
            val_every=2,
            steps=6,
            ablation_steps=3,
            max_clicks=2,
            latency_runs=3,
            loss=LossConfig(num_points=256),
            train=TrainConfig(batch_size=2, video_batch=1, warmup=2, milestones=(0.85, 0.95)),
        )
