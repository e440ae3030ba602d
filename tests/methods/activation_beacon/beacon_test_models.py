"""Tiny random-init Llama, Qwen2 and Mistral models for the beacon tests."""

from __future__ import annotations

import torch
from transformers import MistralConfig, MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM

from iclr25.common.tiny_lm import build_tiny_lm

VOCAB = 48


def tiny(arch: str, *, seed: int = 0, attn: str = "eager", sliding_window: int | None = None):
    """A 2-layer, hidden-32 causal LM of the given architecture (GQA for Qwen2/Mistral)."""
    common = dict(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, bos_token_id=2, eos_token_id=3, pad_token_id=0,
    )  # fmt: skip
    if arch == "llama":
        return build_tiny_lm("llama", vocab_size=VOCAB, n_layer=2, n_head=4, d_model=32, seed=seed,
                             attn_implementation=attn)  # fmt: skip
    if arch == "qwen2":
        cfg, cls = Qwen2Config(**common), Qwen2ForCausalLM
    elif arch == "mistral":
        cfg, cls = MistralConfig(sliding_window=sliding_window, **common), MistralForCausalLM
    else:
        raise ValueError(arch)
    cfg._attn_implementation = attn
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = cls(cfg)
        if arch == "qwen2":  # give the q/k/v biases non-zero values so copying them matters
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    torch.nn.init.normal_(proj.bias, std=0.2)
    return model.eval()


def ids(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(4, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def lively(model, seed: int = 0, std: float = 0.5):
    """Redraw every weight matrix with a larger spread, so greedy decoding does not repeat one token."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * std)
    return model
