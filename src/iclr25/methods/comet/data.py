"""Readers for the paper-scale COMET data, from local files only (nothing is downloaded).

Paper: *More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired
Fixed Routing*, Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter,
Matt Jones. ICLR 2025, arXiv:2410.08003.

The paper's MLP experiments (Sec. 4) flatten images into vectors (CIFAR-10/100, SVHN,
Tiny-ImageNet; 3,072 inputs for CIFAR) and regress SARCOS's 7 joint torques from 21 inputs. These
functions return ``(X, y)`` tensors ready for :class:`COMETMLP`; CIFAR and image folders go
through torchvision's own readers with ``download=False``, SARCOS through ``scipy.io.loadmat``.

References:
    Shaier et al., "More Experts Than Galaxies", ICLR 2025, arXiv:2410.08003, Sec. 4.
"""

from __future__ import annotations

import os
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from iclr25._core.registry import require

__all__ = ["load_cifar", "load_image_folder", "load_sarcos"]


def _flatten_dataset(ds: object) -> tuple[Tensor, Tensor]:
    xs, ys = [], []
    for img, label in ds:  # type: ignore[attr-defined]
        xs.append(img.reshape(-1))  # (C*H*W,)
        ys.append(int(label))
    return torch.stack(xs), torch.tensor(ys)


def load_cifar(
    root: str | os.PathLike[str],
    name: Literal["cifar10", "cifar100"] = "cifar10",
    train: bool = True,
    normalize: bool = True,
) -> tuple[Tensor, Tensor]:
    """CIFAR-10/100 from a local torchvision folder, flattened to (n, 3072).

    Args:
        root: folder holding ``cifar-10-batches-py`` (or ``cifar-100-python``).
        name: "cifar10" or "cifar100".
        train: training or test split.
        normalize: subtract 0.5 and divide by 0.5 per channel (zero-centred inputs).

    Returns:
        ``(X, y)``: float32 (n, 3072) and int64 (n,).

    Raises:
        FileNotFoundError: ``root`` does not exist.
        ValueError: an unknown ``name``.

    Example:
        >>> load_cifar("/data/cifar", "cifar10")  # doctest: +SKIP
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"CIFAR folder {str(root)!r} does not exist")
    tv = require("torchvision", "comet")
    cls = {"cifar10": tv.datasets.CIFAR10, "cifar100": tv.datasets.CIFAR100}.get(name)
    if cls is None:
        raise ValueError(f"name must be 'cifar10' or 'cifar100', got {name!r}")
    steps = [tv.transforms.ToTensor()]
    if normalize:
        steps.append(tv.transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
    ds = cls(root=str(root), train=train, download=False, transform=tv.transforms.Compose(steps))
    return _flatten_dataset(ds)


def load_image_folder(
    root: str | os.PathLike[str], size: int = 32, normalize: bool = True
) -> tuple[Tensor, Tensor]:
    """An ImageFolder tree (e.g. Tiny-ImageNet, SVHN exported as images), resized and flattened.

    Args:
        root: folder with one sub-folder per class.
        size: images are resized to ``size x size``.
        normalize: map [0, 1] pixels to [-1, 1].

    Returns:
        ``(X, y)``: float32 (n, 3 * size * size) and int64 (n,).

    Example:
        >>> load_image_folder("/data/tiny-imagenet/train", size=64)  # doctest: +SKIP
    """
    if not os.path.isdir(root):
        raise FileNotFoundError(f"image folder {str(root)!r} does not exist")
    tv = require("torchvision", "comet")
    steps = [tv.transforms.Resize((size, size)), tv.transforms.ToTensor()]
    if normalize:
        steps.append(tv.transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)))
    ds = tv.datasets.ImageFolder(str(root), transform=tv.transforms.Compose(steps))
    return _flatten_dataset(ds)


def load_sarcos(path: str | os.PathLike[str], key: str | None = None) -> tuple[Tensor, Tensor]:
    """SARCOS inverse dynamics from a local ``.mat``: 21 inputs, 7 torques.

    Args:
        path: e.g. ``sarcos_inv.mat`` or ``sarcos_inv_test.mat``.
        key: the matrix name inside the file (default: its only non-metadata entry).

    Returns:
        ``(X, Y)``: float32 (n, 21) and (n, 7).

    Raises:
        FileNotFoundError: no such file.
        ValueError: the matrix is not (n, 28) or the key is ambiguous.

    Example:
        >>> load_sarcos("/data/sarcos_inv.mat")  # doctest: +SKIP
    """
    from scipy.io import loadmat

    if not os.path.isfile(path):
        raise FileNotFoundError(f"SARCOS file {str(path)!r} does not exist")
    mat = loadmat(str(path))
    keys = [k for k in mat if not k.startswith("__")]
    if key is None:
        if len(keys) != 1:
            raise ValueError(f"{str(path)!r} holds {keys}; pass key=")
        key = keys[0]
    data = np.asarray(mat[key], dtype=np.float32)
    if data.ndim != 2 or data.shape[1] != 28:
        raise ValueError(f"SARCOS matrix {key!r} must be (n, 28), got {data.shape}")
    return torch.from_numpy(data[:, :21].copy()), torch.from_numpy(data[:, 21:].copy())
