"""Tests of the shapes world: determinism, rasteriser, masks, clicks, videos, language, exports."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from iclr25.common.data.shapes_world import (
    GENERATOR_VERSION,
    NO_MATCH,
    DistractorConfig,
    OracleListener,
    ShapesClassification,
    ShapesPanoptic,
    ShapesWorld,
    VideoConfig,
    WorldConfig,
    caption,
    center_click,
    clicks,
    coverage,
    mask_to_box,
    next_click,
    read_coco_panoptic_png,
    texture_images,
    to_torchmetrics_panoptic,
    vocabulary,
    write_coco_panoptic,
    write_imagefolder,
    write_refer,
    write_ytvis,
)
from iclr25.common.data.shapes_world.language import Description, Landmark, extreme_of, relation_holds
from iclr25.common.data.shapes_world.raster import POLYGONS, inside
from iclr25.common.data.shapes_world.scene import object_layer
from iclr25.common.data.shapes_world.video import reflect
from iclr25.common.data.shapes_world.vocab import COLORS, SHAPES, STYLES, SYNONYMS, TEMPLATES

ALL_STYLES = WorldConfig(styles=STYLES, distractor=DistractorConfig(p=0.3))


def _digest(world: ShapesWorld) -> str:
    h = hashlib.sha256()
    X, y = world.classification_arrays(8, split="train")
    h.update(X.tobytes())
    h.update(y.tobytes())
    for i in range(3):
        r = world.panoptic(i)
        h.update(r.image.tobytes())
        h.update(r.instance.tobytes())
    return h.hexdigest()


# ----- determinism --------------------------------------------------------------------------------
#: SHA-256 of a small fixed batch; tied to GENERATOR_VERSION (bump both when rendered output changes).
GOLDEN = {"1": "dcdda42799720eb592b29ac2dd9e52e1c8c972211630038695b760c56ff53a86"}


def test_same_seed_same_bytes_in_any_order() -> None:
    world = ShapesWorld(ALL_STYLES, seed=3)
    forward = [world.panoptic(i).image for i in range(5)]
    backward = [world.panoptic(i).image for i in reversed(range(5))][::-1]
    assert all(np.array_equal(a, b) for a, b in zip(forward, backward, strict=True))
    X1, _ = world.classification_arrays(4, split="val")
    X2 = np.stack([world.single_object(i, split="val")[0] for i in range(4)])
    assert np.array_equal(X1, X2)


def test_same_bytes_in_another_process() -> None:
    code = (
        "from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig;"
        "import hashlib;w=ShapesWorld(WorldConfig(), seed=5);"
        "print(hashlib.sha256(w.panoptic(2).image.tobytes()).hexdigest())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == hashlib.sha256(ShapesWorld(WorldConfig(), seed=5).panoptic(2).image.tobytes()).hexdigest()


def test_golden_digest_is_tied_to_the_generator_version() -> None:
    digest = _digest(ShapesWorld(WorldConfig(), seed=0))
    assert GENERATOR_VERSION in GOLDEN, "rendered output changed: bump GENERATOR_VERSION and add its digest"
    assert digest == GOLDEN[GENERATOR_VERSION]


def test_batch_arrays_equal_the_items_for_any_number_of_workers() -> None:
    world = ShapesWorld(ALL_STYLES, seed=2)
    one = world.panoptic_arrays(6, split="val", start=3)
    two = world.panoptic_arrays(6, split="val", start=3, workers=2)
    for k in range(6):
        r = world.panoptic(3 + k, split="val")
        assert np.array_equal(one[0][k], r.image) and np.array_equal(one[2][k], r.instance)
        assert np.array_equal(one[1][k], r.semantic)
    assert all(np.array_equal(a, b) for a, b in zip(one, two, strict=True))
    X1, y1 = world.classification_arrays(5, workers=2)
    X2, y2 = world.classification_arrays(5)
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    with pytest.raises(ValueError, match="workers"):
        world.panoptic_arrays(4, workers=0)
    with pytest.raises(ValueError, match="label scheme"):
        world.classification_arrays(4, label_scheme="hue")


def test_seeds_and_splits_differ() -> None:
    a = ShapesWorld(WorldConfig(image_size=16), seed=0)
    b = ShapesWorld(WorldConfig(image_size=16), seed=1)
    assert not np.array_equal(a.single_object(0)[0], b.single_object(0)[0])
    train = {a.single_object(i, split="train")[0].tobytes() for i in range(1000)}
    test = {a.single_object(i, split="test")[0].tobytes() for i in range(1000)}
    assert not train & test


# ----- rasteriser ---------------------------------------------------------------------------------
def test_circle_area_within_two_percent() -> None:
    for r in (5.0, 9.5, 14.0):
        cov = coverage("circle", (32.3, 31.7), r, 64)
        assert abs(cov.sum() - np.pi * r * r) / (np.pi * r * r) < 0.02
        assert cov.min() >= 0.0 and cov.max() <= 1.0


def test_square_area_is_exact_on_the_grid() -> None:
    assert coverage("square", (10.0, 12.0), 4.0, 32).sum() == 64.0


@pytest.mark.parametrize("shape", sorted(POLYGONS))
def test_polygons_equal_a_brute_force_point_in_polygon(shape: str) -> None:
    verts = POLYGONS[shape].tolist()
    pts = np.linspace(-1.1, 1.1, 23)

    def brute(x: float, y: float) -> bool:
        hit = False
        for k in range(len(verts)):
            (x1, y1), (x2, y2) = verts[k], verts[(k + 1) % len(verts)]
            if (y1 > y) != (y2 > y) and x < (x2 - x1) * (y - y1) / (y2 - y1) + x1:
                hit = not hit
        return hit

    u, v = np.meshgrid(pts, pts)
    got = inside(shape, u, v)
    want = np.array([[brute(float(x), float(y)) for x in pts] for y in pts])
    assert np.array_equal(got, want)
    # The row-and-column grid takes the scanline path; it must agree point for point, also on
    # coordinates that hit vertices exactly.
    grid = np.unique(np.concatenate([pts, POLYGONS[shape].ravel()]))
    assert np.array_equal(
        inside(shape, grid[None, :], grid[:, None]), inside(shape, *np.meshgrid(grid, grid))
    )


# ----- masks --------------------------------------------------------------------------------------
def test_masks_partition_the_image_and_agree() -> None:
    world = ShapesWorld(ALL_STYLES, seed=2)
    cfg = world.config
    for i in range(30):
        r = world.panoptic(i)
        n_things = len(cfg.shapes)
        # Every pixel has one category; instance ids are exactly the objects on things.
        assert set(np.unique(r.semantic)) <= set(range(n_things + 2))
        thing = r.semantic < n_things
        assert np.array_equal(thing, r.instance > 0)
        for obj in r.objects:
            m = r.mask(obj.id)
            assert (r.semantic[m] == cfg.shapes.index(obj.shape)).all()
            _, alpha, _, _ = object_layer(obj, cfg.image_size, cfg.supersample)
            area = int((alpha >= 0.5).sum())
            assert m.sum() >= cfg.min_visible_pixels and m.sum() >= cfg.min_visible_fraction * area


def test_boxes_match_torchvision_masks_to_boxes_plus_one() -> None:
    from torchvision.ops import masks_to_boxes

    r = ShapesWorld(WorldConfig(), seed=4).panoptic(1)
    masks = torch.stack([torch.from_numpy(r.mask(o.id)) for o in r.objects])
    tv = masks_to_boxes(masks)
    assert torch.equal(torch.from_numpy(r.boxes()), tv + torch.tensor([0.0, 0.0, 1.0, 1.0]))
    assert np.array_equal(mask_to_box(r.mask(r.objects[0].id)), r.boxes()[0])


def test_panoptic_ground_truth_scores_one_against_itself() -> None:
    from torchmetrics.detection import PanopticQuality

    world = ShapesWorld(WorldConfig(), seed=0)
    n = len(world.config.shapes)
    pq = PanopticQuality(things=set(range(n)), stuffs={n, n + 1})
    for i in range(2):
        r = world.panoptic(i)
        gt = torch.from_numpy(to_torchmetrics_panoptic(r, n))[None]
        permuted = gt.clone()
        permuted[..., 1] = torch.where(gt[..., 1] > 0, 50 - gt[..., 1], 0)  # other instance ids
        pq.update(permuted, gt)
    assert float(pq.compute()) == pytest.approx(1.0)


# ----- clicks -------------------------------------------------------------------------------------
def test_center_click_equals_a_brute_force_distance_argmax() -> None:
    r = ShapesWorld(WorldConfig(), seed=6).panoptic(0)
    m = r.mask(r.objects[0].id)
    H, W = m.shape
    outside = [
        (rr, cc)
        for rr in range(-1, H + 1)
        for cc in range(-1, W + 1)
        if not (0 <= rr < H and 0 <= cc < W and m[rr, cc])
    ]
    best, best_pos = -1.0, None
    for rr, cc in zip(*np.nonzero(m), strict=True):  # raster order: ties keep the first
        d = min((rr - a) ** 2 + (cc - b) ** 2 for a, b in outside)
        if d > best:
            best, best_pos = d, (cc + 0.5, rr + 0.5)
    assert center_click(m) == best_pos


def test_clicks_fall_inside_the_mask() -> None:
    r = ShapesWorld(WorldConfig(), seed=6).panoptic(3)
    m = r.mask(r.objects[0].id)
    pts = clicks(m, 50, generator=np.random.default_rng(0))
    assert m[(pts[:, 1] - 0.5).astype(int), (pts[:, 0] - 0.5).astype(int)].all()
    with pytest.raises(ValueError, match="generator"):
        clicks(m, 2)


def test_next_click_lies_in_the_error_region_with_its_label() -> None:
    gt = np.zeros((20, 20), bool)
    gt[2:12, 2:12] = True
    pred = np.zeros_like(gt)
    pred[2:12, 2:6] = True  # misses the right part: a positive click
    (x, y), positive = next_click(pred, gt)
    assert positive and gt[int(y), int(x)] and not pred[int(y), int(x)]
    pred2 = gt.copy()
    pred2[14:19, 14:19] = True  # a false-positive blob: a negative click
    (x, y), positive = next_click(pred2, gt)
    assert not positive and pred2[int(y), int(x)] and not gt[int(y), int(x)]


# ----- video --------------------------------------------------------------------------------------
def test_video_ids_stable_and_motion_is_the_closed_form_reflection() -> None:
    world = ShapesWorld(WorldConfig(video=VideoConfig(num_frames=12, speed=(2.0, 3.0))), seed=1)
    v = world.video(0)
    for tr in v.tracks:
        lo, hi = tr.object.radius, 64 - tr.object.radius
        for axis, vel in ((0, tr.velocity[0]), (1, tr.velocity[1])):
            x0 = tr.object.center[axis]
            # Closed form: unfold the bounce into a line, then fold it back with a triangle wave.
            period = 2 * (hi - lo)
            t = np.arange(12)
            s = np.mod(x0 - lo + vel * t, period)
            closed = lo + np.where(s <= hi - lo, s, period - s)
            assert np.allclose(tr.centers[:, axis], closed)
            assert np.allclose(tr.centers[:, axis], reflect(x0, vel, lo, hi, 12))
        steps = np.linalg.norm(np.diff(tr.centers, axis=0), axis=1)
        speed = np.hypot(*tr.velocity)
        assert np.all(steps <= speed + 1e-9)  # equality away from a bounce
    ids = {t.object.id for t in v.tracks}
    assert set(np.unique(v.instance)) - {0} <= ids


def test_video_rejects_zero_frames() -> None:
    with pytest.raises(ValueError, match="num_frames"):
        ShapesWorld(WorldConfig(), seed=0).video(0, num_frames=0)


# ----- language -----------------------------------------------------------------------------------
def test_every_expression_resolves_to_its_target() -> None:
    cfg = WorldConfig(n_objects=(3, 6))
    world, listener = ShapesWorld(cfg, seed=0), OracleListener(cfg)
    total = 0
    wrong_target = 0
    rng = np.random.default_rng(0)
    for i in range(200):
        scene = world.referring(i, forms="all")
        ids = [o.id for o in scene.rendered.objects]
        for oid, text in scene.expressions:
            assert listener.resolve(text, scene.rendered) == oid, text
            assert len(text.split()) <= cfg.language.max_tokens
            others = [k for k in ids if k != oid]
            if others:
                wrong_target += listener.resolve(text, scene.rendered) == int(rng.choice(others))
            total += 1
    assert total > 500
    assert wrong_target / total <= 0.05  # negative control: reassigned expressions do not resolve


def test_predicates_are_irreflexive_antisymmetric_and_false_on_near_ties() -> None:
    a, b, near = (10.0, 10.0), (20.0, 30.0), (12.0, 11.0)
    for rel in ("left_of", "right_of", "above", "below"):
        assert not relation_holds(rel, a, a, 4.0)
        assert not (relation_holds(rel, a, b, 4.0) and relation_holds(rel, b, a, 4.0))
        assert not relation_holds(rel, a, near, 4.0) and not relation_holds(rel, near, a, 4.0)
    assert extreme_of([1, 2], "leftmost", {1: a, 2: near}, 4.0) is None


def test_listener_statuses() -> None:
    cfg = WorldConfig()
    world, listener = ShapesWorld(cfg, seed=0), OracleListener(cfg)
    r = world.referring(0).rendered
    assert listener.resolve("the zebra", r) == "UNPARSEABLE"
    assert listener.resolve("red the circle", r) == "UNPARSEABLE"
    absent = next(s for s in cfg.shapes if s not in {o.shape for o in r.objects})
    assert listener.resolve(f"the {absent}", r) == NO_MATCH
    assert listener.parse("the leftmost small red circle left of the blue square") == Description(
        "circle", "red", "small", "leftmost", "left_of", Landmark("square", "blue", None)
    )


def test_train_and_heldout_forms_are_disjoint_and_bounded() -> None:
    for concept, (train, heldout) in SYNONYMS.items():
        assert not set(train) & set(heldout), concept
    assert not set(TEMPLATES[0]) & set(TEMPLATES[1])
    assert 50 <= len(vocabulary(WorldConfig())) <= 80


def test_caption_round_trips_the_attributes() -> None:
    world = ShapesWorld(ALL_STYLES, seed=0)
    for i in range(20):
        _, _, attrs = world.single_object(i)
        words = caption(attrs).split()
        assert words[2] == attrs.color and words[3] == attrs.shape
    with pytest.raises(ValueError, match="slot"):
        caption(attrs, template="no slot")


# ----- distractor, textures, config ---------------------------------------------------------------
def test_distractor_rate_within_a_binomial_bound() -> None:
    from iclr25.common.data.shapes_world.scene import item_rng, sample_single

    cfg = WorldConfig(image_size=32, distractor=DistractorConfig(p=0.3))
    n = 600
    hits = sum(sample_single(cfg, item_rng(0, "train", "single", i)).distractor is not None for i in range(n))
    assert abs(hits / n - 0.3) < 4 * np.sqrt(0.3 * 0.7 / n)


def test_palette_distances_exceed_four_times_the_jitter() -> None:
    rgb = np.array(list(COLORS.values()), dtype=float)
    d = np.linalg.norm(rgb[:, None] - rgb[None], axis=-1)
    assert d[np.triu_indices(len(rgb), 1)].min() > 4 * 12


def test_textures_are_seeded() -> None:
    assert np.array_equal(texture_images(3, seed=1, size=16), texture_images(3, seed=1, size=16))
    assert not np.array_equal(texture_images(1, seed=1, size=16), texture_images(1, seed=2, size=16))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"shapes": ("blob",)}, "unknown shape"),
        ({"colors": ("mauve",)}, "unknown colour"),
        ({"styles": ("wavy",)}, "unknown style"),
        ({"n_objects": (3, 2)}, "n_objects"),
    ],
)
def test_bad_configs_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        WorldConfig(**kwargs)


def test_image_too_small_for_scene_sizes_raises() -> None:
    with pytest.raises(ValueError, match="too small"):
        ShapesWorld(WorldConfig(image_size=16), seed=0).scene(0)


def test_unplaceable_objects_are_dropped_not_forced() -> None:
    cfg = WorldConfig(image_size=32, sizes=("large",), n_objects=(12, 12))
    r = ShapesWorld(cfg, seed=0).panoptic(0)
    assert len(r.objects) < 12  # twelve large objects cannot all stay half visible in 32 px


# ----- exports and torch wrappers -----------------------------------------------------------------
def test_coco_panoptic_round_trip(tmp_path) -> None:
    world = ShapesWorld(WorldConfig(), seed=0)
    items = [world.panoptic(i) for i in range(3)]
    n = len(world.config.shapes)
    path = write_coco_panoptic(tmp_path, items, world.class_names("panoptic"), n)
    payload = json.loads(path.read_text())
    for r, ann in zip(items, payload["annotations"], strict=True):
        seg = read_coco_panoptic_png(tmp_path / "panoptic" / ann["file_name"])
        for info in ann["segments_info"]:
            m = seg == info["id"]
            assert m.sum() == info["area"]
            assert (r.semantic[m] == info["category_id"] - 1).all()
        for obj in r.objects:
            assert np.array_equal(seg == obj.id, r.mask(obj.id))


def test_rle_exports_decode_identically(tmp_path) -> None:
    from pycocotools import mask as mask_utils

    world = ShapesWorld(WorldConfig(video=VideoConfig(num_frames=3)), seed=0)
    names, n = world.class_names("panoptic"), len(world.config.shapes)
    videos = [world.video(i) for i in range(2)]
    payload = json.loads(write_ytvis(tmp_path / "vis", videos, names, n).read_text())
    assert {"videos", "annotations", "categories"} <= set(payload)
    ann = payload["annotations"][0]
    v = videos[0]
    for t, seg in enumerate(ann["segmentations"]):
        want = v.instance[t] == v.tracks[0].object.id
        if seg is None:
            assert not want.any()
        else:
            assert np.array_equal(
                mask_utils.decode({"size": seg["size"], "counts": seg["counts"].encode()}), want
            )
    refs_path, inst_path = write_refer(tmp_path / "ref", [world.referring(i) for i in range(3)], names, n)
    refs, inst = json.loads(refs_path.read_text()), json.loads(inst_path.read_text())
    ann_ids = {a["id"] for a in inst["annotations"]}
    assert refs and all(r["ann_id"] in ann_ids and r["sentences"][0]["sent"] for r in refs)


def test_imagefolder_reads_back(tmp_path) -> None:
    from torchvision.datasets import ImageFolder

    world = ShapesWorld(WorldConfig(image_size=16), seed=0)
    X, y = world.classification_arrays(12)
    write_imagefolder(tmp_path, X, y, world.class_names())
    ds = ImageFolder(str(tmp_path))
    assert len(ds) == 12
    with pytest.raises(ValueError, match="uint8"):
        write_imagefolder(tmp_path, X.astype(float), y, world.class_names())


def test_torch_wrappers_and_a_consistent_flip() -> None:
    from torchvision.transforms import v2

    world = ShapesWorld(WorldConfig(), seed=0)
    img, label = ShapesClassification(world, 4)[0]
    assert (
        img.dtype == torch.float32
        and img.shape == (3, 64, 64)
        and 0.0 <= float(img.min()) <= float(img.max()) <= 1.0
    )
    assert isinstance(label, int)
    img, target = ShapesPanoptic(world, 2, transform=v2.RandomHorizontalFlip(p=1.0))[0]
    raw_img, raw_target = ShapesPanoptic(world, 2)[0]
    assert torch.equal(img, raw_img.flip(-1))
    assert torch.equal(target["masks"], raw_target["masks"].flip(-1))
    b, rb = target["boxes"], raw_target["boxes"]
    assert torch.equal(b[:, 0], 64 - rb[:, 2]) and torch.equal(b[:, 2], 64 - rb[:, 0])
    with pytest.raises(IndexError):
        ShapesClassification(world, 2)[2]


def test_shape_color_labels_cover_every_class() -> None:
    world = ShapesWorld(WorldConfig(image_size=16), seed=0)
    _, y = world.classification_arrays(400)
    assert set(y.tolist()) == set(range(16))
    assert len(world.class_names("shape_color")) == 16
    assert len(SHAPES) == 8
