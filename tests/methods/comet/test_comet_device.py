"""COMET on a chosen device: what can be checked without a GPU.

The trainers take ``device=`` and give the CPU's numbers bit for bit when it names the CPU. The
forward passes (masks, redrawn routing, Bernoulli tables) keep every tensor on the input's
device: they run on ``meta`` tensors under a guard that fails any op mixing two devices, or
feeding a generator on one device into a draw on another, as a GPU would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
import torch
from torch import nn

from device_guard import DeviceGuard
from iclr25.methods.comet import (
    COMETMLP,
    BernoulliMaskMLP,
    COMETClassifier,
    COMETRegressor,
    DenseMLP,
    MoEMLP,
    ResampledRoutingMLP,
    TopKMLP,
    train_mlp,
)
from iclr25.methods.comet.claim import _SMOKE, _g1


#: ops that move data between devices by design
def _xy(n: int = 40, d: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_guard_catches_what_a_gpu_refuses() -> None:
    """The guard's falsifier: a CPU routing matrix meeting a meta input, and a CPU generator
    drawing on meta, both raise (a meta matmul alone would not)."""
    z = torch.zeros(2, 4, device="meta")
    with DeviceGuard(), pytest.raises(AssertionError, match="tensors on"):
        z @ torch.ones(3, 4).T  # the redrawn V before it was moved to the input's device
    with DeviceGuard(), pytest.raises(AssertionError, match="generator on cpu"):
        torch.rand(2, generator=torch.Generator(), device="meta")
    with DeviceGuard():
        z @ torch.ones(3, 4).to(z.device).T


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: COMETMLP(6, (16, 16), 3, p_keep=0.5, seed=0), id="comet"),
        pytest.param(lambda: COMETMLP(6, (16,), 3, p_keep=0.5, routing="layerwise"), id="layerwise"),
        pytest.param(lambda: ResampledRoutingMLP(6, (16, 16), 3, p_keep=0.5, seed=0), id="resampled"),
        pytest.param(lambda: TopKMLP(6, (16,), 3, p_keep=0.25), id="topk"),
        pytest.param(lambda: BernoulliMaskMLP(6, (16,), 3, n_examples=10).eval(), id="bernoulli-eval"),
        pytest.param(lambda: DenseMLP(6, (16,), 3), id="dense"),
    ],
)
def test_forward_keeps_every_tensor_on_the_input_device(build: Callable[[], nn.Module]) -> None:
    net = build().to("meta")
    x = torch.zeros(5, 6, device="meta")
    with DeviceGuard():
        out, masks = net(x, return_masks=True)
    assert out.device.type == "meta" and all(m.device.type == "meta" for m in masks)


def test_bernoulli_training_masks_follow_the_index() -> None:
    net = BernoulliMaskMLP(6, (16,), 3, n_examples=10).to("meta").train()
    x = torch.zeros(4, 6, device="meta")
    for index in (torch.arange(4, device="meta"), torch.arange(4)):  # a CPU index, as CUDA allows
        with DeviceGuard():
            masks = net(x, return_masks=True, index=index)[1]
        assert masks[0].device.type == "meta"


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: COMETMLP(6, (16, 16), 3, p_keep=0.5, seed=1), id="comet"),
        pytest.param(lambda: ResampledRoutingMLP(6, (16,), 3, p_keep=0.5, seed=1), id="resampled"),
        pytest.param(lambda: BernoulliMaskMLP(6, (16,), 3, n_examples=40, seed=1), id="bernoulli"),
        pytest.param(lambda: MoEMLP(6, (16,), 3, p_keep=0.5, seed=1), id="moe"),
    ],
)
def test_train_mlp_on_the_cpu_gives_the_default_numbers(build: Callable[[], nn.Module]) -> None:
    """``device="cpu"`` and ``torch.device("cpu")`` train exactly as the default does, and leave the
    model on the CPU."""
    X, y = _xy()
    logs, nets = [], []
    for device in (None, "cpu", torch.device("cpu")):
        net = build()
        logs.append(train_mlp(net, X, y, epochs=2, batch_size=8, seed=3, eval_sets={"val": (X, y)},
                              device=device))  # fmt: skip
        nets.append(net)
    for log in logs[1:]:
        assert log.step_loss == logs[0].step_loss and log.eval_metrics == logs[0].eval_metrics
    for net in nets:
        assert {p.device.type for p in net.parameters()} == {"cpu"}
        for (name, p), q in zip(net.state_dict().items(), nets[0].state_dict().values(), strict=True):
            assert torch.equal(p, q), name


@pytest.mark.parametrize("cls", [COMETClassifier, COMETRegressor])
def test_estimators_take_a_device(cls: type) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int) if cls is COMETClassifier else X.sum(1)
    default = cls(hidden=(8,), epochs=2, random_state=0).fit(X, y)
    on_cpu = cls(hidden=(8,), epochs=2, random_state=0, device="cpu").fit(X, y)
    assert on_cpu.get_params()["device"] == "cpu"
    assert next(on_cpu.model_.parameters()).device.type == "cpu"
    np.testing.assert_array_equal(on_cpu.predict(X), default.predict(X))


def test_claim_stage_on_the_cpu_device_matches_the_default() -> None:
    """G1 (routers, redrawn routing and backbones) gives the same metrics with an explicit CPU device."""
    cfg = dataclasses.replace(_SMOKE, g1_pairs=30, g1_routers=1, g1_width=32)
    runs = []
    for kw in ({}, {"device": "cpu"}):
        m: dict[str, dict[str, float]] = {a: {} for a in ("comet", "dense", "bernoulli", "resampled")}
        _g1(cfg, 0, m, {}, **kw)
        runs.append(m)
    assert runs[0] == runs[1]
