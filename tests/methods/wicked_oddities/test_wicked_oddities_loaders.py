"""The paper-scale image loaders on tiny files the test writes in the real formats."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25.methods.wicked_oddities import load_cifar10, load_image_folder

tv = pytest.importorskip("torchvision")


def test_cifar10_pickles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        # rows are the CIFAR layout: 1024 red, then 1024 green, then 1024 blue values
        batch = {"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), "labels": [3, 7]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}))
    # the tiny files cannot match torchvision's md5 sums of the real archive
    monkeypatch.setattr(tv.datasets.cifar, "check_integrity", lambda *args, **kwargs: True)
    train = load_cifar10(tmp_path)
    assert train.images.shape == (10, 3, 32, 32) and train.labels.tolist() == [3, 7] * 5
    first = pickle.loads((folder / "data_batch_1").read_bytes())["data"][0]
    expected = torch.tensor(first.reshape(3, 32, 32), dtype=torch.float32) / 255.0
    assert torch.equal(train.images[0], expected)  # channels first, in [0, 1]
    test = load_cifar10(tmp_path, train=False)
    assert len(test) == 2
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        load_cifar10(tmp_path / "nope")


def test_image_folder(tmp_path: Path) -> None:
    from PIL import Image

    for cls in ("bird", "cat"):
        (tmp_path / cls).mkdir()
        for i in range(2):
            Image.fromarray(np.full((10, 12, 3), 60 * (i + 1), dtype=np.uint8)).save(
                tmp_path / cls / f"{i}.png"
            )
    ds = load_image_folder(tmp_path, size=8)
    assert ds.images.shape == (4, 3, 8, 8) and sorted(ds.labels.tolist()) == [0, 0, 1, 1]
    assert float(ds.images.min()) >= 0.0 and float(ds.images.max()) <= 1.0
    assert torch.allclose(ds.images[0], torch.full((3, 8, 8), 60 / 255))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_image_folder(tmp_path / "nope")
