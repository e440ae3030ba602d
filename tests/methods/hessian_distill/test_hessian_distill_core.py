"""Loss, adaptive weight, label store, calculator, batch validation, checkpoints and determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from ase import Atoms
from ase.build import bulk
from ase.calculators.fd import calculate_numerical_forces, calculate_numerical_stress
from hessian_distill_helpers import batch64, cluster, model64

from iclr25.methods.hessian_distill import (
    AdaptiveHessianWeight,
    ASECalculatorTeacher,
    AtomsBatch,
    ClaimConfig,
    DistillConfig,
    DistillTrainer,
    EnergyFunctionModel,
    HessianDistillationLoss,
    LabelledStructures,
    StudentCalculator,
    StudentConfig,
    TeacherLabelStore,
    TinyPaiNN,
    TorchTeacher,
    energy_drift,
    hessian_rows,
    make_clusters,
    make_student,
    random_teacher_labels,
    run_nve,
    sample_rows,
    shuffled_labels,
)

# ----------------------------------------------------------------------------------------- loss


pytestmark = pytest.mark.usefixtures("one_thread")


def test_loss_zero_when_student_equals_teacher() -> None:
    m, b = model64(), batch64([cluster(0), cluster(1)])
    rows = sample_rows(b, 2, torch.Generator().manual_seed(0))
    j = hessian_rows(m, b, rows)
    assert HessianDistillationLoss(force_std=0.3)(j, j.clone(), rows, b).item() == 0.0


def test_loss_hand_computed_on_two_structures() -> None:
    a = Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 2.5]])
    c = Atoms("Cu3", positions=[[0, 0, 0], [0, 0, 2.5], [0, 2.5, 0]])
    b = AtomsBatch.from_atoms([a, c])
    rows = torch.tensor([[0, 0, 0], [1, 2, 1], [1, 0, 2]])
    s = torch.zeros(3, 3, 3)
    t = torch.zeros(3, 3, 3)
    t[0, 0] = torch.tensor([3.0, 4.0, 0.0])  # ‖·‖ = 5
    t[0, 2] = 100.0  # padding slot of a 2-atom structure: ignored
    t[1, 1] = torch.tensor([0.0, 0.0, 2.0])  # 2
    t[2, 0] = torch.tensor([0.0, 6.0, 8.0])  # 10
    # ℓ_0 = 5, ℓ_1 = mean(2, 10) = 6; L_H = (5 + 6) / 5 free atoms; σ_F = 2 halves it
    loss = HessianDistillationLoss(force_std=2.0)(s, t, rows, b)
    assert loss.item() == pytest.approx(11 / 5 / 2)


def test_loss_invariant_to_structure_order() -> None:
    m, b = model64(), batch64([cluster(0), cluster(1, n_au=6), cluster(2)])
    rows = sample_rows(b, 2, torch.Generator().manual_seed(3))
    j_s = hessian_rows(m, b, rows)
    j_t = j_s + torch.randn(j_s.shape, generator=torch.Generator().manual_seed(0), dtype=j_s.dtype)
    j_t[:, 13:] = 0
    loss = HessianDistillationLoss()(j_s, j_t, rows, b)
    perm = [2, 0, 1]
    b2 = b.select(perm)
    inv = {old: new for new, old in enumerate(perm)}
    rows2 = rows.clone()
    rows2[:, 0] = torch.tensor([inv[int(x)] for x in rows[:, 0]])
    j_s2 = hessian_rows(m, b2, rows2)
    torch.testing.assert_close(j_s2, j_s)  # offsets handled: same rows in a new order
    torch.testing.assert_close(HessianDistillationLoss()(j_s2, j_t, rows2, b2), loss)


def test_loss_excludes_fixed_atoms_and_guards_outliers() -> None:
    from ase.constraints import FixAtoms

    a = Atoms("Cu3", positions=[[0, 0, 0], [0, 0, 2.5], [0, 2.5, 0]])
    a.set_constraint(FixAtoms(indices=[2]))
    b = AtomsBatch.from_atoms([a])
    rows = torch.tensor([[0, 0, 0]])
    s = torch.zeros(1, 3, 3)
    t = torch.zeros(1, 3, 3)
    t[0, 0, 0] = 1.0
    t[0, 2, 0] = 50.0  # column of a fixed atom: excluded
    assert HessianDistillationLoss()(s, t, rows, b).item() == pytest.approx(1 / 2)
    t[0, 1, 1] = 2e4  # above the outlier threshold: ℓ_b scaled by 1e-8
    guarded = HessianDistillationLoss()(s, t, rows, b).item()
    assert guarded == pytest.approx((1 + 2e4) / 2 * 1e-8)
    # a row of a fixed atom is dropped
    assert HessianDistillationLoss()(s, t, torch.tensor([[0, 2, 0]]), b).item() == 0.0


# ---------------------------------------------------------------------------- adaptive weight


@pytest.mark.parametrize(
    ("teacher", "restore", "student_maes", "states", "weights"),
    [
        (0.1, False, [0.2, 0.104, 0.09, 0.2], ["on", "ramped", "off", "off"], [400, 100, 0, 0]),
        (0.1, True, [0.2, 0.09, 0.2, 0.103], ["on", "off", "on", "ramped"], [400, 0, 400, 100]),
        (0.1, False, [0.104, 0.3], ["ramped", "ramped"], [100, 100]),
        (0.0, False, [0.0, 1.0, -1.0], ["disabled"] * 3, [400, 400, 400]),
    ],
)
def test_adaptive_weight_state_machine(teacher, restore, student_maes, states, weights) -> None:
    w = AdaptiveHessianWeight(base=400, teacher_val_force_mae=teacher, every=20, restore=restore)
    assert w.update(7, 0.0) == 400  # not a check step: unchanged
    for k, (mae, st, wt) in enumerate(zip(student_maes, states, weights, strict=True)):
        assert w.update(20 * (k + 1), mae) == wt
        assert w.state == st


# ------------------------------------------------------------------------------- label store


def test_label_store_round_trip_chunks_and_hash_check(tmp_path) -> None:
    atoms = [cluster(k) for k in range(5)]
    store = TeacherLabelStore(tmp_path / "labels", chunk_size=2)
    store.precompute(ASECalculatorTeacher(), atoms, rows_per_structure=3, seed=0)
    assert len(list((tmp_path / "labels").glob("chunk_*.npz"))) == 3
    back = TeacherLabelStore.open(tmp_path / "labels")
    assert back.ids() == store.ids() and back.meta["rows_per_structure"] == 3
    for a in atoms:
        c1, r1 = store.get(a.info["id"], a.numbers)
        c2, r2 = back.get(a.info["id"], a.numbers)
        assert torch.equal(c1, c2) and torch.equal(r1, r2)
    b = AtomsBatch.from_atoms(atoms, dtype=torch.float64)
    rows = sample_rows(b, 2, torch.Generator().manual_seed(0), allowed=back.allowed_for(b))
    direct = ASECalculatorTeacher().hessian_rows(b, rows)
    torch.testing.assert_close(back.rows_for(b, rows), direct)
    swapped = atoms[0].numbers[::-1].copy()
    with pytest.raises(ValueError, match="hash mismatch"):
        back.get(atoms[0].info["id"], swapped)
    with pytest.raises(KeyError):
        back.get("missing", atoms[0].numbers)
    with pytest.raises(FileNotFoundError):
        TeacherLabelStore.open(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="not supported"):
        TeacherLabelStore(format="zarr")  # type: ignore[arg-type]


def test_label_store_lazy_and_shuffled_control() -> None:
    atoms = [cluster(k) for k in range(3)]
    b = AtomsBatch.from_atoms(atoms, dtype=torch.float64)
    lazy = TeacherLabelStore().lazy(ASECalculatorTeacher())
    rows = torch.tensor([[2, 4, 1]])
    torch.testing.assert_close(lazy.rows_for(b, rows), ASECalculatorTeacher().hessian_rows(b, rows))
    full = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms)
    sh = shuffled_labels(full, torch.Generator().manual_seed(0), {a.info["id"]: 13 for a in atoms})
    for a in atoms:
        assert not torch.equal(sh.get(a.info["id"], a.numbers)[1], full.get(a.info["id"], a.numbers)[1])


def test_random_teacher_rows_match_size_not_curvature() -> None:
    """The curvature control: an untrained network's rows, rescaled to the true rows' RMS, have
    the same size but point elsewhere; the store's RMS is the plain root mean square."""
    atoms = [cluster(k) for k in range(2)]
    true = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms)
    arch = StudentConfig(hidden=8, layers=1, n_rbf=4)
    rnd = random_teacher_labels(true, atoms, arch, elements=(29, 79), seed=3)
    assert rnd.rms() == pytest.approx(true.rms(), rel=1e-9)
    entries = np.concatenate([true.get(a.info["id"], a.numbers)[1].numpy().ravel() for a in atoms])
    assert true.rms() == pytest.approx(float(np.sqrt(np.mean(entries**2))), rel=1e-12)
    for a in atoms:
        t = true.get(a.info["id"], a.numbers)[1].double().ravel()
        r = rnd.get(a.info["id"], a.numbers)[1].double().ravel()
        cos = float(t @ r / (t.norm() * r.norm()))
        assert abs(cos) < 0.9  # not the teacher's curvature
    assert rnd.meta["random_teacher"]["seed"] == 3


def test_force_jac_sample_size_defaults_to_the_official_configs() -> None:
    assert DistillConfig().force_jac_sample_size == DistillConfig.paper().force_jac_sample_size == 4
    assert ClaimConfig().distill.force_jac_sample_size == 1  # the amino-acid config's value (CPU)
    with pytest.raises(ValueError, match="force_jac_sample_size"):
        DistillConfig(force_jac_sample_size=0)


# -------------------------------------------------------------------------------- calculator


def test_calculator_forces_and_stress_match_numerical() -> None:
    m = TinyPaiNN(hidden=8, layers=2, n_rbf=6, cutoff=4.0, elements=(29,), seed=1)
    with torch.no_grad():
        m.scale.fill_(0.5)
    atoms = bulk("Cu", "fcc", a=3.6) * (2, 2, 2)
    atoms.rattle(0.05, seed=0)
    atoms.calc = StudentCalculator(m)
    f = atoms.get_forces()
    assert f.dtype == np.float64 and isinstance(atoms.get_potential_energy(), float)
    np.testing.assert_allclose(f, calculate_numerical_forces(atoms, eps=1e-4), atol=1e-6)
    stress = atoms.get_stress()
    num = calculate_numerical_stress(atoms, eps=1e-5)
    np.testing.assert_allclose(stress, num, atol=1e-6)
    cluster_atoms = cluster(0)
    cluster_atoms.calc = StudentCalculator(model64())
    assert cluster_atoms.get_forces().dtype == np.float64
    np.testing.assert_allclose(
        cluster_atoms.get_forces(),
        calculate_numerical_forces(cluster_atoms, eps=1e-4),
        atol=1e-6,
    )


def test_short_nve_run_conserves_energy() -> None:
    m = make_student(StudentConfig(hidden=8, layers=2, n_rbf=6), seed=0)
    m.set_normalisation(0.3, {29: -0.1, 79: -0.2})
    md = run_nve(cluster(0), StudentCalculator(m), steps=100, rng=np.random.default_rng(0))
    assert energy_drift(md["total"], 13) < 0.05
    assert md["kinetic"].max() > 0


# --------------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors(tmp_path) -> None:
    ok = cluster(0)
    with pytest.raises(ValueError, match="overlapping"):
        AtomsBatch.from_atoms([Atoms("Cu2", positions=[[0, 0, 0], [0, 0, 0.2]])])
    nan = ok.copy()
    nan.positions[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        AtomsBatch.from_atoms([nan])
    with pytest.raises(ValueError, match="unsupported elements"):
        make_student(StudentConfig())(
            AtomsBatch.from_atoms([Atoms("CuFe", positions=[[0, 0, 0], [0, 0, 2.4]])])
        )
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TorchTeacher.from_local(tmp_path / "no_teacher")
    with pytest.raises(FileNotFoundError):
        StudentCalculator.from_pretrained(tmp_path / "no_student")
    with pytest.raises(ValueError, match="lambda_h"):
        DistillTrainer(make_student(StudentConfig()), None, DistillConfig())
    with pytest.raises(ValueError, match="batch_size"):
        DistillConfig(batch_size=0)
    with pytest.raises(ValueError, match="cutoff"):
        StudentConfig(cutoff=-1.0)


# ------------------------------------------------------------------- checkpoints and teachers


def test_teacher_checkpoint_round_trip_from_local_path(tmp_path) -> None:
    teacher_model = TinyPaiNN(hidden=16, layers=2, n_rbf=8, cutoff=4.0, seed=3)
    teacher_model.set_normalisation(0.4, {29: -0.2, 79: -0.1})
    teacher_model.save_pretrained(tmp_path / "teacher")
    t = TorchTeacher.from_local(tmp_path / "teacher")
    b = batch64([cluster(0)])
    rows = torch.tensor([[0, 1, 2], [0, 8, 0]])
    torch.testing.assert_close(t.hessian_rows(b, rows), hessian_rows(teacher_model.double(), b, rows))
    e, f = t.label([cluster(0)])
    assert e.shape == (1,) and f[0].shape == (13, 3)
    calc = StudentCalculator.from_pretrained(tmp_path / "teacher")
    a = cluster(0)
    a.calc = calc
    assert a.get_potential_energy() == pytest.approx(float(e[0]), rel=1e-10)


def test_energy_function_model_as_teacher() -> None:
    # a harmonic "foundation model": rows are -k on the diagonal
    k = 2.0
    model = EnergyFunctionModel(lambda pos, z, cell, pbc, b: (0.5 * k * pos**2).sum().reshape(1))
    t = TorchTeacher(model)
    b = batch64([cluster(0)])
    r = t.hessian_rows(b, torch.tensor([[0, 4, 1]]))
    expected = torch.zeros(13, 3, dtype=torch.float64)
    expected[4, 1] = -k
    torch.testing.assert_close(r[0], expected)


# ------------------------------------------------------------------------------ determinism


def test_training_is_deterministic_and_hessian_term_changes_it() -> None:
    atoms = make_clusters(1, 4, seed=0, warmup_steps=2, steps_between=1)
    ds = LabelledStructures.from_atoms(atoms, cutoff=4.0)
    store = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms, rows_per_structure=4, seed=0)
    cfg = DistillConfig(
        epochs=2, batch_size=2, lambda_h=400.0, hessian_mode="fd_columns", force_jac_sample_size=1
    )
    small = StudentConfig(hidden=8, layers=1, n_rbf=4)
    runs = [DistillTrainer(make_student(small, seed=0), store, cfg).fit(ds, ds) for _ in range(2)]
    assert runs[0].history_ == runs[1].history_
    for p, q in zip(runs[0].model_.parameters(), runs[1].model_.parameters(), strict=True):
        assert torch.equal(p, q)
    assert all(math.isfinite(h["l_h"]) and h["l_h"] > 0 for h in runs[0].history_)
    plain = DistillTrainer(make_student(small, seed=0), None, cfg.undistilled()).fit(ds, ds)
    assert plain.history_[-1]["l_h"] == 0.0 and plain.history_[-1]["loss"] != runs[0].history_[-1]["loss"]
    # student rows carry gradient through finite differences (Trap 3)
    m = make_student(small, seed=0)
    rows = sample_rows(ds.batch, 1, torch.Generator().manual_seed(0))
    j = hessian_rows(m, ds.batch, rows, mode="fd_columns", create_graph=True, fd_step=1e-3)
    assert j.grad_fn is not None


def test_extxyz_round_trip_keeps_labels(tmp_path) -> None:
    from iclr25.methods.hessian_distill import read_structures, write_structures

    atoms = make_clusters(2, 1, seed=0, warmup_steps=1)
    write_structures(tmp_path / "d.extxyz", atoms)
    back = read_structures(tmp_path / "d.extxyz")
    a, b = LabelledStructures.from_atoms(atoms), LabelledStructures.from_atoms(back)
    torch.testing.assert_close(a.energy, b.energy)
    torch.testing.assert_close(a.forces, b.forces)
    assert back[1].info["id"] == atoms[1].info["id"]
    with pytest.raises(FileNotFoundError):
        read_structures(tmp_path / "missing.extxyz")
