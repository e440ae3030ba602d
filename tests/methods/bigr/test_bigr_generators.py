"""The claim's generators: their recipe (resumable, replayable), the shipped folders, and the check
reading them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from iclr25._core.claims import no_progress
from iclr25._core.pretrained import ArtefactMissingError, read_training
from iclr25.methods.bigr import generators
from iclr25.methods.bigr.claim import CLAIM, run
from iclr25.methods.bigr.generators import (
    ARMS,
    SHIPPED_SEEDS,
    encode_probs,
    generators_dir,
    load_generators,
    pretrain_generators,
    shapes_data,
    val_loss_fn,
)
from iclr25.methods.bigr.tokenizer import load_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

#: A tiny recipe: every arm 600 steps (one checkpoint at 500) on 300 images.
_TINY = dataclasses.replace(
    CLAIM.budgets["full"].config, steps=600, n_evals=4, n_train=300, n_val=100, n_test=100, n_val_loss=64,
    dim=16, depth=1, heads=2, transcoder_depth=1, timesteps=8, diffusion_steps=4, batch_size=8,
)  # fmt: skip


class _Stop(Exception):
    pass


@pytest.fixture(scope="module")
def tiny_recipe(tmp_path_factory) -> Path:
    """The tiny recipe's output, made with one thread as every test here runs."""
    out = tmp_path_factory.mktemp("generators")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pretrain_generators(out, seed=1, progress=no_progress, cfg=_TINY)
    finally:
        torch.set_num_threads(threads)
    return out


def test_an_interrupted_recipe_resumes_to_the_same_generators(tiny_recipe: Path, tmp_path: Path) -> None:
    def stop_in_perbit(stage: str, done: int, total: int) -> None:
        if stage == "train perbit" and done == 550:
            raise _Stop

    with pytest.raises(_Stop):
        pretrain_generators(tmp_path, seed=1, progress=stop_in_perbit, cfg=_TINY)
    assert [p.name for p in tmp_path.iterdir()] == ["resume.pt"]
    pretrain_generators(tmp_path, seed=1, progress=no_progress, cfg=_TINY)
    a, b = load_file(tiny_recipe / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ra, rb = read_training(tiny_recipe), read_training(tmp_path)
    assert ra["loss_curve"] == rb["loss_curve"]
    for arm in ARMS:  # the same curves (the wall time differs)
        assert {k: v for k, v in ra["arms"][arm].items() if k != "seconds"} == {
            k: v for k, v in rb["arms"][arm].items() if k != "seconds"
        }


def test_loaded_generators_give_their_recorded_validation_loss(tiny_recipe: Path) -> None:
    models, record = load_generators(1, _TINY, 16, tiny_recipe)
    assert list(models) == list(ARMS) and record["steps"] == 4 * _TINY.steps
    (_, _, Xva, yva, _, _), _ = shapes_data(_TINY, 1)
    n = _TINY.n_val_loss
    val_loss = val_loss_fn(encode_probs(load_tokenizer(), Xva)[:n], yva[:n], 1)
    for arm in ARMS:
        curve = record["arms"][arm]["val_curve"]
        assert record["arms"][arm]["val_steps"] == [150.0, 300.0, 450.0, 600.0]
        assert val_loss(models[arm]) == pytest.approx(curve[-1], abs=1e-6)


def test_loading_refuses_another_config_or_seed(tiny_recipe: Path) -> None:
    with pytest.raises(ValueError, match=r"steps=600 \(asked 700\).*generators=train"):
        load_generators(1, dataclasses.replace(_TINY, steps=700), 16, tiny_recipe)
    with pytest.raises(ValueError, match="seed 1"):
        load_generators(2, _TINY, 16, tiny_recipe)
    with pytest.raises(ArtefactMissingError, match=r"no shipped generators for seed 7.*generators=train"):
        load_generators(7, _TINY, 16)


def test_the_check_reads_shipped_generators_and_refuses_altered_weights(
    tiny_recipe: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = dataclasses.replace(
        CLAIM.budgets["smoke"].config, **{f: getattr(_TINY, f) for f in generators.GENERATOR_FIELDS},
        generators="shipped",
    )  # fmt: skip
    monkeypatch.setattr(generators, "generators_dir", lambda seed: tiny_recipe)
    result = run(cfg, seed=1)
    record = read_training(tiny_recipe)
    for arm in ARMS:
        assert result.metrics[arm]["val_reload_gap"] <= 1e-6
        assert result.metrics[arm]["val_final"] == record["arms"][arm]["val_curve"][-1]
    assert result.series["validation_loss"].x == [150.0, 300.0, 450.0, 600.0]

    altered = tmp_path / "altered"
    altered.mkdir()
    for name in ("config.json", "training.json"):
        (altered / name).write_text((tiny_recipe / name).read_text())
    weights = load_file(tiny_recipe / "model.safetensors")
    weights = {k: v + 0.05 if k.startswith("causal.") else v for k, v in weights.items()}
    save_file(weights, altered / "model.safetensors")
    monkeypatch.setattr(generators, "generators_dir", lambda seed: altered)
    with pytest.raises(ValueError, match="shipped causal generator of seed 1 gives validation loss"):
        run(cfg, seed=1)


def test_the_shipped_generators_fit_the_full_budget() -> None:
    """Each shipped folder was made by its recipe with the full budget's config, for its seed."""
    full = CLAIM.budgets["full"].config
    for seed in SHIPPED_SEEDS:
        config = json.loads((generators_dir(seed) / "config.json").read_text())
        want = {f: list(v) if isinstance(v, tuple) else v for f, v in generators._fields(full).items()}
        assert config == {"seed": seed, "num_classes": 16, "claim_config": want}
        record = read_training(generators_dir(seed))
        assert [record["arms"][a]["steps"] for a in ARMS] == [full.steps] * len(ARMS)
