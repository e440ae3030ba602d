"""Checkpoints of BiGR in the official layout: a ``torch.save`` dict ``{"model": ..., "ema": ...}``,
and the state of an unfinished training run (for recipes that resume).

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672; released generator files hold the trained
    weights under ``"model"`` and their EMA under ``"ema"`` (inference uses ``"ema"``). Paths are
    local; nothing is downloaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

__all__ = [
    "from_official_names",
    "load_official_state_dict",
    "load_state",
    "save_checkpoint",
    "to_official_names",
]

# Parameter names of the released generators (the official ``Transformer`` of ``gpt.py``) and ours,
# as pairs of templates whose {slots} match the same text on both sides; read left to right they
# load a released file, right to left they write one. Facts of the released layout: the class table is
# ``cls_embedding.embedding_table`` (last row = null class), the shared adaLN-single is
# ``adaLN`` = Sequential(SiLU, Linear), the per-block offset is ``ada_gss``, fused q/k/v is
# ``attention.wqkv``, the transcoder is ``denoise_mlp`` (DiT-style ``t_embedder``, ``x_embedder``,
# ``c_embedder``, ``blocks``, ``final_layer``) and the learned position embedding added to every
# token's condition is ``diffusion_pos_embed_learned``.
_PAIRS: tuple[tuple[str, str], ...] = (
    ("cls_embedding.embedding_table.weight", "backbone.class_emb.weight"),
    ("mask_tok", "mask_emb"),
    ("tok_embeddings.{p}", "bit_proj.{p}"),
    ("adaLN.1.{p}", "backbone.ada.{p}"),
    ("layers.{i}.attention.wqkv.weight", "backbone.blocks.{i}.qkv.weight"),
    ("layers.{i}.attention.wo.weight", "backbone.blocks.{i}.proj.weight"),
    ("layers.{i}.feed_forward.{w}.weight", "backbone.blocks.{i}.{w}.weight"),
    ("layers.{i}.attention_norm.weight", "backbone.blocks.{i}.norm1.weight"),
    ("layers.{i}.ffn_norm.weight", "backbone.blocks.{i}.norm2.weight"),
    ("layers.{i}.ada_gss", "backbone.blocks.{i}.ada_offset"),
    ("norm.weight", "norm.weight"),
    ("diffusion_pos_embed_learned", "pos_emb"),
    ("denoise_mlp.t_embedder.mlp.{j}.{p}", "head.t_mlp.{j}.{p}"),
    ("denoise_mlp.x_embedder.{p}", "head.inp.{p}"),
    ("denoise_mlp.c_embedder.{p}", "head.cond.{p}"),
    ("denoise_mlp.blocks.{i}.mlp.{j}.{p}", "head.blocks.{i}.mlp.{j}.{p}"),
    ("denoise_mlp.blocks.{i}.adaLN_modulation.1.{p}", "head.blocks.{i}.ada.1.{p}"),
    ("denoise_mlp.final_layer.linear.{p}", "head.out.{p}"),
    ("denoise_mlp.final_layer.adaLN_modulation.1.{p}", "head.final_ada.1.{p}"),
)
# what each placeholder may stand for: a block index, a weight or bias, a SwiGLU matrix, the two
# Linear layers of a Sequential(Linear, SiLU, Linear)
_SLOTS = {"i": r"\d+", "p": "weight|bias", "w": "w1|w2|w3", "j": "0|2"}
# Official entries that hold no weights of their own: the diffusion wrapper registers the same
# denoiser a second time (and any fixed schedule tables, which this project computes), and
# inference code may leave key/value caches behind.
_DERIVED = (re.compile(r"diffusion_processor\..*"), re.compile(r".*\.kv_cache\..*"))
# The official mask token is stored as (1, D), ours as (D,).
_MASK = "mask_emb"


def _pattern(template: str) -> re.Pattern[str]:
    """A template such as ``layers.{i}.ada_gss`` as a regex with one named group per slot."""
    out = ""
    for piece in re.split(r"(\{\w\})", template):
        if re.fullmatch(r"\{\w\}", piece):
            slot = piece[1]
            out += f"(?P<{slot}>{_SLOTS[slot]})"
        else:
            out += re.escape(piece)
    return re.compile(out)


_FORWARD = tuple((_pattern(src), dst) for src, dst in _PAIRS)
_BACKWARD = tuple((_pattern(dst), src) for src, dst in _PAIRS)


def _rename(name: str, rules: tuple[tuple[re.Pattern[str], str], ...]) -> str | None:
    for pattern, target in rules:
        m = pattern.fullmatch(name)
        if m:
            return target.format(**m.groupdict())
    return None


def from_official_names(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename a released BiGR generator's state dict to this project's :class:`BiGR` names.

    Entries that hold no weights of their own (the diffusion wrapper's second copy of the
    denoiser and its schedule tables, key/value caches) are dropped; the mask token is reshaped
    from (1, D) to (D,).

    Raises:
        KeyError: an official name that no rule knows, listed in full.
    """
    out: dict[str, torch.Tensor] = {}
    unknown = []
    for name, tensor in state.items():
        if any(p.fullmatch(name) for p in _DERIVED):
            continue
        ours = _rename(name, _FORWARD)
        if ours is None:
            unknown.append(name)
            continue
        out[ours] = tensor.reshape(-1) if ours == _MASK else tensor
    if unknown:
        raise KeyError(f"unexpected keys in the official checkpoint (no mapping): {sorted(unknown)}")
    return out


def to_official_names(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The inverse of :func:`from_official_names`: our :class:`BiGR` names -> the released names.

    Only the transcoder head has official names (the per-bit and causal variants are this
    project's controls).

    Raises:
        KeyError: a name of ours that the released layout does not have.
    """
    out: dict[str, torch.Tensor] = {}
    unknown = []
    for name, tensor in state.items():
        official = _rename(name, _BACKWARD)
        if official is None:
            unknown.append(name)
            continue
        out[official] = tensor.reshape(1, -1) if name == _MASK else tensor
    if unknown:
        raise KeyError(f"these parameters have no official name: {sorted(unknown)}")
    return out


def load_official_state_dict(
    path_or_state: str | os.PathLike[str] | Mapping[str, Any], model: nn.Module, *, key: str | None = "ema"
) -> nn.Module:
    """Load a released BiGR generator into this project's :class:`BiGR` (strict, with clear errors).

    Args:
        path_or_state: a local ``torch.save`` file (``{"model", "ema"}`` or a bare state dict), a
            ``.safetensors`` file, or a state dict already in memory, all with the official names.
        model: the :class:`BiGR` to fill, built from the matching preset (e.g. ``BiGR(l_d24())``).
        key: entry to read when the file holds several (``"ema"`` for inference, ``"model"`` for
            the raw weights); ignored for a bare state dict.

    Returns:
        ``model``, filled.

    Raises:
        FileNotFoundError: no file at the path.
        KeyError: official keys without a mapping, or parameters of the model the checkpoint
            lacks / holds extra (named in full).
        ValueError: a tensor whose shape does not match the model's (the preset is wrong).
    """
    if isinstance(path_or_state, Mapping):
        blob: Mapping[str, Any] = path_or_state
        where = "the state dict"
    else:
        if not os.path.isfile(path_or_state):
            raise FileNotFoundError(
                f"no checkpoint at {path_or_state} (weights are read from local paths only)"
            )
        where = f"checkpoint {path_or_state}"
        if str(path_or_state).endswith(".safetensors"):
            from safetensors.torch import load_file

            blob = load_file(str(path_or_state))
        else:
            blob = torch.load(path_or_state, map_location="cpu", weights_only=True)
    if key is not None and key in blob and isinstance(blob[key], Mapping):
        blob = blob[key]
    elif any(isinstance(v, Mapping) for v in blob.values()):
        raise KeyError(f"{where} has no {key!r} entry (has {sorted(blob)})")
    state = from_official_names(blob)
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise KeyError(
            f"{where} does not fit the model: missing (ours) {missing}, unexpected (ours) {unexpected}; "
            "check the preset (depth, transcoder blocks) and that it is the bidirectional transcoder model"
        )
    bad = [f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}" for k, v in state.items()
           if v.shape != own[k].shape]  # fmt: skip
    if bad:
        raise ValueError(f"{where} has tensors of other shapes (wrong preset?): {bad}")
    model.load_state_dict(state, strict=True)
    return model


def save_checkpoint(path: str | os.PathLike[str], model: nn.Module, ema: nn.Module | None = None) -> None:
    """Write ``{"model": state_dict, "ema": state_dict}`` (the EMA defaults to the model itself)."""
    torch.save({"model": model.state_dict(), "ema": (ema or model).state_dict()}, path)


def load_state(model: nn.Module, path: str | os.PathLike[str], *, key: str | None = "ema") -> nn.Module:
    """Load weights from a local file into ``model`` (strict), with a clear key-mismatch error.

    Args:
        model: the module to fill.
        path: a local ``torch.save`` file.
        key: entry of the file with the state dict (``"ema"``/``"model"``), or None for a bare one.

    Returns:
        ``model``.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path} (weights are read from local paths only)")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if key is not None:
        if key not in blob:
            raise KeyError(f"checkpoint {path} has no {key!r} entry (has {sorted(blob)})")
        blob = blob[key]
    missing, unexpected = model.load_state_dict(blob, strict=False)
    if missing or unexpected:
        raise KeyError(
            f"checkpoint {path} does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    return model


def _train_state(
    step: int, losses: list[float], model: nn.Module, opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler | None, generator: torch.Generator | None,
) -> dict[str, Any]:  # fmt: skip
    """Everything a training loop needs to go on from ``step`` exactly as if never stopped: the
    weights, the optimiser and schedule states, the batch generator and torch's global RNG."""
    return {
        "step": step,
        "losses": list(losses),
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": None if sched is None else sched.state_dict(),
        "generator": None if generator is None else generator.get_state(),
        "torch_rng": torch.get_rng_state(),
    }


def _restore_train_state(
    state: dict[str, Any], model: nn.Module, opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler | None, generator: torch.Generator | None,
) -> tuple[int, list[float]]:  # fmt: skip
    """Load what :func:`_train_state` saved; returns the next step and the losses so far."""
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if sched is not None:
        sched.load_state_dict(state["scheduler"])
    if generator is not None:
        generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    return state["step"], list(state["losses"])
