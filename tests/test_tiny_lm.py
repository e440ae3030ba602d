"""The shared tiny HF causal LMs and word-level tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iclr25.common.tiny_lm import (
    SPECIAL_TOKENS,
    build_tiny_lm,
    build_word_tokenizer,
    load_tiny_lm,
    load_tokenizer,
)


def test_tokenizer_round_trip_and_special_ids() -> None:
    tok = build_word_tokenizer(["A", "=", "12"])
    ids = tok("A = 12")["input_ids"]
    assert ids == [4, 5, 6]
    assert tok.decode(ids) == "A = 12"
    assert [tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id] == [0, 1, 2, 3]
    assert tok("B")["input_ids"] == [tok.unk_token_id]
    assert len(tok) == len(SPECIAL_TOKENS) + 3 and tok.padding_side == "left"


def test_tokenizer_rejects_bad_vocab() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        build_word_tokenizer(["a", "a"])
    with pytest.raises(ValueError, match="whitespace"):
        build_word_tokenizer(["a b"])


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_build_is_seeded_and_generates(arch: str) -> None:
    a = build_tiny_lm(arch, vocab_size=12, n_layer=1, n_head=2, d_model=16, seed=1)
    b = build_tiny_lm(arch, vocab_size=12, n_layer=1, n_head=2, d_model=16, seed=1)
    c = build_tiny_lm(arch, vocab_size=12, n_layer=1, n_head=2, d_model=16, seed=2)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters(), strict=True))
    out = a.generate(torch.tensor([[4, 5]]), max_new_tokens=3, do_sample=False)
    assert out.shape == (1, 5)
    att = a(torch.tensor([[4, 5, 6]]), output_attentions=True).attentions
    assert len(att) == 1 and att[0].shape == (1, 2, 3, 3)


def test_bad_sizes_raise() -> None:
    with pytest.raises(ValueError, match="divide"):
        build_tiny_lm("gpt2", vocab_size=10, n_head=3, d_model=16)
    with pytest.raises(ValueError, match="arch"):
        build_tiny_lm("bert", vocab_size=10)  # type: ignore[arg-type]


def test_save_and_load_local_folder(tmp_path: Path) -> None:
    tok = build_word_tokenizer(["x", "y"])
    model = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    again, tok2 = load_tiny_lm(tmp_path), load_tokenizer(tmp_path)
    x = torch.tensor([tok2("x y x")["input_ids"]])
    assert torch.allclose(model(x).logits, again(x).logits)
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        load_tiny_lm(tmp_path / "missing")


def test_gpt2_names_its_loss_so_transformers_does_not_warn(tmp_path: Path) -> None:
    model = build_tiny_lm("gpt2", vocab_size=8, n_layer=1, n_head=2, d_model=16, seed=0)
    assert model.loss_type == "ForCausalLM"  # GPT2LMHeadModel's class name maps to no loss
    model.save_pretrained(tmp_path)
    assert load_tiny_lm(tmp_path).loss_type == "ForCausalLM"
