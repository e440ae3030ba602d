"""Clean accuracy and attack success rate.

Metrics of Sec. 4 of *Wicked Oddities* (Nguyen et al., ICLR 2025, arXiv:2407.10825): CA is the
accuracy on clean test images; ASR is the share of triggered test images **whose true label is
not the target** that the model classifies as the target (trap 7).

References:
    Nguyen et al., arXiv:2407.10825, Sec. 4.1.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.data import Dataset

from iclr25.methods.wicked_oddities.data import TriggeredTestSet, stack_dataset
from iclr25.methods.wicked_oddities.triggers import Trigger

__all__ = ["attack_success_rate", "clean_accuracy", "predict"]

Model = Callable[[torch.Tensor], torch.Tensor]


@torch.no_grad()
def predict(model: Model, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """Arg-max predictions (on the CPU) of ``model`` on images (N, C, H, W) in [0, 1].

    Batches go to the device of the model's parameters (a plain callable gets them as given).
    """
    params = getattr(model, "parameters", None)
    p = next(iter(params()), None) if callable(params) else None
    device = p.device if p is not None else x.device
    if not len(x):
        return torch.zeros(0, dtype=torch.long)
    return torch.cat([model(b.to(device)).argmax(1).cpu() for b in x.split(batch_size)])


def clean_accuracy(model: Model, ds: Dataset) -> float:
    """Accuracy on a clean test set.

    Example:
        >>> from iclr25.methods.wicked_oddities.data import TensorImageDataset
        >>> ds = TensorImageDataset(torch.zeros(4, 1, 2, 2), torch.tensor([0, 0, 1, 0]))
        >>> clean_accuracy(lambda x: torch.tensor([[1.0, 0.0]]).expand(len(x), 2), ds)
        0.75
    """
    x, y = stack_dataset(ds)
    return float((predict(model, x) == y).float().mean())


def attack_success_rate(
    model: Model, ds: Dataset, trigger: Trigger, target: int, exclude_target: bool = True
) -> float:
    """Share of triggered test images predicted as ``target`` (non-target images by default).

    Args:
        model: maps [0, 1] images to logits.
        ds: the clean test set.
        trigger: applied to the raw images.
        target: the target class.
        exclude_target: drop images of the target class (the paper's measure).

    Returns:
        ASR in [0, 1].

    Example:
        >>> from iclr25.methods.wicked_oddities.data import TensorImageDataset
        >>> from iclr25.methods.wicked_oddities.triggers import SIGTrigger
        >>> ds = TensorImageDataset(torch.zeros(4, 1, 8, 8), torch.tensor([0, 1, 2, 1]))
        >>> always_1 = lambda x: torch.tensor([[0.0, 1.0, 0.0]]).expand(len(x), 3)
        >>> attack_success_rate(always_1, ds, SIGTrigger(0.1, 1), target=1)
        1.0
    """
    test = TriggeredTestSet(ds, trigger, target, exclude_target)
    if len(test) == 0:
        raise ValueError("no test image outside the target class")
    x, _ = stack_dataset(test)
    return float((predict(model, x) == target).float().mean())
