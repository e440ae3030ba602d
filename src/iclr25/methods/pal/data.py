"""Comparison records, converters, and embedding of records into tensors for PAL.

PAL (*PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*, Chen et al.,
ICLR 2025, arXiv:2406.08469) learns from pairwise comparisons (user, prompt, left, right, label).
Here ``label`` = 0 when the left response is preferred and 1 when the right one is (the
cross-entropy target). Converters read the official +-1 convention (y = -1: left preferred) and
``chosen/rejected`` rows (sides drawn by a seeded RNG, so there is no position bias).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["Comparisons", "EmbeddedComparisons", "embed_comparisons", "from_chosen_rejected", "from_signed"]


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
        The :class:`EmbeddedComparisons`.
    """
    if joint:
        lt = [p + r for p, r in zip(ds.prompt, ds.left, strict=True)]
        rt = [p + r for p, r in zip(ds.prompt, ds.right, strict=True)]
        texts = list(dict.fromkeys(lt + rt))
    else:
        lt, rt = list(ds.left), list(ds.right)
        texts = list(dict.fromkeys(list(ds.prompt) + lt + rt))
    mat = encoder.encode(texts).float().detach()  # type: ignore[attr-defined]
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
