"""Stages, the lazy oracle, the Markov property, coverage and errors of SCOPE-Gen."""

import math
import warnings

import numpy as np
import pytest

from iclr25.methods.scope_gen import (
    AdmissibilityOracle,
    ArrayOracle,
    OracleBudgetError,
    QASimulator,
    ScopeGen,
    evaluate,
    filter_stage,
    first_admissible,
    generation_stage,
)
from iclr25.methods.scope_gen.conformal import allocate_alphas, disjoint_splits, min_calibration_size


def test_generation_stage_cases():
    scores = np.array([[1.0, 2.0, 3.0], [5.0, 6.0, 7.0], [1.0, 2.0, 2.5], [1.0, 2.0, 3.0]])
    size, abst = generation_stage(scores, 2.7)
    assert size.tolist() == [2, 0, 0, 2] and abst.tolist() == [False, False, True, False]
    size, abst = generation_stage(scores, math.inf)
    assert abst.all() and (size == 0).all()
    # Reaching λ exactly keeps that prefix.
    assert generation_stage(np.array([[1.0, 2.0, 3.0]]), 3.0)[0].tolist() == [3]


def test_filter_stage_cases():
    sc = np.array([[-1.0, 0.4, 0.9, 2.0], [3.0, 4.0, 5.0, 6.0]])
    size = np.array([3, 2])
    assert filter_stage(sc, size, 0.5).tolist() == [2, 0]
    assert filter_stage(sc, size, 10.0).tolist() == [3, 2]  # never reached: whole set
    assert filter_stage(sc, size, math.nan).tolist() == [3, 2]
    assert filter_stage(sc, size, math.inf).tolist() == [3, 2]


def test_lazy_oracle_counts_first_admissible_position():
    labels = np.array([[False, False, True, True], [True, False, False, False], [False, False, False, False]])
    oracle = ArrayOracle(labels)
    idx = np.array([[0, 1, 2, 3], [3, 2, 1, 0], [0, 1, 2, 3]])  # row 1 queried in reverse order
    pos = first_admissible(oracle.query, np.arange(3), idx, np.array([4, 4, 2]))
    assert pos.tolist() == [2, 3, -1]
    assert oracle.calls == 3 + 4 + 2


def test_lazy_oracle_memo_and_budget():
    seen = []
    oracle = AdmissibilityOracle(lambda x, y: seen.append(y) or y.lower() == "paris", budget=2)
    assert [oracle("q", y) for y in ["Rome", "rome ", "ROME", "Paris"]] == [False, False, False, True]
    assert oracle.calls == 4 and oracle.unique_calls == 2 and seen == ["Rome", "Paris"]
    with pytest.raises(OracleBudgetError):
        oracle("q", "berlin")
    oracle.reset()
    assert oracle.calls == 0 and oracle("q", "berlin") is False


def test_array_oracle_keys_and_errors():
    oracle = ArrayOracle(np.array([[0, 1, 1, 0]]), keys=np.array([[5, 7, 7, 5]]), budget=2)
    assert oracle.query(np.zeros(4, int), np.arange(4)).tolist() == [False, True, True, False]
    assert (oracle.calls, oracle.unique_calls) == (4, 2)
    with pytest.raises(TypeError):
        ArrayOracle(np.array([[0.5, 1.0]]))
    with pytest.raises(ValueError):
        ArrayOracle(np.array([[True, False]]), keys=np.array([[1, 1]]))
    with pytest.raises(OracleBudgetError):
        ArrayOracle(np.ones((1, 3), bool), budget=1).query(np.zeros(2, int), np.arange(2))


def test_non_boolean_oracle_raises():
    with pytest.raises(TypeError, match="bool"):
        AdmissibilityOracle(lambda x, y: 1)("q", "a")


def _task(n=900, seed=0):
    return QASimulator(n_prompts=n, seed=seed).to_arrays(20, np.random.default_rng(seed))


def test_lazy_calibration_calls_match_hand_count():
    # Generation-only on hand-built labels: calls = first admissible position + 1, or m.
    labels = np.array([[False, True, False], [True, False, False], [False, False, False]] * 4)
    q = np.full(labels.shape, 0.5)
    s = np.broadcast_to(np.eye(3), (12, 3, 3)).copy()
    oracle = ArrayOracle(labels)
    ScopeGen(stages=("generation",), alpha_parts=(1,), alpha_chunks=1, m_max=3).calibrate_arrays(q, s, oracle)
    assert oracle.calls == 4 * (2 + 1 + 3)


def test_stage_report_and_thresholds():
    arr = _task()
    model = ScopeGen(alpha=0.3, random_state=0).calibrate_arrays(
        arr.qualities, arr.similarities, arr.oracle()
    )
    assert len(model.thresholds_) == 3 and len(model.stage_report_) == 3
    assert sum(r["n_split"] for r in model.stage_report_) == len(arr)
    assert model.oracle_calls_ == sum(r["oracle_calls"] for r in model.stage_report_)
    assert abs(np.prod([1 - a for a in model.alphas_]) - 0.7) < 1e-12


def test_markov_property_admissible_output_implies_admissible_input():
    rng = np.random.default_rng(3)
    arr = _task(600, seed=3)
    for order in [("generation", "diversity", "quality"), ("generation", "quality", "diversity")]:
        model = ScopeGen(stages=order, alpha=float(rng.uniform(0.1, 0.5)), random_state=1)
        model.calibrate_arrays(arr.qualities[:400], arr.similarities[:400], arr.oracle(np.arange(400)))
        q, s, lab = arr.qualities[400:], arr.similarities[400:], arr.labels[400:]
        # Re-run stage by stage; each stage's output set is a subset of its input set.
        for upto in range(1, 4):
            out = model._run(q, s, np.random.default_rng(upto), upto=upto)
            prev = model._run(q, s, np.random.default_rng(upto), upto=upto - 1) if upto > 1 else None
            for b in range(len(q)):
                kept = set(out.idx[b, : out.size[b]].tolist())
                if prev is not None:
                    before = set(prev.idx[b, : prev.size[b]].tolist())
                    assert kept <= before
                    if any(lab[b, list(kept)]):
                        assert any(lab[b, list(before)])


def test_coverage_sanity_and_no_allocation_fails():
    arr = _task(2000, seed=5)
    cov, cov_same = [], []
    for r in range(200):
        perm = np.random.default_rng(r).permutation(len(arr))
        cal, test = perm[:300], perm[300:400]
        out = []
        for allocate in (True, False):
            m = ScopeGen(alpha=0.3, allocate=allocate, random_state=r)
            m.calibrate_arrays(arr.qualities[cal], arr.similarities[cal], arr.oracle(cal))
            out.append(evaluate(m, arr.qualities[test], arr.similarities[test], arr.labels[test])["coverage"])
        cov.append(out[0])
        cov_same.append(out[1])
    assert np.mean(cov) >= 0.7 - 0.02
    assert np.mean(cov_same) < 0.7 - 0.05


def test_seeded_determinism():
    arr = _task(500)
    outs = []
    for _ in range(2):
        m = ScopeGen(alpha=0.4, random_state=7).calibrate_arrays(
            arr.qualities[:400], arr.similarities[:400], arr.oracle(np.arange(400))
        )
        outs.append(
            [(p.items, p.abstained) for p in m.predict_arrays(arr.qualities[400:], arr.similarities[400:])]
        )
    assert outs[0] == outs[1]


def test_too_small_calibration_set_abstains():
    arr = _task(20)
    with pytest.warns(UserWarning, match="calibration set too small"):
        m = ScopeGen(alpha=0.3, random_state=0).calibrate_arrays(
            arr.qualities[:6], arr.similarities[:6], arr.oracle(np.arange(6))
        )
    assert m.thresholds_[0] == math.inf  # 2 instances per split: ceil(3 * 0.807) = 3 > 2
    sets = m.predict_arrays(arr.qualities[6:], arr.similarities[6:])
    assert all(p.abstained and len(p) == 0 for p in sets)
    assert evaluate(m, arr.qualities[6:], arr.similarities[6:], arr.labels[6:])["abstention"] == 1.0


def test_small_calibration_set_for_alpha_warns_with_minimum_n():
    arr = _task(1600)
    model = ScopeGen(alpha=0.01, random_state=0)
    assert model.min_calibration_n() == 1491  # α_s = (0.00601, 0.00201, 0.00201) need (166, 497, 497)
    with pytest.warns(UserWarning, match=r"too small for alpha=0\.01.*at least n=1491") as rec:
        model.calibrate_arrays(arr.qualities[:20], arr.similarities[:20], arr.oracle(np.arange(20)))
    assert len(rec) == 1
    assert model.thresholds_ == [math.inf] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = ScopeGen(alpha=0.01, random_state=0).calibrate_arrays(
            arr.qualities[:1491], arr.similarities[:1491], arr.oracle(np.arange(1491))
        )
    assert all(r["n_split"] >= 166 for r in big.stage_report_)


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3, 0.4])
@pytest.mark.parametrize("split", ["equal", "shared"])
def test_min_calibration_n_is_the_boundary(alpha, split):
    """At the minimum n every stage has enough scores for a finite λ; one instance fewer does not."""
    model = ScopeGen(alpha=alpha, split=split)
    needs = [min_calibration_size(a) for a in allocate_alphas(alpha)]

    def sizes(n):
        if split == "shared":
            return [n] * 3
        return [p.size for p in disjoint_splits(n, 3, np.random.default_rng(0))]

    n = model.min_calibration_n()
    assert all(s >= d for s, d in zip(sizes(n), needs, strict=True))
    assert any(s < d for s, d in zip(sizes(n - 1), needs, strict=True))


def test_online_matches_protocol():
    sim = QASimulator(n_prompts=200, seed=1)
    oracle = sim.oracle()
    m = ScopeGen(alpha=0.3, random_state=0).calibrate(sim.prompts[:150], sim, oracle, sim.similarity)
    assert 0 < oracle.unique_calls <= oracle.calls <= 150 * 20
    p = m.predict(170, sim, sim.similarity)
    assert [t[0] for t in p.trace] == ["generation", "quality", "diversity"]  # quality first (Fig. 1)
    assert all(isinstance(y, str) for y in p.items)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(stages=("generation", "blur")),
        dict(stages=("generation", "quality", "quality")),
        dict(stages=("quality", "generation", "diversity")),
        dict(m_max=0),
        dict(alpha=0.0),
        dict(alpha=1.2),
        dict(alpha_parts=(3, 1)),
        dict(generation_score="mean"),
    ],
)
def test_bad_configuration_raises(kwargs):
    with pytest.raises(ValueError):
        ScopeGen(**kwargs)


def test_bad_arrays_raise():
    q = np.random.default_rng(0).random((10, 4))
    s = np.broadcast_to(np.eye(4), (10, 4, 4)).copy()
    lab = np.ones((10, 4), bool)
    m = ScopeGen()
    with pytest.raises(ValueError, match="match"):
        m.calibrate_arrays(q, s[:9], lab)
    with pytest.raises(ValueError, match="square"):
        m.calibrate_arrays(q, s[:, :, :3], lab)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        m.calibrate_arrays(q, s * 2, lab)
    with pytest.raises(ValueError, match="labels"):
        m.calibrate_arrays(q, s, lab[:5])
    with pytest.raises(RuntimeError):
        ScopeGen().predict_arrays(q, s)
