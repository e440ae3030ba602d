"""REC / REG data as tensors: scenes, padded candidate boxes and (scene, target, expression) refs.

Two sources: the shapes world (scenes with referring expressions and ground truth for the oracle
listener) and local refer-format files (RefCOCO-style ``refs`` JSON or pickle + COCO
``instances.json`` + an image folder), the paper-scale path. Nothing is downloaded.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (RefCOCO, RefCOCO+,
    RefCOCOg in the refer layout).
"""

from __future__ import annotations

import dataclasses
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["RefDataset", "from_shapes_world", "load_refer"]


@dataclass
class RefDataset:
    """Scenes with candidate boxes and referring expressions.

    Attributes:
        images: (S, 3, H, W) float in [0, 1].
        boxes: (S, n, 4) XYXY pixel boxes, padded with zeros.
        box_mask: (S, n) True for real candidates.
        refs: (scene, candidate index, expression) triplets.
        object_ids: per scene, the source id of each candidate (shapes-world object id or COCO ann id).
        rendered: shapes-world scenes (for the oracle listener), or None for files.
        image_ids: per scene, the source image id.
    """

    images: Tensor
    boxes: Tensor
    box_mask: Tensor
    refs: list[tuple[int, int, str]]
    object_ids: list[list[int]]
    rendered: list[Any] | None = None
    image_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        S = len(self.images)
        if self.boxes.shape[:1] != (S,) or self.box_mask.shape[:1] != (S,):
            raise ValueError("images, boxes and box_mask need one row per scene")
        for s, k, _ in self.refs:
            if not (0 <= s < S and 0 <= k < self.boxes.shape[1] and bool(self.box_mask[s, k])):
                raise ValueError(f"ref ({s}, {k}) names no real candidate")
        if not self.image_ids:
            self.image_ids = list(range(S))

    def __len__(self) -> int:
        return len(self.refs)

    def rows(self) -> Tensor:
        """(N, 2) long: scene index, target candidate index of every ref."""
        return torch.tensor([(s, k) for s, k, _ in self.refs], dtype=torch.long).reshape(-1, 2)

    def sentences(self) -> list[str]:
        """The expressions of every ref."""
        return [e for _, _, e in self.refs]

    def targets(self) -> list[tuple[int, int]]:
        """Every real (scene, candidate) pair once."""
        return [
            (s, k) for s in range(len(self.images)) for k in range(self.boxes.shape[1]) if self.box_mask[s, k]
        ]

    def with_refs(self, refs: Sequence[tuple[int, int, str]]) -> RefDataset:
        """The same scenes with another list of refs."""
        return dataclasses.replace(self, refs=list(refs))


def _pad_boxes(per_scene: Sequence[np.ndarray]) -> tuple[Tensor, Tensor]:
    n = max((len(b) for b in per_scene), default=1)
    boxes = torch.zeros(len(per_scene), max(n, 1), 4)
    mask = torch.zeros(len(per_scene), max(n, 1), dtype=torch.bool)
    for s, b in enumerate(per_scene):
        boxes[s, : len(b)] = torch.as_tensor(np.asarray(b, dtype=np.float32))
        mask[s, : len(b)] = True
    return boxes, mask


def from_shapes_world(world: Any, indices: Sequence[int], *, split: str, forms: str = "train") -> RefDataset:
    """Referring scenes ``indices`` of a :class:`ShapesWorld` split (visible objects are candidates).

    Each scene contributes the world's one expression per describable object.
    """
    images, per_scene, refs, ids, rendered = [], [], [], [], []
    for s, i in enumerate(indices):
        ref = world.referring(int(i), split=split, forms=forms)
        r = ref.rendered
        all_boxes = r.boxes()
        visible = [k for k in range(len(r.objects)) if all_boxes[k, 2] > all_boxes[k, 0]]
        cand_ids = [r.objects[k].id for k in visible]
        images.append(torch.from_numpy(r.image).permute(2, 0, 1).float() / 255.0)
        per_scene.append(all_boxes[visible])
        ids.append(cand_ids)
        rendered.append(r)
        for obj_id, text in ref.expressions:
            if obj_id in cand_ids:
                refs.append((s, cand_ids.index(obj_id), text))
    boxes, mask = _pad_boxes(per_scene)
    return RefDataset(torch.stack(images), boxes, mask, refs, ids, rendered, [int(i) for i in indices])


def load_refer(
    refs_path: str | Path,
    instances_path: str | Path,
    image_root: str | Path,
    *,
    split: str | None = None,
    image_size: int | None = None,
) -> RefDataset:
    """Load refer-format annotations from local files (RefCOCO / RefCOCO+ / RefCOCOg layout).

    Args:
        refs_path: ``refs(unc).p`` pickle or a JSON list of refs (``image_id``, ``ann_id``, ``split``,
            ``sentences`` with ``sent``).
        instances_path: COCO ``instances.json`` (``images`` with ``file_name``, ``annotations``
            with ``bbox`` [x, y, w, h]).
        image_root: folder of the images.
        split: keep only refs of this split (e.g. "train", "testA").
        image_size: resize images (and boxes) to this square size; None keeps the size (then all
            images must share one size to stack).

    Returns:
        A :class:`RefDataset` whose candidates are every annotation of each referred image.
    """
    from PIL import Image

    refs_path, instances_path, image_root = Path(refs_path), Path(instances_path), Path(image_root)
    for p in (refs_path, instances_path, image_root):
        if not p.exists():
            raise ValueError(f"{p} does not exist")
    if refs_path.suffix in (".p", ".pkl", ".pickle"):
        with refs_path.open("rb") as fh:
            raw_refs = pickle.load(fh)
    else:
        raw_refs = json.loads(refs_path.read_text())
    inst = json.loads(instances_path.read_text())
    files = {im["id"]: im["file_name"] for im in inst["images"]}
    anns_of: dict[int, list[dict[str, Any]]] = {}
    for ann in inst["annotations"]:
        anns_of.setdefault(ann["image_id"], []).append(ann)
    chosen = [r for r in raw_refs if split is None or r.get("split") == split]
    if not chosen:
        raise ValueError(f"no refs of split {split!r} in {refs_path}")
    image_ids = sorted({r["image_id"] for r in chosen})
    images, per_scene, ids = [], [], []
    for iid in image_ids:
        img = Image.open(image_root / files[iid]).convert("RGB")
        w0, h0 = img.size
        sx = sy = 1.0
        if image_size is not None:
            img = img.resize((image_size, image_size), Image.BILINEAR)
            sx, sy = image_size / w0, image_size / h0
        images.append(torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float() / 255.0)
        anns = anns_of.get(iid, [])
        per_scene.append(
            np.array(
                [[a["bbox"][0] * sx, a["bbox"][1] * sy, (a["bbox"][0] + a["bbox"][2]) * sx,
                  (a["bbox"][1] + a["bbox"][3]) * sy] for a in anns], dtype=np.float32,
            ).reshape(-1, 4)
        )  # fmt: skip
        ids.append([int(a["id"]) for a in anns])
    scene_of = {iid: s for s, iid in enumerate(image_ids)}
    refs = [
        (scene_of[r["image_id"]], ids[scene_of[r["image_id"]]].index(int(r["ann_id"])), sent["sent"])
        for r in chosen
        for sent in r["sentences"]
    ]
    boxes, mask = _pad_boxes(per_scene)
    return RefDataset(torch.stack(images), boxes, mask, refs, ids, None, image_ids)
