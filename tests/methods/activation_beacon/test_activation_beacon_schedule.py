"""The beacon training schedule and parameter set, the convergence precondition, the α × L table
and the kvpress adapter (skipped where kvpress is not installed)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from beacon_test_models import ids, tiny
from transformers import get_linear_schedule_with_warmup

from iclr25.methods.activation_beacon import (
    KVPRESS_PRESSES,
    BeaconConfig,
    ClaimConfig,
    KVPressEviction,
    SnapKV,
    kvpress_available,
    wrap_with_beacon,
)
from iclr25.methods.activation_beacon.claim import CLAIM, PLATEAU_EPS, beacon_lr_factor, train_lengths

needs_kvpress = pytest.mark.skipif(not kvpress_available(), reason="kvpress is not installed")


def test_official_parameter_set_has_no_o_copy():
    cfg = CLAIM.budgets["full"].config
    assert cfg.params == ("q", "k", "v")
    bm = wrap_with_beacon(tiny("llama"), BeaconConfig(window=8, ratios=(2, 4), params=cfg.params))
    names = list(bm.beacon_parameters())
    assert any("q_proj" in n for n in names) and any("v_proj" in n for n in names)
    assert not any("o_proj" in n for n in names)


def test_lr_schedule_is_the_trainer_linear_schedule():
    cfg = ClaimConfig(beacon_steps=50, warmup_steps=5)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = get_linear_schedule_with_warmup(opt, 5, 50)
    for step in range(50):
        assert beacon_lr_factor(step, cfg) == pytest.approx(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert beacon_lr_factor(50, cfg) == 0.0  # decays to 0 at the last step
    assert ClaimConfig().max_grad_norm == 1.0


def test_mixed_lengths_cover_the_range_and_are_seeded():
    cfg = ClaimConfig(beacon_steps=400, length_ramp=0.0)
    a, b = train_lengths(cfg, 0), train_lengths(cfg, 0)
    assert a == b and a != train_lengths(cfg, 1)
    assert set(a) == set(range(128, 513, 16))  # every multiple of w in [128, 512] is drawn
    assert CLAIM.budgets["full"].config.ratios == (2, 4, 8, 16)


def test_bad_schedule_config_raises():
    with pytest.raises(ValueError, match="train_len_min"):
        ClaimConfig(train_len_min=640)
    with pytest.raises(ValueError, match="params"):
        ClaimConfig(params=("q", "x"))
    with pytest.raises(ValueError, match="table_lens"):
        ClaimConfig(table_lens=(200,))


def test_convergence_precondition_fails_on_a_climbing_curve():
    """The falsifier of beacon_converged: a curve still rising misses it, a flat one meets it."""
    from iclr25._core.convergence import read_curve

    c = {x.name: x for x in CLAIM.criteria}["beacon_converged"]
    assert c.precondition
    steps = [500.0 * i for i in range(1, 11)]
    climbing = read_curve(steps, [0.1 * i for i in range(1, 11)]).metrics()
    flat = read_curve(steps, [0.5] * 8 + [0.5 + PLATEAU_EPS / 2] * 2).metrics()
    assert not c.holds(c.statistic({"beacon_curve": climbing}))
    assert c.holds(c.statistic({"beacon_curve": flat}))


def test_long_budget_trains_longer_with_500_step_curve():
    full, long = CLAIM.budgets["full"], CLAIM.budgets["long"]
    assert long.config.beacon_steps > full.config.beacon_steps and long.config.curve_every == 500
    assert (
        dataclasses.replace(long.config, beacon_steps=full.config.beacon_steps, curve_every=150)
        == full.config
    )


@needs_kvpress
@pytest.mark.parametrize("press", sorted(KVPRESS_PRESSES))
def test_kvpress_presses_keep_the_budget(press):
    lm = tiny("llama").eval()
    x = ids(2, 40)
    ev = KVPressEviction(lm, press, budget=10, window=8)
    out = ev(x)
    assert out.shape == (2, 40, lm.config.vocab_size) and torch.isfinite(out).all()
    assert ev.peak_entries == 18
    with torch.no_grad():
        full = lm(input_ids=x).logits
    assert torch.allclose(out[:, :32], full[:, :32], atol=1e-5)  # the prefill is full attention
    assert not torch.allclose(out[:, 32:], full[:, 32:], atol=1e-3)  # the query span reads the pressed cache


@needs_kvpress
def test_kvpress_streaming_keeps_sink_and_recent():
    """StreamingLLMPress with sink 1 and budget 10 equals full attention over those 10 keys."""
    lm = tiny("llama").eval()
    x = ids(1, 40, seed=3)
    out = KVPressEviction(lm, "streaming", budget=10, window=8, sink=1)(x)
    keep = [0, *range(23, 32)]  # sink + the 9 most recent context tokens
    mask = torch.zeros(1, 1, 40, 40)
    allowed = torch.ones(40, 40).tril().bool()
    allowed[32:, :32] = False
    allowed[32:, keep] = True
    mask[0, 0][~allowed] = float("-inf")
    with torch.no_grad():
        ref = lm(input_ids=x, attention_mask=mask, position_ids=torch.arange(40)[None]).logits
    assert torch.allclose(out[:, 32:], ref[:, 32:], atol=1e-4)


@needs_kvpress
def test_kvpress_bad_inputs():
    lm = tiny("llama")
    with pytest.raises(ValueError, match="press"):
        KVPressEviction(lm, "h2o", budget=10, window=8)
    with pytest.raises(ValueError, match="budget"):
        KVPressEviction(lm, "snapkv", budget=40, window=8)(ids(1, 40))


def test_our_snapkv_runs_beside_the_adapter():
    lm = tiny("llama").eval()
    assert SnapKV(lm, budget=10, window=8)(ids(1, 40)).shape[1] == 40


def test_length_ramp_grows_the_longest_row():
    cfg = ClaimConfig(beacon_steps=1000, length_ramp=0.4)
    lengths = train_lengths(cfg, 0)
    assert lengths[0] == 128 and max(lengths[:100]) <= 128 + 384 * 100 / 400
    assert all(n <= 128 + 384 * s / 400 for s, n in enumerate(lengths[:400]))
    assert max(lengths[400:]) == 512 and min(lengths[400:]) == 128
    with pytest.raises(ValueError, match="length_ramp"):
        ClaimConfig(length_ramp=1.5)


def test_plateau_escape_precondition_fails_on_a_stuck_run():
    """The falsifier of beacon_left_plateau: a run that ends at ln 32 (guessing among the
    values, the memory ignored) misses it; one that ends at 0.8 meets it."""
    import math

    c = {x.name: x for x in CLAIM.criteria}["beacon_left_plateau"]
    assert c.precondition and c.convergence
    assert not c.holds(c.statistic({"beacon": {"final_train_loss": math.log(32) - 0.02}}))
    assert c.holds(c.statistic({"beacon": {"final_train_loss": 0.8}}))
