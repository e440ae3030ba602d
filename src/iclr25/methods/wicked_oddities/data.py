"""Data for clean-label poisoning: pools, the poisoned training set and the triggered test set.

Sec. 3-4 of *Wicked Oddities* (Nguyen et al., ICLR 2025, arXiv:2407.10825). The trigger is
applied to the raw [0, 1] image *before* any transform (trap 6), labels are never changed
(clean-label), and the triggered test set holds only images whose true label is not the target
(trap 7). Pools: a public unlabeled pool for the attacker's encoder, the victim's training pool
and a test pool, disjoint and stratified. Paper-scale readers load CIFAR-10 or an ImageFolder
from local roots only.

References:
    Nguyen et al., ICLR 2025, arXiv:2407.10825, Sec. 4.1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from iclr25.methods.wicked_oddities.triggers import Trigger

__all__ = [
    "ImagePools",
    "PoisonedDataset",
    "TensorImageDataset",
    "TriggeredTestSet",
    "dataset_labels",
    "digits_pools",
    "load_cifar10",
    "load_image_folder",
    "ood_letters",
    "poison_image",
    "shapes_pools",
    "stack_dataset",
]

Transform = Callable[[torch.Tensor], torch.Tensor]


class TensorImageDataset(Dataset):
    """Images (N, C, H, W) in [0, 1] with integer labels (N,).

    Example:
        >>> ds = TensorImageDataset(torch.zeros(3, 1, 4, 4), torch.tensor([0, 1, 1]))
        >>> len(ds), ds[1][1]
        (3, 1)
    """

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if images.ndim != 4 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"need images (N, C, H, W) and labels (N,), got {images.shape}, {labels.shape}")
        self.images, self.labels = images.float(), labels.long()

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.images[i], int(self.labels[i])


def stack_dataset(ds: Dataset) -> tuple[torch.Tensor, torch.Tensor]:
    """All items of ``ds`` stacked: images (N, C, H, W) and labels (N,).

    Raises:
        TypeError: the items are not tensors (e.g. PIL images: give the dataset a transform
            such as ``v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])``).
    """
    items = [ds[i] for i in range(len(ds))]  # type: ignore[arg-type]
    if items and not isinstance(items[0][0], torch.Tensor):
        raise TypeError(
            f"dataset items must be image tensors to stack, got {type(items[0][0]).__name__}; "
            "add a transform that converts them (e.g. v2.ToImage() and v2.ToDtype(torch.float32, scale=True))"
        )
    return torch.stack([x for x, _ in items]), torch.tensor([int(y) for _, y in items])


def dataset_labels(ds: Dataset) -> torch.Tensor:
    """The labels of a dataset, shape (N,): its ``targets`` or ``labels`` attribute if it has one
    (torchvision datasets keep ``targets``), else read item by item."""
    for name in ("targets", "labels"):
        lab = getattr(ds, name, None)
        if lab is not None and len(lab) == len(ds):  # type: ignore[arg-type]
            return torch.as_tensor(lab).long().reshape(-1)
    return torch.tensor([int(ds[i][1]) for i in range(len(ds))], dtype=torch.long)  # type: ignore[arg-type]


def poison_image(x: object, trigger: Trigger) -> object:
    """Put ``trigger`` on one raw image and return it in the type it came in.

    A float tensor (C, H, W) in [0, 1] goes straight to the trigger. A uint8 tensor (C, H, W) and
    a PIL image (mode "L" or "RGB") are scaled to [0, 1], triggered, and rounded back to 8 bits,
    so a poisoned item has the type, dtype and mode of a clean one and the dataset's transform
    handles both alike (a poisoned file on disk is 8-bit too).

    Raises:
        TypeError: any other item type (numpy arrays: wrap them as tensors (C, H, W) first).
        ValueError: a PIL mode other than "L" or "RGB".

    Example:
        >>> from PIL import Image
        >>> from iclr25.methods.wicked_oddities.triggers import BadNetsTrigger
        >>> img = poison_image(Image.new("RGB", (6, 6)), BadNetsTrigger(2, 0))
        >>> img.mode, img.getpixel((4, 4)), img.getpixel((5, 4))
        ('RGB', (255, 255, 255), (0, 0, 0))
    """
    if isinstance(x, torch.Tensor):
        if x.is_floating_point():
            return trigger.apply(x)
        if x.dtype == torch.uint8:
            return (trigger.apply(x.float() / 255.0) * 255.0).round().to(torch.uint8)
        raise TypeError(f"image tensors must be float in [0, 1] or uint8, got {x.dtype}")
    from PIL import Image
    from torchvision.transforms.functional import pil_to_tensor, to_pil_image

    if isinstance(x, Image.Image):
        if x.mode not in ("L", "RGB"):
            raise ValueError(f"PIL images must have mode 'L' or 'RGB', got {x.mode!r}; convert them first")
        out = poison_image(pil_to_tensor(x), trigger)  # uint8 (C, H, W)
        return to_pil_image(out, mode=x.mode)
    raise TypeError(f"images must be PIL images or tensors (C, H, W), got {type(x).__name__}")


class PoisonedDataset(Dataset):
    """The victim's training set with the trigger on the selected images; labels untouched.

    Works over any map-style dataset of (image, label) whose images are PIL images or tensors
    (C, H, W), e.g. a torchvision dataset built **without** its own transform: the trigger must
    act on raw pixels, so the transform (augmentation, conversion, normalisation) goes here and
    runs after the trigger (trap 6).

    Args:
        base: a dataset of (image, label); images are PIL ("L"/"RGB"), uint8 tensors or float
            tensors in [0, 1] (see :func:`poison_image`).
        poison_indices: global indices of the images that carry the trigger.
        trigger: the trigger.
        transform: applied after the trigger, to poisoned and clean items alike.

    Example:
        >>> from iclr25.methods.wicked_oddities.triggers import BadNetsTrigger
        >>> base = TensorImageDataset(torch.zeros(4, 1, 6, 6), torch.tensor([0, 1, 1, 1]))
        >>> ds = PoisonedDataset(base, torch.tensor([2]), BadNetsTrigger(2, 0))
        >>> ds[2][0].sum().item(), ds[2][1], ds[1][0].sum().item()
        (2.0, 1, 0.0)
    """

    def __init__(
        self,
        base: Dataset,
        poison_indices: torch.Tensor | np.ndarray | list[int],
        trigger: Trigger,
        transform: Transform | None = None,
    ) -> None:
        idx = torch.as_tensor(poison_indices).long().reshape(-1)
        n = len(base)  # type: ignore[arg-type]
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"poison indices must lie in [0, {n})")
        if len(idx.unique()) != len(idx):
            raise ValueError("poison indices contain duplicates")
        self.base, self.trigger, self.transform = base, trigger, transform
        self.poison_indices = idx
        self._poisoned = set(idx.tolist())

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def is_poisoned(self, i: int) -> bool:
        """Whether item ``i`` carries the trigger."""
        return i in self._poisoned

    def __getitem__(self, i: int) -> tuple[object, int]:
        x, y = self.base[i]
        if i in self._poisoned:
            x = poison_image(x, self.trigger)  # trigger on the raw image, before the transform
        if self.transform is not None:
            x = self.transform(x)
        return x, int(y)

    def poison_rates(self, target: int) -> dict[str, float]:
        """The poison rate as a share of the target class and of the whole training set."""
        labels = dataset_labels(self.base)
        n_t = int((labels == target).sum())
        if len(self.poison_indices) and not bool((labels[self.poison_indices] == target).all()):
            raise ValueError("clean-label poisoning: every poisoned image must belong to the target class")
        k = len(self.poison_indices)
        return {"of_target": k / max(n_t, 1), "of_train": k / max(len(self), 1), "count": float(k)}


class TriggeredTestSet(Dataset):
    """Triggered test images, by default only those whose true label is not the target.

    Args:
        base: a dataset of (image, label), images as in :class:`PoisonedDataset`.
        trigger: the trigger, applied to the raw image.
        target: the attacker's target class.
        exclude_target: drop target-class images (trap 7: keeping them inflates ASR by ~1/C).
        transform: applied after the trigger (e.g. normalisation).

    Example:
        >>> from iclr25.methods.wicked_oddities.triggers import SIGTrigger
        >>> base = TensorImageDataset(torch.zeros(4, 1, 8, 8), torch.tensor([0, 1, 2, 0]))
        >>> len(TriggeredTestSet(base, SIGTrigger(0.1, 1), target=0))
        2
    """

    def __init__(
        self,
        base: Dataset,
        trigger: Trigger,
        target: int,
        exclude_target: bool = True,
        transform: Transform | None = None,
    ) -> None:
        self.base, self.trigger, self.target, self.transform = base, trigger, int(target), transform
        labels = dataset_labels(base)
        self.indices = [i for i in range(len(labels)) if not (exclude_target and int(labels[i]) == target)]

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, j: int) -> tuple[object, int]:
        x, y = self.base[self.indices[j]]
        x = poison_image(x, self.trigger)
        if self.transform is not None:
            x = self.transform(x)
        return x, int(y)


@dataclass
class ImagePools:
    """Disjoint pools: ``public`` (unlabeled, for the attacker's encoder), ``train``, ``test``,
    and optionally ``val`` (the victim owner's held-out images, read for learning curves only)."""

    public: torch.Tensor
    train: TensorImageDataset
    test: TensorImageDataset
    num_classes: int
    val: TensorImageDataset | None = None


def digits_pools(
    seed: int,
    upsample: int = 16,
    fractions: tuple[float, float, float] = (0.25, 0.5, 0.25),
    val_share: float = 0.0,
) -> ImagePools:
    """scikit-learn digits split into stratified, seeded public / train / test pools.

    Args:
        seed: split seed.
        upsample: output side in pixels (bilinear from 8 x 8; 8 keeps the original).
        fractions: public, train and test shares (sum 1).
        val_share: share of the train pool held out as ``val`` (stratified; 0 = none).

    Returns:
        :class:`ImagePools` with images (N, 1, upsample, upsample) in [0, 1].

    Example:
        >>> p = digits_pools(0)
        >>> p.public.shape[1:], len(p.train) > len(p.test)
        (torch.Size([1, 16, 16]), True)
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions}")
    X, y = load_digits(return_X_y=True)
    x = torch.tensor(X / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    if upsample != 8:
        x = F.interpolate(x, size=(upsample, upsample), mode="bilinear", align_corners=False).clamp(0, 1)
    idx = np.arange(len(y))
    pub, rest = train_test_split(idx, train_size=fractions[0], random_state=seed, stratify=y)
    tr, te = train_test_split(
        rest, train_size=fractions[1] / (fractions[1] + fractions[2]), random_state=seed, stratify=y[rest]
    )
    yt = torch.tensor(y)
    val = None
    if val_share > 0:
        if not val_share < 1:
            raise ValueError(f"val_share must lie in [0, 1), got {val_share}")
        tr, va = train_test_split(tr, test_size=val_share, random_state=seed, stratify=y[tr])
        val = TensorImageDataset(x[va], yt[va])
    return ImagePools(
        public=x[pub],
        train=TensorImageDataset(x[tr], yt[tr]),
        test=TensorImageDataset(x[te], yt[te]),
        num_classes=10,
        val=val,
    )


def shapes_pools(
    seed: int, n_public: int = 400, n_train: int = 400, n_test: int = 400, n_val: int = 0
) -> ImagePools:
    """The shared shapes world at 16 x 16 with 4 shape classes; splits are independent streams
    ("public", "train", "val", "test"), so one pool's size never changes another's images.

    Example:
        >>> p = shapes_pools(0, 8, 8, 8)
        >>> tuple(p.train.images.shape), p.num_classes
        ((8, 3, 16, 16), 4)
    """
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig

    world = ShapesWorld(WorldConfig(image_size=16), seed=seed)

    def get(n: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        X, y = world.classification_arrays(n, split=split, label_scheme="shape")
        x = torch.tensor(X, dtype=torch.float32).permute(0, 3, 1, 2) / 255.0  # (n, 3, 16, 16)
        return x, torch.tensor(y).long()

    pub, _ = get(n_public, "public")  # labels unused
    return ImagePools(
        public=pub,
        train=TensorImageDataset(*get(n_train, "train")),
        test=TensorImageDataset(*get(n_test, "test")),
        num_classes=4,
        val=TensorImageDataset(*get(n_val, "val")) if n_val > 0 else None,
    )


def ood_letters(
    n_per_class: int, size: int = 16, *, seed: int = 0, letters: str = "ABCDEFGHIJ"
) -> TensorImageDataset:
    """Out-of-distribution classes: letters in Pillow's built-in font, randomly shifted 1-2 px.

    Args:
        n_per_class: images per letter.
        size: image side.
        seed: seed of the shifts and stroke jitter.
        letters: one class per character.

    Returns:
        Images (n, 1, size, size) in [0, 1], labels 0..len(letters)-1.

    Example:
        >>> ds = ood_letters(2, 16)
        >>> tuple(ds.images.shape), ds.labels.tolist()[:3]
        ((20, 1, 16, 16), [0, 0, 1])
    """
    from PIL import Image, ImageDraw, ImageFont

    rng = np.random.default_rng(seed)
    font = ImageFont.load_default()
    imgs, labels = [], []
    for c, ch in enumerate(letters):
        base = Image.new("L", (size * 2, size * 2), 0)
        ImageDraw.Draw(base).text((size // 2, size // 4), ch, fill=255, font=font)
        glyph = np.asarray(base.resize((size, size), Image.BILINEAR), dtype=np.float32) / 255.0
        for _ in range(n_per_class):
            dx, dy = rng.integers(1, 3, 2) * rng.choice([-1, 1], 2)
            shifted = np.roll(glyph, (int(dy), int(dx)), axis=(0, 1))
            imgs.append(np.clip(shifted * rng.uniform(0.8, 1.0), 0, 1))
            labels.append(c)
    x = torch.tensor(np.stack(imgs))[:, None]  # (n, 1, size, size)
    return TensorImageDataset(x, torch.tensor(labels))


def load_cifar10(root: str | Path, *, train: bool = True) -> TensorImageDataset:
    """CIFAR-10 from a local root (``torchvision.datasets.CIFAR10``, ``download=False``)."""
    from torchvision.datasets import CIFAR10

    if not Path(root).exists():
        raise FileNotFoundError(f"CIFAR-10 root {root} does not exist (nothing is downloaded)")
    ds = CIFAR10(str(root), train=train, download=False)
    x = torch.tensor(ds.data).permute(0, 3, 1, 2).float() / 255.0  # (N, 3, 32, 32)
    return TensorImageDataset(x, torch.tensor(ds.targets))


def load_image_folder(root: str | Path, size: int = 224) -> TensorImageDataset:
    """An ImageFolder from a local root, resized to ``size``, as [0, 1] tensors."""
    from torchvision.datasets import ImageFolder
    from torchvision.transforms import v2

    if not Path(root).exists():
        raise FileNotFoundError(f"ImageFolder root {root} does not exist (nothing is downloaded)")
    tf = v2.Compose([v2.ToImage(), v2.Resize((size, size)), v2.ToDtype(torch.float32, scale=True)])
    ds = ImageFolder(str(root), transform=tf)
    return TensorImageDataset(*stack_dataset(ds))
