"""A diverse, reward-prioritised replay buffer of attacks.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540), Sec. 3 ("replay buffer") and App. B. A
bounded buffer keeps the highest-scoring attacks (the lowest key is evicted at capacity); the key
is the total log reward log R at scoring time by default, as the official code keeps its buffer
(``compare="reward"``), or the log toxicity log c as a declared option. Exact
duplicates are rejected; of two near-duplicates, only the higher-scoring one stays. Two attacks are
near-duplicates when their **token** edit distance is below ``tol * (len_a + len_b)`` (rapidfuzz
Levenshtein), or, in the cosine variant, when the cosine of their embeddings exceeds
``cos_threshold``. Samples are drawn without replacement with probabilities softmax(log c),
softmax(log R) or uniform. Each item keeps its reward *components*, so replay re-scores it under
the current schedules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

__all__ = ["BufferItem", "DiverseReplayBuffer"]

_CHAR0 = 0x4E00  # token id -> one unicode character, so rapidfuzz compares token sequences


@dataclass
class BufferItem:
    """One stored attack.

    Args:
        tokens: its token ids (the EOS included when one was sampled).
        text: the decoded attack.
        log_p_ref: prior term (short-attack guard applied).
        log_c: mean log-toxicity.
        mean_tox: arithmetic mean toxicity.
        log_r: log R when it was scored (a priority key).
        embedding: unit-norm embedding (cosine variant only).
    """

    tokens: tuple[int, ...]
    text: str
    log_p_ref: float
    log_c: float
    mean_tox: float
    log_r: float = 0.0
    embedding: np.ndarray | None = None


class DiverseReplayBuffer:
    """Bounded replay buffer with near-duplicate rejection.

    Args:
        capacity: most items kept (paper 1000 for GPT-2/Dolly, 5000 for Gemma/Llama).
        tol: edit-distance tolerance (near-duplicate when distance < tol * (len_a + len_b)).
        key: score that ranks items for eviction and near-duplicates: "log_r" (the total log
            reward when scored; the official code's default) or "log_c" (the log toxicity).
        priority: sampling weights, "log_c", "log_r" (softmax of the score) or "uniform".
        metric: "edit" (token edit distance) or "cosine" (needs ``embedder``).
        embedder: ``embedder(texts) -> (n, d)`` array, for the cosine variant.
        cos_threshold: cosine above which two attacks are near-duplicates.

    Example:
        >>> buf = DiverseReplayBuffer(capacity=2)
        >>> buf.add(BufferItem((5, 6, 7, 8), "a b c d", -3.0, -0.1, 0.9, log_r=-4.0))
        True
        >>> buf.add(BufferItem((5, 6, 7, 9), "a b c e", -3.0, -0.5, 0.6, log_r=-8.0))  # near-dup., lower
        False
        >>> len(buf)
        1
    """

    def __init__(
        self,
        capacity: int,
        *,
        tol: float = 0.25,
        key: Literal["log_c", "log_r"] = "log_r",
        priority: Literal["log_c", "log_r", "uniform"] = "log_c",
        metric: Literal["edit", "cosine"] = "edit",
        embedder: Callable[[Sequence[str]], np.ndarray] | None = None,
        cos_threshold: float = 0.4,
    ):
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        if tol < 0:
            raise ValueError(f"tol must be >= 0, got {tol}")
        if key not in ("log_c", "log_r"):
            raise ValueError(f"unknown key {key!r}; use 'log_c' or 'log_r'")
        if priority not in ("log_c", "log_r", "uniform"):
            raise ValueError(f"unknown priority {priority!r}; use 'log_c', 'log_r' or 'uniform'")
        if metric not in ("edit", "cosine"):
            raise ValueError(f"unknown metric {metric!r}; use 'edit' or 'cosine'")
        if metric == "cosine" and embedder is None:
            raise ValueError("the cosine metric needs an embedder")
        self.capacity, self.tol, self.key, self.priority = capacity, tol, key, priority
        self.metric, self.embedder, self.cos_threshold = metric, embedder, cos_threshold
        self.items: list[BufferItem] = []
        self._seen: set[tuple[int, ...]] = set()

    def __len__(self) -> int:
        return len(self.items)

    def _score(self, item: BufferItem) -> float:
        return item.log_c if self.key == "log_c" else item.log_r

    def _near(self, item: BufferItem) -> list[int]:
        """Indices of stored items that are near-duplicates of ``item``."""
        if not self.items:
            return []
        if self.metric == "cosine":
            emb = np.stack([it.embedding for it in self.items])  # (n, d)
            cos = emb @ item.embedding
            return [int(i) for i in np.nonzero(cos > self.cos_threshold)[0]]
        from rapidfuzz.distance import Levenshtein
        from rapidfuzz.process import cdist

        q = "".join(chr(_CHAR0 + t) for t in item.tokens)
        stored = ["".join(chr(_CHAR0 + t) for t in it.tokens) for it in self.items]
        dist = cdist([q], stored, scorer=Levenshtein.distance)[0]  # (n,)
        bound = self.tol * (len(item.tokens) + np.array([len(it.tokens) for it in self.items]))
        return [int(i) for i in np.nonzero(dist < bound)[0]]

    def add(self, item: BufferItem) -> bool:
        """Offer one item; returns whether it was stored."""
        if item.tokens in self._seen:
            return False  # exact duplicates are rejected (even after eviction)
        self._seen.add(item.tokens)
        if self.metric == "cosine":
            e = np.asarray(self.embedder([item.text]), dtype=np.float64)[0]  # type: ignore[misc]
            item.embedding = e / max(np.linalg.norm(e), 1e-12)
        score = self._score(item)
        near = self._near(item)
        if any(self._score(self.items[i]) >= score for i in near):
            return False
        for i in sorted(near, reverse=True):
            del self.items[i]
        if len(self.items) >= self.capacity:
            low = min(range(len(self.items)), key=lambda i: self._score(self.items[i]))
            if self._score(self.items[low]) >= score:
                return False
            del self.items[low]
        self.items.append(item)
        return True

    def add_many(self, items: Sequence[BufferItem]) -> int:
        """Offer items in order; returns how many were stored."""
        return sum(self.add(it) for it in items)

    def sample(self, n: int, generator: torch.Generator | None = None) -> list[BufferItem]:
        """Draw ``min(n, len(self))`` items without replacement by the priority.

        Raises:
            ValueError: the buffer is empty, or ``n < 1``.
        """
        if not self.items:
            raise ValueError("cannot sample from an empty replay buffer")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if self.priority == "uniform":
            w = torch.ones(len(self.items))
        else:
            s = torch.tensor([it.log_c if self.priority == "log_c" else it.log_r for it in self.items])
            w = torch.softmax(s.double(), 0).float().clamp_min(1e-30)
        if generator is not None:
            w = w.to(generator.device)  # the draw runs where the generator lives
        idx = torch.multinomial(w, min(n, len(self.items)), replacement=False, generator=generator)
        return [self.items[int(i)] for i in idx]
