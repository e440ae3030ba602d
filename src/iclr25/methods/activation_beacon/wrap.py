"""Beacon plug-in parameters on a stock Hugging Face decoder: projection copies and the ⟨b⟩ embedding.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3.2: beacon tokens
use their own copies of the attention projections W_Q, W_K, W_V (and W_O), initialised from the
base weights, while raw tokens keep the frozen base ones; the ⟨b⟩ embedding is one new vector.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["BeaconContext", "BeaconLinear", "find_attention_layers", "rope_functions"]

_PROJ = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}


class BeaconContext:
    """Per-forward routing state shared by every :class:`BeaconLinear` of one model.

    Attributes:
        beacon_mask: (B, T) bool marking ⟨b⟩ items of the current forward, or None (all raw).
    """

    def __init__(self) -> None:
        self.beacon_mask: torch.Tensor | None = None


class BeaconLinear(nn.Module):
    """A frozen base ``nn.Linear`` plus a trainable copy used for beacon rows.

    Args:
        base: the stock projection (kept, frozen).
        context: the shared :class:`BeaconContext` saying which rows are beacons.

    Shape:
        input (B, T, in_features) -> output (B, T, out_features).

    References:
        Zhang et al., ICLR 2025, Sec. 3.2 (beacon projections copied from the base).

    Example:
        >>> ctx = BeaconContext()
        >>> lin = BeaconLinear(nn.Linear(4, 3), ctx)
        >>> x = torch.randn(1, 2, 4)
        >>> ctx.beacon_mask = torch.tensor([[False, True]])
        >>> torch.equal(lin(x), lin.base(x))  # the copy starts equal to the base
        True
    """

    def __init__(self, base: nn.Linear, context: BeaconContext) -> None:
        super().__init__()
        self.base = base
        self.beacon = copy.deepcopy(base)
        for p in self.beacon.parameters():
            p.requires_grad_(True)
        self.context = context

    @property
    def weight(self) -> torch.Tensor:
        """The base weight (for code that inspects ``proj.weight``)."""
        return self.base.weight

    @property
    def bias(self) -> torch.Tensor | None:
        """The base bias."""
        return self.base.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        mask = self.context.beacon_mask
        if mask is None or not bool(mask.any()):
            return out
        return torch.where(mask[..., None], self.beacon(x), out)


def find_attention_layers(model: nn.Module) -> list[nn.Module]:
    """The attention modules of a stock HF decoder, checked for beacon support.

    Args:
        model: a ``*ForCausalLM`` whose ``model.layers[i].self_attn`` expose ``nn.Linear``
            ``q_proj/k_proj/v_proj/o_proj`` and whose ``model.rotary_emb`` exists.

    Returns:
        The ``self_attn`` modules in layer order.

    Raises:
        TypeError: the architecture does not have that structure (named in the message).
    """
    name = type(model).__name__
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if inner is None or layers is None or getattr(inner, "rotary_emb", None) is None:
        raise TypeError(
            f"unsupported architecture {name}: need model.layers[*].self_attn and model.rotary_emb "
            "(Llama, Mistral, Qwen2 and similar decoders)"
        )
    attns = []
    for layer in layers:
        attn = getattr(layer, "self_attn", None)
        for proj in _PROJ.values():
            lin = getattr(attn, proj, None)
            if not isinstance(lin, (nn.Linear, BeaconLinear)):
                raise TypeError(f"unsupported architecture {name}: attention has no nn.Linear {proj}")
        attns.append(attn)
    return attns


def install_beacon_projections(
    attns: list[nn.Module], params: tuple[str, ...], context: BeaconContext
) -> list[BeaconLinear]:
    """Replace the selected projections of each attention module by :class:`BeaconLinear`."""
    out = []
    for attn in attns:
        for p in params:
            lin = getattr(attn, _PROJ[p])
            if isinstance(lin, BeaconLinear):
                raise ValueError("model already carries beacon projections")
            wrapped = BeaconLinear(lin, context)
            setattr(attn, _PROJ[p], wrapped)
            out.append(wrapped)
    return out


def rope_functions(model: nn.Module) -> tuple[nn.Module, Callable[..., Any]]:
    """The model's own rotary module and ``apply_rotary_pos_emb`` (from its modeling file)."""
    attn = find_attention_layers(model)[0]
    module = sys.modules[type(attn).__module__]
    apply = getattr(module, "apply_rotary_pos_emb", None)
    if apply is None:
        raise TypeError(f"unsupported architecture {type(model).__name__}: no apply_rotary_pos_emb")
    return model.model.rotary_emb, apply
