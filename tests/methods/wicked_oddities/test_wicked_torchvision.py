"""Torchvision-native use: PIL datasets, triggers as transforms, clear errors, ``device=``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import Dataset
from torchvision.transforms import v2

from iclr25.methods.wicked_oddities import (
    BadNetsTrigger,
    BlendTrigger,
    PoisonedDataset,
    SIGTrigger,
    TensorImageDataset,
    TriggeredTestSet,
    VictimConfig,
    attack_success_rate,
    clean_accuracy,
    dataset_labels,
    poison_image,
    train_victim,
)

TO_FLOAT = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])


class PILDigits(Dataset):
    """A torchvision-style dataset: PIL images, int labels, a ``targets`` list, no transform."""

    def __init__(self, n: int, mode: str = "RGB", seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.targets = [i % 3 for i in range(n)]
        shape = (8, 8, 3) if mode == "RGB" else (8, 8)
        self.data = [
            (rng.uniform(0, 120, shape) + 60 * t).astype(np.uint8) for t in self.targets
        ]  # class = brightness level
        self.mode = mode

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[Image.Image, int]:
        return Image.fromarray(self.data[i], mode=self.mode), self.targets[i]


@pytest.mark.parametrize(
    "trigger", [BadNetsTrigger(2, 1), BlendTrigger.noise((3, 8, 8), 0.2), SIGTrigger(0.1, 2)]
)
def test_trigger_takes_one_image_or_a_batch(trigger) -> None:
    x = torch.rand(4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    batch = trigger(x)
    for i in range(4):
        assert torch.equal(trigger(x[i]), batch[i])  # (C, H, W) in, (C, H, W) out
    assert trigger(x[0]).shape == (3, 8, 8)


def test_trigger_inside_torchvision_compose() -> None:
    img = Image.fromarray(np.full((8, 8, 3), 128, np.uint8))
    tf = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True), BadNetsTrigger(2, 1)])
    out = tf(img)
    assert out.shape == (3, 8, 8) and set(out[:, 5:7, 5:7].unique().tolist()) == {0.0, 1.0}
    assert torch.allclose(out[:, :5, :5], torch.full((3, 5, 5), 128 / 255))


def test_trigger_errors_for_uint8_channels_last_pil_and_unnormalised() -> None:
    t = BadNetsTrigger(2, 1)
    with pytest.raises(TypeError, match="uint8"):
        t(torch.zeros(3, 8, 8, dtype=torch.uint8))
    with pytest.raises(ValueError, match="channels-last"):
        t(torch.zeros(8, 8, 3))
    with pytest.raises(ValueError, match="channels-last"):
        t(torch.zeros(2, 8, 8, 3))
    with pytest.raises(TypeError, match="PIL images first"):
        t(Image.new("RGB", (8, 8)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        t(torch.full((3, 8, 8), -1.0))  # already normalised: the trigger must come first
    with pytest.raises(ValueError, match="shape"):
        t(torch.zeros(8, 8))


def test_poison_image_keeps_the_item_type() -> None:
    t = BadNetsTrigger(2, 1)
    pil = Image.fromarray(np.full((8, 8), 100, np.uint8), mode="L")
    out = poison_image(pil, t)
    assert isinstance(out, Image.Image) and out.mode == "L"
    arr = np.asarray(out)
    assert arr[5, 5] == 255 and arr[5, 6] == 0 and arr[0, 0] == 100
    u8 = torch.full((3, 8, 8), 100, dtype=torch.uint8)
    out8 = poison_image(u8, t)
    assert out8.dtype == torch.uint8 and int(out8[0, 5, 5]) == 255 and int(out8[0, 0, 0]) == 100
    with pytest.raises(TypeError, match="PIL images or tensors"):
        poison_image(np.zeros((8, 8, 3)), t)
    with pytest.raises(ValueError, match="mode"):
        poison_image(Image.new("RGBA", (8, 8)), t)


def test_torchvision_style_pil_dataset_poisons_and_trains(one_thread) -> None:
    base = PILDigits(60)
    assert dataset_labels(base).tolist() == base.targets
    idx = torch.tensor([i for i in range(60) if base.targets[i] == 1][:4])
    trig = BadNetsTrigger(2, 1)
    ds = PoisonedDataset(base, idx, trig, transform=TO_FLOAT)
    x0, y0 = ds[int(idx[0])]
    assert x0.shape == (3, 8, 8) and x0.dtype == torch.float32 and y0 == 1
    assert set(x0[:, 5:7, 5:7].unique().tolist()) == {0.0, 1.0}
    clean_item, _ = ds[0]
    assert torch.equal(clean_item, TO_FLOAT(base[0][0]))  # unselected items untouched
    assert ds.poison_rates(1) == {"of_target": 4 / 20, "of_train": 4 / 60, "count": 4.0}
    model = train_victim(ds, VictimConfig(epochs=2, batch_size=16), seed=0, num_classes=3)
    test = PILDigits(30, seed=1)
    assert len(TriggeredTestSet(test, trig, target=1, transform=TO_FLOAT)) == 20
    ca = clean_accuracy(model, _Converted(test))
    asr = attack_success_rate(model, _Converted(test), trig, target=1)
    assert 0.0 <= ca <= 1.0 and 0.0 <= asr <= 1.0
    with pytest.raises(TypeError, match="transform"):
        train_victim(PoisonedDataset(base, idx, trig), VictimConfig(epochs=1), seed=0)  # PIL, no transform


class _Converted(Dataset):
    def __init__(self, base: Dataset) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        x, y = self.base[i]
        return TO_FLOAT(x), y


def test_train_victim_device_argument_and_epoch_hook(one_thread) -> None:
    gen = torch.Generator().manual_seed(0)
    ds = TensorImageDataset(torch.rand(12, 1, 8, 8, generator=gen), torch.arange(12) % 2)
    seen: list[int] = []
    model = train_victim(
        ds, VictimConfig(epochs=2), seed=0, device="cpu", on_epoch_end=lambda e, m: seen.append(e)
    )
    ref = train_victim(ds, VictimConfig(epochs=2), seed=0)
    assert seen == [1, 2] and next(model.parameters()).device.type == "cpu"
    assert torch.equal(model(ds.images), ref(ds.images))  # the hook does not change training
    if torch.cuda.is_available():  # pragma: no cover - GPU machines only
        gpu = train_victim(ds, VictimConfig(epochs=2), seed=0, device="cuda")
        assert next(gpu.parameters()).device.type == "cuda"
        assert 0.0 <= clean_accuracy(gpu, ds) <= 1.0


def test_victim_schedule_is_checked_and_changes_training(one_thread) -> None:
    with pytest.raises(ValueError, match="schedule"):
        VictimConfig(schedule="step")  # type: ignore[arg-type]
    gen = torch.Generator().manual_seed(0)
    ds = TensorImageDataset(torch.rand(12, 1, 8, 8, generator=gen), torch.arange(12) % 2)
    cos = train_victim(ds, VictimConfig(epochs=2, schedule="cosine"), seed=0)
    const = train_victim(ds, VictimConfig(epochs=2, schedule="constant"), seed=0)
    assert not torch.equal(cos(ds.images), const(ds.images))
