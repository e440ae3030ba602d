"""Scenes: sampling objects from a seeded generator, layering them, and rendering pixels and masks.

Randomness: item ``i`` of a split draws from
``np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(split_code, kind_code, i)))``
(:func:`item_rng`), so items do not depend on access order or DataLoader workers, and the
different item kinds (scene, single object, video, referring scene) of one index are independent.
A scene is plain data (:class:`Scene`); :func:`render` is a pure function of it.

Composition: background (stuff bands or a single-object background) -> optional face-like
distractor -> objects in z order, each blended with its opacity. The visible mask of object i is
its mask minus the masks of every later object; an object whose visible fraction or area falls
below the config's minimum (its own, or an earlier object's once it is placed) is re-placed up to
50 times, then dropped.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from .config import WorldConfig
from .raster import coverage_crop
from .styles import style_layer
from .vocab import COLORS

__all__ = [
    "KIND_CODES",
    "SPLIT_CODES",
    "Background",
    "Object",
    "Rendered",
    "Scene",
    "item_rng",
    "object_layer",
    "render",
    "sample_scene",
    "sample_single",
    "split_code",
]

SPLIT_CODES: dict[str, int] = {"train": 0, "val": 1, "test": 2}
KIND_CODES: dict[str, int] = {"scene": 0, "single": 1, "video": 2, "referring": 3, "texture": 4}
MAX_TRIES = 50


def split_code(split: str) -> int:
    """Fixed integer of a split: train 0, val 1, test 2, any other name its CRC-32."""
    if not isinstance(split, str) or not split:
        raise ValueError(f"split must be a non-empty string, got {split!r}")
    return SPLIT_CODES.get(split, zlib.crc32(split.encode()))


def item_rng(seed: int, split: str, kind: str, index: int) -> np.random.Generator:
    """The generator of one item; never the global RNG and never Python's salted ``hash``."""
    if index < 0:
        raise ValueError(f"item index must be non-negative, got {index}")
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=(split_code(split), KIND_CODES[kind], index))
    )


@dataclass(frozen=True)
class Object:
    """One object. ``id`` is its instance id (1-based, in z order); centre is (x, y) in pixels."""

    id: int
    shape: str
    color: str
    size: str
    center: tuple[float, float]
    radius: float
    style: str
    z: int
    rgb: tuple[int, int, int]
    rotation: float = 0.0
    style_seed: int = 0


@dataclass(frozen=True)
class Background:
    """How the background is drawn: ``kind`` is "stuff" (sky over ground) or a single-object kind."""

    kind: str
    colors: tuple[tuple[int, int, int], ...]
    boundary: int = -1
    texture_seed: int = 0
    angle: float = 0.0


@dataclass(frozen=True)
class Scene:
    """Everything needed to render an image, as plain data."""

    size: int
    objects: tuple[Object, ...]
    background: Background
    shapes: tuple[str, ...]
    distractor: tuple[float, float, float] | None = None  # (x, y, radius)
    distractor_in_masks: bool = False
    supersample: int = 4


@dataclass(frozen=True)
class Rendered:
    """Pixels and annotations of a scene.

    Attributes:
        image: uint8 (H, W, 3).
        semantic: int64 (H, W) category ids: things by shape (0..S-1), then stuff.
        instance: int64 (H, W) object ids (0 = stuff / background).
        objects: the scene's objects, whose ids appear in ``instance`` (an object hidden in a
            video frame has no pixel).
    """

    image: np.ndarray
    semantic: np.ndarray
    instance: np.ndarray
    objects: tuple[Object, ...]

    def mask(self, object_id: int) -> np.ndarray:
        """Visible bool mask (H, W) of one object."""
        return self.instance == object_id

    def boxes(self) -> np.ndarray:
        """XYXY boxes (n, 4) float32 of the objects' visible masks; x2 = max_col + 1 (torchvision).

        An object with no visible pixel gets a box of zeros.
        """
        out = np.zeros((len(self.objects), 4), dtype=np.float32)
        for k, obj in enumerate(self.objects):
            rows, cols = np.nonzero(self.instance == obj.id)
            if rows.size:
                out[k] = (cols.min(), rows.min(), cols.max() + 1, rows.max() + 1)
        return out


def _jitter_rgb(color: str, jitter: int, rng: np.random.Generator) -> tuple[int, int, int]:
    base = np.asarray(COLORS[color])
    return tuple(int(v) for v in np.clip(base + rng.integers(-jitter, jitter + 1, size=3), 0, 255))


def _grey_tint(
    rng: np.random.Generator, lo: int = 20, hi: int = 100, spread: int = 25
) -> tuple[int, int, int]:
    """A dark-to-mid, low-saturation colour: a grey level plus small per-channel offsets."""
    g = int(rng.integers(lo, hi + 1))
    return tuple(int(v) for v in np.clip(g + rng.integers(-spread, spread + 1, size=3), 0, 255))


def _sample_background(
    cfg: WorldConfig, rng: np.random.Generator, *, single: bool, stuff: bool
) -> Background:
    if not single and stuff:
        sky = _grey_tint(rng, 70, 120, 20)
        ground = _grey_tint(rng, 25, 70, 20)
        boundary = int(np.rint(cfg.image_size * rng.uniform(0.35, 0.65)))
        return Background("stuff", (sky, ground), boundary, int(rng.integers(2**31)))
    kind = str(rng.choice(cfg.backgrounds)) if single else "plain"
    colors = (_grey_tint(rng, spread=0 if kind in ("plain", "noise") else 25), _grey_tint(rng))
    return Background(kind, colors, -1, int(rng.integers(2**31)), float(rng.uniform(0, 2 * np.pi)))


def background_image(bg: Background, size: int) -> np.ndarray:
    """Float64 (H, W, 3) background pixels in [0, 255]."""
    rng = np.random.default_rng(bg.texture_seed)
    c0 = np.asarray(bg.colors[0], dtype=np.float64)
    if bg.kind == "stuff":
        img = np.empty((size, size, 3))
        img[: bg.boundary] = c0
        img[bg.boundary :] = np.asarray(bg.colors[1], dtype=np.float64)
        # Low-contrast texture: smoothed Gaussian noise, a different field per band.
        tex = ndimage.gaussian_filter(rng.normal(0.0, 1.0, size=(2, size, size)), sigma=(0, 2, 2)) * 25.0
        img[: bg.boundary] += tex[0, : bg.boundary, :, None]
        img[bg.boundary :] += tex[1, bg.boundary :, :, None]
    elif bg.kind in ("plain", "tint"):
        img = np.broadcast_to(c0, (size, size, 3)).copy()
    elif bg.kind == "noise":
        img = c0 + rng.normal(0.0, 15.0, size=(size, size, 3))
    elif bg.kind == "gradient":
        yy, xx = np.mgrid[0:size, 0:size] / max(size - 1, 1)
        t = (xx * np.cos(bg.angle) + yy * np.sin(bg.angle) + 1.0) / 2.0  # (H, W) in [0, 1]
        img = c0 * (1 - t[..., None]) + np.asarray(bg.colors[1], dtype=np.float64) * t[..., None]
    else:
        raise ValueError(f"unknown background kind {bg.kind!r}")
    return np.clip(img, 0.0, 255.0)


@functools.lru_cache(maxsize=64)
def object_layer(obj: Object, size: int, supersample: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """An object's colour layer and opacity over its pixel block: ``(layer, alpha, row0, col0)``.

    Cached (the arrays are read-only), so rendering a scene reuses what sampling it computed for
    the visibility check.
    """
    margin = float(np.ceil(3 * max(0.8, obj.radius / 5.0))) if obj.style == "blurred" else 0.0
    cov, r0, c0 = coverage_crop(
        obj.shape, obj.center, obj.radius, size, supersample=supersample, rotation=obj.rotation, margin=margin
    )
    layer, alpha = style_layer(obj.style, cov, obj.rgb, obj.radius, r0, c0, obj.style_seed)
    layer.flags.writeable = False
    alpha.flags.writeable = False
    return layer, alpha, r0, c0


def _full_mask(obj: Object, size: int, supersample: int) -> np.ndarray:
    _, alpha, r0, c0 = object_layer(obj, size, supersample)
    out = np.zeros((size, size), dtype=bool)
    out[r0 : r0 + alpha.shape[0], c0 : c0 + alpha.shape[1]] = alpha >= 0.5
    return out


def _visible_ok(masks: list[np.ndarray], cfg: WorldConfig) -> bool:
    """Whether every object keeps enough visible pixels under the ones above it."""
    above = np.zeros_like(masks[0])
    for m in reversed(masks):
        area = int(m.sum())
        visible = int((m & ~above).sum())
        if area == 0 or visible < cfg.min_visible_pixels or visible < cfg.min_visible_fraction * area:
            return False
        above |= m
    return True


def _draw_object(
    cfg: WorldConfig,
    rng: np.random.Generator,
    *,
    shape: str,
    color: str,
    size_class: str,
    style: str,
    single: bool,
    z: int,
) -> Object:
    lo, hi = cfg.radius_bin(size_class, single=single)
    r = float(rng.uniform(lo, hi))
    w = cfg.image_size
    cx, cy = float(rng.uniform(r, w - r)), float(rng.uniform(r, w - r))
    rotation = 0.0
    if cfg.rotation_jitter and shape not in ("square", "diamond"):
        rotation = float(rng.uniform(-cfg.rotation_jitter, cfg.rotation_jitter))
    return Object(
        id=z + 1,
        shape=shape,
        color=color,
        size=size_class,
        center=(cx, cy),
        radius=r,
        style=style,
        z=z,
        rgb=_jitter_rgb(color, cfg.color_jitter, rng),
        rotation=rotation,
        style_seed=int(rng.integers(2**31)),
    )


def _maybe_distractor(cfg: WorldConfig, rng: np.random.Generator) -> tuple[float, float, float] | None:
    if cfg.distractor.p <= 0.0 or rng.random() >= cfg.distractor.p:
        return None
    r = float(np.mean(cfg.radius_bin("medium")))
    w = cfg.image_size
    return float(rng.uniform(r, w - r)), float(rng.uniform(r, w - r)), r


def sample_scene(
    cfg: WorldConfig,
    rng: np.random.Generator,
    *,
    shapes: tuple[str, ...] | None = None,
    colors: tuple[str, ...] | None = None,
    n_objects: int | None = None,
    stuff: bool | None = None,
) -> Scene:
    """Sample a multi-object scene (attributes from ``shapes``/``colors`` pools, default the config's)."""
    cfg.check_scene_sizes()
    shapes = shapes or cfg.shapes
    colors = colors or cfg.colors
    use_stuff = cfg.stuff if stuff is None else stuff
    bg = _sample_background(cfg, rng, single=False, stuff=use_stuff)
    distractor = _maybe_distractor(cfg, rng)
    n = int(rng.integers(cfg.n_objects[0], cfg.n_objects[1] + 1)) if n_objects is None else n_objects
    objects: list[Object] = []
    masks: list[np.ndarray] = []
    for _ in range(n):
        shape, color = str(rng.choice(shapes)), str(rng.choice(colors))
        size_class, style = str(rng.choice(cfg.sizes)), str(rng.choice(cfg.styles))
        for _try in range(MAX_TRIES):
            obj = _draw_object(
                cfg,
                rng,
                shape=shape,
                color=color,
                size_class=size_class,
                style=style,
                single=False,
                z=len(objects),
            )
            mask = _full_mask(obj, cfg.image_size, cfg.supersample)
            if _visible_ok([*masks, mask], cfg):
                objects.append(obj)
                masks.append(mask)
                break
    return Scene(
        cfg.image_size,
        tuple(objects),
        bg,
        cfg.shapes,
        distractor,
        cfg.distractor.in_masks,
        cfg.supersample,
    )


def sample_single(cfg: WorldConfig, rng: np.random.Generator, *, style: str | None = None) -> Scene:
    """Sample a single-object image: one object (scaled-up size bins) on a drawn background."""
    shape, color = str(rng.choice(cfg.shapes)), str(rng.choice(cfg.colors))
    size_class = str(rng.choice(cfg.sizes))
    style = str(rng.choice(cfg.styles)) if style is None else style
    bg = _sample_background(cfg, rng, single=True, stuff=False)
    distractor = _maybe_distractor(cfg, rng)
    obj = _draw_object(
        cfg, rng, shape=shape, color=color, size_class=size_class, style=style, single=True, z=0
    )
    return Scene(cfg.image_size, (obj,), bg, cfg.shapes, distractor, cfg.distractor.in_masks, cfg.supersample)


def _face(size: int, x: float, y: float, r: float, supersample: int) -> tuple[np.ndarray, np.ndarray]:
    """Coverage of the face parts: (skin (H, W), features (H, W)), from implicit curves."""
    s = supersample
    offs = (np.arange(s) + 0.5) / s
    coords = (np.arange(size)[:, None] + offs[None, :]).reshape(-1)
    u = (coords[None, :] - x) / r
    v = (coords[:, None] - y) / r
    skin = (u / 0.8) ** 2 + (v / 1.0) ** 2 <= 1.0
    eyes = ((u - 0.32) ** 2 + (v + 0.25) ** 2 <= 0.13**2) | ((u + 0.32) ** 2 + (v + 0.25) ** 2 <= 0.13**2)
    mouth = (np.abs(u) <= 0.38) & (np.abs(v - 0.42) <= 0.07)
    features = skin & (eyes | mouth)

    def pool(a: np.ndarray) -> np.ndarray:
        return a.astype(np.float64).reshape(size, s, size, s).mean(axis=(1, 3))

    return pool(skin), pool(features)


def render(scene: Scene) -> Rendered:
    """Pixels, semantic and instance maps of a scene (a pure function of ``scene``)."""
    size, n_things = scene.size, len(scene.shapes)
    img = background_image(scene.background, size)
    semantic = np.full((size, size), n_things, dtype=np.int64)
    if scene.background.kind == "stuff":
        semantic[scene.background.boundary :] = n_things + 1
    instance = np.zeros((size, size), dtype=np.int64)
    if scene.distractor is not None:
        skin, features = _face(size, *scene.distractor, scene.supersample)
        img = img * (1 - skin[..., None]) + np.array([235.0, 212.0, 190.0]) * skin[..., None]
        img = img * (1 - features[..., None]) + np.array([30.0, 25.0, 25.0]) * features[..., None]
        if scene.distractor_in_masks:
            face = skin >= 0.5
            semantic[face] = n_things + (2 if scene.background.kind == "stuff" else 1)
            instance[face] = len(scene.objects) + 1
    shape_index = {s: k for k, s in enumerate(scene.shapes)}
    for obj in sorted(scene.objects, key=lambda o: o.z):
        layer, alpha, r0, c0 = object_layer(obj, size, scene.supersample)
        h, w = alpha.shape
        block = img[r0 : r0 + h, c0 : c0 + w]
        img[r0 : r0 + h, c0 : c0 + w] = block * (1 - alpha[..., None]) + layer * alpha[..., None]
        m = alpha >= 0.5
        semantic[r0 : r0 + h, c0 : c0 + w][m] = shape_index[obj.shape]
        instance[r0 : r0 + h, c0 : c0 + w][m] = obj.id
    image = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return Rendered(image, semantic, instance, scene.objects)
