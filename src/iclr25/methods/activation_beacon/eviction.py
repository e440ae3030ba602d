"""Attention-score key/value eviction (SnapKV style) at a fixed KV budget, on stock transformers.

A baseline for Activation Beacon (*Long Context Compression with Activation Beacon*, Zhang et
al., ICLR 2025, arXiv:2401.03462), which compares against KV-eviction methods in its Sec. 5.

SnapKV (Li et al., "SnapKV: LLM Knows What You are Looking for Before Generation", NeurIPS
2024): prefill the context with full attention, score every context position by the attention
it receives from the last ``window`` prompt tokens (the observation window), summed over those
queries and over the query heads sharing a key/value head, smoothed by a 1-D pooling; keep the
top ``budget`` positions per layer and key/value head (plus the sink), drop the rest, and
continue over the compressed cache. Kept keys keep their original RoPE positions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import DynamicCache

from iclr25.methods.activation_beacon.memory import _cache_kwarg

__all__ = ["SnapKV"]


class SnapKV(nn.Module):
    """SnapKV-style eviction: the last ``window`` tokens are read over a ``budget``-entry cache.

    ``forward`` returns logits for every position: the context's come from the full prefill
    (they are not scored in the claim), the last ``window`` positions' come from the compressed
    cache. Peak key/values while the window is read = ``budget + window``; the prefill itself
    holds the whole context (as in SnapKV).

    Args:
        model: a stock causal LM (Llama-like; eager attention is used for the scores).
        budget: context key/value entries kept per layer and key/value head (sink included).
        window: observation window = the final span read over the compressed cache.
        sink: leading positions always kept.
        pool: odd kernel of the max-pooling over scores (1 = none).

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("llama", vocab_size=32, n_layer=1, n_head=2, d_model=16)
        >>> ev = SnapKV(lm, budget=6, window=4)
        >>> ev(torch.randint(32, (2, 20))).shape, ev.peak_entries
        (torch.Size([2, 20, 32]), 10)
    """

    def __init__(self, model: nn.Module, *, budget: int, window: int, sink: int = 1, pool: int = 5) -> None:
        super().__init__()
        if budget <= sink or window <= 0 or sink < 0:
            raise ValueError(f"need budget > sink >= 0 and window > 0, got {budget=}, {sink=}, {window=}")
        if pool < 1 or pool % 2 == 0:
            raise ValueError(f"pool must be a positive odd kernel, got {pool}")
        self.lm = model
        self.budget, self.window, self.sink, self.pool = budget, window, sink, pool
        self.peak_entries = 0

    def _scores(self, attentions: tuple[torch.Tensor, ...], ctx: int, n_kv: int) -> list[torch.Tensor]:
        out = []
        for att in attentions:  # (B, H, window, ctx + window)
            b, h = att.shape[:2]
            s = att[..., :ctx].sum(2)  # (B, H, ctx): attention received from the window
            s = s.view(b, n_kv, h // n_kv, ctx).sum(2)  # (B, n_kv, ctx): per key/value head
            if self.pool > 1:
                s = F.max_pool1d(s, self.pool, stride=1, padding=self.pool // 2)
            s[..., : self.sink] = float("inf")  # the sink always stays
            out.append(s)
        return out

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, L, V)``; the last ``window`` rows are read over the evicted cache."""
        b, n = input_ids.shape
        ctx = n - self.window
        if ctx <= self.sink:
            raise ValueError(f"input of {n} tokens leaves {ctx} context tokens: no more than the sink")
        attn_impl = self.lm.config._attn_implementation
        self.lm.config._attn_implementation = "eager"  # attention weights are needed
        try:
            pre = self.lm(input_ids=input_ids[:, :ctx], use_cache=True)
            full = pre["cache"] if "cache" in pre else pre["past_key_values"]
            key = _cache_kwarg(self.lm)
            n_kv = full.layers[0].keys.shape[1]
            obs_cache = DynamicCache()
            for i, layer in enumerate(full.layers):
                obs_cache.update(layer.keys.clone(), layer.values.clone(), i)
            pos = torch.arange(ctx, n, device=input_ids.device).expand(b, -1)
            obs = self.lm(
                input_ids=input_ids[:, ctx:], **{key: obs_cache}, position_ids=pos, output_attentions=True
            )
            scores = self._scores(obs.attentions, ctx, n_kv)
        finally:
            self.lm.config._attn_implementation = attn_impl
        kept = DynamicCache()
        for i, (layer, s) in enumerate(zip(full.layers, scores, strict=True)):
            idx = s.topk(min(self.budget, ctx), dim=-1).indices.sort(dim=-1).values  # (B, n_kv, budget)
            gather = idx.unsqueeze(-1)
            k = layer.keys.gather(2, gather.expand(-1, -1, -1, layer.keys.shape[-1]))
            v = layer.values.gather(2, gather.expand(-1, -1, -1, layer.values.shape[-1]))
            kept.update(k, v, i)  # keys stay rotated at their original positions
        out = self.lm(input_ids=input_ids[:, ctx:], **{key: kept}, position_ids=pos)
        self.peak_entries = min(self.budget, ctx) + self.window
        return torch.cat([pre.logits, out.logits], dim=1)
