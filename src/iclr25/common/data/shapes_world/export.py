"""Writers of the real data formats, so each method's real loaders are tested without downloads.

- COCO panoptic: one PNG per image with segment ids in RGB (id = R + 256 G + 256² B) and a JSON
  file with ``images``, ``annotations[].segments_info`` and ``categories`` (ids start at 1).
- YouTube-VIS: a folder of frames per video and a JSON with per-frame RLE masks (``None`` for a
  frame where the object is hidden).
- Refer-style (RefCOCO layout): ``refs.json`` and a COCO ``instances.json``.
- ImageFolder: ``root/<class name>/<index>.png``.
- torchmetrics ``PanopticQuality`` input: (H, W, 2) of (category, instance), instance 0 for stuff.

Internal category ids are contiguous from 0 (things by shape, then stuff); exports map them to
1-based ids. RLE goes through ``pycocotools`` (never hand-written).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from .language import RefScene
from .scene import Rendered
from .video import Video

__all__ = [
    "STUFF_SEGMENT_BASE",
    "coco_categories",
    "read_coco_panoptic_png",
    "to_torchmetrics_panoptic",
    "write_coco_panoptic",
    "write_imagefolder",
    "write_refer",
    "write_ytvis",
]

#: Segment id of stuff class k in COCO panoptic PNGs: STUFF_SEGMENT_BASE + k (things use object ids).
STUFF_SEGMENT_BASE = 1000


def coco_categories(class_names: Sequence[str], n_things: int) -> list[dict[str, object]]:
    """COCO category records: id = internal id + 1; the first ``n_things`` are things."""
    return [
        {
            "id": k + 1,
            "name": name,
            "isthing": int(k < n_things),
            "supercategory": "shape" if k < n_things else "stuff",
        }
        for k, name in enumerate(class_names)
    ]


def to_torchmetrics_panoptic(rendered: Rendered, n_things: int) -> np.ndarray:
    """(H, W, 2) int64 of (category, instance) with instance 0 on stuff (torchmetrics' layout)."""
    inst = np.where(rendered.semantic < n_things, rendered.instance, 0)
    return np.stack([rendered.semantic, inst], axis=-1).astype(np.int64)


def _segment_ids(rendered: Rendered, n_things: int) -> np.ndarray:
    thing = rendered.semantic < n_things
    return np.where(thing, rendered.instance, STUFF_SEGMENT_BASE + rendered.semantic - n_things).astype(
        np.int64
    )


def read_coco_panoptic_png(path: str | os.PathLike[str]) -> np.ndarray:
    """Segment ids (H, W) int64 of a COCO panoptic PNG."""
    rgb = np.asarray(Image.open(path).convert("RGB")).astype(np.int64)
    return rgb[..., 0] + 256 * rgb[..., 1] + 256 * 256 * rgb[..., 2]


def write_coco_panoptic(
    root: str | os.PathLike[str],
    items: Sequence[Rendered],
    class_names: Sequence[str],
    n_things: int,
) -> Path:
    """Write images, panoptic PNGs and ``panoptic.json`` under ``root``; return the JSON path."""
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "panoptic").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for k, r in enumerate(items):
        name = f"{k:06d}"
        Image.fromarray(r.image).save(root / "images" / f"{name}.png")
        seg = _segment_ids(r, n_things)
        rgb = np.stack([seg % 256, (seg // 256) % 256, seg // 65536], axis=-1).astype(np.uint8)
        Image.fromarray(rgb).save(root / "panoptic" / f"{name}.png")
        h, w = seg.shape
        images.append({"id": k, "file_name": f"{name}.png", "height": h, "width": w})
        infos = []
        for sid in np.unique(seg):
            m = seg == sid
            rows, cols = np.nonzero(m)
            cat = int(r.semantic[m][0])
            bbox = [
                int(cols.min()),
                int(rows.min()),
                int(cols.max() - cols.min() + 1),
                int(rows.max() - rows.min() + 1),
            ]
            infos.append(
                {"id": int(sid), "category_id": cat + 1, "area": int(m.sum()), "bbox": bbox, "iscrowd": 0}
            )
        annotations.append({"image_id": k, "file_name": f"{name}.png", "segments_info": infos})
    path = root / "panoptic.json"
    payload = {
        "images": images,
        "annotations": annotations,
        "categories": coco_categories(class_names, n_things),
    }
    path.write_text(json.dumps(payload))
    return path


def _rle(mask: np.ndarray) -> dict[str, object]:
    try:
        from pycocotools import mask as mask_utils
    except ImportError as err:  # pragma: no cover - pycocotools is a dev dependency
        raise ImportError("RLE export needs pycocotools: pip install pycocotools") from err
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return {"size": [int(v) for v in rle["size"]], "counts": rle["counts"].decode("ascii")}


def write_ytvis(
    root: str | os.PathLike[str], videos: Sequence[Video], class_names: Sequence[str], n_things: int
) -> Path:
    """Write frames and a YouTube-VIS JSON (``videos``, ``annotations``, ``categories``) under ``root``."""
    root = Path(root)
    vids, anns = [], []
    for v, video in enumerate(videos):
        folder = root / "JPEGImages" / f"{v:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        names = []
        for t, frame in enumerate(video.frames):
            Image.fromarray(frame).save(folder / f"{t:05d}.png")
            names.append(f"{v:05d}/{t:05d}.png")
        T, H, W = video.instance.shape
        vids.append({"id": v + 1, "file_names": names, "height": H, "width": W, "length": T})
        for track in video.tracks:
            obj = track.object
            segs, areas, boxes = [], [], []
            for t in range(T):
                m = video.instance[t] == obj.id
                if not m.any():
                    segs.append(None)
                    areas.append(None)
                    boxes.append(None)
                    continue
                rows, cols = np.nonzero(m)
                segs.append(_rle(m))
                areas.append(int(m.sum()))
                boxes.append([int(cols.min()), int(rows.min()), int(np.ptp(cols) + 1), int(np.ptp(rows) + 1)])
            cat = list(class_names).index(obj.shape) + 1
            anns.append(
                {
                    "id": len(anns) + 1,
                    "video_id": v + 1,
                    "category_id": cat,
                    "segmentations": segs,
                    "areas": areas,
                    "bboxes": boxes,
                    "iscrowd": 0,
                }
            )
    path = root / "instances.json"
    payload = {"videos": vids, "annotations": anns, "categories": coco_categories(class_names, n_things)}
    path.write_text(json.dumps(payload))
    return path


def write_refer(
    root: str | os.PathLike[str],
    scenes: Sequence[RefScene],
    class_names: Sequence[str],
    n_things: int,
    *,
    split: str = "train",
) -> tuple[Path, Path]:
    """Write images, ``refs.json`` (one ref per expression) and COCO ``instances.json`` under ``root``."""
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, anns, refs = [], [], []
    for k, scene in enumerate(scenes):
        r = scene.rendered
        name = f"{k:06d}.png"
        Image.fromarray(r.image).save(root / "images" / name)
        images.append({"id": k, "file_name": name, "height": r.image.shape[0], "width": r.image.shape[1]})
        ann_of = {}
        for obj in r.objects:
            m = r.instance == obj.id
            if not m.any():
                continue
            rows, cols = np.nonzero(m)
            ann_id = len(anns) + 1
            ann_of[obj.id] = ann_id
            anns.append(
                {
                    "id": ann_id,
                    "image_id": k,
                    "category_id": list(class_names).index(obj.shape) + 1,
                    "bbox": [int(cols.min()), int(rows.min()), int(np.ptp(cols) + 1), int(np.ptp(rows) + 1)],
                    "area": int(m.sum()),
                    "segmentation": _rle(m),
                    "iscrowd": 0,
                }
            )
        for object_id, sentence in scene.expressions:
            ann = anns[ann_of[object_id] - 1]
            refs.append(
                {
                    "ref_id": len(refs),
                    "ann_id": ann["id"],
                    "image_id": k,
                    "category_id": ann["category_id"],
                    "split": split,
                    "file_name": name,
                    "sentences": [{"sent": sentence, "tokens": sentence.split(), "sent_id": len(refs)}],
                }
            )
    cats = coco_categories(class_names, n_things)
    refs_path, inst_path = root / "refs.json", root / "instances.json"
    refs_path.write_text(json.dumps(refs))
    inst_path.write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
    return refs_path, inst_path


def write_imagefolder(
    root: str | os.PathLike[str], images: np.ndarray, labels: np.ndarray, class_names: Sequence[str]
) -> Path:
    """Write ``root/<class name>/<index>.png`` (readable by ``torchvision.datasets.ImageFolder``)."""
    images, labels = np.asarray(images), np.asarray(labels)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(f"images must be uint8 (n, H, W, 3), got {images.dtype} {images.shape}")
    if len(images) != len(labels):
        raise ValueError(f"{len(images)} images but {len(labels)} labels")
    root = Path(root)
    for k, (img, y) in enumerate(zip(images, labels, strict=True)):
        folder = root / class_names[int(y)].replace(" ", "_")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(img).save(folder / f"{k:06d}.png")
    return root
