"""REC data augmentation with generated expressions, and export in the refer (RefCOCO) layout.

For every (image, box) of a REC training set, a generator writes ``n_per_object`` expressions
(different noise seeds for VIE-DM) and the (image, expression, box) triplets are added to the set
(no filtering). :func:`export_refcoco` writes the augmented set as refer-style ``refs.json`` +
COCO ``instances.json`` + images, for external REC code (QRNet, TransVG, MDETR, SimREC).

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (REC augmentation).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from iclr25.methods.vie_dm.data import RefDataset

__all__ = ["augment_rec_dataset", "export_refcoco", "generate_for_targets", "reassign_to_other_object"]


class _Generator(Protocol):
    def generate_expressions(
        self, images: Tensor, boxes: Tensor, *, num_samples: int, generator: torch.Generator | None = ...
    ) -> list[list[str]]: ...


def generate_for_targets(
    model: _Generator,
    dataset: RefDataset,
    *,
    n_per_object: int,
    seed: int,
    targets: Sequence[tuple[int, int]] | None = None,
    batch_size: int = 256,
    device: torch.device | str | None = None,
) -> dict[tuple[int, int], list[str]]:
    """``n_per_object`` expressions for each (scene, candidate) in ``targets`` (default: every
    object that has a ref, in order of first appearance).

    The noise comes from a CPU generator seeded with ``seed``, so it is the same on every device;
    ``device`` is where each batch of images and boxes goes (the model's device; None
    leaves them where the dataset holds them)."""
    if n_per_object < 1:
        raise ValueError(f"n_per_object must be >= 1, got {n_per_object}")
    gen = torch.Generator().manual_seed(seed)
    targets = list(dict.fromkeys((s, k) for s, k, _ in dataset.refs)) if targets is None else list(targets)
    out: dict[tuple[int, int], list[str]] = {}
    for start in range(0, len(targets), batch_size):
        chunk = targets[start : start + batch_size]
        s = torch.tensor([a for a, _ in chunk])
        k = torch.tensor([b for _, b in chunk])
        images, boxes = dataset.images[s], dataset.boxes[s, k]
        if device is not None:
            images, boxes = images.to(device), boxes.to(device)
        texts = model.generate_expressions(images, boxes, num_samples=n_per_object, generator=gen)
        out.update(zip(chunk, texts, strict=True))
    return out


def reassign_to_other_object(
    generated: dict[tuple[int, int], list[str]], dataset: RefDataset, *, seed: int
) -> dict[tuple[int, int], list[str]]:
    """Negative control: each target gets the expressions generated for a random *other* target
    of its scene (targets alone in their scene are dropped)."""
    del dataset  # the scenes are implied by the keys
    rng = np.random.default_rng(seed)
    by_scene: dict[int, list[int]] = {}
    for s, k in generated:
        by_scene.setdefault(s, []).append(k)
    out = {}
    for s, k in generated:
        others = [j for j in by_scene[s] if j != k]
        if others:
            out[(s, k)] = generated[(s, int(rng.choice(others)))]
    return out


def augment_rec_dataset(
    dataset: RefDataset,
    model: _Generator | None = None,
    *,
    n_per_object: int = 5,
    seed: int = 0,
    generated: dict[tuple[int, int], list[str]] | None = None,
    device: torch.device | str | None = None,
) -> RefDataset:
    """The dataset plus ``n_per_object`` generated expressions per object (no filtering).

    Args:
        dataset: the real REC training set.
        model: anything with ``generate_expressions(images, boxes, num_samples=, generator=)``.
        n_per_object: expressions added per object.
        seed: seed of the generation noise.
        generated: precomputed expressions per (scene, candidate) instead of ``model``.
        device: the model's device, where the scenes go for generation (None: where they are).

    Returns:
        A new :class:`RefDataset` (same scenes; the real refs first, then the generated ones).
    """
    if generated is None:
        if model is None:
            raise ValueError("give a model or precomputed generated expressions")
        generated = generate_for_targets(model, dataset, n_per_object=n_per_object, seed=seed, device=device)
    extra = [(s, k, e) for (s, k), texts in generated.items() for e in texts[:n_per_object] if e.strip()]
    return dataset.with_refs([*dataset.refs, *extra])


def export_refcoco(dataset: RefDataset, path: str | Path, *, split: str = "train") -> tuple[Path, Path]:
    """Write ``images/``, refer-style ``refs.json`` (one ref per expression: ``ref_id``, ``ann_id``,
    ``image_id``, ``split``, ``sentences``) and COCO ``instances.json`` (``bbox`` [x, y, w, h])."""
    from PIL import Image

    root = Path(path)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, anns, ann_id = [], [], {}
    for s in range(len(dataset.images)):
        iid = int(dataset.image_ids[s])
        name = f"{iid:012d}.png"
        arr = (dataset.images[s].permute(1, 2, 0).clamp(0, 1) * 255).round().byte().cpu().numpy()
        Image.fromarray(arr).save(root / "images" / name)
        images.append({"id": iid, "file_name": name, "height": arr.shape[0], "width": arr.shape[1]})
        for k in range(dataset.boxes.shape[1]):
            if not dataset.box_mask[s, k]:
                continue
            x1, y1, x2, y2 = (float(v) for v in dataset.boxes[s, k])
            aid = int(dataset.object_ids[s][k]) if dataset.rendered is None else len(anns) + 1
            ann_id[(s, k)] = aid
            anns.append({"id": aid, "image_id": iid, "category_id": 1, "bbox": [x1, y1, x2 - x1, y2 - y1],
                         "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})  # fmt: skip
    refs: list[dict[str, Any]] = []
    for s, k, sent in dataset.refs:
        refs.append({
            "ref_id": len(refs), "ann_id": ann_id[(s, k)], "image_id": int(dataset.image_ids[s]),
            "category_id": 1, "split": split, "file_name": images[s]["file_name"],
            "sentences": [{"sent": sent, "raw": sent, "tokens": sent.split(), "sent_id": len(refs)}],
        })  # fmt: skip
    refs_path, inst_path = root / "refs.json", root / "instances.json"
    refs_path.write_text(json.dumps(refs))
    cats = [{"id": 1, "name": "object", "supercategory": "object"}]
    inst_path.write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
    return refs_path, inst_path
