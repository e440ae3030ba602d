"""The shipped IF-AR baseline and the fixed held-out-structure split."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from iclr25._core.convergence import read_curve
from iclr25._core.pretrained import ArtefactMissingError
from iclr25.methods.invmsafold import IFAR, LatticeStructure, fold_split, load_ifar
from iclr25.methods.invmsafold.claim import _FULL, _shipped_ifar


def test_fold_split_is_fixed_and_disjoint() -> None:
    train, pool = fold_split(1081, 100)
    assert len(pool) == 100 and len(train) == 981 and not set(train) & set(pool)
    assert sorted(train + pool) == list(range(1081))
    assert fold_split(1081, 100) == (train, pool)
    for bad in (0, 1081):
        with pytest.raises(ValueError, match="held-out pool"):
            fold_split(1081, bad)


def test_shipped_ifar_loads_in_the_full_check_world_and_plateaued() -> None:
    model, record = _shipped_ifar(_FULL)
    assert isinstance(model, IFAR) and not model.training
    curve = read_curve(record["val_steps"], record["val_native_nll"], mode="min")
    assert curve.plateau_gap <= 0.02  # the claim's convergence precondition holds for it
    assert "held-out pool of 100 folds excluded" in record["data"]
    snake = np.array([(r, c if r % 2 == 0 else 4 - c) for r in range(5) for c in range(5)])
    s = model.sample(LatticeStructure.from_coords(snake), 4, seed=0)
    assert s.shape == (4, 25) and int(s.max()) < 20


def test_shipped_ifar_refuses_another_world(tmp_path) -> None:
    other = dataclasses.replace(_FULL, lattice=dataclasses.replace(_FULL.lattice, heldout_pool=50))
    with pytest.raises(ValueError, match="heldout_pool"):
        _shipped_ifar(other)
    with pytest.raises(ArtefactMissingError, match="iclr25 pretrain invmsafold ifar"):
        load_ifar(tmp_path)
