"""Evaluation of BiGR at CPU scale: linear probe, a project-trained evaluator CNN, an FID proxy.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 4 (FID-50k with an Inception network;
    linear-probe top-1 on pooled features). Here the Inception network is replaced by a small CNN
    trained on the same data set: its penultimate features feed torchmetrics'
    ``FrechetInceptionDistance`` (a proxy, not comparable with published FIDs), and its predictions
    give the conditional accuracy of samples. Precision/recall follow Kynkaenniemi et al. (2019),
    k-NN manifolds in the same feature space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common import rng
from iclr25.methods.bigr.checkpoint import _restore_train_state, _train_state

__all__ = [
    "Evaluator",
    "conditional_accuracy",
    "fid_proxy",
    "fit_classifier",
    "linear_probe",
    "precision_recall",
    "train_evaluator",
]


_Net = TypeVar("_Net", bound=nn.Module)


def linear_probe(
    f_tr: torch.Tensor | np.ndarray, y_tr: torch.Tensor | np.ndarray,
    f_te: torch.Tensor | np.ndarray, y_te: torch.Tensor | np.ndarray, *, C: float = 1.0, max_iter: int = 500,
) -> float:  # fmt: skip
    """Accuracy of a multinomial logistic regression on standardised features (scikit-learn).

    ``max_iter`` caps the L-BFGS iterations (a non-converged fit is accepted silently).
    """
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    def arr(x: torch.Tensor | np.ndarray) -> np.ndarray:
        return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=max_iter))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(arr(f_tr), arr(y_tr))
    return float(clf.score(arr(f_te), arr(y_te)))


class Evaluator(nn.Module):
    """Small CNN classifier whose penultimate layer is the FID-proxy feature space.

    conv(width) - conv(width) - max-pool - conv(2 width) - global max-pool - linear; the
    global max-pooled 2 width channels are the features.

    Args:
        num_classes: classes of the data set.
        in_channels: image channels.
        width: channels of the first two convs (doubled once).
    """

    def __init__(self, num_classes: int, *, in_channels: int = 3, width: int = 32) -> None:
        super().__init__()
        self.num_features = 2 * width  # read by torchmetrics' FID
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.AdaptiveMaxPool2d(1), nn.Flatten(),
        )  # fmt: skip
        self.head = nn.Linear(2 * width, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Images in [-1, 1], (B, C, H, W) -> features (B, num_features)."""
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits (B, num_classes)."""
        return self.head(self.body(x))


class _FIDFeature(nn.Module):
    """torchmetrics feature module: images in [0, 1] -> evaluator features."""

    def __init__(self, evaluator: Evaluator) -> None:
        super().__init__()
        self.evaluator = evaluator
        self.num_features = evaluator.num_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.uint8:
            x = x.float() / 255
        return self.evaluator.features(2 * x - 1)


def train_evaluator(
    images: torch.Tensor, labels: torch.Tensor, num_classes: int, *, steps: int = 1200, batch_size: int = 64,
    lr: float = 3e-3, generator: torch.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Evaluator:  # fmt: skip
    """Train the evaluator CNN on real images in [-1, 1] (n, C, H, W) with cross-entropy."""
    net = Evaluator(num_classes, in_channels=images.shape[1])
    return fit_classifier(net, images, labels, steps=steps, batch_size=batch_size, lr=lr,
                          generator=generator, progress=progress)  # fmt: skip


def fit_classifier(
    net: _Net, images: torch.Tensor, labels: torch.Tensor, *, steps: int, batch_size: int, lr: float,
    generator: torch.Generator | None = None, progress: Callable[[int, int], None] | None = None,
) -> _Net:  # fmt: skip
    """Adam on the cross-entropy of random batches; returns ``net`` in eval mode."""
    _fit_classifier(net, images, labels, steps=steps, batch_size=batch_size, lr=lr, generator=generator,
                    progress=progress)  # fmt: skip
    return net


def _fit_classifier(
    net: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, steps: int, batch_size: int, lr: float,
    generator: torch.Generator | None = None, progress: Callable[[int, int], None] | None = None,
    progress_every: int = 100, stop: int | None = None, state: dict[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None, every: int = 500,
) -> list[float]:  # fmt: skip
    """The loop of :func:`fit_classifier`; returns every step's loss and leaves ``net`` in eval mode.

    ``stop`` ends the run after that many steps; ``state`` (what ``checkpoint`` received, every
    ``every`` steps) resumes an unfinished one exactly.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError("steps and batch_size must be >= 1")
    if len(images) != len(labels):
        raise ValueError(f"{len(images)} images but {len(labels)} labels")
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    start, losses = 0, []
    if state is not None:
        start, losses = _restore_train_state(state, net, opt, None, generator)
    end = steps if stop is None else min(stop, steps)
    net.train()
    for step in range(start, end):
        idx = rng.randint(0, len(images), (batch_size,), generator=generator, device=images.device)
        loss = F.cross_entropy(net(images[idx]), labels[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if progress and (step + 1) % progress_every == 0:
            progress(step + 1, steps)
        if checkpoint is not None and (step + 1) % every == 0 and step + 1 < end:
            checkpoint(_train_state(step + 1, losses, net, opt, None, generator))
    net.eval()
    return losses


@torch.no_grad()
def conditional_accuracy(evaluator: Evaluator, images: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of images the evaluator assigns to the requested class."""
    return float((evaluator(images).argmax(-1) == labels).float().mean())


@torch.no_grad()
def fid_proxy(evaluator: Evaluator, real: torch.Tensor, fake: torch.Tensor) -> float:
    """Fréchet distance between evaluator features of real and fake images (both in [-1, 1]).

    Computed by torchmetrics' ``FrechetInceptionDistance`` with the evaluator as its ``feature``
    module: an FID *proxy*, meaningful only relative to other numbers from the same evaluator.
    """
    from torchmetrics.image.fid import FrechetInceptionDistance

    metric = FrechetInceptionDistance(feature=_FIDFeature(evaluator).eval(), normalize=True)
    for chunk in real.split(512):
        metric.update(((chunk + 1) / 2).clamp(0, 1), real=True)
    for chunk in fake.split(512):
        metric.update(((chunk + 1) / 2).clamp(0, 1), real=False)
    return float(metric.compute())


@torch.no_grad()
def precision_recall(
    evaluator: Evaluator, real: torch.Tensor, fake: torch.Tensor, *, k: int = 3
) -> tuple[float, float]:
    """Improved precision and recall (k-NN manifolds) in evaluator feature space."""
    fr, ff = evaluator.features(real), evaluator.features(fake)

    def radii(f: torch.Tensor) -> torch.Tensor:
        d = torch.cdist(f, f)
        return d.kthvalue(k + 1, dim=1).values  # k-th neighbour, skipping the point itself

    rr, rf = radii(fr), radii(ff)
    precision = (torch.cdist(ff, fr) <= rr[None]).any(1).float().mean()
    recall = (torch.cdist(fr, ff) <= rf[None]).any(1).float().mean()
    return float(precision), float(recall)
