"""Frozen configurations of the shapes world and the generator version that keys every cache."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .vocab import COLORS, HELDOUT_STYLES, SHAPES, SIZE_BINS_64, SIZES, STYLES

__all__ = ["GENERATOR_VERSION", "DistractorConfig", "LanguageConfig", "VideoConfig", "WorldConfig"]

#: Bumped whenever rendered output changes for a fixed (config, seed, split, index).
GENERATOR_VERSION = "1"

BACKGROUNDS: tuple[str, ...] = ("plain", "tint", "noise", "gradient")


@dataclass(frozen=True)
class DistractorConfig:
    """The optional face-like blob (pale oval, two dark eyes, a mouth line).

    Args:
        p: probability that an image carries one.
        in_masks: give it its own instance and the last semantic id (default: never in masks).
    """

    p: float = 0.0
    in_masks: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.p <= 1.0:
            raise ValueError(f"distractor p must be in [0, 1], got {self.p}")


@dataclass(frozen=True)
class VideoConfig:
    """Motion of video objects, in pixels per frame at a 64-pixel image (scaled with image size)."""

    num_frames: int = 4
    speed: tuple[float, float] = (1.0, 3.0)

    def __post_init__(self) -> None:
        if self.num_frames < 1:
            raise ValueError(f"num_frames must be at least 1, got {self.num_frames}")
        if not 0.0 <= self.speed[0] <= self.speed[1]:
            raise ValueError(f"speed must be an increasing pair of non-negative numbers, got {self.speed}")


@dataclass(frozen=True)
class LanguageConfig:
    """Referring-expression scenes and their grammar.

    Args:
        shapes_per_scene: (min, max) distinct shapes a referring scene draws from.
        colors_per_scene: (min, max) distinct colours a referring scene draws from.
        p_overspecify: probability of one redundant attribute.
        margin: spatial margin in pixels for relations and extremes (None: image_size / 16).
        max_tokens: the longest expression, in whitespace tokens.
    """

    shapes_per_scene: tuple[int, int] = (2, 3)
    colors_per_scene: tuple[int, int] = (2, 3)
    p_overspecify: float = 0.1
    margin: float | None = None
    max_tokens: int = 12

    def __post_init__(self) -> None:
        for name in ("shapes_per_scene", "colors_per_scene"):
            lo, hi = getattr(self, name)
            if not 1 <= lo <= hi:
                raise ValueError(f"{name} must be an increasing pair of positive integers, got {(lo, hi)}")
        if not 0.0 <= self.p_overspecify <= 1.0:
            raise ValueError(f"p_overspecify must be in [0, 1], got {self.p_overspecify}")


@dataclass(frozen=True)
class WorldConfig:
    """What the world draws. Sizes scale with ``image_size`` (the bins are given at 64 pixels).

    Args:
        image_size: height = width in pixels.
        shapes: shape names (subset of ``vocab.SHAPES``); thing classes in this order.
        colors: colour names (subset of ``vocab.COLORS``).
        sizes: size classes (subset of ``vocab.SIZES``).
        styles: render styles of objects (from ``vocab.STYLES`` and the held-out ``checkered``).
        n_objects: (min, max) objects per scene.
        backgrounds: single-object backgrounds to draw from.
        single_object_scale: radius factor of single-object images over the scene bins, so a
            lone object fills a small image (16 px: radii 2.5-8 px).
        color_jitter: largest per-channel colour jitter (uint8 units).
        rotation_jitter: largest rotation in degrees (never applied to squares and diamonds).
        min_visible_fraction: an object less visible than this is re-placed.
        min_visible_pixels: an object with fewer visible pixels is re-placed.
        supersample: s x s samples per pixel for anti-aliased coverage.
        stuff: panoptic scenes have sky and ground bands.
        distractor: the face-like blob.
        video: object motion.
        language: referring expressions.
    """

    image_size: int = 64
    shapes: tuple[str, ...] = ("circle", "square", "triangle", "star")
    colors: tuple[str, ...] = ("red", "green", "blue", "yellow")
    sizes: tuple[str, ...] = SIZES
    styles: tuple[str, ...] = ("filled",)
    n_objects: tuple[int, int] = (1, 4)
    backgrounds: tuple[str, ...] = BACKGROUNDS
    single_object_scale: float = 2.0
    color_jitter: int = 12
    rotation_jitter: float = 0.0
    min_visible_fraction: float = 0.5
    min_visible_pixels: int = 12
    supersample: int = 4
    stuff: bool = True
    distractor: DistractorConfig = field(default_factory=DistractorConfig)
    video: VideoConfig = field(default_factory=VideoConfig)
    language: LanguageConfig = field(default_factory=LanguageConfig)

    def __post_init__(self) -> None:
        _check_subset("shape", self.shapes, SHAPES)
        _check_subset("colour", self.colors, tuple(COLORS))
        _check_subset("size", self.sizes, SIZES)
        _check_subset("style", self.styles, STYLES + HELDOUT_STYLES)
        _check_subset("background", self.backgrounds, BACKGROUNDS)
        if self.image_size < 8:
            raise ValueError(f"image_size must be at least 8 pixels, got {self.image_size}")
        lo, hi = self.n_objects
        if not 1 <= lo <= hi:
            raise ValueError(f"n_objects must be an increasing pair of positive integers, got {(lo, hi)}")
        if not 0 <= self.color_jitter <= 12:
            raise ValueError(
                f"color_jitter must be in [0, 12] to keep colour words exact, got {self.color_jitter}"
            )
        if self.supersample < 1:
            raise ValueError(f"supersample must be at least 1, got {self.supersample}")
        if not 0.0 <= self.min_visible_fraction <= 1.0:
            raise ValueError(f"min_visible_fraction must be in [0, 1], got {self.min_visible_fraction}")
        if self.single_object_scale <= 0:
            raise ValueError(f"single_object_scale must be positive, got {self.single_object_scale}")

    def radius_bin(self, size: str, *, single: bool = False) -> tuple[float, float]:
        """Radius range in pixels of a size class at this image size."""
        lo, hi = SIZE_BINS_64[size]
        scale = self.image_size / 64.0 * (self.single_object_scale if single else 1.0)
        return lo * scale, hi * scale

    def check_scene_sizes(self) -> None:
        """Raise if the smallest scene object would be too small to draw (radius < 2 pixels)."""
        smallest = min(self.radius_bin(s)[0] for s in self.sizes)
        if smallest < 2.0:
            need = math.ceil(2.0 * 64 / min(SIZE_BINS_64[s][0] for s in self.sizes))
            raise ValueError(
                f"image_size {self.image_size} is too small for the size bins of scenes (smallest radius "
                f"{smallest:.2f} px < 2 px); use at least {need} pixels or drop the small size"
            )


def _check_subset(kind: str, chosen: tuple[str, ...], known: tuple[str, ...]) -> None:
    if not chosen:
        raise ValueError(f"at least one {kind} is needed")
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise ValueError(f"unknown {kind}(s) {unknown}; known: {', '.join(known)}")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"repeated {kind} in {chosen}")
