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

The feature net of the shipped B-AE is shipped too (``FEATURE_NET``, trained by
:func:`pretrain_feature_net`, ``iclr25 pretrain bigr feature_net``).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr25._core.claims import ProgressFn
from iclr25._core.pretrained import RecipeRun, require_artefact
from iclr25.methods.bigr.config import FeatureNetRecipe
from iclr25.methods.bigr.probe import _fit_classifier, fit_classifier

__all__ = [
    "FEATURE_NET",
    "FeatureNet",
    "PerceptualLoss",
    "load_feature_net",
    "pretrain_feature_net",
    "save_feature_net",
    "train_feature_net",
]

#: The shipped feature net of the B-AE's perceptual loss (``config.json``, ``model.safetensors``,
#: ``training.json``), written by :func:`pretrain_feature_net`.
FEATURE_NET = Path(__file__).parent / "pretrained" / "feature_net"


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
        self.num_classes, self.in_channels, self.widths = num_classes, in_channels, tuple(widths)
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


def save_feature_net(net: FeatureNet, directory: str | os.PathLike[str]) -> Path:
    """Write ``config.json`` (the constructor's arguments) and ``model.safetensors``.

    Returns:
        The folder.
    """
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    config = {"num_classes": net.num_classes, "in_channels": net.in_channels, "widths": list(net.widths)}
    (d / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, d / "model.safetensors")
    return d


def load_feature_net(directory: str | os.PathLike[str] = FEATURE_NET) -> FeatureNet:
    """The shipped feature net (or one :func:`pretrain_feature_net` wrote to ``directory``), eval mode.

    Raises:
        ArtefactMissingError: the folder lacks ``config.json``, ``model.safetensors`` or
            ``training.json`` (the message names the command that trains it).
    """
    from safetensors.torch import load_file

    d = require_artefact(directory, method="bigr", name="feature_net")
    config = json.loads((d / "config.json").read_text())
    net = FeatureNet(config["num_classes"], in_channels=config["in_channels"], widths=tuple(config["widths"]))
    net.load_state_dict(load_file(d / "model.safetensors"))
    return net.eval()


def pretrain_feature_net(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of the shipped feature net: :class:`~iclr25.methods.bigr.config.FeatureNetRecipe`.

    Trains a :class:`FeatureNet` to name the 16 shape x colour classes of shapes-world images
    (split "perceptual", every background) and writes ``config.json``, ``model.safetensors`` and
    ``training.json`` (the recipe, every step's loss and the accuracy on held-out images of the
    split "perceptual_test") into ``out``. An unfinished run checkpoints into ``out`` every 500
    steps and resumes from there when called again.

    Args:
        out: the folder to write.
        progress: called as ``progress("feature net", done, total)`` every 50 steps.
        max_steps: stop after this many steps and write nothing (replays the first steps).

    Returns:
        The per-step training losses.
    """
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig

    recipe = FeatureNetRecipe()
    run = RecipeRun(out, replay=max_steps is not None)
    world = ShapesWorld(WorldConfig(image_size=recipe.image_size), seed=recipe.seed)
    X, y = world.classification_arrays(recipe.n_images, split="perceptual")
    images, labels = _to_images(X), torch.tensor(y)
    torch.manual_seed(recipe.seed)  # the initialisation
    net = FeatureNet(len(world.class_names()), in_channels=images.shape[1], widths=recipe.widths)
    losses = _fit_classifier(
        net, images, labels, steps=recipe.steps, batch_size=recipe.batch_size, lr=recipe.lr,
        generator=torch.Generator().manual_seed(recipe.seed), stop=max_steps, state=run.state,
        checkpoint=run.checkpoint, progress=lambda d, t: progress("feature net", d, t), progress_every=50,
    )  # fmt: skip
    if max_steps is not None:
        return losses
    X, y = world.classification_arrays(recipe.n_heldout, split="perceptual_test")
    with torch.no_grad():
        accuracy = float((net(_to_images(X)).argmax(-1) == torch.tensor(y)).float().mean())
    save_feature_net(net, out)
    run.finish(
        command=f"iclr25 pretrain bigr feature_net --out {out}",
        loss_curve=losses,
        quality={"heldout_accuracy": accuracy},
        data=f"shapes world seed {recipe.seed}, split 'perceptual': {recipe.n_images} images of "
        f"{len(world.class_names())} shape x colour classes, every background",
        config=dataclasses.asdict(recipe),
    )
    return losses


def _to_images(X: Any) -> torch.Tensor:
    """uint8 (n, H, W, 3) -> float (n, 3, H, W) in [-1, 1]."""
    return torch.tensor(X, dtype=torch.float32).permute(0, 3, 1, 2) / 127.5 - 1


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
