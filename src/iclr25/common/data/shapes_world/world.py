"""``ShapesWorld``: the seeded entry point to images, masks, videos, prompts and expressions."""

from __future__ import annotations

import itertools
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .config import WorldConfig
from .language import Forms, RefScene, sample_referring
from .scene import Object, Rendered, Scene, item_rng, render, sample_scene, sample_single, split_code
from .video import Video, sample_video
from .vocab import STUFF, STYLE_WORDS

__all__ = ["LABEL_SCHEMES", "ShapesWorld", "SingleObject", "caption", "prompt_templates"]

LabelScheme = Literal["shape", "color", "shape_color", "style", "size"]
LABEL_SCHEMES: tuple[str, ...] = ("shape", "color", "shape_color", "style", "size")


@dataclass(frozen=True)
class SingleObject:
    """Attributes of a single-object image."""

    shape: str
    color: str
    size: str
    style: str
    center: tuple[float, float]
    radius: float
    background: str


def caption(attrs: SingleObject | Object, *, template: str | None = None) -> str:
    """A caption "a {style} {color} {shape}", or ``template`` filled with that phrase.

    Example:
        >>> caption(SingleObject("star", "red", "small", "striped", (4.0, 4.0), 2.0, "plain"))
        'a striped red star'
    """
    phrase = f"{STYLE_WORDS[attrs.style]} {attrs.color} {attrs.shape}"
    if template is None:
        return f"a {phrase}"
    if "{}" not in template:
        raise ValueError(f"a caption template needs one '{{}}' slot, got {template!r}")
    return template.format(phrase)


def prompt_templates() -> tuple[str, ...]:
    """Text-prompt templates for class names (CLIP-style zero-shot heads)."""
    return ("a {}", "a photo of a {}", "a drawing of a {}")


class ShapesWorld:
    """Seeded procedural world of coloured shapes.

    The same ``(seed, split, index)`` always gives the same pixels, in any process and any access
    order; splits ("train", "val", "test", or any other name) are independent streams.

    Args:
        config: what the world draws.
        seed: the world's seed.

    Example:
        >>> world = ShapesWorld(WorldConfig(image_size=16), seed=0)
        >>> X, y = world.classification_arrays(8, split="train")
        >>> X.shape, X.dtype.name, int(y.max()) < 16
        ((8, 16, 16, 3), 'uint8', True)
    """

    def __init__(self, config: WorldConfig | None = None, *, seed: int) -> None:
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.config = config or WorldConfig()
        self.seed = int(seed)

    # ----- single objects -------------------------------------------------------------------
    def single_object(
        self, i: int, *, split: str = "train", label_scheme: LabelScheme = "shape_color"
    ) -> tuple[np.ndarray, int, SingleObject]:
        """One object on a background: ``(image uint8 (H, W, 3), label, attributes)``."""
        scene = sample_single(self.config, item_rng(self.seed, split, "single", i))
        obj = scene.objects[0]
        attrs = SingleObject(
            obj.shape, obj.color, obj.size, obj.style, obj.center, obj.radius, scene.background.kind
        )
        return render(scene).image, self.label(attrs, label_scheme), attrs

    def label(self, attrs: SingleObject | Object, scheme: LabelScheme = "shape_color") -> int:
        """Class index of an object under a label scheme (order of :meth:`class_names`)."""
        cfg = self.config
        if scheme == "shape":
            return cfg.shapes.index(attrs.shape)
        if scheme == "color":
            return cfg.colors.index(attrs.color)
        if scheme == "shape_color":
            return cfg.shapes.index(attrs.shape) * len(cfg.colors) + cfg.colors.index(attrs.color)
        if scheme == "style":
            return cfg.styles.index(attrs.style)
        if scheme == "size":
            return cfg.sizes.index(attrs.size)
        raise ValueError(f"unknown label scheme {scheme!r}; known: {', '.join(LABEL_SCHEMES)}")

    def classification_arrays(
        self,
        n: int,
        *,
        split: str = "train",
        label_scheme: LabelScheme = "shape_color",
        start: int = 0,
        workers: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Items ``start .. start + n - 1`` of :meth:`single_object` as arrays.

        Args:
            workers: processes drawing the items; any number gives the same bytes.

        Returns:
            ``(X, y)``: uint8 (n, H, W, 3) and int64 (n,).
        """
        if label_scheme not in LABEL_SCHEMES:
            raise ValueError(f"unknown label scheme {label_scheme!r}; known: {', '.join(LABEL_SCHEMES)}")
        return _in_chunks(self, "single", n, split, start, workers, label_scheme)

    def panoptic_arrays(
        self, n: int, *, split: str = "train", start: int = 0, workers: int = 1
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Items ``start .. start + n - 1`` of :meth:`panoptic` as arrays.

        Args:
            workers: processes drawing the items; any number gives the same bytes.

        Returns:
            ``(images, semantic, instance)``: uint8 (n, H, W, 3), and int16 (n, H, W) category and
            instance ids (as :class:`Rendered`, in a smaller type).

        Example:
            >>> world = ShapesWorld(WorldConfig(image_size=32), seed=0)
            >>> images, semantic, instance = world.panoptic_arrays(4)
            >>> images.shape, semantic.dtype.name, bool((instance[1] == world.panoptic(1).instance).all())
            ((4, 32, 32, 3), 'int16', True)
        """
        return _in_chunks(self, "scene", n, split, start, workers, None)

    def class_names(self, scheme: str = "shape_color") -> tuple[str, ...]:
        """Class names of a label scheme; "panoptic" lists things (shapes) then stuff."""
        cfg = self.config
        if scheme == "shape":
            return cfg.shapes
        if scheme == "color":
            return cfg.colors
        if scheme == "shape_color":
            return tuple(f"{c} {s}" for s in cfg.shapes for c in cfg.colors)
        if scheme == "style":
            return tuple(STYLE_WORDS[s] for s in cfg.styles)
        if scheme == "size":
            return cfg.sizes
        if scheme == "panoptic":
            return cfg.shapes + (STUFF if cfg.stuff else ("background",))
        raise ValueError(f"unknown scheme {scheme!r}; known: {', '.join(LABEL_SCHEMES)}, panoptic")

    # ----- scenes -----------------------------------------------------------------------------
    def scene(self, i: int, *, split: str = "train") -> Scene:
        """A multi-object panoptic scene (plain data; :meth:`render` draws it)."""
        return sample_scene(self.config, item_rng(self.seed, split, "scene", i))

    @staticmethod
    def render(scene: Scene) -> Rendered:
        """Image, semantic map and instance map of a scene."""
        return render(scene)

    def panoptic(self, i: int, *, split: str = "train") -> Rendered:
        """``render(scene(i))``."""
        return render(self.scene(i, split=split))

    # ----- videos and language ----------------------------------------------------------------
    def video(self, i: int, *, split: str = "train", num_frames: int | None = None) -> Video:
        """A short video of moving objects (``num_frames`` defaults to the config's)."""
        frames = self.config.video.num_frames if num_frames is None else num_frames
        return sample_video(self.config, item_rng(self.seed, split, "video", i), frames)

    def referring(self, i: int, *, split: str = "train", forms: Forms = "train") -> RefScene:
        """A referring scene: attributes from a small pool, expressions for every describable object."""
        return sample_referring(self.config, item_rng(self.seed, split, "referring", i), forms=forms)


def _draw_chunk(
    config: WorldConfig,
    seed: int,
    kind: str,
    split: str,
    start: int,
    n: int,
    label_scheme: LabelScheme | None,
) -> tuple[np.ndarray, ...]:
    """Items ``start .. start + n - 1`` of one kind as arrays (run in the calling or a worker process)."""
    world = ShapesWorld(config, seed=seed)
    size = config.image_size
    images = np.empty((n, size, size, 3), dtype=np.uint8)
    if kind == "single":
        labels = np.empty(n, dtype=np.int64)
        for k in range(n):
            images[k], labels[k], _ = world.single_object(start + k, split=split, label_scheme=label_scheme)
        return images, labels
    semantic = np.empty((n, size, size), dtype=np.int16)
    instance = np.empty((n, size, size), dtype=np.int16)
    for k in range(n):
        r = world.panoptic(start + k, split=split)
        images[k], semantic[k], instance[k] = r.image, r.semantic, r.instance
    return images, semantic, instance


def _in_chunks(
    world: ShapesWorld,
    kind: str,
    n: int,
    split: str,
    start: int,
    workers: int,
    label_scheme: LabelScheme | None,
) -> tuple[np.ndarray, ...]:
    """:func:`_draw_chunk` over ``n`` items, split among ``workers`` processes when above one."""
    if n < 0 or start < 0:
        raise ValueError(f"n and start must be non-negative, got n={n}, start={start}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    split_code(split)  # a bad split fails here, not in a worker
    args = (world.config, world.seed, kind, split)
    if workers == 1 or n < 2 * workers:
        return _draw_chunk(*args, start, n, label_scheme)
    bounds = np.linspace(0, n, workers + 1).astype(int)
    # fork starts a worker in milliseconds (spawn would import torch again); elsewhere, the default.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    chunks = [(*args, start + a, b - a, label_scheme) for a, b in itertools.pairwise(bounds)]
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        parts = list(pool.map(_draw_chunk, *zip(*chunks, strict=True)))
    return tuple(np.concatenate(arrays) for arrays in zip(*parts, strict=True))
