"""Loaders for RMP-SAM's paper datasets from local files: COCO-Panoptic, COCO instances, YouTube-VIS.

Both are map-style ``torch.utils.data.Dataset`` objects in the torchvision style: the annotation
JSON is parsed once, every image is read from disk only when its item is asked for, and an
optional ``transforms(image, target)`` callable runs on each item. Items carry the targets that
:func:`iclr25.methods.rmp_sam.data.panoptic_targets` builds for the shapes world, so the model's
``loss`` and the evaluation code consume them unchanged:

* panoptic: ``{"labels" (M,), "masks" (M, H, W) bool, "isthing" (M,) bool}``, thing classes
  first (``0 .. num_things - 1``), stuff classes after them; COCO instances (the source of the
  COCO-SAM click prompts) give the same dict with every segment a thing;
* video: ``{"labels" (M,), "masks" (M, T, H, W) bool}``, one row per instance track.

Nothing is downloaded. References: Xu et al., RMP-SAM (ICLR 2025), arXiv:2401.10228 (Sec. 4:
COCO-Panoptic, YouTube-VIS 2019, COCO-SAM); Kirillov et al., "Panoptic Segmentation" (CVPR 2019)
for the PNG id encoding; Yang et al., "Video Instance Segmentation" (ICCV 2019) for the
YouTube-VIS JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

__all__ = ["COCOInstances", "COCOPanoptic", "YouTubeVIS", "rgb_to_id"]

Transforms = Callable[[torch.Tensor, dict[str, torch.Tensor]], tuple[torch.Tensor, dict[str, torch.Tensor]]]


def rgb_to_id(rgb: np.ndarray) -> np.ndarray:
    """Segment ids of a COCO panoptic PNG: ``id = R + 256 G + 256^2 B`` (0 is void).

    Example:
        >>> rgb_to_id(np.array([[[1, 2, 0], [0, 0, 1]]], dtype=np.uint8)).tolist()
        [[513, 65536]]
    """
    if rgb.ndim != 3 or rgb.shape[-1] != 3:
        raise ValueError(f"a panoptic PNG must be (H, W, 3) RGB, got shape {rgb.shape}")
    c = rgb.astype(np.int64)
    return c[..., 0] + 256 * c[..., 1] + 256 * 256 * c[..., 2]


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} {path} is not valid JSON: {err}") from err


def _fields(record: Any, keys: Sequence[str], where: str) -> None:
    if not isinstance(record, dict):
        raise ValueError(f"{where} must be a JSON object, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise ValueError(f"{where} lacks field(s) {', '.join(missing)}")


def _categories(categories: list[dict[str, Any]]) -> tuple[list[int], list[str]]:
    """Category ids and names, sorted by id (the label order of instance-style annotations)."""
    for k, c in enumerate(categories):
        _fields(c, ("id", "name"), f"categories[{k}]")
    cats = sorted(categories, key=lambda c: c["id"])
    return [int(c["id"]) for c in cats], [str(c["name"]) for c in cats]


def _read_image(path: Path) -> torch.Tensor:
    """(3, H, W) float in [0, 1] from any image file PIL reads."""
    from PIL import Image

    if not path.is_file():
        raise FileNotFoundError(f"image {path} not found")
    with Image.open(path) as img:
        arr = np.asarray(img.convert("RGB"))
    return torch.from_numpy(arr.copy()).permute(2, 0, 1).float() / 255.0


class COCOPanoptic(Dataset):
    """COCO-Panoptic (or any panopticapi-format set) read lazily from local files.

    The layout is panopticapi's: ``panoptic_<split>.json`` with ``images`` (``id``,
    ``file_name``), ``annotations`` (``image_id``, ``file_name`` of the PNG, ``segments_info``
    with ``id``, ``category_id``, ``iscrowd``) and ``categories`` (``id``, ``name``,
    ``isthing``); a folder of PNG segment maps whose RGB colour encodes the segment id
    (:func:`rgb_to_id`); a folder of the images. Crowd segments are left out of the targets
    (their pixels count as void), as in Mask2Former-style panoptic training.

    Args:
        images: folder of the images (e.g. ``coco/val2017``).
        annotations: the panoptic JSON (e.g. ``coco/annotations/panoptic_val2017.json``).
        masks: folder of the PNG segment maps; default: the JSON's path without ``.json``
            (panopticapi's convention, e.g. ``coco/annotations/panoptic_val2017``).
        transforms: optional ``transforms(image, target) -> (image, target)``.

    Attributes:
        classes: category names in label order (things first, then stuff).
        num_things: thing classes (labels below it are things).
        category_ids: COCO category id of each label.

    Raises:
        FileNotFoundError: the JSON or a folder is missing (an image or PNG: when its item is read).
        ValueError: a record lacks a field, a segment names an unknown category, or an
            annotation names an image the JSON does not list.

    Example:
        >>> ds = COCOPanoptic("coco/val2017", "coco/annotations/panoptic_val2017.json")  # doctest: +SKIP
        >>> image, target = ds[0]  # (3, H, W); {"labels", "masks", "isthing"}  # doctest: +SKIP
    """

    def __init__(
        self,
        images: str | Path,
        annotations: str | Path,
        masks: str | Path | None = None,
        *,
        transforms: Transforms | None = None,
    ) -> None:
        ann_path = Path(annotations)
        self.image_root = Path(images)
        self.mask_root = Path(masks) if masks is not None else ann_path.with_suffix("")
        raw = _read_json(ann_path, "panoptic annotation file")
        _fields(raw, ("images", "annotations", "categories"), f"panoptic annotation file {ann_path}")
        for folder, what in ((self.image_root, "image folder"), (self.mask_root, "panoptic PNG folder")):
            if not folder.is_dir():
                raise FileNotFoundError(f"{what} {folder} not found")
        for k, c in enumerate(raw["categories"]):
            _fields(c, ("id", "name", "isthing"), f"categories[{k}]")
        # things first (in id order), then stuff: the label layout panoptic_targets uses
        cats = sorted(raw["categories"], key=lambda c: (not c["isthing"], c["id"]))
        self.category_ids = [int(c["id"]) for c in cats]
        self.classes = [str(c["name"]) for c in cats]
        self.num_things = sum(bool(c["isthing"]) for c in cats)
        self._label_of = {cid: k for k, cid in enumerate(self.category_ids)}
        files = {}
        for k, im in enumerate(raw["images"]):
            _fields(im, ("id", "file_name"), f"images[{k}]")
            files[im["id"]] = im["file_name"]
        self._items: list[tuple[int, str, str, list[dict[str, Any]]]] = []
        for k, ann in enumerate(raw["annotations"]):
            where = f"annotations[{k}]"
            _fields(ann, ("image_id", "file_name", "segments_info"), where)
            if ann["image_id"] not in files:
                raise ValueError(f"{where} names image_id {ann['image_id']}, which images does not list")
            for j, seg in enumerate(ann["segments_info"]):
                _fields(seg, ("id", "category_id"), f"{where}.segments_info[{j}]")
                if seg["category_id"] not in self._label_of:
                    raise ValueError(
                        f"{where}.segments_info[{j}] has unknown category_id {seg['category_id']}"
                    )
            self._items.append(
                (ann["image_id"], files[ann["image_id"]], ann["file_name"], ann["segments_info"])
            )
        self.transforms = transforms

    def __len__(self) -> int:
        return len(self._items)

    def image_id(self, index: int) -> int:
        """The COCO image id of item ``index``."""
        return int(self._items[index][0])

    def target(self, index: int) -> dict[str, torch.Tensor]:
        """The panoptic target of item ``index`` (reads only its PNG)."""
        from PIL import Image

        _, _, png, segments = self._items[index]
        path = self.mask_root / png
        if not path.is_file():
            raise FileNotFoundError(f"panoptic PNG {path} not found")
        with Image.open(path) as img:
            ids = rgb_to_id(np.asarray(img.convert("RGB")))
        labels, masks, things = [], [], []
        for seg in segments:
            if seg.get("iscrowd", 0):
                continue  # void for training and PQ
            m = ids == int(seg["id"])
            if not m.any():
                raise ValueError(f"segment {seg['id']} of {png} has no pixel in the PNG")
            label = self._label_of[seg["category_id"]]
            labels.append(label)
            masks.append(m)
            things.append(label < self.num_things)
        h, w = ids.shape
        return {
            "labels": torch.tensor(labels, dtype=torch.long),
            "masks": torch.from_numpy(np.stack(masks)) if masks else torch.zeros(0, h, w, dtype=torch.bool),
            "isthing": torch.tensor(things, dtype=torch.bool),
        }

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(image (3, H, W) float in [0, 1], target)`` of item ``index``."""
        _, file_name, _, _ = self._items[index]
        image, target = _read_image(self.image_root / file_name), self.target(index)
        if image.shape[1:] != target["masks"].shape[1:]:
            png_size = tuple(target["masks"].shape[1:])
            raise ValueError(f"image {file_name} is {tuple(image.shape[1:])} but its PNG is {png_size}")
        if self.transforms is not None:
            image, target = self.transforms(image, target)
        return image, target


def _decode_segmentation(seg: Any, h: int, w: int, where: str) -> np.ndarray:
    """(H, W) bool mask from a YouTube-VIS / COCO segmentation: RLE (counts as a list or a
    compressed string) or polygons; ``None`` (object absent from the frame) is empty."""
    if seg is None:
        return np.zeros((h, w), dtype=bool)
    from pycocotools import mask as mask_utils

    if isinstance(seg, dict):
        _fields(seg, ("counts", "size"), where)
        if list(seg["size"]) != [h, w]:
            raise ValueError(f"{where} has size {seg['size']}, the video is {[h, w]}")
        if isinstance(seg["counts"], list):
            rle = mask_utils.frPyObjects(seg, h, w)  # uncompressed RLE
        elif isinstance(seg["counts"], (str, bytes)):
            counts = seg["counts"].encode() if isinstance(seg["counts"], str) else seg["counts"]
            rle = {"size": [h, w], "counts": counts}
        else:
            raise ValueError(f"{where} counts must be a list or a string, got {type(seg['counts']).__name__}")
    elif isinstance(seg, list):
        if not seg or not all(isinstance(p, list) and len(p) >= 6 and len(p) % 2 == 0 for p in seg):
            raise ValueError(f"{where} polygons must be lists of at least 3 (x, y) pairs")
        rle = mask_utils.merge(mask_utils.frPyObjects(seg, h, w))
    else:
        raise ValueError(f"{where} must be an RLE dict, a polygon list or null, got {type(seg).__name__}")
    return mask_utils.decode(rle).astype(bool)


class COCOInstances(Dataset):
    """COCO instance masks (the COCO-SAM source: clicks are drawn inside these masks in training).

    The layout is COCO's ``instances_<split>.json``: ``images`` (``id``, ``file_name``,
    ``height``, ``width``), ``annotations`` (``image_id``, ``category_id``, ``segmentation`` as
    polygons or RLE, ``iscrowd``) and ``categories`` (``id``, ``name``). Every image of the JSON
    is an item (also those without annotations); crowd regions are left out.

    Args:
        images: folder of the images (e.g. ``coco/train2017``).
        annotations: the instances JSON (e.g. ``coco/annotations/instances_train2017.json``).
        transforms: optional ``transforms(image, target) -> (image, target)``.

    Attributes:
        classes: category names in label order (category id order); every class is a thing.
        category_ids: COCO category id of each label.

    Raises:
        FileNotFoundError: the JSON or the image folder is missing (an image: when read).
        ValueError: a record lacks a field, or an annotation names an unknown image or category.

    Example:
        >>> ann = "coco/annotations/instances_train2017.json"
        >>> ds = COCOInstances("coco/train2017", ann)  # doctest: +SKIP
        >>> image, target = ds[0]  # (3, H, W); {"labels", "masks" (M, H, W), "isthing"}  # doctest: +SKIP
    """

    def __init__(
        self, images: str | Path, annotations: str | Path, *, transforms: Transforms | None = None
    ) -> None:
        ann_path = Path(annotations)
        self.image_root = Path(images)
        raw = _read_json(ann_path, "instances annotation file")
        _fields(raw, ("images", "annotations", "categories"), f"instances annotation file {ann_path}")
        if not self.image_root.is_dir():
            raise FileNotFoundError(f"image folder {self.image_root} not found")
        self.category_ids, self.classes = _categories(raw["categories"])
        label_of = {cid: k for k, cid in enumerate(self.category_ids)}
        self.images: list[dict[str, Any]] = []
        slot = {}
        for k, im in enumerate(raw["images"]):
            _fields(im, ("id", "file_name", "height", "width"), f"images[{k}]")
            slot[im["id"]] = len(self.images)
            self.images.append(im)
        self._objects: list[list[tuple[int, Any]]] = [[] for _ in self.images]
        for k, ann in enumerate(raw["annotations"]):
            where = f"annotations[{k}]"
            _fields(ann, ("image_id", "category_id", "segmentation"), where)
            if ann["image_id"] not in slot:
                raise ValueError(f"{where} names image_id {ann['image_id']}, which images does not list")
            if ann["category_id"] not in label_of:
                raise ValueError(f"{where} has unknown category_id {ann['category_id']}")
            if not ann.get("iscrowd", 0):
                self._objects[slot[ann["image_id"]]].append(
                    (label_of[ann["category_id"]], ann["segmentation"])
                )
        self.transforms = transforms

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(image (3, H, W) float in [0, 1], target)``; every instance is a thing."""
        im = self.images[index]
        h, w = int(im["height"]), int(im["width"])
        image = _read_image(self.image_root / im["file_name"])
        if image.shape[1:] != (h, w):
            raise ValueError(f"image {im['file_name']} is {tuple(image.shape[1:])}, the JSON says {(h, w)}")
        labels, masks = [], []
        for k, (label, seg) in enumerate(self._objects[index]):
            m = _decode_segmentation(seg, h, w, f"image {im['id']} instance {k}")
            if m.any():  # a polygon below one pixel rasterises to nothing
                labels.append(label)
                masks.append(m)
        target = {
            "labels": torch.tensor(labels, dtype=torch.long),
            "masks": torch.from_numpy(np.stack(masks)) if masks else torch.zeros(0, h, w, dtype=torch.bool),
            "isthing": torch.ones(len(labels), dtype=torch.bool),
        }
        if self.transforms is not None:
            image, target = self.transforms(image, target)
        return image, target


class YouTubeVIS(Dataset):
    """YouTube-VIS (2019 / 2021 layout) read lazily from local files: one item per video.

    The JSON has ``videos`` (``id``, ``file_names`` per frame, ``height``, ``width``),
    ``annotations`` (``video_id``, ``category_id``, ``segmentations``: one entry per frame,
    an RLE dict, polygons or null where the object is absent) and ``categories`` (``id``,
    ``name``). Frames are read from ``frames/<file_name>`` only when the item is asked for.

    Args:
        frames: folder the ``file_names`` are relative to (e.g. ``ytvis/train/JPEGImages``).
        annotations: the instances JSON (e.g. ``ytvis/train.json``).
        clip: frame indices to read per video (e.g. ``range(5)``); None reads every frame.
        transforms: optional ``transforms(frames, target) -> (frames, target)``.

    Attributes:
        classes: category names in label order (category id order); every class is a thing.
        category_ids: YouTube-VIS category id of each label.

    Raises:
        FileNotFoundError: the JSON or the frame folder is missing (a frame: when read).
        ValueError: a record lacks a field, an annotation names an unknown video or category,
            or its ``segmentations`` has not one entry per frame.

    Example:
        >>> ds = YouTubeVIS("ytvis/train/JPEGImages", "ytvis/train.json", clip=range(5))  # doctest: +SKIP
        >>> frames, target = ds[0]  # doctest: +SKIP
        >>> frames.shape, target["masks"].shape  # (T, 3, H, W), (M, T, H, W)  # doctest: +SKIP
    """

    def __init__(
        self,
        frames: str | Path,
        annotations: str | Path,
        *,
        clip: Sequence[int] | None = None,
        transforms: Transforms | None = None,
    ) -> None:
        ann_path = Path(annotations)
        self.frame_root = Path(frames)
        raw = _read_json(ann_path, "YouTube-VIS annotation file")
        _fields(raw, ("videos", "annotations", "categories"), f"YouTube-VIS annotation file {ann_path}")
        if not self.frame_root.is_dir():
            raise FileNotFoundError(f"frame folder {self.frame_root} not found")
        self.category_ids, self.classes = _categories(raw["categories"])
        label_of = {cid: k for k, cid in enumerate(self.category_ids)}
        self.videos: list[dict[str, Any]] = []
        slot = {}
        for k, v in enumerate(raw["videos"]):
            _fields(v, ("id", "file_names", "height", "width"), f"videos[{k}]")
            slot[v["id"]] = len(self.videos)
            self.videos.append(v)
        self._tracks: list[list[tuple[int, list[Any]]]] = [[] for _ in self.videos]
        for k, ann in enumerate(raw["annotations"]):
            where = f"annotations[{k}]"
            _fields(ann, ("video_id", "category_id", "segmentations"), where)
            if ann["video_id"] not in slot:
                raise ValueError(f"{where} names video_id {ann['video_id']}, which videos does not list")
            if ann["category_id"] not in label_of:
                raise ValueError(f"{where} has unknown category_id {ann['category_id']}")
            v = self.videos[slot[ann["video_id"]]]
            if len(ann["segmentations"]) != len(v["file_names"]):
                raise ValueError(
                    f"{where} has {len(ann['segmentations'])} segmentations for {len(v['file_names'])} frames"
                )
            self._tracks[slot[ann["video_id"]]].append((label_of[ann["category_id"]], ann["segmentations"]))
        self.clip = None if clip is None else [int(t) for t in clip]
        self.transforms = transforms

    def __len__(self) -> int:
        return len(self.videos)

    def _frames(self, index: int) -> list[int]:
        n = len(self.videos[index]["file_names"])
        if self.clip is None:
            return list(range(n))
        if any(not 0 <= t < n for t in self.clip):
            raise ValueError(f"clip {self.clip} reaches past video {self.videos[index]['id']}'s {n} frames")
        return self.clip

    def __getitem__(self, index: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(frames (T, 3, H, W) float in [0, 1], target)``; tracks with no pixel in the read
        frames are left out (as the shapes-world videos leave out never-visible objects)."""
        v = self.videos[index]
        h, w, ts = int(v["height"]), int(v["width"]), self._frames(index)
        frames = torch.stack([_read_image(self.frame_root / v["file_names"][t]) for t in ts])
        if frames.shape[2:] != (h, w):
            raise ValueError(f"video {v['id']} frames are {tuple(frames.shape[2:])}, the JSON says {(h, w)}")
        labels, masks = [], []
        for k, (label, segs) in enumerate(self._tracks[index]):
            m = np.stack(
                [_decode_segmentation(segs[t], h, w, f"video {v['id']} track {k} frame {t}") for t in ts]
            )
            if m.any():
                labels.append(label)
                masks.append(m)
        target = {
            "labels": torch.tensor(labels, dtype=torch.long),
            "masks": torch.from_numpy(np.stack(masks))
            if masks
            else torch.zeros(0, len(ts), h, w, dtype=torch.bool),
        }
        if self.transforms is not None:
            frames, target = self.transforms(frames, target)
        return frames, target
