"""Data validity of the shapes world: neither trivial nor impossible for the claims built on it.

Learnability: a small CNN reaches >= 95% on 16-class shape x colour images (2k train) while a
linear classifier on raw pixels stays <= 70%, so representation claims have headroom; with
shuffled labels the CNN stays at chance (<= 1/16 + 5 points). Styles: a small CNN separates the
six training styles (>= 90%). Minutes on a loaded machine, so marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig
from iclr25.common.data.shapes_world.vocab import STYLES

pytestmark = pytest.mark.slow


def _cnn_accuracy(
    Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, yte: np.ndarray, n_classes: int, *, epochs: int = 15
) -> float:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveMaxPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, n_classes),
    )
    x = torch.from_numpy(Xtr).permute(0, 3, 1, 2).float() / 255.0  # (n, 3, H, W)
    y = torch.from_numpy(ytr)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(epochs):
        perm = torch.randperm(len(x), generator=gen)
        for i in range(0, len(x), 64):
            b = perm[i : i + 64]
            loss = torch.nn.functional.cross_entropy(net(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = net(torch.from_numpy(Xte).permute(0, 3, 1, 2).float() / 255.0).argmax(1).numpy()
    return float((pred == yte).mean())


@pytest.fixture(scope="module")
def shape_color() -> tuple[np.ndarray, ...]:
    world = ShapesWorld(WorldConfig(image_size=16), seed=0)
    Xtr, ytr = world.classification_arrays(2000, split="train")
    Xte, yte = world.classification_arrays(1000, split="test")
    return Xtr, ytr, Xte, yte


def test_a_small_cnn_learns_shape_and_colour(shape_color) -> None:
    assert _cnn_accuracy(*shape_color, 16) >= 0.95


def test_raw_pixels_leave_headroom(shape_color) -> None:
    Xtr, ytr, Xte, yte = shape_color
    flat = lambda X: X.reshape(len(X), -1) / 255.0  # noqa: E731
    acc = LogisticRegression(max_iter=500).fit(flat(Xtr), ytr).score(flat(Xte), yte)
    assert acc <= 0.70


def test_shuffled_labels_stay_at_chance(shape_color) -> None:
    Xtr, ytr, Xte, yte = shape_color
    shuffled = np.random.default_rng(0).permutation(ytr)
    assert _cnn_accuracy(Xtr, shuffled, Xte, yte, 16) <= 1 / 16 + 0.05


def test_a_small_cnn_separates_the_training_styles() -> None:
    world = ShapesWorld(WorldConfig(image_size=32, styles=STYLES), seed=0)
    Xtr, ytr = world.classification_arrays(2000, label_scheme="style")
    Xte, yte = world.classification_arrays(600, split="test", label_scheme="style")
    assert _cnn_accuracy(Xtr, ytr, Xte, yte, len(STYLES)) >= 0.90
