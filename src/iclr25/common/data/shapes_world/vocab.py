"""The words and values of the shapes world: shapes, colours, sizes, styles, stuff and synonyms.

Every table is a module constant, so two processes agree on them without any shared state.
Colour values are chosen so that the smallest pairwise palette distance (Euclidean, RGB) is more
than four times the largest per-channel jitter of :class:`~.config.WorldConfig` (a test checks it),
which keeps colour words unambiguous after jitter.
"""

from __future__ import annotations

__all__ = [
    "COLORS",
    "EXTREMES",
    "HELDOUT_STYLES",
    "RELATIONS",
    "SHAPES",
    "SIZES",
    "SIZE_BINS_64",
    "STUFF",
    "STYLES",
    "STYLE_WORDS",
    "SYNONYMS",
    "TEMPLATES",
]

#: Every shape the rasteriser draws; methods pick subsets in ``WorldConfig.shapes``.
SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "star", "hexagon", "diamond", "cross", "heart")

#: Colour name -> RGB (uint8 range). Pairwise distances are all > 4 x 12 (the default jitter).
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (215, 35, 35),
    "green": (35, 170, 55),
    "blue": (35, 75, 215),
    "yellow": (235, 215, 35),
    "purple": (135, 55, 185),
    "orange": (245, 135, 25),
    "cyan": (35, 205, 215),
    "white": (245, 245, 245),
}

#: Size classes and their radius bins in pixels at a 64-pixel image; gaps keep size words exact.
SIZES: tuple[str, ...] = ("small", "medium", "large")
SIZE_BINS_64: dict[str, tuple[float, float]] = {
    "small": (5.0, 7.0),
    "medium": (9.0, 11.0),
    "large": (13.0, 16.0),
}

#: Render styles used in training, and the held-out one for out-of-distribution tests.
STYLES: tuple[str, ...] = ("filled", "outline", "striped", "dotted", "noisy", "blurred")
HELDOUT_STYLES: tuple[str, ...] = ("checkered",)
STYLE_WORDS: dict[str, str] = {
    "filled": "solid",
    "outline": "outlined",
    "striped": "striped",
    "dotted": "dotted",
    "noisy": "noisy",
    "blurred": "blurry",
    "checkered": "checkered",
}

#: Stuff classes of panoptic scenes: a top band and a bottom band.
STUFF: tuple[str, ...] = ("sky", "ground")

#: Extreme and relation concepts of referring expressions.
EXTREMES: tuple[str, ...] = ("leftmost", "rightmost", "topmost", "lowest")
RELATIONS: tuple[str, ...] = ("left_of", "right_of", "above", "below")

#: Surface forms per concept: (train forms, held-out forms). Forms are lower-case and may be
#: multi-word; no form is a prefix-ambiguous duplicate of another concept's form.
SYNONYMS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # shapes
    "circle": (("circle", "disc"), ("round shape",)),
    "square": (("square", "box"), ("quadrate",)),
    "triangle": (("triangle", "trigon"), ("three-sided shape",)),
    "star": (("star", "pentagram"), ("five-pointed shape",)),
    "hexagon": (("hexagon", "hex"), ("six-sided shape",)),
    "diamond": (("diamond", "rhombus"), ("lozenge",)),
    "cross": (("cross", "plus"), ("plus sign",)),
    "heart": (("heart", "love shape"), ("valentine",)),
    # colours
    "red": (("red", "crimson"), ("scarlet",)),
    "green": (("green", "emerald"), ("leafy",)),
    "blue": (("blue", "azure"), ("navy",)),
    "yellow": (("yellow", "golden"), ("lemon",)),
    "purple": (("purple", "violet"), ("lilac",)),
    "orange": (("orange", "amber"), ("tangerine",)),
    "cyan": (("cyan", "turquoise"), ("aqua",)),
    "white": (("white", "snowy"), ("ivory",)),
    # sizes
    "small": (("small", "little"), ("tiny",)),
    "medium": (("medium", "mid-sized"), ("average-sized",)),
    "large": (("large", "big"), ("huge",)),
    # extremes
    "leftmost": (("leftmost", "left-most"), ("furthest left",)),
    "rightmost": (("rightmost", "right-most"), ("furthest right",)),
    "topmost": (("topmost", "highest"), ("uppermost",)),
    "lowest": (("lowest", "bottommost"), ("lowermost",)),
    # relations
    "left_of": (("left of", "to the left of"), ("on the left side of",)),
    "right_of": (("right of", "to the right of"), ("on the right side of",)),
    "above": (("above", "over"), ("higher than",)),
    "below": (("below", "under"), ("lower than",)),
}

#: Realisation templates: (train, held-out). ``{pre}`` holds the extreme, size and colour words
#: before the type; held-out templates move the colour after the type ("... that is red").
TEMPLATES: tuple[tuple[str, ...], tuple[str, ...]] = (
    ("the {pre}{type}{rel}", "{pre}{type}{rel}"),
    ("the {pre}{type} that is {color}{rel}",),
)
