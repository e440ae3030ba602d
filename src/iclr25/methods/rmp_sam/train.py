"""End-to-end co-training of RMP-SAM on object, video and prompt batches (one source per batch).

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.3 and Sec. 4.1 (AdamW, backbone lr x 0.1, step schedule, linear
warm-up, gradient clipping). The official repository released no training code; this is ours.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from iclr25.methods.rmp_sam.config import LossConfig, TrainConfig
from iclr25.methods.rmp_sam.data import SegData
from iclr25.methods.rmp_sam.model import RMPSAM
from iclr25.methods.rmp_sam.video import frames_to_tube

__all__ = ["co_train", "prompt_batch", "to_device", "video_batch"]


def to_device(
    targets: list[dict[str, torch.Tensor]], device: torch.device | str
) -> list[dict[str, torch.Tensor]]:
    """A copy of per-image target dicts with every tensor on ``device`` (others kept as they are)."""
    return [{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in t.items()} for t in targets]


def video_batch(data: SegData, idx: list[int], clip_len: int, rng: np.random.Generator):
    """Clips of ``clip_len`` frames and their tube targets (frames concatenated along the height)."""
    clips, targets = [], []
    t_all = data.videos.shape[1]
    for i in idx:
        s = int(rng.integers(0, t_all - clip_len + 1))
        clips.append(data.videos[i, s : s + clip_len])
        t = data.video_targets[i]
        m = t["masks"][:, s : s + clip_len]  # (M, L, H, W)
        keep = m.flatten(1).any(1)
        tube = frames_to_tube(m[keep][:, :, None].float())[:, 0] > 0.5  # (M, L * H, W)
        targets.append({"labels": t["labels"][keep], "masks": tube})
    return torch.stack(clips), targets


def prompt_batch(
    data: SegData, idx: list[int], max_prompts: int, noise: float, half: float, rng: np.random.Generator
):
    """Clicks drawn uniformly inside random thing instances, padded to the batch's largest count."""
    from iclr25.common.data.shapes_world import clicks

    pts, gts = [], []
    for i in idx:
        t = data.targets[i]
        things = torch.nonzero(t["isthing"]).flatten().tolist()
        pick = rng.choice(things, size=min(max_prompts, len(things)), replace=False) if things else []
        p, g = [], []
        for k in pick:
            m = t["masks"][k].numpy()
            xy = clicks(m, 1, mode="uniform", generator=rng)[0]
            xy = xy + rng.uniform(-1, 1, size=2) * noise * half  # box-noise jitter of the centre, scaled down
            p.append(xy)
            g.append(t["masks"][k])
        pts.append(p)
        gts.append(g)
    p_max = max(1, max(len(p) for p in pts))
    h, w = data.images.shape[-2:]
    points = torch.zeros(len(idx), p_max, 2)
    masks = torch.zeros(len(idx), p_max, h, w, dtype=torch.bool)
    valid = torch.zeros(len(idx), p_max, dtype=torch.bool)
    for b, (p, g) in enumerate(zip(pts, gts, strict=True)):
        for k, (xy, m) in enumerate(zip(p, g, strict=True)):
            points[b, k] = torch.as_tensor(np.clip(xy, 0.0, [w, h]), dtype=torch.float32)
            masks[b, k] = m
            valid[b, k] = True
    return points, masks, valid


def co_train(
    model: RMPSAM,
    data: SegData,
    *,
    train: TrainConfig,
    loss: LossConfig,
    seed: int,
    progress: Callable[[int, int], None] | None = None,
    progress_every: int = 25,
    callback: Callable[[int], None] | None = None,
    callback_every: int = 0,
    device: str | torch.device | None = None,
) -> list[tuple[int, str, float]]:
    """Train on batches cycling over ``train.tasks`` (each batch one task).

    Args:
        model: the network (trained in place).
        data: training scenes and videos.
        train: optimiser and batching.
        loss: loss weights and the matcher.
        seed: batch order, clicks and sampled points.
        progress: ``progress(done, total)``.
        progress_every: steps between progress calls.
        callback: ``callback(steps_done)`` every ``callback_every`` steps and after the last one
            (e.g. a validation pass; it must leave the model in training mode, as
            :func:`~iclr25.methods.rmp_sam.evaluation.validation_losses` does).
        callback_every: steps between callback calls (0: never).
        device: where to train (default: where ``model`` already is). Batches are drawn on the
            CPU (numpy and CPU generators) and moved there, so every device sees the same batches.

    Returns:
        ``(step, task, loss)`` of every step.
    """
    if train.steps < 0:
        raise ValueError(f"steps must be >= 0, got {train.steps}")
    if device is not None:
        model.to(device)
    dev = next(model.parameters()).device
    rng = np.random.default_rng([seed, 11])
    gen = torch.Generator().manual_seed(seed * 7 + 3)
    bb = [p for p in model.backbone.parameters() if p.requires_grad]
    ids = {id(p) for p in bb}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    opt = torch.optim.AdamW(
        [{"params": bb, "lr": train.lr * train.backbone_lr_mult}, {"params": rest, "lr": train.lr}],
        lr=train.lr,
        weight_decay=train.weight_decay,
    )
    base = [g["lr"] for g in opt.param_groups]
    miles = [int(f * train.steps) for f in train.milestones]
    log: list[tuple[int, str, float]] = []
    model.train()
    n_img, n_vid = data.images.shape[0], data.videos.shape[0]
    tasks = [t for t in train.tasks if t != "video" or n_vid > 0]
    for step in range(train.steps):
        f = min(1.0, (step + 1) / max(train.warmup, 1)) * 0.1 ** sum(step >= m for m in miles)
        for g, b in zip(opt.param_groups, base, strict=True):
            g["lr"] = b * f
        task = tasks[step % len(tasks)]
        if task == "panoptic":
            idx = rng.integers(0, n_img, size=train.batch_size).tolist()
            out = model(data.images[idx].to(dev), task="panoptic")
            losses = model.loss(out, to_device([data.targets[i] for i in idx], dev), "panoptic", loss, gen)
        elif task == "video":
            idx = rng.integers(0, n_vid, size=train.video_batch).tolist()
            clips, targets = video_batch(data, idx, train.clip_len, rng)
            out = model(clips.to(dev), task="video")
            losses = model.loss(out, to_device(targets, dev), "video", loss, gen)
        elif task == "interactive":
            idx = rng.integers(0, n_img, size=train.batch_size).tolist()
            pts, masks, valid = prompt_batch(
                data, idx, train.max_prompts, train.point_noise, model.config.box_half, rng
            )
            pts, masks, valid = pts.to(dev), masks.to(dev), valid.to(dev)
            out = model(data.images[idx].to(dev), task="interactive", prompts={"points": pts, "valid": valid})
            losses = model.loss(out, {"masks": masks, "valid": valid}, "interactive", loss, gen)
        else:
            raise ValueError(f"unknown task {task!r}")
        total = sum(losses.values())
        opt.zero_grad(set_to_none=True)
        total.backward()  # type: ignore[union-attr]
        if train.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), train.grad_clip)
        opt.step()
        log.append((step, task, float(total.detach())))  # type: ignore[union-attr]
        if progress is not None and ((step + 1) % progress_every == 0 or step + 1 == train.steps):
            progress(step + 1, train.steps)
        due = callback_every > 0 and ((step + 1) % callback_every == 0 or step + 1 == train.steps)
        if callback is not None and due:
            callback(step + 1)
    model.eval()
    return log
