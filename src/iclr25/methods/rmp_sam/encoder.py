"""Encoder of RMP-SAM: a backbone with four feature levels and the YOSO-style lite neck.

Paper: *RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything*, Xu et al., ICLR 2025,
arXiv:2401.10228, Sec. 3.2 ("lite feature extractor"). The neck fuses strides 4-32 into one
stride-4 map F of width C; there is no multi-scale pixel decoder, the main source of its speed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import DeformConv2d

from iclr25.methods.rmp_sam.config import RMPSAMConfig

__all__ = ["ConvNet", "DCNv2", "LiteNeck", "build_backbone", "coord_channels"]


def _conv_bn(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
    )


class ConvNet(nn.Module):
    """A 4-stage conv net whose stages have strides 4, 8, 16 and 32.

    Shape:
        input (B, 3, H, W); output a list of 4 maps (B, c_i, H / 2^(i+2), W / 2^(i+2)).

    Example:
        >>> [f.shape[-1] for f in ConvNet((8, 8, 8, 8))(torch.zeros(1, 3, 64, 64))]
        [16, 8, 4, 2]
    """

    def __init__(self, channels: tuple[int, ...] = (16, 32, 64, 128)) -> None:
        super().__init__()
        c = channels
        self.stem = nn.Sequential(_conv_bn(3, c[0], 2), _conv_bn(c[0], c[0], 1))
        self.stages = nn.ModuleList(
            [nn.Sequential(_conv_bn(c[0], c[0], 2), _conv_bn(c[0], c[0], 1))]
            + [nn.Sequential(_conv_bn(c[i - 1], c[i], 2), _conv_bn(c[i], c[i], 1)) for i in range(1, 4)]
        )
        self.channels = tuple(c)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        x = self.stem(x)
        out = []
        for stage in self.stages:
            x = stage(x)
            out.append(x)
        return out


class _TimmBackbone(nn.Module):
    def __init__(self, name: str, pretrained: bool) -> None:
        super().__init__()
        import timm

        self.body = timm.create_model(name, pretrained=pretrained, features_only=True)
        info = self.body.feature_info
        # the four levels with strides 4, 8, 16, 32
        idx = [i for i, r in enumerate(info.reduction()) if r in (4, 8, 16, 32)][-4:]
        if len(idx) != 4:
            raise ValueError(f"timm model {name!r} does not give strides 4, 8, 16 and 32")
        self.idx = idx
        self.channels = tuple(info.channels()[i] for i in idx)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        feats = self.body(x)
        return [feats[i] for i in self.idx]


def build_backbone(config: RMPSAMConfig) -> nn.Module:
    """The conv net or a timm backbone; ``.channels`` lists its four level widths."""
    if config.backbone == "convnet":
        net: nn.Module = ConvNet(config.backbone_channels)
    else:
        net = _TimmBackbone(config.backbone, config.pretrained)
    if config.frozen_backbone:
        for p in net.parameters():
            p.requires_grad_(False)
    return net


class DCNv2(nn.Module):
    """Modulated deformable 3x3 conv (DCNv2) on ``torchvision.ops.DeformConv2d``.

    One conv emits 27 channels chunked as (o1, o2, mask): offsets ``cat(o1, o2)`` and the modulation
    ``sigmoid(mask)``; it starts at zero, so the layer starts as a plain conv with mask 0.5.
    """

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.offset = nn.Conv2d(cin, 27, 3, padding=1)
        nn.init.zeros_(self.offset.weight)
        nn.init.zeros_(self.offset.bias)
        self.conv = DeformConv2d(cin, cout, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o1, o2, mask = torch.chunk(self.offset(x), 3, dim=1)
        return self.conv(x, torch.cat([o1, o2], dim=1), torch.sigmoid(mask))


def coord_channels(b: int, h: int, w: int, like: torch.Tensor) -> torch.Tensor:
    """Two normalised coordinate channels in [-1, 1] (x, then y) of shape (b, 2, h, w) (CoordConv)."""
    ys = torch.linspace(-1, 1, h, device=like.device, dtype=like.dtype)
    xs = torch.linspace(-1, 1, w, device=like.device, dtype=like.dtype)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy]).unsqueeze(0).expand(b, -1, -1, -1)


def _bilinear_deconv(c: int) -> nn.ConvTranspose2d:
    """Stride-2 transposed conv initialised to bilinear upsampling (per channel)."""
    up = nn.ConvTranspose2d(c, c, 4, stride=2, padding=1, bias=False)
    f = torch.tensor([0.25, 0.75, 0.75, 0.25])
    kernel = f[:, None] * f[None, :]
    with torch.no_grad():
        up.weight.zero_()
        for i in range(c):
            up.weight[i, i] = kernel
    return up


class LiteNeck(nn.Module):
    """YOSO-style neck: laterals, a deformable top-down path, aggregation, CoordConv -> F (stride 4).

    Args:
        in_channels: widths of the four backbone levels (strides 4, 8, 16, 32).
        channels: C, the width of F.
        agg_channels: width of the aggregation projections and the 3x3 output conv.
        deform: DCNv2 in the top-down path (False: plain 3x3 convs).
        level_channels: width of each level after its lateral (strides 4..32); None gives C to every
            level (the released neck: ``c_i // 2``).
        output_relu: ReLU after the 3x3 output conv (the released neck has none).

    Shape:
        input four maps (strides 4..32); output (B, C, H/4, W/4).
    """

    def __init__(
        self,
        in_channels: tuple[int, ...],
        channels: int,
        agg_channels: int,
        deform: bool = True,
        *,
        level_channels: tuple[int, ...] | None = None,
        output_relu: bool = True,
    ) -> None:
        super().__init__()
        c = channels
        w = tuple(level_channels) if level_channels is not None else (c,) * len(in_channels)
        if len(w) != len(in_channels) or min(w) < 1:
            raise ValueError(f"need one positive width per backbone level, got {w} for {tuple(in_channels)}")
        self.lateral = nn.ModuleList([nn.Conv2d(ci, wi, 1) for ci, wi in zip(in_channels, w, strict=True)])

        def conv3(cin: int, cout: int) -> nn.Module:
            return DCNv2(cin, cout) if deform else nn.Conv2d(cin, cout, 3, padding=1, bias=False)

        # top-down blocks for levels 1/32, 1/16, 1/8, each to the next finer level's width:
        # (DCN + BN + ReLU, deconv x2 + BN + ReLU)
        self.td = nn.ModuleList(
            [
                nn.Sequential(
                    conv3(w[3 - k], w[2 - k]),
                    nn.BatchNorm2d(w[2 - k]),
                    nn.ReLU(inplace=True),
                    _bilinear_deconv(w[2 - k]),
                    nn.BatchNorm2d(w[2 - k]),
                    nn.ReLU(inplace=True),
                )
                for k in range(3)
            ]
        )
        # projections of the levels 1/32, 1/16, 1/8, 1/4
        self.agg = nn.ModuleList([nn.Conv2d(w[3 - k], agg_channels, 1, bias=False) for k in range(4)])
        self.agg_bias = nn.Parameter(torch.zeros(1, agg_channels, 1, 1))
        fuse: list[nn.Module] = [nn.Conv2d(agg_channels, agg_channels, 3, padding=1)]
        if output_relu:
            fuse.append(nn.ReLU(inplace=True))
        self.fuse = nn.Sequential(*fuse)
        self.out = nn.Conv2d(agg_channels + 2, c, 1)

    def forward(self, feats: list[torch.Tensor]) -> torch.Tensor:
        lat = [m(f) for m, f in zip(self.lateral, feats, strict=True)]
        levels = [lat[3]]  # 1/32 first
        x = lat[3]
        for k, block in enumerate(self.td):
            x = block(x)
            nxt = lat[2 - k]
            x = x[..., : nxt.shape[-2], : nxt.shape[-1]] + nxt
            levels.append(x)
        size = levels[-1].shape[-2:]
        agg = self.agg_bias
        for proj, lev in zip(self.agg, levels, strict=True):
            y = proj(lev)
            if y.shape[-2:] != size:
                y = F.interpolate(y, size=size, mode="bilinear", align_corners=False)
            agg = agg + y
        y = self.fuse(agg)
        b, _, h, w = y.shape
        return self.out(torch.cat([y, coord_channels(b, h, w, y)], dim=1))  # (B, C, H/4, W/4)
