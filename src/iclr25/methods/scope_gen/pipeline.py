"""SCOPE-Gen: sequential conformal prediction sets for black-box generative models.

Implements, from *Conformal Generative Modeling with Improved Sample Efficiency through
Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael Muehlebach;
ICLR 2025; arXiv 2410.01660):

- Algorithm 1 (calibration): disjoint calibration splits, one per stage; stage ``s`` passes its
  split through the calibrated stages ``1..s-1``, drops instances whose set is abstained or holds
  no admissible element (the conditioning of the Markov-chain factorisation, Sec. 3), queries
  labels lazily along its own order up to the first admissible element and sets λ_s to the
  conformal quantile at level ``1-α_s``, with ``Π_s (1-α_s) = 1-α``;
- Algorithm 2 (prediction): sample, keep the generation prefix, then apply each greedy filter;
- the guarantee ``P(∃ y ∈ C(x): A(x, y) = 1) ≥ 1-α`` (Theorem 1), marginal over exchangeable
  prompts; abstentions count as covered and are reported separately;
- :func:`evaluate`: coverage, mean finite set size, abstention rate and oracle calls (Sec. 5).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from iclr25.methods.scope_gen.conformal import (
    allocate_alphas,
    check_alpha,
    conformal_quantile,
    disjoint_splits,
    min_calibration_size,
)
from iclr25.methods.scope_gen.oracle import AdmissibilityOracle, ArrayOracle, Generator, Similarity
from iclr25.methods.scope_gen.scores import GenerationScore, generation_scores
from iclr25.methods.scope_gen.stages import (
    LabelFn,
    drop_duplicates,
    filter_stage,
    first_admissible,
    generation_stage,
    order_set,
)

__all__ = ["BatchPrediction", "PredictionSet", "ScopeGen", "check_arrays", "evaluate"]

FILTERS = ("diversity", "quality")


@dataclass
class PredictionSet:
    """One prediction set.

    Args:
        items: the kept samples (sample indices for the array API), in the last stage's order.
        qualities: their qualities.
        abstained: True when the method cannot certify a set ("cannot certify"); ``items`` is empty.
        trace: per stage, ``(stage name, set size after it)``.
    """

    items: list[Any]
    qualities: np.ndarray
    abstained: bool
    trace: list[tuple[str, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class BatchPrediction:
    """Prediction sets of a batch, as arrays.

    Args:
        idx: sample indices per instance; the first ``size[b]`` entries form the set.
        size: set sizes (0 for abstentions).
        abstained: abstention flags.
        stage_sizes: set size after every stage (pipeline stages, in order).

    Shape:
        idx: (B, m); size, abstained: (B,); stage_sizes: (B, K).
    """

    idx: np.ndarray
    size: np.ndarray
    abstained: np.ndarray
    stage_sizes: np.ndarray


def check_arrays(
    qualities: Any, similarities: Any, m_max: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate and truncate per-instance qualities ``(n, m)`` and similarities ``(n, m, m)``.

    Raises:
        ValueError: wrong rank, shapes that disagree, a non-square similarity, values outside
            [0, 1] or non-finite values.
    """
    q = np.asarray(qualities, dtype=float)
    s = np.asarray(similarities, dtype=float)
    if q.ndim != 2 or q.shape[1] < 1:
        raise ValueError(f"qualities must be (n, m) with m >= 1, got shape {q.shape}")
    if s.ndim != 3 or s.shape[1] != s.shape[2]:
        raise ValueError(f"similarities must be square per instance, (n, m, m), got shape {s.shape}")
    if s.shape[:2] != q.shape:
        raise ValueError(f"similarities shape {s.shape} does not match qualities shape {q.shape}")
    if not np.isfinite(q).all():
        raise ValueError("qualities must be finite")
    if not np.isfinite(s).all() or s.min(initial=0.0) < 0.0 or s.max(initial=0.0) > 1.0:
        raise ValueError("similarities must lie in [0, 1]")
    if m_max is not None and q.shape[1] > m_max:
        q, s = q[:, :m_max], s[:, :m_max, :m_max]
    return q, s


class ScopeGen:
    """SCOPE-Gen prediction sets with sequential greedy filtering.

    Args:
        stages: the calibrated stages in order; "generation" first, then any of "quality" and
            "diversity" (each at most once). The default puts the quality filter first, as in
            Fig. 1 of the paper; the official code also runs the flipped order
            ("generation", "diversity", "quality").
        generation_score: "count", "sum" or "max" (Sec. 4).
        alpha: total miscoverage α in (0, 1).
        alpha_parts: chunks of ``log(1-α)`` per stage (default 3:1:1).
        alpha_chunks: M, the total number of chunks (must equal ``sum(alpha_parts)``).
        split: "equal" (disjoint equal splits with pass-through, the method) or "shared" (every
            stage on all calibration data, filters on unfiltered samples; voids the guarantee,
            kept as an ablation).
        allocate: True splits α over stages; False gives every stage the full α (an ablation
            that voids the guarantee).
        remove_duplicates: apply the uncalibrated duplicate removal after generation.
        lazy: True queries labels only up to the first admissible element of the stage's order;
            False labels every sample of every calibration instance first (offline arrays).
        m_max: the sampling cap per instance.
        random_state: seed of the pipeline's generator (splits, farthest-point starts, sampling).

    Attributes:
        alphas_: per-stage miscoverage levels.
        thresholds_: per-stage λ_s (``+inf`` = abstain for generation, pass-through for filters).
        stage_report_: per stage: instances used, dropped (NaN) and infinite; oracle calls.
        n_calibration_: number of calibration instances.

    References:
        Kladny, Schölkopf, Muehlebach. ICLR 2025, Algorithms 1-2.

    Example:
        >>> from iclr25.methods.scope_gen import ScopeGen, QASimulator
        >>> task = QASimulator(n_prompts=400, seed=0).to_arrays(m=20, rng=np.random.default_rng(0))
        >>> model = ScopeGen(alpha=0.3, random_state=0).calibrate_arrays(
        ...     task.qualities[:300], task.similarities[:300], task.oracle(np.arange(300)))
        >>> sets = model.predict_arrays(task.qualities[300:], task.similarities[300:])
        >>> len(sets)
        100
    """

    def __init__(
        self,
        stages: Sequence[str] = ("generation", "quality", "diversity"),
        generation_score: GenerationScore = "count",
        alpha: float = 0.3,
        alpha_parts: Sequence[int] = (3, 1, 1),
        alpha_chunks: int = 5,
        split: Literal["equal", "shared"] = "equal",
        allocate: bool = True,
        remove_duplicates: bool = False,
        lazy: bool = True,
        m_max: int = 20,
        random_state: int | None = None,
    ) -> None:
        stages = tuple(stages)
        if not stages or stages[0] != "generation":
            raise ValueError(f"stages must start with 'generation', got {stages}")
        unknown = [s for s in stages[1:] if s not in FILTERS]
        if unknown:
            raise ValueError(f"unknown stages {unknown}; filters are {FILTERS}")
        if len(set(stages)) != len(stages):
            raise ValueError(f"duplicated stages in {stages}")
        if generation_score not in ("count", "sum", "max"):
            raise ValueError(f"generation_score must be 'count', 'sum' or 'max', got {generation_score!r}")
        if split not in ("equal", "shared"):
            raise ValueError(f"split must be 'equal' or 'shared', got {split!r}")
        if isinstance(m_max, bool) or int(m_max) != m_max or m_max < 1:
            raise ValueError(f"m_max must be a positive integer, got {m_max}")
        if len(alpha_parts) != len(stages):
            raise ValueError(f"alpha_parts {tuple(alpha_parts)} must have one entry per stage {stages}")
        self.stages = stages
        self.generation_score = generation_score
        self.alpha = check_alpha(alpha)
        self.alpha_parts = tuple(alpha_parts)
        self.alpha_chunks = alpha_chunks
        allocate_alphas(self.alpha, self.alpha_parts, alpha_chunks)  # validates the parts
        self.split = split
        self.allocate = allocate
        self.remove_duplicates = remove_duplicates
        self.lazy = lazy
        self.m_max = int(m_max)
        self.random_state = random_state

    # ------------------------------------------------------------------ calibration
    def calibrate(
        self,
        prompts: Sequence[Any],
        generator: Generator,
        oracle: AdmissibilityOracle,
        similarity: Similarity,
    ) -> ScopeGen:
        """Calibrate online: sample ``m_max`` items per prompt and query ``oracle`` lazily.

        Args:
            prompts: calibration prompts (exchangeable with the test prompts).
            generator: the black-box generator (``sample`` and ``quality``).
            oracle: the counting, memoised admissibility oracle.
            similarity: ``similarity(items) -> (k, k)`` in [0, 1].

        Returns:
            ``self``, fitted.
        """
        if len(prompts) == 0:
            raise ValueError("need at least one calibration prompt")
        rng = np.random.default_rng(self.random_state)
        items, q, s = self._sample(prompts, generator, similarity, rng)

        def label(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
            return np.array(
                [oracle(prompts[r], items[r][c]) for r, c in zip(rows, cols, strict=True)], dtype=bool
            )

        self._fit(q, s, label, rng)
        return self

    def calibrate_arrays(
        self, qualities: np.ndarray, similarities: np.ndarray, oracle: ArrayOracle | np.ndarray
    ) -> ScopeGen:
        """Calibrate on stored samples; labels come lazily from ``oracle``.

        Args:
            qualities: per-sample qualities in sampling order.
            similarities: per-instance pairwise similarities in [0, 1].
            oracle: an :class:`ArrayOracle` (or a boolean label array, wrapped in one).

        Returns:
            ``self``, fitted.

        Shape:
            qualities: (n, m); similarities: (n, m, m); labels: (n, m). Columns past ``m_max``
            are ignored.
        """
        if not isinstance(oracle, ArrayOracle):
            oracle = ArrayOracle(oracle)
        q, s = check_arrays(qualities, similarities, self.m_max)
        if oracle.shape[0] != q.shape[0] or oracle.shape[1] < q.shape[1]:
            raise ValueError(f"oracle labels {oracle.shape} do not match qualities {q.shape}")
        self._fit(q, s, oracle.query, np.random.default_rng(self.random_state))
        return self

    def calibrate_from_arrays(
        self, qualities: np.ndarray, labels: np.ndarray, similarities: np.ndarray
    ) -> ScopeGen:
        """Calibrate on fully stored data: ``labels`` go behind a counting :class:`ArrayOracle`.

        Shape:
            qualities: (n, m); labels: (n, m); similarities: (n, m, m).
        """
        return self.calibrate_arrays(qualities, similarities, ArrayOracle(labels))

    def _sample(
        self, prompts: Sequence[Any], generator: Generator, similarity: Similarity, rng: np.random.Generator
    ) -> tuple[list[list[Any]], np.ndarray, np.ndarray]:
        items, qs, ss = [], [], []
        for p in prompts:
            ys = list(generator.sample(p, self.m_max, rng))
            if len(ys) != self.m_max:
                raise ValueError(f"generator returned {len(ys)} samples, asked for {self.m_max}")
            items.append(ys)
            qs.append(np.asarray(generator.quality(p, ys), dtype=float))
            ss.append(np.asarray(similarity(ys), dtype=float))
        q, s = check_arrays(np.stack(qs), np.stack(ss))
        return items, q, s

    def _fit(self, q: np.ndarray, s: np.ndarray, label: LabelFn, rng: np.random.Generator) -> None:
        n, m = q.shape
        k = len(self.stages)
        self.alphas_ = self._stage_alphas()
        splits = disjoint_splits(n, k, rng) if self.split == "equal" else [np.arange(n)] * k
        self._warn_if_too_small(n, [r.size for r in splits])
        counter = _CountingLabel(label)
        if not self.lazy:  # eager: every sample of every calibration instance is labelled first
            counter(np.repeat(np.arange(n), m), np.tile(np.arange(m), n))
        self.thresholds_: list[float] = []
        self.stage_report_: list[dict[str, float]] = []
        self.n_calibration_ = n
        self._m = m
        for st, (stage, rows) in enumerate(zip(self.stages, splits, strict=True)):
            before = counter.snapshot()
            if st == 0:
                gs = generation_scores(q[rows], self.generation_score)
                idx = np.broadcast_to(np.arange(m), (rows.size, m))
                pos = first_admissible(counter, rows, idx, np.full(rows.size, m))
                scores = np.where(pos >= 0, gs[np.arange(rows.size), np.maximum(pos, 0)], np.inf)
                n_drop = 0
            else:
                if self.split == "equal":
                    batch = self._run(q[rows], s[rows], rng, upto=st)
                    idx, size, abst = batch.idx, batch.size, batch.abstained
                else:
                    idx = np.tile(np.arange(m), (rows.size, 1))
                    size, abst = np.full(rows.size, m), np.zeros(rows.size, dtype=bool)
                    if self.remove_duplicates:
                        idx, size = drop_duplicates(s[rows], idx, size)
                ordered, fs = order_set(stage, q[rows], s[rows], idx, size, rng.random(rows.size))
                size = np.where(abst, 0, size)  # abstained sets are dropped without queries
                pos = first_admissible(counter, rows, ordered, size)
                scores = np.where(pos >= 0, fs[np.arange(rows.size), np.maximum(pos, 0)], np.nan)
                n_drop = int(np.isnan(scores).sum())
            lam = conformal_quantile(scores, self.alphas_[st])
            self.thresholds_.append(lam)
            after = counter.snapshot()
            self.stage_report_.append(
                {
                    "stage": stage,
                    "alpha": self.alphas_[st],
                    "threshold": lam,
                    "n_split": int(rows.size),
                    "n_used": int(rows.size - n_drop),
                    "n_dropped": n_drop,
                    "n_infinite": int(np.isinf(scores).sum()),
                    "oracle_calls": after - before,
                }
            )
        self.oracle_calls_ = counter.calls

    def _stage_alphas(self) -> tuple[float, ...]:
        if self.allocate:
            return allocate_alphas(self.alpha, self.alpha_parts, self.alpha_chunks)
        return (self.alpha,) * len(self.stages)

    def min_calibration_n(self) -> int:
        """The fewest calibration instances for which every stage's threshold can be finite.

        Stage ``s`` with ``n_s`` instances has a finite λ_s only if ``ceil((n_s+1)(1-α_s)) <= n_s``
        (:func:`~iclr25.methods.scope_gen.conformal.min_calibration_size`). With ``split="equal"``
        the ``n`` instances are cut into one part per stage (the first ``n mod K`` parts one
        larger); with ``split="shared"`` every stage sees all ``n``. Filter stages can still lose
        instances whose set holds no admissible sample, so this is necessary, not sufficient.

        Returns:
            The smallest total ``n`` meeting every stage's condition.
        """
        need = [min_calibration_size(a) for a in self._stage_alphas()]
        if self.split == "shared":
            return max(need)
        k = len(need)
        n = max(k, k * (max(need) - 1))  # below this every part is smaller than max(need)
        while any(n // k + (s < n % k) < need[s] for s in range(k)):
            n += 1
        return n

    def _warn_if_too_small(self, n: int, split_sizes: Sequence[int]) -> None:
        short = [
            f"{stage} gets {size} instances, needs {min_calibration_size(a)} (α_s={a:.3g})"
            for stage, size, a in zip(self.stages, split_sizes, self.alphas_, strict=True)
            if size < min_calibration_size(a)
        ]
        if short:
            warnings.warn(
                f"calibration set too small for alpha={self.alpha:g}: n={n} gives +inf thresholds "
                f"(abstention for generation, pass-through for filters) since "
                f"ceil((n_s+1)(1-α_s)) > n_s in stages: {'; '.join(short)}; "
                f"use at least n={self.min_calibration_n()} calibration instances or a larger alpha",
                UserWarning,
                stacklevel=4,
            )

    # ------------------------------------------------------------------ prediction
    def _check_fitted(self) -> None:
        if not hasattr(self, "thresholds_"):
            raise RuntimeError("ScopeGen is not calibrated; call calibrate or calibrate_arrays first")

    def _rng(self) -> np.random.Generator:
        if not hasattr(self, "_pred_rng"):
            self._pred_rng = np.random.default_rng([0 if self.random_state is None else self.random_state, 1])
        return self._pred_rng

    def _run(
        self, q: np.ndarray, s: np.ndarray, rng: np.random.Generator, upto: int | None = None
    ) -> BatchPrediction:
        """Apply the first ``upto`` calibrated stages (all by default) to a batch."""
        stages = self.stages[: len(self.thresholds_) if upto is None else upto]
        b, m = q.shape
        gs = generation_scores(q, self.generation_score)
        size, abstained = generation_stage(gs, self.thresholds_[0])
        idx = np.tile(np.arange(m), (b, 1))
        if self.remove_duplicates:
            idx, size = drop_duplicates(s, idx, size)
        sizes = [size]
        for st, stage in enumerate(stages[1:], start=1):
            u = rng.random(b)  # farthest-point starts: drawn for every row, as at calibration
            ordered, fs = order_set(stage, q, s, idx, size, u)
            size = filter_stage(fs, size, self.thresholds_[st])
            idx = ordered
            sizes.append(size)
        return BatchPrediction(idx=idx, size=size, abstained=abstained, stage_sizes=np.stack(sizes, axis=1))

    def predict_batch(self, qualities: np.ndarray, similarities: np.ndarray) -> BatchPrediction:
        """Prediction sets of stored samples, as arrays (fast path of :meth:`predict_arrays`).

        Shape:
            qualities: (B, m); similarities: (B, m, m).
        """
        self._check_fitted()
        q, s = check_arrays(qualities, similarities, self.m_max)
        if q.shape[1] != self._m:
            raise ValueError(f"calibrated with m={self._m} samples per instance, got {q.shape[1]}")
        return self._run(q, s, self._rng())

    def predict_arrays(self, qualities: np.ndarray, similarities: np.ndarray) -> list[PredictionSet]:
        """Prediction sets of stored samples; ``items`` are sample indices.

        Shape:
            qualities: (B, m); similarities: (B, m, m).
        """
        q = np.asarray(qualities, dtype=float)
        batch = self.predict_batch(q, similarities)
        return [self._to_set(batch, b, list(range(q.shape[1])), q[b]) for b in range(q.shape[0])]

    def predict(self, prompt: Any, generator: Generator, similarity: Similarity) -> PredictionSet:
        """Sample ``m_max`` items for ``prompt`` and return its prediction set.

        The samples are drawn in one call; the generation stage keeps the prefix a sequential
        sampler would have kept.
        """
        self._check_fitted()
        items, q, s = self._sample([prompt], generator, similarity, self._rng())
        batch = self._run(q, s, self._rng())
        return self._to_set(batch, 0, items[0], q[0])

    def _to_set(self, batch: BatchPrediction, b: int, items: Sequence[Any], q: np.ndarray) -> PredictionSet:
        keep = batch.idx[b, : batch.size[b]]
        trace = [(st, int(batch.stage_sizes[b, i])) for i, st in enumerate(self.stages)]
        return PredictionSet(
            items=[items[i] for i in keep], qualities=q[keep], abstained=bool(batch.abstained[b]), trace=trace
        )


class _CountingLabel:
    """Wraps a label function and counts its queries (the oracle keeps its own counts too)."""

    def __init__(self, label: LabelFn) -> None:
        self.label = label
        self.calls = 0

    def __call__(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        self.calls += int(np.size(rows))
        return np.asarray(self.label(rows, cols))

    def snapshot(self) -> int:
        return self.calls


def evaluate(
    model: Any, qualities: np.ndarray, similarities: np.ndarray, labels: np.ndarray
) -> dict[str, float]:
    """Coverage, mean finite set size and abstention rate of a calibrated model on test data.

    Abstentions count as covered (the guarantee's convention) and are reported separately; the
    mean size averages over non-abstained sets only (NaN if every set abstained).

    Args:
        model: a calibrated :class:`ScopeGen` or ``CLM`` (anything with ``predict_batch``).
        qualities: test qualities.
        similarities: test similarities.
        labels: test admissibility labels (used for scoring only, never by the model).

    Returns:
        ``{"coverage", "set_coverage", "size", "abstention"}``; ``set_coverage`` counts only sets
        that hold an admissible element.

    Shape:
        qualities: (B, m); similarities: (B, m, m); labels: (B, m).
    """
    lab = np.asarray(labels, dtype=bool)
    batch = model.predict_batch(qualities, similarities)
    b, m = batch.idx.shape
    inside = np.arange(m)[None, :] < batch.size[:, None]
    hit = (lab[np.arange(b)[:, None], batch.idx] & inside).any(axis=1)
    finite = ~batch.abstained
    return {
        "coverage": float(np.mean(hit | batch.abstained)),
        "set_coverage": float(np.mean(hit)),
        "size": float(batch.size[finite].mean()) if finite.any() else float("nan"),
        "abstention": float(batch.abstained.mean()),
    }
