"""``torch.utils.data.Dataset`` wrappers returning ``torchvision.tv_tensors``.

Images are float (3, H, W) in [0, 1]; masks ``tv_tensors.Mask``; boxes ``tv_tensors.BoundingBoxes``
in XYXY with ``canvas_size``, so ``torchvision.transforms.v2`` moves images, masks and boxes
together. Item i depends only on (world seed, split, i).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset
from torchvision import tv_tensors

from .language import Forms
from .world import LabelScheme, ShapesWorld, caption

__all__ = ["ShapesCaptions", "ShapesClassification", "ShapesPanoptic", "ShapesReferring", "ShapesVideo"]


def _image(x: np.ndarray) -> tv_tensors.Image:
    return tv_tensors.Image(torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1).float() / 255.0)


def _instances(instance: np.ndarray, ids: list[int], boxes: np.ndarray) -> dict[str, Any]:
    size = instance.shape[-2:]
    masks = np.stack([instance == i for i in ids]) if ids else np.zeros((0, *size), dtype=bool)
    return {
        "masks": tv_tensors.Mask(torch.from_numpy(masks)),
        "boxes": tv_tensors.BoundingBoxes(
            torch.from_numpy(boxes).reshape(-1, 4), format="XYXY", canvas_size=size
        ),
    }


class _Base(Dataset):
    def __init__(
        self, world: ShapesWorld, n: int, *, split: str = "train", transform: Callable[..., Any] | None = None
    ) -> None:
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        self.world, self.n, self.split, self.transform = world, n, split, transform

    def __len__(self) -> int:
        return self.n

    def _check(self, i: int) -> None:
        if not 0 <= i < self.n:
            raise IndexError(f"index {i} out of range for {self.n} items")

    def _out(self, *items: Any) -> Any:
        return self.transform(*items) if self.transform is not None else items


class ShapesClassification(_Base):
    """Single-object images and labels: ``(Image, int)``."""

    def __init__(
        self,
        world: ShapesWorld,
        n: int,
        *,
        split: str = "train",
        label_scheme: LabelScheme = "shape_color",
        transform: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__(world, n, split=split, transform=transform)
        self.label_scheme = label_scheme

    def __getitem__(self, i: int) -> Any:
        self._check(i)
        img, label, _ = self.world.single_object(i, split=self.split, label_scheme=self.label_scheme)
        return self._out(_image(img), label)


class ShapesCaptions(_Base):
    """Single-object images and captions "a {style} {color} {shape}": ``(Image, str)``."""

    def __getitem__(self, i: int) -> Any:
        self._check(i)
        img, _, attrs = self.world.single_object(i, split=self.split)
        return self._out(_image(img), caption(attrs))


class ShapesPanoptic(_Base):
    """Panoptic scenes: ``(Image, target)`` with masks, boxes, labels and the semantic map."""

    def __getitem__(self, i: int) -> Any:
        self._check(i)
        r = self.world.panoptic(i, split=self.split)
        ids = [o.id for o in r.objects]
        target = _instances(r.instance, ids, r.boxes())
        shapes = self.world.config.shapes
        target["labels"] = torch.tensor([shapes.index(o.shape) for o in r.objects], dtype=torch.int64)
        target["semantic"] = tv_tensors.Mask(torch.from_numpy(r.semantic))
        return self._out(_image(r.image), target)


class ShapesReferring(_Base):
    """Referring scenes: ``(Image, target)`` with one mask and box per expression."""

    def __init__(
        self,
        world: ShapesWorld,
        n: int,
        *,
        split: str = "train",
        forms: Forms = "train",
        transform: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__(world, n, split=split, transform=transform)
        self.forms = forms

    def __getitem__(self, i: int) -> Any:
        self._check(i)
        scene = self.world.referring(i, split=self.split, forms=self.forms)
        r = scene.rendered
        ids = [oid for oid, _ in scene.expressions]
        boxes = r.boxes()
        index = {o.id: k for k, o in enumerate(r.objects)}
        target = _instances(
            r.instance, ids, boxes[[index[k] for k in ids]] if ids else np.zeros((0, 4), np.float32)
        )
        target["expressions"] = [e for _, e in scene.expressions]
        target["object_ids"] = torch.tensor(ids, dtype=torch.int64)
        return self._out(_image(r.image), target)


class ShapesVideo(_Base):
    """Videos: ``(Video (T, 3, H, W), target)`` with per-track masks (n, T, H, W) and track ids."""

    def __init__(
        self,
        world: ShapesWorld,
        n: int,
        *,
        split: str = "train",
        num_frames: int | None = None,
        transform: Callable[..., Any] | None = None,
    ) -> None:
        super().__init__(world, n, split=split, transform=transform)
        self.num_frames = num_frames

    def __getitem__(self, i: int) -> Any:
        self._check(i)
        v = self.world.video(i, split=self.split, num_frames=self.num_frames)
        frames = torch.from_numpy(v.frames).permute(0, 3, 1, 2).float() / 255.0  # (T, 3, H, W)
        ids = [t.object.id for t in v.tracks]
        masks = (
            np.stack([v.instance == k for k in ids], axis=0)
            if ids
            else np.zeros((0, *v.instance.shape), bool)
        )
        shapes = self.world.config.shapes
        target = {
            "masks": tv_tensors.Mask(torch.from_numpy(masks)),  # (n, T, H, W)
            "track_ids": torch.tensor(ids, dtype=torch.int64),
            "labels": torch.tensor([shapes.index(t.object.shape) for t in v.tracks], dtype=torch.int64),
        }
        return self._out(tv_tensors.Video(frames), target)
