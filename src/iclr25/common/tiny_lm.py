"""Tiny Hugging Face causal LMs built from configs, and a word-level tokenizer.

Models are stock ``transformers`` classes (``GPT2LMHeadModel``, ``LlamaForCausalLM``) with
random initialisation, so everything runs offline. The tokenizer is a ``tokenizers``
``WordLevel`` model over a given vocabulary, wrapped in ``PreTrainedTokenizerFast`` so
``save_pretrained``/``from_pretrained`` on a local folder work as users expect.

Example:
    >>> tok = build_word_tokenizer(["a", "b", "c"])
    >>> model = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, n_head=2, d_model=16, seed=0)
    >>> tok.decode(tok("a b c")["input_ids"])
    'a b c'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerFast,
)

__all__ = ["SPECIAL_TOKENS", "build_tiny_lm", "build_word_tokenizer", "load_tiny_lm", "load_tokenizer"]

#: Special tokens every word-level tokenizer carries, in this order (ids 0..3).
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<unk>", "<bos>", "<eos>")


def build_word_tokenizer(vocab: Sequence[str]) -> PreTrainedTokenizerFast:
    """A whitespace-split word-level tokenizer over ``vocab``.

    Args:
        vocab: the words, in id order after the special tokens. Must be unique, non-empty and
            free of whitespace. Words outside it encode as ``<unk>``.

    Returns:
        A ``PreTrainedTokenizerFast`` with pad/unk/bos/eos set (ids 0..3), padding on the left
        (the side batched generation needs).

    Raises:
        ValueError: duplicate, empty or whitespace-containing words.
    """
    words = list(SPECIAL_TOKENS) + list(vocab)
    if len(set(words)) != len(words):
        dup = sorted({w for w in words if words.count(w) > 1})
        raise ValueError(f"vocabulary has duplicate words: {dup[:5]}")
    for w in vocab:
        if not w or any(ch.isspace() for ch in w):
            raise ValueError(f"vocabulary word {w!r} is empty or contains whitespace")
    index = {w: i for i, w in enumerate(words)}
    core = Tokenizer(models.WordLevel(vocab=index, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )
    return tok


def load_tokenizer(path: str | os.PathLike[str]) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved with ``save_pretrained`` from a local folder (never the hub)."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"tokenizer folder {str(path)!r} does not exist")
    return PreTrainedTokenizerFast.from_pretrained(path, local_files_only=True)


def build_tiny_lm(
    arch: Literal["gpt2", "llama"],
    *,
    vocab_size: int,
    n_layer: int = 2,
    n_head: int = 2,
    d_model: int = 64,
    max_positions: int = 512,
    seed: int = 0,
    attn_implementation: Literal["eager", "sdpa"] = "eager",
    dropout: float = 0.0,
    pad_token_id: int = 0,
    bos_token_id: int = 2,
    eos_token_id: int = 3,
) -> PreTrainedModel:
    """A randomly initialised GPT-2 or Llama causal LM built from a config.

    Args:
        arch: "gpt2" (``GPT2LMHeadModel``) or "llama" (``LlamaForCausalLM``).
        vocab_size: vocabulary size.
        n_layer: number of transformer blocks.
        n_head: attention heads; must divide ``d_model``.
        d_model: hidden size.
        max_positions: context length (GPT-2 position table size; Llama max positions).
        seed: seed of the initialisation (a local generator state; the global RNG is restored).
        attn_implementation: "eager" returns attention maps; "sdpa" is faster.
        dropout: dropout probability in every dropout slot.
        pad_token_id: id of the padding token.
        bos_token_id: id of the beginning-of-sequence token.
        eos_token_id: id of the end-of-sequence token.

    Returns:
        The model in eval mode, float32, on the CPU.

    Raises:
        ValueError: ``d_model`` not divisible by ``n_head``, or a non-positive size.
    """
    for name, v in (
        ("vocab_size", vocab_size),
        ("n_layer", n_layer),
        ("n_head", n_head),
        ("d_model", d_model),
    ):
        if v <= 0:
            raise ValueError(f"{name} must be positive, got {v}")
    if d_model % n_head:
        raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
    ids = dict(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id)
    if arch == "gpt2":
        config = GPT2Config(
            vocab_size=vocab_size,
            n_positions=max_positions,
            n_embd=d_model,
            n_layer=n_layer,
            n_head=n_head,
            resid_pdrop=dropout,
            embd_pdrop=dropout,
            attn_pdrop=dropout,
            **ids,
        )
        cls: type[PreTrainedModel] = GPT2LMHeadModel
    elif arch == "llama":
        config = LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=d_model,
            intermediate_size=4 * d_model,
            num_hidden_layers=n_layer,
            num_attention_heads=n_head,
            num_key_value_heads=n_head,
            max_position_embeddings=max_positions,
            attention_dropout=dropout,
            tie_word_embeddings=True,
            **ids,
        )
        cls = LlamaForCausalLM
    else:
        raise ValueError(f"arch must be 'gpt2' or 'llama', got {arch!r}")
    config._attn_implementation = attn_implementation
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(config)
    model.generation_config.pad_token_id = pad_token_id
    # transformers infers the loss from the class name; "GPT2LMHeadModel" matches none of its
    # names, so it would fall back to the causal-LM loss with a warning. Name that loss.
    model.loss_type = "ForCausalLM"
    return model.eval()


def load_tiny_lm(path: str | os.PathLike[str], **kwargs: object) -> PreTrainedModel:
    """Load a causal LM saved with ``save_pretrained`` from a local folder (never the hub).

    Args:
        path: a local directory holding ``config.json`` and the weights.
        **kwargs: passed to ``AutoModelForCausalLM.from_pretrained`` (e.g. ``torch_dtype``).

    Raises:
        FileNotFoundError: the folder or its ``config.json`` does not exist.
    """
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"no model folder with config.json at {str(path)!r}")
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, **kwargs)
    if model.loss_type is None:  # a class name transformers cannot map to a loss (GPT-2)
        model.loss_type = "ForCausalLM"
    return model.eval()
