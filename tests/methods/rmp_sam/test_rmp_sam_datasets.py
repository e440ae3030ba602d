"""COCO-Panoptic and YouTube-VIS loaders on tiny stand-ins written in the real file formats."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from pycocotools import mask as mask_utils

from iclr25.methods.rmp_sam import COCOInstances, COCOPanoptic, YouTubeVIS, panoptic_targets, rgb_to_id

pytestmark = pytest.mark.usefixtures("one_thread")


def _id_to_rgb(ids: np.ndarray) -> np.ndarray:
    return np.stack([ids % 256, ids // 256 % 256, ids // 65536], -1).astype(np.uint8)


def _write_panoptic(root: Path) -> tuple[np.ndarray, np.ndarray]:
    """Two 6x8 images; segment ids above 255 so all three PNG channels matter."""
    (root / "val").mkdir()
    (root / "annotations" / "panoptic_val").mkdir(parents=True)
    cats = [
        {"id": 1, "name": "person", "isthing": 1, "supercategory": "person", "color": [0, 0, 0]},
        {"id": 3, "name": "car", "isthing": 1, "supercategory": "vehicle", "color": [0, 0, 0]},
        {"id": 2, "name": "sky", "isthing": 0, "supercategory": "sky", "color": [0, 0, 0]},
    ]
    ids = np.zeros((6, 8), dtype=np.int64)
    ids[:2] = 70000  # sky (stuff)
    ids[3:5, 1:3] = 300  # person
    ids[3:6, 5:8] = 5  # car
    ids[5, 0] = 6  # a crowd car: void in the target
    images, anns = [], []
    for k in range(2):
        img = np.full((6, 8, 3), 40 * k, dtype=np.uint8)
        img[..., 0] = np.arange(8) * 30
        Image.fromarray(img).save(root / "val" / f"{k:012d}.png")  # lossless stand-in for the JPEGs
        Image.fromarray(_id_to_rgb(ids)).save(root / "annotations" / "panoptic_val" / f"{k:012d}.png")
        images.append({"id": k, "file_name": f"{k:012d}.png", "height": 6, "width": 8})
        segs = [
            {"id": 70000, "category_id": 2, "iscrowd": 0, "area": 16, "bbox": [0, 0, 8, 2]},
            {"id": 300, "category_id": 1, "iscrowd": 0, "area": 4, "bbox": [1, 3, 2, 2]},
            {"id": 5, "category_id": 3, "iscrowd": 0, "area": 9, "bbox": [5, 3, 3, 3]},
            {"id": 6, "category_id": 3, "iscrowd": 1, "area": 1, "bbox": [0, 5, 1, 1]},
        ]
        anns.append({"image_id": k, "file_name": f"{k:012d}.png", "segments_info": segs})
    raw = {"images": images, "annotations": anns, "categories": cats}
    (root / "annotations" / "panoptic_val.json").write_text(json.dumps(raw))
    return ids, img


def test_rgb_to_id_uses_all_three_channels() -> None:
    ids = np.array([[0, 255, 256, 70000, 256**3 - 1]])
    assert rgb_to_id(_id_to_rgb(ids)).tolist() == ids.tolist()
    with pytest.raises(ValueError, match="RGB"):
        rgb_to_id(np.zeros((2, 2)))


def test_coco_panoptic_matches_the_shapes_world_targets(tmp_path: Path) -> None:
    ids, img = _write_panoptic(tmp_path)
    ds = COCOPanoptic(tmp_path / "val", tmp_path / "annotations" / "panoptic_val.json")
    assert len(ds) == 2 and ds.classes == ["person", "car", "sky"] and ds.num_things == 2
    image, target = ds[1]
    assert image.shape == (3, 6, 8) and image.dtype == torch.float32
    assert torch.allclose(image, torch.from_numpy(img).permute(2, 0, 1).float() / 255)
    # the same scene as semantic + instance maps through the shapes-world builder
    sem = np.full((6, 8), -1)
    sem[ids == 70000], sem[ids == 300], sem[ids == 5] = 2, 0, 1
    inst = np.zeros((6, 8), dtype=int)
    inst[ids == 300], inst[ids == 5] = 1, 2
    ref = panoptic_targets(sem, inst, 2)
    order = torch.argsort(target["labels"])
    assert target["labels"][order].tolist() == ref["labels"].tolist() == [0, 1, 2]
    assert torch.equal(target["masks"][order], ref["masks"])
    assert target["isthing"][order].tolist() == ref["isthing"].tolist() == [True, True, False]
    assert not target["masks"][:, 5, 0].any()  # the crowd pixel is void


def test_coco_panoptic_errors_name_the_missing_piece(tmp_path: Path) -> None:
    _write_panoptic(tmp_path)
    ann = tmp_path / "annotations" / "panoptic_val.json"
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        COCOPanoptic(tmp_path / "val", tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match="panoptic PNG folder"):
        COCOPanoptic(tmp_path / "val", ann, tmp_path / "missing")
    (tmp_path / "annotations" / "panoptic_val" / f"{0:012d}.png").unlink()
    ds = COCOPanoptic(tmp_path / "val", ann)
    with pytest.raises(FileNotFoundError, match=r"000000000000\.png"):
        ds[0]
    raw = json.loads(ann.read_text())
    del raw["categories"][0]["isthing"]
    ann.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"categories\[0\] lacks field\(s\) isthing"):
        COCOPanoptic(tmp_path / "val", ann)
    raw["categories"][0]["isthing"] = 1
    raw["annotations"][0]["segments_info"][0]["category_id"] = 99
    ann.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="unknown category_id 99"):
        COCOPanoptic(tmp_path / "val", ann)


def test_coco_instances_decode_polygons_and_rle_and_drop_crowds(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    for k in (10, 11):
        Image.fromarray(np.zeros((6, 8, 3), dtype=np.uint8)).save(tmp_path / "train" / f"{k}.png")
    blob = np.zeros((6, 8), dtype=np.uint8)
    blob[2:5, 4:7] = 1
    rle = mask_utils.encode(np.asfortranarray(blob))
    raw = {
        "images": [{"id": i, "file_name": f"{i}.png", "height": 6, "width": 8} for i in (10, 11)],
        "annotations": [
            {"id": 1, "image_id": 10, "category_id": 5, "iscrowd": 0,
             "segmentation": [[0.0, 0.0, 3.0, 0.0, 3.0, 2.0, 0.0, 2.0]]},
            {"id": 2, "image_id": 10, "category_id": 1, "iscrowd": 0,
             "segmentation": {"size": [6, 8], "counts": rle["counts"].decode()}},
            {"id": 3, "image_id": 10, "category_id": 1, "iscrowd": 1,
             "segmentation": {"size": [6, 8], "counts": [40, 8]}},
        ],
        "categories": [{"id": 1, "name": "person"}, {"id": 5, "name": "bus"}],
    }  # fmt: skip
    (tmp_path / "instances.json").write_text(json.dumps(raw))
    ds = COCOInstances(tmp_path / "train", tmp_path / "instances.json")
    assert len(ds) == 2 and ds.classes == ["person", "bus"]
    image, target = ds[0]
    assert image.shape == (3, 6, 8) and target["labels"].tolist() == [1, 0]
    assert target["isthing"].all() and torch.equal(target["masks"][1], torch.from_numpy(blob.astype(bool)))
    assert int(target["masks"][0].sum()) == 6  # the 3x2 polygon; the crowd annotation is no target
    assert ds[1][1]["masks"].shape == (0, 6, 8)  # an image without annotations
    raw["annotations"][0]["image_id"] = 99
    (tmp_path / "instances.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="image_id 99"):
        COCOInstances(tmp_path / "train", tmp_path / "instances.json")


def _write_ytvis(root: Path, *, compressed: bool) -> np.ndarray:
    """One 3-frame 6x8 video with a box track (RLE) and a triangle track (polygons, absent in frame 2)."""
    (root / "JPEGImages" / "vid0").mkdir(parents=True)
    names = [f"vid0/{t:05d}.png" for t in range(3)]
    for t, name in enumerate(names):
        Image.fromarray(np.full((6, 8, 3), 50 * t, dtype=np.uint8)).save(root / "JPEGImages" / name)
    box = np.zeros((3, 6, 8), dtype=bool)
    for t in range(3):
        box[t, 1:4, t : t + 3] = True
    segs = []
    for t in range(3):
        rle = mask_utils.encode(np.asfortranarray(box[t].astype(np.uint8)))
        if compressed:
            segs.append({"size": [6, 8], "counts": rle["counts"].decode()})
        else:  # uncompressed: run lengths in column-major order, starting with zeros
            flat = box[t].T.reshape(-1).astype(int)
            runs, cur, n = [], 0, 0
            for v in flat:
                if v != cur:
                    runs.append(n)
                    cur, n = v, 0
                n += 1
            runs.append(n)
            segs.append({"size": [6, 8], "counts": runs})
    poly = [[0.0, 5.0, 4.0, 5.0, 4.0, 6.0, 0.0, 6.0]]
    raw = {
        "videos": [{"id": 7, "file_names": names, "height": 6, "width": 8, "length": 3}],
        "annotations": [
            {"id": 1, "video_id": 7, "category_id": 4, "iscrowd": 0, "segmentations": segs},
            {"id": 2, "video_id": 7, "category_id": 2, "iscrowd": 0, "segmentations": [poly, poly, None]},
        ],
        "categories": [{"id": 2, "name": "cat"}, {"id": 4, "name": "dog"}],
    }
    (root / "train.json").write_text(json.dumps(raw))
    return box


@pytest.mark.parametrize("compressed", [False, True])
def test_youtube_vis_decodes_rle_and_polygons(tmp_path: Path, compressed: bool) -> None:
    box = _write_ytvis(tmp_path, compressed=compressed)
    ds = YouTubeVIS(tmp_path / "JPEGImages", tmp_path / "train.json")
    assert len(ds) == 1 and ds.classes == ["cat", "dog"]
    frames, target = ds[0]
    assert frames.shape == (3, 3, 6, 8) and float(frames[2].max()) == pytest.approx(100 / 255)
    assert target["labels"].tolist() == [1, 0] and target["masks"].shape == (2, 3, 6, 8)
    assert torch.equal(target["masks"][0], torch.from_numpy(box))
    poly = target["masks"][1]
    assert poly[0, 5, :4].all() and int(poly[0].sum()) == 4 and not poly[2].any()
    clip = YouTubeVIS(tmp_path / "JPEGImages", tmp_path / "train.json", clip=[2])
    f2, t2 = clip[0]
    assert f2.shape == (1, 3, 6, 8) and t2["labels"].tolist() == [1]  # the triangle is absent in frame 2


def test_youtube_vis_errors_name_the_problem(tmp_path: Path) -> None:
    _write_ytvis(tmp_path, compressed=True)
    ann = tmp_path / "train.json"
    with pytest.raises(FileNotFoundError, match="frame folder"):
        YouTubeVIS(tmp_path / "nope", ann)
    with pytest.raises(ValueError, match="reaches past"):
        YouTubeVIS(tmp_path / "JPEGImages", ann, clip=[3])[0]
    raw = json.loads(ann.read_text())
    raw["annotations"][1]["segmentations"] = raw["annotations"][1]["segmentations"][:2]
    ann.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"annotations\[1\] has 2 segmentations for 3 frames"):
        YouTubeVIS(tmp_path / "JPEGImages", ann)
    raw["annotations"][1]["segmentations"].append({"counts": "x"})
    ann.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="lacks field"):
        YouTubeVIS(tmp_path / "JPEGImages", ann)[0]
    (tmp_path / "JPEGImages" / "vid0" / "00001.png").unlink()
    raw["annotations"].pop()
    ann.write_text(json.dumps(raw))
    with pytest.raises(FileNotFoundError, match=r"00001\.png"):
        YouTubeVIS(tmp_path / "JPEGImages", ann)[0]
