"""Activation Beacon as a transformers model: generate (greedy, sampling, lengths, padded batches),
the text-generation pipeline, and save_pretrained / from_pretrained on a local folder."""

from __future__ import annotations

import pytest
import torch
from beacon_test_models import VOCAB, ids, lively, tiny

from iclr25.methods.activation_beacon import (
    BeaconConfig,
    BeaconGenerationCache,
    BeaconModel,
    BeaconModelConfig,
    beacon_kv_resident,
    register_auto_classes,
    run_chunks,
    wrap_with_beacon,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _cfg(**kw) -> BeaconConfig:
    base = dict(window=8, ratios=(2, 4), sink_size=1)
    base.update(kw)
    return BeaconConfig(**base)


def _model(arch: str = "llama", **kw) -> BeaconModel:
    params = ("q", "k", "v") if arch == "qwen2" else ("q", "k", "v", "o")
    return wrap_with_beacon(lively(tiny(arch)), _cfg(params=params, **kw))


@torch.no_grad()
def _reference_greedy(bm: BeaconModel, prompt: torch.Tensor, new: int, ratio: int | None) -> torch.Tensor:
    """The greedy decoding loop the model had before it used transformers' generate: prompt read
    with prefill, decoded tokens streamed raw, a full raw tail re-run with beacons."""
    cfg, w = bm.beacon_config, bm.beacon_config.window
    logits = bm.prefill(prompt, ratio)
    cache = bm.memory.cache
    tail = prompt[:, (prompt.shape[1] // w) * w :]
    fixed = cache.num_entries() - tail.shape[1]
    out = prompt
    for _ in range(new):
        nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        out = torch.cat([out, nxt], dim=1)
        logits = run_chunks(bm.lm, cache, nxt, [], window=w, context=bm.context, raw_offset=out.shape[1] - 1)
        tail = torch.cat([tail, nxt], dim=1)
        if tail.shape[1] == w:
            cache.truncate(fixed)
            alpha = bm._alphas(1, out.shape[1], ratio)[0]
            run_chunks(
                bm.lm, cache, tail, [alpha], window=w, attn=cfg.attn, pos=cfg.pos, context=bm.context,
                beacon_embedding=bm.beacon_embedding, raw_offset=out.shape[1] - w,
            )  # fmt: skip
            fixed = cache.num_entries()
            tail = tail[:, :0]
    return out


# --- greedy, sampling, lengths ------------------------------------------------------------------
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
@pytest.mark.parametrize("ratio", [None, 2])
@pytest.mark.parametrize(("length", "new"), [(5, 7), (16, 9), (19, 12)])
def test_greedy_generate_equals_the_reference_loop(arch, ratio, length, new):
    x = ids(2, length, seed=length)
    ref = _reference_greedy(_model(arch), x, new, ratio)
    got = _model(arch).generate(x, max_new_tokens=new, beacon_ratio=ratio, eos_token_id=None)
    assert torch.equal(got, ref)
    assert len(set(got[0, length:].tolist())) > 1  # a lively model: not one token repeated


def test_sampling_is_reproducible_under_a_fixed_seed():
    # a fixed α: with beacon_ratio=None the schedule comes from the model's own seeded generator,
    # which advances call by call (torch.manual_seed does not rewind it)
    bm, x = _model(), ids(1, 19)
    kw = dict(do_sample=True, top_k=5, temperature=0.8, max_new_tokens=12, eos_token_id=None, beacon_ratio=4)
    torch.manual_seed(0)
    a = bm.generate(x, **kw)
    torch.manual_seed(0)
    b = bm.generate(x, **kw)
    torch.manual_seed(1)
    c = bm.generate(x, **kw)
    assert torch.equal(a, b) and a.shape == (1, 31)
    assert not torch.equal(a, c)
    assert bm.generate(x, num_return_sequences=3, **kw).shape == (3, 31)
    # top_k=1 sampling is greedy decoding
    torch.manual_seed(3)
    one = bm.generate(x, do_sample=True, top_k=1, max_new_tokens=12, eos_token_id=None, beacon_ratio=4)
    assert torch.equal(one, bm.generate(x, max_new_tokens=12, eos_token_id=None, beacon_ratio=4))


def test_max_length_and_max_new_tokens():
    bm, x = _model(), ids(2, 13)
    kw = dict(eos_token_id=None, beacon_ratio=4)
    by_total = bm.generate(x, max_length=24, **kw)
    by_new = bm.generate(x, max_new_tokens=11, **kw)
    assert by_total.shape == (2, 24) and torch.equal(by_total, by_new)
    assert bm.generate(x, max_new_tokens=3, **kw).shape == (2, 16)


def test_eos_stops_and_pads_finished_rows():
    bm, x = _model(), ids(2, 13)
    free = bm.generate(x, max_new_tokens=10, eos_token_id=None, beacon_ratio=4)
    stop = int(free[0, 13])  # make row 0's first new token the end of sequence
    out = bm.generate(x, max_new_tokens=10, eos_token_id=stop, pad_token_id=0, beacon_ratio=4)
    assert int(out[0, 13]) == stop and (out[0, 14:] == 0).all()


# --- padded batches -----------------------------------------------------------------------------
def test_left_padded_batch_equals_each_prompt_alone():
    bm = _model()
    a, b = ids(1, 21, seed=1), ids(1, 13, seed=2)  # different chunk grids (21 = 2·8 + 5, 13 = 8 + 5)
    pad = torch.zeros(1, 8, dtype=torch.long)
    batch = torch.cat([a, torch.cat([pad, b], dim=1)])
    mask = torch.ones_like(batch)
    mask[1, :8] = 0
    kw = dict(max_new_tokens=15, eos_token_id=None, beacon_ratio=2)
    together = bm.generate(batch, attention_mask=mask, **kw)
    assert torch.equal(together[0], bm.generate(a, **kw)[0])
    assert torch.equal(together[1, 8:], bm.generate(b, **kw)[0])
    out = bm.generate(
        batch, attention_mask=mask, max_new_tokens=4, beacon_ratio=2, return_dict_in_generate=True
    )
    groups = out.cache.groups
    assert [g.pad for g in groups] == [0, 8] and [g.rows.tolist() for g in groups] == [[0], [1]]
    # the prompt logits of each row equal those of the row read alone (padding positions: zeros)
    first = bm(batch, attention_mask=mask, use_cache=True, beacon_ratio=2).logits
    torch.testing.assert_close(first[1, 8:], bm(b, use_cache=True, beacon_ratio=2).logits[0])
    assert (first[1, :8] == 0).all()


def test_padding_that_would_enter_compressed_chunks_raises():
    bm, x = _model(), ids(2, 20)
    right = torch.ones_like(x)
    right[0, -3:] = 0
    with pytest.raises(ValueError, match="left padding"):
        bm.generate(x, attention_mask=right, max_new_tokens=2)
    hole = torch.ones_like(x)
    hole[1, 5] = 0
    with pytest.raises(ValueError, match="left padding"):
        bm.generate(x, attention_mask=hole, max_new_tokens=2)
    with pytest.raises(ValueError, match="padded"):  # the scoring forward reads equal-length rows only
        bm(x, attention_mask=right)
    with pytest.raises(ValueError, match="beam search"):
        bm.generate(x, num_beams=2, max_new_tokens=2)
    with pytest.raises(TypeError, match="BeaconGenerationCache"):
        from transformers import DynamicCache

        bm(x, cache=DynamicCache())


def test_continuing_from_the_returned_cache_equals_one_call():
    bm, x = _model("qwen2"), ids(2, 13)
    whole = bm.generate(x, max_new_tokens=14, beacon_ratio=2, eos_token_id=None)
    first = bm.generate(x, max_new_tokens=6, beacon_ratio=2, eos_token_id=None, return_dict_in_generate=True)
    assert isinstance(first.cache, BeaconGenerationCache) and first.cache.get_seq_length() == 18
    rest = bm.generate(
        first.sequences, cache=first.cache, max_new_tokens=8, beacon_ratio=2, eos_token_id=None
    )
    assert torch.equal(rest, whole)
    # 13 + 14 = 27 tokens, the last not read: 26 -> three windows compressed at α = 2
    assert first.cache.groups[0].memory.num_entries() == beacon_kv_resident(26, 8, 2, 1)


# --- pipeline -----------------------------------------------------------------------------------
def test_text_generation_pipeline():
    from transformers import pipeline

    from iclr25.common.tiny_lm import build_word_tokenizer

    tok = build_word_tokenizer([f"w{i}" for i in range(VOCAB - 4)])  # padding on the left
    assert len(tok) == VOCAB
    bm = _model()
    gen = pipeline("text-generation", model=bm, tokenizer=tok)
    long_prompt = " ".join(f"w{i}" for i in range(20))
    prompts = [long_prompt, "w1 w2 w3"]
    kw = dict(max_new_tokens=6, do_sample=False, return_full_text=False, beacon_ratio=2, eos_token_id=None)
    together = gen(prompts, batch_size=2, **kw)
    alone = [gen(p, **kw)[0] for p in prompts]
    assert [r[0]["generated_text"] for r in together] == [r["generated_text"] for r in alone]
    ids_long = tok(long_prompt, return_tensors="pt").input_ids
    direct = bm.generate(ids_long, max_new_tokens=6, beacon_ratio=2, eos_token_id=None)
    assert alone[0]["generated_text"].split() == tok.decode(direct[0, 20:]).split()


# --- save_pretrained / from_pretrained ----------------------------------------------------------
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_save_and_load_round_trip(tmp_path, arch):
    bm = _model(arch, ratios=(2, 4, 8), seed=7)
    with torch.no_grad():  # make the beacon tensors differ from the base copies they start as
        for p in bm.beacon_parameters().values():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    x = ids(2, 30)
    ref = bm(x, beacon_ratio=2).logits
    bm.save_pretrained(tmp_path)
    assert {p.name for p in tmp_path.iterdir()} >= {
        "config.json",
        "model.safetensors",
        "generation_config.json",
    }

    again = BeaconModel.from_pretrained(tmp_path, attn_implementation="eager")
    assert isinstance(again.config, BeaconModelConfig) and again.beacon_config == bm.beacon_config
    assert type(again.lm) is type(bm.lm)
    assert set(again.beacon_parameters()) == set(bm.beacon_parameters())  # base frozen again
    assert torch.equal(again(x, beacon_ratio=2).logits, ref)
    gen = dict(max_new_tokens=10, beacon_ratio=4, eos_token_id=None)
    assert torch.equal(again.generate(x[:, :13], **gen), bm.generate(x[:, :13], **gen))

    register_auto_classes()
    from transformers import AutoModelForCausalLM

    auto = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True, attn_implementation="eager")
    assert isinstance(auto, BeaconModel) and torch.equal(auto(x, beacon_ratio=2).logits, ref)


def test_stock_llama_from_a_local_folder(tmp_path):
    """A stock LlamaConfig model saved to and loaded from a local folder, wrapped, generating."""
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "base")
    lm = AutoModelForCausalLM.from_pretrained(tmp_path / "base", local_files_only=True)
    bm = wrap_with_beacon(lm, BeaconConfig(window=16, ratios=(2, 4, 8), sink_size=1))
    x = torch.randint(3, 64, (2, 40), generator=torch.Generator().manual_seed(0))
    out = bm.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=8, beacon_ratio=4)
    assert out.shape[0] == 2 and 41 <= out.shape[1] <= 48
    assert bm.memory.num_entries() <= 1 + 2 * 4 + 16
