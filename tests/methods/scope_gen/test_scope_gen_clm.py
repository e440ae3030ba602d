"""The CLM baseline: risk grid, Pareto front, fixed-sequence testing and p-values."""

import itertools

import numpy as np
import pytest
from scipy.stats import binom

from iclr25.methods.scope_gen import (
    CLM,
    QASimulator,
    binomial_pvalue,
    clm_grids,
    clm_losses,
    clm_risk_grid,
    evaluate,
    fixed_sequence_test,
    pareto_front,
)


@pytest.mark.parametrize("alpha", [0.3, 0.4])
def test_risk_grid_multiplies_out(alpha):
    pairs = clm_risk_grid(alpha)
    assert len(pairs) == 10
    for eps, delta in pairs:
        assert abs((1 - eps) * (1 - delta) - (1 - alpha)) < 1e-12
        assert alpha / 15 - 1e-12 <= delta <= alpha / 5 + 1e-12 and 0 < eps < alpha


def _brute_front(risk, cost):
    keep = []
    for g in range(risk.size):
        dominated = any(
            (risk[h] <= risk[g] and cost[h] <= cost[g] and (risk[h] < risk[g] or cost[h] < cost[g]))
            or (risk[h] == risk[g] and cost[h] == cost[g] and h < g)
            for h in range(risk.size)
        )
        if not dominated:
            keep.append(g)
    return sorted(keep, key=lambda g: (risk[g], cost[g]))


def test_pareto_front_matches_brute_force_on_3x3x3_grid():
    arr = QASimulator(n_prompts=120, seed=2).to_arrays(8, np.random.default_rng(2))
    ls = np.array([0.1, 0.5, np.inf])
    lq = np.array([-np.inf, 0.05, 0.2])
    lt = np.array([1.0, 3.0, np.inf])
    miss, cost = clm_losses(arr.qualities, arr.similarities, arr.labels, (ls, lq, lt))
    assert miss.shape == (27, 120)
    risk, c = miss.mean(axis=1).astype(float), cost.mean(axis=1).astype(float)
    assert pareto_front(risk, c).tolist() == _brute_front(risk, c)
    rng = np.random.default_rng(0)
    for _ in range(20):
        r, cc = rng.integers(0, 4, 27) / 4, rng.integers(0, 4, 27).astype(float)
        assert pareto_front(r, cc).tolist() == _brute_front(r, cc)


def test_losses_match_direct_simulation():
    arr = QASimulator(n_prompts=40, seed=3).to_arrays(6, np.random.default_rng(3))
    grids = (np.array([0.2, np.inf]), np.array([-np.inf, 0.1]), np.array([2.0, np.inf]))
    miss, cost = clm_losses(arr.qualities, arr.similarities, arr.labels, grids)
    for g, (ls, lq, lt) in enumerate(itertools.product(*grids)):
        for i in range(40):
            kept, drawn = [], 0
            for j in range(6):
                drawn += 1
                if arr.qualities[i, j] >= lq and all(arr.similarities[i, j, k] <= ls for k in kept):
                    kept.append(j)
                if len(kept) >= lt:
                    break
            assert miss[g, i] == (not any(arr.labels[i, kept]))
            assert cost[g, i] == drawn + len(kept)


def test_fixed_sequence_stops_at_first_failure():
    assert fixed_sequence_test([0.01, 0.04, 0.06, 0.001], 0.05) == 2
    assert fixed_sequence_test([0.2, 0.01], 0.05) == 0
    assert fixed_sequence_test([], 0.05) == 0


def test_pvalues_match_scipy():
    for misses, n, eps in [(0, 10, 0.1), (7, 50, 0.2), (30, 300, 0.15)]:
        assert binomial_pvalue(misses, n, eps) == pytest.approx(binom.cdf(misses, n, eps), rel=1e-12)
    # By hand: P(Bin(4, 0.5) <= 1) = 5/16.
    assert binomial_pvalue(1, 4, 0.5) == pytest.approx(5 / 16)


def test_clm_end_to_end_and_certify():
    arr = QASimulator(n_prompts=700, seed=4).to_arrays(20, np.random.default_rng(4))
    oracle = arr.oracle(np.arange(500))
    clm = CLM(epsilon=0.25, delta=0.05, n_lambdas=8, random_state=0)
    clm.calibrate_arrays(arr.qualities[:500], arr.similarities[:500], oracle)
    assert oracle.calls == 500 * 20 and oracle.unique_calls < oracle.calls  # eager, memoised
    assert clm.config_ is not None and clm.n_accepted_ >= 1
    ev = evaluate(clm, arr.qualities[500:], arr.similarities[500:], arr.labels[500:])
    assert ev["coverage"] >= 0.6 and ev["abstention"] == 0.0
    # A table over a pool with rows= gives the same selection as the direct path.
    grids = clm_grids(arr.qualities[:500], arr.similarities[:500], 8)
    miss, cost = clm_losses(arr.qualities, arr.similarities, arr.labels, grids)
    other = CLM(epsilon=0.25, delta=0.05, random_state=0).calibrate_losses(
        miss, cost, grids, rows=np.arange(500)
    )
    assert other.config_ == clm.config_
    assert other.certify(0.0001, 0.0001).config_ is None  # nothing certifiable -> abstain
    assert other.predict_batch(arr.qualities[500:], arr.similarities[500:]).abstained.all()


@pytest.mark.parametrize(
    "kwargs", [dict(k_max=0), dict(set_score="median"), dict(epsilon=0.0), dict(delta=1.0)]
)
def test_clm_bad_arguments(kwargs):
    with pytest.raises((ValueError, TypeError)):
        CLM(**kwargs)


def test_count_grid_is_every_integer_stop():
    """With the first-k set score every stopping count 1..k is on the grid (k = 60: 2 and 3 too)."""
    rng = np.random.default_rng(0)
    q, s = rng.random((30, 60)), np.broadcast_to(np.eye(60), (30, 60, 60))
    _, lq, lt = clm_grids(q, s, n_lambdas=25, set_score="count")
    assert lt.tolist() == [-np.inf, *range(1, 61), np.inf]
    assert len(lq) <= 27  # the other grids stay quantile grids
    assert clm_grids(q, s, n_lambdas=5, set_score="max")[2].size <= 7


@pytest.mark.parametrize("set_score", ["count", "max", "sum"])
def test_losses_match_direct_simulation_on_odd_sizes(set_score):
    """The packed rejection masks and the histogram stopping rule against a plain loop: n not a
    multiple of 8, λ grids with -inf/+inf, thresholds equal to observed scores, unsorted λ_stop."""
    arr = QASimulator(n_prompts=13, seed=5).to_arrays(7, np.random.default_rng(5))
    q, s, lab = arr.qualities, arr.similarities, arr.labels
    ls = np.array([-np.inf, float(np.median(s[s < 1])), 0.2, np.inf])
    lq = np.array([-np.inf, float(q[0, 1]), 0.1])
    lt = {"count": np.array([3.0, 1.0, np.inf, 2.0]), "max": np.array([float(q[2, 0]), 0.3, -np.inf])}
    lt["sum"] = np.array([0.5, float(q[1, 0] + q[1, 1]), np.inf])
    grids = (ls, lq, lt[set_score])
    miss, cost = clm_losses(q, s, lab, grids, set_score)
    for g, (a, b, c) in enumerate(itertools.product(*grids)):
        for i in range(13):
            kept, drawn = [], 0
            for j in range(7):
                drawn += 1
                if q[i, j] >= b and all(s[i, j, k] <= a for k in kept):
                    kept.append(j)
                score = {"count": len(kept), "max": max(q[i, kept], default=-np.inf)}.get(
                    set_score, float(np.sum(q[i, kept]))
                )
                if score >= c:
                    break
            assert miss[g, i] == (not any(lab[i, kept])), (g, i)
            assert cost[g, i] == drawn + len(kept), (g, i)


def test_match_walks_the_front_at_the_target_miss_rate():
    """``match`` accepts front configurations while the held-out miss rate is at most the target
    and stops at the first that exceeds it; a looser target accepts at least as far along the
    front (a configuration no costlier), and the matched CLM's test coverage is near the target."""
    arr = QASimulator(n_prompts=1100, seed=6).to_arrays(20, np.random.default_rng(6))
    cal, test = np.arange(600), np.arange(600, 1100)
    grids = clm_grids(arr.qualities[cal], arr.similarities[cal], 10)
    miss, cost = clm_losses(arr.qualities[cal], arr.similarities[cal], arr.labels[cal], grids)
    clm = CLM(random_state=0).calibrate_losses(miss, cost, grids)
    rates = clm.front_misses_ / clm.n_test_
    q, s, lab = arr.qualities[test], arr.similarities[test], arr.labels[test]
    accepted = []
    for target in (0.2, 0.3, 0.4):
        clm.match(target)
        k = clm.n_accepted_
        assert k >= 1 and (rates[:k] <= target).all() and (k == rates.size or rates[k] > target)
        ev = evaluate(clm, q, s, lab)
        assert abs(ev["coverage"] - (1 - target)) < 0.06 and ev["abstention"] == 0.0
        accepted.append(k)
    assert accepted == sorted(accepted)
    # A target below every configuration's miss rate selects the lowest-risk one (no abstention).
    assert rates[0] > 0.0  # some prompts have no admissible sample at all
    clm.match(0.0)
    i_s, i_q, i_t = np.unravel_index(clm.front_configs_[0], tuple(len(g) for g in grids))
    assert clm.n_accepted_ == 0 and clm.config_ == (grids[0][i_s], grids[1][i_q], grids[2][i_t])
    with pytest.raises(ValueError):
        clm.match(1.5)
