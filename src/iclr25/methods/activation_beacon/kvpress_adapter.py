"""kvpress eviction presses at a fixed KV budget, run on our transformers through one small adapter.

A baseline for Activation Beacon (*Long Context Compression with Activation Beacon*, Zhang et
al., ICLR 2025, arXiv:2401.03462), which compares against KV-eviction methods in its Sec. 5.
``kvpress`` (NVIDIA) is the library practitioners use for KV-cache compression; its presses
compress the cache of every attention layer in a forward hook during the prefill.

Two differences between kvpress 0.5.5 and the transformers this project runs are bridged here,
without touching either library:

* our attention modules receive the cache as ``cache``; kvpress's hook reads
  ``past_key_values`` and ``cache_position``. A forward pre-hook on each ``self_attn`` adds both:
  the cache under its old name, and ``cache_position = arange(past, past + q)`` where ``past``
  is the layer's cache length before this call (so kvpress's ``is_prefilling`` test holds for the
  first call only).
* the press sets the kept share through ``compression_ratio``; kvpress keeps
  ``int(n * (1 - compression_ratio))`` entries, so the ratio is chosen to keep exactly ``budget``.

``kvpress`` is imported lazily: :func:`kvpress_available` tells whether it is installed, and
:class:`KVPressEviction` raises ``ImportError`` naming the package when it is not.
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import torch
from torch import nn
from transformers import DynamicCache

from iclr25.methods.activation_beacon.memory import _cache_kwarg

__all__ = ["KVPRESS_PRESSES", "KVPressEviction", "kvpress_available"]

#: press name -> kvpress class name
KVPRESS_PRESSES = {
    "snapkv": "SnapKVPress",
    "streaming": "StreamingLLMPress",
    "expected_attention": "ExpectedAttentionPress",
}


def kvpress_available() -> bool:
    """Whether the optional ``kvpress`` package can be imported."""
    return importlib.util.find_spec("kvpress") is not None


def _attention_modules(lm: nn.Module) -> list[nn.Module]:
    inner = lm.model.language_model if hasattr(lm.model, "language_model") else lm.model
    return [layer.self_attn for layer in inner.layers]


def _pre_hook(module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Give kvpress's hook the names it reads: ``past_key_values`` and ``cache_position``."""
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    if cache is None:
        raise ValueError("kvpress presses need a cache: call the model with a DynamicCache")
    hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
    q = hidden.shape[1]
    past = cache.get_seq_length(module.layer_idx)  # this layer's entries before this call
    kwargs = dict(kwargs)
    kwargs["past_key_values"] = cache
    kwargs["cache_position"] = torch.arange(past, past + q, device=hidden.device)
    if "hidden_states" not in kwargs:  # kvpress reads hidden_states from kwargs
        kwargs["hidden_states"], args = args[0], args[1:]
    return args, kwargs


class KVPressEviction(nn.Module):
    """A kvpress press at a ``budget``-entry cache: prefill the context, then read the last ``window``.

    The context (all but the last ``window`` tokens) is prefilled with the press active, which
    leaves ``budget`` key/values per layer and key/value head; the last ``window`` tokens (the
    query span) are then read over that cache at their original positions. This is kvpress's own
    use (compress the context, then ask the question). ``forward`` returns logits for every
    position: the context's come from the prefill (full attention), the last ``window`` from the
    compressed cache.

    Args:
        model: a stock Llama-like causal LM.
        press: "snapkv", "streaming" or "expected_attention" (see :data:`KVPRESS_PRESSES`).
        budget: context key/values kept per layer (what the press leaves).
        window: the final span read over the compressed cache; also SnapKV's observation window
            (the last ``window`` context tokens) and Expected Attention's future positions.
        sink: leading tokens StreamingLLM and Expected Attention always keep.

    Raises:
        ImportError: kvpress is not installed.
        ValueError: an unknown press or sizes that cannot work.

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("llama", vocab_size=32, n_layer=1, n_head=2, d_model=16)
        >>> ev = KVPressEviction(lm, "streaming", budget=6, window=4)  # doctest: +SKIP
    """

    def __init__(self, model: nn.Module, press: str, *, budget: int, window: int, sink: int = 1) -> None:
        super().__init__()
        if press not in KVPRESS_PRESSES:
            raise ValueError(f"press must be one of {sorted(KVPRESS_PRESSES)}, got {press!r}")
        if budget <= sink or window <= 0 or sink < 0:
            raise ValueError(f"need budget > sink >= 0 and window > 0, got {budget=}, {sink=}, {window=}")
        if not kvpress_available():
            raise ImportError("kvpress is not installed: pip install --no-deps kvpress==0.5.5")
        self.lm, self.press_name = model, press
        self.budget, self.window, self.sink = budget, window, sink
        self.peak_entries = 0

    def _press(self, ctx: int) -> Any:
        import kvpress  # optional dependency, imported only when used

        # kvpress keeps int(ctx * (1 - ratio)) entries; half an entry of slack makes that exactly budget
        ratio = 1.0 - (self.budget + 0.5) / ctx
        cls = getattr(kvpress, KVPRESS_PRESSES[self.press_name])
        if self.press_name == "snapkv":
            return cls(compression_ratio=ratio, window_size=self.window)
        if self.press_name == "streaming":
            return cls(compression_ratio=ratio, n_sink=self.sink)
        return cls(compression_ratio=ratio, n_sink=self.sink, n_future_positions=self.window)

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits ``(B, L, V)``; the last ``window`` rows are read over the compressed cache."""
        b, n = input_ids.shape
        ctx = n - self.window
        if ctx <= self.budget:
            raise ValueError(f"context of {ctx} tokens is not longer than the budget {self.budget}")
        key = _cache_kwarg(self.lm)
        cache = DynamicCache()
        hooks = [
            a.register_forward_pre_hook(_pre_hook, with_kwargs=True) for a in _attention_modules(self.lm)
        ]
        try:
            with warnings.catch_warnings():
                # the attention reads `cache`; the alias kvpress needs triggers a deprecation notice
                warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)
                with self._press(ctx)(self.lm):
                    pre = self.lm(input_ids=input_ids[:, :ctx], **{key: cache}, use_cache=True)
                kept = cache.get_seq_length(0)
                if kept != self.budget:
                    raise RuntimeError(f"the press kept {kept} entries, not the budget {self.budget}")
                pos = torch.arange(ctx, n, device=input_ids.device).expand(b, -1)  # original positions
                out = self.lm(input_ids=input_ids[:, ctx:], **{key: cache}, position_ids=pos, use_cache=True)
        finally:
            for h in hooks:
                h.remove()
        self.peak_entries = self.budget + self.window
        return torch.cat([pre.logits, out.logits], dim=1)
