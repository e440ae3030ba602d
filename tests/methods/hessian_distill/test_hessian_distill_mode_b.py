"""Teacher mode B: a broad multi-element EMT set, an NN teacher trained on it, and distillation."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator

from iclr25.methods.hessian_distill import (
    BROAD_ELEMENTS,
    AtomsBatch,
    DistillConfig,
    DistillTrainer,
    EnergyFunctionModel,
    LabelledStructures,
    StudentConfig,
    TeacherLabelStore,
    TorchTeacher,
    evaluate,
    make_broad_set,
    make_student,
    read_structures,
    specialised_subset,
    train_teacher,
    write_structures,
)

TINY = StudentConfig(hidden=8, layers=1, n_rbf=4, cutoff=3.5)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def broad():
    return make_broad_set(8, 4, seed=3, elements=(29, 79, 46))


# ----------------------------------------------------------------------------------- broad set


def test_broad_set_kinds_elements_and_emt_labels(broad):
    assert [a.info["kind"] for a in broad] == ["cluster"] * 8 + ["fcc111", "fcc100"] * 2
    assert len({a.info["id"] for a in broad}) == len(broad)
    for a in broad:
        assert set(a.numbers.tolist()) <= {29, 79, 46}
        assert a.pbc.tolist() == ([True, True, False] if a.info["kind"] != "cluster" else [False] * 3)
        ref = a.copy()
        ref.calc = EMT()
        np.testing.assert_allclose(a.get_potential_energy(), ref.get_potential_energy(), atol=1e-10)
        np.testing.assert_allclose(a.get_forces(), ref.get_forces(), atol=1e-10)
    assert len({frozenset(a.numbers.tolist()) for a in broad}) > 2  # several compositions


def test_broad_set_is_seeded():
    a = make_broad_set(2, 2, seed=1, elements=(13, 28))
    b = make_broad_set(2, 2, seed=1, elements=(13, 28))
    c = make_broad_set(2, 2, seed=2, elements=(13, 28))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.positions, y.positions)
        np.testing.assert_array_equal(x.numbers, y.numbers)
    assert any(not np.array_equal(x.positions, y.positions) for x, y in zip(a, c, strict=True))


def test_broad_set_default_elements_all_emt_metals():
    atoms = make_broad_set(12, 2, seed=0, max_elements=1)
    assert {int(a.numbers[0]) for a in atoms} <= set(BROAD_ELEMENTS)
    assert all(len(set(a.numbers.tolist())) == 1 for a in atoms)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"elements": (1,)},  # EMT H is not an fcc metal
        {"elements": (29, 29)},
        {"elements": (26,)},  # Fe: no EMT parameters
        {"max_elements": 3, "elements": (29, 79)},
        {"rattle": -0.1},
    ],
)
def test_broad_set_bad_input(kwargs):
    with pytest.raises(ValueError):
        make_broad_set(1, 1, seed=0, **kwargs)


def test_broad_set_rejects_overlaps():
    with pytest.raises(ValueError, match="overlapping"):
        make_broad_set(1, 0, seed=0, elements=(29,), min_distance=2.4)


def test_specialised_subset(broad):
    sub = specialised_subset(broad, elements=(29, 79))
    assert sub and all(set(a.numbers.tolist()) <= {29, 79} for a in sub)
    expected = [a for a in broad if set(a.numbers.tolist()) <= {29, 79}]
    assert [a.info["id"] for a in sub] == [a.info["id"] for a in expected]
    clusters = specialised_subset(broad, elements=(29, 79, 46), kinds=("cluster",))
    assert len(clusters) == 8
    with pytest.raises(ValueError):
        specialised_subset(broad, elements=())
    with pytest.raises(ValueError):
        specialised_subset(broad, elements=(29,), kinds=("bulk",))


def test_broad_set_extxyz_round_trip(broad, tmp_path):
    write_structures(tmp_path / "broad.xyz", broad[-3:])
    back = read_structures(tmp_path / "broad.xyz")
    for a, b in zip(broad[-3:], back, strict=True):
        np.testing.assert_allclose(a.positions, b.positions, atol=1e-6)
        np.testing.assert_allclose(a.get_forces(), b.get_forces(), atol=1e-6)
        assert b.info["kind"] == a.info["kind"] and b.info["id"] == a.info["id"]


# ------------------------------------------------------------------------------------ teacher


def test_train_teacher_rejects_hessian_weight_and_short_cutoff(broad):
    ds = LabelledStructures.from_atoms(broad[:2], cutoff=3.5)
    with pytest.raises(ValueError, match="lambda_h"):
        train_teacher(ds, ds, architecture=TINY, config=DistillConfig(lambda_h=1.0, epochs=1))
    short = LabelledStructures.from_atoms(broad[:2], cutoff=3.0)
    with pytest.raises(ValueError, match="cutoff"):
        train_teacher(short, short, architecture=TINY, config=DistillConfig(lambda_h=0.0, epochs=1))


def test_teacher_calculator_matches_model(broad):
    teacher = TorchTeacher(make_student(TINY, elements=(29, 46, 79), seed=1))
    for a in (broad[0], broad[-1]):  # a cluster and a periodic slab
        atoms = a.copy()
        atoms.calc = teacher.as_calculator()
        out = teacher.model(AtomsBatch.from_atoms([a], cutoff=TINY.cutoff, dtype=torch.float64))
        f = atoms.get_forces()
        assert f.dtype == np.float64
        np.testing.assert_allclose(atoms.get_potential_energy(), float(out["energy"][0]), rtol=1e-12)
        np.testing.assert_allclose(f, out["forces"].numpy(), rtol=1e-10, atol=1e-12)
    assert atoms.get_stress().shape == (6,)  # the slab is periodic


def test_energy_function_teacher_as_calculator(broad):
    def harmonic(pos, z, cell, pbc, b):
        return (pos**2).sum().reshape(1)

    atoms = broad[0].copy()
    atoms.calc = TorchTeacher(EnergyFunctionModel(harmonic, cutoff=3.0)).as_calculator()
    np.testing.assert_allclose(atoms.get_forces(), -2 * atoms.positions, rtol=1e-12)


def _fd_rows(model, atoms, coords, cutoff, h=1e-5):
    """Central differences of the model's forces under a displacement of coordinate r (columns)."""
    base = AtomsBatch.from_atoms([atoms], cutoff=cutoff, dtype=torch.float64)
    out = []
    for r in coords:
        cols = []
        for sign in (1.0, -1.0):
            pos = base.pos.clone()
            pos[r // 3, r % 3] += sign * h
            cols.append(model(base.with_positions(pos))["forces"].reshape(-1))
        out.append(((cols[0] - cols[1]) / (2 * h)).numpy())
    return np.stack(out)


def test_mode_b_end_to_end(broad, tmp_path):
    """Broad set -> teacher -> save/load -> teacher rows on the subset -> distilled student."""
    cut = TINY.cutoff
    train = LabelledStructures.from_atoms(broad, cutoff=cut)
    teacher_cfg = DistillConfig(lambda_h=0.0, epochs=4, batch_size=4, seed=0)
    teacher = train_teacher(train, train, architecture=TINY, config=teacher_cfg)
    assert teacher.model.hparams["elements"] == [29, 46, 79]
    assert teacher.model.hparams["hidden"] == TINY.hidden

    teacher.model.save_pretrained(tmp_path / "teacher")
    loaded = TorchTeacher.from_local(tmp_path / "teacher")
    b64 = AtomsBatch.from_atoms(broad[-2:], cutoff=cut, dtype=torch.float64)
    for k, v in teacher.model(b64).items():
        torch.testing.assert_close(loaded.model(b64)[k], v, rtol=0, atol=0)

    # the teacher's error against EMT, e.g. for the adaptive λ_H rule
    teacher_mae = evaluate(
        loaded.model, LabelledStructures.from_atoms(broad, cutoff=cut, dtype=torch.float64)
    )
    assert np.isfinite(teacher_mae["force_mae"]) and teacher_mae["force_mae"] > 0

    subset = specialised_subset(broad, elements=(29, 79))
    labels = TeacherLabelStore().precompute(loaded, subset, rows_per_structure=3, seed=0, cutoff=cut)
    for a in subset:
        coords, rows = labels.get(a.info["id"], a.numbers)
        assert rows.shape == (3, 3 * len(a)) and torch.isfinite(rows).all()
        fd = _fd_rows(loaded.model, a, coords.tolist(), cut)
        np.testing.assert_allclose(rows.numpy(), fd, rtol=1e-5, atol=1e-7)

    data = LabelledStructures.from_atoms(subset, cutoff=cut)
    cfg = DistillConfig(lambda_h=400.0, epochs=8, batch_size=2, lr=1e-2, seed=0, force_jac_sample_size=1)
    student = make_student(StudentConfig(hidden=8, layers=1, n_rbf=4, cutoff=cut), elements=(29, 79))
    trainer = DistillTrainer(student, labels, cfg).fit(data, data)
    hist = trainer.history_
    assert len(hist) == cfg.epochs
    assert all(np.isfinite(h[k]) for h in hist for k in ("loss", "l_h", "val_force_mae"))
    assert all(h["l_h"] > 0 for h in hist)
    # few steps of a tiny student: the EMA validation error and the Hessian term go down
    assert hist[-1]["val_force_mae"] < hist[0]["val_force_mae"]
    assert hist[-1]["l_h"] < hist[0]["l_h"]


def test_subset_labels_are_emt_not_teacher(broad):
    """The student's energy/force targets stay the EMT reference; only the rows come from the teacher."""
    sub = specialised_subset(broad, elements=(29, 79))
    a = sub[0]
    assert isinstance(a.calc, SinglePointCalculator)
    ref = a.copy()
    ref.calc = EMT()
    np.testing.assert_allclose(a.get_forces(), ref.get_forces(), atol=1e-10)


def test_readme_mode_b_sketch_runs(tmp_path, monkeypatch):
    readme = Path(__file__).parents[3] / "src/iclr25/methods/hessian_distill/README.md"
    section = readme.read_text().split("### Teacher mode B", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "README-mode-B", "exec"), scope)
    assert (tmp_path / "teacher" / "model.pt").is_file()
    assert np.isfinite(scope["trainer"].history_[-1]["loss"])
    assert scope["teacher_mae"] > 0
