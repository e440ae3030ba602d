"""CLIP-DFKD: customise a small classifier from a CLIP-style model and class names alone.

Paper: *Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation*, Yongxian Wei,
Zixuan Hu, Li Shen, Zhenyi Wang, Chun Yuan, Dacheng Tao, ICLR 2025 (OpenReview 1aF2D2CPHi).
Text-driven inversion with style dictionary diversification (SDD) and class consistency
maintaining (CCM), then knowledge distillation, plain or meta (MLDG over styles); DeepInversion
(BN statistics) as the baseline it replaces.
"""

from iclr25.methods.clip_dfkd.augment import random_augment
from iclr25.methods.clip_dfkd.baselines import BNStatsHook, deep_inversion
from iclr25.methods.clip_dfkd.config import (
    DEFAULT_STYLES,
    PAPER_STYLES,
    DistillConfig,
    InversionConfig,
    TeacherConfig,
)
from iclr25.methods.clip_dfkd.customize import customize
from iclr25.methods.clip_dfkd.distill import accuracy, distill, kd_loss, mldg_objective, split_styles
from iclr25.methods.clip_dfkd.inversion import (
    SyntheticSet,
    ccm_loss,
    class_prototypes,
    invert_dataset,
    match_loss,
    sdd_loss,
    tv_loss,
)
from iclr25.methods.clip_dfkd.parameterization import ImageParameterization, PixelParam
from iclr25.methods.clip_dfkd.student import TinyResNet, make_student
from iclr25.methods.clip_dfkd.teacher import (
    TASK_COLORS,
    TASK_SHAPES,
    TEST_STYLES,
    CLIPTeacher,
    ZeroShotClassifier,
    build_tiny_clip,
    default_cache_dir,
    load_open_clip_teacher,
    load_or_train_teacher,
    load_shipped_teacher,
    multi_positive_clip_loss,
    pretrain_teacher,
    real_renders,
    teacher_world,
    tokenizer_for,
    train_teacher,
    zero_shot_accuracy,
)

__all__ = [
    "DEFAULT_STYLES",
    "PAPER_STYLES",
    "TASK_COLORS",
    "TASK_SHAPES",
    "TEST_STYLES",
    "BNStatsHook",
    "CLIPTeacher",
    "DistillConfig",
    "ImageParameterization",
    "InversionConfig",
    "PixelParam",
    "SyntheticSet",
    "TeacherConfig",
    "TinyResNet",
    "ZeroShotClassifier",
    "accuracy",
    "build_tiny_clip",
    "ccm_loss",
    "class_prototypes",
    "customize",
    "deep_inversion",
    "default_cache_dir",
    "distill",
    "invert_dataset",
    "kd_loss",
    "load_open_clip_teacher",
    "load_or_train_teacher",
    "load_shipped_teacher",
    "make_student",
    "match_loss",
    "mldg_objective",
    "multi_positive_clip_loss",
    "pretrain_teacher",
    "random_augment",
    "real_renders",
    "sdd_loss",
    "split_styles",
    "teacher_world",
    "tokenizer_for",
    "train_teacher",
    "tv_loss",
    "zero_shot_accuracy",
]
