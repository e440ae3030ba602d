"""RMP-SAM model, APIs, training step, key map, demo and input errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25.methods.rmp_sam import (
    RMPSAM,
    LossConfig,
    RMPSAMConfig,
    RMPSAMPredictor,
    TrainConfig,
    co_train,
    demo,
    from_official_state_dict,
    from_shapes_world,
    to_official_state_dict,
    tracks_to_ytvis,
)

pytestmark = pytest.mark.usefixtures("one_thread")
SRC = Path(__file__).parents[3] / "src" / "iclr25" / "methods" / "rmp_sam"


@pytest.fixture(scope="module")
def data():
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig

    world = ShapesWorld(WorldConfig(image_size=32, n_objects=(2, 3)), seed=0)
    return from_shapes_world(world, 6, 3, split="train")


def _model(**kw) -> RMPSAM:
    torch.manual_seed(0)
    return RMPSAM(RMPSAMConfig(**kw)).eval()


def test_no_cuda_literals() -> None:
    for f in SRC.glob("*.py"):
        assert not re.search(r"['\"]cuda", f.read_text()), f.name


@pytest.mark.parametrize(
    "kw", [{}, {"deform": False}, {"class_head": "cosine"}, {"adapters": False}, {"dynamic_kernels": False}]
)
def test_forward_shapes_for_every_task(kw: dict) -> None:
    model = _model(**kw)
    with torch.no_grad():
        pan = model(torch.rand(2, 3, 32, 32), task="panoptic")
        vid = model(torch.rand(1, 3, 3, 32, 32), task="video")
        inter = model(
            torch.rand(1, 3, 32, 32), task="interactive", prompts={"points": torch.tensor([[[3.5, 4.5]]])}
        )
    assert pan["logits"].shape == (2, 16, 7) and pan["masks"].shape == (2, 16, 8, 8)
    assert vid["masks"].shape == (1, 16, 24, 8)  # tube: 3 frames along the height
    assert inter["masks"].shape == (1, 1, 8, 8) and inter["iou"].shape == (1, 1)
    n_out = 2 + (1 if kw.get("adapters", True) else 0)
    assert len(pan["aux"]) == n_out


def test_same_seed_same_outputs(data) -> None:
    outs = []
    for _ in range(2):
        model = _model()
        co_train(
            model,
            data,
            train=TrainConfig(steps=3, batch_size=2, video_batch=1, warmup=1),
            loss=LossConfig(num_points=64),
            seed=0,
        )
        with torch.no_grad():
            outs.append(model(data.images[:2], task="panoptic")["masks"])
    assert torch.equal(outs[0], outs[1])


def test_training_step_lowers_the_loss_on_one_scene(data) -> None:
    model = _model()
    log = co_train(
        model,
        data,
        train=TrainConfig(steps=30, batch_size=2, tasks=("panoptic",), warmup=1, lr=3e-3),
        loss=LossConfig(num_points=64),
        seed=0,
    )
    assert np.mean([v for *_, v in log[-5:]]) < np.mean([v for *_, v in log[:5]])


def test_validation_pass_is_a_fixed_draw_called_on_schedule(data) -> None:
    """The validation curve moves only with the weights (same clips, clicks and points every call),
    the model goes back to training mode, and the callback runs every k steps and after the last."""
    from iclr25.methods.rmp_sam import validation_losses

    model = _model()
    model.train()
    loss = LossConfig(num_points=64)
    a = validation_losses(model, data, loss, clip_len=2, max_prompts=2, seed=3)
    b = validation_losses(model, data, loss, clip_len=2, max_prompts=2, seed=3)
    assert a == b and model.training
    assert {"val_cls", "val_panoptic", "val_video", "val_interactive", "val_loss"} <= set(a)
    assert a["val_loss"] == pytest.approx(a["val_panoptic"] + a["val_video"] + a["val_interactive"])
    calls: list[int] = []
    co_train(
        model,
        data,
        train=TrainConfig(steps=5, batch_size=2, video_batch=1, warmup=1),
        loss=loss,
        seed=0,
        callback=calls.append,
        callback_every=2,
    )
    assert calls == [2, 4, 5]


def test_panoptic_track_and_predictor_outputs(data) -> None:
    model = _model()
    res = model.panoptic(data.images[:2], object_mask_threshold=0.0, overlap_threshold=0.0)
    assert res[0]["segmentation"].shape == (32, 32)
    for r in res[0]["segments_info"]:
        assert {"id", "label_id", "category_id", "isthing", "score", "area"} <= set(r)
    tracks = model.track(data.videos[0], clip_size=2)
    assert len(tracks) == 16 and tracks[0]["masks"].shape == (4, 32, 32)
    recs = tracks_to_ytvis(tracks[:2], video_id=7)
    assert recs[0]["video_id"] == 7 and len(recs[0]["segmentations"]) == 4
    pred = RMPSAMPredictor(model)
    pred.set_image((data.images[0].permute(1, 2, 0).numpy() * 255).astype(np.uint8))
    masks, iou, _ = pred.predict(
        point_coords=np.array([[3.5, 4.5], [10.5, 9.5]]), point_labels=np.array([1, 0])
    )
    assert masks.shape == (1, 32, 32) and masks.dtype == torch.bool and iou.shape == (1,)
    masks, iou, _ = pred.predict_points(np.array([[3.5, 4.5], [10.5, 9.5], [20.0, 20.0]]))
    assert masks.shape == (3, 32, 32)


def test_input_errors() -> None:
    model = _model()
    pred = RMPSAMPredictor(model)
    with pytest.raises(RuntimeError, match="set_image"):
        pred.predict(point_coords=np.array([[1.0, 1.0]]))
    pred.set_image(np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="inside"):
        pred.predict(point_coords=np.array([[40.0, 1.0]]), point_labels=np.array([1]))
    with pytest.raises(ValueError, match="empty"):
        pred.predict(point_coords=np.zeros((0, 2)))
    with pytest.raises(ValueError, match="empty"):
        model(torch.rand(1, 3, 32, 32), task="interactive", prompts={"points": torch.zeros(1, 0, 2)})
    with pytest.raises(ValueError, match="unknown task"):
        model(torch.rand(1, 3, 32, 32), task="depth")
    with pytest.raises(ValueError, match="video input"):
        model(torch.rand(1, 3, 32, 32), task="video")
    with pytest.raises(ValueError, match="multiples of 32"):
        model(torch.rand(1, 3, 30, 30), task="panoptic")
    with pytest.raises(ValueError, match="divisible"):
        RMPSAMConfig(channels=30, num_heads=4)


def test_non_finite_images_raise_value_error_naming_the_input() -> None:
    """NaN or infinite pixels are refused before the neck (DeformConv2d crashes on NaN)."""
    model = _model()
    bad = torch.full((1, 3, 32, 32), float("nan"))
    with pytest.raises(ValueError, match="images must be finite"):
        model.panoptic(bad)
    with pytest.raises(ValueError, match="images must be finite"):
        model(bad, task="panoptic")
    frames = torch.rand(2, 3, 32, 32)
    frames[1, 0, 3, 4] = float("inf")
    with pytest.raises(ValueError, match="frames must be finite"):
        model.track(frames, clip_size=2)
    pred = RMPSAMPredictor(model)
    one = torch.rand(3, 32, 32)
    one[0, 5, 5] = float("nan")
    with pytest.raises(ValueError, match="image must be finite"):
        pred.set_image(one)


def test_non_finite_points_and_boxes_raise_value_error_naming_the_input() -> None:
    model = _model()
    pred = RMPSAMPredictor(model)
    pred.set_image(np.zeros((32, 32, 3), np.uint8))
    with pytest.raises(ValueError, match="point_coords must be finite"):
        pred.predict(point_coords=np.array([[np.nan, 3.0]]), point_labels=np.array([1]))
    with pytest.raises(ValueError, match="point_coords must be finite"):
        pred.predict_points(np.array([[4.0, 4.0], [np.inf, 3.0]]))
    with pytest.raises(ValueError, match="boxes must be finite"):
        pred.predict(boxes=np.array([[1.0, 1.0, np.nan, 9.0]]))
    img = torch.rand(1, 3, 32, 32)
    with pytest.raises(ValueError, match="points must be finite"):
        model(img, task="interactive", prompts={"points": torch.tensor([[[float("nan"), 2.0]]])})
    with pytest.raises(ValueError, match="boxes must be finite"):
        model(img, task="interactive", prompts={"boxes": torch.tensor([[[0.0, 0.0, float("nan"), 5.0]]])})


def test_uint8_and_out_of_range_images_are_refused_with_the_expected_range() -> None:
    model = _model()
    as_bytes = (torch.rand(1, 3, 32, 32) * 255).to(torch.uint8)
    with pytest.raises(TypeError, match=r"float tensor with values in \[0, 1\].*uint8"):
        model.panoptic(as_bytes)
    with pytest.raises(TypeError, match=r"\[0, 1\]"):
        model.track(as_bytes.expand(2, -1, -1, -1), clip_size=2)
    pred = RMPSAMPredictor(model)
    with pytest.raises(TypeError, match=r"\[0, 1\]"):
        pred.set_image(as_bytes[0])
    with pytest.raises(TypeError, match=r"uint8 with values in \[0, 255\]"):
        pred.set_image(np.zeros((32, 32, 3), np.float32))
    with pytest.raises(ValueError, match=r"values in \[0, 1\], got \[0, 255\]"):
        model.panoptic(torch.zeros(1, 3, 32, 32).index_fill_(2, torch.tensor([0]), 255.0))


def test_key_map_round_trips_with_mmdet_style_names() -> None:
    model = _model()
    state = model.state_dict()
    official = to_official_state_dict(state)
    assert "panoptic_head.mask_heads.0.kernel_update.dynamic_layer.weight" in official
    assert "neck.deconv.deform_conv1.dcn_offset.weight" in official
    back = from_official_state_dict(official, state)
    assert set(back) == set(state) and all(torch.equal(back[k], state[k]) for k in state)
    fresh = _model()
    fresh.load_state_dict(back)
    with pytest.raises(KeyError):
        from_official_state_dict({}, state)


def test_demo_writes_png_and_gif(tmp_path: Path) -> None:
    paths = demo(tmp_path, seed=0, steps=2, image_size=32)
    for p in paths:
        assert p.exists() and p.stat().st_size > 0
    assert [p.name for p in paths] == ["panoptic.png", "video.gif", "clicks.png"]
    with pytest.raises(ValueError, match="takes no input file"):
        demo(tmp_path, input=tmp_path / "x.png")
