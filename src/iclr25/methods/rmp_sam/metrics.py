"""Metrics of the RMP-SAM claim: PQ (torchmetrics), tube mAP (``VideoMaskAP``), click mIoU and NoC.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 4 (PQ on COCO-Panoptic, mAP on YouTube-VIS 2019, mIoU of single-click
prompts on COCO). ``VideoMaskAP`` follows the COCO 10-threshold protocol (IoU 0.50:0.05:0.95,
101 recall points, greedy matching by score) with the YouTube-VIS tube IoU
``sum_t |P_t & G_t| / sum_t |P_t | G_t|``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["VideoMaskAP", "click_iou", "noc", "panoptic_quality", "tube_iou"]


def panoptic_quality(
    preds: torch.Tensor, targets: torch.Tensor, things: set[int], stuffs: set[int]
) -> dict[str, float]:
    """PQ / SQ / RQ with ``torchmetrics.detection.PanopticQuality``, panopticapi's rule for void.

    torchmetrics drops a missed ground-truth segment when most of it is *predicted* void; panopticapi
    counts it as a false negative. So unassigned prediction pixels (any category outside ``things |
    stuffs``) go to one extra stuff category that never appears in the ground truth; it is left out
    of the category average, and ground truth under it counts as missed.

    Args:
        preds: (B, H, W, 2) of (category, instance).
        targets: (B, H, W, 2) ground truth in the same layout (every category known).
        things: thing category ids.
        stuffs: stuff category ids.

    Returns:
        ``pq``, ``sq``, ``rq`` averaged over categories with a true positive, false positive or false
        negative; ``pq_things``, ``pq_stuff``.

    Example:
        >>> t = torch.zeros(1, 4, 4, 2, dtype=torch.long); t[0, :2, :, 0] = 1
        >>> panoptic_quality(t, t, {0}, {1})["pq"]
        1.0
    """
    from torchmetrics.detection import PanopticQuality

    known = set(things) | set(stuffs)
    filler = max(known) + 1
    preds = preds.clone()
    unknown = ~torch.isin(preds[..., 0], torch.tensor(sorted(known)))
    preds[..., 0][unknown] = filler
    preds[..., 1][unknown] = 0
    metric = PanopticQuality(things=set(things), stuffs=set(stuffs) | {filler})
    metric.update(preds, targets)
    order = sorted(things) + sorted(set(stuffs) | {filler})  # torchmetrics: things, then stuffs
    iou, tp = metric.iou_sum.double(), metric.true_positives.double()
    fp, fn = metric.false_positives.double(), metric.false_negatives.double()
    out: dict[str, float] = {}
    for name, cats in (("", set(known)), ("_things", set(things)), ("_stuff", set(stuffs))):
        idx = [i for i, c in enumerate(order) if c in cats and (tp[i] + fp[i] + fn[i]) > 0]
        if not idx:
            out |= {f"pq{name}": 0.0} if name else {"pq": 0.0, "sq": 0.0, "rq": 0.0}
            continue
        i = torch.tensor(idx)
        den = tp[i] + 0.5 * fp[i] + 0.5 * fn[i]
        out[f"pq{name}"] = float((iou[i] / den).mean())
        if not name:
            out["sq"] = float(torch.where(tp[i] > 0, iou[i] / tp[i].clamp_min(1), 0.0).mean())
            out["rq"] = float((tp[i] / den).mean())
    return out


def tube_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    """``sum_t |P & G| / sum_t |P | G|`` of two (T, H, W) bool tubes (0 when both are empty)."""
    union = np.logical_or(pred, gt).sum()
    return float(np.logical_and(pred, gt).sum() / union) if union else 0.0


class VideoMaskAP:
    """Tube mask AP, COCO protocol (YouTube-VIS style), computed in the project.

    ``update(preds, gts)`` adds one video: ``preds`` a list of ``{"label", "score", "masks" (T, H, W)}``,
    ``gts`` a list of ``{"label", "masks" (T, H, W)}``. ``compute()`` returns ``{"map", "ap50", "ap75"}``
    averaged over categories that have ground truth (-1 when none does).

    Example:
        >>> m = np.zeros((2, 4, 4), bool); m[:, :2] = True
        >>> ap = VideoMaskAP()
        >>> ap.update([{"label": 0, "score": 0.9, "masks": m}], [{"label": 0, "masks": m}])
        >>> ap.compute()["map"]
        1.0
    """

    thresholds = np.linspace(0.5, 0.95, 10)
    recalls = np.linspace(0.0, 1.0, 101)

    def __init__(self, max_dets: int = 100) -> None:
        self.max_dets = max_dets
        self.videos: list[tuple[list[dict], list[dict]]] = []

    def update(self, preds: Sequence[dict], gts: Sequence[dict]) -> None:
        """Add one video's predictions and ground truth."""
        for p in preds:
            if not {"label", "score", "masks"} <= set(p):
                raise ValueError("each prediction needs label, score and masks")
        t_shapes = {np.asarray(x["masks"]).shape for x in list(preds) + list(gts)}
        if len(t_shapes) > 1:
            raise ValueError(f"masks of one video must share (T, H, W); got {sorted(t_shapes)}")
        self.videos.append((list(preds), list(gts)))

    def _category(self, c: int) -> np.ndarray | None:
        """Precision (thresholds, recalls) of category c, or None without ground truth."""
        n_gt = 0
        dets: list[tuple[float, int, np.ndarray]] = []  # (score, order, matched per threshold)
        order = 0
        for preds, gts in self.videos:
            g = [np.asarray(x["masks"], bool) for x in gts if x["label"] == c]
            d = [x for x in preds if x["label"] == c]
            n_gt += len(g)
            scores = np.array([x["score"] for x in d], dtype=float)
            idx = np.argsort(-scores, kind="mergesort")[: self.max_dets]
            ious = np.array(
                [[tube_iou(np.asarray(d[i]["masks"], bool), gm) for gm in g] for i in idx]
            ).reshape(len(idx), len(g))
            for i in idx:
                dets.append((float(scores[i]), order, np.zeros(len(self.thresholds), bool)))
                order += 1
            taken = np.zeros((len(self.thresholds), len(g)), bool)
            base = len(dets) - len(idx)
            for ti, thr in enumerate(self.thresholds):
                for k in range(len(idx)):
                    best, best_j = min(thr, 1 - 1e-10), -1
                    for j in range(len(g)):
                        if taken[ti, j] or ious[k, j] < best:
                            continue
                        best, best_j = ious[k, j], j
                    if best_j >= 0:
                        taken[ti, best_j] = True
                        dets[base + k][2][ti] = True
        if n_gt == 0:
            return None
        prec = np.zeros((len(self.thresholds), len(self.recalls)))
        if not dets:
            return prec
        sc = np.array([s for s, _, _ in dets])
        srt = np.argsort(-sc, kind="mergesort")
        tps = np.stack([dets[i][2] for i in srt], axis=1)  # (thr, D)
        for ti in range(len(self.thresholds)):
            tp = np.cumsum(tps[ti]).astype(float)
            fp = np.cumsum(~tps[ti]).astype(float)
            rc = tp / n_gt
            pr = tp / np.maximum(tp + fp, np.finfo(float).eps)
            for i in range(len(pr) - 1, 0, -1):
                pr[i - 1] = max(pr[i - 1], pr[i])
            inds = np.searchsorted(rc, self.recalls, side="left")
            q = np.zeros(len(self.recalls))
            ok = inds < len(pr)
            q[ok] = pr[inds[ok]]
            prec[ti] = q
        return prec

    def compute(self) -> dict[str, float]:
        """``map`` (IoU 0.50:0.95), ``ap50`` and ``ap75``."""
        cats = sorted(
            {int(x["label"]) for _, gts in self.videos for x in gts}
            | {int(x["label"]) for p, _ in self.videos for x in p}
        )
        precs = [p for c in cats if (p := self._category(c)) is not None]
        if not precs:
            return {"map": -1.0, "ap50": -1.0, "ap75": -1.0}
        P = np.stack(precs)  # (cats, thr, rec)
        return {"map": float(P.mean()), "ap50": float(P[:, 0].mean()), "ap75": float(P[:, 5].mean())}


def click_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    """IoU of two bool masks (1 when both are empty)."""
    union = np.logical_or(pred, gt).sum()
    return float(np.logical_and(pred, gt).sum() / union) if union else 1.0


def noc(
    predict, gt: np.ndarray, *, target_iou: float = 0.85, max_clicks: int = 20
) -> tuple[int, list[float]]:
    """Number of clicks to reach ``target_iou`` (``max_clicks`` when never reached), usual protocol.

    Args:
        predict: ``predict(points (k, 2), labels (k,)) -> bool mask (H, W)``.
        gt: (H, W) bool ground truth.
        target_iou: the IoU to reach (0.85 for NoC@85).
        max_clicks: click budget.

    Returns:
        (clicks, IoU after each click).
    """
    from iclr25.common.data.shapes_world import center_click, next_click

    pts, labels, ious = [center_click(gt)], [1], []
    for k in range(max_clicks):
        pred = np.asarray(predict(np.array(pts), np.array(labels)), bool)
        ious.append(click_iou(pred, gt))
        if ious[-1] >= target_iou:
            return k + 1, ious
        if k + 1 < max_clicks:
            if np.array_equal(pred, gt):
                return k + 1, ious
            xy, pos = next_click(pred, gt)
            pts.append(xy)
            labels.append(1 if pos else 0)
    return max_clicks, ious
