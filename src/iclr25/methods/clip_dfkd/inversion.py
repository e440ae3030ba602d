"""Stage 1 of CLIP-DFKD: synthesise a surrogate training set from class names (Sec. 4.1-4.3).

Paper: *Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation*, Wei et al.,
ICLR 2025. Each synthetic image x = G(z) is optimised through the frozen teacher, with
v = normalize(f_I(aug(x))):

- image-text matching, L_match = 1 - cos(v, t_c) (design decision: cosine distance);
- style dictionary diversification (SDD), an instance-level contrastive loss over the batch's
  "a {style} {class}" prompts, L_SDD = -(1/B) sum_i log exp(cos(v_i, t_i)/τ) / sum_j exp(cos(v_i, t_j)/τ),
  where copies of image i's own prompt are dropped from the denominator (positives, not negatives);
- class consistency maintaining (CCM), L_CCM = CE(s cos(v, t_c), c) over the plain class prompts;
- few-shot prototypes p_c = normalize(mean_k normalize(f_I(x_k))) as an extra matching target;
- a total-variation image prior.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.clip_dfkd.augment import random_augment
from iclr25.methods.clip_dfkd.config import DEFAULT_STYLES, InversionConfig
from iclr25.methods.clip_dfkd.parameterization import ImageParameterization, PixelParam
from iclr25.methods.clip_dfkd.teacher import (
    CLIPTeacher,
    ZeroShotClassifier,
    check_images,
    check_names,
    require_teacher,
)

__all__ = [
    "SyntheticSet",
    "ccm_loss",
    "class_prototypes",
    "invert_dataset",
    "match_loss",
    "sdd_loss",
    "tv_loss",
]


@dataclass
class SyntheticSet:
    """A surrogate set: images in [0, 1], class labels, and the style index of each image's prompt.

    Shape:
        images (N, 3, H, W); labels (N,); style_ids (N,).
    """

    images: torch.Tensor
    labels: torch.Tensor
    style_ids: torch.Tensor
    styles: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.labels)


def sdd_loss(v: torch.Tensor, t: torch.Tensor, prompt_ids: torch.Tensor, tau: float) -> torch.Tensor:
    """L_SDD: each image against the prompts of the batch, its own prompt the positive.

    Other images' copies of the same prompt are masked out of the denominator.

    Args:
        v: normalised image embeddings, (B, D).
        t: normalised embedding of each image's prompt, (B, D).
        prompt_ids: which prompt each row used, (B,); equal ids are the same prompt.
        tau: τ, the temperature.
    """
    logits = v @ t.T / tau  # (B, B)
    same = prompt_ids[:, None] == prompt_ids[None, :]
    eye = torch.eye(len(v), dtype=torch.bool, device=v.device)
    logits = logits.masked_fill(same & ~eye, float("-inf"))
    return F.cross_entropy(logits, torch.arange(len(v), device=v.device))


def ccm_loss(
    v: torch.Tensor, class_features: torch.Tensor, labels: torch.Tensor, scale: float
) -> torch.Tensor:
    """L_CCM = CE(s * v @ t_c^T, c): the zero-shot head over plain class prompts keeps the class.

    Shape:
        v (B, D) normalised; class_features (C, D) normalised; labels (B,).
    """
    return F.cross_entropy(scale * v @ class_features.T, labels)


def match_loss(v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """L_match = mean_i (1 - cos(v_i, t_i)). Shape: (B, D), (B, D), both normalised."""
    return (1 - (v * t).sum(-1)).mean()


def tv_loss(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of neighbouring pixels (anisotropic total variation)."""
    return (x[..., 1:, :] - x[..., :-1, :]).abs().mean() + (x[..., :, 1:] - x[..., :, :-1]).abs().mean()


@torch.no_grad()
def class_prototypes(
    teacher: CLIPTeacher, images: torch.Tensor, labels: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """p_c = normalize(mean_k normalize(f_I(x_k))) over the example images of class c.

    Shape:
        images (K, 3, H, W) in [0, 1]; labels (K,) -> (num_classes, D).
    """
    check_images(images)
    missing = set(range(num_classes)) - set(labels.tolist())
    if missing:
        raise ValueError(f"every class needs at least one example image; missing classes {sorted(missing)}")
    v = F.normalize(teacher.encode_image(images), dim=-1)
    labels = labels.to(v.device)
    protos = torch.stack([v[labels == c].mean(0) for c in range(num_classes)])
    return F.normalize(protos, dim=-1)


def invert_dataset(
    teacher: CLIPTeacher,
    class_names: Sequence[str],
    *,
    image_size: int,
    styles: Sequence[str] = DEFAULT_STYLES,
    config: InversionConfig = InversionConfig(),
    prototypes: torch.Tensor | None = None,
    parameterization: Callable[[int, torch.Generator | None], ImageParameterization] | None = None,
    generator: torch.Generator | None = None,
    progress: ProgressFn = no_progress,
) -> SyntheticSet:
    """Synthesise ``images_per_class`` images per class with the objective ``config.mode``.

    Image i has class ``i % C`` and style ``(i // C) % S``; images are optimised in batches of
    ``config.batch_size`` (each batch mixes classes and styles), each for ``config.steps`` Adam
    steps. The teacher stays frozen (eval mode, no parameter gradients).

    Args:
        teacher: the frozen CLIP-style teacher.
        class_names: the task's classes.
        image_size: pixels of the synthetic images.
        styles: the style dictionary of SDD (unused by the other modes except for bookkeeping).
        config: the objective and its budget.
        prototypes: few-shot class prototypes (C, D) from :func:`class_prototypes`, or None.
        parameterization: ``factory(n, generator) -> ImageParameterization``; default :class:`PixelParam`.
        generator: RNG of the initialisation and the augmentations.
        progress: progress callback.

    Returns:
        The :class:`SyntheticSet` (images detached).
    """
    require_teacher(teacher)
    check_names(class_names)
    check_names(styles, "styles")
    n_cls, n_sty = len(class_names), len(styles)
    if prototypes is not None and prototypes.shape[0] != n_cls:
        raise ValueError(f"prototypes must have one row per class ({n_cls}), got {tuple(prototypes.shape)}")
    teacher.freeze()
    cfg = config
    zs = ZeroShotClassifier(teacher, class_names, (cfg.class_template,))
    class_feats = zs.text_features  # (C, D)
    styled = teacher.encode_text(
        [cfg.style_template.format(style=s, name=c) for s in styles for c in class_names]
    )
    n = cfg.images_per_class * n_cls
    device = teacher.mean.device  # images are optimised where the teacher lives
    labels = torch.arange(n) % n_cls
    style_ids = (torch.arange(n) // n_cls) % n_sty
    if parameterization is None:

        def parameterization(k: int, gen: torch.Generator | None) -> ImageParameterization:
            return PixelParam(
                k, size=image_size, base=min(cfg.base_size, image_size), init_std=cfg.init_std, generator=gen
            )

    out = []
    batches = range(0, n, cfg.batch_size)
    total = len(batches) * max(cfg.steps, 1)
    for b_i, start in enumerate(batches):
        y = labels[start : start + cfg.batch_size]
        st = style_ids[start : start + cfg.batch_size]
        # drawn with the generator (CPU for the usual one, so every device starts from the same
        # images), then moved to the teacher
        param = parameterization(len(y), generator)
        if isinstance(param, nn.Module):
            param.to(device)
        opt = torch.optim.Adam(param.parameters(), lr=cfg.lr)
        y, st = y.to(device), st.to(device)
        prompt_ids = st * n_cls + y
        t_styled, t_class = styled[prompt_ids], class_feats[y]
        for step in range(cfg.steps):
            x = param()
            v = F.normalize(teacher.encode_image(random_augment(x, generator=generator)), dim=-1)
            if cfg.mode in ("sdd_ccm", "sdd"):
                loss = sdd_loss(v, t_styled, prompt_ids, cfg.sdd_tau)
            elif cfg.mode in ("match_ccm", "match"):
                loss = match_loss(v, t_class)
            else:  # "ce"
                loss = torch.zeros((), device=device)
            if cfg.mode in ("sdd_ccm", "match_ccm"):
                loss = loss + cfg.ccm_weight * ccm_loss(v, class_feats, y, teacher.logit_scale)
            if cfg.mode == "ce":
                loss = ccm_loss(v, class_feats, y, teacher.logit_scale)
            if prototypes is not None:
                loss = loss + cfg.proto_weight * match_loss(v, prototypes[y])
            loss = loss + cfg.tv_weight * tv_loss(x)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 20 == 0:
                progress("inversion", b_i * cfg.steps + step, total)
        with torch.no_grad():
            out.append(param().detach().cpu())  # the set lives on the CPU, whatever the teacher's device
    return SyntheticSet(torch.cat(out), labels, style_ids, tuple(styles))
