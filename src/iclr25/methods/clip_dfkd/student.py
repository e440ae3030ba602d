"""Small students trained from scratch with a randomly initialised linear head (Sec. 4.4).

:class:`TinyResNet` is the CPU student (about 75k parameters, BatchNorm, two residual stages);
:func:`make_student` also builds any ``timm`` model (e.g. ``resnet18``, the paper's student size).
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["TinyResNet", "make_student"]


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = (
            nn.Identity() if stride == 1 and cin == cout
            else nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + self.skip(x))


class TinyResNet(nn.Module):
    """stride-2 conv stem -> residual stages (stride 1, 2, 2) -> global average pool -> linear head.

    Args:
        num_classes: outputs.
        width: channels of the first stage (doubled per stage).

    Shape:
        (N, 3, H, W) in [0, 1] -> logits (N, num_classes).

    Example:
        >>> TinyResNet(6)(torch.rand(2, 3, 32, 32)).shape
        torch.Size([2, 6])
    """

    def __init__(self, num_classes: int, *, width: int = 16) -> None:
        super().__init__()
        if num_classes < 1 or width < 1:
            raise ValueError(f"num_classes and width must be positive, got {num_classes}, {width}")
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stages = nn.Sequential(
            _Block(width, width, 1), _Block(width, 2 * width, 2), _Block(2 * width, 4 * width, 2)
        )
        self.head = nn.Linear(4 * width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stages(self.stem((x - 0.5) / 0.25))
        return self.head(h.mean(dim=(2, 3)))  # (N, 4 * width) -> (N, num_classes)


def make_student(name: str, num_classes: int, **kwargs: object) -> nn.Module:
    """``"tiny_resnet"`` (:class:`TinyResNet`) or any ``timm`` model name, untrained."""
    if name == "tiny_resnet":
        return TinyResNet(num_classes, **kwargs)  # type: ignore[arg-type]
    try:
        import timm
    except ImportError as err:  # pragma: no cover
        raise ImportError("timm students need the 'clip_dfkd' extra: pip install iclr25[clip_dfkd]") from err
    return timm.create_model(name, pretrained=False, num_classes=num_classes, **kwargs)
