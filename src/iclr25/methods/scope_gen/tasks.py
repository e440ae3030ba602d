"""Synthetic tasks of the SCOPE-Gen claim check and a loader for stored sample arrays.

Supports the experiments of *Conformal Generative Modeling with Improved Sample Efficiency
through Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael
Muehlebach; ICLR 2025; arXiv 2410.01660), Sec. 5, at CPU scale with generated data:

- :class:`QASimulator`: open-ended QA; each prompt has one true answer drawn with probability
  ``p ~ Beta(a, b)``, the rest of the mass goes to distractors with Zipf weights; quality is the
  generator probability plus noise; exact-match admissibility (duplicates share a label);
- :class:`GaussianMixtureToy`: a 2-D three-Gaussian-mixture truth observed with noise; the
  generator samples a slightly misspecified GMM posterior; admissible iff within ε of the truth;
- :class:`TaskArrays` and :func:`load_arrays`: per-instance samples as arrays (qualities,
  similarities, labels, item keys), e.g. the released outputs of Conformal Language Modeling
  read from local ``.npy`` files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from iclr25.methods.scope_gen.oracle import AdmissibilityOracle, ArrayOracle

__all__ = ["GaussianMixtureToy", "QASimulator", "TaskArrays", "load_arrays"]


@dataclass
class TaskArrays:
    """Stored samples of ``n`` instances, ``m`` samples each.

    Args:
        qualities: quality of each sample.
        similarities: pairwise similarities per instance, in [0, 1].
        labels: admissibility of each sample (scoring and :class:`ArrayOracle` only).
        keys: canonical item key of each sample (duplicates share a key).

    Shape:
        qualities: (n, m); similarities: (n, m, m); labels: (n, m); keys: (n, m).
    """

    qualities: np.ndarray
    similarities: np.ndarray
    labels: np.ndarray
    keys: np.ndarray

    def __post_init__(self) -> None:
        n, m = self.qualities.shape
        if self.similarities.shape != (n, m, m):
            raise ValueError(f"similarities shape {self.similarities.shape} != {(n, m, m)}")
        if self.labels.shape != (n, m) or self.keys.shape != (n, m):
            raise ValueError(f"labels {self.labels.shape} and keys {self.keys.shape} must be {(n, m)}")

    def __len__(self) -> int:
        return self.qualities.shape[0]

    def subset(self, rows: np.ndarray) -> TaskArrays:
        """The instances ``rows``."""
        return TaskArrays(self.qualities[rows], self.similarities[rows], self.labels[rows], self.keys[rows])

    def oracle(self, rows: np.ndarray | None = None) -> ArrayOracle:
        """A fresh counting :class:`ArrayOracle` over ``rows`` (all instances by default)."""
        sub = self if rows is None else self.subset(rows)
        return ArrayOracle(sub.labels, keys=sub.keys)


def load_arrays(
    qualities: str | os.PathLike[str],
    similarities: str | os.PathLike[str],
    labels: str | os.PathLike[str],
    keys: str | os.PathLike[str] | None = None,
) -> TaskArrays:
    """Load stored samples from local ``.npy`` files (e.g. Conformal Language Modeling outputs).

    Args:
        qualities: path of an ``(n, m)`` float array.
        similarities: path of an ``(n, m, m)`` float array in [0, 1].
        labels: path of an ``(n, m)`` 0/1 array.
        keys: optional path of an ``(n, m)`` integer key array; without it every sample is its
            own key.

    Returns:
        The :class:`TaskArrays`.

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: the shapes disagree.
    """
    paths = {"qualities": qualities, "similarities": similarities, "labels": labels}
    if keys is not None:
        paths["keys"] = keys
    for name, p in paths.items():
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{name} file {str(p)!r} does not exist")
    q = np.load(qualities).astype(float)
    s = np.load(similarities).astype(float)
    lab = np.load(labels)
    if not np.isin(lab, (0, 1)).all():
        raise ValueError("labels must hold only 0 and 1")
    k = np.load(keys) if keys is not None else np.broadcast_to(np.arange(q.shape[1]), q.shape).copy()
    return TaskArrays(q, s, lab.astype(bool), k.astype(int))


class QASimulator:
    """Open-ended QA with a known answer per prompt (Task A of the claim check).

    Prompt ``i`` has vocabulary ``w0..w{V-1}``; ``w0`` is the true answer. The generator puts
    mass ``p_i ~ Beta(a, b)`` on it and ``1 - p_i`` on the distractors with Zipf weights
    ``1/r^s`` over a random ranking. Quality is the generator probability of the string plus
    Gaussian noise fixed per (prompt, string), clipped to [0, 1]; similarity is 1 for identical
    strings, else a small value fixed per string pair; the oracle is exact match.

    Args:
        n_prompts: number of prompts.
        vocab_size: V, strings per prompt.
        beta: ``(a, b)`` of the truth probability.
        zipf: exponent ``s`` of the distractor weights.
        noise: standard deviation of the quality noise.
        max_similarity: non-duplicate similarities are uniform on ``[0, max_similarity)``.
        seed: seed of the simulator's world.

    Example:
        >>> sim = QASimulator(n_prompts=10, seed=0)
        >>> ys = sim.sample(3, 5, np.random.default_rng(0))
        >>> len(ys), sim.similarity(ys).shape
        (5, (5, 5))
    """

    def __init__(
        self,
        n_prompts: int = 2000,
        vocab_size: int = 50,
        beta: tuple[float, float] = (2.0, 3.0),
        zipf: float = 1.2,
        noise: float = 0.05,
        max_similarity: float = 0.3,
        seed: int = 0,
    ) -> None:
        if n_prompts < 1 or vocab_size < 2:
            raise ValueError(f"need n_prompts >= 1 and vocab_size >= 2, got {n_prompts}, {vocab_size}")
        if not 0.0 <= max_similarity < 1.0:
            raise ValueError(f"max_similarity must lie in [0, 1), got {max_similarity}")
        rng = np.random.default_rng([seed, 101])
        self.n_prompts, self.vocab_size = n_prompts, vocab_size
        p_true = rng.beta(*beta, size=n_prompts)
        zipf_w = 1.0 / np.arange(1, vocab_size) ** zipf
        zipf_w /= zipf_w.sum()
        probs = np.empty((n_prompts, vocab_size))
        probs[:, 0] = p_true
        for i in range(n_prompts):
            probs[i, 1:] = (1.0 - p_true[i]) * zipf_w[rng.permutation(vocab_size - 1)]
        self.probs = probs
        self.quality_table = np.clip(probs + noise * rng.standard_normal(probs.shape), 0.0, 1.0)
        u = rng.uniform(0.0, max_similarity, size=(vocab_size, vocab_size))
        self.sim_table = np.triu(u, 1) + np.triu(u, 1).T + np.eye(vocab_size)
        self.words = [f"w{v}" for v in range(vocab_size)]
        self._index = {w: v for v, w in enumerate(self.words)}

    @property
    def prompts(self) -> list[int]:
        """The prompt ids ``0..n_prompts-1``."""
        return list(range(self.n_prompts))

    def sample(self, prompt: int, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` i.i.d. answer strings for ``prompt``."""
        return [self.words[v] for v in rng.choice(self.vocab_size, size=n, p=self.probs[prompt])]

    def quality(self, prompt: int, items: Sequence[str]) -> np.ndarray:
        """Noisy generator probability of each string."""
        return self.quality_table[prompt, [self._index[y] for y in items]]

    def similarity(self, items: Sequence[str]) -> np.ndarray:
        """1 for identical strings, else a small fixed value per pair."""
        v = np.array([self._index[y] for y in items])
        return self.sim_table[v[:, None], v[None, :]]

    def oracle(self, budget: int | None = None) -> AdmissibilityOracle:
        """Exact-match admissibility against ``w0``, lazy and memoised."""
        return AdmissibilityOracle(lambda prompt, y: y == "w0", budget=budget)

    def to_arrays(self, m: int, rng: np.random.Generator) -> TaskArrays:
        """Draw ``m`` samples for every prompt and store them as :class:`TaskArrays`."""
        u = rng.random((self.n_prompts, m, 1))
        cdf = np.cumsum(self.probs, axis=1)[:, None, :]  # (n, 1, V)
        v = np.minimum((u > cdf).sum(axis=2), self.vocab_size - 1)  # (n, m) string ids
        q = np.take_along_axis(self.quality_table, v, axis=1)
        s = self.sim_table[v[:, :, None], v[:, None, :]]  # (n, m, m)
        return TaskArrays(q, s, v == 0, v)


class GaussianMixtureToy:
    """A continuous toy: 2-D truth from a three-Gaussian mixture, a misspecified GMM generator.

    Each prompt is a noisy observation ``x = y* + τ·ε`` of its truth ``y*`` drawn from the
    mixture with means (-2,-2), (-2,2), (1,1), scale σ and weights ``w``. The generator samples
    the GMM posterior of ``y*`` given ``x`` under a misspecified prior (means shifted, scale
    inflated, uniform weights); quality is the generator's density at the sample; similarity is
    ``1/(1+dist)``; a sample is admissible iff ``‖y - y*‖ < ε``.

    Args:
        n_prompts: number of prompts.
        sigma: σ, component scale of the truth.
        tau: τ, observation noise.
        eps: ε, admissibility radius.
        seed: seed of the world.

    Example:
        >>> toy = GaussianMixtureToy(n_prompts=5, seed=0)
        >>> toy.to_arrays(m=4, rng=np.random.default_rng(0)).similarities.shape
        (5, 4, 4)
    """

    MEANS = np.array([[-2.0, -2.0], [-2.0, 2.0], [1.0, 1.0]])
    WEIGHTS = np.array([0.3, 0.3, 0.4])

    def __init__(
        self, n_prompts: int = 2000, sigma: float = 0.7, tau: float = 0.6, eps: float = 0.5, seed: int = 0
    ) -> None:
        if n_prompts < 1 or min(sigma, tau, eps) <= 0:
            raise ValueError("n_prompts, sigma, tau and eps must be positive")
        rng = np.random.default_rng([seed, 202])
        comp = rng.choice(3, size=n_prompts, p=self.WEIGHTS)
        self.truth = self.MEANS[comp] + sigma * rng.standard_normal((n_prompts, 2))
        self.x = self.truth + tau * rng.standard_normal((n_prompts, 2))
        self.n_prompts, self.eps = n_prompts, eps
        # Misspecified prior of the generator: shifted means, inflated scale, uniform weights.
        g_means = self.MEANS + 0.15
        g_sigma = 1.2 * sigma
        v0, vt = g_sigma**2, tau**2
        logw = -0.5 * ((self.x[:, None, :] - g_means[None]) ** 2).sum(-1) / (v0 + vt)  # (n, 3)
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        self.post_w = w / w.sum(axis=1, keepdims=True)  # (n, 3)
        self.post_mean = (vt * g_means[None] + v0 * self.x[:, None, :]) / (v0 + vt)  # (n, 3, 2)
        self.post_sd = float(np.sqrt(v0 * vt / (v0 + vt)))

    @property
    def prompts(self) -> list[int]:
        """The prompt ids ``0..n_prompts-1``."""
        return list(range(self.n_prompts))

    def _draw(self, rows: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((rows.size, m, 1))
        comp = (u > np.cumsum(self.post_w[rows], axis=1)[:, None, :]).sum(axis=2).clip(max=2)  # (r, m)
        mean = self.post_mean[rows[:, None], comp]  # (r, m, 2)
        return mean + self.post_sd * rng.standard_normal((rows.size, m, 2))

    def _density(self, rows: np.ndarray, y: np.ndarray) -> np.ndarray:
        d2 = ((y[:, :, None, :] - self.post_mean[rows][:, None]) ** 2).sum(-1)  # (r, m, 3)
        dens = np.exp(-0.5 * d2 / self.post_sd**2) / (2 * np.pi * self.post_sd**2)
        return (dens * self.post_w[rows][:, None, :]).sum(-1)

    def sample(self, prompt: int, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """``n`` posterior samples (2-D points) for ``prompt``."""
        return list(self._draw(np.array([prompt]), n, rng)[0])

    def quality(self, prompt: int, items: Sequence[np.ndarray]) -> np.ndarray:
        """Generator density at each sample."""
        return self._density(np.array([prompt]), np.asarray(items, dtype=float)[None])[0]

    @staticmethod
    def similarity(items: Sequence[np.ndarray]) -> np.ndarray:
        """``1 / (1 + ‖y_i - y_j‖)``."""
        y = np.asarray(items, dtype=float)
        return 1.0 / (1.0 + np.linalg.norm(y[:, None] - y[None], axis=-1))

    def oracle(self, budget: int | None = None) -> AdmissibilityOracle:
        """Admissible iff within ε of the prompt's truth."""
        return AdmissibilityOracle(
            lambda prompt, y: bool(np.linalg.norm(np.asarray(y) - self.truth[prompt]) < self.eps),
            budget=budget,
        )

    def to_arrays(self, m: int, rng: np.random.Generator) -> TaskArrays:
        """Draw ``m`` samples for every prompt and store them as :class:`TaskArrays`."""
        rows = np.arange(self.n_prompts)
        y = self._draw(rows, m, rng)  # (n, m, 2)
        q = self._density(rows, y)
        s = 1.0 / (1.0 + np.linalg.norm(y[:, :, None] - y[:, None], axis=-1))  # (n, m, m)
        lab = np.linalg.norm(y - self.truth[:, None], axis=-1) < self.eps
        return TaskArrays(q, s, lab, np.broadcast_to(np.arange(m), (self.n_prompts, m)).copy())
