"""The perceptual term of the B-AE loss, at CPU scale: LPIPS's distance over a shapes-trained CNN.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 3.1: the binary tokenizer is trained with
    L1 + LPIPS + a patch GAN, as in VQGAN (Esser et al., CVPR 2021).
    Zhang et al., *The Unreasonable Effectiveness of Deep Features as a Perceptual Metric*, CVPR
    2018 (LPIPS): unit-normalise each layer's features along channels, square the differences,
    sum over channels, average over space, sum over layers.

LPIPS runs an ImageNet-trained VGG, whose weights cannot be downloaded here and which sees
nothing at 16 x 16 pixels. :class:`FeatureNet` stands in for it: a small VGG-style CNN trained to
name the objects of the data set the tokenizer encodes, on images of their own (as the paper's
VGG, and the Inception network of its FID, are trained on ImageNet's classes). It is not the
evaluator that scores samples: another architecture, another seed and other images. The learned
per-channel weights of LPIPS (fitted to human judgements) have no counterpart; the layers count
equally (LPIPS's "baseline" variant). At paper scale pass ``torchmetrics``'
``LearnedPerceptualImagePatchSimilarity`` (local weights) as the ``perceptual`` callable of
:func:`~iclr25.methods.bigr.tokenizer.train_tokenizer` instead.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from iclr25.methods.bigr.probe import fit_classifier

__all__ = ["FeatureNet", "PerceptualLoss", "train_feature_net"]


class FeatureNet(nn.Module):
    """VGG-style CNN: three blocks of 3x3 convs (max-pool between), global max-pool, linear head.

    Args:
        num_classes: classes of the training labels.
        in_channels: image channels.
        widths: channels of the three blocks.

    Example:
        >>> net = FeatureNet(4, widths=(4, 8, 8))
        >>> [tuple(f.shape) for f in net.features(torch.zeros(2, 3, 16, 16))]
        [(2, 4, 16, 16), (2, 8, 8, 8), (2, 8, 4, 4)]
    """

    def __init__(
        self, num_classes: int, *, in_channels: int = 3, widths: tuple[int, int, int] = (32, 64, 128)
    ) -> None:
        super().__init__()
        a, b, c = widths

        def conv(cin: int, cout: int) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]

        self.blocks = nn.ModuleList(
            [
                nn.Sequential(*conv(in_channels, a), *conv(a, a)),
                nn.Sequential(nn.MaxPool2d(2), *conv(a, b), *conv(b, b)),
                nn.Sequential(nn.MaxPool2d(2), *conv(b, c)),
            ]
        )
        self.head = nn.Linear(c, num_classes)

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Images in [-1, 1] (B, C, H, W) -> the three blocks' outputs."""
        out = []
        for block in self.blocks:
            x = block(x)
            out.append(x)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits (B, num_classes)."""
        return self.head(self.features(x)[-1].amax(dim=(2, 3)))


def train_feature_net(
    images: torch.Tensor, labels: torch.Tensor, num_classes: int, *, steps: int = 2000, batch_size: int = 64,
    lr: float = 1e-3, generator: torch.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> FeatureNet:  # fmt: skip
    """Train a :class:`FeatureNet` with cross-entropy on images in [-1, 1] (n, C, H, W); eval mode."""
    net = FeatureNet(num_classes, in_channels=images.shape[1])
    return fit_classifier(net, images, labels, steps=steps, batch_size=batch_size, lr=lr,
                          generator=generator, progress=progress)  # fmt: skip


class PerceptualLoss(nn.Module):
    """LPIPS's distance with equal layer weights over a frozen :class:`FeatureNet`.

    ``loss(x_hat, x)`` is the batch mean of
    ``sum_l mean_hw || f_l(x_hat) / |f_l(x_hat)| - f_l(x) / |f_l(x)| ||^2``, norms along channels.
    The network's weights are frozen; gradients flow to ``x_hat``.

    Example:
        >>> loss = PerceptualLoss(FeatureNet(4, widths=(4, 8, 8)))
        >>> x = torch.rand(2, 3, 16, 16) * 2 - 1
        >>> float(loss(x, x))
        0.0
    """

    def __init__(self, net: FeatureNet, eps: float = 1e-10) -> None:
        super().__init__()
        self.net = net.eval()
        self.eps = eps
        for p in self.net.parameters():
            p.requires_grad_(False)

    def train(self, mode: bool = True) -> PerceptualLoss:
        """The network stays in eval mode."""
        super().train(mode)
        self.net.eval()
        return self

    def _unit(self, f: torch.Tensor) -> torch.Tensor:
        return f / (f.pow(2).sum(dim=1, keepdim=True) + self.eps).sqrt()

    def forward(self, x_hat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Distance between images in [-1, 1] of equal shape (B, C, H, W): a scalar."""
        if x_hat.shape != x.shape:
            raise ValueError(f"images must have equal shapes, got {tuple(x_hat.shape)} and {tuple(x.shape)}")
        total = x_hat.new_zeros(())
        for a, b in zip(self.net.features(x_hat), self.net.features(x), strict=True):
            total = total + (self._unit(a) - self._unit(b)).pow(2).sum(dim=1).mean()
        return total
