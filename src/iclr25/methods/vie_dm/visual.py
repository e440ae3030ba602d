"""Visual features of VIE-DM: an image encoder's token grid, RoIAlign target features, box embedding.

The paper encodes the image with a Swin backbone (as in QRNet) and describes the target by its
region features; here the encoder is any module returning a (B, C, h, w) feature map (a small CNN
at CPU scale, a timm backbone at paper scale), target features come from
``torchvision.ops.roi_align`` (boxes XYXY in input pixels, ``spatial_scale = 1/stride``,
``aligned=True``) and the box is embedded from its normalised (x1, y1, x2, y2, area).

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (visual encoder and
    target features of the VTC module).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr25.common import rng

__all__ = [
    "BoxEmbedding",
    "ImageEncoder",
    "check_boxes",
    "encoder_features",
    "pretrain_encoder",
    "roi_features",
]


class ImageEncoder(nn.Module):
    """A small CNN of 3 x 3 conv stages (GroupNorm, GELU), then a 1 x 1 conv that mixes the channels;
    output (B, C, H / stride, W / stride) with stride the product of the stage strides.

    Args:
        channels: output channels of each stage.
        strides: stride of each stage (1 or 2; default 2 everywhere).

    Example:
        >>> enc = ImageEncoder((16, 32, 32))
        >>> enc(torch.zeros(2, 3, 48, 48)).shape, enc.stride
        (torch.Size([2, 32, 6, 6]), 8)
        >>> ImageEncoder((16, 32, 32), strides=(2, 2, 1))(torch.zeros(1, 3, 48, 48)).shape
        torch.Size([1, 32, 12, 12])
    """

    def __init__(
        self, channels: tuple[int, ...] = (16, 32, 32), strides: tuple[int, ...] | None = None
    ) -> None:
        super().__init__()
        if len(channels) < 1:
            raise ValueError("channels needs at least one stage")
        strides = strides if strides is not None else (2,) * len(channels)
        if len(strides) != len(channels) or any(s not in (1, 2) for s in strides):
            raise ValueError(
                f"strides must give 1 or 2 for each of the {len(channels)} stages, got {strides}"
            )
        layers: list[nn.Module] = []
        for cin, cout, s in zip((3, *channels[:-1]), channels, strides, strict=True):
            layers += [nn.Conv2d(cin, cout, 3, stride=s, padding=1), nn.GroupNorm(1, cout), nn.GELU()]
        layers.append(nn.Conv2d(channels[-1], channels[-1], 1))
        self.net = nn.Sequential(*layers)
        self.stride = 1
        for s in strides:
            self.stride *= s
        self.out_channels = channels[-1]

    def forward(self, images: Tensor) -> Tensor:
        """Feature map of images (B, 3, H, W) in [0, 1]."""
        return self.net(images * 2.0 - 1.0)


def encoder_features(encoder: nn.Module, images: Tensor, *, frozen: bool) -> Tensor:
    """The encoder's feature map; a frozen encoder runs in eval mode without gradient."""
    if not frozen:
        return encoder(images)
    encoder.eval()
    with torch.no_grad():
        return encoder(images)


def check_boxes(boxes: Tensor, height: int, width: int) -> None:
    """Raise ``ValueError`` for empty boxes (x2 <= x1 or y2 <= y1) or boxes outside the image."""
    if boxes.ndim != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"boxes must have shape (N, 4) XYXY, got {tuple(boxes.shape)}")
    if bool(((boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])).any()):
        raise ValueError("empty box: every box needs x2 > x1 and y2 > y1 (XYXY pixels)")
    if bool((boxes[:, :2] < 0).any() or (boxes[:, 2] > width).any() or (boxes[:, 3] > height).any()):
        raise ValueError(f"box outside the {width} x {height} image")


def roi_features(fmap: Tensor, boxes: Tensor, *, stride: int, output_size: int = 3) -> Tensor:
    """RoIAlign features of one box per image.

    Args:
        fmap: (B, C, h, w) feature maps.
        boxes: (B, 4) XYXY boxes in input pixels, box b on image b.
        stride: input pixels per feature cell (spatial_scale = 1/stride).
        output_size: the RoI grid side.

    Returns:
        (B, output_size**2, C) target tokens, row-major over the RoI grid.
    """
    from torchvision.ops import roi_align

    rois = torch.cat(
        [torch.arange(len(boxes), dtype=fmap.dtype, device=fmap.device)[:, None], boxes.to(fmap)], 1
    )
    out = roi_align(fmap, rois, output_size, spatial_scale=1.0 / stride, sampling_ratio=2, aligned=True)
    return out.flatten(2).transpose(1, 2)  # (B, s*s, C)


class BoxEmbedding(nn.Module):
    """Linear embedding of the normalised box (x1/W, y1/H, x2/W, y2/H, area/(W H))."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Sequential(nn.Linear(5, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, boxes: Tensor, height: int, width: int) -> Tensor:
        """(B, 4) pixel boxes -> (B, dim)."""
        scale = boxes.new_tensor([width, height, width, height])
        b = boxes / scale
        area = ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[:, None]
        return self.proj(torch.cat([b, area], 1))


def pretrain_encoder(
    encoder: ImageEncoder,
    images: Tensor,
    rows: Tensor,
    boxes: Tensor,
    labels: Tensor,
    *,
    n_classes: tuple[int, ...],
    epochs: int,
    batch_size: int = 16,
    lr: float = 3e-3,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> list[float]:
    """Pre-train ``encoder`` on object attribute classification from RoI features.

    Each step encodes a batch of images once and classifies every object of them from its RoIAlign
    features (one linear head per attribute).

    Args:
        encoder: trained in place.
        images: (S, 3, H, W) scenes.
        rows: (N,) scene index of each object.
        boxes: (N, 4) XYXY boxes of the objects.
        labels: (N, A) integer labels of A attributes (e.g. shape, colour, size).
        n_classes: classes of each attribute.
        epochs: passes over the scenes.
        batch_size: scenes per step.
        lr: AdamW learning rate.
        generator: shuffling (drawn on its own device, the CPU for the usual CPU generator, so a
            CPU run repeats bit for bit).
        device: where the encoder (moved there in place), the heads and each batch go; None keeps
            the encoder where it is. The data tensors may live on any device.

    Returns:
        Mean loss of each epoch.
    """
    dev = next(encoder.parameters()).device if device is None else torch.device(device)
    encoder.to(dev)
    rows = rows.cpu()  # scene bookkeeping stays on the CPU
    c = encoder.out_channels
    # the heads are initialised on the CPU (the global CPU stream) and then moved
    heads = nn.ModuleList([nn.Linear(c * 9, k) for k in n_classes]).to(dev)
    opt = torch.optim.AdamW([*encoder.parameters(), *heads.parameters()], lr=lr)
    losses = []
    encoder.train()
    for _ in range(epochs):
        perm = rng.randperm(len(images), generator=generator)  # on the CPU
        total = 0.0
        for start in range(0, len(perm), batch_size):
            scenes = perm[start : start + batch_size]
            pos = torch.full((len(images),), -1, dtype=torch.long)
            pos[scenes] = torch.arange(len(scenes))
            idx = (pos[rows] >= 0).nonzero()[:, 0]  # objects of these scenes
            fmap = encoder(images[scenes].to(dev))  # (b, C, h, w)
            feats = roi_features(fmap[pos[rows[idx]]], boxes[idx].to(dev), stride=encoder.stride).flatten(1)
            loss = sum(F.cross_entropy(h(feats), labels[idx, a].to(dev)) for a, h in enumerate(heads))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(scenes)
        losses.append(total / len(perm))
    encoder.eval()
    return losses
