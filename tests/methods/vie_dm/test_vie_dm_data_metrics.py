"""Shapes-world data, refer-format export and loading, augmentation, and the REG metrics."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from iclr25.common.data.shapes_world import OracleListener, ShapesWorld, WorldConfig
from iclr25.methods.vie_dm import (
    ReferImages,
    augment_rec_dataset,
    bleu,
    cider,
    distinct_n,
    export_refcoco,
    from_shapes_world,
    generate_for_targets,
    load_refer,
    oracle_accuracy,
    reassign_to_other_object,
    self_bleu,
)


@pytest.fixture(scope="module")
def small():
    world = ShapesWorld(WorldConfig(image_size=48, n_objects=(3, 5)), seed=3)
    return world, from_shapes_world(world, range(6), split="train")


def test_shapes_dataset_shapes_and_refs(small, one_thread) -> None:
    _, data = small
    assert data.images.shape == (6, 3, 48, 48) and data.boxes.shape[0] == 6
    assert len(data) >= 6 and data.rows().shape == (len(data), 2)
    for s, k, _ in data.refs:
        assert bool(data.box_mask[s, k])


def test_oracle_accuracy_of_grammar_is_one_and_of_shuffled_tokens_near_zero(small, one_thread) -> None:
    world, data = small
    oracle = OracleListener(world.config)
    assert data.rendered is not None
    scenes = [data.rendered[s] for s, _, _ in data.refs]
    targets = [data.object_ids[s][k] for s, k, _ in data.refs]
    assert oracle_accuracy(data.sentences(), scenes, targets, oracle) == 1.0
    gen = torch.Generator().manual_seed(0)
    shuffled = []
    for e in data.sentences():
        words = e.split()
        perm = torch.randperm(len(words), generator=gen).tolist()
        shuffled.append(" ".join(words[i] for i in perm) if len(words) > 1 else "of")
    reversed_words = [" ".join(reversed(e.split())) + " the" for e in data.sentences()]
    assert oracle_accuracy(reversed_words, scenes, targets, oracle) == 0.0
    assert oracle_accuracy(shuffled, scenes, targets, oracle) <= 0.5


def test_distinct_n_and_self_bleu_by_hand(one_thread) -> None:
    assert distinct_n(["a b c", "a b d"], 2) == pytest.approx(3 / 4)
    assert distinct_n(["a b", "a b"], 2) == 0.5 and distinct_n(["a"], 2) == 0.0
    assert distinct_n(["a b a b"], 1) == 0.5
    assert self_bleu(["the red circle", "the red circle"]) == pytest.approx(100.0)
    assert self_bleu(["red circle", "blue square"]) < 10.0
    assert self_bleu(["one"]) != self_bleu(["one"])  # NaN for a single sample


def test_cider_and_bleu_without_java(one_thread) -> None:
    gts = {
        0: ["the red circle", "red disc"],
        1: ["the blue box", "blue square"],
        2: ["big star", "the large star"],
    }
    same = {0: ["the red circle"], 1: ["the blue box"], 2: ["big star"]}
    wrong = {0: ["blue box"], 1: ["red circle"], 2: ["the small disc"]}
    assert cider(gts, same) > cider(gts, wrong) and cider(gts, wrong) == pytest.approx(0.0, abs=1e-6)
    assert bleu(gts, same, n=2) > 0.9
    with pytest.raises(ValueError):
        cider(gts, {0: ["a", "b"], 1: ["c"], 2: ["d"]})


def test_export_refcoco_round_trip_and_schema(small, tmp_path: Path, one_thread) -> None:
    _, data = small
    refs_path, inst_path = export_refcoco(data, tmp_path)
    refs, inst = json.loads(refs_path.read_text()), json.loads(inst_path.read_text())
    assert {"ref_id", "ann_id", "image_id", "split", "sentences", "category_id"} <= set(refs[0])
    assert {"sent", "tokens", "sent_id"} <= set(refs[0]["sentences"][0])
    assert {"images", "annotations", "categories"} <= set(inst) and len(inst["annotations"][0]["bbox"]) == 4
    back = load_refer(refs_path, inst_path, tmp_path / "images")
    assert back.sentences() == data.sentences()
    assert torch.allclose(back.images, data.images, atol=1 / 255)
    for (s, k, _), (s2, k2, _) in zip(data.refs, back.refs, strict=True):
        assert torch.equal(back.boxes[s2, k2], data.boxes[s, k])
    assert len(load_refer(refs_path, inst_path, tmp_path / "images", split="train")) == len(data)
    with pytest.raises(ValueError, match="no refs"):
        load_refer(refs_path, inst_path, tmp_path / "images", split="val")
    with pytest.raises(FileNotFoundError, match=r"nope\.json does not exist"):
        load_refer(tmp_path / "nope.json", inst_path, tmp_path)


def test_load_refer_streams_images_and_names_bad_records(small, tmp_path: Path, one_thread) -> None:
    _, data = small
    refs_path, inst_path = export_refcoco(data, tmp_path)
    unc = tmp_path / "refs(unc).p"  # the released refs are a pickled list of the same dicts
    unc.write_bytes(pickle.dumps(json.loads(refs_path.read_text())))
    back = load_refer(unc, inst_path, tmp_path / "images", image_size=24)
    assert isinstance(back.images, ReferImages) and back.images.shape == (6, 3, 24, 24)
    name = json.loads(inst_path.read_text())["images"][1]["file_name"]
    (tmp_path / "images" / name).rename(tmp_path / "moved.png")  # nothing was read at load time
    first = back.images[0]
    assert first.shape == (3, 24, 24) and first.dtype == torch.float32
    assert torch.equal(back.images[torch.tensor([0, 0])], torch.stack([first, first]))
    rows = back.images.take(back.rows()[:, 0])  # one lazy image per ref, for train_viedm
    assert len(rows) == len(back) and torch.equal(rows[0], first)
    item = back[0]
    assert item["sentence"] == back.sentences()[0] and bool(item["box_mask"][item["target"]])
    s0, k0, _ = data.refs[0]
    assert torch.allclose(back.boxes[s0, k0], data.boxes[s0, k0] / 2)  # 48 -> 24 px
    with pytest.raises(FileNotFoundError, match=name):
        back.images[1]
    refs = json.loads(refs_path.read_text())
    refs[0]["ann_id"] = 10**6
    refs_path.write_text(json.dumps(refs))
    with pytest.raises(ValueError, match="names annotation 1000000"):
        load_refer(refs_path, inst_path, tmp_path / "images")
    del refs[0]["sentences"]
    refs_path.write_text(json.dumps(refs))
    with pytest.raises(ValueError, match="lacks field 'sentences'"):
        load_refer(refs_path, inst_path, tmp_path / "images")


class _Echo:
    """A fake generator: writes "thing <scene-box x1>" so reassignment is visible."""

    def generate_expressions(self, images, boxes, *, num_samples, generator=None):
        return [[f"x{int(b[0])}"] * num_samples for b in boxes]


def test_augmentation_adds_n_per_object_and_the_control_moves_them(small, one_thread) -> None:
    _, data = small
    gen = generate_for_targets(_Echo(), data, n_per_object=2, seed=0)
    aug = augment_rec_dataset(data, n_per_object=2, generated=gen)
    assert len(aug) == len(data) + 2 * len(gen) and aug.refs[: len(data)] == data.refs
    other = reassign_to_other_object(gen, data, seed=0)
    for (s, k), texts in other.items():
        assert texts != [f"x{int(data.boxes[s, k, 0])}"] * 2 or any(
            int(data.boxes[s, j, 0]) == int(data.boxes[s, k, 0]) for j in range(data.boxes.shape[1]) if j != k
        )
    with pytest.raises(ValueError, match="n_per_object"):
        generate_for_targets(_Echo(), data, n_per_object=0, seed=0)
    with pytest.raises(ValueError, match="model"):
        augment_rec_dataset(data)
