"""The claim at smoke budget: finite, deterministic numbers."""

import math

from iclr25.methods.coreset_sc.claim import CLAIM


def _deterministic(metrics):
    # wall-clock metrics ("*_s") vary run to run; everything else must be identical
    return {a: {k: v for k, v in m.items() if not k.endswith("_s")} for a, m in metrics.items()}


def test_smoke_claim_is_finite_and_deterministic(smoke_runs):
    a, b = smoke_runs("coreset_sc")
    assert _deterministic(a.metrics) == _deterministic(b.metrics)
    for arm, ms in a.metrics.items():
        for name, v in ms.items():
            assert math.isfinite(v), f"{arm}.{name}"
    assert set(a.series) == {"ari_vs_k", "time_vs_n"}
    for c in CLAIM.criteria:
        c.statistic(a.metrics)  # every criterion's metrics exist
