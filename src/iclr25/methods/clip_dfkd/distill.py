"""Stage 2 of CLIP-DFKD: distil the teacher's zero-shot head into a small student (Sec. 4.4).

Paper: *Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation*, Wei et al.,
ICLR 2025. L_KD = τ² KL(softmax(z_T/τ) || softmax(z_S/τ)) with the teacher as the target.
Meta knowledge distillation (MKD), MLDG-style (Li et al., AAAI 2018): the styles of a batch are
split into meta-train S_tr and meta-test S_te, θ' = θ - α ∇_θ L_KD(θ; S_tr), and the student
minimises L_KD(θ; S_tr) + β L_KD(θ'; S_te), second order through ``torch.func.functional_call``
(or first order). Plain KD warms the student up first.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.clip_dfkd.augment import random_augment
from iclr25.methods.clip_dfkd.config import DistillConfig
from iclr25.methods.clip_dfkd.inversion import SyntheticSet
from iclr25.methods.clip_dfkd.teacher import check_images

__all__ = ["accuracy", "distill", "kd_loss", "mldg_objective", "split_styles"]


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, tau: float) -> torch.Tensor:
    """τ² KL(softmax(z_T/τ) || softmax(z_S/τ)), averaged over the batch. Shape: (N, C), (N, C)."""
    if tau <= 0:
        raise ValueError(f"tau must be positive, got {tau}")
    log_p_s = F.log_softmax(student_logits / tau, dim=-1)
    log_p_t = F.log_softmax(teacher_logits / tau, dim=-1)
    return tau * tau * F.kl_div(log_p_s, log_p_t, log_target=True, reduction="batchmean")


def split_styles(
    style_ids: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Split a batch by style into meta-train and meta-test masks (None with fewer than 2 styles).

    The batch's distinct styles are shuffled and the first half (rounded up) is meta-train.
    """
    present = torch.unique(style_ids)
    if len(present) < 2:
        return None
    perm = present[torch.randperm(len(present), generator=generator)]
    train_styles = perm[: (len(present) + 1) // 2]
    mask_tr = torch.isin(style_ids, train_styles)
    return mask_tr, ~mask_tr


def mldg_objective(
    model: nn.Module,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    train_batch: tuple[torch.Tensor, torch.Tensor],
    test_batch: tuple[torch.Tensor, torch.Tensor],
    *,
    inner_lr: float,
    meta_weight: float,
    first_order: bool = False,
) -> torch.Tensor:
    """L(θ; S_tr) + β L(θ - α ∇L(θ; S_tr); S_te), differentiable in θ (the model's parameters).

    The meta-test pass runs on copies of the model's buffers, so BatchNorm running statistics are
    updated once per step (by the meta-train pass), not twice.

    Args:
        model: the student.
        loss_fn: ``loss_fn(outputs, targets)``.
        train_batch: (inputs, targets) of the meta-train styles.
        test_batch: (inputs, targets) of the meta-test styles.
        inner_lr: α.
        meta_weight: β.
        first_order: treat ∇L(θ; S_tr) as a constant in θ' (drops the Hessian term).
    """
    loss_tr = loss_fn(model(train_batch[0]), train_batch[1])
    if meta_weight == 0:
        return loss_tr
    names, params = zip(*[(n, p) for n, p in model.named_parameters() if p.requires_grad], strict=True)
    grads = torch.autograd.grad(loss_tr, params, create_graph=not first_order, retain_graph=True)
    fast = {
        n: p - inner_lr * (g.detach() if first_order else g)
        for n, p, g in zip(names, params, grads, strict=True)
    }
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    out_te = functional_call(model, (fast, buffers), (test_batch[0],))
    return loss_tr + meta_weight * loss_fn(out_te, test_batch[1])


def distill(
    teacher_clf: nn.Module,
    student: nn.Module,
    data: SyntheticSet,
    *,
    config: DistillConfig = DistillConfig(),
    generator: torch.Generator | None = None,
    progress: ProgressFn = no_progress,
    on_epoch: Callable[[int, nn.Module], None] | None = None,
) -> nn.Module:
    """Train ``student`` to match ``teacher_clf``'s logits on augmented surrogate images.

    Plain KD for ``warmup_epochs`` (all epochs if ``config.meta`` is False), then MKD on batches
    with at least two styles. Teacher logits are computed on the same augmented batch.

    Args:
        teacher_clf: the teacher's zero-shot head (frozen).
        student: the untrained student.
        data: the surrogate set.
        config: the KD / MKD settings.
        generator: RNG of the batch order, augmentations and style splits.
        progress: progress callback.
        on_epoch: called as ``on_epoch(epoch, student)`` after each epoch (e.g. a learning curve).

    Returns:
        The trained student in eval mode.
    """
    check_images(data.images)
    cfg = config
    device = next(student.parameters()).device  # batches move there; the set stays where it is
    teacher_clf.eval()
    opt = torch.optim.Adam(student.parameters(), lr=cfg.lr)
    n = len(data)
    steps_per_epoch = max(1, n // cfg.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs * steps_per_epoch)

    def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return kd_loss(out, target, cfg.tau)

    for epoch in range(cfg.epochs):
        student.train()
        order = torch.randperm(n, generator=generator)
        for b in range(steps_per_epoch):
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            x = random_augment(data.images[idx].to(device), generator=generator)
            with torch.no_grad():
                z_t = teacher_clf(x)
            split = (
                split_styles(data.style_ids[idx], generator)
                if cfg.meta and epoch >= cfg.warmup_epochs
                else None
            )
            if split is None:
                loss = loss_fn(student(x), z_t)
            else:
                tr, te = (mask.to(device) for mask in split)
                loss = mldg_objective(
                    student,
                    loss_fn,
                    (x[tr], z_t[tr]),
                    (x[te], z_t[te]),
                    inner_lr=cfg.inner_lr,
                    meta_weight=cfg.meta_weight,
                    first_order=cfg.first_order,
                )
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        progress("distillation", epoch + 1, cfg.epochs)
        if on_epoch is not None:
            on_epoch(epoch + 1, student)
            student.train()
    return student.eval()


@torch.no_grad()
def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, batch_size: int = 500) -> float:
    """Top-1 accuracy of ``model`` (eval mode) on images in [0, 1] (batches move to its device)."""
    model.eval()
    device = next(model.parameters()).device
    correct = 0
    for s in range(0, len(labels), batch_size):
        pred = model(images[s : s + batch_size].to(device)).argmax(-1).cpu()
        correct += int((pred == labels[s : s + batch_size].cpu()).sum())
    return correct / max(1, len(labels))
