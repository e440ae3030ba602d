"""Best-epoch selection, FLOP counts, the adaptive rule in training, torch-teacher labels and the
claim's compute matching and foundation teacher."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from iclr25.methods.hessian_distill import (
    ASECalculatorTeacher,
    DistillConfig,
    DistillTrainer,
    LabelledStructures,
    StudentConfig,
    TeacherLabelStore,
    TorchTeacher,
    make_broad_set,
    make_clusters,
    make_student,
    sample_rows,
)
from iclr25.methods.hessian_distill import claim as claim_mod

SMALL = StudentConfig(hidden=8, layers=1, n_rbf=4)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def clusters():
    atoms = make_clusters(2, 3, seed=0, warmup_steps=2, steps_between=1)
    return atoms, LabelledStructures.from_atoms(atoms, cutoff=4.0)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    pairs = zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    return all(torch.equal(p, q) for p, q in pairs)


def test_best_up_to_equals_a_shorter_run(clusters) -> None:
    """One long run yields the model a short run would keep (the equal-epoch baseline)."""
    _, ds = clusters
    cfg = DistillConfig(lambda_h=0.0, epochs=3, batch_size=2, lr=1e-2)
    short = DistillTrainer(make_student(SMALL), None, cfg).fit(ds, ds)
    long = DistillTrainer(make_student(SMALL), None, dataclasses.replace(cfg, epochs=6)).fit(ds, ds)
    assert long.history_[:3] == short.history_
    epoch, model = long.best_up_to(3)
    assert epoch == short.best_epoch_ and _same(model, short.model_)
    vals = [h["val_force_mae"] for h in long.history_]
    assert long.best_epoch_ == 1 + vals.index(min(vals))
    assert _same(long.model_, long.best_up_to(6)[1])
    with pytest.raises(ValueError, match="epoch must lie"):
        long.best_up_to(7)
    with pytest.raises(ValueError, match="epoch must lie"):
        DistillTrainer(make_student(SMALL), None, cfg).best_up_to(1)


def test_plateau_stop_ends_the_run_where_the_rule_first_holds(clusters) -> None:
    """Training to the plateau: the run stops at the first epoch (>= min_epochs) whose validation
    curve meets the convergence rule, and is otherwise the same run."""
    from iclr25._core.convergence import plateau_gap

    _, ds = clusters
    cfg = DistillConfig(lambda_h=0.0, epochs=6, batch_size=2, lr=1e-2)
    whole = DistillTrainer(make_student(SMALL), None, cfg).fit(ds, ds)
    vals = [h["val_force_mae"] for h in whole.history_]
    tol = 0.9
    first = next((e for e in range(3, 7) if plateau_gap(vals[:e]) <= tol * vals[e - 1]), 6)
    assert first < 6  # the rule holds before the cap, so the stop is exercised
    stopped = DistillTrainer(
        make_student(SMALL), None, dataclasses.replace(cfg, stop_at_plateau=tol, min_epochs=3)
    ).fit(ds, ds)
    assert stopped.history_ == whole.history_[:first]
    assert stopped.best_epoch_ == whole.best_up_to(first)[0]
    never = DistillTrainer(
        make_student(SMALL), None, dataclasses.replace(cfg, stop_at_plateau=1e-12, min_epochs=3)
    ).fit(ds, ds)
    assert len(never.history_) == 6  # the cap ends a run that never plateaus
    for bad in ({"stop_at_plateau": 1.0}, {"stop_at_plateau": -0.1}, {"min_epochs": 0}):
        with pytest.raises(ValueError):
            DistillConfig(**bad)


def test_keep_best_off_keeps_the_last_epoch(clusters) -> None:
    _, ds = clusters
    cfg = DistillConfig(lambda_h=0.0, epochs=2, batch_size=2, keep_best=False)
    tr = DistillTrainer(make_student(SMALL), None, cfg).fit(ds, ds)
    assert tr.best_epoch_ == 2 and tr.model_ is tr.last_model_


def test_step_flops_hessian_steps_and_adaptive_switch_off(clusters) -> None:
    atoms, ds = clusters
    store = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms, seed=0)
    base = DistillConfig(epochs=2, batch_size=2, adaptive_every=2, force_jac_sample_size=1)
    plain = DistillTrainer(make_student(SMALL), None, base.undistilled()).fit(ds, ds)
    kept = DistillTrainer(make_student(SMALL), store, base).fit(ds, ds)  # teacher MAE 0: rule disabled
    assert kept.weight_.state == "disabled"
    assert [h["hessian_steps"] for h in kept.history_] == [3.0, 3.0]
    assert [h["hessian_steps"] for h in plain.history_] == [0.0, 0.0]
    # the Hessian term costs extra FLOPs (double backward through ±h copies), counted exactly
    assert kept.step_flops_ > 2 * plain.step_flops_ > 0
    again = DistillTrainer(make_student(SMALL), store, base).fit(ds, ds)
    assert again.step_flops_ == kept.step_flops_
    # a teacher far worse than any student: the first check (step 2) switches L_H off for good
    bad = dataclasses.replace(base, teacher_val_force_mae=100.0)
    off = DistillTrainer(make_student(SMALL), store, bad).fit(ds, ds)
    assert off.weight_.state == "off" and off.weight_.history == [(2, "off", 0.0)]
    assert [h["hessian_steps"] for h in off.history_] == [2.0, 0.0]
    assert off.history_[-1]["lambda_h"] == 0.0


def test_torch_teacher_labels_batched_over_structures_of_different_sizes() -> None:
    """Chunked autograd rows (one VJP per row rank over many structures) equal one-by-one rows."""
    atoms = make_broad_set(3, 2, seed=1, elements=(29, 79))  # 13- and 12-atom structures
    assert len({len(a) for a in atoms}) == 2
    model = make_student(StudentConfig(hidden=8, layers=1, n_rbf=4, cutoff=3.5), seed=2)
    teacher = TorchTeacher(model, dtype=torch.float64)
    together = TeacherLabelStore().precompute(teacher, atoms, seed=0, cutoff=3.5)
    for a in atoms:
        alone = TeacherLabelStore().precompute(teacher, [a], seed=0, cutoff=3.5)
        c1, r1 = together.get(a.info["id"], a.numbers)
        c2, r2 = alone.get(a.info["id"], a.numbers)
        assert torch.equal(c1, torch.arange(3 * len(a))) and torch.equal(c1, c2)
        torch.testing.assert_close(r1, r2, rtol=1e-10, atol=1e-12)


def test_rows_drawn_from_all_3n_or_from_the_16_row_subset(clusters) -> None:
    atoms, ds = clusters
    full = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms[:1], seed=0)
    part = TeacherLabelStore().precompute(ASECalculatorTeacher(), atoms[:1], rows_per_structure=16, seed=0)
    one = ds.select([0])
    gen = torch.Generator().manual_seed(0)
    subset = set(part.available(atoms[0].info["id"]).tolist())
    for store, expected in ((full, set(range(39))), (part, subset)):
        seen = set()
        for _ in range(400):
            r = sample_rows(one.batch, 1, gen, allowed=store.allowed_for(one.batch))
            seen.add(3 * int(r[0, 1]) + int(r[0, 2]))
        assert seen == expected
    assert len(subset) == 16


def test_compute_epochs_and_best_so_far() -> None:
    class _T:
        def __init__(self) -> None:
            self.history_ = [{"hessian_steps": 4.0}, {"hessian_steps": 2.0}, {"hessian_steps": 0.0}]

    # 4 steps per epoch; a step with L_H costs 3 undistilled steps
    cost = claim_mod._compute_epochs(_T(), 3.0, 4)
    assert cost == [3.0, 5.0, 6.0]
    best = claim_mod._best_so_far([0.5, 0.3, 0.4], cost, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    assert all(math.isnan(b) for b in best[:2])  # no epoch finished yet
    assert best[2:7] == [0.5, 0.5, 0.3, 0.3, 0.3]
    assert math.isnan(best[7])  # beyond the run's compute


def test_foundation_teacher_is_deterministic_and_cached(monkeypatch) -> None:
    cfg = claim_mod.CLAIM.budgets["smoke"].config
    monkeypatch.setattr(claim_mod, "_TEACHERS", {})
    first = claim_mod.foundation_teacher(cfg.foundation, cfg.data)
    assert claim_mod.foundation_teacher(cfg.foundation, cfg.data) is first
    monkeypatch.setattr(claim_mod, "_TEACHERS", {})
    second = claim_mod.foundation_teacher(cfg.foundation, cfg.data)
    assert second is not first and _same(first, second)
    assert first.hparams["hidden"] == cfg.foundation.architecture.hidden
    assert first.hparams["elements"] == sorted(cfg.foundation.broad_elements)
    assert next(first.parameters()).dtype == torch.float32 and not first.training
