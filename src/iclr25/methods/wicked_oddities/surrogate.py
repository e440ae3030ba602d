"""The attacker's surrogates: a SimCLR-style encoder and an OOD (K+1)-way classifier.

Sec. 3.2 of *Wicked Oddities* (Nguyen et al., ICLR 2025, arXiv:2407.10825) scores target-class
images in the feature space of a pretrained self-supervised encoder (VICReg ResNet-50 in the
paper), or with the loss of a classifier trained on out-of-distribution classes plus the target
images as class K. Here the encoder is a small CNN trained with the NT-Xent loss (SimCLR, Chen et
al. 2020) on a public unlabeled pool disjoint from the victim's data; any encoder fits the
:class:`Encoder` protocol through :class:`TorchEncoder` or :class:`SklearnEncoder`.

References:
    Nguyen et al., arXiv:2407.10825, Sec. 3.2; Chen et al., SimCLR, ICML 2020, Eq. 1 (NT-Xent).
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.wicked_oddities.config import SurrogateConfig

__all__ = [
    "ConvEncoder",
    "Encoder",
    "SklearnEncoder",
    "TorchEncoder",
    "nt_xent",
    "simclr_views",
    "train_ood_surrogate",
    "train_simclr_encoder",
]


class Encoder(Protocol):
    """Anything with ``encode(x (N, C, H, W) in [0, 1]) -> (N, d)``; it owns its preprocessing."""

    def encode(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - protocol
        """Features of images in [0, 1]."""
        ...


class TorchEncoder:
    """Wrap a torch module as an :class:`Encoder` with its own resize and normalisation.

    Args:
        module: maps normalised (N, C, size, size) to (N, d) (e.g. a resnet50 with ``fc=Identity``).
        resize: input side the module expects (None keeps the size).
        mean: per-channel mean of the normalisation.
        std: per-channel std of the normalisation.
        batch_size: images per forward pass.

    Example:
        >>> enc = TorchEncoder(nn.Flatten(), resize=None, mean=(0.5,), std=(0.5,))
        >>> enc.encode(torch.ones(2, 1, 2, 2)).tolist()
        [[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]
    """

    def __init__(
        self,
        module: nn.Module,
        resize: int | None = None,
        mean: tuple[float, ...] = (0.485, 0.456, 0.406),
        std: tuple[float, ...] = (0.229, 0.224, 0.225),
        batch_size: int = 256,
    ) -> None:
        self.module, self.resize, self.batch_size = module, resize, batch_size
        self.mean = torch.tensor(mean).view(1, -1, 1, 1)
        self.std = torch.tensor(std).view(1, -1, 1, 1)

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Features (N, d) of images (N, C, H, W) in [0, 1], in eval mode."""
        was_training = self.module.training
        self.module.eval()
        p = next(iter(self.module.parameters()), None)
        device = p.device if p is not None else x.device
        out = []
        for b in x.split(self.batch_size):
            if self.resize is not None:
                b = F.interpolate(b, size=(self.resize, self.resize), mode="bilinear", align_corners=False)
            b = (b - self.mean.to(b)) / self.std.to(b)
            out.append(self.module(b.to(device)).flatten(1).float().cpu())
        self.module.train(was_training)
        return torch.cat(out)


class SklearnEncoder:
    """Wrap a fitted scikit-learn transformer (e.g. ``PCA``) over flattened pixels.

    Example:
        >>> from sklearn.preprocessing import FunctionTransformer
        >>> SklearnEncoder(FunctionTransformer()).encode(torch.zeros(3, 1, 2, 2)).shape
        torch.Size([3, 4])
    """

    def __init__(self, transformer: object) -> None:
        self.transformer = transformer

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Features (N, d) from the transformer's ``transform`` of (N, C*H*W) pixels."""
        flat = x.reshape(len(x), -1).double().cpu().numpy()  # (N, C*H*W)
        return torch.as_tensor(np.asarray(self.transformer.transform(flat)), dtype=torch.float32)  # type: ignore[attr-defined]


class ConvEncoder(nn.Module):
    """A 3-layer CNN with a 64-d embedding and an MLP projection head (SimCLR-style).

    Args:
        in_channels: image channels.
        embed_dim: embedding size (features used for scoring).
        proj_dim: projection-head output (used by the loss only).

    Shape:
        (N, C, H, W) -> (N, embed_dim) from ``forward``; ``project`` gives (N, proj_dim).
    """

    def __init__(self, in_channels: int = 1, embed_dim: int = 64, proj_dim: int = 32) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(64, embed_dim, 3, padding=1),
            nn.BatchNorm2d(embed_dim),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(), nn.Linear(embed_dim, proj_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Projection-head output z = g(f(x))."""
        return self.head(self.body(x))


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """NT-Xent (SimCLR Eq. 1) averaged over the 2N anchors.

    For anchor i with positive j: ``l_ij = -log exp(s_ij / t) / sum_{k != i} exp(s_ik / t)``,
    s the cosine similarity over all 2N views.

    Args:
        z1: projections of the first views, (N, d).
        z2: projections of the second views, (N, d); row i pairs with row i of ``z1``.
        temperature: tau.

    Returns:
        Scalar loss.

    Example:
        >>> z = torch.eye(2)
        >>> round(nt_xent(z, z, 0.5).item(), 4)
        0.2395
    """
    if z1.shape != z2.shape or z1.ndim != 2:
        raise ValueError(f"need two (N, d) tensors of one shape, got {tuple(z1.shape)}, {tuple(z2.shape)}")
    n = len(z1)
    z = F.normalize(torch.cat([z1, z2]), dim=1)  # (2N, d)
    sim = z @ z.T / temperature  # (2N, 2N)
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool, device=z.device), float("-inf"))
    pos = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(z.device)  # positive of each anchor
    return F.cross_entropy(sim, pos)


def simclr_views(x: torch.Tensor, cfg: SurrogateConfig, gen: torch.Generator) -> torch.Tensor:
    """One random view per image: resized crop, rotation, translation and noise (no flips).

    Shape:
        (N, C, H, W) -> (N, C, H, W), values clamped to [0, 1].
    """
    n = len(x)
    area = cfg.crop_min + (1 - cfg.crop_min) * torch.rand(n, generator=gen)
    scale = area.sqrt()  # the crop's side as a share of the image side
    angle = (2 * torch.rand(n, generator=gen) - 1) * math.radians(cfg.rotation)
    shift = (2 * torch.rand(n, 2, generator=gen) - 1) * 2 * cfg.translate  # grid units span 2
    cos, sin = torch.cos(angle) * scale, torch.sin(angle) * scale
    # output -> input map: zoom into a crop of side `scale`, rotated, shifted
    theta = torch.stack(
        [torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1
    )
    # every draw is made on the CPU generator and moved, so the views do not depend on the device
    grid = F.affine_grid(theta.to(x), list(x.shape), align_corners=False)  # (N, H, W, 2)
    out = F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")
    out = out + cfg.noise * torch.randn(out.shape, generator=gen).to(out)
    return out.clamp(0.0, 1.0)


def train_simclr_encoder(
    images: torch.Tensor,
    cfg: SurrogateConfig = SurrogateConfig(),
    seed: int = 0,
    *,
    device: str | torch.device | None = None,
) -> TorchEncoder:
    """Train :class:`ConvEncoder` with NT-Xent on unlabeled images (the public pool only).

    Args:
        images: (N, C, H, W) in [0, 1]; labels are never seen.
        cfg: surrogate hyperparameters.
        seed: seed of the init, the batches and the augmentations.
        device: where to train (default: CPU). The initialisation, batches and augmentations are
            drawn on the CPU, so they do not depend on the device.

    Returns:
        A :class:`TorchEncoder` that scores without the projection head (identity normalisation).
    """
    if images.ndim != 4 or len(images) < 2:
        raise ValueError(f"need at least 2 images (N, C, H, W), got {tuple(images.shape)}")
    torch.manual_seed(seed)  # init only; the claim scope restores the global RNG afterwards
    gen = torch.Generator().manual_seed(seed)
    dev = torch.device("cpu" if device is None else device)
    model = ConvEncoder(images.shape[1], cfg.embed_dim, cfg.proj_dim).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    model.train()
    n = len(images)
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        for b in perm.split(cfg.batch_size):
            if len(b) < 2:
                continue
            x = images[b].to(dev)
            loss = nt_xent(
                model.project(simclr_views(x, cfg, gen)),
                model.project(simclr_views(x, cfg, gen)),
                cfg.temperature,
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    c = images.shape[1]
    return TorchEncoder(model, resize=None, mean=(0.0,) * c, std=(1.0,) * c)


class _OODMLP(nn.Module):
    def __init__(self, d_in: int, hidden: int, n_out: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def train_ood_surrogate(
    target_images: torch.Tensor,
    ood_images: torch.Tensor,
    ood_labels: torch.Tensor,
    cfg: SurrogateConfig = SurrogateConfig(),
    seed: int = 0,
    *,
    device: str | torch.device | None = None,
) -> TorchEncoder:
    """Train a (K+1)-way MLP: K OOD classes plus the target images as class K.

    Args:
        target_images: the attacker's target-class images (N_t, C, H, W) in [0, 1].
        ood_images: OOD images of the same shape, (N_o, C, H, W).
        ood_labels: their classes 0..K-1.
        cfg: surrogate hyperparameters.
        seed: init and batch-order seed.
        device: where to train (default: CPU); the initialisation and batch order are drawn on
            the CPU.

    Returns:
        A :class:`TorchEncoder` whose ``encode`` gives the (N, K+1) logits (target = last column).
    """
    if target_images.shape[1:] != ood_images.shape[1:]:
        raise ValueError(f"image shapes differ: {tuple(target_images.shape)} vs {tuple(ood_images.shape)}")
    k = int(ood_labels.max()) + 1
    x = torch.cat([ood_images, target_images])
    y = torch.cat([ood_labels.long(), torch.full((len(target_images),), k, dtype=torch.long)])
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    dev = torch.device("cpu" if device is None else device)
    model = _OODMLP(x[0].numel(), cfg.ood_hidden, k + 1).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.ood_lr, weight_decay=5e-4)
    for _ in range(cfg.ood_epochs):
        for b in torch.randperm(len(x), generator=gen).split(64):
            loss = F.cross_entropy(model(x[b].to(dev)), y[b].to(dev))
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    c = x.shape[1]
    return TorchEncoder(model, resize=None, mean=(0.0,) * c, std=(1.0,) * c)
