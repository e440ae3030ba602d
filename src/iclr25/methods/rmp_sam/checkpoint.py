"""Key map between this package's RMP-SAM state dict and mmdet-style (official) parameter names.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228; official code xushilin1/RMP-SAM (MMDetection 3.x). The kernel-update names follow
K-Net's ``KernelUpdator`` (``dynamic_layer`` from pooled features, ``input_layer`` from kernels,
``input_norm_in``/``norm_in`` on the two gates, ``norm_out``/``input_norm_out`` on the outputs,
``fc_layer``/``fc_norm``); mmcv's modulated deformable conv keeps its weight at the module level and
its offset/mask conv as ``conv_offset`` (chunks o1, o2, mask). The prefixes of the released
checkpoint were not available offline: check them on ``rapsam_r50_12e.pth`` before porting weights,
and mind the logit-scale asymmetry (stages divide by 0.1, the adapter does not).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

__all__ = ["KEY_RULES", "from_official_state_dict", "to_official_state_dict"]

#: (regex on our names, replacement giving the official name); applied in order.
KEY_RULES: tuple[tuple[str, str], ...] = (
    (r"^backbone\.body\.", "backbone."),
    (r"^neck\.td\.(\d+)\.0\.offset\.", r"neck.deconv_layers.\1.dcn.conv_offset."),
    (r"^neck\.td\.(\d+)\.0\.conv\.weight$", r"neck.deconv_layers.\1.dcn.weight"),
    (r"^neck\.td\.(\d+)\.0\.weight$", r"neck.deconv_layers.\1.dcn.weight"),
    (r"^neck\.td\.(\d+)\.1\.", r"neck.deconv_layers.\1.dcn_bn."),
    (r"^neck\.td\.(\d+)\.3\.", r"neck.deconv_layers.\1.up_sample."),
    (r"^neck\.td\.(\d+)\.4\.", r"neck.deconv_layers.\1.up_bn."),
    (r"^neck\.", "neck."),
    (r"^query\.weight$", "panoptic_head.query_embed.weight"),
    (r"^prompt_encoder\.", "panoptic_head.pe."),
    (r"^stages\.(\d+)\.", r"panoptic_head.transformer_decoder.\1."),
    (r"^object_adapter\.", "panoptic_head.obj_adapter."),
    (r"^prompt_adapter\.", "panoptic_head.prompt_adapter."),
)
_PART_RULES: tuple[tuple[str, str], ...] = (
    (r"\.update\.feat_proj\.", ".kernel_update_conv.dynamic_layer."),
    (r"\.update\.kernel_proj\.", ".kernel_update_conv.input_layer."),
    (r"\.update\.input_gate\.", ".kernel_update_conv.input_gate."),
    (r"\.update\.update_gate\.", ".kernel_update_conv.update_gate."),
    (r"\.update\.norm_input_gate\.", ".kernel_update_conv.input_norm_in."),
    (r"\.update\.norm_update_gate\.", ".kernel_update_conv.norm_in."),
    (r"\.update\.norm_p_out\.", ".kernel_update_conv.norm_out."),
    (r"\.update\.norm_i_out\.", ".kernel_update_conv.input_norm_out."),
    (r"\.update\.fc\.", ".kernel_update_conv.fc_layer."),
    (r"\.update\.fc_norm\.", ".kernel_update_conv.fc_norm."),
)


def _rename(name: str) -> str:
    for pat, rep in KEY_RULES:
        if re.search(pat, name):
            name = re.sub(pat, rep, name)
            break
    for pat, rep in _PART_RULES:
        name = re.sub(pat, rep, name)
    return name


def to_official_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our state dict under mmdet-style names.

    Example:
        >>> to_official_state_dict({"stages.0.update.fc.weight": torch.zeros(1)}).popitem()[0]
        'panoptic_head.transformer_decoder.0.kernel_update_conv.fc_layer.weight'
    """
    out = {_rename(k): v for k, v in state.items()}
    if len(out) != len(state):
        raise ValueError("the key map sends two parameters to one official name")
    return out


def from_official_state_dict(
    state: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Official names back to ours, given our model's state dict as the reference of names and shapes.

    Raises:
        KeyError: a parameter of the reference has no official counterpart in ``state``.
        ValueError: shapes differ.
    """
    out = {}
    for ours in reference:
        off = _rename(ours)
        if off not in state:
            raise KeyError(f"official state dict lacks {off!r} (for {ours!r})")
        if tuple(state[off].shape) != tuple(reference[ours].shape):
            raise ValueError(f"{off}: shape {tuple(state[off].shape)} != {tuple(reference[ours].shape)}")
        out[ours] = state[off]
    return out
