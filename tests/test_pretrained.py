"""Shipped foundations: the artefact layout, its loader's errors, and ``iclr25 pretrain``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from iclr25._core.pretrained import (
    ARTEFACT_FILES,
    ArtefactMissingError,
    clear_progress,
    load_progress,
    read_training,
    require_artefact,
    save_progress,
)
from iclr25._core.registry import REGISTRY
from iclr25.cli import app


def test_pretrain_writes_the_three_files_and_its_record(fake_registry: dict, tmp_path: Path) -> None:
    out = tmp_path / "toy"
    result = CliRunner().invoke(app, ["pretrain", "fake", "toy", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert require_artefact(out) == out
    record = read_training(out)
    assert record["steps"] == 20 and record["command"].startswith("iclr25 pretrain fake toy")
    assert record["loss_curve"][0] == 9.0 and record["quality"]["w"] == pytest.approx(3.0, abs=0.1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["pretrain", "nope"], "unknown method"),
        (["pretrain", "fake", "nope"], "has no artefact 'nope'; it ships: toy"),
        (["pretrain", "fake_broken"], "ships no pretrained artefact"),
    ],
)
def test_pretrain_bad_input_is_one_error_line(fake_registry: dict, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and message in result.output


def test_a_missing_file_names_the_command_that_trains_it(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(
        ArtefactMissingError, match=r"lacks model.safetensors, training.json; `iclr25 pretrain m a"
    ):
        require_artefact(tmp_path, method="m", name="a")
    (tmp_path / "training.json").write_text(json.dumps({"command": "x"}))
    with pytest.raises(ValueError, match="lacks commit"):
        read_training(tmp_path)


def test_progress_checkpoints_round_trip(tmp_path: Path) -> None:
    assert load_progress(tmp_path) is None
    save_progress(tmp_path, {"step": 7, "losses": [1.0, 0.5]})
    assert load_progress(tmp_path) == {"step": 7, "losses": [1.0, 0.5]}
    clear_progress(tmp_path)
    assert load_progress(tmp_path) is None


SHIPPED = [a for e in REGISTRY.values() for a in e.artefacts]


@pytest.mark.parametrize("artefact", SHIPPED, ids=[f"{a.method}-{a.name}" for a in SHIPPED])
def test_every_shipped_artefact_is_complete(artefact) -> None:
    folder = require_artefact(artefact.path, method=artefact.method, name=artefact.name)
    assert sorted(p.name for p in folder.iterdir()) == sorted(ARTEFACT_FILES), "only the three files"
    record = read_training(folder)
    assert record["steps"] == len(record["loss_curve"]) and record["quality"]
    assert record["command"].startswith(f"iclr25 pretrain {artefact.method} {artefact.name}")
    out = record["command"].partition("--out ")[2]
    assert not Path(out).is_absolute(), f"the recorded command names a machine path: {out}"


def test_the_package_ships_no_pickle_and_stays_small() -> None:
    package = Path(__file__).resolve().parents[1] / "src" / "iclr25"
    assert not sorted(package.rglob("*.pt")) and not sorted(package.rglob("*.pkl"))
    size = sum(p.stat().st_size for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert size <= 60 * 2**20, f"the package source is {size / 2**20:.1f} MB (limit 60)"


@pytest.mark.parametrize("artefact", SHIPPED, ids=[f"{a.method}-{a.name}" for a in SHIPPED])
def test_replaying_the_first_steps_gives_the_recorded_losses(artefact, tmp_path: Path) -> None:
    """DESIGN rule 10: the recipe that made a shipped artefact still makes it."""
    from iclr25._core.claims import no_progress
    from iclr25._core.seeding import claim_scope

    recorded = read_training(artefact.path)["loss_curve"][: artefact.replay_steps]
    with claim_scope(0, threads=1):
        losses = artefact.load_recipe()(tmp_path, progress=no_progress, max_steps=artefact.replay_steps)
    assert losses == pytest.approx(recorded, abs=1e-4)
    assert not any(tmp_path.iterdir()), "a replay writes nothing"
