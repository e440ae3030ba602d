"""Shapes world: one seeded, CPU-fast generator of images, masks, prompts, expressions and videos.

The offline stand-in for the image data sets of the vision methods (BiGR, RMP-SAM, VIE-DM,
CLIP data-free distillation, Wicked Oddities). Every pixel and sentence is computed from a seed;
``GENERATOR_VERSION`` keys every cache and changes whenever rendered output changes.
See this folder's README for the conventions (uint8 HWC at the core, (x, y) points, XYXY boxes
with x2 = max_col + 1).

Example:
    >>> world = ShapesWorld(WorldConfig(image_size=32, sizes=("medium", "large")), seed=0)
    >>> r = world.panoptic(0)
    >>> r.image.shape, sorted(set(r.instance.ravel().tolist())) == [0] + [o.id for o in r.objects]
    ((32, 32, 3), True)
"""

from .config import GENERATOR_VERSION, DistractorConfig, LanguageConfig, VideoConfig, WorldConfig
from .export import (
    read_coco_panoptic_png,
    to_torchmetrics_panoptic,
    write_coco_panoptic,
    write_imagefolder,
    write_refer,
    write_ytvis,
)
from .language import AMBIGUOUS, NO_MATCH, UNPARSEABLE, Description, OracleListener, RefScene, vocabulary
from .prompts import center_click, clicks, mask_to_box, next_click
from .raster import coverage
from .scene import Background, Object, Rendered, Scene, item_rng, render
from .textures import texture_images
from .video import Track, Video
from .world import LABEL_SCHEMES, ShapesWorld, SingleObject, caption, prompt_templates

_TORCH_WRAPPERS = (
    "ShapesCaptions",
    "ShapesClassification",
    "ShapesPanoptic",
    "ShapesReferring",
    "ShapesVideo",
)


def __getattr__(name: str) -> object:
    # The torch wrappers import torch and torchvision only when first used.
    if name in _TORCH_WRAPPERS:
        from . import torch_datasets

        return getattr(torch_datasets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AMBIGUOUS",
    "GENERATOR_VERSION",
    "LABEL_SCHEMES",
    "NO_MATCH",
    "UNPARSEABLE",
    "Background",
    "Description",
    "DistractorConfig",
    "LanguageConfig",
    "Object",
    "OracleListener",
    "RefScene",
    "Rendered",
    "Scene",
    "ShapesCaptions",
    "ShapesClassification",
    "ShapesPanoptic",
    "ShapesReferring",
    "ShapesVideo",
    "ShapesWorld",
    "SingleObject",
    "Track",
    "Video",
    "VideoConfig",
    "WorldConfig",
    "caption",
    "center_click",
    "clicks",
    "coverage",
    "item_rng",
    "mask_to_box",
    "next_click",
    "prompt_templates",
    "read_coco_panoptic_png",
    "render",
    "texture_images",
    "to_torchmetrics_panoptic",
    "vocabulary",
    "write_coco_panoptic",
    "write_imagefolder",
    "write_refer",
    "write_ytvis",
]
