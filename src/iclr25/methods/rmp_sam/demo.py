"""Demo of RMP-SAM: train a tiny model briefly, then segment a generated image and video and write
PNG / GIF overlays (panoptic map, tracked clip, click results).

References: Xu et al., RMP-SAM (ICLR 2025), arXiv:2401.10228.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from iclr25._core.media import image_grid
from iclr25.methods.rmp_sam.config import LossConfig, RMPSAMConfig, TrainConfig
from iclr25.methods.rmp_sam.data import from_shapes_world
from iclr25.methods.rmp_sam.model import RMPSAM, RMPSAMPredictor
from iclr25.methods.rmp_sam.train import co_train
from iclr25.methods.rmp_sam.viz import click_overlay, panoptic_overlay, track_frames

__all__ = ["demo"]


def demo(
    out_dir: str | os.PathLike[str],
    *,
    input: str | os.PathLike[str] | None = None,
    seed: int = 0,
    steps: int = 300,
    image_size: int = 64,
) -> list[Path]:
    """Train ``steps`` co-training steps on shapes-world data and write three overlays.

    This is ``iclr25 demo rmp_sam``. A few hundred steps give rough masks; the claim's learning
    curve (README) shows thing classes need a few thousand.

    Args:
        out_dir: folder for ``panoptic.png``, ``video.gif`` and ``clicks.png`` (created).
        input: must be None: the demo segments a generated image and video.
        seed: world, weights and batches.
        steps: training steps (300 take about a minute on one core at 64 px).
        image_size: a multiple of 32, at least 32.

    Returns:
        The written paths: panoptic map, tracked clip, click results.

    Raises:
        ValueError: an input file was given.
    """
    from PIL import Image

    if input is not None:
        raise ValueError("the rmp_sam demo segments a generated image and video; it takes no input file")

    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig, center_click

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    world = ShapesWorld(WorldConfig(image_size=image_size, n_objects=(2, 5)), seed=seed)
    train = from_shapes_world(world, 200, 60, split="train")
    test = from_shapes_world(world, 1, 1, split="test")
    torch.manual_seed(seed)
    model = RMPSAM(RMPSAMConfig())
    co_train(
        model,
        train,
        train=TrainConfig(steps=steps, warmup=min(50, max(steps // 5, 1))),
        loss=LossConfig(num_points=min(1024, image_size * image_size // 4)),
        seed=seed,
    )
    img = test.rendered[0].image
    seg = model.panoptic(test.images[:1], object_mask_threshold=0.5)[0]["segmentation"].numpy()
    paths = {"panoptic": out / "panoptic.png", "video": out / "video.gif", "clicks": out / "clicks.png"}
    Image.fromarray(
        image_grid([np.repeat(np.repeat(img, 3, 0), 3, 1), panoptic_overlay(img, seg)], ncols=2)
    ).save(paths["panoptic"])
    tracks = [t for t in model.track(test.videos[0], clip_size=2, max_tracks=6) if t["score"] > 0.3]
    frames = (test.videos[0].permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
    anim = track_frames(frames, [t["masks"].numpy() for t in tracks], [t["id"] for t in tracks])
    pil = [Image.fromarray(f) for f in anim]
    pil[0].save(paths["video"], save_all=True, append_images=pil[1:], duration=500, loop=0)
    pred = RMPSAMPredictor(model)
    pred.set_image(img)
    t = test.targets[0]
    tiles = []
    for j in torch.nonzero(t["isthing"]).flatten().tolist():
        gt = t["masks"][j].numpy()
        pt = center_click(gt)
        m = pred.predict(point_coords=np.array([pt]), point_labels=np.array([1]))[0][0].numpy()
        tiles.append(click_overlay(img, m, gt, pt))
    Image.fromarray(image_grid(tiles or [np.repeat(np.repeat(img, 3, 0), 3, 1)], ncols=4)).save(
        paths["clicks"]
    )
    return list(paths.values())
