"""Comparison records, converters, and embedding of records into tensors for PAL.

PAL (*PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*, Chen et al.,
ICLR 2025, arXiv:2406.08469) learns from pairwise comparisons (user, prompt, left, right, label).
Here ``label`` = 0 when the left response is preferred and 1 when the right one is (the
cross-entropy target). Converters read the official +-1 convention (y = -1: left preferred),
``chosen/rejected`` columns, and TRL-style preference records (``prompt``/``chosen``/``rejected``
plus ``user_id``, as a list of dicts or a column mapping such as a ``pandas.DataFrame`` or a
``datasets.Dataset``); chosen/rejected sides are drawn by a seeded RNG, so there is no position bias.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "RECORD_COLUMNS",
    "Comparisons",
    "EmbeddedComparisons",
    "check_finite",
    "embed_comparisons",
    "from_chosen_rejected",
    "from_records",
    "from_signed",
]

#: Columns of a TRL-style personalised preference record: the ``prompt``/``chosen``/``rejected``
#: columns of TRL's explicit-prompt preference format plus the ``user_id`` PAL needs.
RECORD_COLUMNS = ("user_id", "prompt", "chosen", "rejected")


@dataclass(frozen=True)
class Comparisons:
    """Pairwise comparisons in the common schema ``(user_id, prompt, left, right, label)``.

    Args:
        user_id: one id per comparison.
        prompt: prompts x.
        left: left responses.
        right: right responses.
        label: 0 = left preferred, 1 = right preferred.

    Example:
        >>> ds = Comparisons(["u"], ["p"], ["a"], ["bb"], [1])
        >>> len(ds), ds.users()
        (1, ['u'])
    """

    user_id: tuple[str, ...]
    prompt: tuple[str, ...]
    left: tuple[str, ...]
    right: tuple[str, ...]
    label: tuple[int, ...]

    def __init__(
        self,
        user_id: Sequence[str],
        prompt: Sequence[str],
        left: Sequence[str],
        right: Sequence[str],
        label: Sequence[int],
    ) -> None:
        cols = {"user_id": user_id, "prompt": prompt, "left": left, "right": right, "label": label}
        lens = {k: len(v) for k, v in cols.items()}
        if len(set(lens.values())) != 1:
            raise ValueError(f"columns have mismatched lengths: {lens}")
        labels = [int(v) for v in label]
        bad = sorted({v for v in labels if v not in (0, 1)})
        if bad or any(float(v) != int(v) for v in label):
            raise ValueError(f"labels must be 0 (left) or 1 (right); got {bad or 'non-integers'}")
        for k in ("user_id", "prompt", "left", "right"):
            object.__setattr__(self, k, tuple(str(v) for v in cols[k]))
        object.__setattr__(self, "label", tuple(labels))

    def __len__(self) -> int:
        return len(self.label)

    def users(self) -> list[str]:
        """Distinct user ids in first-seen order."""
        return list(dict.fromkeys(self.user_id))

    def select(self, idx: Sequence[int]) -> Comparisons:
        """The comparisons at positions ``idx``."""
        return Comparisons(
            *([col[i] for i in idx] for col in (self.user_id, self.prompt, self.left, self.right, self.label))
        )

    def with_users(self, user_id: Sequence[str]) -> Comparisons:
        """A copy with the user ids replaced (e.g. shuffled, for a negative control)."""
        return Comparisons(user_id, self.prompt, self.left, self.right, self.label)


def from_signed(
    user_id: Sequence[str], prompt: Sequence[str], left: Sequence[str], right: Sequence[str], y: Sequence[int]
) -> Comparisons:
    """From the official +-1 convention: y = -1 means the **left** response is preferred.

    Example:
        >>> from_signed(["u", "u"], ["p", "p"], ["a", "a"], ["b", "b"], [-1, 1]).label
        (0, 1)
    """
    bad = sorted({int(v) for v in y if v not in (-1, 1)})
    if bad:
        raise ValueError(f"signed labels must be -1 (left) or +1 (right), got {bad}")
    return Comparisons(user_id, prompt, left, right, [0 if v == -1 else 1 for v in y])


def from_chosen_rejected(
    user_id: Sequence[str],
    prompt: Sequence[str],
    chosen: Sequence[str],
    rejected: Sequence[str],
    *,
    rng: np.random.Generator,
) -> Comparisons:
    """From ``chosen/rejected`` rows; the chosen response goes left or right by a seeded coin.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> ds = from_chosen_rejected(["u"] * 4, ["p"] * 4, ["c"] * 4, ["r"] * 4, rng=rng)
        >>> all((l == "c") == (y == 0) for l, y in zip(ds.left, ds.label))
        True
    """
    if not (len(user_id) == len(prompt) == len(chosen) == len(rejected)):
        raise ValueError("user_id, prompt, chosen and rejected must have the same length")
    flip = rng.random(len(chosen)) < 0.5
    left = [r if f else c for c, r, f in zip(chosen, rejected, flip, strict=True)]
    right = [c if f else r for c, r, f in zip(chosen, rejected, flip, strict=True)]
    return Comparisons(user_id, prompt, left, right, [int(f) for f in flip])


def _column(records: Any, name: str) -> list[Any]:
    try:
        return list(records[name])
    except (KeyError, IndexError, TypeError, ValueError):
        raise ValueError(f"records have no column {name!r} (need {list(RECORD_COLUMNS)})") from None


def from_records(records: Any, *, rng: np.random.Generator) -> Comparisons:
    """From TRL-style preference records with a user id: ``user_id, prompt, chosen, rejected``.

    Accepts a sequence of mappings (``[{"user_id": ..., "prompt": ..., "chosen": ...,
    "rejected": ...}, ...]``) or a column mapping whose ``records[name]`` gives one column: a
    dict of lists, a ``pandas.DataFrame`` or a ``datasets.Dataset``. Extra columns are ignored.
    Texts must be strings (TRL's conversational format, lists of messages, is not accepted:
    apply a chat template first). The chosen response goes left or right by a coin of ``rng``.

    Args:
        records: the rows or columns.
        rng: the coin for the sides.

    Returns:
        The :class:`Comparisons`.

    Raises:
        ValueError: a missing column or mismatched lengths. TypeError: a text that is not a string.

    Example:
        >>> rows = [{"user_id": "u", "prompt": "p", "chosen": "good", "rejected": "bad"}]
        >>> ds = from_records(rows, rng=np.random.default_rng(0))
        >>> (ds.left, ds.right)[ds.label[0]]
        ('good',)
    """
    if isinstance(records, (str, bytes)):
        raise TypeError("records must be a sequence of mappings or a column mapping, not a string")
    if isinstance(records, Sequence) and not isinstance(records, Mapping):
        rows = list(records)
        if not all(isinstance(r, Mapping) for r in rows):
            raise TypeError("a sequence of records must hold mappings (one dict per comparison)")
        missing = sorted({c for r in rows for c in RECORD_COLUMNS if c not in r})
        if missing:
            raise ValueError(f"records lack the column(s) {missing} (need {list(RECORD_COLUMNS)})")
        cols = {c: [r[c] for r in rows] for c in RECORD_COLUMNS}
    else:
        cols = {c: _column(records, c) for c in RECORD_COLUMNS}
    lens = {c: len(v) for c, v in cols.items()}
    if len(set(lens.values())) != 1:
        raise ValueError(f"record columns have mismatched lengths: {lens}")
    for c in ("prompt", "chosen", "rejected"):
        bad = next((v for v in cols[c] if not isinstance(v, str)), None)
        if bad is not None:
            raise TypeError(
                f"column {c!r} must hold strings, got {type(bad).__name__} (apply a chat template "
                "to conversational records first)"
            )
    return from_chosen_rejected(
        [str(u) for u in cols["user_id"]], cols["prompt"], cols["chosen"], cols["rejected"], rng=rng
    )


def check_finite(x: Tensor, name: str) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or infinite values (training would reach a NaN loss).

    Example:
        >>> check_finite(torch.tensor([[1.0, float("nan")]]), "left_emb")
        Traceback (most recent call last):
        ...
        ValueError: left_emb has 1 NaN or infinite value(s), first in row 0
    """
    bad = ~torch.isfinite(x)
    if bad.any():
        row = int(bad.reshape(bad.shape[0], -1).any(1).nonzero()[0, 0]) if bad.dim() else 0
        raise ValueError(f"{name} has {int(bad.sum())} NaN or infinite value(s), first in row {row}")


@dataclass
class EmbeddedComparisons:
    """Comparisons as tensors: what :class:`~iclr25.methods.pal.PALEstimator` consumes.

    Args:
        user_id: one id per comparison.
        prompt: prompt embeddings (None for PAL-A, whose items embed prompt + response jointly).
        left: left item embeddings.
        right: right item embeddings.
        label: 0/1 labels.

    Shape:
        prompt, left, right: (n, d); label: (n,).
    """

    user_id: list[str]
    prompt: Tensor | None
    left: Tensor
    right: Tensor
    label: Tensor

    def __len__(self) -> int:
        return int(self.label.shape[0])

    def select(self, idx: Sequence[int]) -> EmbeddedComparisons:
        """The rows at positions ``idx``."""
        ix = torch.as_tensor(list(idx), dtype=torch.long)
        return EmbeddedComparisons(
            [self.user_id[i] for i in idx],
            None if self.prompt is None else self.prompt[ix],
            self.left[ix],
            self.right[ix],
            self.label[ix],
        )


def embed_comparisons(ds: Comparisons, encoder: object, *, joint: bool) -> EmbeddedComparisons:
    """Embed each distinct text once with ``encoder`` (PAL-A: ``joint=True``, prompt + response).

    Args:
        ds: the comparisons.
        encoder: an object with ``dim`` and ``encode(texts)``.
        joint: embed ``prompt + response`` together (PAL-A) instead of separately (PAL-B).

    Returns:
        The :class:`EmbeddedComparisons`, on the CPU whatever device the encoder runs on (the
        trainers move the rows they use).
    """
    if joint:
        lt = [p + r for p, r in zip(ds.prompt, ds.left, strict=True)]
        rt = [p + r for p, r in zip(ds.prompt, ds.right, strict=True)]
        texts = list(dict.fromkeys(lt + rt))
    else:
        lt, rt = list(ds.left), list(ds.right)
        texts = list(dict.fromkeys(list(ds.prompt) + lt + rt))
    mat = encoder.encode(texts).float().detach().cpu()  # type: ignore[attr-defined]
    check_finite(mat, "the encoder's embeddings")
    row = {t: i for i, t in enumerate(texts)}

    def take(ts: Sequence[str]) -> Tensor:
        return mat[[row[t] for t in ts]]

    return EmbeddedComparisons(
        list(ds.user_id),
        None if joint else take(ds.prompt),
        take(lt),
        take(rt),
        torch.tensor(ds.label, dtype=torch.long),
    )
