"""The FTCT claim at smoke budget: plumbing, finiteness and determinism."""

import math

import pytest

from iclr25._core.claims import judge
from iclr25.methods.ftct.claim import CLAIM


def test_smoke_is_finite_and_deterministic(smoke_runs):
    a, b = smoke_runs("ftct")
    assert a.metrics == b.metrics
    assert set(a.metrics) >= {"few_shot", "zero_shot", "cross_chain", "shuffled"}
    for arm in a.metrics.values():
        assert all(math.isfinite(v) for v in arm.values())
    for arm in ("few_shot", "zero_shot", "cross_chain", "shuffled"):
        assert 0.0 <= a.metrics[arm]["whole"] <= 1.0
    assert set(a.series) >= {"shots", "depth"}
    verdict = judge(CLAIM, "smoke", [a])
    assert verdict.verdict.value == "INCONCLUSIVE"
    assert len(verdict.outcomes) == len(CLAIM.criteria)


def test_claim_has_negative_controls():
    assert any(c.control for c in CLAIM.criteria if c.gating)


@pytest.mark.full
def test_full_budget():
    r = CLAIM.run("full", seed=0)
    print(r.metrics, judge(CLAIM, "full", [r]))
