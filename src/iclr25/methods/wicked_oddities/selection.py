"""Hardness scores and the choice of target-class images to poison.

Implements Sec. 3 of *Wicked Oddities: Selectively Poisoning for Effective Clean-Label Backdoor
Attacks* (Nguyen et al., ICLR 2025, arXiv:2407.10825): the kNN typicality score on normalised
features (Sec. 3.2), the mean-similarity variant, the OOD-surrogate loss, and the selection of
the ``floor(budget_frac * n_t)`` hardest (or easiest, or a percentile window) images. Scores
come in the order of the target subset; :class:`HardnessSelector` maps them to global indices
once.

References:
    Nguyen et al., ICLR 2025, arXiv:2407.10825, Sec. 3.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "HardnessSelector",
    "mean_similarity_scores",
    "ood_loss_scores",
    "poison_budget",
    "select_poison",
    "typicality_scores",
]


def _check_features(features: torch.Tensor) -> None:
    if features.ndim != 2:
        raise ValueError(f"features must have shape (n, d), got {tuple(features.shape)}")
    if len(features) == 0:
        raise ValueError("features are empty (the target class has no images)")
    if not torch.isfinite(features).all():
        raise ValueError("features contain non-finite values")


def typicality_scores(features: torch.Tensor, k: int) -> torch.Tensor:
    """kNN typicality ``s_i``: mean cosine similarity to the k nearest other images.

    ``f_i = E(x_i) / ||E(x_i)||``, ``S = F F^T``; the diagonal is set to -1 *before* the top-k
    so a point never counts itself (duplicates still score 1 against each other).
    Hardness is ``h_i = -s_i``.

    Args:
        features: encoder features of the target-class images.
        k: neighbours, 1 <= k <= n - 1.

    Returns:
        ``s``, shape (n,), in [-1, 1]; high = typical.

    Shape:
        features: (n, d) -> (n,).

    Example:
        >>> f = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
        >>> typicality_scores(f, 1).argmin().item()
        2
    """
    _check_features(features)
    n = len(features)
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must satisfy 1 <= k <= n_t - 1 = {n - 1}, got {k}")
    f = F.normalize(features.double(), dim=1)
    sim = f @ f.T  # (n, n) cosine similarities
    sim.fill_diagonal_(-1.0)  # mask self-similarity before the top-k (trap 3)
    return sim.topk(k, dim=1).values.mean(1).float()


def mean_similarity_scores(features: torch.Tensor) -> torch.Tensor:
    """Mean-variant typicality ``s_i = cos(f_i, m)``, m the normalised mean of the normalised features.

    Args:
        features: encoder features of the target-class images.

    Returns:
        ``s``, shape (n,); high = typical (hardness is ``-s``).

    Example:
        >>> mean_similarity_scores(torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])).argmin().item()
        2
    """
    _check_features(features)
    f = F.normalize(features.double(), dim=1)
    m = F.normalize(f.mean(0, keepdim=True), dim=1)
    return (f @ m.T).squeeze(1).float()


def ood_loss_scores(logits: torch.Tensor, target_index: int) -> torch.Tensor:
    """OOD-surrogate hardness ``h_i = CE(logits_i, K)``: loss of the target-class label.

    Args:
        logits: outputs of a (K+1)-way classifier on the target images.
        target_index: the column of the target class (K).

    Returns:
        hardness, shape (n,); high = hard.

    Shape:
        logits: (n, K+1) -> (n,).

    Example:
        >>> ood_loss_scores(torch.tensor([[0.0, 5.0], [5.0, 0.0]]), 1).argmax().item()
        1
    """
    _check_features(logits)
    if not 0 <= target_index < logits.shape[1]:
        raise ValueError(f"target_index {target_index} outside [0, {logits.shape[1]})")
    labels = torch.full((len(logits),), target_index, dtype=torch.long)
    return F.cross_entropy(logits.float(), labels, reduction="none")


def poison_budget(budget_frac: float, n_target: int) -> int:
    """``num_bd = floor(budget_frac * n_t)``, a share of the target class (trap 2).

    Example:
        >>> poison_budget(0.1, 95)
        9
    """
    if not 0.0 < budget_frac <= 1.0:
        raise ValueError(f"budget_frac must lie in (0, 1], got {budget_frac}")
    if n_target < 1:
        raise ValueError("the target class is empty")
    return math.floor(budget_frac * n_target + 1e-9)


def select_poison(
    hardness: torch.Tensor,
    budget: int,
    mode: Literal["hard", "easy", "window", "random"] = "hard",
    percentile: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Positions (within the target subset) of the images to poison.

    ``hard`` takes the largest hardness, ``easy`` the smallest (the negative control), ``window``
    starts at ``floor(n * p / 100)`` in most-to-least-typical order (p = 0: most typical) and
    ``random`` draws uniformly (hardness is then only used for its length).

    Args:
        hardness: ``h``, shape (n,); high = atypical.
        budget: how many to select, 0 <= budget <= n.
        mode: "hard", "easy", "window" or "random".
        percentile: the window start p in [0, 100] (mode "window").
        generator: randomness of mode "random".

    Returns:
        LongTensor of ``budget`` distinct positions, sorted ascending.

    Example:
        >>> select_poison(torch.tensor([0.1, 0.9, 0.5]), 1).tolist()
        [1]
    """
    if hardness.ndim != 1:
        raise ValueError(f"hardness must be 1-d, got shape {tuple(hardness.shape)}")
    n = len(hardness)
    if n == 0:
        raise ValueError("hardness is empty (the target class has no images)")
    if not torch.isfinite(hardness).all():
        raise ValueError("hardness contains non-finite values")
    if not 0 <= budget <= n:
        raise ValueError(f"budget must lie in [0, n_t = {n}], got {budget}")
    # stable sort: ties keep subset order, so selection is deterministic
    order = torch.sort(hardness.double(), descending=True, stable=True).indices  # hardest first
    if mode == "hard":
        chosen = order[:budget]
    elif mode == "easy":
        chosen = order.flip(0)[:budget]
    elif mode == "window":
        if percentile is None or not 0.0 <= percentile <= 100.0:
            raise ValueError(f"mode 'window' needs a percentile in [0, 100], got {percentile}")
        typical_first = order.flip(0)
        start = min(math.floor(n * percentile / 100.0), n - budget)
        chosen = typical_first[start : start + budget]
    elif mode == "random":
        chosen = torch.randperm(n, generator=generator)[:budget]
    else:
        raise ValueError(f"unknown mode {mode!r}")
    return torch.sort(chosen).values.long()


class HardnessSelector:
    """Scikit-learn-style selector: fit on target-class images only, read global indices.

    Args:
        encoder: maps images (N, C, H, W) in [0, 1] to features (an object with ``encode``),
            for strategies "knn" and "mean"; or a (K+1)-way classifier with ``encode`` returning
            logits for "ood_loss" (then ``target_index`` is its last column).
        strategy: "knn", "mean", "ood_loss" or "random".
        k: kNN neighbours (strategy "knn"); capped explicitly by the caller.
        budget_frac: poisoned share of the target class.
        mode: "hard", "easy" or "window".
        percentile: window start (mode "window").
        random_state: seed of strategy "random".

    Attributes:
        hardness_: hardness per fitted image, in the order given to ``fit``.
        positions_: selected positions within the fitted subset.
        poison_indices_: the selected global indices (``indices[positions_]``).
        budget_: number selected.

    Example:
        >>> from iclr25.methods.wicked_oddities.surrogate import SklearnEncoder
        >>> from sklearn.preprocessing import FunctionTransformer
        >>> enc = SklearnEncoder(FunctionTransformer())
        >>> x = torch.rand(10, 1, 4, 4, generator=torch.Generator().manual_seed(0))
        >>> sel = HardnessSelector(enc, k=3, budget_frac=0.2).fit(x, indices=torch.arange(100, 110))
        >>> len(sel.poison_indices_), bool((sel.poison_indices_ >= 100).all())
        (2, True)
    """

    def __init__(
        self,
        encoder: object | None = None,
        *,
        strategy: Literal["knn", "mean", "ood_loss", "random"] = "knn",
        k: int = 50,
        budget_frac: float = 0.1,
        mode: Literal["hard", "easy", "window"] = "hard",
        percentile: float | None = None,
        random_state: int | None = None,
    ) -> None:
        self.encoder = encoder
        self.strategy = strategy
        self.k = k
        self.budget_frac = budget_frac
        self.mode = mode
        self.percentile = percentile
        self.random_state = random_state

    def score(self, images: torch.Tensor) -> torch.Tensor:
        """Hardness of target-class images (high = atypical), in their given order."""
        if images.ndim != 4:
            raise ValueError(f"images must have shape (N, C, H, W), got {tuple(images.shape)}")
        if len(images) == 0:
            raise ValueError("no target-class images")
        if self.strategy == "random":
            return torch.zeros(len(images))
        if self.encoder is None:
            raise ValueError(f"strategy {self.strategy!r} needs an encoder")
        out = self.encoder.encode(images)  # type: ignore[attr-defined]
        if self.strategy == "knn":
            return -typicality_scores(out, self.k)
        if self.strategy == "mean":
            return -mean_similarity_scores(out)
        if self.strategy == "ood_loss":
            return ood_loss_scores(out, out.shape[1] - 1)
        raise ValueError(f"unknown strategy {self.strategy!r}")

    def fit(self, images: torch.Tensor, indices: torch.Tensor | np.ndarray | None = None) -> HardnessSelector:
        """Score the target-class images and select the poison set.

        Args:
            images: the target-class images only, (N, C, H, W) in [0, 1].
            indices: their global indices in the training set (default ``arange(N)``).

        Returns:
            self.
        """
        idx = torch.arange(len(images)) if indices is None else torch.as_tensor(indices).long()
        if idx.ndim != 1 or len(idx) != len(images):
            raise ValueError(f"indices must be 1-d with {len(images)} entries, got {tuple(idx.shape)}")
        self.hardness_ = self.score(images)
        self.budget_ = poison_budget(self.budget_frac, len(images))
        gen = torch.Generator().manual_seed(0 if self.random_state is None else self.random_state)
        mode = "random" if self.strategy == "random" else self.mode
        self.positions_ = select_poison(self.hardness_, self.budget_, mode, self.percentile, gen)
        self.poison_indices_ = idx[self.positions_]  # subset order -> global indices (trap 5)
        return self
