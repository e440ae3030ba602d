"""``customize``: a small classifier for any list of class names, from a CLIP-style teacher alone.

Paper: *Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation*, Wei et al.,
ICLR 2025. Stage 1 (:func:`~iclr25.methods.clip_dfkd.invert_dataset`) then Stage 2
(:func:`~iclr25.methods.clip_dfkd.distill`); with ``example_images`` the few-shot variant adds
class prototypes as matching targets.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.clip_dfkd.config import DEFAULT_STYLES, DistillConfig, InversionConfig
from iclr25.methods.clip_dfkd.distill import distill as _distill
from iclr25.methods.clip_dfkd.inversion import class_prototypes, invert_dataset
from iclr25.methods.clip_dfkd.student import make_student
from iclr25.methods.clip_dfkd.teacher import CLIPTeacher, ZeroShotClassifier, require_teacher

__all__ = ["customize"]


def customize(
    teacher: CLIPTeacher,
    class_names: Sequence[str],
    *,
    image_size: int,
    styles: Sequence[str] = DEFAULT_STYLES,
    example_images: torch.Tensor | None = None,
    example_labels: torch.Tensor | None = None,
    student: str | nn.Module = "tiny_resnet",
    inversion: InversionConfig = InversionConfig(),
    distill: DistillConfig = DistillConfig(),
    generator: torch.Generator | None = None,
    progress: ProgressFn = no_progress,
) -> nn.Module:
    """Synthesise a surrogate set for ``class_names`` and distil the teacher into a student.

    Args:
        teacher: the frozen CLIP-style teacher.
        class_names: the customised task's classes.
        image_size: pixels of the synthetic images and of the student's input.
        styles: the style dictionary of SDD.
        example_images: optional few-shot images in [0, 1], (K, 3, H, W), for class prototypes.
        example_labels: their class indices, (K,).
        student: a ``make_student`` name or an untrained module.
        inversion: Stage 1 settings.
        distill: Stage 2 settings.
        generator: RNG of every random draw.
        progress: progress callback.

    Returns:
        The trained student (eval mode), on the teacher's device: ``logits = student(images)``.

    Raises:
        TypeError: ``teacher`` is not a :class:`CLIPTeacher` (wrap a raw open_clip model with
            ``CLIPTeacher.from_open_clip``, a transformers ``CLIPModel`` with
            ``CLIPTeacher.from_transformers``).
        ValueError: only one of ``example_images`` and ``example_labels`` is given.
    """
    require_teacher(teacher)
    if (example_images is None) != (example_labels is None):
        raise ValueError("example_images and example_labels go together")
    protos = None
    if example_images is not None and example_labels is not None:
        protos = class_prototypes(teacher, example_images, example_labels, len(class_names))
    data = invert_dataset(
        teacher,
        class_names,
        image_size=image_size,
        styles=styles,
        config=inversion,
        prototypes=protos,
        generator=generator,
        progress=progress,
    )
    net = make_student(student, len(class_names)) if isinstance(student, str) else student
    net = net.to(teacher.mean.device)  # the student trains where the teacher runs
    head = ZeroShotClassifier(teacher, class_names, (inversion.class_template,))
    return _distill(head, net, data, config=distill, generator=generator, progress=progress)
