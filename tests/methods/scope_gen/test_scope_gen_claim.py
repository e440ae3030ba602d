"""The claim check at smoke budget: every arm and criterion, finite and deterministic."""

import math

from iclr25._core.claims import judge
from iclr25.methods.scope_gen.claim import CLAIM


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
