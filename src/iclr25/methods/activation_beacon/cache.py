"""Key/value memories for chunked long-context processing on stock transformers.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3.1: after each chunk
only the beacons' key/values (plus the sink) stay in memory; positions follow the compressed
stream, so keys are kept before RoPE and rotated at their current positions each step.
Baseline memories: StreamingLLM (sink + recent window; Xiao et al., ICLR 2024) and a mean-pooled
key/value per unit of α tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from transformers.cache_utils import Cache, CacheLayerMixin

from iclr25.methods.activation_beacon.layout import ChunkLayout

__all__ = ["BeaconCache", "MeanPoolCache", "SinkWindowCache"]


class _MemoryLayer(CacheLayerMixin):
    """One layer's memory: pre-RoPE keys and values, plus the current chunk's pending ones."""

    is_sliding = False
    is_compileable = False
    is_croppable = False

    def __init__(self, owner: BeaconCache) -> None:
        super().__init__()
        self.owner = owner
        self.pending: tuple[torch.Tensor, torch.Tensor] | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        b, h, _, d = key_states.shape
        self.device = key_states.device
        self.keys = key_states.new_zeros(b, h, 0, d)
        self.values = value_states.new_zeros(b, h, 0, value_states.shape[-1])
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        # the layer hands over keys rotated at the chunk's positions: undo that, keep pre-RoPE keys
        self.pending = (self.owner._unrotate(key_states), value_states)
        m = self.keys.shape[-2]
        self.owner._observe(m + key_states.shape[-2])
        if m == 0:
            return key_states, value_states
        mem_k = self.owner._rotate_memory(self.keys)  # memory at compressed positions 0..M-1
        return torch.cat([mem_k, key_states], dim=-2), torch.cat([self.values, value_states], dim=-2)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def get_seq_length(self) -> int:
        return 0 if not self.is_initialized else int(self.keys.shape[-2])

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        self.keys = self.values = None
        self.pending = None
        self.is_initialized = False


class BeaconCache(Cache):
    """A transformers ``Cache`` holding the beacon memory: sink and beacon key/values per layer.

    Keys are stored before RoPE. ``begin`` computes the rotary tables of the compressed stream
    (memory at 0..M−1, then the chunk) with the model's own rotary module; ``update`` (called by
    each stock attention layer) un-rotates the chunk's keys, stores them as pending, and returns
    memory keys rotated at their current positions followed by the chunk's keys;
    ``finish_chunk`` keeps the sink and the beacons and drops the raw key/values.

    Args:
        num_layers: decoder layers.
        rotary: the model's rotary module (``rotary(x, position_ids) -> (cos, sin)``).
        apply_rope: the modeling file's ``apply_rotary_pos_emb``.
        sink_size: leading raw tokens kept forever.

    References:
        Zhang et al., ICLR 2025, Sec. 3.1.

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> from iclr25.methods.activation_beacon.wrap import rope_functions
        >>> lm = build_tiny_lm("llama", vocab_size=16, n_layer=1, d_model=16)
        >>> cache = BeaconCache(1, *rope_functions(lm), sink_size=1)
        >>> cache.num_entries()
        0
    """

    def __init__(
        self, num_layers: int, rotary: nn.Module, apply_rope: Callable[..., Any], *, sink_size: int = 1
    ) -> None:
        super().__init__(layers=[_MemoryLayer(self) for _ in range(num_layers)])
        self.rotary = rotary
        self.apply_rope = apply_rope
        self.sink_size = sink_size
        self.peak_entries = 0
        self._chunk_rope: tuple[torch.Tensor, torch.Tensor] | None = None
        self._mem_rope: tuple[torch.Tensor, torch.Tensor] | None = None

    # --- rotary bookkeeping -------------------------------------------------------------------
    def begin(self, position_ids: torch.Tensor, ref: torch.Tensor) -> None:
        """Prepare the rotary tables for a forward whose items sit at ``position_ids``.

        Args:
            position_ids: (B, T) positions of the chunk items (M .. M+T−1).
            ref: a tensor with the model's dtype and device.
        """
        m = self.num_entries()
        b = position_ids.shape[0]
        mem_pos = torch.arange(m, device=position_ids.device)[None].expand(b, m)
        # one rotary call over the whole stream, so length-dependent RoPE variants see all of it
        cos, sin = self.rotary(ref, torch.cat([mem_pos, position_ids], dim=1))
        self._mem_rope = (cos[:, :m], sin[:, :m])
        self._chunk_rope = (cos[:, m:], sin[:, m:])

    def _rotate(self, k: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        cos, sin = rope
        return self.apply_rope(k, k, cos, sin)[1]

    def _rotate_memory(self, k: torch.Tensor) -> torch.Tensor:
        if self._mem_rope is None:
            raise RuntimeError("BeaconCache.begin() must run before a forward")
        return self._rotate(k, self._mem_rope)

    def _unrotate(self, k: torch.Tensor) -> torch.Tensor:
        if self._chunk_rope is None:
            raise RuntimeError("BeaconCache.begin() must run before a forward")
        cos, sin = self._chunk_rope
        # R(p)^-1: rotate by −θ; divide out an attention factor s folded into cos/sin (cos²+sin² = s²)
        back = self.apply_rope(k, k, cos, -sin)[1]
        return back / (cos * cos + sin * sin).unsqueeze(1)

    def _observe(self, kv_len: int) -> None:
        self.peak_entries = max(self.peak_entries, kv_len)

    # --- memory policy ------------------------------------------------------------------------
    def num_entries(self) -> int:
        """Key/value entries per layer currently held in memory (resident count)."""
        return self.layers[0].get_seq_length()

    def _commit(self, keep: torch.Tensor) -> None:
        for layer in self.layers:
            if layer.pending is None:
                raise RuntimeError("no pending chunk to commit")
            k, v = layer.pending
            idx = keep.to(k.device)
            layer.keys = torch.cat([layer.keys, k[:, :, idx]], dim=-2)
            layer.values = torch.cat([layer.values, v[:, :, idx]], dim=-2)
            layer.pending = None

    def finish_chunk(self, layout: ChunkLayout, raw_start: int) -> None:
        """Keep the sink and beacon key/values of the chunk just run (all of it if it had no beacons).

        Args:
            layout: the chunk's layout.
            raw_start: global index of the chunk's first raw token.
        """
        if layout.n_beacon == 0:
            self._commit(torch.arange(len(layout)))
            return
        raw_pos = torch.cumsum((~layout.is_beacon).long(), 0) - 1 + raw_start
        keep = layout.is_beacon | (~layout.is_beacon & (raw_pos < self.sink_size))
        self._commit(keep.nonzero().flatten())

    def truncate(self, n: int) -> None:
        """Drop memory entries after the first ``n``."""
        for layer in self.layers:
            if layer.is_initialized:
                layer.keys = layer.keys[:, :, :n]
                layer.values = layer.values[:, :, :n]

    def reset(self) -> None:
        """Empty the memory and its peak counter."""
        for layer in self.layers:
            layer.reset()
        self.peak_entries = 0
        self._chunk_rope = self._mem_rope = None


class SinkWindowCache(BeaconCache):
    """StreamingLLM memory: the first ``sink_size`` tokens plus the most recent ``window`` tokens.

    Positions are those inside the cache (re-rotated each step), as StreamingLLM prescribes.

    Args:
        num_layers: decoder layers.
        rotary: the model's rotary module.
        apply_rope: the modeling file's ``apply_rotary_pos_emb``.
        sink_size: attention-sink tokens kept forever.
        window: most recent raw tokens kept.

    References:
        Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024.
    """

    def __init__(
        self,
        num_layers: int,
        rotary: nn.Module,
        apply_rope: Callable[..., Any],
        *,
        sink_size: int,
        window: int,
    ) -> None:
        super().__init__(num_layers, rotary, apply_rope, sink_size=sink_size)
        if window < 0:
            raise ValueError(f"window must be non-negative, got {window}")
        self.window = window

    def finish_chunk(self, layout: ChunkLayout, raw_start: int) -> None:
        self._commit(torch.arange(len(layout)))
        n = self.num_entries()
        if n > self.sink_size + self.window:
            keep = torch.cat([torch.arange(self.sink_size), torch.arange(n - self.window, n)])
            for layer in self.layers:
                layer.keys = layer.keys[:, :, keep.to(layer.keys.device)]
                layer.values = layer.values[:, :, keep.to(layer.values.device)]


class MeanPoolCache(BeaconCache):
    """Training-free compression: each unit of α raw key/values (pre-RoPE) is replaced by its mean.

    Args:
        num_layers: decoder layers.
        rotary: the model's rotary module.
        apply_rope: the modeling file's ``apply_rotary_pos_emb``.
        sink_size: sink tokens kept as they are.
        ratio: α, tokens per pooled entry.
        window: chunk size; only full chunks are pooled.
    """

    def __init__(
        self,
        num_layers: int,
        rotary: nn.Module,
        apply_rope: Callable[..., Any],
        *,
        sink_size: int,
        ratio: int,
        window: int,
    ) -> None:
        super().__init__(num_layers, rotary, apply_rope, sink_size=sink_size)
        if ratio <= 0 or window % ratio:
            raise ValueError(f"ratio={ratio} must be a positive divisor of window={window}")
        self.ratio = ratio
        self.window = window

    def finish_chunk(self, layout: ChunkLayout, raw_start: int) -> None:
        if layout.n_raw != self.window:
            self._commit(torch.arange(len(layout)))
            return
        n_sink = max(0, min(self.sink_size - raw_start, layout.n_raw))
        for layer in self.layers:
            k, v = layer.pending  # (B, H, w, D), raw only
            b, h, _, d = k.shape
            pk = k.reshape(b, h, self.window // self.ratio, self.ratio, d).mean(3)  # (B, H, w/α, D)
            pv = v.reshape(b, h, self.window // self.ratio, self.ratio, v.shape[-1]).mean(3)
            layer.keys = torch.cat([layer.keys, k[:, :, :n_sink], pk], dim=-2)
            layer.values = torch.cat([layer.values, v[:, :, :n_sink], pv], dim=-2)
            layer.pending = None
