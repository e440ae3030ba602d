"""RMP-SAM key map against the official parameter names.

The official names and shapes below are written from the official modules (MMDetection 3.x):
mmdet's ``ResNet`` (``BasicBlock``/``Bottleneck``), ``seg/models/necks/ramsam_neck.py``
(``YOSONeck`` -> ``LiteDeformConv`` -> ``DeformLayer``), ``seg/models/heads/rapsam_head.py``
(``RapSAMVideoHead``) and ``seg/models/heads/yoso_head.py`` (``CrossAttenHead``, ``KernelUpdator``),
with the options of ``configs/rap_sam/rap_sam_r50_12e_adaptor.py`` (cosine classifier, kernel
updates in the stages and in the object adapter, attention in the prompt adapter). The official
head fixes C = 256 in places (``KernelUpdator(256, 256, 256)``, ``LayerNorm(256)``); for a tiny
model those widths are C. Two layouts of ours: the default one (its own neck widths and adapter
heads; a load leaves named parts out) and ``RMPSAMConfig.official_layout()`` (the ``r50()`` preset;
the released state dict loads strictly and the modules compute what the released ones do).
"""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torchvision.ops import deform_conv2d

from iclr25.methods.rmp_sam import (
    RMPSAM,
    RMPSAMConfig,
    build_backbone,
    convnext_l,
    from_official_state_dict,
    official_key_report,
    r18,
    r50,
    to_official_state_dict,
)
from iclr25.methods.rmp_sam.prompts import sine_encoding

pytestmark = pytest.mark.usefixtures("one_thread")

Shapes = dict[str, tuple[int, ...]]


# ---------------------------------------------------------------- official structure
def _linear(p: str, cout: int, cin: int, bias: bool = True) -> Shapes:
    return {f"{p}.weight": (cout, cin), **({f"{p}.bias": (cout,)} if bias else {})}


def _conv(p: str, cout: int, cin: int, k: int, bias: bool = True) -> Shapes:
    return {f"{p}.weight": (cout, cin, k, k), **({f"{p}.bias": (cout,)} if bias else {})}


def _ln(p: str, c: int) -> Shapes:
    return {f"{p}.weight": (c,), f"{p}.bias": (c,)}


def _bn(p: str, c: int) -> Shapes:
    stats = ("weight", "bias", "running_mean", "running_var")
    return {**{f"{p}.{s}": (c,) for s in stats}, f"{p}.num_batches_tracked": ()}


def _mha(p: str, c: int) -> Shapes:  # torch.nn.MultiheadAttention (packed q/k/v)
    return {
        f"{p}.in_proj_weight": (3 * c, c),
        f"{p}.in_proj_bias": (3 * c,),
        **_linear(f"{p}.out_proj", c, c),
    }


def official_resnet(depth: int) -> Shapes:
    """mmdet ``ResNet(depth)``: 7x7 stem ``conv1``/``bn1``; ``layer{i}.{j}`` blocks with ``conv*``/``bn*``;
    ``downsample`` = (1x1 conv, BN) on a block's first unit when its width or stride changes."""
    bottleneck, counts = {18: (False, (2, 2, 2, 2)), 50: (True, (3, 4, 6, 3))}[depth]
    exp = 4 if bottleneck else 1
    s = {**_conv("backbone.conv1", 64, 3, 7, bias=False), **_bn("backbone.bn1", 64)}
    inplanes = 64
    for i, n in enumerate(counts):
        planes = 64 * 2**i
        for j in range(n):
            p = f"backbone.layer{i + 1}.{j}"
            cin = inplanes if j == 0 else planes * exp
            if bottleneck:
                s |= _conv(f"{p}.conv1", planes, cin, 1, bias=False) | _bn(f"{p}.bn1", planes)
                s |= _conv(f"{p}.conv2", planes, planes, 3, bias=False) | _bn(f"{p}.bn2", planes)
                s |= _conv(f"{p}.conv3", planes * exp, planes, 1, bias=False) | _bn(f"{p}.bn3", planes * exp)
            else:
                s |= _conv(f"{p}.conv1", planes, cin, 3, bias=False) | _bn(f"{p}.bn1", planes)
                s |= _conv(f"{p}.conv2", planes, planes, 3, bias=False) | _bn(f"{p}.bn2", planes)
            if j == 0 and (i > 0 or inplanes != planes * exp):
                s |= _conv(f"{p}.downsample.0", planes * exp, cin, 1, bias=False)
                s |= _bn(f"{p}.downsample.1", planes * exp)
        inplanes = planes * exp
    return s


def _deform_layer(p: str, cin: int, cout: int) -> Shapes:
    """``DeformLayer``: offset/mask conv (27 = 2 x 9 offsets + 9 masks), bias-free modulated DCN, BN,
    stride-2 transposed conv (weight (in, out, 4, 4)), BN."""
    return {
        **_conv(f"{p}.dcn_offset", 27, cin, 3),
        f"{p}.dcn.weight": (cout, cin, 3, 3),
        **_bn(f"{p}.dcn_bn", cout),
        f"{p}.up_sample.weight": (cout, cout, 4, 4),
        **_bn(f"{p}.up_bn", cout),
    }


def official_neck(backbone_shape: list[int], agg_dim: int, hidden_dim: int) -> Shapes:
    """``YOSONeck``: level widths ``[agg_dim] + [c // 2 for c in backbone_shape]``; lateral_conv0 and
    deform_conv1 work at stride 32, lateral_conv3 at stride 4; conv_a5..conv_a2 project the four
    levels to ``agg_dim``; ``loc_conv`` reads ``agg_dim`` + 2 coordinate channels."""
    cin = list(backbone_shape)
    out = [agg_dim] + [c // 2 for c in cin]
    d = "neck.deconv"
    s = _conv(f"{d}.lateral_conv0", out[-1], cin[-1], 1)
    for k in (1, 2, 3):
        s |= _deform_layer(f"{d}.deform_conv{k}", out[-k], out[-k - 1])
        s |= _conv(f"{d}.lateral_conv{k}", out[-k - 1], cin[-k - 1], 1)
    s |= _conv(f"{d}.output_conv", out[0], out[0], 3)
    s[f"{d}.bias"] = (1, out[0], 1, 1)
    for k in range(4):
        s |= _conv(f"{d}.conv_a{5 - k}", out[0], out[-1 - k], 1, bias=False)
    return s | _conv("neck.loc_conv", hidden_dim, agg_dim + 2, 1)


def _kernel_updator(p: str, c: int) -> Shapes:
    s = _linear(f"{p}.dynamic_layer", 2 * c, c) | _linear(f"{p}.input_layer", 2 * c, c)
    s |= _linear(f"{p}.input_gate", c, c) | _linear(f"{p}.update_gate", c, c)
    for n in ("norm_in", "norm_out", "input_norm_in", "input_norm_out", "fc_norm"):
        s |= _ln(f"{p}.{n}", c)
    return s | _linear(f"{p}.fc_layer", c, c)


def official_head(c: int, *, num_queries: int, num_stages: int, ffn: int, cls_dim: int) -> Shapes:
    """``RapSAMVideoHead`` with one mask token; ``pos_linear`` reads the 4 x 128 sine codes of a box
    (declared ``Linear(2 * feat_channels, ...)``, the same at the released C = 256)."""
    h = "panoptic_head"
    s: Shapes = {f"{h}.mask_tokens.weight": (1, c), f"{h}.pb_embedding.weight": (2, c)}
    s |= _linear(f"{h}.pos_linear", c, 4 * 128) | {f"{h}.kernels.weight": (num_queries, c)}
    for i in range(num_stages):
        p = f"{h}.mask_heads.{i}"
        s |= _kernel_updator(f"{p}.kernel_update", c) | _mha(f"{p}.s_atten", c) | _ln(f"{p}.s_atten_norm", c)
        s |= (
            _linear(f"{p}.ffn.layers.0.0", ffn, c)
            | _linear(f"{p}.ffn.layers.1", c, ffn)
            | _ln(f"{p}.ffn_norm", c)
        )
        s |= _linear(f"{p}.cls_fcs.0", c, c, bias=False) | _ln(f"{p}.cls_fcs.1", c)
        s |= (
            _linear(f"{p}.cls_proj.0", c, c)
            | _linear(f"{p}.cls_proj.2", c, c)
            | _linear(f"{p}.cls_proj.4", cls_dim, c)
        )
        s |= (
            _linear(f"{p}.mask_fcs.0", c, c, bias=False)
            | _ln(f"{p}.mask_fcs.1", c)
            | _linear(f"{p}.fc_mask", c, c)
        )
        s |= (
            _linear(f"{p}.iou_embed.0", c, c)
            | _linear(f"{p}.iou_embed.2", c, c)
            | _linear(f"{p}.iou_embed.4", 1, c)
        )
    s |= _kernel_updator(f"{h}.panoptic_attn", c) | _linear(f"{h}.panoptic_cls.0", cls_dim, c)
    return (
        s | _mha(f"{h}.prompt_attn.attn", c) | _ln(f"{h}.prompt_norm", c) | _linear(f"{h}.prompt_iou", 1, c)
    )


def _fill(shapes: Shapes, seed: int = 0) -> dict[str, torch.Tensor]:
    """Distinct small values (positive running variances, integer batch counters)."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, shape in shapes.items():
        if k.endswith("num_batches_tracked"):
            out[k] = torch.tensor(7)
        elif k.endswith("running_var"):
            out[k] = torch.rand(shape, generator=g) + 0.5
        else:
            out[k] = 0.1 * torch.randn(shape, generator=g)
    return out


def _meta(shapes: Shapes) -> dict[str, torch.Tensor]:
    return {k: torch.empty(v, device="meta") for k, v in shapes.items()}


# ---------------------------------------------------------------- the tiny model
C, AGG, QUERIES, STAGES, FFN, EMBED = 32, 16, 8, 2, 64, 16
# backbone levels of width 2C: the official neck then gives every level C channels, as ours does
TINY = RMPSAMConfig(
    backbone_channels=(2 * C,) * 4,
    channels=C,
    agg_channels=AGG,
    num_queries=QUERIES,
    num_stages=STAGES,
    ffn_dim=FFN,
    class_head="cosine",
    embed_dim=EMBED,
)
# ours without an official counterpart (the conv-net backbone stands in for the ResNet)
NO_COUNTERPART = (
    "backbone.",
    "prompt_encoder.type_embed.",
    "object_adapter.cls.",
    "object_adapter.mask_head.",
    "prompt_adapter.mask_head.",
    "prompt_adapter.iou_head.",
)
# official tensors with no counterpart here: the 2-row point/box embedding, the object adapter's
# single-Linear classifier and the prompt adapter's single-Linear IoU head
LEFTOVERS = {
    "panoptic_head.pb_embedding.weight",
    "panoptic_head.panoptic_cls.0.weight",
    "panoptic_head.panoptic_cls.0.bias",
    "panoptic_head.prompt_iou.weight",
    "panoptic_head.prompt_iou.bias",
}


def _tiny() -> RMPSAM:
    torch.manual_seed(0)
    return RMPSAM(TINY).eval()


def _tiny_official() -> dict[str, torch.Tensor]:
    shapes = official_neck([2 * C] * 4, AGG, C) | official_head(
        C, num_queries=QUERIES, num_stages=STAGES, ffn=FFN, cls_dim=EMBED
    )
    return _fill(shapes)


def test_official_tiny_state_dict_loads_and_runs() -> None:
    model = _tiny()
    ref = model.state_dict()
    official = _tiny_official()
    with pytest.warns(UserWarning, match="official tensors are dropped") as rec:
        loaded = from_official_state_dict(official, ref, strict=False)
    expected_missing = {k for k in ref if k.startswith(NO_COUNTERPART)}
    report = official_key_report(official, ref)
    assert set(report["missing"]) == expected_missing
    assert report["mismatched"] == []
    assert set(report["unused"]) == LEFTOVERS  # every other official tensor is consumed
    msg = str(rec[0].message)
    assert all(k in msg for k in LEFTOVERS) and "prompt_adapter.iou_head.4.weight" in msg
    # every parameter and buffer of ours outside NO_COUNTERPART is filled, with the model's shape
    assert set(loaded) == set(ref) - expected_missing
    assert all(loaded[k].shape == ref[k].shape for k in loaded)
    result = model.load_state_dict(loaded, strict=False)
    assert result.unexpected_keys == []
    # (torch does not list a missing BN num_batches_tracked)
    assert set(result.missing_keys) == {k for k in expected_missing if not k.endswith("num_batches_tracked")}

    # pairs written by hand (the laterals and projections run in opposite level orders)
    pairs = {
        "neck.lateral.0.weight": "neck.deconv.lateral_conv3.weight",
        "neck.lateral.3.bias": "neck.deconv.lateral_conv0.bias",
        "neck.td.0.0.offset.weight": "neck.deconv.deform_conv1.dcn_offset.weight",
        "neck.td.2.0.conv.weight": "neck.deconv.deform_conv3.dcn.weight",
        "neck.td.1.1.running_var": "neck.deconv.deform_conv2.dcn_bn.running_var",
        "neck.td.1.3.weight": "neck.deconv.deform_conv2.up_sample.weight",
        "neck.td.0.4.bias": "neck.deconv.deform_conv1.up_bn.bias",
        "neck.agg.0.weight": "neck.deconv.conv_a5.weight",
        "neck.agg.3.weight": "neck.deconv.conv_a2.weight",
        "neck.agg_bias": "neck.deconv.bias",
        "neck.fuse.0.weight": "neck.deconv.output_conv.weight",
        "neck.out.weight": "neck.loc_conv.weight",
        "query.weight": "panoptic_head.kernels.weight",
        "stages.1.update.feat_proj.weight": "panoptic_head.mask_heads.1.kernel_update.dynamic_layer.weight",
        "stages.0.update.norm_input_gate.bias": "panoptic_head.mask_heads.0.kernel_update.input_norm_in.bias",
        "stages.0.update.norm_update_gate.weight": "panoptic_head.mask_heads.0.kernel_update.norm_in.weight",
        "stages.1.attn.in_proj_weight": "panoptic_head.mask_heads.1.s_atten.in_proj_weight",
        "stages.0.ffn.2.weight": "panoptic_head.mask_heads.0.ffn.layers.1.weight",
        "stages.0.cls.pre.0.weight": "panoptic_head.mask_heads.0.cls_fcs.0.weight",
        "stages.1.cls.out.4.weight": "panoptic_head.mask_heads.1.cls_proj.4.weight",
        "stages.1.mask_head.3.bias": "panoptic_head.mask_heads.1.fc_mask.bias",
        "stages.0.iou_head.4.weight": "panoptic_head.mask_heads.0.iou_embed.4.weight",
        "object_adapter.update.norm_p_out.weight": "panoptic_head.panoptic_attn.norm_out.weight",
        "prompt_adapter.cross.out_proj.weight": "panoptic_head.prompt_attn.attn.out_proj.weight",
        "prompt_adapter.norm.bias": "panoptic_head.prompt_norm.bias",
    }
    for ours, off in pairs.items():
        assert torch.equal(loaded[ours], official[off]), ours
    # layouts: the mask token is (1, C) there; the box codes enter pos_linear as (y, x, w, h)
    assert torch.equal(loaded["prompt_encoder.mask_token"], official["panoptic_head.mask_tokens.weight"][0])
    box = torch.tensor([[0.3, 0.6, 0.2, 0.1], [0.9, 0.05, 0.5, 0.7]])  # (cx, cy, w, h) in [0, 1]
    ours_pre = sine_encoding(box, 128) @ loaded["prompt_encoder.proj.weight"].T
    official_pre = _yxwh_codes(box) @ official["panoptic_head.pos_linear.weight"].T
    assert torch.allclose(ours_pre, official_pre, atol=1e-5)
    # implied values: bias-free official layers, the released preprocessing, our class embeddings
    assert not loaded["stages.1.cls.pre.0.bias"].any() and not loaded["stages.0.mask_head.0.bias"].any()
    assert torch.allclose(loaded["pixel_mean"].flatten(), torch.tensor([0.485, 0.456, 0.406]), atol=1e-3)
    assert torch.allclose(loaded["pixel_std"].flatten(), torch.tensor([0.229, 0.224, 0.225]), atol=1e-3)
    assert torch.equal(loaded["class_embed"], ref["class_embed"])

    with torch.no_grad():
        pan = model(torch.rand(1, 3, 32, 32), task="panoptic")
        inter = model(
            torch.rand(1, 3, 32, 32), task="interactive", prompts={"points": torch.tensor([[[5.5, 9.5]]])}
        )
    assert pan["logits"].shape == (1, QUERIES, 7) and bool(torch.isfinite(pan["masks"]).all())
    assert inter["masks"].shape == (1, 1, 8, 8) and bool(torch.isfinite(inter["iou"]).all())


def _yxwh_codes(box: torch.Tensor) -> torch.Tensor:
    """mmdet's ``coordinate_to_encoding`` of (cx, cy, w, h), 128 per coordinate: frequencies
    ``10000^(2 floor(i / 2) / 128)``, sin on even and cos on odd slots, coordinates in the order
    y, x, w, h."""
    t = 10000 ** (2 * (torch.arange(128) // 2) / 128)

    def code(v: torch.Tensor) -> torch.Tensor:
        a = v[:, None] * 2 * math.pi / t
        return torch.stack([a[:, 0::2].sin(), a[:, 1::2].cos()], dim=-1).flatten(1)

    return torch.cat([code(box[:, 1]), code(box[:, 0]), code(box[:, 2]), code(box[:, 3])], dim=-1)


def test_a_renamed_or_reshaped_official_tensor_is_named() -> None:
    ref = _tiny().state_dict()
    good = "panoptic_head.mask_heads.0.kernel_update.fc_layer.weight"
    bad = "panoptic_head.mask_heads.0.kernel_update.fc.weight"
    complete = to_official_state_dict(ref)  # a value for every tensor of ours
    renamed = dict(complete)
    renamed[bad] = renamed.pop(good)
    with pytest.raises(
        KeyError, match=re.escape(f"1 tensors: ['stages.0.update.fc.weight (official {good})']")
    ):
        from_official_state_dict(renamed, ref)
    # a released-style load (strict=False) keeps going and names both sides
    official = _tiny_official()
    official[bad] = official.pop(good)
    with pytest.warns(UserWarning, match=re.escape(bad)):
        out = from_official_state_dict(official, ref, strict=False)
    assert "stages.0.update.fc.weight" not in out
    report = official_key_report(official, ref)
    assert set(report["unused"]) == LEFTOVERS | {bad}
    assert f"stages.0.update.fc.weight (official {good})" in report["missing"]

    wider = {**complete, "panoptic_head.kernels.weight": torch.zeros(QUERIES + 1, C)}
    with pytest.raises(
        ValueError, match=re.escape(f"query.weight <- panoptic_head.kernels.weight: ({QUERIES + 1}, {C})")
    ):
        from_official_state_dict(wider, ref)


def test_round_trip_through_official_names_is_exact() -> None:
    ref = _tiny().state_dict()
    official = to_official_state_dict(ref)
    assert "panoptic_head.pos_linear.weight" in official
    assert official["panoptic_head.mask_tokens.weight"].shape == (1, C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = from_official_state_dict(official, ref)
    assert set(back) == set(ref) and all(torch.equal(back[k], ref[k]) for k in ref)


@pytest.mark.parametrize("depth", [18, 50])
def test_timm_resnet_names_are_mmdet_resnet_names(depth: int) -> None:
    with torch.device("meta"):
        body = build_backbone(RMPSAMConfig(backbone=f"resnet{depth}"))
    ref = {f"backbone.{k}": v for k, v in body.state_dict().items()}
    official = _meta(official_resnet(depth))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no tensor left over on either side
        out = from_official_state_dict(official, ref)
    assert set(out) == set(ref) and len(official) == len(ref)


# the layout switches at the values of this package's own layout (RMPSAMConfig's defaults)
OUR_LAYOUT = {
    "neck_widths": "uniform",
    "neck_output_relu": True,
    "head_bias": True,
    "iou_from": "query",
    "adapter_heads": "mlp",
    "prompt_type_rows": 3,
}


def _released_r50() -> dict[str, torch.Tensor]:
    """The released R50 model (C = 256, 100 queries, 3 stages, FFN 2048, 768-d class embeddings of
    the ConvNeXt-L CLIP text tower, 133 COCO classes), on the meta device."""
    return _meta(
        official_resnet(50)
        | official_neck([256, 512, 1024, 2048], 128, 256)
        | official_head(256, num_queries=100, num_stages=3, ffn=2048, cls_dim=768)
    )


def test_released_r50_layout_what_loads_and_what_does_not() -> None:
    """The released R50 layout against ``r50()`` switched to this package's own module layout."""
    cfg = r50().replace(**OUR_LAYOUT)
    with torch.device("meta"):
        model = RMPSAM(cfg, class_embed=torch.zeros(133, 1, 768))
    ref = model.state_dict()
    official = _released_r50()
    report = official_key_report(official, ref)
    assert set(report["unused"]) == LEFTOVERS
    assert set(report["missing"]) == {k for k in ref if k.startswith(NO_COUNTERPART[1:])}
    # the official neck gives level i c_i / 2 channels, ours C = 256 at every level: where the
    # widths differ the tensors do not fit (lateral 1, DCN 2's BN and deconv, conv_a3 happen to)
    bn = ("weight", "bias", "running_mean", "running_var")
    expected = {f"neck.lateral.{i}.{p}" for i in (0, 2, 3) for p in ("weight", "bias")}
    expected |= {
        "neck.td.0.0.offset.weight",
        "neck.td.1.0.offset.weight",
        "neck.td.0.3.weight",
        "neck.td.2.3.weight",
    }
    expected |= {f"neck.td.{k}.0.conv.weight" for k in range(3)}
    expected |= {f"neck.td.{k}.{m}.{p}" for k in (0, 2) for m in (1, 4) for p in bn}
    expected |= {f"neck.agg.{k}.weight" for k in (0, 1, 3)}
    assert {m.split(" <- ")[0] for m in report["mismatched"]} == expected
    # one official tensor per tensor of ours, but for the implied ones (6 zero biases, the pixel
    # statistics) and the class embeddings, which the checkpoint does not hold
    assert len(ref) - len(report["missing"]) - 9 == len(official) - len(LEFTOVERS)


# ---------------------------------------------------------------- the official layout
def test_layout_switches_default_to_ours_and_the_presets_to_the_released_layout() -> None:
    assert {k: getattr(RMPSAMConfig(), k) for k in OUR_LAYOUT} == OUR_LAYOUT
    official = RMPSAMConfig().official_layout()
    assert all(getattr(official, k) != v for k, v in OUR_LAYOUT.items())
    for preset in (r18(), r50(), convnext_l()):
        assert preset == preset.official_layout() and preset.embed_dim == 768
    assert r50().replace(**OUR_LAYOUT) == RMPSAMConfig(
        num_things=80,
        num_stuff=53,
        backbone="resnet50",
        channels=256,
        agg_channels=128,
        num_queries=100,
        num_stages=3,
        num_heads=8,
        ffn_dim=2048,
        class_head="cosine",
        embed_dim=768,
    )
    for bad in ({"neck_widths": "half"}, {"iou_from": "both"}, {"adapter_heads": "x"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            RMPSAMConfig(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt_type_rows"):
        RMPSAMConfig(prompt_type_rows=4)
    with pytest.raises(ValueError, match="halves the backbone widths"):
        RMPSAMConfig(backbone_channels=(1, 32, 64, 128), neck_widths="official")


def test_released_r50_layout_loads_strictly_into_r50() -> None:
    with torch.device("meta"):
        model = RMPSAM(r50(), class_embed=torch.zeros(133, 1, 768))
    ref = model.state_dict()
    official = _released_r50()
    assert official_key_report(official, ref) == {"missing": [], "mismatched": [], "unused": []}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing dropped on either side
        loaded = from_official_state_dict(official, ref)
    result = model.load_state_dict(loaded, strict=True)
    assert result.missing_keys == [] and result.unexpected_keys == []
    # one official tensor per tensor of ours, but for the pixel statistics of the released
    # preprocessing and the class embeddings (not in the checkpoint): nothing is invented
    assert set(ref) - {"pixel_mean", "pixel_std", "class_embed"} == {
        k for k in ref if _official_name_of(k) in official
    }
    assert len(ref) == len(official) + 3
    assert set(to_official_state_dict(ref)) == set(official) | {"pixel_mean", "pixel_std", "class_embed"}


def _official_name_of(ours: str) -> str:
    return next(iter(to_official_state_dict({ours: torch.zeros(1)})))


# backbone levels of distinct widths, so the neck's levels are c_i / 2 = 32, 64, 128, 256 wide
# (ResNet-18), unlike C; a real (small) ResNet, so that every tensor of the model has an official one
TINY_OFFICIAL = RMPSAMConfig(
    backbone="resnet18",
    channels=C,
    agg_channels=AGG,
    num_queries=QUERIES,
    num_stages=STAGES,
    ffn_dim=FFN,
    class_head="cosine",
    embed_dim=EMBED,
).official_layout()


def _tiny_official_pair() -> tuple[RMPSAM, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = RMPSAM(TINY_OFFICIAL).eval()
    shapes = (
        official_resnet(18)
        | official_neck([64, 128, 256, 512], AGG, C)
        | official_head(C, num_queries=QUERIES, num_stages=STAGES, ffn=FFN, cls_dim=EMBED)
    )
    official = _fill(shapes, seed=1)
    for k in official:
        if k.startswith("backbone.") and k.endswith(".weight") and official[k].ndim == 4:
            official[k] = official[k] * 0.3  # keeps the random ResNet's activations moderate
    return model, official


def test_tiny_official_state_dict_loads_strictly_and_runs() -> None:
    model, official = _tiny_official_pair()
    ref = model.state_dict()
    assert official_key_report(official, ref) == {"missing": [], "mismatched": [], "unused": []}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = from_official_state_dict(official, ref)
    model.load_state_dict(loaded, strict=True)
    state = model.state_dict()
    pairs = {
        "neck.lateral.0.weight": "neck.deconv.lateral_conv3.weight",  # (32, 64): c_1 / 2 wide
        "neck.td.0.0.conv.weight": "neck.deconv.deform_conv1.dcn.weight",  # 256 -> 128
        "neck.agg.0.weight": "neck.deconv.conv_a5.weight",  # reads 256 channels
        "stages.1.cls.pre.0.weight": "panoptic_head.mask_heads.1.cls_fcs.0.weight",
        "stages.0.mask_head.0.weight": "panoptic_head.mask_heads.0.mask_fcs.0.weight",
        "prompt_encoder.pb_embed.weight": "panoptic_head.pb_embedding.weight",
        "object_adapter.cls_fc.weight": "panoptic_head.panoptic_cls.0.weight",
        "object_adapter.cls_fc.bias": "panoptic_head.panoptic_cls.0.bias",
        "prompt_adapter.iou_fc.weight": "panoptic_head.prompt_iou.weight",
        "prompt_adapter.iou_fc.bias": "panoptic_head.prompt_iou.bias",
    }
    for ours, off in pairs.items():
        assert torch.equal(state[ours], official[off]), ours
    assert "stages.0.cls.pre.0.bias" not in state and "stages.1.mask_head.0.bias" not in state
    # the way back gives the official state dict (plus our buffers outside the checkpoint)
    back = to_official_state_dict(state)
    assert set(back) == set(official) | {"pixel_mean", "pixel_std", "class_embed"}
    assert all(torch.equal(back[k], official[k]) for k in official)

    with torch.no_grad():
        pan = model(torch.rand(2, 3, 32, 32), task="panoptic")
        clicks = model(
            torch.rand(1, 3, 32, 32), task="interactive", prompts={"points": torch.tensor([[[5.5, 9.5]]])}
        )
        boxes = model(
            torch.rand(1, 3, 32, 32),
            task="interactive",
            prompts={"boxes": torch.tensor([[[2.0, 3.0, 20.0, 30.0], [0.0, 0.0, 8.0, 8.0]]])},
        )
    assert pan["logits"].shape == (2, QUERIES, 7) and pan["masks"].shape == (2, QUERIES, 8, 8)
    assert clicks["masks"].shape == (1, 1, 8, 8) and boxes["iou"].shape == (1, 2)
    for out in (pan, clicks, boxes):
        assert all(bool(torch.isfinite(out[k]).all()) for k in ("logits", "masks", "iou"))


def _lin(x: torch.Tensor, sd: dict[str, torch.Tensor], p: str) -> torch.Tensor:
    return F.linear(x, sd[f"{p}.weight"], sd.get(f"{p}.bias"))


def _conv2d(x: torch.Tensor, sd: dict[str, torch.Tensor], p: str, padding: int = 0) -> torch.Tensor:
    return F.conv2d(x, sd[f"{p}.weight"], sd.get(f"{p}.bias"), padding=padding)


def _official_neck(sd: dict[str, torch.Tensor], feats: list[torch.Tensor]) -> torch.Tensor:
    """``YOSONeck`` at inference, written from its module code: laterals from stride 32 down, each
    ``DeformLayer`` (modulated DCN + BN + ReLU, stride-2 transposed conv + BN + ReLU) added to the
    next lateral, the four levels projected and upsampled by a scale factor, summed with the bias,
    a 3x3 ``output_conv`` without ReLU, coordinates (x, y) and ``loc_conv``."""
    d = "neck.deconv"

    def bn(x: torch.Tensor, p: str) -> torch.Tensor:
        stats = (sd[f"{p}.running_mean"], sd[f"{p}.running_var"], sd[f"{p}.weight"], sd[f"{p}.bias"])
        return F.batch_norm(x, *stats, training=False, eps=1e-5)

    def deform_layer(x: torch.Tensor, p: str) -> torch.Tensor:
        o1, o2, m = _conv2d(x, sd, f"{p}.dcn_offset", 1).chunk(3, dim=1)
        x = deform_conv2d(x, torch.cat([o1, o2], 1), sd[f"{p}.dcn.weight"], padding=1, mask=m.sigmoid())
        x = F.relu(bn(x, f"{p}.dcn_bn"))
        x = F.conv_transpose2d(x, sd[f"{p}.up_sample.weight"], stride=2, padding=1)
        return F.relu(bn(x, f"{p}.up_bn"))

    x5 = _conv2d(feats[3], sd, f"{d}.lateral_conv0")
    x4 = _conv2d(feats[2], sd, f"{d}.lateral_conv1") + deform_layer(x5, f"{d}.deform_conv1")
    x3 = _conv2d(feats[1], sd, f"{d}.lateral_conv2") + deform_layer(x4, f"{d}.deform_conv2")
    x2 = _conv2d(feats[0], sd, f"{d}.lateral_conv3") + deform_layer(x3, f"{d}.deform_conv3")

    def up(x: torch.Tensor, s: int) -> torch.Tensor:
        return F.interpolate(x, scale_factor=s, mode="bilinear", align_corners=False)

    x = up(_conv2d(x5, sd, f"{d}.conv_a5"), 8) + up(_conv2d(x4, sd, f"{d}.conv_a4"), 4)
    x = x + up(_conv2d(x3, sd, f"{d}.conv_a3"), 2) + _conv2d(x2, sd, f"{d}.conv_a2") + sd[f"{d}.bias"]
    x = _conv2d(x, sd, f"{d}.output_conv", 1)
    b, _, h, w = x.shape
    gy, gx = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    coords = torch.stack([gx, gy])[None].expand(b, -1, -1, -1)  # (B, 2, h, w): x, then y
    return _conv2d(torch.cat([x, coords], 1), sd, "neck.loc_conv")


def _official_cosine(emb: torch.Tensor, class_embed: torch.Tensor) -> torch.Tensor:
    """``exp(4.6052)`` x the max cosine over prototypes, with the zero background token (logit 0)."""
    cos = torch.einsum("bnd,kpd->bnkp", F.normalize(emb, dim=-1), class_embed).amax(-1)
    return torch.cat([math.exp(4.6052) * cos, torch.zeros_like(cos[..., :1])], dim=-1)


def test_official_layout_computes_what_the_released_modules_compute() -> None:
    """Neck, stage heads, adapters and prompt encoding of the official layout against the released
    modules' computation on the same tensors (the shared parts, kernel updates and attention, are
    mapped by name and unchanged between the layouts)."""
    model, sd = _tiny_official_pair()
    model.load_state_dict(from_official_state_dict(sd, model.state_dict()), strict=True)
    emb = model.class_embed
    x = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    h = "panoptic_head"
    with torch.no_grad():
        feats = model.backbone((x - model.pixel_mean) / model.pixel_std)
        pan = model(x, task="panoptic")
        ref = _official_neck(sd, feats)
        f = pan["features"]
        assert torch.allclose(f, ref, rtol=1e-4, atol=1e-4 * float(ref.abs().max()))
        # each stage's heads read its output query: IoU from the mask branch, bias-free first layers
        for i, out in enumerate(pan["aux"][:STAGES]):
            p, q = f"{h}.mask_heads.{i}", out["queries"]
            mask_feat = F.relu(
                F.layer_norm(_lin(q, sd, f"{p}.mask_fcs.0"), (C,), *_wb(sd, f"{p}.mask_fcs.1"))
            )
            cls_feat = F.relu(F.layer_norm(_lin(q, sd, f"{p}.cls_fcs.0"), (C,), *_wb(sd, f"{p}.cls_fcs.1")))
            iou = mask_feat
            cls = cls_feat
            for j in (0, 2, 4):
                iou = _lin(iou, sd, f"{p}.iou_embed.{j}")
                cls = _lin(cls, sd, f"{p}.cls_proj.{j}")
                if j < 4:
                    iou, cls = F.relu(iou), F.relu(cls)
            masks = torch.einsum("bnc,bchw->bnhw", _lin(mask_feat, sd, f"{p}.fc_mask"), f)
            assert torch.allclose(out["iou"], iou.squeeze(-1), atol=1e-5)
            assert torch.allclose(out["masks"], masks, atol=1e-4)
            # (the scale: ours 100, the released exp(4.6052) = 100.003)
            assert torch.allclose(out["logits"], _official_cosine(cls, emb) / 0.1, rtol=1e-4, atol=1e-3)
        # object adapter: one Linear to the class embedding, the adapted query is the mask kernel
        q = pan["aux"][-1]["queries"]
        assert torch.allclose(
            pan["logits"], _official_cosine(_lin(q, sd, f"{h}.panoptic_cls.0"), emb), rtol=1e-4, atol=1e-3
        )
        assert torch.allclose(pan["masks"], torch.einsum("bnc,bchw->bnhw", q, f), atol=1e-5)
        # prompts: pos_linear on the (y, x, w, h) codes + pb_embedding row 1 + the mask token
        boxes = torch.tensor([[[2.0, 3.0, 20.0, 30.0], [4.0, 0.0, 10.0, 6.0], [1.0, 1.0, 7.0, 7.0]]])
        kinds = torch.tensor([[0, 1, 2]])  # positive point, box, negative point
        cx, cy = (boxes[0, :, 0] + boxes[0, :, 2]) / 64, (boxes[0, :, 1] + boxes[0, :, 3]) / 64
        wh = (boxes[0, :, 2:] - boxes[0, :, :2]) / 32
        codes = _yxwh_codes(torch.stack([cx, cy, wh[:, 0], wh[:, 1]], dim=-1))
        rows = sd[f"{h}.pb_embedding.weight"][torch.tensor([1, 1, 0])]
        expected = _lin(codes, sd, f"{h}.pos_linear") + rows + sd[f"{h}.mask_tokens.weight"]
        assert torch.allclose(model.encode_prompts(boxes, kinds, 32, 32)[0], expected, atol=1e-5)
        # prompt adapter: one Linear for the IoU, the adapted query is the mask kernel
        inter = model(x, task="interactive", prompts={"boxes": boxes})
        q = inter["aux"][-1]["queries"]
        assert torch.allclose(inter["iou"], _lin(q, sd, f"{h}.prompt_iou").squeeze(-1), atol=1e-5)
        assert torch.allclose(inter["masks"], torch.einsum("bnc,bchw->bnhw", q, inter["features"]), atol=1e-5)


def _wb(sd: dict[str, torch.Tensor], p: str) -> tuple[torch.Tensor, torch.Tensor]:
    return sd[f"{p}.weight"], sd[f"{p}.bias"]


def test_official_layout_names_a_missing_or_reshaped_released_tensor() -> None:
    model, official = _tiny_official_pair()
    ref = model.state_dict()
    gone = dict(official)
    del gone["panoptic_head.prompt_iou.bias"]
    with pytest.raises(
        KeyError, match=re.escape("['prompt_adapter.iou_fc.bias (official panoptic_head.prompt_iou.bias)']")
    ):
        from_official_state_dict(gone, ref)
    # a neck written with C-wide levels (this package's default) does not fit the official layout
    uniform = {**official, "neck.deconv.lateral_conv0.weight": torch.zeros(C, 512, 1, 1)}
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"neck.lateral.3.weight <- neck.deconv.lateral_conv0.weight: ({C}, 512, 1, 1) != (256,"
        ),
    ):
        from_official_state_dict(uniform, ref)
    # a 3-row type embedding (this package's default) has no place in the official layout
    extra = {**official, "prompt_encoder.type_embed.weight": torch.zeros(3, C)}
    with pytest.warns(
        UserWarning, match=re.escape("1 official tensors are dropped: ['prompt_encoder.type_embed")
    ):
        from_official_state_dict(extra, ref)
