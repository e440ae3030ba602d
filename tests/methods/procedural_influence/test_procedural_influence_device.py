"""Device handling of the LM helpers, the kronfluence task and the influence wrapper (CPU-side).

The paths a GPU run takes are driven with the model on the ``meta`` device under a guard that
fails any op whose tensors sit on two devices; CPU runs must stay bit for bit what they were.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from device_guard import DeviceGuard
from iclr25.methods.procedural_influence import (
    CausalLMInfluenceTask,
    LMConfig,
    build_lm,
    completion_nll,
    completion_token_nll,
    gradient_dot_scores,
    resolve_tracked_modules,
    train_lm,
)
from iclr25.methods.procedural_influence.claim import run
from iclr25.methods.procedural_influence.influence import _unwrap, _use_kronfluence_device

_CFG = LMConfig(n_layer=1, d_model=8, n_head=2, epochs=2, batch_size=4, lr=1e-2)
_VOCAB = 12


def _data(n: int = 10, width: int = 7) -> dict[str, torch.Tensor]:
    """``n`` right-padded random documents of up to ``width`` tokens (ids 4.., pad 0)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, _VOCAB, (n, width), generator=g)
    lengths = torch.randint(3, width + 1, (n,), generator=g)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()  # [n, width]
    ids = ids * mask
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


def test_trainers_take_a_device() -> None:
    for fn in (build_lm, train_lm, run):
        assert "device" in inspect.signature(fn).parameters, fn.__name__
    assert "cpu" in inspect.signature(gradient_dot_scores).parameters


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_train_on_the_cpu_device_is_the_default(device: str | torch.device) -> None:
    data = _data()
    ref = build_lm(_VOCAB, _CFG, seed=0)
    ref_losses, ref_ckpt = train_lm(ref, data, _CFG, seed=1, checkpoint_epoch=1)
    net = build_lm(_VOCAB, _CFG, seed=0, device=device)
    losses, ckpt = train_lm(net, data, _CFG, seed=1, checkpoint_epoch=1, device=device)
    assert losses == ref_losses
    assert {p.device.type for p in net.parameters()} == {"cpu"}
    assert {v.device.type for v in ckpt.model.values()} == {"cpu"}
    for (name, a), b in zip(ref.state_dict().items(), net.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    # a replay from the checkpoint on the named device repeats the run, also bit for bit
    replay = build_lm(_VOCAB, _CFG, seed=0)
    assert train_lm(replay, data, _CFG, seed=1, start=ref_ckpt, device=device)[0] == ref_losses[1:]


def test_build_lm_draws_on_the_cpu_and_moves() -> None:
    net = build_lm(_VOCAB, _CFG, seed=0, device="meta")
    assert {p.device.type for p in net.parameters()} == {"meta"}
    a, b = build_lm(_VOCAB, _CFG, seed=0), build_lm(_VOCAB, _CFG, seed=0, device="cpu")
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


def test_nll_feeds_a_cpu_batch_to_the_model_device() -> None:
    net = build_lm(_VOCAB, _CFG, seed=0, device="meta")
    batch = _data(3)
    batch["attention_mask"] = torch.ones_like(batch["attention_mask"])  # no data-dependent mask on meta
    with DeviceGuard():
        nats = completion_nll(net, batch)
        per_token = completion_token_nll(net, batch)
    assert nats.device.type == per_token.device.type == "meta"
    assert nats.shape == (3,) and per_token.shape == (3, 6)


def test_the_guard_catches_a_cpu_batch_meeting_a_meta_model() -> None:
    net = build_lm(_VOCAB, _CFG, seed=0, device="meta")
    with DeviceGuard(), pytest.raises(AssertionError, match="tensors on"):
        net(input_ids=torch.ones(1, 3, dtype=torch.long))


def test_sampled_labels_on_the_cpu_are_the_plain_draw() -> None:
    net = build_lm(_VOCAB, _CFG, seed=0)
    data = _data(4)
    task = CausalLMInfluenceTask(resolve_tracked_modules(net), sample_seed=5)
    with torch.no_grad():
        logits = net(input_ids=data["input_ids"], attention_mask=data["attention_mask"]).logits
    labels = task.sample_labels(logits, data["labels"])
    probs = torch.softmax(logits.float(), dim=-1).reshape(-1, logits.shape[-1])  # [B*T, V]
    drawn = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(5)).reshape(4, -1)
    expected = torch.full_like(labels, -100)
    expected[:, 1:] = drawn[:, :-1]
    expected = torch.where(data["labels"] == -100, data["labels"], expected)
    assert torch.equal(labels, expected)


def test_kronfluence_device_state_follows_each_call() -> None:
    from kronfluence.utils.state import State

    try:
        _use_kronfluence_device(False)
        assert State().cpu is False
        _use_kronfluence_device(True)  # the singleton would otherwise keep the first choice
        assert State().cpu is True and State().device == torch.device("cpu")
    finally:
        State._reset_state()


def test_unwrap_puts_the_model_back_on_its_device() -> None:
    from kronfluence.analyzer import prepare_model

    net = build_lm(_VOCAB, _CFG, seed=0, device="meta")
    task = CausalLMInfluenceTask(resolve_tracked_modules(net))
    flags = {n: p.requires_grad for n, p in net.named_parameters()}
    prepare_model(net, task)
    net.to_empty(device="cpu")  # where kronfluence would move it (its own device)
    _unwrap(net, flags, False, torch.device("meta"))
    assert {p.device.type for p in net.parameters()} == {"meta"}
    assert all(p.requires_grad for p in net.parameters())
