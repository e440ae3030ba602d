"""The victim: a small CNN trained on the (poisoned) training set, final epoch kept.

The victim of Sec. 4 of *Wicked Oddities* (Nguyen et al., ICLR 2025, arXiv:2407.10825) is a
ResNet-18 trained by a party the attacker does not control. Here a 2-conv CNN stands in at toy
scale. The model owns its normalisation (inputs stay in [0, 1], so the trigger is always applied
to raw pixels, trap 6), augmentation (a random shift) happens after poisoning, and the final epoch
is returned (no test-set checkpoint selection, trap 8). Runs that share ``seed`` share the
initialisation and the data order (trap 12), whatever images they poison.

References:
    Nguyen et al., arXiv:2407.10825, Sec. 4.1.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from iclr25.methods.wicked_oddities.config import VictimConfig
from iclr25.methods.wicked_oddities.data import stack_dataset

__all__ = ["SmallCNN", "random_shift", "train_victim"]


class SmallCNN(nn.Module):
    """Two conv layers (16 / 32 channels) and a linear head, with built-in normalisation.

    Args:
        in_channels: image channels.
        num_classes: outputs.
        channels: conv widths.
        mean: per-channel input mean (inputs are [0, 1] pixels).
        std: per-channel input std.

    Shape:
        (N, C, H, W) in [0, 1] -> logits (N, num_classes).

    Example:
        >>> SmallCNN(1, 10)(torch.zeros(2, 1, 16, 16)).shape
        torch.Size([2, 10])
    """

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        channels: tuple[int, int] = (16, 32),
        mean: float = 0.5,
        std: float = 0.5,
    ) -> None:
        super().__init__()
        self.register_buffer("mean", torch.full((1, in_channels, 1, 1), float(mean)))
        self.register_buffer("std", torch.full((1, in_channels, 1, 1), float(std)))
        c1, c2 = channels
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
        )
        self.head = nn.Linear(c2 * 16, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features((x - self.mean) / self.std))


def random_shift(x: torch.Tensor, max_shift: int, gen: torch.Generator) -> torch.Tensor:
    """Shift each image by up to ``max_shift`` pixels (zero padding); the trigger moves with it.

    Shape:
        (N, C, H, W) -> (N, C, H, W).
    """
    if max_shift == 0:
        return x
    n, _, h, w = x.shape
    padded = F.pad(x, (max_shift,) * 4)  # (N, C, H + 2s, W + 2s)
    d = torch.randint(0, 2 * max_shift + 1, (n, 2), generator=gen)
    rows = (
        (d[:, 0, None] + torch.arange(h)[None]).view(n, 1, h, 1).expand(n, x.shape[1], h, w + 2 * max_shift)
    )
    out = padded.gather(2, rows)  # (N, C, H, W + 2s)
    cols = (d[:, 1, None] + torch.arange(w)[None]).view(n, 1, 1, w).expand(n, x.shape[1], h, w)
    return out.gather(3, cols)  # (N, C, H, W)


def train_victim(
    ds: Dataset,
    cfg: VictimConfig = VictimConfig(),
    seed: int = 0,
    *,
    num_classes: int | None = None,
    model_fn: Callable[[int, int], nn.Module] | None = None,
) -> nn.Module:
    """Train a victim on ``ds`` (images in [0, 1], triggers already in place) for ``cfg.epochs``.

    Args:
        ds: training set of (image, label), e.g. a :class:`PoisonedDataset` without a transform.
        cfg: the victim recipe (Adam, weight decay, batch size, random shift).
        seed: seed of the initialisation and the data order (shared by paired runs).
        num_classes: outputs (default: ``max label + 1``).
        model_fn: ``model_fn(in_channels, num_classes)`` building the network (default
            :class:`SmallCNN` with ``cfg.channels``).

    Returns:
        The final-epoch model in eval mode.
    """
    x, y = stack_dataset(ds)
    if len(x) == 0:
        raise ValueError("empty training set")
    k = int(y.max()) + 1 if num_classes is None else num_classes
    torch.manual_seed(seed)  # one init per seed: paired runs start from the same weights
    model = model_fn(x.shape[1], k) if model_fn else SmallCNN(x.shape[1], k, cfg.channels)
    order = torch.Generator().manual_seed(seed + 1)  # data order, shared by paired runs
    aug = torch.Generator().manual_seed(seed + 2)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model.train()
    for _ in range(cfg.epochs):
        for b in torch.randperm(len(x), generator=order).split(cfg.batch_size):
            loss = F.cross_entropy(model(random_shift(x[b], cfg.shift, aug)), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval()
