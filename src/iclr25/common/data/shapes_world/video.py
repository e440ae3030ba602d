"""Short videos of moving objects with stable identities.

Frame 0 is a scene drawn by the usual rules (the visibility rule holds on frame 0 only). Each
object moves with a constant speed drawn from ``VideoConfig.speed`` (pixels per frame at 64 px,
scaled with the image) in a random direction and reflects at the borders: when a centre would
leave [r, W - r], ``x <- 2 * bound - x`` and ``v <- -v`` (same for y). Stuff and z order stay
fixed; an object fully hidden in a frame has an empty mask there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .config import WorldConfig
from .scene import Object, Scene, render, sample_scene

__all__ = ["Track", "Video", "reflect", "sample_video"]


@dataclass(frozen=True)
class Track:
    """One object's identity and per-frame centres (T, 2) as (x, y)."""

    object: Object
    centers: np.ndarray
    velocity: tuple[float, float]


@dataclass(frozen=True)
class Video:
    """Frames uint8 (T, H, W, 3), instance maps int64 (T, H, W), semantic maps, and tracks."""

    frames: np.ndarray
    instance: np.ndarray
    semantic: np.ndarray
    tracks: tuple[Track, ...]


def reflect(x0: float, v: float, lo: float, hi: float, steps: int) -> np.ndarray:
    """Positions of a point bouncing between ``lo`` and ``hi``, frames 0..steps-1 (iterative rule)."""
    out = np.empty(steps)
    x = x0
    for t in range(steps):
        out[t] = x
        x += v
        # A speed below the box width reflects at most once per step.
        if x > hi:
            x, v = 2 * hi - x, -v
        elif x < lo:
            x, v = 2 * lo - x, -v
    return out


def sample_video(cfg: WorldConfig, rng: np.random.Generator, num_frames: int) -> Video:
    """Draw a scene and its motion, then render every frame."""
    if num_frames < 1:
        raise ValueError(f"num_frames must be at least 1, got {num_frames}")
    scene = sample_scene(cfg, rng)
    scale = cfg.image_size / 64.0
    tracks = []
    for obj in scene.objects:
        speed = rng.uniform(*cfg.video.speed) * scale
        angle = rng.uniform(0.0, 2 * np.pi)
        vx, vy = speed * np.cos(angle), speed * np.sin(angle)
        lo, hi = obj.radius, cfg.image_size - obj.radius
        xs = reflect(obj.center[0], vx, lo, hi, num_frames)
        ys = reflect(obj.center[1], vy, lo, hi, num_frames)
        tracks.append(Track(obj, np.stack([xs, ys], axis=1), (float(vx), float(vy))))
    size = cfg.image_size
    frames = np.empty((num_frames, size, size, 3), dtype=np.uint8)
    instance = np.empty((num_frames, size, size), dtype=np.int64)
    semantic = np.empty((num_frames, size, size), dtype=np.int64)
    for t in range(num_frames):
        moved = tuple(
            replace(tr.object, center=(float(tr.centers[t, 0]), float(tr.centers[t, 1]))) for tr in tracks
        )
        out = render(
            Scene(
                scene.size,
                moved,
                scene.background,
                scene.shapes,
                scene.distractor,
                scene.distractor_in_masks,
                scene.supersample,
            )
        )
        frames[t], instance[t], semantic[t] = out.image, out.instance, out.semantic
    return Video(frames, instance, semantic, tuple(tracks))
