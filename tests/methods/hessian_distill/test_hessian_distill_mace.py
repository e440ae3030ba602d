"""MACE teachers from a local ``.model`` file, checked against MACE's own calculator on a tiny
MACE the test builds and pickles the way MACE releases its models."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import molecule

from iclr25.methods.hessian_distill import AtomsBatch, MACEEnergyModel, load_mace_model, load_mace_teacher
from iclr25.methods.hessian_distill.mace_teacher import _import_mace

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mace") is None, reason="mace-torch not installed")

_ENV = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"


@pytest.fixture(scope="module")
def tiny_model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-interaction ScaleShiftMACE for H and O (float64), pickled whole like a release."""
    _import_mace()
    from e3nn import o3
    from mace import modules

    block = modules.interaction_classes["RealAgnosticResidualInteractionBlock"]
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = modules.ScaleShiftMACE(
            r_max=3.0,
            num_bessel=4,
            num_polynomial_cutoff=3,
            max_ell=1,
            interaction_cls=block,
            interaction_cls_first=block,
            num_interactions=1,
            num_elements=2,
            hidden_irreps=o3.Irreps("8x0e+8x1o"),
            MLP_irreps=o3.Irreps("4x0e"),
            atomic_energies=np.array([-13.6, -2041.0]),
            avg_num_neighbors=3.0,
            atomic_numbers=[1, 8],
            correlation=2,
            gate=torch.nn.functional.silu,
            atomic_inter_scale=1.0,
            atomic_inter_shift=0.0,
        ).double()
    path = tmp_path_factory.mktemp("mace") / "tiny.model"
    torch.save(model, path)
    return path


def _structures() -> list[Atoms]:
    water = molecule("H2O")
    box = Atoms(  # periodic: pairs cross the cell faces, so the shifts matter
        "OH2OH2",
        positions=[
            [0.0, 0.0, 0.0],
            [0.95, 0.1, 0.0],
            [-0.3, 0.9, 0.1],
            [2.1, 1.9, 1.8],
            [2.9, 2.3, 1.7],
            [1.6, 2.5, 2.4],
        ],
        cell=[3.6, 3.7, 3.8],
        pbc=True,
    )
    return [water, box]


def _calculator(path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(_ENV, "1")  # set (and undone) here: importing the calculator sets it for good
    from mace.calculators import MACECalculator

    return MACECalculator(model_paths=str(path), device="cpu", default_dtype="float64")


def test_energies_and_forces_match_maces_calculator(
    tiny_model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher = load_mace_teacher(tiny_model_file)
    calc = _calculator(tiny_model_file, monkeypatch)
    structures = _structures()
    energy, forces = teacher.label(structures)
    for atoms, e, f in zip(structures, energy, forces, strict=True):
        atoms.calc = calc
        assert e == pytest.approx(atoms.get_potential_energy(), abs=1e-9)
        np.testing.assert_allclose(f, atoms.get_forces(), atol=1e-9)
    assert abs(float(np.abs(forces[1]).max())) > 1e-3  # the periodic box is not trivially flat


def test_autograd_rows_match_differences_of_maces_forces(
    tiny_model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher = load_mace_teacher(tiny_model_file)
    calc = _calculator(tiny_model_file, monkeypatch)
    box = _structures()[1]
    batch = AtomsBatch.from_atoms([box], cutoff=teacher.model.cutoff, dtype=torch.float64)
    rows = torch.tensor([[0, 0, 0], [0, 4, 2]])
    got = teacher.hessian_rows(batch, rows)[:, : len(box)].numpy()
    h = 1e-4
    for r, (_, atom, comp) in enumerate(rows.tolist()):
        plus, minus = box.copy(), box.copy()
        plus.positions[atom, comp] += h
        minus.positions[atom, comp] -= h
        plus.calc = minus.calc = calc
        column = (plus.get_forces() - minus.get_forces()) / (2 * h)  # dF/dx_r = row r (symmetric)
        np.testing.assert_allclose(got[r], column, atol=1e-6)


def test_the_import_leaves_torch_load_as_it_was(tiny_model_file: Path) -> None:
    load_mace_model(tiny_model_file)
    assert _ENV not in os.environ


def test_bad_inputs_are_named(tiny_model_file: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no MACE model file"):
        load_mace_model(tmp_path / "missing.model")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "dict.model")
    with pytest.raises(TypeError, match="not a MACE model"):
        load_mace_model(tmp_path / "dict.model")
    model = load_mace_model(tiny_model_file)
    with pytest.raises(ValueError, match="heads"):
        MACEEnergyModel(model, head="mp_pbe")
    teacher = load_mace_teacher(tiny_model_file)
    with pytest.raises(ValueError, match=r"atomic numbers \[6\] are not among the model's elements \[1, 8\]"):
        teacher.label([molecule("CH4")])
