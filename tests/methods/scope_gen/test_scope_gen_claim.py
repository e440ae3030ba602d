"""The claim check: smoke run, the falsifier of the abstention gate, the random-score control."""

import math
import warnings

import numpy as np
import pytest

from iclr25._core.claims import judge
from iclr25.methods.scope_gen import QASimulator, ScopeGen, evaluate
from iclr25.methods.scope_gen.claim import CLAIM, _oracle_call_lines, _random_scores, _tag, _variants
from iclr25.methods.scope_gen.config import ScopeGenCheckConfig


def test_smoke_runs_deterministically(smoke_runs):
    a, b = smoke_runs("scope_gen")
    assert a.metrics == b.metrics
    for arm in CLAIM.arms:
        assert arm in a.metrics
    for ms in a.metrics.values():
        assert all(math.isfinite(v) for v in ms.values())
    j = judge(CLAIM, "smoke", [a])
    assert j.verdict.value == "INCONCLUSIVE" and len(j.outcomes) == len(CLAIM.criteria)
    assert all(not math.isnan(o.median) for o in j.outcomes)
    assert set(a.series) == {"coverage", "oracle_calls", "set_size"}
    assert any(c.control for c in CLAIM.criteria)


def _criterion(name: str):
    return next(c for c in CLAIM.criteria if c.name == name)


@pytest.mark.parametrize("alpha", [0.3, 0.4])
def test_abstention_gate_fails_when_every_set_abstains(alpha):
    """Broken variant: SCOPE-Gen calibrated on too few prompts for α has λ_1 = +inf and abstains
    on every test prompt; the claim's abstention gate must reject it, and accept the method
    calibrated on a proper split."""
    cfg = ScopeGenCheckConfig()
    arr = QASimulator(n_prompts=600, seed=0).to_arrays(cfg.m_max, np.random.default_rng(0))
    gate = _criterion(f"S3_abstention_{_tag(alpha)}")
    kw = _variants(cfg, alpha, cfg.m_max)["scope_gen"]
    test = np.arange(300, 600)
    out = {}
    for n_cal in (6, 300):  # 6 prompts: 2 per stage split, ceil(3 * (1 - α_1)) = 3 > 2
        cal = np.arange(n_cal)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            model = ScopeGen(random_state=0, **kw).calibrate_arrays(
                arr.qualities[cal], arr.similarities[cal], arr.oracle(cal)
            )
        too_small = [w for w in rec if "calibration set too small" in str(w.message)]
        assert len(too_small) == (n_cal == 6)
        ev = evaluate(model, arr.qualities[test], arr.similarities[test], arr.labels[test])
        metrics = {"scope_gen": {f"abstention_{_tag(alpha)}": ev["abstention"]}}
        out[n_cal] = gate.holds(gate.statistic(metrics))
    assert out == {6: False, 300: True}


def test_oracle_calls_figure_shows_clm_and_eager_when_they_coincide():
    metrics = {
        "scope_gen": {"unique_calls_a30": 3.0, "unique_calls_a40": 2.5},
        "clm": {"unique_calls_a30": 20.0, "unique_calls_a40": 20.0},
        "eager": {"unique_calls_a30": 20.0, "unique_calls_a40": 20.0},
    }
    lines = _oracle_call_lines(metrics, ["a30", "a40"])
    assert len(lines) == 2 and lines["scope_gen"] == [3.0, 2.5]
    (both,) = [k for k in lines if k != "scope_gen"]
    assert "clm" in both and "eager" in both and "coincide" in both
    assert lines[both] == [20.0, 20.0]
    metrics["eager"]["unique_calls_a40"] = 19.0  # distinct lines stay separate
    assert set(_oracle_call_lines(metrics, ["a30", "a40"])) == {"scope_gen", "clm", "eager"}


def test_random_scores_are_valid_and_blind():
    q, s = _random_scores((50, 7), np.random.default_rng(0))
    assert q.shape == (50, 7) and s.shape == (50, 7, 7)
    assert np.allclose(s, s.transpose(0, 2, 1)) and np.allclose(s[:, range(7), range(7)], 1.0)
    assert s.min() >= 0.0 and s.max() <= 1.0 and q.min() >= 0.0 and q.max() < 1.0
    q2, s2 = _random_scores((50, 7), np.random.default_rng(0))
    assert np.array_equal(q, q2) and np.array_equal(s, s2)


def test_every_gate_names_a_falsifier_and_explains_itself():
    for c in CLAIM.criteria:
        assert c.explain, c.name
        if c.gating and not c.control:
            assert c.falsifier, c.name
