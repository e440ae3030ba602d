"""Paper-scale readers on tiny files written in the real formats, and a locally saved tiny LM."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25.methods.comet import COMETMLP, comet_ffn_, load_cifar, load_image_folder, load_sarcos


def test_sarcos_mat(tmp_path: Path) -> None:
    from scipy.io import savemat

    data = np.arange(5 * 28, dtype=np.float64).reshape(5, 28)
    savemat(tmp_path / "sarcos_inv.mat", {"sarcos_inv": data})
    X, Y = load_sarcos(tmp_path / "sarcos_inv.mat")
    assert X.shape == (5, 21) and Y.shape == (5, 7)
    assert float(Y[0, 0]) == 21.0
    net = COMETMLP(21, (8,), 7, p_keep=0.5)
    assert net(X).shape == (5, 7)
    savemat(tmp_path / "bad.mat", {"x": data[:, :20]})
    with pytest.raises(ValueError, match="28"):
        load_sarcos(tmp_path / "bad.mat")
    with pytest.raises(FileNotFoundError):
        load_sarcos(tmp_path / "missing.mat")


def test_cifar_pickles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tv = pytest.importorskip("torchvision")
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        batch = {"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), "labels": [0, 1]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": [f"c{i}" for i in range(10)]}))
    # the tiny files cannot match torchvision's md5 sums of the real archive
    monkeypatch.setattr(tv.datasets.cifar, "check_integrity", lambda *args, **kwargs: True)
    X, y = load_cifar(tmp_path, "cifar10", train=True)
    assert X.shape == (10, 3072) and y.tolist() == [0, 1] * 5
    assert float(X.min()) >= -1.0 and float(X.max()) <= 1.0
    Xt, _ = load_cifar(tmp_path, "cifar10", train=False, normalize=False)
    assert Xt.shape == (2, 3072) and float(Xt.min()) >= 0.0
    with pytest.raises(FileNotFoundError):
        load_cifar(tmp_path / "nope")


def test_image_folder(tmp_path: Path) -> None:
    pytest.importorskip("torchvision")
    from PIL import Image

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(2):
            Image.fromarray(np.full((10, 12, 3), 40 * i, dtype=np.uint8)).save(tmp_path / cls / f"{i}.png")
    X, y = load_image_folder(tmp_path, size=8)
    assert X.shape == (4, 3 * 8 * 8) and sorted(y.tolist()) == [0, 0, 1, 1]


def test_surgery_on_locally_saved_model(tmp_path: Path) -> None:
    from iclr25.common.tiny_lm import build_tiny_lm, load_tiny_lm

    build_tiny_lm("llama", vocab_size=20, n_layer=1, n_head=2, d_model=16, seed=0).save_pretrained(tmp_path)
    model = load_tiny_lm(tmp_path)
    handle = comet_ffn_(model, 0.5)
    with torch.no_grad():
        model(torch.tensor([[4, 5, 6]]))
    assert handle.last_masks[0].shape == (1, 3, 64)
