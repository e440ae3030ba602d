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


def test_attention_over_l_by_s_tokens_adds_4_l_s_c_flops() -> None:
    """The counting of decoder_flops records attention's two products, Q K^T and A V: 4 L S C FLOPs
    for L queries over S keys of total width C (torch's fused CPU kernel alone records none)."""
    import torch.nn.functional as F

    from iclr25.methods.rmp_sam.baselines import _counted_flops

    heads, d, n_q, n_kv = 4, 8, 5, 36
    q, k = torch.zeros(1, heads, n_q, d), torch.zeros(1, heads, n_kv, d)
    assert _counted_flops(lambda: F.scaled_dot_product_attention(q, k, k)) == 4 * n_q * n_kv * heads * d
    # and inside a module: a multi-head attention layer adds exactly that on top of its projections
    c = heads * d
    attn = torch.nn.MultiheadAttention(c, heads, batch_first=True).eval()
    x, mem = torch.zeros(1, n_q, c), torch.zeros(1, n_kv, c)
    with torch.no_grad():
        counted = _counted_flops(lambda: attn(x, mem, mem, need_weights=False))
    assert counted == 2 * c * c * (2 * n_q + 2 * n_kv) + 4 * n_q * n_kv * c


def test_attention_check_sees_attention_run_as_matmuls() -> None:
    """The analytic count of the FLOP-counter precondition is right: the counting of decoder_flops
    records all of one attention layer; a counter that misses the products fails the check."""
    torch.manual_seed(0)
    m2f = Mask2FormerDecoder((16, 32, 64, 64), c=64, num_queries=16, num_classes=6, heads=4, ffn_dim=128)
    assert attention_flops_counted(m2f.eval(), 64) == pytest.approx(1.0)
    pre = next(c for c in CLAIM.criteria if c.name == "flop_counter_sees_attention")
    projections_only = 2 * 64 * 64 * (2 * 16 + 2 * 64) / (2 * 64 * 64 * (2 * 16 + 2 * 64) + 4 * 16 * 64 * 64)
    assert not pre.holds(pre.statistic({"m2f": {"attention_flops_counted": projections_only}}))


def test_plateau_is_read_before_the_lr_step_and_fails_on_a_falling_curve() -> None:
    """Falsifier of the convergence preconditions: a validation loss still falling over the last fifth
    of the constant-lr phase misses the plateau bar, even when the lr step flattens what follows;
    a flat one meets it."""
    from iclr25.methods.rmp_sam.claim import _FULL, _plateau

    steps = list(range(50, 1001, 50))
    first = min(_FULL.train.milestones) * 1000
    falling = [3.0 - 2.0 * s / 1000 if s <= first else 3.0 - 2.0 * first / 1000 for s in steps]
    flat = [1.0 + 1.0 / s for s in steps]
    pre = next(c for c in CLAIM.criteria if c.name == "joint_converged_panoptic")
    assert pre.convergence and pre.precondition
    # the FLOPs part needs no trained arm: no convergence precondition is scoped to it
    assert not any(c.convergence and c.part in ("", "efficiency") for c in CLAIM.criteria)
    read = _plateau(_FULL, {"step": steps, "val_cls": falling, "val_loss": flat}, 1000)
    assert not pre.holds(pre.statistic({"rmp_sam": read}))
    read = _plateau(_FULL, {"step": steps, "val_cls": flat, "val_loss": flat}, 1000)
    assert pre.holds(pre.statistic({"rmp_sam": read}))
