"""Device handling of DITTO: the trainers take ``device=``, every seeded draw keeps its CPU stream.

Without a GPU, a GPU run's batch path is driven on the ``meta`` device under a guard that fails
any op meeting tensors on two device types, or a generator on another device than the tensors
it draws for (the error a CPU generator feeding a CUDA draw raises). Sampling is pinned to the
CPU stream of transformers' own sampler, and shown not to read or change the global RNG.
"""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
import torch

from device_guard import DeviceGuard
from iclr25.common.data.style_world import StyleWorld, build_style_tokenizer
from iclr25.common.tiny_lm import build_tiny_lm
from iclr25.methods.ditto import BaseTrainConfig, DittoConfig, DittoTrainer, build_ditto_pairs, train_base
from iclr25.methods.ditto.claim import run
from iclr25.methods.ditto.trainer import _seeded_generate

TOK = build_style_tokenizer(StyleWorld())
DEMOS = [
    ([{"role": "user", "content": "write a note about garden to mom"}], "dear mom , flowers lovely ! bye"),
    ([{"role": "user", "content": "write a note about pets to boss"}], "dear boss , dog lovely ! bye"),
]


def _lm() -> torch.nn.Module:
    return build_tiny_lm("gpt2", vocab_size=len(TOK), n_layer=1, n_head=2, d_model=16, seed=0)


def _cfg() -> DittoConfig:
    return dataclasses.replace(
        DittoConfig.cpu_default(),
        max_steps=2,
        resample_every=1,
        samples_per_prompt=2,
        sft_max_steps=2,
        sft_loss_threshold=0.0,
        max_new_tokens=5,
        lr=1e-2,
    )


def test_guard_catches_a_cpu_generator_on_another_device() -> None:
    """The falsifier of the guard: the pattern removed from the trainer raises under it."""
    with DeviceGuard(), pytest.raises(AssertionError, match="generator on cpu"):
        torch.rand(2, generator=torch.Generator().manual_seed(0), device="meta")
    with DeviceGuard(), pytest.raises(AssertionError, match="tensors on"):
        torch.ones(2, device="meta") * torch.ones(2)


def test_trainers_and_the_claim_take_a_device() -> None:
    for fn in (DittoTrainer, train_base, run):
        assert "device" in inspect.signature(fn).parameters, fn


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_trainer_on_the_cpu_equals_the_default(one_thread, device: str | torch.device) -> None:
    ref = DittoTrainer(_lm(), TOK, DEMOS, _cfg()).train()
    moved = DittoTrainer(_lm(), TOK, DEMOS, _cfg(), device=device).train()
    assert moved.device == torch.device("cpu")
    assert {p.device.type for p in moved.model.parameters()} == {"cpu"}
    assert moved.logs.sft == ref.logs.sft and moved.logs.ditto == ref.logs.ditto
    a, b = ref.adapter_state("ditto"), moved.adapter_state("ditto")
    assert all(torch.equal(a[k], b[k]) for k in a)
    prompts = [d[0] for d in DEMOS]
    assert moved.generate(prompts, 3, seed=4) == ref.generate(prompts, 3, seed=4)


def test_train_base_on_the_cpu_equals_the_default(one_thread) -> None:
    cfg = BaseTrainConfig(n_layer=1, n_head=2, d_model=16, batch=4, steps=2, warmup=1)
    m0, l0 = train_base(cfg)
    m1, l1 = train_base(cfg, device=torch.device("cpu"))
    assert l0 == l1
    assert all(torch.equal(p, q) for p, q in zip(m0.parameters(), m1.parameters(), strict=True))


@pytest.mark.parametrize("warp", [{}, {"temperature": 0.7, "top_k": 6, "top_p": 0.9}])
def test_sampling_is_the_cpu_stream_of_transformers_sampling(one_thread, warp: dict) -> None:
    """Every token comes from a CPU generator seeded with ``seed``: on the CPU, the same tokens as
    ``torch.manual_seed(seed)`` followed by transformers' ``generate(do_sample=True)``."""
    lm = _lm().eval()
    kw = dict(temperature=1.0, top_k=0, top_p=1.0) | warp
    ids = [5, 7, 9]
    ours = _seeded_generate(
        lm, ids, 4, seed=11, max_new_tokens=6, eos_token_id=TOK.eos_token_id, pad_token_id=0, **kw
    )
    inp = torch.tensor([ids])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        theirs = lm.generate(
            input_ids=inp,
            attention_mask=torch.ones_like(inp),
            do_sample=True,
            num_return_sequences=4,
            max_new_tokens=6,
            eos_token_id=TOK.eos_token_id,
            pad_token_id=0,
            **kw,
        )
    assert torch.equal(ours, theirs)


def test_sampling_neither_reads_nor_moves_the_global_rng(one_thread) -> None:
    tr = DittoTrainer(_lm(), TOK, DEMOS, _cfg())
    torch.manual_seed(0)
    state = torch.get_rng_state()
    a = tr.generate([DEMOS[0][0]], 3, seed=2)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(123)
    assert tr.generate([DEMOS[0][0]], 3, seed=2) == a


def test_batches_and_dpo_loss_follow_the_model_device(one_thread) -> None:
    """``device="meta"`` moves the wrapped LM; batches, log-probs and the DPO loss stay with it."""
    tr = DittoTrainer(_lm(), TOK, DEMOS, _cfg(), device="meta")
    assert tr.device.type == "meta" and {p.device.type for p in tr.model.parameters()} == {"meta"}
    tr.cache.add(0, 0, [5, 6, TOK.eos_token_id], truncated=False)
    tr.model.set_adapter("sft")
    demos = {k: tr._encoded[k].response_ids for k in tr.keys}
    pairs = build_ditto_pairs([0], demos, tr.cache, tr.config, np.random.default_rng(0))
    with DeviceGuard():
        loss, rc, rr = tr.dpo_loss(pairs, reference="sft")
    assert loss.device.type == rc.device.type == rr.device.type == "meta"
    assert rc.shape == (len(pairs),)
