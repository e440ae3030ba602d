"""The RMP-SAM claim at smoke budget: every arm and gate wired, finite and deterministic."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25._core.claims import judge
from iclr25.methods.rmp_sam import (
    RMPSAM,
    Mask2FormerDecoder,
    RMPSAMConfig,
    attention_flops_counted,
    decoder_flops,
)
from iclr25.methods.rmp_sam.claim import CLAIM


@pytest.fixture(scope="module")
def runs():
    return CLAIM.run("smoke", seed=0), CLAIM.run("smoke", seed=0)


def test_smoke_covers_every_arm_and_is_finite(runs) -> None:
    run, _ = runs
    assert set(run.metrics) == set(CLAIM.arms)
    assert all(math.isfinite(v) for ms in run.metrics.values() for v in ms.values())
    assert {"pq", "tube_map", "click_miou", "noc85", "gflops"} <= set(run.metrics["rmp_sam"])
    assert run.metrics["oracle"]["pq"] == 1.0
    assert run.metrics["stuff_only"]["pq"] < 0.5
    assert {"quality", "latency", "training_loss"} <= set(run.series)
    assert {"panoptic", "tracks", "clicks"} <= set(run.media)
    assert len(judge(CLAIM, "smoke", [run]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(runs) -> None:
    a, b = runs
    assert a.deterministic_metrics() == b.deterministic_metrics()


def test_budgets_and_gates_are_falsifiable() -> None:
    smoke, full = CLAIM.budgets["smoke"], CLAIM.budgets["full"]
    assert smoke.report_only and full.seeds >= 3 and full.total_seconds <= 15 * 60
    by_name = {c.name: c for c in CLAIM.criteria}
    for c in CLAIM.criteria:
        if c.gating and not c.control and not c.precondition:
            assert c.falsifier.startswith("tests/") or (
                by_name[c.falsifier].control and by_name[c.falsifier].gating
            )


def test_flops_gate_fails_for_baseline_against_itself() -> None:
    """Falsifier of the FLOPs gate: a decoder as heavy as the baseline (the baseline itself) fails it,
    while the lite neck + decoder is measured below the baseline."""
    torch.manual_seed(0)
    model = RMPSAM(RMPSAMConfig())
    m2f = Mask2FormerDecoder(
        model.backbone.channels, c=64, num_queries=16, num_classes=6, heads=4, ffn_dim=256
    )
    fl = decoder_flops(model, m2f, 64)
    gate = next(c for c in CLAIM.criteria if c.name == "decoder_flops_ratio")
    broken = {"rmp_sam": {"gflops": fl["m2f_gflops"]}, "m2f": {"gflops": fl["m2f_gflops"]}}
    assert not gate.holds(gate.statistic(broken))
    assert fl["rmp_gflops"] < fl["m2f_gflops"]


def test_attention_check_sees_attention_run_as_matmuls() -> None:
    """The analytic count of the FLOP-counter precondition is right: with attention run as plain
    matmuls the counter records all of it; a counter that misses the products fails the check."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    m2f = Mask2FormerDecoder((16, 32, 64, 64), c=64, num_queries=16, num_classes=6, heads=4, ffn_dim=128)
    with sdpa_kernel(SDPBackend.MATH):
        assert attention_flops_counted(m2f.eval(), 64) == pytest.approx(1.0)
    pre = next(c for c in CLAIM.criteria if c.name == "flop_counter_sees_attention")
    projections_only = 2 * 64 * 64 * (2 * 16 + 2 * 64) / (2 * 64 * 64 * (2 * 16 + 2 * 64) + 4 * 16 * 64 * 64)
    assert not pre.holds(pre.statistic({"m2f": {"attention_flops_counted": projections_only}}))
