"""Referring expressions with a known grammar, and the oracle listener that resolves them.

Grammar (one fixed form):
``[the] [EXTREME] [SIZE] [COLOR] TYPE [that is COLOR] [REL [the] [SIZE] [COLOR] TYPE]``.

Content selection follows the incremental algorithm: the type always; then colour, size, an
extreme (leftmost/rightmost/topmost/lowest among the objects matching the description so far)
and a relation to a landmark described by at most two attributes, each added only if it shrinks
the candidate set, until the target is the only match. With probability ``p_overspecify`` one
redundant attribute is added. An object that cannot be singled out is skipped, never described
ambiguously. Realisation picks a template and one surface form per concept; each list of forms is
split into train and held-out forms.

Geometry uses visible-mask centroids (x, y) and a margin m: ``left_of(a, b) <=> x_a + m < x_b``,
``above(a, b) <=> y_a + m < y_b``; near-ties are false both ways. Generator and listener call the
same predicate functions (:func:`relation_holds`, :func:`extreme_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from .config import WorldConfig
from .scene import Object, Rendered, render, sample_scene
from .vocab import EXTREMES, RELATIONS, SYNONYMS, TEMPLATES

__all__ = [
    "AMBIGUOUS",
    "NO_MATCH",
    "UNPARSEABLE",
    "Description",
    "OracleListener",
    "RefScene",
    "centroids",
    "describe",
    "extreme_of",
    "realise",
    "relation_holds",
    "sample_referring",
    "surface_forms",
    "vocabulary",
]

AMBIGUOUS = "AMBIGUOUS"
NO_MATCH = "NO_MATCH"
UNPARSEABLE = "UNPARSEABLE"

Forms = Literal["train", "heldout", "all"]
_FUNCTION_WORDS = ("the", "that", "is")


@dataclass(frozen=True)
class Landmark:
    """A landmark object's description: its type and at most one more attribute."""

    type: str
    color: str | None = None
    size: str | None = None


@dataclass(frozen=True)
class Description:
    """The concepts of one referring expression."""

    type: str
    color: str | None = None
    size: str | None = None
    extreme: str | None = None
    relation: str | None = None
    landmark: Landmark | None = None


@dataclass(frozen=True)
class RefScene:
    """A rendered scene and its expressions as ``(object_id, expression)`` pairs."""

    rendered: Rendered
    expressions: tuple[tuple[int, str], ...]
    descriptions: tuple[Description, ...]


# ----- shared predicates --------------------------------------------------------------------------
def centroids(rendered: Rendered) -> dict[int, tuple[float, float]]:
    """Visible-mask centroid (x, y) of every visible object, keyed by object id."""
    out = {}
    for obj in rendered.objects:
        rows, cols = np.nonzero(rendered.instance == obj.id)
        if rows.size:
            out[obj.id] = (float(cols.mean()) + 0.5, float(rows.mean()) + 0.5)
    return out


def relation_holds(relation: str, a: tuple[float, float], b: tuple[float, float], margin: float) -> bool:
    """Whether ``a`` stands in ``relation`` to ``b`` (centroids; near-ties are false both ways)."""
    if relation == "left_of":
        return a[0] + margin < b[0]
    if relation == "right_of":
        return a[0] > b[0] + margin
    if relation == "above":
        return a[1] + margin < b[1]
    if relation == "below":
        return a[1] > b[1] + margin
    raise ValueError(f"unknown relation {relation!r}; known: {', '.join(RELATIONS)}")


_EXTREME_AS_RELATION = {"leftmost": "left_of", "rightmost": "right_of", "topmost": "above", "lowest": "below"}


def extreme_of(
    ids: list[int], extreme: str, cents: dict[int, tuple[float, float]], margin: float
) -> int | None:
    """The candidate that is ``extreme`` against every other candidate by the margin, or None."""
    if extreme not in _EXTREME_AS_RELATION:
        raise ValueError(f"unknown extreme {extreme!r}; known: {', '.join(EXTREMES)}")
    rel = _EXTREME_AS_RELATION[extreme]
    for i in ids:
        if all(relation_holds(rel, cents[i], cents[j], margin) for j in ids if j != i):
            return i
    return None


def _matches(obj: Object, type_: str, color: str | None, size: str | None) -> bool:
    return obj.shape == type_ and (color is None or obj.color == color) and (size is None or obj.size == size)


def _evaluate(desc: Description, rendered: Rendered, margin: float) -> int | str:
    """Resolve a description against a scene (the listener's semantics)."""
    cents = centroids(rendered)
    visible = [o for o in rendered.objects if o.id in cents]
    cands = [o.id for o in visible if _matches(o, desc.type, desc.color, desc.size)]
    if desc.extreme is not None and cands:
        pick = extreme_of(cands, desc.extreme, cents, margin)
        if pick is None:
            return AMBIGUOUS
        cands = [pick]
    if desc.relation is not None:
        lm = desc.landmark
        assert lm is not None
        marks = [o.id for o in visible if _matches(o, lm.type, lm.color, lm.size)]
        if not marks:
            return NO_MATCH
        if len(marks) > 1:
            return AMBIGUOUS
        cands = [
            c
            for c in cands
            if c != marks[0] and relation_holds(desc.relation, cents[c], cents[marks[0]], margin)
        ]
    if not cands:
        return NO_MATCH
    return cands[0] if len(cands) == 1 else AMBIGUOUS


# ----- content selection --------------------------------------------------------------------------
def describe(
    target_id: int, rendered: Rendered, *, margin: float, rng: np.random.Generator, p_overspecify: float = 0.0
) -> Description | None:
    """The incremental algorithm's description of one object, or None if it cannot be singled out."""
    cents = centroids(rendered)
    if target_id not in cents:
        return None
    visible = [o for o in rendered.objects if o.id in cents]
    target = next(o for o in visible if o.id == target_id)

    def cands_of(d: Description) -> list[int]:
        return [o.id for o in visible if _matches(o, d.type, d.color, d.size)]

    desc = Description(type=target.shape)
    for field, value in (("color", target.color), ("size", target.size)):
        current = cands_of(desc)
        if len(current) > 1 and len(cands_of(replace(desc, **{field: value}))) < len(current):
            desc = replace(desc, **{field: value})
    current = cands_of(desc)
    if len(current) > 1:
        for extreme in rng.permutation(EXTREMES):
            if extreme_of(current, str(extreme), cents, margin) == target_id:
                desc = replace(desc, extreme=str(extreme))
                current = [target_id]
                break
    if len(current) > 1:
        desc = _add_relation(desc, target_id, current, visible, cents, margin, rng)
        if desc is None:
            return None
    if rng.random() < p_overspecify:
        if desc.color is None:
            desc = replace(desc, color=target.color)
        elif desc.size is None:
            desc = replace(desc, size=target.size)
    return desc


def _add_relation(
    desc: Description,
    target_id: int,
    current: list[int],
    visible: list[Object],
    cents: dict[int, tuple[float, float]],
    margin: float,
    rng: np.random.Generator,
) -> Description | None:
    """Add the first relation (random order) to a uniquely describable landmark that isolates the target."""
    for relation in rng.permutation(RELATIONS):
        for k in rng.permutation(len(visible)):
            mark = visible[int(k)]
            if mark.id == target_id or not relation_holds(
                str(relation), cents[target_id], cents[mark.id], margin
            ):
                continue
            landmark = _landmark_description(mark, visible)
            if landmark is None:
                continue
            left = [
                c
                for c in current
                if c != mark.id and relation_holds(str(relation), cents[c], cents[mark.id], margin)
            ]
            if left == [target_id]:
                return replace(desc, relation=str(relation), landmark=landmark)
    return None


def _landmark_description(mark: Object, visible: list[Object]) -> Landmark | None:
    for lm in (
        Landmark(mark.shape),
        Landmark(mark.shape, color=mark.color),
        Landmark(mark.shape, size=mark.size),
    ):
        if sum(_matches(o, lm.type, lm.color, lm.size) for o in visible) == 1:
            return lm
    return None


# ----- realisation --------------------------------------------------------------------------------
def surface_forms(concept: str, forms: Forms = "train") -> tuple[str, ...]:
    """The surface forms of a concept: train, held-out, or all."""
    train, heldout = SYNONYMS[concept]
    if forms == "train":
        return train
    if forms == "heldout":
        return heldout
    if forms == "all":
        return train + heldout
    raise ValueError(f"forms must be 'train', 'heldout' or 'all', got {forms!r}")


def _templates(forms: Forms) -> tuple[str, ...]:
    if forms == "train":
        return TEMPLATES[0]
    if forms == "heldout":
        return TEMPLATES[1]
    return TEMPLATES[0] + TEMPLATES[1]


def realise(
    desc: Description, *, rng: np.random.Generator, forms: Forms = "train", max_tokens: int = 12
) -> str | None:
    """A sentence for a description (None if even its shortest wording exceeds ``max_tokens``)."""
    for shortest in (False, True):
        text = _realise_once(desc, rng, forms, shortest)
        if len(text.split()) <= max_tokens:
            return text
    return None


def _realise_once(desc: Description, rng: np.random.Generator, forms: Forms, shortest: bool) -> str:
    def word(concept: str) -> str:
        options = surface_forms(concept, forms)
        if shortest:
            return min(options, key=lambda s: (len(s.split()), s))
        return str(options[int(rng.integers(len(options)))])

    templates = [t for t in _templates(forms) if desc.color is not None or "{color}" not in t]
    templates = templates or list(TEMPLATES[0])
    if shortest:
        template = min(templates, key=lambda t: len(t.split()))
    else:
        template = templates[int(rng.integers(len(templates)))]
    post_color = "{color}" in template
    pre = [desc.extreme, desc.size] + ([] if post_color else [desc.color])
    pre_text = "".join(word(c) + " " for c in pre if c is not None)
    rel = ""
    if desc.relation is not None:
        lm = desc.landmark
        assert lm is not None
        lm_words = [word(c) for c in (lm.size, lm.color) if c is not None]
        rel = " " + " ".join([word(desc.relation), "the", *lm_words, word(lm.type)])
    color = word(desc.color) if post_color and desc.color is not None else ""
    return template.format(pre=pre_text, type=word(desc.type), color=color, rel=rel)


def vocabulary(config: WorldConfig, forms: Forms = "all") -> tuple[str, ...]:
    """Every word an expression of this world can use (sorted)."""
    concepts = [*config.shapes, *config.colors, *config.sizes, *EXTREMES, *RELATIONS]
    words = set(_FUNCTION_WORDS)
    for c in concepts:
        for form in surface_forms(c, forms):
            words.update(form.split())
    return tuple(sorted(words))


# ----- scenes -------------------------------------------------------------------------------------
def sample_referring(cfg: WorldConfig, rng: np.random.Generator, *, forms: Forms = "train") -> RefScene:
    """A scene whose attributes come from a small pool (so distractors share them), with expressions."""
    lang = cfg.language
    n_shapes = min(len(cfg.shapes), int(rng.integers(lang.shapes_per_scene[0], lang.shapes_per_scene[1] + 1)))
    n_colors = min(len(cfg.colors), int(rng.integers(lang.colors_per_scene[0], lang.colors_per_scene[1] + 1)))
    shapes = tuple(str(s) for s in rng.choice(cfg.shapes, size=n_shapes, replace=False))
    colors = tuple(str(c) for c in rng.choice(cfg.colors, size=n_colors, replace=False))
    rendered = render(sample_scene(cfg, rng, shapes=shapes, colors=colors))
    margin = _margin(cfg)
    pairs, descs = [], []
    for obj in rendered.objects:
        desc = describe(obj.id, rendered, margin=margin, rng=rng, p_overspecify=lang.p_overspecify)
        if desc is None:
            continue
        text = realise(desc, rng=rng, forms=forms, max_tokens=lang.max_tokens)
        if text is not None:
            pairs.append((obj.id, text))
            descs.append(desc)
    return RefScene(rendered, tuple(pairs), tuple(descs))


def _margin(cfg: WorldConfig) -> float:
    return cfg.language.margin if cfg.language.margin is not None else cfg.image_size / 16.0


# ----- listener -----------------------------------------------------------------------------------
class OracleListener:
    """Resolves an expression to an object id, or AMBIGUOUS / NO_MATCH / UNPARSEABLE.

    Longest-match tokenisation over every surface form (multi-word phrases included) turns the
    words into concepts; the fixed grammar reads them; the same predicates as the generator
    evaluate them.

    Args:
        config: the world's config (its margin and vocabulary).
    """

    def __init__(self, config: WorldConfig) -> None:
        self.config = config
        self.margin = _margin(config)
        self._lexicon: dict[tuple[str, ...], tuple[str, str]] = {}
        kinds = {"TYPE": config.shapes, "COLOR": config.colors, "SIZE": config.sizes}
        kinds |= {"EXTREME": EXTREMES, "REL": RELATIONS}
        for kind, concepts in kinds.items():
            for concept in concepts:
                for form in surface_forms(concept, "all"):
                    self._lexicon[tuple(form.split())] = (kind, concept)
        for w in _FUNCTION_WORDS:
            self._lexicon.setdefault((w,), (w.upper(), w))
        self._longest = max(len(k) for k in self._lexicon)

    def tokens(self, expression: str) -> list[tuple[str, str]] | None:
        """Concept tokens ``(kind, concept)`` of an expression, or None if a word is unknown."""
        words = expression.lower().split()
        out, i = [], 0
        while i < len(words):
            for n in range(min(self._longest, len(words) - i), 0, -1):
                hit = self._lexicon.get(tuple(words[i : i + n]))
                if hit is not None:
                    out.append(hit)
                    i += n
                    break
            else:
                return None
        return out

    def parse(self, expression: str) -> Description | None:
        """The description an expression states, or None if it does not follow the grammar."""
        toks = self.tokens(expression)
        if not toks:
            return None
        pos = 0

        def take(kind: str) -> str | None:
            nonlocal pos
            if pos < len(toks) and toks[pos][0] == kind:
                pos += 1
                return toks[pos - 1][1]
            return None

        take("THE")
        extreme, size, color = take("EXTREME"), take("SIZE"), take("COLOR")
        type_ = take("TYPE")
        if type_ is None:
            return None
        if color is None and take("THAT") is not None:
            if take("IS") is None:
                return None
            color = take("COLOR")
            if color is None:
                return None
        relation = take("REL")
        landmark = None
        if relation is not None:
            take("THE")
            lm_size, lm_color, lm_type = take("SIZE"), take("COLOR"), take("TYPE")
            if lm_type is None:
                return None
            landmark = Landmark(lm_type, lm_color, lm_size)
        if pos != len(toks):
            return None
        return Description(type_, color, size, extreme, relation, landmark)

    def resolve(self, expression: str, rendered: Rendered) -> int | str:
        """The object id the expression singles out in ``rendered``, or a status string."""
        desc = self.parse(expression)
        if desc is None:
            return UNPARSEABLE
        return _evaluate(desc, rendered, self.margin)
