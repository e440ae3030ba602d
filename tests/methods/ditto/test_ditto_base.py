"""The shipped base LM's recipe: schedule, resumption, and the loader's errors."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from iclr25._core.pretrained import ArtefactMissingError
from iclr25.methods.ditto.base import BASE_DIR, BaseTrainConfig, _lr_at, _run, load_base

TINY = BaseTrainConfig(n_layer=1, n_head=2, d_model=16, steps=6, batch=8, warmup=2)


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    cfg = dataclasses.replace(TINY, steps=102, warmup=2)
    assert _lr_at(0, cfg) == pytest.approx(cfg.lr / 2) and _lr_at(1, cfg) == pytest.approx(cfg.lr)
    assert _lr_at(2, cfg) == pytest.approx(cfg.lr)
    assert _lr_at(102, cfg) == pytest.approx(cfg.min_lr_ratio * cfg.lr)


def test_a_resumed_run_gives_the_losses_of_an_uninterrupted_one(one_thread) -> None:
    _, full = _run(TINY)
    saved: list[dict] = []
    # a checkpoint is written to disk at once; a deep copy stands in for that here
    _run(TINY, steps=4, checkpoint=lambda s: saved.append(copy.deepcopy(s)), every=2)  # killed at 4
    assert [s["step"] for s in saved] == [2]
    _, resumed = _run(TINY, state=saved[0])
    assert resumed == pytest.approx(full, abs=1e-6) and len(resumed) == TINY.steps


def test_bad_steps_and_a_missing_folder_raise(tmp_path) -> None:
    with pytest.raises(ValueError, match="steps must be in"):
        _run(TINY, steps=TINY.steps + 1)
    with pytest.raises(ArtefactMissingError, match="iclr25 pretrain ditto base"):
        load_base(tmp_path)


def test_the_shipped_base_loads() -> None:
    model = load_base(BASE_DIR)
    assert not model.training and model.config.n_layer == BaseTrainConfig().n_layer
