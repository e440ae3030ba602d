"""``BeaconModel``: Activation Beacon around a stock Hugging Face decoder, plus budget-matched baselines.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3 (the plug-in:
⟨b⟩ tokens, beacon projections, chunked compression, compressed positions), Section 3.3
(compression-based auto-regression with random α) and the generation path (each call starts
from an empty memory; the prompt is compressed window by window; decoded tokens stay raw until
they fill a window, which is then re-read with beacons and only the beacons' key/values kept).

``BeaconModel`` is a transformers ``PreTrainedModel`` with ``GenerationMixin``, so ``generate``
(greedy or sampled, ``max_length``/``max_new_tokens``, left-padded batches), the
``text-generation`` pipeline and ``save_pretrained``/``from_pretrained`` work as for a stock
causal LM.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import Any, ClassVar

import torch
from torch import nn
from transformers import AutoConfig, GenerationConfig, GenerationMixin, PreTrainedConfig, PreTrainedModel
from transformers.configuration_utils import SubConfigSpec
from transformers.modeling_outputs import CausalLMOutputWithPast

from iclr25._core.registry import require
from iclr25.methods.activation_beacon.cache import BeaconCache, MeanPoolCache, SinkWindowCache
from iclr25.methods.activation_beacon.config import BeaconConfig
from iclr25.methods.activation_beacon.generation import BeaconGenerationCache, RowGroup, left_padding
from iclr25.methods.activation_beacon.memory import (
    BeaconMemory,
    MemoryStats,
    chunk_lm_loss,
    ratio_schedule,
    run_chunks,
)
from iclr25.methods.activation_beacon.wrap import (
    BeaconContext,
    BeaconLinear,
    find_attention_layers,
    install_beacon_projections,
    rope_functions,
)

__all__ = [
    "BeaconMemory",
    "BeaconModel",
    "BeaconModelConfig",
    "MeanPoolKV",
    "StreamingLLM",
    "load_beacon_config",
    "load_beacon_model",
    "register_auto_classes",
    "wrap_with_beacon",
]

_ADAPTER_WEIGHTS = "beacon_adapter.safetensors"
_ADAPTER_CONFIG = "beacon_config.json"


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


def _beacon_config_from_dict(raw: dict[str, Any]) -> BeaconConfig:
    """Rebuild a :class:`BeaconConfig` from its JSON form (lists back to tuples)."""
    raw = dict(raw)
    unknown = set(raw) - {f.name for f in dataclasses.fields(BeaconConfig)}
    if unknown:
        raise ValueError(f"unknown beacon settings: {sorted(unknown)}")
    for key in ("ratios", "params"):
        if key in raw:
            raw[key] = tuple(raw[key])
    if raw.get("span_ratios") is not None:
        raw["span_ratios"] = tuple(tuple(s) for s in raw["span_ratios"])
    return BeaconConfig(**raw)


class BeaconModelConfig(PreTrainedConfig):
    """Hugging Face config of a :class:`BeaconModel`: the base decoder's config plus the beacon settings.

    ``save_pretrained`` writes it as ``config.json`` (``model_type`` "activation_beacon") with the
    base config nested under ``text_config`` and the :class:`BeaconConfig` fields under ``beacon``.

    Args:
        text_config: config of the base ``*ForCausalLM`` (a config object, or its dict with a
            ``model_type``).
        beacon: the :class:`BeaconConfig` fields (None: its defaults); checked on creation.

    Example:
        >>> from transformers import LlamaConfig
        >>> cfg = BeaconModelConfig(text_config=LlamaConfig(num_hidden_layers=1), beacon={"window": 64})
        >>> cfg.beacon_config.window, cfg.get_text_config().num_hidden_layers
        (64, 1)
    """

    model_type = "activation_beacon"
    sub_configs_defaults: ClassVar[dict[str, SubConfigSpec]] = {
        "text_config": SubConfigSpec(config_class=AutoConfig, model_type="llama", optional=True)
    }

    text_config: dict | PreTrainedConfig | None = None
    beacon: dict | None = None

    def __post_init__(self, **kwargs: Any) -> None:
        super().__post_init__(**kwargs)
        self.beacon = dataclasses.asdict(_beacon_config_from_dict(self.beacon or {}))

    @property
    def beacon_config(self) -> BeaconConfig:
        """The beacon settings as a frozen :class:`BeaconConfig`."""
        return _beacon_config_from_dict(self.beacon or {})


class BeaconModel(PreTrainedModel, GenerationMixin):
    """A frozen stock causal LM with beacon parameters that compress its context chunk by chunk.

    Build it with :func:`wrap_with_beacon` around a loaded model, or with
    ``BeaconModel.from_pretrained(folder)`` on a folder written by ``save_pretrained`` (which holds
    the base weights, the beacon tensors, the config with both settings and the generation config).
    Beacon tensors: ``beacon_embedding`` and the ``beacon`` copies inside each wrapped projection;
    all base parameters have ``requires_grad=False``.

    Calling the model without ``use_cache`` runs compression-based auto-regression over the whole
    input (training and scoring). With ``use_cache=True`` (what ``generate`` does) the first call
    compresses every full window of the prompt and returns a :class:`BeaconGenerationCache`;
    later calls with that cache read new tokens raw and re-read a window with beacons once it
    fills.

    Args:
        config: the :class:`BeaconModelConfig`.
        lm: the stock ``*ForCausalLM`` to wrap (modified in place: projections wrapped). None
            builds one from ``config.text_config`` (what ``from_pretrained`` does before loading).

    Attributes:
        lm: the base model.
        beacon_config: the :class:`BeaconConfig`.
        memory: the :class:`BeaconMemory` of the last pass (for a generation over rows of different
            lengths, the memory of the longest rows).

    References:
        Zhang et al., ICLR 2025, Sec. 3.
    """

    config_class = BeaconModelConfig
    main_input_name = "input_ids"
    _supports_sdpa = True
    _supports_flash_attn = True

    def __init__(self, config: BeaconModelConfig, lm: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if lm is None:
            if config.text_config is None:
                raise ValueError("BeaconModelConfig.text_config is needed to build the base model")
            from transformers import AutoModelForCausalLM

            lm = AutoModelForCausalLM.from_config(config.text_config)
        elif getattr(lm, "generation_config", None) is not None:
            self.generation_config = copy.deepcopy(lm.generation_config)
        config.text_config = lm.config  # one config object for the base, shared with the wrapper
        beacon = config.beacon_config
        attns = find_attention_layers(lm)
        self.lm = lm
        self.beacon_config = beacon
        self.context = BeaconContext()
        install_beacon_projections(attns, beacon.params, self.context)
        self.beacon_embedding = nn.Parameter(_init_embedding(lm, beacon.init_from))
        self._freeze_base()
        self._rotary, self._apply_rope = rope_functions(lm)
        self._num_layers = len(attns)
        self._own_memory = BeaconMemory(self._new_cache())
        self.memory = self._own_memory
        self._generator = torch.Generator().manual_seed(beacon.seed)
        self._calls = 0
        self.post_init()

    def _freeze_base(self) -> None:
        """Only beacon tensors train: the ⟨b⟩ embedding and the beacon projection copies."""
        for p in self.lm.parameters():
            p.requires_grad_(False)
        for module in self.lm.modules():
            if isinstance(module, BeaconLinear):
                for p in module.beacon.parameters():
                    p.requires_grad_(True)
        self.beacon_embedding.requires_grad_(True)

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> BeaconModel:
        """Load a folder written by ``save_pretrained`` (base weights, beacon tensors, both configs).

        It is ``PreTrainedModel.from_pretrained`` with ``local_files_only=True`` by default; the
        base is frozen again afterwards (loading makes every tensor trainable). Pass
        ``attn_implementation`` ("eager", "sdpa", ...) as for any transformers model; it is not
        stored in the folder.

        Returns:
            The :class:`BeaconModel`, in eval mode.
        """
        kwargs.setdefault("local_files_only", True)
        model = super().from_pretrained(*args, **kwargs)
        model._freeze_base()
        return model

    # --- transformers plumbing ----------------------------------------------------------------
    def init_weights(self) -> None:
        """Tie weights only: the base arrives initialised (or is loaded) and beacon tensors copy it."""
        self.tie_weights(recompute_mapping=False)

    def _init_weights(self, module: nn.Module) -> None:
        """Nothing to draw: beacon tensors are copies of base tensors (set in ``__init__`` or loaded)."""

    def get_input_embeddings(self) -> nn.Module:
        """The base model's token embedding."""
        return self.lm.get_input_embeddings()

    def get_output_embeddings(self) -> nn.Module | None:
        """The base model's output head."""
        return self.lm.get_output_embeddings()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # generate() must not build a DynamicCache: forward(use_cache=True) creates the beacon memory
        return False

    # --- memory handling ----------------------------------------------------------------------
    def _new_cache(self) -> BeaconCache:
        sink = self.beacon_config.sink_size
        return BeaconCache(self._num_layers, self._rotary, self._apply_rope, sink_size=sink)

    def _scoring_memory(self) -> BeaconMemory:
        """The model's own memory, emptied (a generation may have pointed ``memory`` elsewhere)."""
        self.memory = self._own_memory
        self.memory.reset()
        return self.memory

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
                "padded batches are not supported by the scoring forward once the input exceeds one "
                "window (chunks would start at different tokens in each row); pass equal-length rows "
                "or one sequence at a time. generate() accepts left-padded batches."
            )

    def _stream(
        self, input_ids: torch.Tensor, alphas: list[int], memory: BeaconMemory | None = None
    ) -> torch.Tensor:
        cfg = self.beacon_config
        memory = self.memory if memory is None else memory
        return run_chunks(
            self.lm,
            memory.cache,
            input_ids,
            alphas,
            window=cfg.window,
            attn=cfg.attn,
            pos=cfg.pos,
            context=self.context,
            beacon_embedding=self.beacon_embedding,
            stats=memory.stats,
        )

    def _stream_raw(self, ids: torch.Tensor, offset: int, memory: BeaconMemory) -> torch.Tensor:
        return run_chunks(
            self.lm, memory.cache, ids, [], window=self.beacon_config.window,
            context=self.context, stats=memory.stats, raw_offset=offset,
        )  # fmt: skip

    # --- forward ------------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        beacon_ratio: int | None = None,
        cache: BeaconGenerationCache | None = None,
        use_cache: bool | None = None,
        **kwargs: Any,
    ) -> CausalLMOutputWithPast:
        """Score a whole input with compression-based auto-regression, or read it incrementally.

        Without ``cache`` and ``use_cache``: every full chunk but the last gets beacons (α from the
        schedule, or ``beacon_ratio``); the memory is reset first and carries gradients across
        chunks; an input that fits one window runs through the stock model untouched.

        With ``use_cache=True`` or a ``cache``: the first call reads a (left-padded) prompt,
        compressing every full window of each row from its first real token; later calls pass
        only the new tokens, which join a raw tail that is re-read with beacons when it fills a
        window. This is the path ``generate`` takes.

        Args:
            input_ids: (B, L) token ids (``inputs_embeds`` are not supported).
            attention_mask: (B, L) 0/1 mask, or (B, past + L) with a cache. Scoring accepts
                padding only when L ≤ window; the incremental path accepts left padding.
            labels: (B, L) targets aligned with inputs (−100 ignored); shifted once, globally.
                Scoring only.
            beacon_ratio: fixed α for every chunk (None: use ``ratio_mix``).
            cache: the :class:`BeaconGenerationCache` returned by the previous call.
            use_cache: start an incremental read (a new cache) when ``cache`` is None.
            **kwargs: ignored (extra ``Trainer`` and ``generate`` arguments).

        Returns:
            ``CausalLMOutputWithPast`` with ``loss`` (token-weighted mean, scoring with labels),
            raw-token ``logits`` (zeros at padding) and, incrementally, ``cache``.

        Raises:
            ValueError: no ``input_ids``; labels with a cache; padding the path cannot honour.
            TypeError: ``cache`` is not a :class:`BeaconGenerationCache`.

        Shape:
            logits: (B, L, V).
        """
        if input_ids is None:
            raise ValueError("BeaconModel needs input_ids (inputs_embeds are not supported)")
        if cache is not None or use_cache:
            if labels is not None:
                raise ValueError("labels are used by the scoring forward only (call without a cache)")
            return self._incremental(input_ids, attention_mask, cache, beacon_ratio)
        cfg = self.beacon_config
        length = input_ids.shape[1]
        self._scoring_memory()
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

    # --- incremental reading (generation) -----------------------------------------------------
    def _incremental(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: BeaconGenerationCache | None,
        beacon_ratio: int | None,
    ) -> CausalLMOutputWithPast:
        if cache is None:
            cache = BeaconGenerationCache()
        elif not isinstance(cache, BeaconGenerationCache):
            raise TypeError(
                f"BeaconModel reads its memory from a BeaconGenerationCache, got {type(cache).__name__}"
            )
        if cache.groups:
            logits = self._read_new(cache, input_ids, attention_mask, beacon_ratio)
        else:
            logits = self._read_prompt(cache, input_ids, attention_mask, beacon_ratio)
        return CausalLMOutputWithPast(logits=logits, cache=cache)

    def _read_prompt(
        self,
        cache: BeaconGenerationCache,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        beacon_ratio: int | None,
    ) -> torch.Tensor:
        """First incremental call: compress every full window of each row (padding never read)."""
        cfg, w = self.beacon_config, self.beacon_config.window
        b, length = input_ids.shape
        pads = left_padding(attention_mask, input_ids)
        logits: torch.Tensor | None = None
        # rows with the same padding share one chunk grid; longest rows first
        for pad in sorted(set(pads.tolist())):
            rows = (pads == pad).nonzero().flatten()
            ids = input_ids[rows, pad:]  # (b_g, L_g): the real tokens
            if ids.shape[1] > cfg.max_length:
                raise ValueError(f"input of {ids.shape[1]} tokens exceeds max_length={cfg.max_length}")
            memory = BeaconMemory(self._new_cache())
            n_full = ids.shape[1] // w
            out = self._stream(ids, self._alphas(n_full, ids.shape[1], beacon_ratio), memory)
            tail = ids[:, n_full * w :]  # (b_g, L_g mod w): raw key/values still in memory
            cache.groups.append(
                RowGroup(rows=rows, pad=pad, memory=memory, tail=tail,
                         fixed=memory.num_entries() - tail.shape[1], seen=ids.shape[1])
            )  # fmt: skip
            if rows.numel() == b:
                logits = out
            else:
                if logits is None:
                    logits = out.new_zeros(b, length, out.shape[-1])
                logits[rows, pad:] = out
        cache.length, cache.batch = length, b
        self.memory = cache.groups[0].memory
        assert logits is not None
        return logits

    def _read_new(
        self,
        cache: BeaconGenerationCache,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        beacon_ratio: int | None,
    ) -> torch.Tensor:
        """Later incremental calls: the new tokens of every row, group by group."""
        b, t = input_ids.shape
        if b != cache.batch:
            raise ValueError(f"the cache holds {cache.batch} rows, got input_ids with {b}")
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (b, cache.length + t):
                raise ValueError(
                    f"attention_mask must cover the {cache.length} columns read and the {t} new ones, "
                    f"got shape {tuple(attention_mask.shape)}"
                )
            past = left_padding(attention_mask[:, : cache.length], input_ids.new_zeros(b, cache.length))
            known = torch.zeros_like(past)
            for g in cache.groups:
                known[g.rows] = g.pad
            if not torch.equal(past, known) or not bool(attention_mask[:, cache.length :].bool().all()):
                raise ValueError("padding is only supported on the left of the first input (the prompt)")
        logits: torch.Tensor | None = None
        for g in cache.groups:
            out = self._read_group(g, input_ids[g.rows], beacon_ratio)
            if g.rows.numel() == b:
                logits = out
            else:
                if logits is None:
                    logits = out.new_zeros(b, t, out.shape[-1])
                logits[g.rows] = out
        cache.length += t
        assert logits is not None
        return logits

    def _read_group(self, g: RowGroup, ids: torch.Tensor, beacon_ratio: int | None) -> torch.Tensor:
        """Read new tokens of one group raw; a tail that reaches w is re-read with beacons."""
        cfg, w = self.beacon_config, self.beacon_config.window
        outs, start = [], 0
        while start < ids.shape[1]:
            piece = ids[:, start : start + w - g.tail.shape[1]]  # never past the window boundary
            outs.append(self._stream_raw(piece, g.seen, g.memory))
            g.tail = torch.cat([g.tail, piece], dim=1)
            g.seen += piece.shape[1]
            start += piece.shape[1]
            if g.tail.shape[1] == w:  # window full: re-run it with beacons, keep only their K/V
                g.memory.cache.truncate(g.fixed)
                alpha = self._alphas(1, g.seen, beacon_ratio)[0]
                run_chunks(
                    self.lm, g.memory.cache, g.tail, [alpha], window=w, attn=cfg.attn, pos=cfg.pos,
                    context=self.context, beacon_embedding=self.beacon_embedding,
                    stats=g.memory.stats, raw_offset=g.seen - w,
                )  # fmt: skip
                g.fixed = g.memory.num_entries()
                g.tail = g.tail[:, :0]
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, beacon_ratio: int | None = None) -> torch.Tensor:
        """Reset the memory and read a context the inference way: every full window is compressed.

        Args:
            input_ids: (B, L) token ids.
            beacon_ratio: fixed α (None: use ``ratio_mix``).

        Returns:
            (B, L, V) raw-token logits; the memory keeps sink + beacons + the raw remainder.
        """
        self._scoring_memory()
        n_full = input_ids.shape[1] // self.beacon_config.window
        return self._stream(input_ids, self._alphas(n_full, input_ids.shape[1], beacon_ratio))

    def generate(
        self,
        inputs: torch.Tensor | None = None,
        generation_config: GenerationConfig | None = None,
        *,
        beacon_ratio: int | None = None,
        reset_memory: bool = True,
        beacons: bool = True,
        **kwargs: Any,
    ) -> Any:
        """``GenerationMixin.generate`` over the beacon memory.

        Every call starts from an empty memory. The prompt is compressed window by window; decoded
        tokens join a raw tail, and when the tail fills a window it is re-run with beacons over
        the memory and only the beacons stay. All transformers options for greedy decoding and
        sampling apply (``max_new_tokens``, ``max_length``, ``do_sample``, ``top_k``, ``top_p``,
        ``temperature``, ``eos_token_id``, ``num_return_sequences``, ``return_dict_in_generate``,
        ...). A left-padded batch (``attention_mask``) is read in groups of rows of equal length,
        so each row is compressed exactly as it would be alone.

        Args:
            inputs: (B, L) prompt ids (or pass ``input_ids=``).
            generation_config: a ``GenerationConfig`` (default: ``model.generation_config``).
            beacon_ratio: fixed α (None: use ``ratio_mix``).
            reset_memory: must stay True unless ``model.memory`` is empty (each call starts from
                an empty memory; to continue a generation, pass the ``cache`` returned with
                ``return_dict_in_generate=True``).
            beacons: False decodes with the stock model (no compression).
            **kwargs: ``generate`` arguments (``attention_mask``, ``max_new_tokens``, ...).

        Returns:
            (B, L + new) token ids, or a ``GenerateDecoderOnlyOutput``.

        Raises:
            ValueError: beam search or assisted decoding (the memory cannot be reordered or
                rolled back), a prompt longer than ``beacon_config.max_length``, or padding
                other than on the left.
        """
        if not beacons:
            return self.lm.generate(inputs, generation_config, **kwargs)
        if not reset_memory and self.memory.num_entries():
            raise ValueError(
                "reset_memory=False continues only an empty memory; to continue a generation pass "
                "the cache returned by generate(..., return_dict_in_generate=True) as cache="
            )
        base = generation_config if generation_config is not None else self.generation_config
        if (kwargs.get("num_beams") or getattr(base, "num_beams", None) or 1) > 1:
            raise ValueError("beam search is not supported here; use greedy decoding or sampling")
        if kwargs.get("assistant_model") is not None or kwargs.get("prompt_lookup_num_tokens"):
            raise ValueError("assisted decoding is not supported: the beacon memory cannot be rolled back")
        return super().generate(inputs, generation_config, beacon_ratio=beacon_ratio, **kwargs)

    # --- adapter files ------------------------------------------------------------------------
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
        return _beacon_config_from_dict(json.load(fh))


def register_auto_classes() -> None:
    """Register :class:`BeaconModelConfig` and :class:`BeaconModel` with the transformers Auto classes.

    Opt-in (importing the package registers nothing). Afterwards
    ``AutoModelForCausalLM.from_pretrained(folder)`` loads a saved ``BeaconModel`` and the
    ``text-generation`` pipeline lists it among its models (without it the pipeline still runs,
    but logs that the class is not in its list). Calling it again is harmless.

    Example:
        >>> from transformers import AutoConfig
        >>> register_auto_classes()
        >>> AutoConfig.for_model("activation_beacon").model_type
        'activation_beacon'
    """
    from transformers import AutoModelForCausalLM

    AutoConfig.register(BeaconModelConfig.model_type, BeaconModelConfig, exist_ok=True)
    AutoModelForCausalLM.register(BeaconModelConfig, BeaconModel, exist_ok=True)


def wrap_with_beacon(model: nn.Module, config: BeaconConfig) -> BeaconModel:
    """Attach Activation Beacon to a stock HF decoder (Llama, Mistral, Qwen2, ...).

    The base is frozen; q/k/v/o projections (per ``config.params``) get trainable beacon copies
    initialised to the base weights; the ⟨b⟩ embedding starts from the eos (or bos, or mean)
    token embedding. The vocabulary is not resized. The result's config is a
    :class:`BeaconModelConfig` holding ``model.config`` (the same object) and ``config``.

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
    find_attention_layers(model)  # TypeError before anything is built for an unsupported model
    hf_config = BeaconModelConfig(
        text_config=model.config,
        beacon=dataclasses.asdict(config),
        # the same value again: a composite config sets its attention choice on every sub-config
        attn_implementation=model.config._attn_implementation,
    )
    return BeaconModel(hf_config, lm=model)


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
