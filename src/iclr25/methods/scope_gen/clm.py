"""Conformal Language Modeling (CLM), the baseline of SCOPE-Gen, on the same protocols.

Implements the baseline of *Conformal Generative Modeling with Improved Sample Efficiency
through Sequential Greedy Filtering* (Kladny, Schölkopf, Muehlebach; ICLR 2025; arXiv
2410.01660, Sec. 5): *Conformal Language Modeling* (Victor Quach, Adam Fisch, Tal Schuster,
Adam Yala, Jae Ho Sohn, Tommi Jaakkola, Regina Barzilay; ICLR 2024; arXiv 2306.10193),
Algorithm 1 and Sec. 4:

- the sampling-with-rejection set ``C_λ``: draw up to ``k_max`` samples; reject a sample whose
  quality is below ``λ_qual`` or whose largest similarity to a kept sample exceeds ``λ_sim``;
  stop once the set score ("count" = first-k, "max" or "sum" of qualities) reaches ``λ_stop``;
- Learn-then-Test (Angelopoulos et al., 2021) with Pareto testing (Laufer-Goldshtein et al.,
  ICLR 2023): on one half of the calibration data, the Pareto front of (miss rate, mean samples
  drawn + mean set size); on the other, fixed-sequence testing along the front by increasing
  miss rate with the binomial-tail p-value ``p = BinomCDF(n·L̂; n, ε)``, accepting while
  ``p ≤ δ``. Guarantee: ``P(miss rate ≤ ε) ≥ 1-δ``;
- :func:`clm_risk_grid`: the ``(ε, δ)`` pairs with ``(1-ε)(1-δ) = 1-α`` used to compare with
  SCOPE-Gen at level α (δ in ``[α/15, α/5]``);
- :meth:`CLM.match`: the same front walked with an empirical acceptance rule (held-out miss rate
  at most a target) instead of the test, to compare set sizes at a matched realised coverage.

CLM labels every sample (up to ``k_max``) of every calibration instance.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from scipy.stats import binom

from iclr25.methods.scope_gen.conformal import check_alpha
from iclr25.methods.scope_gen.oracle import AdmissibilityOracle, ArrayOracle, Generator, Similarity
from iclr25.methods.scope_gen.pipeline import BatchPrediction, PredictionSet, check_arrays

__all__ = [
    "CLM",
    "SetScore",
    "binomial_pvalue",
    "clm_grids",
    "clm_losses",
    "clm_risk_grid",
    "fixed_sequence_test",
    "pareto_front",
]

SetScore = Literal["count", "max", "sum"]
Grids = tuple[np.ndarray, np.ndarray, np.ndarray]


def clm_risk_grid(alpha: float, n: int = 10) -> list[tuple[float, float]]:
    """``n`` pairs ``(ε, δ)`` with ``(1-ε)(1-δ) = 1-α`` and δ evenly spaced in ``[α/15, α/5]``.

    Example:
        >>> eps, delta = clm_risk_grid(0.3)[0]
        >>> round((1 - eps) * (1 - delta), 12)
        0.7
    """
    alpha = check_alpha(alpha)
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    deltas = np.linspace(alpha / 15, alpha / 5, n)
    return [(float(1 - (1 - alpha) / (1 - d)), float(d)) for d in deltas]


def binomial_pvalue(misses: int | np.ndarray, n: int, epsilon: float) -> float | np.ndarray:
    """Binomial-tail p-value of ``H0: risk > ε`` after ``misses`` misses in ``n`` trials.

    ``p = P(Binomial(n, ε) ≤ misses)`` (``scipy.stats.binom.cdf``).

    Example:
        >>> round(float(binomial_pvalue(0, 10, 0.5)), 6)
        0.000977
    """
    return binom.cdf(misses, n, epsilon)


def pareto_front(risk: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-optimal configurations (minimise both), by increasing risk.

    A configuration is kept unless another has risk and cost no larger and one strictly smaller;
    of configurations with identical (risk, cost) the first index is kept.

    Shape:
        risk, cost: (G,) -> (P,).

    Example:
        >>> pareto_front(np.array([0.1, 0.2, 0.05, 0.2]), np.array([5.0, 3.0, 9.0, 4.0])).tolist()
        [2, 0, 1]
    """
    risk, cost = np.asarray(risk, dtype=float), np.asarray(cost, dtype=float)
    order = np.lexsort((np.arange(risk.size), cost, risk))  # by risk, then cost, then index
    keep, best = [], np.inf
    for g in order:
        if cost[g] < best:
            keep.append(g)
            best = cost[g]
    return np.array(keep, dtype=int)


def fixed_sequence_test(pvalues: Sequence[float], delta: float) -> int:
    """Fixed-sequence testing: the number of leading hypotheses rejected at level δ.

    Walks the p-values in order, rejecting while ``p ≤ δ`` and stopping at the first ``p > δ``.

    Example:
        >>> fixed_sequence_test([0.01, 0.02, 0.5, 0.01], 0.05)
        2
    """
    count = 0
    for p in pvalues:
        if p > delta:
            break
        count += 1
    return count


def _quantile_grid(values: np.ndarray, n_lambdas: int) -> np.ndarray:
    v = np.asarray(values, dtype=float).ravel()
    inner = np.unique(np.quantile(v, np.linspace(0.0, 1.0, n_lambdas), method="higher")) if v.size else []
    return np.concatenate([[-np.inf], inner, [np.inf]])


def clm_grids(
    qualities: np.ndarray, similarities: np.ndarray, n_lambdas: int = 25, set_score: SetScore = "count"
) -> Grids:
    """The λ grids: ≤ ``n_lambdas`` empirical quantiles per parameter, plus ``-inf`` and ``+inf``.

    With the "count" set score the stopping grid is every integer ``1..k`` (plus ``±inf``), not
    a subsample, so every set size up to ``k`` can be selected.

    Returns:
        ``(λ_sim grid, λ_qual grid, λ_stop grid)``.

    Shape:
        qualities: (n, k); similarities: (n, k, k).
    """
    q, s = np.asarray(qualities, dtype=float), np.asarray(similarities, dtype=float)
    k = q.shape[1]
    off = s[:, ~np.eye(k, dtype=bool)]
    if set_score == "count":
        # Every integer stopping size 1..k: subsampling them would stop CLM from ever keeping,
        # say, exactly 2 or 3 samples when k is large.
        stop_grid = np.concatenate([[-np.inf], np.arange(1, k + 1, dtype=float), [np.inf]])
    elif set_score == "max":
        stop_grid = _quantile_grid(q, n_lambdas)
    elif set_score == "sum":
        stop_grid = _quantile_grid(np.cumsum(np.sort(q, axis=1)[:, ::-1], axis=1), n_lambdas)
    else:
        raise ValueError(f"set_score must be 'count', 'max' or 'sum', got {set_score!r}")
    return _quantile_grid(off, n_lambdas), _quantile_grid(q, n_lambdas), stop_grid


def _kept(q: np.ndarray, s: np.ndarray, lam_sim: np.ndarray, lam_qual: np.ndarray) -> np.ndarray:
    """Rejection-sampling masks for every (λ_qual, λ_sim) pair.

    Sample ``j`` is kept iff its quality is at least λ_qual and no earlier kept sample has
    similarity above λ_sim to it (the same as "its largest similarity to a kept sample is at most
    λ_sim", the empty case included). The masks are packed eight instances to a byte along ``n``,
    so the sequential pass over ``j`` works on bytes.

    Shape:
        q: (n, k); s: (n, k, k); lam_sim: (S,); lam_qual: (Q,) -> (Q, S, n, k).
    """
    n, k = q.shape
    lam_q = np.asarray(lam_qual, dtype=float)
    lam_s = np.asarray(lam_sim, dtype=float)
    acc = np.packbits(q.T[:, None, :] >= lam_q[None, :, None], axis=-1)  # (k, Q, ⌈n/8⌉)
    s_t = np.transpose(s, (1, 2, 0))  # (k, k, n): s_t[j, i, b] = s[b, j, i]
    clash = np.packbits(s_t[:, :, None, :] > lam_s[None, None, :, None], axis=-1)  # (k, k, S, ⌈n/8⌉)
    kept = np.zeros((k, lam_q.size, lam_s.size, acc.shape[-1]), dtype=np.uint8)
    kept[0] = acc[0][:, None, :]
    for j in range(1, k):
        rejected = np.bitwise_or.reduce(kept[:j] & clash[j, :j, None], axis=0)  # (Q, S, ⌈n/8⌉)
        kept[j] = acc[j][:, None, :] & ~rejected
    out = np.unpackbits(kept, axis=-1, count=n).view(bool)  # (k, Q, S, n)
    return np.ascontiguousarray(np.moveaxis(out, 0, -1))  # (Q, S, n, k)


def _set_scores(kept: np.ndarray, q: np.ndarray, set_score: SetScore) -> np.ndarray:
    if set_score == "count":
        return kept.cumsum(axis=-1)
    if set_score == "max":
        return np.maximum.accumulate(np.where(kept, q, -np.inf), axis=-1)
    return np.cumsum(np.where(kept, q, 0.0), axis=-1)


def clm_losses(
    qualities: np.ndarray,
    similarities: np.ndarray,
    labels: np.ndarray,
    grids: Grids,
    set_score: SetScore = "count",
) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance miss indicator and cost of every configuration on the grid.

    Configuration ``g`` enumerates ``(λ_sim, λ_qual, λ_stop)`` in row-major order of the grids.
    The cost is samples drawn + set size.

    Returns:
        ``(miss, cost)`` as float32 (0/1 misses), ready for fast averaging.

    Shape:
        qualities, labels: (n, k); similarities: (n, k, k) -> (G, n), (G, n) with
        ``G = |λ_sim| · |λ_qual| · |λ_stop|``.
    """
    q, lab = np.asarray(qualities, dtype=float), np.asarray(labels, dtype=bool)
    s = np.asarray(similarities, dtype=float)
    ls, lq, lt = (np.asarray(g, dtype=float) for g in grids)
    n, k = q.shape
    miss = np.empty((ls.size, lq.size, lt.size, n), dtype=bool)
    cost = np.empty((ls.size, lq.size, lt.size, n), dtype=np.int16)
    n_s, n_t = ls.size, lt.size
    # The stopping rule is evaluated on the sorted λ_stop grid and mapped back to grid order.
    t_order = np.argsort(lt, kind="stable")
    t_sorted = lt[t_order]
    offsets = (np.arange(n_s * n)[:, None] * (n_t + 1)).astype(np.int64)  # (S·n, 1)
    kept_all = _kept(q, s, ls, lq)  # (Q, S, n, k)
    for iq in range(lq.size):
        kept = kept_all[iq]  # (S, n, k)
        n_kept = kept.cumsum(axis=-1)  # (S, n, k)
        score = _set_scores(kept, q, set_score)  # (S, n, k), nondecreasing in k
        # Samples drawn: the first j with score_j >= λ_stop, else k, i.e. 1 + #{j: score_j < λ_stop}.
        # With r_j = #{thresholds <= score_j}, score_j < t_i exactly when r_j <= i (sorted t), so
        # the counts for every threshold are a cumulative histogram of r: O(S·n·(k + T)).
        r = np.searchsorted(t_sorted, score.reshape(n_s * n, k), side="right")  # (S·n, k) in 0..T
        hist = np.bincount((offsets + r).ravel(), minlength=n_s * n * (n_t + 1))
        below = hist.reshape(n_s, n, n_t + 1).cumsum(axis=-1)[..., :n_t]  # (S, n, T) sorted order
        drawn_sorted = np.minimum(below + 1, k)
        drawn = np.empty_like(drawn_sorted)
        drawn[..., t_order] = drawn_sorted  # (S, n, T) in grid order
        size = np.take_along_axis(n_kept, drawn - 1, axis=-1)  # (S, n, T)
        hit = kept & lab[None]
        first = np.where(hit.any(axis=-1), hit.argmax(axis=-1), k)  # (S, n)
        miss[:, iq] = np.moveaxis(first[..., None] >= drawn, -1, 1)  # (S, T, n)
        cost[:, iq] = np.moveaxis(drawn + size, -1, 1)
    return miss.reshape(-1, n).astype(np.float32), cost.reshape(-1, n).astype(np.float32)


class CLM:
    """Conformal Language Modeling sets, calibrated with Learn-then-Test and Pareto testing.

    Args:
        k_max: sampling cap per instance.
        set_score: the stopping set score, "count" (first-k), "max" or "sum" of qualities.
        epsilon: ε, the tolerated miss rate.
        delta: δ, the failure probability of the guarantee ``P(miss ≤ ε) ≥ 1-δ``.
        n_lambdas: at most this many empirical quantiles per λ grid (plus ±inf).
        pareto_split: fraction of the calibration data used to build the Pareto front.
        grids: fixed ``(λ_sim, λ_qual, λ_stop)`` grids; computed from the calibration data if None.
        random_state: seed of the split.

    Attributes:
        config_: the selected ``(λ_sim, λ_qual, λ_stop)``, or None if no configuration was
            certified (every prediction then abstains).
        n_front_: size of the Pareto front; ``n_accepted_``: configurations certified.

    References:
        Quach et al., ICLR 2024, Algorithm 1; Laufer-Goldshtein et al., ICLR 2023.

    Example:
        >>> from iclr25.methods.scope_gen import QASimulator
        >>> task = QASimulator(n_prompts=300, seed=0).to_arrays(m=10, rng=np.random.default_rng(0))
        >>> clm = CLM(k_max=10, epsilon=0.25, delta=0.05, n_lambdas=5, random_state=0)
        >>> cal = np.arange(200)
        >>> clm = clm.calibrate_arrays(task.qualities[cal], task.similarities[cal], task.oracle(cal))
        >>> clm.predict_batch(task.qualities[200:], task.similarities[200:]).size.shape
        (100,)
    """

    def __init__(
        self,
        k_max: int = 20,
        set_score: SetScore = "count",
        epsilon: float = 0.2,
        delta: float = 0.05,
        n_lambdas: int = 25,
        pareto_split: float = 0.5,
        grids: Grids | None = None,
        random_state: int | None = None,
    ) -> None:
        if isinstance(k_max, bool) or int(k_max) != k_max or k_max < 1:
            raise ValueError(f"k_max must be a positive integer, got {k_max}")
        if set_score not in ("count", "max", "sum"):
            raise ValueError(f"set_score must be 'count', 'max' or 'sum', got {set_score!r}")
        if n_lambdas < 1:
            raise ValueError(f"n_lambdas must be positive, got {n_lambdas}")
        if not 0.0 < pareto_split < 1.0:
            raise ValueError(f"pareto_split must lie in (0, 1), got {pareto_split}")
        self.k_max = int(k_max)
        self.set_score = set_score
        self.epsilon = check_alpha(epsilon, "epsilon")
        self.delta = check_alpha(delta, "delta")
        self.n_lambdas = n_lambdas
        self.pareto_split = pareto_split
        self.grids = grids
        self.random_state = random_state

    def calibrate_arrays(
        self, qualities: np.ndarray, similarities: np.ndarray, oracle: ArrayOracle | np.ndarray
    ) -> CLM:
        """Label every sample (up to ``k_max``) of every instance, then run Learn-then-Test.

        Shape:
            qualities: (n, m); similarities: (n, m, m); labels: (n, m).
        """
        if not isinstance(oracle, ArrayOracle):
            oracle = ArrayOracle(oracle)
        q, s = check_arrays(qualities, similarities, self.k_max)
        n, k = q.shape
        labels = oracle.query(np.repeat(np.arange(n), k), np.tile(np.arange(k), n)).reshape(n, k)
        return self._calibrate_labelled(q, s, labels)

    def calibrate(
        self,
        prompts: Sequence[Any],
        generator: Generator,
        oracle: AdmissibilityOracle,
        similarity: Similarity,
    ) -> CLM:
        """Calibrate online: sample ``k_max`` items per prompt and label all of them."""
        rng = np.random.default_rng(self.random_state)
        items = [list(generator.sample(p, self.k_max, rng)) for p in prompts]
        q = np.stack(
            [np.asarray(generator.quality(p, ys), dtype=float) for p, ys in zip(prompts, items, strict=True)]
        )
        s = np.stack([np.asarray(similarity(ys), dtype=float) for ys in items])
        q, s = check_arrays(q, s)
        labels = np.array(
            [[oracle(p, y) for y in ys] for p, ys in zip(prompts, items, strict=True)], dtype=bool
        )
        return self._calibrate_labelled(q, s, labels)

    def _calibrate_labelled(self, q: np.ndarray, s: np.ndarray, labels: np.ndarray) -> CLM:
        grids = self.grids or clm_grids(q, s, self.n_lambdas, self.set_score)
        miss, cost = clm_losses(q, s, labels, grids, self.set_score)
        return self.calibrate_losses(miss, cost, grids)

    def calibrate_losses(
        self, miss: np.ndarray, cost: np.ndarray, grids: Grids, rows: np.ndarray | None = None
    ) -> CLM:
        """Learn-then-Test with Pareto testing on a precomputed loss table (from :func:`clm_losses`).

        Args:
            miss: per-instance miss indicators of every configuration.
            cost: per-instance costs (samples drawn + set size) of every configuration.
            grids: the grids the table was computed on.
            rows: the calibration instances (columns of the table); all if None. Lets one table
                over a pool of instances serve many calibration splits.

        Returns:
            ``self``, fitted.

        Shape:
            miss, cost: (G, N); rows: (n,).
        """
        n_all = miss.shape[1]
        rows = np.arange(n_all) if rows is None else np.asarray(rows, dtype=int)
        n = rows.size
        n_opt = round(self.pareto_split * n)
        if n_opt < 1 or n - n_opt < 1:
            raise ValueError(f"need calibration instances in both Pareto halves, got n={n}")
        perm = np.random.default_rng(self.random_state).permutation(rows)
        opt, test = perm[:n_opt], perm[n_opt:]
        # Means over a subset of columns as matrix-vector products (one pass over the table).
        w = np.zeros(n_all, dtype=miss.dtype)
        w[opt] = 1.0 / n_opt
        front = pareto_front((miss @ w).astype(float), (cost @ w.astype(cost.dtype)).astype(float))
        self.grids_ = grids
        self.front_configs_ = front
        self.front_misses_ = miss[front][:, test].sum(axis=1)
        self.n_test_ = int(test.size)
        return self.certify(self.epsilon, self.delta)

    def certify(self, epsilon: float, delta: float) -> CLM:
        """Re-run the fixed-sequence test for another ``(ε, δ)`` on the same calibration data.

        Sets ``epsilon``, ``delta``, ``config_``, ``n_accepted_`` in place and returns ``self``.
        """
        if not hasattr(self, "front_configs_"):
            raise RuntimeError("CLM is not calibrated")
        self.epsilon, self.delta = check_alpha(epsilon, "epsilon"), check_alpha(delta, "delta")
        pvals = binomial_pvalue(self.front_misses_, self.n_test_, self.epsilon)
        accepted = fixed_sequence_test(pvals, self.delta)
        self.n_front_ = int(self.front_configs_.size)
        self.n_accepted_ = accepted
        # Cost decreases along the front, so the last accepted configuration is the cheapest.
        if accepted:
            g = int(self.front_configs_[accepted - 1])
            shape = tuple(len(x) for x in self.grids_)
            i_s, i_q, i_t = np.unravel_index(g, shape)
            self.config_: tuple[float, float, float] | None = (
                float(self.grids_[0][i_s]),
                float(self.grids_[1][i_q]),
                float(self.grids_[2][i_t]),
            )
        else:
            self.config_ = None
        return self

    def match(self, miss_rate: float) -> CLM:
        """Select a configuration at a given empirical miss rate instead of certifying one.

        Walks the Pareto front as :meth:`certify` does, but accepts a configuration while its
        miss rate on the held-out half of the calibration data is at most ``miss_rate``, and
        stops at the first that exceeds it; the last accepted (cheapest) configuration is
        selected. If none is accepted, the front's first (lowest-risk) configuration is. The
        result carries no guarantee: it is CLM tuned to a realised coverage of ``1 - miss_rate``
        on calibration data, for comparing set sizes at matched coverage.

        Args:
            miss_rate: the target miss rate, in [0, 1].

        Returns:
            ``self``, with ``config_`` and ``n_accepted_`` set (``epsilon`` and ``delta`` keep
            the values of the last certification).
        """
        if not hasattr(self, "front_configs_"):
            raise RuntimeError("CLM is not calibrated")
        if not 0.0 <= miss_rate <= 1.0:
            raise ValueError(f"miss_rate must lie in [0, 1], got {miss_rate}")
        rates = self.front_misses_ / self.n_test_
        # The fixed-sequence walk of the test on "rate - target <= 0" instead of "p <= δ"; the
        # tolerance keeps exact ties (k/n equal to the target) accepted despite float rounding.
        accepted = fixed_sequence_test(rates - miss_rate, 1e-12)
        self.n_front_ = int(self.front_configs_.size)
        self.n_accepted_ = accepted
        g = int(self.front_configs_[max(accepted, 1) - 1])
        shape = tuple(len(x) for x in self.grids_)
        i_s, i_q, i_t = np.unravel_index(g, shape)
        self.config_ = (float(self.grids_[0][i_s]), float(self.grids_[1][i_q]), float(self.grids_[2][i_t]))
        return self

    def predict_batch(self, qualities: np.ndarray, similarities: np.ndarray) -> BatchPrediction:
        """CLM sets of stored samples under the selected configuration.

        Shape:
            qualities: (B, m); similarities: (B, m, m).
        """
        if not hasattr(self, "config_"):
            raise RuntimeError("CLM is not calibrated")
        q, s = check_arrays(qualities, similarities, self.k_max)
        b, k = q.shape
        if self.config_ is None:
            zeros = np.zeros(b, dtype=int)
            return BatchPrediction(np.zeros((b, k), dtype=int), zeros, np.ones(b, dtype=bool), zeros[:, None])
        lam_s, lam_q, lam_t = self.config_
        kept = _kept(q, s, np.array([lam_s]), np.array([lam_q]))[0, 0]  # (B, k)
        score = _set_scores(kept, q, self.set_score)  # the same set score as at calibration
        drawn = np.minimum((score < lam_t).sum(axis=1) + 1, k)
        inside = kept & (np.arange(k)[None, :] < drawn[:, None])
        idx = np.argsort(~inside, axis=1, kind="stable")
        size = inside.sum(axis=1)
        return BatchPrediction(idx, size, np.zeros(b, dtype=bool), size[:, None])

    def predict_arrays(self, qualities: np.ndarray, similarities: np.ndarray) -> list[PredictionSet]:
        """CLM sets of stored samples; ``items`` are sample indices."""
        q = np.asarray(qualities, dtype=float)
        batch = self.predict_batch(q, similarities)
        return [
            PredictionSet(
                items=batch.idx[i, : batch.size[i]].tolist(),
                qualities=q[i, batch.idx[i, : batch.size[i]]],
                abstained=bool(batch.abstained[i]),
                trace=[("clm", int(batch.size[i]))],
            )
            for i in range(q.shape[0])
        ]
