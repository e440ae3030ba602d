"""``BeaconModel``: Activation Beacon around a stock Hugging Face decoder, plus budget-matched baselines.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3 (the plug-in:
⟨b⟩ tokens, beacon projections, chunked compression, compressed positions), Section 3.3
(compression-based auto-regression with random α) and the generation path (memory reset per
call; a window re-run with beacons once it fills during decoding).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import torch
from torch import nn
from transformers.modeling_outputs import CausalLMOutputWithPast

from iclr25._core.registry import require
from iclr25.methods.activation_beacon.cache import BeaconCache, MeanPoolCache, SinkWindowCache
from iclr25.methods.activation_beacon.config import BeaconConfig
from iclr25.methods.activation_beacon.memory import MemoryStats, chunk_lm_loss, ratio_schedule, run_chunks
from iclr25.methods.activation_beacon.wrap import (
    BeaconContext,
    find_attention_layers,
    install_beacon_projections,
    rope_functions,
)

__all__ = [
    "BeaconMemory",
    "BeaconModel",
    "MeanPoolKV",
    "StreamingLLM",
    "load_beacon_config",
    "load_beacon_model",
    "wrap_with_beacon",
]

_ADAPTER_WEIGHTS = "beacon_adapter.safetensors"
_ADAPTER_CONFIG = "beacon_config.json"


class BeaconMemory:
    """The memory state of a :class:`BeaconModel`: the cache plus counters.

    Attributes:
        cache: the :class:`BeaconCache`.
        stats: counters of the last pass (attention-score entries, forwards, α per chunk).
    """

    def __init__(self, cache: BeaconCache) -> None:
        self.cache = cache
        self.stats = MemoryStats()

    def reset(self) -> None:
        """Forget all context (memory, counters)."""
        self.cache.reset()
        self.stats = MemoryStats()

    def num_entries(self) -> int:
        """Resident key/value entries per layer."""
        return self.cache.num_entries()

    @property
    def peak_entries(self) -> int:
        """Largest key/value length any attention call saw since the last reset."""
        return self.cache.peak_entries


def _init_embedding(lm: nn.Module, how: str) -> torch.Tensor:
    """Pick the ⟨b⟩ start vector: eos, else bos, else the mean token embedding."""
    table = lm.get_input_embeddings().weight.detach()
    cfg = lm.config
    order = {"eos": ("eos_token_id", "bos_token_id"), "bos": ("bos_token_id", "eos_token_id"), "mean": ()}[
        how
    ]
    for attr in order:
        tid = getattr(cfg, attr, None)
        if isinstance(tid, (list, tuple)):
            tid = tid[0] if tid else None
        if tid is not None and 0 <= int(tid) < table.shape[0]:
            return table[int(tid)].clone()
    return table.mean(0).clone()


class BeaconModel(nn.Module):
    """A frozen stock causal LM with beacon parameters that compress its context chunk by chunk.

    Build with :func:`wrap_with_beacon`. Beacon tensors: ``beacon_embedding`` and the ``beacon``
    copies inside each wrapped projection; all base parameters have ``requires_grad=False``.

    Args:
        lm: the stock ``*ForCausalLM`` (modified in place: projections wrapped).
        config: the beacon hyperparameters.

    References:
        Zhang et al., ICLR 2025, Sec. 3.
    """

    def __init__(self, lm: nn.Module, config: BeaconConfig) -> None:
        super().__init__()
        attns = find_attention_layers(lm)
        self.lm = lm
        self.beacon_config = config
        for p in lm.parameters():
            p.requires_grad_(False)
        self.context = BeaconContext()
        install_beacon_projections(attns, config.params, self.context)
        self.beacon_embedding = nn.Parameter(_init_embedding(lm, config.init_from))
        self._rotary, self._apply_rope = rope_functions(lm)
        self.memory = BeaconMemory(
            BeaconCache(len(attns), self._rotary, self._apply_rope, sink_size=config.sink_size)
        )
        self._generator = torch.Generator().manual_seed(config.seed)
        self._calls = 0

    @property
    def config(self) -> Any:
        """The underlying model's HF config (for code that reads ``model.config``)."""
        return self.lm.config

    def beacon_parameters(self) -> dict[str, nn.Parameter]:
        """The trainable beacon tensors by name (what the optimiser and the adapter file see)."""
        return {n: p for n, p in self.named_parameters() if p.requires_grad}

    def _alphas(self, n_chunks: int, length: int, beacon_ratio: int | None) -> list[int]:
        alphas = ratio_schedule(
            n_chunks,
            self.beacon_config,
            self._generator,
            call_index=self._calls,
            total_len=length,
            max_positions=getattr(self.lm.config, "max_position_embeddings", None),
            override=beacon_ratio,
        )
        self._calls += 1
        return alphas

    def _check_mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> None:
        if attention_mask is not None and not bool(attention_mask.bool().all()):
            raise ValueError(
                "padded batches are not supported once the input exceeds one window; "
                "pass equal-length rows (attention_mask all ones) or one sequence at a time"
            )

    def _stream(self, input_ids: torch.Tensor, alphas: list[int]) -> torch.Tensor:
        cfg = self.beacon_config
        return run_chunks(
            self.lm,
            self.memory.cache,
            input_ids,
            alphas,
            window=cfg.window,
            attn=cfg.attn,
            pos=cfg.pos,
            context=self.context,
            beacon_embedding=self.beacon_embedding,
            stats=self.memory.stats,
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        beacon_ratio: int | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        """Compression-based auto-regression over the whole input (training and scoring).

        Every full chunk but the last gets beacons (α from the schedule, or ``beacon_ratio``);
        the memory is reset first and carries gradients across chunks.

        Args:
            input_ids: (B, L) token ids.
            attention_mask: (B, L); padding is accepted only when L ≤ window.
            labels: (B, L) targets aligned with inputs (−100 ignored); shifted once, globally.
            beacon_ratio: fixed α for every chunk (None: use ``ratio_mix``).
            **kwargs: ignored (accepts extra ``Trainer`` arguments).

        Returns:
            ``CausalLMOutputWithPast`` with ``loss`` (token-weighted mean) and raw-token ``logits``.

        Shape:
            logits: (B, L, V).
        """
        cfg = self.beacon_config
        length = input_ids.shape[1]
        self.memory.reset()
        if length <= cfg.window:  # fits one window: the stock model, untouched
            logits = self.lm(input_ids=input_ids, attention_mask=attention_mask).logits
        else:
            self._check_mask(input_ids, attention_mask)
            n_full = length // cfg.window
            n_beacon = n_full - 1 if length % cfg.window == 0 else n_full  # the last chunk: none
            logits = self._stream(input_ids, self._alphas(n_beacon, length, beacon_ratio))
        loss = None
        if labels is not None:
            skip = 0 if (cfg.pos == "interleave" and cfg.attn == "full-coverage") else cfg.window
            loss = chunk_lm_loss(logits, labels.to(logits.device), skip_first=skip)
        return CausalLMOutputWithPast(loss=loss, logits=logits)

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, beacon_ratio: int | None = None) -> torch.Tensor:
        """Reset the memory and read a context the inference way: every full window is compressed.

        Args:
            input_ids: (B, L) token ids.
            beacon_ratio: fixed α (None: use ``ratio_mix``).

        Returns:
            (B, L, V) raw-token logits; the memory keeps sink + beacons + the raw remainder.
        """
        self.memory.reset()
        n_full = input_ids.shape[1] // self.beacon_config.window
        return self._stream(input_ids, self._alphas(n_full, input_ids.shape[1], beacon_ratio))

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        *,
        max_new_tokens: int = 16,
        beacon_ratio: int | None = None,
        reset_memory: bool = True,
        eos_token_id: int | None = None,
        beacons: bool = True,
    ) -> torch.Tensor:
        """Greedy decoding over the beacon memory.

        The prompt is read with :meth:`prefill`; decoded tokens join a raw tail, and when the
        tail fills a window it is re-run with beacons over the memory and only the beacons stay.

        Args:
            input_ids: (B, L) prompt.
            max_new_tokens: tokens to generate.
            beacon_ratio: fixed α (None: use ``ratio_mix``).
            reset_memory: start from an empty memory (default; memory left over from an earlier
                call would leak into this one).
            eos_token_id: stop once every row produced it.
            beacons: False decodes with the stock model (no compression).

        Returns:
            (B, L + new) token ids.

        Raises:
            ValueError: the prompt is longer than ``config.max_length``.
        """
        cfg = self.beacon_config
        if input_ids.shape[1] > cfg.max_length:
            raise ValueError(f"input of {input_ids.shape[1]} tokens exceeds max_length={cfg.max_length}")
        if not beacons:
            return self.lm.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=eos_token_id,
            )
        if not reset_memory and self.memory.num_entries():
            raise ValueError("reset_memory=False continues only an empty memory in this implementation")
        w = cfg.window
        logits = self.prefill(input_ids, beacon_ratio)
        cache = self.memory.cache
        n_full = input_ids.shape[1] // w
        tail = input_ids[:, n_full * w :]
        fixed = cache.num_entries() - tail.shape[1]
        out = input_ids
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for _ in range(max_new_tokens):
            nxt = logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)
            out = torch.cat([out, nxt], dim=1)
            if eos_token_id is not None:
                done |= nxt[:, 0] == eos_token_id
                if bool(done.all()):
                    break
            logits = self._stream_raw(nxt, out.shape[1] - 1)
            tail = torch.cat([tail, nxt], dim=1)
            if tail.shape[1] == w:  # window full: re-run it with beacons, keep only their K/V
                cache.truncate(fixed)
                alpha = self._alphas(1, out.shape[1], beacon_ratio)[0]
                run_chunks(
                    self.lm, cache, tail, [alpha], window=w, attn=cfg.attn, pos=cfg.pos,
                    context=self.context, beacon_embedding=self.beacon_embedding,
                    stats=self.memory.stats, raw_offset=out.shape[1] - w,
                )  # fmt: skip
                fixed = cache.num_entries()
                tail = tail[:, :0]
        return out

    def _stream_raw(self, ids: torch.Tensor, offset: int) -> torch.Tensor:
        return run_chunks(
            self.lm, self.memory.cache, ids, [], window=self.beacon_config.window,
            context=self.context, stats=self.memory.stats, raw_offset=offset,
        )  # fmt: skip

    def save_beacon_adapter(self, directory: str | os.PathLike[str]) -> None:
        """Write the beacon tensors (safetensors) and the beacon config (JSON) to ``directory``."""
        require("safetensors", "activation_beacon")
        from safetensors.torch import save_file

        os.makedirs(directory, exist_ok=True)
        tensors = {n: p.detach().cpu().contiguous() for n, p in self.beacon_parameters().items()}
        save_file(tensors, os.path.join(directory, _ADAPTER_WEIGHTS))
        with open(os.path.join(directory, _ADAPTER_CONFIG), "w") as fh:
            json.dump(dataclasses.asdict(self.beacon_config), fh, indent=1)

    def load_beacon_adapter(self, directory: str | os.PathLike[str]) -> BeaconModel:
        """Load beacon tensors saved by :meth:`save_beacon_adapter` (shapes and names must match).

        Returns:
            ``self``.
        """
        require("safetensors", "activation_beacon")
        from safetensors.torch import load_file

        path = os.path.join(directory, _ADAPTER_WEIGHTS)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no beacon adapter at {str(path)!r}")
        tensors = load_file(path)
        own = self.beacon_parameters()
        if set(tensors) != set(own):
            raise ValueError(
                f"adapter tensors do not match this model: {sorted(set(tensors) ^ set(own))[:4]}"
            )
        with torch.no_grad():
            for name, t in tensors.items():
                own[name].copy_(t.to(own[name].device, own[name].dtype))
        return self


def load_beacon_config(directory: str | os.PathLike[str]) -> BeaconConfig:
    """Read the beacon config saved next to an adapter.

    Args:
        directory: folder written by :meth:`BeaconModel.save_beacon_adapter`.

    Returns:
        The :class:`BeaconConfig`.
    """
    with open(os.path.join(directory, _ADAPTER_CONFIG)) as fh:
        raw = json.load(fh)
    for key in ("ratios", "params"):
        raw[key] = tuple(raw[key])
    if raw.get("span_ratios") is not None:
        raw["span_ratios"] = tuple(tuple(s) for s in raw["span_ratios"])
    return BeaconConfig(**raw)


def wrap_with_beacon(model: nn.Module, config: BeaconConfig) -> BeaconModel:
    """Attach Activation Beacon to a stock HF decoder (Llama, Mistral, Qwen2, ...).

    The base is frozen; q/k/v/o projections (per ``config.params``) get trainable beacon copies
    initialised to the base weights; the ⟨b⟩ embedding starts from the eos (or bos, or mean)
    token embedding. The vocabulary is not resized.

    Args:
        model: a ``*ForCausalLM`` (modified in place).
        config: the beacon hyperparameters.

    Returns:
        The :class:`BeaconModel`.

    Raises:
        TypeError: the architecture is not supported (its class is named).

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("llama", vocab_size=32, n_layer=1, d_model=16)
        >>> bm = wrap_with_beacon(lm, BeaconConfig(window=8, ratios=(2, 4)))
        >>> bm(torch.randint(32, (1, 20))).logits.shape
        torch.Size([1, 20, 32])
    """
    return BeaconModel(model, config)


def load_beacon_model(
    path: str | os.PathLike[str],
    config: BeaconConfig | None = None,
    *,
    adapter: str | os.PathLike[str] | None = None,
    dtype: torch.dtype = torch.float32,
    attn_implementation: str = "sdpa",
) -> BeaconModel:
    """Paper-scale entry point: a local HF checkpoint (never the hub) wrapped with beacons.

    Args:
        path: local folder of a Llama / Mistral / Qwen2 checkpoint saved by ``save_pretrained``.
        config: beacon hyperparameters (default: the one stored with ``adapter``, else the paper's).
        adapter: optional folder written by :meth:`BeaconModel.save_beacon_adapter`.
        dtype: weight dtype (``torch.bfloat16`` on GPUs).
        attn_implementation: "eager", "sdpa" or "flash_attention_2" (full-coverage only).

    Returns:
        The :class:`BeaconModel` (on the CPU; move it with ``.to(device)``).

    Raises:
        FileNotFoundError: ``path`` (or ``adapter``) does not exist.
        ValueError: FlashAttention-2 with a mode that needs a custom mask.
    """
    from transformers import AutoModelForCausalLM

    if not os.path.isfile(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"no model folder with config.json at {str(path)!r}")
    if config is None:
        config = load_beacon_config(adapter) if adapter is not None else BeaconConfig()
    if attn_implementation == "flash_attention_2" and config.attn != "full-coverage":
        raise ValueError(f"flash_attention_2 supports only attn='full-coverage', got {config.attn!r}")
    lm = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=dtype, attn_implementation=attn_implementation
    ).eval()
    model = wrap_with_beacon(lm, config)
    if adapter is not None:
        model.load_beacon_adapter(adapter)
    return model


class _ChunkedBaseline(nn.Module):
    """Chunked reading of a stock model over a fixed-policy memory."""

    def __init__(self, model: nn.Module, chunk: int) -> None:
        super().__init__()
        self.lm = model.lm if isinstance(model, BeaconModel) else model
        find_attention_layers(self.lm)
        self.chunk = chunk
        self.stats = MemoryStats()
        self.cache: BeaconCache

    @torch.no_grad()
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Read ``input_ids`` chunk by chunk; returns (B, L, V) logits."""
        self.cache.reset()
        self.stats = MemoryStats()
        return run_chunks(self.lm, self.cache, input_ids, [], window=self.chunk, stats=self.stats)

    @property
    def peak_entries(self) -> int:
        """Largest key/value length seen in the last call."""
        return self.cache.peak_entries


class StreamingLLM(_ChunkedBaseline):
    """StreamingLLM baseline: attention sink plus a recent window, read chunk by chunk.

    Peak key/values per layer = ``sink + window + chunk``.

    Args:
        model: a stock causal LM (or a :class:`BeaconModel`, whose base is used).
        sink: sink tokens kept.
        window: recent tokens kept.
        chunk: tokens per forward (default ``window``).

    References:
        Xiao et al., "Efficient Streaming Language Models with Attention Sinks", ICLR 2024.

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("llama", vocab_size=32, n_layer=1, d_model=16)
        >>> s = StreamingLLM(lm, sink=1, window=8, chunk=4)
        >>> s(torch.randint(32, (1, 20))).shape, s.peak_entries
        (torch.Size([1, 20, 32]), 13)
    """

    def __init__(self, model: nn.Module, sink: int, window: int, *, chunk: int | None = None) -> None:
        super().__init__(model, chunk or window)
        rotary, apply = rope_functions(self.lm)
        n = len(find_attention_layers(self.lm))
        self.cache = SinkWindowCache(n, rotary, apply, sink_size=sink, window=window)


class MeanPoolKV(_ChunkedBaseline):
    """Training-free baseline: each unit of α raw key/values replaced by their mean (pre-RoPE).

    Args:
        model: a stock causal LM (or a :class:`BeaconModel`, whose base is used).
        window: chunk size w.
        ratio: α.
        sink: sink tokens kept.

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> lm = build_tiny_lm("llama", vocab_size=32, n_layer=1, d_model=16)
        >>> mp = MeanPoolKV(lm, window=8, ratio=4)
        >>> _ = mp(torch.randint(32, (1, 16)))
        >>> mp.cache.num_entries()  # sink + 2 chunks x 2 pooled entries
        5
    """

    def __init__(self, model: nn.Module, window: int, ratio: int, *, sink: int = 1) -> None:
        super().__init__(model, window)
        rotary, apply = rope_functions(self.lm)
        n = len(find_attention_layers(self.lm))
        self.cache = MeanPoolCache(n, rotary, apply, sink_size=sink, ratio=ratio, window=window)
