"""COMET MLP: closed form, routing independence, gradients, baselines."""

from __future__ import annotations

import math

import pytest
import torch

from iclr25.methods.comet import (
    COMETMLP,
    BernoulliMaskMLP,
    ClaimConfig,
    COMETConfig,
    DenseMLP,
    MoEMLP,
    ResampledRoutingMLP,
    TopKMLP,
    evaluate,
    smaller_widths,
    train_mlp,
)


def _xy(n: int = 64, d: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_p_keep_one_equals_dense_bit_for_bit() -> None:
    x, _ = _xy()
    comet = COMETMLP(6, (16, 16, 16), 3, p_keep=1.0, seed=4)
    dense = DenseMLP(6, (16, 16, 16), 3, seed=4)
    assert torch.equal(comet(x), dense(x))


def test_same_seed_gives_same_backbone_across_variants() -> None:
    a = COMETMLP(6, (16,), 3, p_keep=0.5, seed=2)
    b = DenseMLP(6, (16,), 3, seed=2)
    assert torch.equal(a.layers[0].weight, b.layers[0].weight)
    assert torch.equal(a.output.bias, b.output.bias)


def test_masks_post_activation() -> None:
    """With softplus f(0) != 0: masked units output exactly 0 (mask after f, not before)."""
    x, _ = _xy()
    net = COMETMLP(6, (16,), 3, p_keep=0.25, seed=0)
    _, masks, states = net.forward_all(x)
    assert torch.all(states[0][~masks[0]] == 0)
    assert torch.all(states[0][masks[0]] > 0)


def test_routing_independent_of_w_and_mode() -> None:
    x, _ = _xy()
    net = COMETMLP(6, (16, 16), 3, p_keep=0.5, seed=0)
    masks = net.masks(x)
    with torch.no_grad():
        for lin in net.layers:
            lin.weight.add_(torch.randn_like(lin.weight))
    assert all(torch.equal(a, b) for a, b in zip(net.masks(x), masks, strict=True))
    net.train()
    train_masks = net(x, return_masks=True)[1]
    net.eval()
    assert all(torch.equal(a, b) for a, b in zip(train_masks, masks, strict=True))
    moved = net.masks(x + 0.5 * torch.randn_like(x))
    assert not all(torch.equal(a, b) for a, b in zip(moved, masks, strict=True))


def test_gradients_only_through_kept_units() -> None:
    x, y = _xy(1)
    net = COMETMLP(6, (12, 12), 3, p_keep=0.25, seed=0)
    out, masks = net(x, return_masks=True)
    torch.nn.functional.cross_entropy(out, y).backward()
    for v in net.router.weights:
        assert v.grad is None
    for lin, m in zip(net.layers, masks, strict=True):
        dead = ~m[0]
        assert torch.all(lin.weight.grad[dead] == 0) and torch.all(lin.bias.grad[dead] == 0)
        assert lin.weight.grad[m[0]].abs().sum() > 0
    assert net.output.weight.grad.abs().sum() > 0


def test_swap_guard_layerwise_moves_comet_does_not() -> None:
    x, y = _xy(96)
    probe = x[:32]
    results = {}
    for routing in ("comet", "layerwise"):
        net = COMETMLP(6, (32, 32), 3, p_keep=0.5, seed=0, routing=routing)
        before = net.masks(probe)
        train_mlp(net, x, y, epochs=1, batch_size=96, lr=0.05)
        results[routing] = all(torch.equal(a, b) for a, b in zip(net.masks(probe), before, strict=True))
    assert results == {"comet": True, "layerwise": False}


def test_topk_masks_follow_weights() -> None:
    x, y = _xy(96)
    net = TopKMLP(6, (32, 32), 3, p_keep=0.5, seed=0)
    before = net(x, return_masks=True)[1]
    assert [int(m.sum(-1).unique().item()) for m in before] == [16, 16]
    train_mlp(net, x, y, epochs=1, batch_size=96, lr=0.05)
    assert not torch.equal(net(x, return_masks=True)[1][1], before[1])


def test_smaller_widths_and_dropout() -> None:
    assert smaller_widths((1000, 100, 3), 0.5) == (500, 50, 1)
    net = DenseMLP(6, (16,), 3, dropout=0.5)
    x, _ = _xy()
    net.eval()
    assert torch.equal(net(x), net(x))
    with pytest.raises(ValueError, match="dropout"):
        DenseMLP(6, (16,), 3, dropout=1.0)


def test_bernoulli_masks_fixed_per_example_and_off_at_test() -> None:
    x, _ = _xy(8)
    net = BernoulliMaskMLP(6, (40,), 3, n_examples=8, p_bernoulli=0.5, seed=0, mask_seed=1).train()
    idx = torch.arange(8)
    m1 = net(x, return_masks=True, index=idx)[1][0]
    m2 = net(x, return_masks=True, index=idx.flip(0))[1][0]
    assert torch.equal(m1, m2.flip(0))
    assert 0.3 < float(m1.float().mean()) < 0.7
    net.eval()
    assert bool(net(x, return_masks=True, index=idx)[1][0].all())


def test_step_flops_are_dense_plus_one_routing_matmul_per_layer() -> None:
    """The claim's ``step_flops_ratio`` row is analytic: COMET adds only the routing chain's forward."""
    from torch.utils.flop_counter import FlopCounterMode

    B, d, h, o = 8, 6, 20, 3
    x, y = torch.randn(B, d), torch.randint(0, o, (B,))
    flops = {}
    for name, net in (("comet", COMETMLP(d, (h,) * 3, o, p_keep=0.5)), ("dense", DenseMLP(d, (h,) * 3, o))):
        counter = FlopCounterMode(display=False)
        with counter:
            torch.nn.functional.cross_entropy(net(x), y).backward()
        flops[name] = counter.get_total_flops()
    weights = d * h + h * h + h * h + h * o  # in x out of the four linear layers
    dense = 2 * B * weights * 2 + 2 * B * (weights - d * h)  # forward, weight grads, input grads (not x)
    routing = 2 * B * (d * h + h * h + h * h)  # c_l = V_l z_{l-1}, forward only, no gradient
    assert flops == {"comet": dense + routing, "dense": dense}


def test_resampled_router_changes_every_call() -> None:
    x, _ = _xy(4)
    net = ResampledRoutingMLP(6, (64,), 3, p_keep=0.5, seed=0)
    assert not torch.equal(net(x, return_masks=True)[1][0], net(x, return_masks=True)[1][0])


def test_moe_gate_gets_gradient_parity_gate_does_not() -> None:
    x, y = _xy(32)
    for parity, expect in ((False, True), (True, False)):
        moe = MoEMLP(6, (16,), 3, p_keep=0.5, seed=0, paper_parity=parity)
        loss = torch.nn.functional.cross_entropy(moe(x), y)
        if moe.aux_loss is not None:
            loss = loss + moe.aux_loss
        loss.backward()
        g = moe.gate[0].weight.grad
        assert (g is not None and bool(g.abs().sum() > 0)) is expect
    assert MoEMLP(6, (16,), 3, p_keep=0.3).n_experts == 3


def test_train_mlp_is_deterministic_and_regression_works() -> None:
    x, y = _xy()
    a = train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=2, batch_size=16, seed=3)
    b = train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=2, batch_size=16, seed=3)
    assert a.step_loss == b.step_loss
    t = x[:, :2].sum(-1, keepdim=True)
    log = train_mlp(COMETMLP(6, (32,), 1, p_keep=0.5), x, t, task="regression", epochs=10, lr=1e-2,
                    batch_size=64, X_eval=x, y_eval=t)  # fmt: skip
    assert log.epoch_metric[-1] < log.epoch_metric[0]


def test_train_mlp_scores_named_eval_sets_every_epoch() -> None:
    x, y = _xy()
    log = train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=3, batch_size=16, seed=1,
                    X_eval=x, y_eval=y, eval_sets={"val": (x[:10], y[:10]), "all": (x, y)})  # fmt: skip
    assert set(log.eval_metrics) == {"val", "all"} and all(len(v) == 3 for v in log.eval_metrics.values())
    assert log.eval_metrics["all"] == log.epoch_metric  # same set, same metric
    with pytest.raises(TypeError, match="eval_sets"):
        train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=1, eval_sets={"val": x})  # type: ignore[dict-item]


def test_train_mlp_calls_epoch_end_after_each_epoch_with_the_trained_model() -> None:
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 6, generator=gen), torch.randint(0, 3, (40,), generator=gen)
    seen: list[tuple[int, float, bool]] = []

    def epoch_end(epoch: int, model: torch.nn.Module) -> None:
        seen.append((epoch, evaluate(model, x, y, "classification"), model.training))

    log = train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=3, seed=0, eval_sets={"all": (x, y)},
                    epoch_end=epoch_end)  # fmt: skip
    assert [e for e, _, _ in seen] == [0, 1, 2] and all(training for _, _, training in seen)
    assert [acc for _, acc, _ in seen] == log.eval_metrics["all"]  # called after the epoch's evaluations


def test_train_mlp_cosine_schedule_decays_from_the_peak_to_zero() -> None:
    x, y = _xy()  # 64 rows, batch 16: 4 steps an epoch, 20 in all
    const = train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=5, batch_size=16, lr=0.01)
    assert const.step_lr == [0.01] * 20  # the default, and the paper's: constant
    cos = train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=5, batch_size=16, lr=0.01,
                    lr_schedule="cosine")  # fmt: skip
    # step t of T = 20 uses lr (1 + cos(pi t / T)) / 2: the peak first, half of it at T / 2
    expect = [0.005 * (1 + math.cos(math.pi * t / 20)) for t in range(20)]
    assert cos.step_lr == pytest.approx(expect, rel=1e-6, abs=1e-12)
    assert cos.step_lr[-1] < 1e-4 and cos.step_lr == sorted(cos.step_lr, reverse=True)
    # the same batches and start: only the rates differ, so the first step's loss is the same
    assert cos.step_loss[0] == const.step_loss[0] and cos.step_loss[-1] != const.step_loss[-1]
    with pytest.raises(ValueError, match="lr_schedule"):
        train_mlp(COMETMLP(6, (16,), 3, p_keep=0.5), x, y, epochs=1, lr_schedule="linear")  # type: ignore[arg-type]


def test_configs_validate() -> None:
    with pytest.raises(ValueError, match="p_keep"):
        COMETConfig(p_keep=0.0)
    with pytest.raises(ValueError, match="g4_width"):
        ClaimConfig(g4_width=0)
    with pytest.raises(ValueError, match="g4_val_frac"):
        ClaimConfig(g4_val_frac=1.0)
    with pytest.raises(ValueError, match="sweep_widths"):
        ClaimConfig(sweep_widths=())
    with pytest.raises(ValueError, match="strictly increasing"):
        ClaimConfig(sweep_widths=(256, 64))
    with pytest.raises(ValueError, match="hard_scale"):
        ClaimConfig(hard_scale=1.0)
    with pytest.raises(ValueError, match="hard_noise"):
        ClaimConfig(hard_noise=-0.1)
    with pytest.raises(ValueError, match="cluster_margin"):
        ClaimConfig(cluster_margin=-0.1)
    with pytest.raises(ValueError, match="sgd_lr"):
        ClaimConfig(sgd_lr=0.0)
    with pytest.raises(ValueError, match="cluster_n_val"):
        ClaimConfig(cluster_n_val=0)
    with pytest.raises(ValueError, match="lr_schedule"):
        ClaimConfig(lr_schedule="step")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lr_schedule"):
        COMETConfig(lr_schedule="step")  # type: ignore[arg-type]
    assert COMETConfig.cpu_default().replace(lr=0.1).lr == 0.1
    # the paper's regime is a constant rate; the claim's Adam runs (G4-G6) decay on a cosine
    assert COMETConfig().lr_schedule == "constant" and COMETConfig.cpu_default().lr_schedule == "cosine"
    assert ClaimConfig().lr_schedule == "cosine"
