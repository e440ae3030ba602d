"""Key map between this package's RMP-SAM state dict and the official (MMDetection 3.x) parameter names.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228; official code xushilin1/RMP-SAM (first published as xushilin1/RAP-SAM), MMDetection 3.x.
The names and shapes were checked against the official module code, not against the released
file: ``seg/models/detectors/rapsam.py`` (``RapSAM``: ``backbone``, ``neck``, ``panoptic_head``),
mmdet's ``ResNet`` (``conv1``, ``bn1``, ``layer1``-``layer4``, ``downsample.0``/``.1``: timm's
names), ``seg/models/necks/ramsam_neck.py`` (``YOSONeck``: ``deconv.lateral_conv0``-``3`` from
stride 32 down, ``deconv.deform_conv1``-``3`` with a sibling offset/mask conv ``dcn_offset``
(chunks o1, o2, mask), a bias-free modulated ``dcn``, ``dcn_bn``, ``up_sample``, ``up_bn``;
``deconv.conv_a5``-``conv_a2``, ``deconv.bias``, ``deconv.output_conv``, then ``loc_conv``),
``seg/models/heads/rapsam_head.py`` (``RapSAMVideoHead``: ``kernels``, ``pos_linear``,
``pb_embedding``, ``mask_tokens``, ``mask_heads``, adapters ``panoptic_attn``/``panoptic_cls`` and
``prompt_attn.attn``/``prompt_norm``/``prompt_iou``), ``seg/models/heads/yoso_head.py``
(``CrossAttenHead``, K-Net's ``KernelUpdator``) and ``configs/rap_sam/rap_sam_r50_12e_adaptor.py``
(the model of ``rapsam_r50_12e.pth``, evaluated by ``configs/rap_sam/eval_rap_sam_coco.py`` with
133 COCO classes).

Two module layouts. With :meth:`~iclr25.methods.rmp_sam.config.RMPSAMConfig.official_layout` (the
``r18()`` / ``r50()`` presets) the modules have the released structure: the neck gives level i
``c_i / 2`` channels and has no ReLU after ``output_conv``, the first class / mask layers have no
bias, the IoU head reads the mask branch, the object adapter's class head is one Linear
(``object_adapter.cls_fc`` <-> ``panoptic_cls.0``), the prompt adapter's IoU head one Linear
(``prompt_adapter.iou_fc`` <-> ``prompt_iou``), neither adapter has a mask head, and the prompt
type embedding has 2 rows (``prompt_encoder.pb_embed`` <-> ``pb_embedding``). Every tensor of the
released R50 state dict then has a parameter of the same shape and every parameter a value: a
strict load leaves nothing out. In the default layout (``RMPSAMConfig()``) these parts differ;
what does not carry over is named by :func:`official_key_report` and by the warning of
:func:`from_official_state_dict`:

- no counterpart: a ``convnet`` backbone, the prompt type embedding (3 kinds here; the official
  ``pb_embedding`` has 2 rows and the released pipeline uses row 1 for points and boxes alike), the
  adapters' mask heads, the object adapter's class head (official: one Linear, ``panoptic_cls``) and
  the prompt adapter's IoU MLP (official: one Linear, ``prompt_iou``);
- shapes: the official neck's laterals give each level ``c_i / 2`` channels, ours give C to every
  level, so at ResNet-50 most neck tensors do not fit; the released class embeddings are 768-d
  (``embed_dim``; the paper-scale presets set 768);
- computation under the same names: the official IoU head reads the mask branch (after
  ``mask_fcs``), ours reads the query; the official ``output_conv`` has no ReLU. In both layouts
  the stages divide the class logits by 0.1 and the object adapter does not.

Layouts converted: ``pos_linear`` takes the sine codes in the order (y, x, w, h) (mmdet's
``coordinate_to_encoding``), ours (x, y, w, h); ``mask_tokens.weight`` is (1, C). Values implied:
the zero biases of the official bias-free ``cls_fcs.0``/``mask_fcs.0`` (default layout only), and the released
preprocessing (ImageNet mean and std) as ``pixel_mean``/``pixel_std``. The class embeddings are not
in the checkpoint (the official code reads them from a separate file): pass them to the model.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Mapping

import torch

__all__ = ["KEY_RULES", "from_official_state_dict", "official_key_report", "to_official_state_dict"]


def _module(ours: str, official: str) -> tuple[str, str]:
    """A rule for every tensor of one module: ``ours.<tail>`` <-> ``official.<tail>``."""
    return rf"{ours}\.(?P<p>.+)", rf"{official}.\g<p>"


# K-Net's KernelUpdator names: dynamic_layer reads the pooled features, input_layer the kernels;
# input_norm_in / norm_in normalise the input / update gates, norm_out / input_norm_out the outputs.
_KERNEL_UPDATE: tuple[tuple[str, str], ...] = (
    ("feat_proj", "dynamic_layer"),
    ("kernel_proj", "input_layer"),
    ("input_gate", "input_gate"),
    ("update_gate", "update_gate"),
    ("norm_input_gate", "input_norm_in"),
    ("norm_update_gate", "norm_in"),
    ("norm_p_out", "norm_out"),
    ("norm_i_out", "input_norm_out"),
    ("fc", "fc_layer"),
    ("fc_norm", "fc_norm"),
)
# CrossAttenHead, module by module (the cosine head's 3-layer projection before the linear one).
_STAGE_PARTS: tuple[tuple[str, str], ...] = (
    *((rf"update\.{a}", f"kernel_update.{b}") for a, b in _KERNEL_UPDATE),
    (r"attn", "s_atten"),
    (r"attn_norm", "s_atten_norm"),
    (r"ffn\.0", "ffn.layers.0.0"),
    (r"ffn\.2", "ffn.layers.1"),
    (r"ffn_norm", "ffn_norm"),
    (r"cls\.pre\.1", "cls_fcs.1"),
    (r"cls\.out\.(?P<j>\d)", r"cls_proj.\g<j>"),
    (r"cls\.out", "fc_cls"),
    (r"mask_head\.1", "mask_fcs.1"),
    (r"mask_head\.3", "fc_mask"),
    (r"iou_head\.(?P<j>\d)", r"iou_embed.\g<j>"),
)
_DECONV = "neck.deconv"

#: (regex matching one of our names in full, its official name); the first match wins. A name no
#: rule matches has no official counterpart.
KEY_RULES: tuple[tuple[str, str], ...] = (
    _module(r"backbone\.body", "backbone"),
    # our laterals run from stride 4 up, the official ones from stride 32 down
    *(_module(rf"neck\.lateral\.{i}", f"{_DECONV}.lateral_conv{3 - i}") for i in range(4)),
    *(_module(rf"neck\.td\.{k}\.0\.offset", f"{_DECONV}.deform_conv{k + 1}.dcn_offset") for k in range(3)),
    *(
        (rf"neck\.td\.{k}\.0\.(?:conv\.)?weight", f"{_DECONV}.deform_conv{k + 1}.dcn.weight")
        for k in range(3)
    ),
    *(_module(rf"neck\.td\.{k}\.1", f"{_DECONV}.deform_conv{k + 1}.dcn_bn") for k in range(3)),
    *(_module(rf"neck\.td\.{k}\.3", f"{_DECONV}.deform_conv{k + 1}.up_sample") for k in range(3)),
    *(_module(rf"neck\.td\.{k}\.4", f"{_DECONV}.deform_conv{k + 1}.up_bn") for k in range(3)),
    # aggregation of the levels 1/32, 1/16, 1/8, 1/4
    *(_module(rf"neck\.agg\.{k}", f"{_DECONV}.conv_a{5 - k}") for k in range(4)),
    (r"neck\.agg_bias", f"{_DECONV}.bias"),
    _module(r"neck\.fuse\.0", f"{_DECONV}.output_conv"),
    _module(r"neck\.out", "neck.loc_conv"),
    (r"query\.weight", "panoptic_head.kernels.weight"),
    _module(r"prompt_encoder\.proj", "panoptic_head.pos_linear"),
    (r"prompt_encoder\.mask_token", "panoptic_head.mask_tokens.weight"),
    _module(r"prompt_encoder\.pb_embed", "panoptic_head.pb_embedding"),  # the 2-row type embedding
    # the official cls_fcs.0 / mask_fcs.0 have no bias (ours: implied zero)
    (r"stages\.(?P<i>\d+)\.cls\.pre\.0\.weight", r"panoptic_head.mask_heads.\g<i>.cls_fcs.0.weight"),
    (r"stages\.(?P<i>\d+)\.mask_head\.0\.weight", r"panoptic_head.mask_heads.\g<i>.mask_fcs.0.weight"),
    *(_module(rf"stages\.(?P<i>\d+)\.{a}", rf"panoptic_head.mask_heads.\g<i>.{b}") for a, b in _STAGE_PARTS),
    *(
        _module(rf"object_adapter\.update\.{a}", f"panoptic_head.panoptic_attn.{b}")
        for a, b in _KERNEL_UPDATE
    ),
    # the adapters' single-Linear heads (official layout)
    _module(r"object_adapter\.cls_fc", "panoptic_head.panoptic_cls.0"),
    _module(r"prompt_adapter\.cross", "panoptic_head.prompt_attn.attn"),
    _module(r"prompt_adapter\.norm", "panoptic_head.prompt_norm"),
    _module(r"prompt_adapter\.iou_fc", "panoptic_head.prompt_iou"),
)

_ZERO_BIAS = re.compile(r"stages\.\d+\.(?:cls\.pre|mask_head)\.0\.bias")
# the released data preprocessor: RGB mean and std on 0-255 pixels; ours work on [0, 1]
_RELEASED_PIXELS = {"pixel_mean": (123.675, 116.28, 103.53), "pixel_std": (58.395, 57.12, 57.375)}
_FROM_MODEL = ("class_embed",)


def _swap_xy(weight: torch.Tensor) -> torch.Tensor:
    """Swap the first two quarters of the input columns: (y, x, w, h) codes <-> (x, y, w, h)."""
    if weight.ndim != 2 or weight.shape[1] % 4:
        return weight  # not the prompt projection's layout; the shape check reports it
    d = weight.shape[1] // 4
    return torch.cat([weight[:, d : 2 * d], weight[:, :d], weight[:, 2 * d :]], dim=1)


_TO_OFFICIAL: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "prompt_encoder.proj.weight": _swap_xy,
    "prompt_encoder.mask_token": lambda t: t.reshape(1, -1),  # (C,) -> (1, C)
}
_FROM_OFFICIAL: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "prompt_encoder.proj.weight": _swap_xy,
    "prompt_encoder.mask_token": lambda t: t.reshape(-1),  # (1, C) -> (C,)
}


def _official_name(name: str) -> str | None:
    for pat, rep in KEY_RULES:
        m = re.fullmatch(pat, name)
        if m:
            return m.expand(rep)
    return None


def to_official_state_dict(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our state dict under the official names and layouts; tensors without an official
    counterpart keep our names (so :func:`from_official_state_dict` gives the same state back).

    Example:
        >>> to_official_state_dict({"stages.0.update.fc.weight": torch.zeros(1)}).popitem()[0]
        'panoptic_head.mask_heads.0.kernel_update.fc_layer.weight'
    """
    out: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        off = _official_name(k)
        name, value = (k, v) if off is None else (off, _TO_OFFICIAL.get(k, lambda t: t)(v))
        if name in out:
            raise ValueError(f"the key map sends two parameters to {name!r}")
        out[name] = value
    return out


def _resolve(
    state: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor]
) -> tuple[dict[str, torch.Tensor], list[str], list[str], list[str]]:
    """(loadable tensors under our names, our names without a value, shape mismatches, unused)."""
    out: dict[str, torch.Tensor] = {}
    missing: list[str] = []
    mismatched: list[str] = []
    used: set[str] = set()
    for ours, ref in reference.items():
        off = _official_name(ours)
        if off is not None and off in state:
            used.add(off)
            value = _FROM_OFFICIAL.get(ours, lambda t: t)(state[off])
            where = off
        elif off is None and ours in state:  # written by to_official_state_dict under our name
            used.add(ours)
            value, where = state[ours], ours
        elif off is None and _ZERO_BIAS.fullmatch(ours):
            out[ours] = torch.zeros_like(ref)  # the official layer has no bias
            continue
        elif ours in _RELEASED_PIXELS:
            out[ours] = (
                torch.tensor(_RELEASED_PIXELS[ours], dtype=ref.dtype, device=ref.device).view(ref.shape) / 255
            )
            continue
        elif ours in _FROM_MODEL:
            out[ours] = ref  # not in a checkpoint: the model's own class embeddings
            continue
        else:
            missing.append(ours if off is None else f"{ours} (official {off})")
            continue
        if tuple(value.shape) != tuple(ref.shape):
            mismatched.append(f"{ours} <- {where}: {tuple(value.shape)} != {tuple(ref.shape)}")
            continue
        out[ours] = value
    unused = sorted(set(state) - used)
    return out, sorted(missing), sorted(mismatched), unused


def official_key_report(
    state: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor]
) -> dict[str, list[str]]:
    """What a load of ``state`` (official names) into a model with state dict ``reference`` leaves out.

    Returns:
        ``{"missing": our tensors with no official value, "mismatched": "ours <- official: shape !=
        ours" for tensors of another shape, "unused": official tensors no parameter takes}``.

    Example:
        >>> ref = {"query.weight": torch.zeros(2, 3), "pixel_mean": torch.zeros(1, 3, 1, 1)}
        >>> official_key_report({"panoptic_head.kernels.weight": torch.ones(2, 3), "x": torch.ones(1)}, ref)
        {'missing': [], 'mismatched': [], 'unused': ['x']}
    """
    _, missing, mismatched, unused = _resolve(state, reference)
    return {"missing": missing, "mismatched": mismatched, "unused": unused}


def from_official_state_dict(
    state: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor], *, strict: bool = True
) -> dict[str, torch.Tensor]:
    """Official names back to ours, given our model's state dict as the reference of names and shapes.

    Args:
        state: an official state dict (``torch.load(path)["state_dict"]`` of a released file), or
            one written by :func:`to_official_state_dict`.
        reference: ``model.state_dict()`` of the model to fill (it also gives the class embeddings).
        strict: raise on a tensor of ours with no value or another shape; with False such tensors
            are left out (load with ``model.load_state_dict(out, strict=False)``) and named in a
            warning. Official tensors no parameter takes are named in a warning in both modes.

    Returns:
        Our names -> tensors (the layouts converted, the implied values filled in).

    Raises:
        KeyError: (strict) tensors of ours with no official counterpart in ``state``, all named.
        ValueError: (strict) tensors whose shapes differ, all named.

    Example:
        >>> official = {"panoptic_head.kernels.weight": torch.ones(2, 3)}
        >>> from_official_state_dict(official, {"query.weight": torch.zeros(2, 3)})["query.weight"].sum()
        tensor(6.)
    """
    out, missing, mismatched, unused = _resolve(state, reference)
    if strict and missing:
        raise KeyError(f"the official state dict has no value for {len(missing)} tensors: {missing}")
    if strict and mismatched:
        raise ValueError(f"{len(mismatched)} tensors have another shape: {mismatched}")
    parts = []
    if missing:
        parts.append(f"{len(missing)} tensors of the model have no official value and keep theirs: {missing}")
    if mismatched:
        parts.append(f"{len(mismatched)} tensors have another shape and keep the model's: {mismatched}")
    if unused:
        parts.append(f"{len(unused)} official tensors are dropped: {unused}")
    if parts:
        warnings.warn("; ".join(parts), UserWarning, stacklevel=2)
    return out
