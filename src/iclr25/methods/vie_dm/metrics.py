"""Metrics of generated referring expressions: oracle accuracy, CIDEr, BLEU, distinct-n, self-BLEU.

CIDEr-D and BLEU come from ``pycocoevalcap`` (their pure-Python scorers; the Java PTB tokenizer
and SPICE are not used: inputs are already lower-cased, space-tokenised sentences), METEOR from
``pycocoevalcap``'s METEOR 1.5 jar (it needs a ``java`` program) and self-BLEU from
``sacrebleu``. Oracle accuracy resolves each expression with the shapes world's
oracle listener against the scene ground truth.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (CIDEr / METEOR of REG,
    diversity of generated expressions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bleu", "cider", "distinct_n", "meteor", "meteor_available", "oracle_accuracy", "self_bleu"]


def oracle_accuracy(
    expressions: Sequence[str], scenes: Sequence[Any], targets: Sequence[int], listener: Any
) -> float:
    """Fraction of expressions the oracle listener resolves to their target object id.

    Args:
        expressions: one expression per row.
        scenes: the rendered scene of each row.
        targets: the target object id of each row.
        listener: an ``OracleListener`` (``resolve(expression, rendered) -> id or status``).
    """
    if not len(expressions) == len(scenes) == len(targets):
        raise ValueError("expressions, scenes and targets need the same length")
    if not expressions:
        return float("nan")
    hits = sum(listener.resolve(e, r) == t for e, r, t in zip(expressions, scenes, targets, strict=True))
    return hits / len(expressions)


def distinct_n(sentences: Sequence[str], n: int = 2) -> float:
    """Distinct-n: unique n-grams / all n-grams over ``sentences`` (0 when there is none).

    Example:
        >>> distinct_n(["a b c", "a b d"], 2)
        0.75
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    grams = [tuple(ws[i : i + n]) for s in sentences for ws in [s.split()] for i in range(len(ws) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def self_bleu(samples: Sequence[str]) -> float:
    """Mean sentence BLEU (sacrebleu, 0-100) of each sample against the other samples as references.

    Identical samples give 100; fewer than two samples give NaN.
    """
    import sacrebleu

    if len(samples) < 2:
        return float("nan")
    scores = []
    for i, hyp in enumerate(samples):
        refs = [s for j, s in enumerate(samples) if j != i]
        scores.append(sacrebleu.sentence_bleu(hyp, refs, smooth_method="exp", tokenize="none").score)
    return sum(scores) / len(scores)


def _check(gts: Mapping[Any, Sequence[str]], res: Mapping[Any, Sequence[str]]) -> None:
    if set(gts) != set(res):
        raise ValueError("gts and res need the same ids")
    if any(len(v) != 1 for v in res.values()):
        raise ValueError("res needs exactly one candidate sentence per id")
    if any(len(v) < 1 for v in gts.values()):
        raise ValueError("gts needs at least one reference per id")


def cider(gts: Mapping[Any, Sequence[str]], res: Mapping[Any, Sequence[str]]) -> float:
    """Corpus CIDEr-D (pycocoevalcap) of candidates ``res`` ``{id: [sentence]}`` against references
    ``gts`` ``{id: [sentences]}`` (COCO-caption layout; sentences already tokenised)."""
    from pycocoevalcap.cider.cider import Cider

    _check(gts, res)
    score, _ = Cider().compute_score(
        {k: list(v) for k, v in gts.items()}, {k: list(v) for k, v in res.items()}
    )
    return float(score)


def bleu(gts: Mapping[Any, Sequence[str]], res: Mapping[Any, Sequence[str]], n: int = 4) -> float:
    """Corpus BLEU-n (pycocoevalcap, 0-1) in the same layout as :func:`cider`."""
    import contextlib
    import io

    from pycocoevalcap.bleu.bleu import Bleu

    _check(gts, res)
    with contextlib.redirect_stdout(io.StringIO()):  # the scorer prints its ratios
        scores, _ = Bleu(n).compute_score(
            {k: list(v) for k, v in gts.items()}, {k: list(v) for k, v in res.items()}
        )
    return float(scores[-1])


def meteor_available() -> bool:
    """Whether :func:`meteor` can run (a ``java`` program on the PATH)."""
    import shutil

    return shutil.which("java") is not None


def meteor(
    gts: Mapping[Any, Sequence[str]],
    res: Mapping[Any, Sequence[str]] | Mapping[str, Mapping[Any, Sequence[str]]],
) -> float | dict[str, float]:
    """Corpus METEOR 1.5 (pycocoevalcap's jar, the paper's REG metric; 0-1) in the layout of
    :func:`cider`.

    Args:
        gts: references ``{id: [sentences]}``.
        res: candidates ``{id: [sentence]}``, or several candidate sets ``{name: {id: [sentence]}}``
            scored by one METEOR process (its start-up loads the paraphrase table, seconds).

    Returns:
        The score, or ``{name: score}`` for several candidate sets.

    Raises:
        RuntimeError: no ``java`` program (Debian: ``apt-get install default-jre``).
    """
    if not meteor_available():
        raise RuntimeError("METEOR needs Java: install a JRE (Debian: apt-get install default-jre)")
    from pycocoevalcap.meteor.meteor import Meteor

    several = bool(res) and all(isinstance(v, Mapping) for v in res.values())
    sets: dict[Any, Mapping[Any, Sequence[str]]] = dict(res) if several else {None: res}  # type: ignore[arg-type]
    for cand in sets.values():
        _check(gts, cand)
    refs = {k: list(v) for k, v in gts.items()}
    scorer = Meteor()
    try:
        out = {
            name: float(scorer.compute_score(refs, {k: list(v) for k, v in cand.items()})[0])
            for name, cand in sets.items()
        }
    finally:
        with scorer.lock:
            scorer.meteor_p.kill()
            scorer.meteor_p.communicate()  # closes its pipes
    return out if several else out[None]
