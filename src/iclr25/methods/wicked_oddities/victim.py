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

import math
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

    ``gen`` is a CPU generator; the images may live on any device.

    Shape:
        (N, C, H, W) -> (N, C, H, W).
    """
    if max_shift == 0:
        return x
    n, _, h, w = x.shape
    padded = F.pad(x, (max_shift,) * 4)  # (N, C, H + 2s, W + 2s)
    # offsets drawn on the CPU generator, so the draws do not depend on the images' device
    d = torch.randint(0, 2 * max_shift + 1, (n, 2), generator=gen).to(x.device)
    c = x.shape[1]
    rows = (d[:, 0, None] + torch.arange(h, device=x.device)[None]).view(n, 1, h, 1)
    out = padded.gather(2, rows.expand(n, c, h, w + 2 * max_shift))  # (N, C, H, W + 2s)
    cols = (d[:, 1, None] + torch.arange(w, device=x.device)[None]).view(n, 1, 1, w).expand(n, c, h, w)
    return out.gather(3, cols)  # (N, C, H, W)


def train_victim(
    ds: Dataset,
    cfg: VictimConfig = VictimConfig(),
    seed: int = 0,
    *,
    num_classes: int | None = None,
    model_fn: Callable[[int, int], nn.Module] | None = None,
    device: str | torch.device | None = None,
    on_epoch_end: Callable[[int, nn.Module], None] | None = None,
) -> nn.Module:
    """Train a victim on ``ds`` (images in [0, 1], triggers already in place) for ``cfg.epochs``.

    The items of ``ds`` are read once and stacked (the toy sets fit in memory); the random shift
    of ``cfg.shift`` is the augmentation, redrawn every step. Any random transform inside ``ds``
    would therefore be drawn only once.

    Args:
        ds: training set of (image tensor (C, H, W) in [0, 1], label), e.g. a
            :class:`PoisonedDataset` whose transform converts PIL images to float tensors.
        cfg: the victim recipe (Adam, learning-rate schedule, weight decay, batch size, shift).
        seed: seed of the initialisation and the data order (shared by paired runs).
        num_classes: outputs (default: ``max label + 1``).
        model_fn: ``model_fn(in_channels, num_classes)`` building the network (default
            :class:`SmallCNN` with ``cfg.channels``).
        device: where to train (default: CPU). The seeded initialisation, data order and shifts
            are drawn on the CPU, so they do not depend on the device.
        on_epoch_end: ``on_epoch_end(epoch, model)`` called after each epoch (1-based) with the
            model in eval mode, e.g. to record a validation curve; training resumes afterwards.

    Returns:
        The final-epoch model in eval mode, on ``device``.
    """
    x, y = stack_dataset(ds)
    if len(x) == 0:
        raise ValueError("empty training set")
    if not x.is_floating_point():
        raise TypeError(f"victim inputs must be float images in [0, 1], got {x.dtype}")
    dev = torch.device("cpu" if device is None else device)
    k = int(y.max()) + 1 if num_classes is None else num_classes
    torch.manual_seed(seed)  # one init per seed: paired runs start from the same weights
    model = model_fn(x.shape[1], k) if model_fn else SmallCNN(x.shape[1], k, cfg.channels)
    model = model.to(dev)
    order = torch.Generator().manual_seed(seed + 1)  # data order, shared by paired runs
    aug = torch.Generator().manual_seed(seed + 2)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    # cosine annealing to zero over all steps (the paper's schedule), stepped per batch
    steps = cfg.epochs * math.ceil(len(x) / cfg.batch_size)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if cfg.schedule == "cosine" else None
    x_dev, y_dev = x.to(dev), y.to(dev)
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        for b in torch.randperm(len(x), generator=order).split(cfg.batch_size):
            b = b.to(dev)
            loss = F.cross_entropy(model(random_shift(x_dev[b], cfg.shift, aug)), y_dev[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
        if on_epoch_end is not None:
            model.eval()
            on_epoch_end(epoch, model)
    return model.eval()
