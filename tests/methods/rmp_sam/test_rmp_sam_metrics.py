"""Metrics of RMP-SAM: tube AP against hand-worked cases and pycocotools, PQ against brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.methods.rmp_sam import VideoMaskAP, panoptic_inference, panoptic_quality, tube_iou


def _mask(t: int, rows: slice, cols: slice, frames=None) -> np.ndarray:
    m = np.zeros((t, 8, 8), bool)
    for f in frames if frames is not None else range(t):
        m[f, rows, cols] = True
    return m


def test_tube_iou_sums_over_frames() -> None:
    a = _mask(2, slice(0, 2), slice(0, 2))  # 4 px per frame
    b = _mask(2, slice(0, 2), slice(0, 2), frames=[0])  # absent in frame 1
    assert tube_iou(a, b) == pytest.approx(4 / 8)


def test_video_ap_perfect_false_positive_and_absent_frames() -> None:
    g1, g2 = _mask(3, slice(0, 3), slice(0, 3)), _mask(3, slice(5, 8), slice(5, 8), frames=[0, 2])
    ap = VideoMaskAP()
    ap.update(
        [{"label": 0, "score": 0.9, "masks": g1}, {"label": 1, "score": 0.8, "masks": g2}],
        [{"label": 0, "masks": g1}, {"label": 1, "masks": g2}],
    )
    assert ap.compute()["map"] == 1.0
    # a false positive scored above the true positive: precision 1/2 at every recall
    ap = VideoMaskAP()
    ap.update(
        [{"label": 0, "score": 0.9, "masks": g2}, {"label": 0, "score": 0.5, "masks": g1}],
        [{"label": 0, "masks": g1}],
    )
    assert ap.compute()["map"] == pytest.approx(0.5)
    # the same mask but absent in the middle frame: tube IoU 2/3, a hit at 0.50-0.65 only
    ap = VideoMaskAP()
    ap.update(
        [{"label": 0, "score": 0.9, "masks": _mask(3, slice(0, 3), slice(0, 3), frames=[0, 2])}],
        [{"label": 0, "masks": g1}],
    )
    assert ap.compute()["map"] == pytest.approx(0.4)  # thresholds 0.50, 0.55, 0.60, 0.65 of ten


def test_video_ap_rejects_mismatched_frames() -> None:
    ap = VideoMaskAP()
    with pytest.raises(ValueError, match="share"):
        ap.update(
            [{"label": 0, "score": 1.0, "masks": np.zeros((2, 8, 8), bool)}],
            [{"label": 0, "masks": np.zeros((3, 8, 8), bool)}],
        )


def test_video_ap_with_one_frame_matches_pycocotools() -> None:
    from pycocotools import mask as mu
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    rng = np.random.default_rng(0)
    ap = VideoMaskAP()
    images, anns, dets = [], [], []
    for i in range(6):
        gts, preds = [], []
        for _ in range(int(rng.integers(1, 4))):
            r, c, s = int(rng.integers(0, 5)), int(rng.integers(0, 5)), int(rng.integers(2, 4))
            m = np.zeros((8, 8), bool)
            m[r : r + s, c : c + s] = True
            gts.append({"label": int(rng.integers(0, 2)), "masks": m[None]})
        for _ in range(int(rng.integers(1, 5))):
            base = gts[int(rng.integers(0, len(gts)))]["masks"][0]
            m = np.roll(base, int(rng.integers(-1, 2)), axis=int(rng.integers(0, 2)))
            preds.append({"label": int(rng.integers(0, 2)), "score": float(rng.random()), "masks": m[None]})
        ap.update(preds, gts)
        images.append({"id": i, "height": 8, "width": 8})
        for g in gts:
            rle = mu.encode(np.asfortranarray(g["masks"][0].astype(np.uint8)))
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i,
                    "category_id": g["label"] + 1,
                    "segmentation": rle,
                    "area": float(g["masks"].sum()),
                    "bbox": list(mu.toBbox(rle)),
                    "iscrowd": 0,
                }
            )
        for p in preds:
            rle = mu.encode(np.asfortranarray(p["masks"][0].astype(np.uint8)))
            dets.append(
                {"image_id": i, "category_id": p["label"] + 1, "segmentation": rle, "score": p["score"]}
            )
    coco = COCO()
    coco.dataset = {"images": images, "annotations": anns, "categories": [{"id": 1}, {"id": 2}]}
    coco.createIndex()
    ev = COCOeval(coco, coco.loadRes(dets), "segm")
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    assert ap.compute()["map"] == pytest.approx(ev.stats[0], abs=1e-9)


def _brute_pq(pred: np.ndarray, gt: np.ndarray, things: set[int], stuffs: set[int]) -> float:
    """PQ by panopticapi's rule (unknown prediction categories are unassigned pixels)."""
    known = things | stuffs
    stats: dict[int, list[float]] = {}
    for p, g in zip(pred, gt, strict=True):

        def segs(x: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
            out = {}
            for cat in np.unique(x[..., 0]):
                if cat not in known:
                    continue
                sel = x[..., 0] == cat
                if cat in stuffs:
                    out[(int(cat), 0)] = sel
                else:
                    for inst in np.unique(x[..., 1][sel]):
                        out[(int(cat), int(inst))] = sel & (x[..., 1] == inst)
            return out

        ps, gs = segs(p), segs(g)
        matched_p, matched_g = set(), set()
        for gk, gm in gs.items():
            for pk, pm in ps.items():
                if pk[0] != gk[0]:
                    continue
                iou = (gm & pm).sum() / (gm | pm).sum()
                if iou > 0.5:
                    s = stats.setdefault(gk[0], [0.0, 0, 0, 0])
                    s[0] += iou
                    s[1] += 1
                    matched_p.add(pk)
                    matched_g.add(gk)
        for gk in set(gs) - matched_g:
            stats.setdefault(gk[0], [0.0, 0, 0, 0])[3] += 1
        for pk in set(ps) - matched_p:
            stats.setdefault(pk[0], [0.0, 0, 0, 0])[2] += 1
    return float(np.mean([s[0] / (s[1] + 0.5 * s[2] + 0.5 * s[3]) for s in stats.values()]))


def test_pq_wrapper_matches_brute_force_on_random_maps() -> None:
    rng = np.random.default_rng(1)
    things, stuffs = {0, 1}, {2, 3}
    for _ in range(5):
        gt = np.stack([rng.integers(0, 4, (2, 6, 6)), rng.integers(1, 3, (2, 6, 6))], -1)
        gt[..., 1][gt[..., 0] >= 2] = 0
        pred = gt.copy()
        flip = rng.random((2, 6, 6)) < 0.3
        pred[..., 0][flip] = rng.integers(0, 5, int(flip.sum()))  # category 4: unassigned
        pred[..., 1][pred[..., 0] >= 2] = 0
        ours = panoptic_quality(torch.from_numpy(pred), torch.from_numpy(gt), things, stuffs)["pq"]
        assert ours == pytest.approx(_brute_pq(pred, gt, things, stuffs))


def test_missed_segments_under_unassigned_pixels_count_as_false_negatives() -> None:
    gt = torch.zeros(1, 4, 4, 2, dtype=torch.long)
    gt[0, ..., 0] = 1
    gt[0, :2, :2] = torch.tensor([0, 1])
    pred = gt.clone()
    pred[0, :2, :2] = torch.tensor([9, 0])  # the thing left unassigned
    assert panoptic_quality(pred, gt, {0}, {1})["pq"] < 1.0


def test_postprocess_gives_disjoint_segments_and_merges_stuff() -> None:
    logits = torch.full((4, 4), -10.0)
    logits[0, 0] = logits[1, 2] = logits[2, 2] = 10.0  # a thing and two queries of stuff class 2
    logits[3, 3] = 10.0  # no object
    masks = torch.full((4, 6, 6), -10.0)
    masks[0, :2, :2] = 10.0
    masks[1, 3:, :3] = 10.0
    masks[2, 3:, 3:] = 10.0
    masks[3] = 10.0
    out = panoptic_inference(logits, masks, num_things=2)
    seg, info = out["segmentation"], out["segments_info"]
    assert [r["label_id"] for r in info] == [0, 2] and info[1]["was_fused"]
    assert int((seg == info[1]["id"]).sum()) == 18 and int((seg == info[0]["id"]).sum()) == 4
    assert int((seg > 0).sum()) == 22  # each pixel in at most one segment
