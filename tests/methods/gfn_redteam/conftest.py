"""Shared tiny fixtures: a word tokenizer, a tiny GPT-2 and the meta-prompt conventions."""

from __future__ import annotations

import pytest
import torch

from iclr25.common.tiny_lm import build_tiny_lm, build_word_tokenizer
from iclr25.methods.gfn_redteam import AttackPrompt

WORDS = ["a", "b", "c"]


@pytest.fixture
def tiny():
    """(model, prompt): a 1-layer GPT-2 over 3 words + EOS; pad/unk/bos banned; prompt = <bos> a."""
    torch.manual_seed(0)
    tok = build_word_tokenizer(WORDS)
    model = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0)
    prompt = AttackPrompt(torch.tensor([2, 4]), 3, 0, (0, 1, 2), lambda t: " ".join(WORDS[i - 4] for i in t))
    return model, prompt
