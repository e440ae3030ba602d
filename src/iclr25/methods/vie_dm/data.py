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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

__all__ = ["RefDataset", "ReferImages", "from_shapes_world", "load_refer"]


@dataclass
class RefDataset:
    """Scenes with candidate boxes and referring expressions.

    Attributes:
        images: (S, 3, H, W) float in [0, 1], or a :class:`ReferImages` that reads each scene
            from disk when indexed (refer files).
        boxes: (S, n, 4) XYXY pixel boxes, padded with zeros.
        box_mask: (S, n) True for real candidates.
        refs: (scene, candidate index, expression) triplets.
        object_ids: per scene, the source id of each candidate (shapes-world object id or COCO ann id).
        rendered: shapes-world scenes (for the oracle listener), or None for files.
        image_ids: per scene, the source image id.
    """

    images: Tensor | ReferImages
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

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Ref ``index`` as ``{"image" (3, H, W), "boxes" (n, 4), "box_mask" (n,), "target",
        "sentence", "scene"}`` (a map-style dataset over refs; the image is read on access)."""
        s, k, sentence = self.refs[index]
        return {
            "image": self.images[s],
            "boxes": self.boxes[s],
            "box_mask": self.box_mask[s],
            "target": k,
            "sentence": sentence,
            "scene": s,
        }

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


class ReferImages(Dataset):
    """The scenes of a refer-format set, read from disk one image at a time.

    A map-style dataset of ``(3, H, W)`` float images in [0, 1] that also stands in for the
    ``(S, 3, H, W)`` tensor :class:`RefDataset` holds for the shapes world: an integer index
    reads one image; a slice, a list or a tensor of indices reads and stacks those images
    (all must share one size, e.g. with ``image_size``); ``shape`` is known without reading.
    A torch function given the whole object (``torch.allclose(images, x)``, ``encoder(images)``)
    reads every image into one tensor first, which is what those calls ask for; at RefCOCO
    scale (about 20k images) index batches instead.

    Args:
        paths: image file of each scene.
        sizes: ``(width, height)`` of each image on disk (checked when read).
        image_size: resize to this square size; None keeps each image's size.
    """

    def __init__(
        self, paths: Sequence[Path], sizes: Sequence[tuple[int, int]], image_size: int | None = None
    ) -> None:
        if len(paths) != len(sizes):
            raise ValueError(f"{len(paths)} paths but {len(sizes)} sizes")
        self.paths, self.sizes, self.image_size = list(paths), [tuple(s) for s in sizes], image_size

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def shape(self) -> torch.Size:
        """(S, 3, H, W); raises ValueError if the images differ in size and are not resized."""
        if self.image_size is not None:
            return torch.Size((len(self), 3, self.image_size, self.image_size))
        distinct = set(self.sizes)
        if len(distinct) > 1:
            raise ValueError(
                f"images have {len(distinct)} different sizes; load with image_size to stack them"
            )
        w, h = distinct.pop() if distinct else (0, 0)
        return torch.Size((len(self), 3, h, w))

    dtype = torch.float32
    device = torch.device("cpu")

    def read(self, index: int) -> Tensor:
        """Image ``index`` as (3, H, W) float in [0, 1]."""
        from PIL import Image

        path = self.paths[index]
        if not path.is_file():
            raise FileNotFoundError(f"image {path} not found")
        with Image.open(path) as img:
            if img.size != self.sizes[index]:
                raise ValueError(f"image {path} is {img.size[0]}x{img.size[1]}, instances.json says "
                                 f"{self.sizes[index][0]}x{self.sizes[index][1]}")  # fmt: skip
            img = img.convert("RGB")
            if self.image_size is not None:
                img = img.resize((self.image_size, self.image_size), Image.BILINEAR)
            arr = np.asarray(img).copy()
        return torch.from_numpy(arr).permute(2, 0, 1).float() / 255.0

    def __getitem__(self, index: int | slice | Sequence[int] | Tensor) -> Tensor:
        if isinstance(index, Tensor) and index.ndim == 0:
            index = int(index)
        if isinstance(index, (int, np.integer)):
            n = len(self)
            if not -n <= index < n:
                raise IndexError(f"image index {index} out of range for {n} images")
            return self.read(int(index) % n)
        if isinstance(index, slice):
            picks = list(range(len(self)))[index]
        elif isinstance(index, Tensor) and index.dtype == torch.bool:
            picks = torch.nonzero(index).flatten().tolist()
        else:
            picks = [int(i) for i in (index.tolist() if isinstance(index, Tensor) else index)]
        if not picks:
            _, c, h, w = self.shape
            return torch.zeros(0, c, h, w)
        return torch.stack([self[i] for i in picks])

    def __iter__(self) -> Iterator[Tensor]:
        return (self.read(i) for i in range(len(self)))

    def take(self, index: Sequence[int] | Tensor) -> ReferImages:
        """A lazy view with one entry per index (e.g. one image per ref row), reading nothing."""
        picks = [int(i) for i in (index.tolist() if isinstance(index, Tensor) else index)]
        return ReferImages([self.paths[i] for i in picks], [self.sizes[i] for i in picks], self.image_size)

    def materialize(self) -> Tensor:
        """Every image as one (S, 3, H, W) tensor (reads them all)."""
        return self[:]

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # a torch op on the whole set reads it (see the class docstring)
        def real(a: Any) -> Any:
            if isinstance(a, ReferImages):
                return a.materialize()
            if isinstance(a, (list, tuple)):
                return type(a)(real(x) for x in a)
            return a

        return func(*real(tuple(args)), **{k: real(v) for k, v in (kwargs or {}).items()})


def _field(record: Any, key: str, where: str) -> Any:
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f"{where} lacks field {key!r}")
    return record[key]


def load_refer(
    refs_path: str | Path,
    instances_path: str | Path,
    image_root: str | Path,
    *,
    split: str | None = None,
    image_size: int | None = None,
) -> RefDataset:
    """Load refer-format annotations from local files (RefCOCO / RefCOCO+ / RefCOCOg layout).

    Images are not read here: the returned dataset's ``images`` is a :class:`ReferImages` that
    reads each image when indexed, so memory stays at the annotations' size.

    Args:
        refs_path: ``refs(unc).p`` pickle or a JSON list of refs (``image_id``, ``ann_id``, ``split``,
            ``sentences`` with ``sent``).
        instances_path: COCO ``instances.json`` (``images`` with ``id``, ``file_name`` and
            ``width``/``height``, ``annotations`` with ``id``, ``image_id``, ``bbox`` [x, y, w, h]).
        image_root: folder of the images.
        split: keep only refs of this split (e.g. "train", "testA").
        image_size: resize images (and boxes) to this square size; None keeps the size (then
            batches stack only if the images share one size).

    Returns:
        A :class:`RefDataset` whose candidates are every annotation of each referred image.

    Raises:
        FileNotFoundError: a file or the image folder does not exist (an image: when read).
        ValueError: a record lacks a field, no ref has ``split``, or a ref names an image or an
            annotation that ``instances.json`` does not have.
    """
    from PIL import Image

    refs_path, instances_path, image_root = Path(refs_path), Path(instances_path), Path(image_root)
    for p in (refs_path, instances_path, image_root):
        if not p.exists():
            raise FileNotFoundError(f"{p} does not exist")
    if refs_path.suffix in (".p", ".pkl", ".pickle"):
        with refs_path.open("rb") as fh:
            raw_refs = pickle.load(fh)
    else:
        raw_refs = json.loads(refs_path.read_text())
    inst = json.loads(instances_path.read_text())
    for key in ("images", "annotations"):
        _field(inst, key, str(instances_path))
    records = {_field(im, "id", "instances images entry"): im for im in inst["images"]}
    anns_of: dict[int, list[dict[str, Any]]] = {}
    for ann in inst["annotations"]:
        for key in ("id", "bbox"):
            _field(ann, key, "instances annotation")
        anns_of.setdefault(_field(ann, "image_id", "instances annotation"), []).append(ann)
    if not isinstance(raw_refs, list):
        raise ValueError(f"{refs_path} must hold a list of refs, got {type(raw_refs).__name__}")
    chosen = [r for r in raw_refs if split is None or r.get("split") == split]
    if not chosen:
        raise ValueError(f"no refs of split {split!r} in {refs_path}")
    for r in chosen:
        for key in ("image_id", "ann_id", "sentences"):
            _field(r, key, f"ref {r.get('ref_id', '?')}")
        if r["image_id"] not in records:
            raise ValueError(
                f"ref {r.get('ref_id', '?')} names image {r['image_id']}, not in {instances_path}"
            )
    image_ids = sorted({r["image_id"] for r in chosen})
    paths, sizes, per_scene, ids = [], [], [], []
    for iid in image_ids:
        rec = records[iid]
        path = image_root / _field(rec, "file_name", f"instances image {iid}")
        if "width" in rec and "height" in rec:
            w0, h0 = int(rec["width"]), int(rec["height"])
        else:  # header only: PIL decodes pixels lazily
            if not path.is_file():
                raise FileNotFoundError(f"image {path} not found")
            with Image.open(path) as img:
                w0, h0 = img.size
        paths.append(path)
        sizes.append((w0, h0))
        sx = sy = 1.0
        if image_size is not None:
            sx, sy = image_size / w0, image_size / h0
        anns = anns_of.get(iid, [])
        per_scene.append(
            np.array(
                [[a["bbox"][0] * sx, a["bbox"][1] * sy, (a["bbox"][0] + a["bbox"][2]) * sx,
                  (a["bbox"][1] + a["bbox"][3]) * sy] for a in anns], dtype=np.float32,
            ).reshape(-1, 4)
        )  # fmt: skip
        ids.append([int(a["id"]) for a in anns])
    scene_of = {iid: s for s, iid in enumerate(image_ids)}
    refs = []
    for r in chosen:
        s = scene_of[r["image_id"]]
        if int(r["ann_id"]) not in ids[s]:
            raise ValueError(
                f"ref {r.get('ref_id', '?')} names annotation {r['ann_id']}, not on image {r['image_id']}"
            )
        k = ids[s].index(int(r["ann_id"]))
        refs.extend(
            (s, k, _field(sent, "sent", f"ref {r.get('ref_id', '?')} sentence")) for sent in r["sentences"]
        )
    boxes, mask = _pad_boxes(per_scene)
    return RefDataset(ReferImages(paths, sizes, image_size), boxes, mask, refs, ids, None, image_ids)
