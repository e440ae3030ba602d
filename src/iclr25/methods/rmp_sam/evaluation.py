"""Evaluation of a trained RMP-SAM on shapes-world test data: PQ, tube mAP, click mIoU and NoC@85.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 4 (one set of weights scored on the three tasks).
"""

from __future__ import annotations

import numpy as np
import torch

from iclr25.methods.rmp_sam.config import LossConfig
from iclr25.methods.rmp_sam.data import SegData
from iclr25.methods.rmp_sam.metrics import VideoMaskAP, click_iou, noc, panoptic_quality
from iclr25.methods.rmp_sam.model import RMPSAM, RMPSAMPredictor
from iclr25.methods.rmp_sam.postprocess import to_torchmetrics

__all__ = ["evaluate_clicks", "evaluate_panoptic", "evaluate_video", "validation_losses"]


@torch.no_grad()
def evaluate_panoptic(
    model: RMPSAM, data: SegData, *, batch: int = 16, class_agnostic: bool = False, **thresholds: float
) -> dict[str, float]:
    """PQ / SQ / RQ of ``model.panoptic`` against the scenes' panoptic ground truth (torchmetrics).

    With ``class_agnostic=True`` every thing class is merged into one (their probabilities summed)
    in the predictions and the ground truth: a diagnostic that separates finding and segmenting
    objects from naming their shape.
    """
    from iclr25.common.data.shapes_world import to_torchmetrics_panoptic
    from iclr25.methods.rmp_sam.postprocess import panoptic_inference

    model.eval()
    dev = next(model.parameters()).device
    nc, nt = model.config.num_classes, data.num_things
    preds, gts = [], []
    for s in range(0, data.images.shape[0], batch):
        images = data.images[s : s + batch].to(dev)
        if not class_agnostic:
            results = model.panoptic(images, **thresholds)
        else:
            out = model(images, task="panoptic")
            p = out["logits"].softmax(-1)
            merged = torch.cat(
                [p[..., :nt].sum(-1, keepdim=True), torch.zeros_like(p[..., 1:nt]), p[..., nt:]], -1
            )
            masks = torch.nn.functional.interpolate(
                out["masks"], size=images.shape[-2:], mode="bilinear", align_corners=False
            )
            results = [
                panoptic_inference(merged[i].clamp_min(1e-12).log(), masks[i], nt, **thresholds)
                for i in range(images.shape[0])
            ]
        preds.extend(to_torchmetrics(res, void_category=nc) for res in results)
    for r in data.rendered:
        g = torch.from_numpy(to_torchmetrics_panoptic(r, nt))
        if class_agnostic:
            g[..., 0][g[..., 0] < nt] = 0
        gts.append(g)
    return panoptic_quality(torch.stack(preds), torch.stack(gts), set(range(nt)), set(range(nt, nc)))


@torch.no_grad()
def evaluate_video(model: RMPSAM, data: SegData, *, clip_size: int) -> dict[str, float]:
    """Tube mAP of ``model.track`` on the test videos (thing tracks)."""
    model.eval()
    dev = next(model.parameters()).device
    ap = VideoMaskAP()
    for v in range(data.videos.shape[0]):
        tracks = model.track(data.videos[v].to(dev), clip_size=clip_size)
        preds = [
            {"label": t["label_id"], "score": t["score"], "masks": t["masks"].cpu().numpy()} for t in tracks
        ]
        t = data.video_targets[v]
        gts = [
            {"label": int(lab), "masks": m.cpu().numpy()}
            for lab, m in zip(t["labels"], t["masks"], strict=True)
        ]
        ap.update(preds, gts)
    return ap.compute()


@torch.no_grad()
def evaluate_clicks(model: RMPSAM, data: SegData, *, max_clicks: int = 20) -> dict[str, float]:
    """Single-click mIoU (click = the distance-transform centre of each thing) and NoC@85."""
    from iclr25.common.data.shapes_world import center_click

    model.eval()
    pred = RMPSAMPredictor(model)
    ious, nocs = [], []
    for i in range(data.images.shape[0]):
        t = data.targets[i]
        gts = [t["masks"][k].cpu().numpy() for k in torch.nonzero(t["isthing"]).flatten().tolist()]
        if not gts:
            continue
        pred.set_image(data.images[i])
        masks, _, _ = pred.predict_points(np.array([center_click(g) for g in gts]))
        ious.extend(click_iou(m.cpu().numpy(), g) for m, g in zip(masks, gts, strict=True))

        def one(pts: np.ndarray, labels: np.ndarray) -> np.ndarray:
            return pred.predict(point_coords=pts, point_labels=labels)[0][0].cpu().numpy()

        nocs.extend(noc(one, g, max_clicks=max_clicks)[0] for g in gts)
    return {"click_miou": float(np.mean(ious)), "noc85": float(np.mean(nocs)), "n_clicks": float(len(ious))}


@torch.no_grad()
def validation_losses(
    model: RMPSAM,
    data: SegData,
    loss: LossConfig,
    *,
    clip_len: int,
    max_prompts: int,
    seed: int = 0,
) -> dict[str, float]:
    """The training objective on held-out data, for a validation curve.

    Every call draws the same clips, clicks and sampled points (generators seeded from ``seed``),
    so the curve moves only with the weights. The model runs in eval mode and is put back in the
    mode it was in.

    Args:
        model: the network.
        data: held-out scenes and videos.
        loss: the arm's own loss configuration (its matcher included).
        clip_len: frames per tube.
        max_prompts: clicks per image.
        seed: the fixed draw.

    Returns:
        ``val_cls`` (the panoptic class loss, summed over stages and adapter: it falls only as the
        queries learn to name shapes), ``val_panoptic``, ``val_video``, ``val_interactive`` (each
        task's summed loss) and ``val_loss`` (their sum).
    """
    from iclr25.methods.rmp_sam.train import prompt_batch, to_device, video_batch

    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device  # draws on the CPU, batches moved to the model
    rng = np.random.default_rng([seed, 5])
    gen = torch.Generator().manual_seed(seed)
    idx = list(range(data.images.shape[0]))
    images = data.images.to(dev)
    pan = model.loss(model(images, task="panoptic"), to_device(data.targets, dev), "panoptic", loss, gen)
    out = {"val_cls": float(pan["loss_cls"]), "val_panoptic": float(sum(pan.values()))}
    if data.videos.shape[0]:
        clips, targets = video_batch(data, list(range(data.videos.shape[0])), clip_len, rng)
        vid = model.loss(model(clips.to(dev), task="video"), to_device(targets, dev), "video", loss, gen)
        out["val_video"] = float(sum(vid.values()))
    pts, masks, valid = prompt_batch(data, idx, max_prompts, 0.0, model.config.box_half, rng)
    pts, masks, valid = pts.to(dev), masks.to(dev), valid.to(dev)
    res = model(images, task="interactive", prompts={"points": pts, "valid": valid})
    inter = model.loss(res, {"masks": masks, "valid": valid}, "interactive", loss, gen)
    out["val_interactive"] = float(sum(inter.values()))
    out["val_loss"] = out["val_panoptic"] + out.get("val_video", 0.0) + out["val_interactive"]
    model.train(was_training)
    return out
