"""Claim check of Hessian distillation: a small student trained with an imperfect teacher's Hessian
rows makes smaller force errors against the reference than the same student without them, each
trained to its plateau and at matched training FLOPs; the distilled student keeps energy in NVE
MD as well as the undistilled one; and the student runs faster than its teacher.

*Towards Fast, Specialized Machine Learning Force Fields: Distilling Foundation Models via Energy
Hessians* (Ishan Amin, Sanjeev Raja, Aditi S. Krishnapriyan; ICLR 2025; arXiv:2501.09009),
Sec. 3 (objective, row sampling, adaptive λ_H) and Sec. 5 (accuracy, speed, MD stability).

Teacher mode B: a larger network trained on a broad EMT set (the foundation-model stand-in) gives
the rows, and its own error against EMT is measured; EMT stays the reference of every error. The
adaptive λ_H rule is on. Every student trains its whole plateau budget and is read at its best
validation epoch; the distilled and undistilled runs must have plateaued
(convergence preconditions). Three rules gate the verdict:

- the force-error ratio at the plateaus, distilled / undistilled, against the paper's worst case
  (0.77);
- the force-error ratio at matched training FLOPs (the undistilled run trains at least as many
  epochs as the distilled run's FLOPs pay for, and is read at its best epoch within them),
  against 1;
- the drift of the distilled student against the undistilled one in NVE MD.

Both force gates are falsified in the same run by a student distilled from the rows of an untrained
network of the teacher's architecture, rescaled to the true rows' size: the same cost per step and
no more epochs than the distilled run, the wrong curvature. The drift gate is falsified in the
same run by a direct-force student, and by a test that puts a trained direct-force student in the
distilled slot. The teacher's error, the speed ratios, the FLOPs ratio, the absolute drift bound
and the VJP exactness are reported only.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import torch

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    diff,
    fails,
    no_progress,
    ratio,
    value,
)
from iclr25._core.convergence import converged, read_curve
from iclr25.methods.hessian_distill import (
    ASECalculatorTeacher,
    AtomsBatch,
    ClaimConfig,
    DataConfig,
    DistillConfig,
    DistillTrainer,
    FoundationConfig,
    LabelledStructures,
    StudentCalculator,
    StudentConfig,
    TeacherLabelStore,
    TorchTeacher,
    count_flops,
    direct_student,
    energy_drift,
    evaluate,
    force_jacobian,
    hessian_rows,
    make_broad_set,
    make_clusters,
    make_student,
    random_teacher_labels,
    run_nve,
    time_calls,
    train_teacher,
)

__all__ = ["CLAIM", "run"]

#: Trained foundation teachers of this process, keyed by their (frozen) config. Training is
#: deterministic in its config, so a seed gets the same teacher whether it trains it or finds it
#: here; later seeds of a check skip the training.
_TEACHERS: dict[FoundationConfig, torch.nn.Module] = {}


def _data(cfg: DataConfig, seed: int) -> tuple[list, list, list]:
    kw = {"warmup_steps": cfg.warmup_steps, "steps_between": cfg.steps_between}
    train = make_clusters(
        cfg.train_trajectories, cfg.frames_per_trajectory, seed=seed * 1000 + 1, prefix="tr", **kw
    )
    val = make_clusters(
        cfg.val_trajectories, cfg.frames_per_trajectory, seed=seed * 1000 + 2, prefix="va", **kw
    )
    test = make_clusters(
        cfg.test_trajectories, cfg.frames_per_trajectory, seed=seed * 1000 + 3, prefix="te", **kw
    )
    return train, val, test


def foundation_teacher(
    cfg: FoundationConfig, data: DataConfig, progress: ProgressFn = no_progress
) -> torch.nn.Module:
    """The mode-B teacher: a larger TinyPaiNN trained on a broad EMT set (float32, eval mode).

    The broad set holds Cu–Au clusters from the same Langevin process as the specialised data
    (other seeds), multi-element clusters and periodic slabs; the teacher's best epoch is picked
    on held-out Cu–Au clusters. Seeds are far from those of the specialised sets.
    """
    if cfg in _TEACHERS:
        return _TEACHERS[cfg]
    kw = {"warmup_steps": data.warmup_steps, "steps_between": data.steps_between}
    base = 1_000_003 + 10 * cfg.seed
    progress("foundation data", 0, 1)
    atoms = []
    if cfg.domain_trajectories:
        atoms += make_clusters(cfg.domain_trajectories, cfg.domain_frames, seed=base, prefix="fd", **kw)
    if cfg.broad_clusters + cfg.broad_slabs:
        atoms += make_broad_set(
            cfg.broad_clusters, cfg.broad_slabs, seed=base, elements=cfg.broad_elements, prefix="fb"
        )
    val_atoms = make_clusters(cfg.val_trajectories, 1, seed=base + 1, prefix="fv", **kw)
    cut = cfg.architecture.cutoff
    train = LabelledStructures.from_atoms(atoms, cutoff=cut)
    val = LabelledStructures.from_atoms(val_atoms, cutoff=cut)
    progress("foundation data", 1, 1)
    run = DistillConfig(lambda_h=0.0, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=cfg.seed)
    teacher = train_teacher(
        train,
        val,
        architecture=cfg.architecture,
        config=run,
        elements=sorted(cfg.broad_elements),
        dtype=torch.float32,
        progress=lambda _s, done, total: progress("training the foundation teacher", done, total),
    )
    _TEACHERS[cfg] = teacher.model
    return teacher.model


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-12)).detach().item()


def _exactness(cfg: ClaimConfig, atoms: object, seed: int, m: dict) -> None:
    """VJP rows vs finite differences (float64) for the student architecture; rows-vs-columns control."""
    batch = AtomsBatch.from_atoms([atoms], cutoff=cfg.student.cutoff, dtype=torch.float64)
    student = make_student(cfg.student, seed=seed).double()
    n = batch.pos.shape[0]
    rows = torch.stack(
        [torch.zeros(3 * n, dtype=torch.long), torch.arange(3 * n) // 3, torch.arange(3 * n) % 3], 1
    )
    vjp = hessian_rows(student, batch, rows).reshape(3 * n, 3 * n)
    fd = force_jacobian(student, batch, 0, mode="fd", fd_step=1e-4)
    m["exactness"]["vjp_fd_rel_err"] = _rel_err(vjp, fd)
    m["exactness"]["asymmetry"] = _rel_err(vjp, vjp.T)
    # control: a direct-force model's VJP rows vs its FD columns ∂F/∂x_r (Trap 1)
    direct = direct_student(cfg.student, seed=seed).double()
    rows_d = hessian_rows(direct, batch, rows).reshape(3 * n, 3 * n)
    cols_d = force_jacobian(direct, batch, 0, mode="fd", fd_step=1e-4).T
    m["rows_vs_columns"]["vjp_fd_rel_err"] = _rel_err(rows_d, cols_d)


def _cell_cost(cfg: ClaimConfig, teacher: torch.nn.Module | None, student: torch.nn.Module, m: dict) -> None:
    """Counted FLOPs and wall time of one energy+force call on a periodic fcc Cu cell (256 atoms)."""
    from ase.build import bulk

    cell = bulk("Cu", "fcc", a=3.61, cubic=True).repeat(cfg.speed_cell_repeat)
    cell.rattle(0.05, seed=0)
    m["distilled"]["cell_atoms"] = float(len(cell))
    for arm, model in (("teacher", teacher), ("distilled", student)):
        if model is None:  # the EMT teacher has no network to count
            m[arm]["flops"], m[arm]["params"], m[arm]["call_s"] = math.nan, math.nan, math.nan
            continue
        batch = AtomsBatch.from_atoms([cell], cutoff=model.cutoff)
        m[arm]["flops"] = float(count_flops(model, batch))
        m[arm]["params"] = float(sum(p.numel() for p in model.parameters()))
        m[arm]["call_s"] = time_calls(model, batch, calls=cfg.speed_calls, warmup=0)


def _md_speed(cfg: ClaimConfig, start: object, calcs: dict, seed: int, m: dict) -> None:
    """Seconds per NVE step of teacher and student on the same cluster, alternating blocks."""
    spent = dict.fromkeys(calcs, 0.0)
    for block in range(2):
        for arm, calc in calcs.items():
            t0 = time.perf_counter()
            run_nve(start, calc, steps=cfg.md_speed_steps, rng=np.random.default_rng([seed, 6, block]))
            spent[arm] += time.perf_counter() - t0
    for arm, s in spent.items():
        m[arm]["md_step_s"] = s / (2 * cfg.md_speed_steps)


def _compute_epochs(trainer: DistillTrainer, flop_ratio: float, steps_per_epoch: int) -> list[float]:
    """Cumulative training FLOPs after each epoch, in undistilled epochs (steps with L_H cost
    ``flop_ratio`` undistilled steps)."""
    total, out = 0.0, []
    for h in trainer.history_:
        total += (steps_per_epoch - h["hessian_steps"] + flop_ratio * h["hessian_steps"]) / steps_per_epoch
        out.append(total)
    return out


def _best_so_far(values: list[float], costs: list[float], grid: list[float]) -> list[float]:
    """Lowest value among epochs whose cost is <= x, for each x of the grid (NaN outside)."""
    out = []
    for x in grid:
        seen = [v for v, c in zip(values, costs, strict=True) if c <= x + 1e-9]
        out.append(min(seen) if seen and x <= costs[-1] + 1.0 else math.nan)
    return out


def _run(cfg: ClaimConfig, seed: int, progress: ProgressFn, device: str = "cpu") -> RunResult:
    arms = ("distilled", "undistilled", "undistilled_matched", "random_teacher", "direct", "teacher",
            "exactness", "rows_vs_columns")  # fmt: skip
    m: dict[str, dict[str, float]] = {a: {} for a in arms}
    series: dict[str, Series] = {}
    nn_teacher = None
    if cfg.teacher == "nn":
        nn_teacher = foundation_teacher(cfg.foundation, cfg.data, progress)
    progress("specialised data and teacher rows", 0, 1)
    train_atoms, val_atoms, test_atoms = _data(cfg.data, seed)
    rows_kw = {"rows_per_structure": cfg.data.label_rows or None, "seed": seed}
    if nn_teacher is None:
        emt = ASECalculatorTeacher(fd_step=cfg.data.fd_step)
        store = TeacherLabelStore().precompute(emt, train_atoms, **rows_kw)
    else:  # autograd rows of the network teacher
        rows_teacher = TorchTeacher(nn_teacher, dtype=torch.float32)
        store = TeacherLabelStore().precompute(rows_teacher, train_atoms, cutoff=nn_teacher.cutoff, **rows_kw)
    progress("specialised data and teacher rows", 1, 1)
    _exactness(cfg, test_atoms[0], seed, m)

    cut = cfg.student.cutoff
    train, val, test = (
        LabelledStructures.from_atoms(a, cutoff=cut) for a in (train_atoms, val_atoms, test_atoms)
    )
    # the teacher's error against the EMT reference, with the students' definition (Trap 8)
    if nn_teacher is None:
        m["teacher"].update(force_mae=0.0, force_l2mae=0.0, energy_mae_per_atom=0.0, val_force_mae=0.0)
    else:
        t_val, t_test = (
            LabelledStructures.from_atoms(a, cutoff=nn_teacher.cutoff) for a in (val_atoms, test_atoms)
        )
        m["teacher"].update(evaluate(nn_teacher, t_test))
        m["teacher"]["val_force_mae"] = evaluate(nn_teacher, t_val)["force_mae"]
    adaptive_mae = m["teacher"]["val_force_mae"] if cfg.adaptive else 0.0
    dcfg = dataclasses.replace(cfg.distill, seed=seed, teacher_val_force_mae=adaptive_mae)
    plain = dcfg.undistilled()
    # the curvature control: rows of an untrained network of the teacher's architecture, rescaled
    # to the true rows' root mean square (same cost, count and size of rows, wrong curvature)
    t_arch = cfg.foundation.architecture if nn_teacher is not None else cfg.student
    t_elements = tuple(sorted(cfg.foundation.broad_elements)) if nn_teacher is not None else (29, 79)
    progress("random-teacher rows", 0, 1)
    random_rows = random_teacher_labels(
        store,
        train_atoms,
        t_arch,
        elements=t_elements,
        seed=10_007 + seed,
        rows_per_structure=cfg.data.label_rows or None,
    )
    progress("random-teacher rows", 1, 1)
    steps_per_epoch = math.ceil(len(train) / cfg.distill.batch_size)
    trainers: dict[str, DistillTrainer] = {}

    def fit(arm: str, model: torch.nn.Module, labels: object, run_cfg: DistillConfig) -> DistillTrainer:
        trainers[arm] = DistillTrainer(model, labels, run_cfg, device=device).fit(
            train, val, progress=lambda _s, done, total: progress(f"training {arm}", done, total)
        )
        return trainers[arm]

    # every arm trains its budget (an early stop, distill.stop_at_plateau, is off in the claim)
    fit("distilled", make_student(cfg.student, seed=seed), store, dcfg)
    dist_epochs = len(trainers["distilled"].history_)
    # the control costs what the distilled run costs: no more epochs, the same rows per step
    fit(
        "random_teacher",
        make_student(cfg.student, seed=seed),
        random_rows,
        dataclasses.replace(dcfg, epochs=dist_epochs),
    )
    # FLOPs of the distilled run in undistilled epochs: the undistilled run trains at least that
    # long (and to its own plateau), so one run gives the plateau and the compute-matched baselines
    # (a one-epoch undistilled run counts the same first step as the undistilled run below)
    probe = DistillTrainer(
        make_student(cfg.student, seed=seed), None, dataclasses.replace(plain, epochs=1), device=device
    )
    flop_ratio = trainers["distilled"].step_flops_ / probe.fit(train, val).step_flops_
    cost = _compute_epochs(trainers["distilled"], flop_ratio, steps_per_epoch)
    matched_units = cost[-1]
    matched = min(cfg.undistilled_epochs, math.ceil(matched_units - 1e-9))
    fit(
        "undistilled",
        make_student(cfg.student, seed=seed),
        None,
        dataclasses.replace(plain, epochs=cfg.undistilled_epochs, min_epochs=max(plain.min_epochs, matched)),
    )
    # the MD control: same architecture with a direct force head, trained on E + F
    fit(
        "direct", direct_student(cfg.student, seed=seed), None, dataclasses.replace(plain, epochs=dist_epochs)
    )
    selected = {
        "distilled": (trainers["distilled"].best_epoch_, trainers["distilled"].model_),
        "random_teacher": (trainers["random_teacher"].best_epoch_, trainers["random_teacher"].model_),
        "direct": (trainers["direct"].best_epoch_, trainers["direct"].model_),
        "undistilled": (trainers["undistilled"].best_epoch_, trainers["undistilled"].model_),
        "undistilled_matched": trainers["undistilled"].best_up_to(matched),
    }
    # the students trained on ``device``; evaluation and MD run on the CPU, as everywhere else
    selected = {arm: (best, model.cpu()) for arm, (best, model) in selected.items()}
    for arm, (best, model) in selected.items():
        m[arm].update(evaluate(model, test))
        m[arm]["best_epoch"] = float(best)
    for arm in ("distilled", "random_teacher", "undistilled", "direct"):
        m[arm]["step_s"] = trainers[arm].step_seconds_
        m[arm]["step_flops"] = float(trainers[arm].step_flops_)
        m[arm]["epochs"] = float(len(trainers[arm].history_))
    m["distilled"]["flops_epochs"] = matched_units
    m["distilled"]["hessian_epochs"] = sum(h["hessian_steps"] for h in trainers["distilled"].history_) / (
        steps_per_epoch
    )
    m["undistilled_matched"]["epochs"] = float(matched)
    m["undistilled_matched"]["capped"] = float(matched_units > cfg.undistilled_epochs + 1e-9)

    # Convergence of every arm, over the epochs it is read from: how much the validation force
    # MAE still moved over the last fifth, relative to its final value.
    for arm, hist in (
        ("distilled", trainers["distilled"].history_),
        ("random_teacher", trainers["random_teacher"].history_),
        ("direct", trainers["direct"].history_),
        ("undistilled", trainers["undistilled"].history_),
        ("undistilled_matched", trainers["undistilled"].history_[:matched]),
    ):
        curve = read_curve(
            [float(e + 1) for e in range(len(hist))], [h["val_force_mae"] for h in hist], mode="min"
        )
        m[arm]["val_plateau_rel"] = curve.plateau_gap / curve.final

    grid = [float(e + 1) for e in range(cfg.undistilled_epochs)]
    val_lines = {}
    for arm, t in trainers.items():
        v = [h["val_force_mae"] for h in t.history_]
        val_lines[arm] = v + [math.nan] * (len(grid) - len(v))
    if nn_teacher is not None:
        val_lines["teacher"] = [m["teacher"]["val_force_mae"]] * len(grid)
    series["validation"] = Series(
        title="Validation force MAE per epoch (EMA weights)",
        xlabel="epoch",
        ylabel="force MAE vs EMT (eV/Å)",
        x=grid,
        lines=val_lines,
    )
    # best validation MAE so far against the budget: epochs, or training FLOPs in undistilled epochs
    undist_val = [h["val_force_mae"] for h in trainers["undistilled"].history_]
    undist_best = _best_so_far(undist_val, grid[: len(undist_val)], grid)
    dist_val = [h["val_force_mae"] for h in trainers["distilled"].history_]
    dist_by_flops = _best_so_far(dist_val, cost, grid)
    dist_by_epoch = _best_so_far(dist_val, grid[: len(dist_val)], grid)
    series["compute"] = Series(
        title="Best validation force MAE against training FLOPs",
        xlabel="training FLOPs (undistilled epochs)",
        ylabel="best force MAE so far (eV/Å)",
        x=grid,
        lines={"undistilled": undist_best, "distilled": dist_by_flops},
    )
    series["budget_ratio"] = Series(
        title="Distilled / undistilled best validation force MAE at the same budget",
        xlabel="budget (epochs, or undistilled epochs of training FLOPs)",
        ylabel="ratio of best force MAE so far",
        x=grid,
        lines={
            "equal epochs": [d / u for d, u in zip(dist_by_epoch, undist_best, strict=True)],
            "equal FLOPs": [d / u for d, u in zip(dist_by_flops, undist_best, strict=True)],
        },
    )
    # force parity on the test set, binned on a fixed grid so that seeds (different data) combine
    ref = test.forces.double().numpy().reshape(-1)
    edges = np.linspace(-1.2, 1.2, 9)
    centres = ((edges[1:] + edges[:-1]) / 2).tolist()
    which = np.digitize(ref, edges) - 1  # bin of each reference component; outside: -1 or 8

    def per_bin(values: np.ndarray) -> list[float]:
        return [float(values[which == k].mean()) if np.any(which == k) else float("nan") for k in range(8)]

    parity = {"EMT (y = x)": per_bin(ref)}
    errors = {}
    for arm in ("undistilled", "distilled"):
        pred = selected[arm][1](test.batch)["forces"].detach().double().numpy().reshape(-1)
        parity[arm] = per_bin(pred)
        errors[arm] = per_bin(np.abs(pred - ref))
    series["force_parity"] = Series(
        title="Force parity on the test clusters (mean prediction per 0.3 eV/Å bin)",
        xlabel="EMT force component (eV/Å)",
        ylabel="student force component (eV/Å)",
        x=centres,
        lines=parity,
    )
    series["force_error"] = Series(
        title="Force MAE against the EMT force component (test clusters)",
        xlabel="EMT force component (eV/Å)",
        ylabel="|F_student - F_EMT| (eV/Å)",
        x=centres,
        lines=errors,
    )
    # NVE molecular dynamics with ASE's velocity Verlet: conservative student vs direct student
    start = test_atoms[len(test_atoms) // 2].copy()
    md_lines, t_fs = {}, None
    for k, arm in enumerate(("distilled", "undistilled", "direct")):
        progress("NVE MD", k, 3)
        md = run_nve(
            start,
            StudentCalculator(selected[arm][1]),
            steps=cfg.md_steps,
            timestep_fs=cfg.md_timestep_fs,
            temperature_K=cfg.md_temperature_K,
            rng=np.random.default_rng([seed, 5]),
            record_every=max(1, cfg.md_steps // 200),
        )
        m[arm]["drift_mev_per_atom"] = energy_drift(md["total"], len(start))
        m[arm]["max_dev_mev_per_atom"] = float(np.abs(md["total"] - md["total"][0]).max() / len(start) * 1000)
        md_lines[arm] = ((md["total"] - md["total"][0]) / len(start) * 1000).tolist()
        t_fs = md["time_fs"].tolist()
    progress("NVE MD", 3, 3)
    series["md_energy"] = Series(
        title="NVE total energy (velocity Verlet, 1 fs) of a test cluster",
        xlabel="time (fs)",
        ylabel="E_total(t) - E_total(0) (meV/atom)",
        x=t_fs or [],
        lines={
            "distilled (conservative)": md_lines["distilled"],
            "undistilled (conservative)": md_lines["undistilled"],
            "direct forces": md_lines["direct"],
        },
    )
    # speed as the paper states it: student vs teacher MD steps, measured side by side
    progress("speed", 0, 1)
    from ase.calculators.emt import EMT

    teacher_calc = EMT() if nn_teacher is None else StudentCalculator(nn_teacher)
    _md_speed(
        cfg,
        start,
        {"teacher": teacher_calc, "distilled": StudentCalculator(selected["distilled"][1])},
        seed,
        m,
    )
    _cell_cost(cfg, nn_teacher, selected["distilled"][1], m)
    progress("speed", 1, 1)

    w = trainers["distilled"].weight_
    capped = "; capped at undistilled_epochs" if m["undistilled_matched"]["capped"] else ""
    switched = [f"{state} at step {step}" for step, state, _ in w.history] or ["never switched"]
    notes = [
        f"{len(train_atoms)} train / {len(val_atoms)} val / {len(test_atoms)} test Cu–Au clusters (EMT); "
        f"teacher rows: {cfg.data.label_rows or 'all 39'} per training structure, one drawn per step",
        (
            "teacher: EMT itself (mode A, exact rows, zero error)"
            if nn_teacher is None
            else f"teacher: TinyPaiNN hidden {cfg.foundation.architecture.hidden}, "
            f"{cfg.foundation.architecture.layers} layers, {cfg.foundation.architecture.cutoff:g} Å, "
            f"trained on {cfg.foundation.n_structures} broad EMT structures for {cfg.foundation.epochs} "
            f"epochs; test force MAE {m['teacher']['force_mae']:.4f} eV/Å"
        ),
        f"adaptive λ_H rule ({'on' if cfg.adaptive else 'off'}): {'; '.join(switched)}; "
        f"{m['distilled']['hessian_epochs']:.1f} of {dist_epochs} epochs trained with L_H",
        "epochs trained: " + ", ".join(f"{arm} {len(t.history_)}" for arm, t in trainers.items()),
        f"training step: {m['undistilled']['step_s'] * 1e3:.0f} ms without L_H, "
        f"{m['distilled']['step_s'] * 1e3:.0f} ms with L_H (wall); FLOPs ratio {flop_ratio:.2f}",
        f"compute-matched undistilled run: {matched} epochs (distilled run = {matched_units:.1f} "
        f"undistilled epochs of FLOPs{capped})",
    ]
    return RunResult(metrics=m, series=series, notes=notes)


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """Run one seed: the students train on ``device``; everything else runs on the CPU.

    Args:
        config: the claim's sizes.
        seed: seeds the specialised data, the students, the row sampling and the MD velocities
            (the foundation teacher has its own seed, ``config.foundation.seed``).
        device: where the students train (their data order and Hessian rows are drawn on the
            CPU, so a CPU run is unchanged); the teacher, evaluation and MD stay on the CPU.
        progress: called as ``progress(stage, done, total)`` per training epoch and MD run.

    Returns:
        The per-arm metrics, figures and notes of this seed.
    """
    return _run(config, seed, progress, device)


_FULL = ClaimConfig()
#: The test that trains a direct-force student, puts it in the distilled slot and sees
#: drift_vs_undistilled fail (and a trained conservative student pass).
_DRIFT_FALSIFIER = (
    "tests/methods/hessian_distill/test_hessian_distill_claim.py::"
    "test_drift_gate_fails_for_a_student_without_conservative_forces"
)
#: The headline budget: 600 epochs per student (1,800 for the undistilled run, which also covers
#: the distilled run's FLOPs at 3x a step). At 300 / 900 the undistilled students plateaued but
#: the distilled ones still fell (best epochs 296-299); ``full`` trains 80 / 250.
_LONG = ClaimConfig(distill=dataclasses.replace(_FULL.distill, epochs=600), undistilled_epochs=1800)
_SMOKE = ClaimConfig(
    data=DataConfig(
        train_trajectories=6, val_trajectories=2, test_trajectories=4, frames_per_trajectory=2,
        warmup_steps=10, steps_between=2,
    ),
    distill=dataclasses.replace(_FULL.distill, epochs=2, batch_size=4),
    foundation=FoundationConfig(
        architecture=StudentConfig(hidden=16, layers=2, n_rbf=8, cutoff=4.5), domain_trajectories=6,
        domain_frames=1, broad_clusters=2, broad_slabs=1, val_trajectories=2, epochs=2, batch_size=4,
    ),
    undistilled_epochs=8,
    speed_cell_repeat=2,
    md_speed_steps=5,
    md_steps=300,
)  # fmt: skip
#: The paper's worst distilled / undistilled force-MAE ratio: SPICE iodine-containing subset,
#: 19.6 / 25.4 meV/Å (monomers 8.5 / 13.4 = 0.63, solvated amino acids 11.4 / 22.9 = 0.50).
_PAPER_WORST_RATIO = 0.77
_PAPER_RATIOS = "0.50-0.77 (SPICE: amino acids 0.50, monomers 0.63, iodine 0.77)"

CLAIM = Claim(
    name="hessian_distill",
    paper=PaperRef(
        title=(
            "Towards Fast, Specialized Machine Learning Force Fields: "
            "Distilling Foundation Models via Energy Hessians"
        ),
        authors="Ishan Amin, Sanjeev Raja, Aditi S. Krishnapriyan",
        arxiv="2501.09009",
        code="ishanthewizard/MLFF-distill",
    ),
    statement=(
        "Distilling a foundation force field into a small, specialised student by matching rows of "
        "the teacher's energy Hessian cuts the student's force error substantially at the same "
        "architecture and data, each student trained to its plateau (SPICE ratios 0.50-0.77), "
        "gives students up to 20x faster than the teacher, and conservative distilled students "
        "keep energy in MD."
    ),
    arms={
        "distilled": "TinyPaiNN (conservative) trained on EMT energies and forces + the teacher's "
        "Hessian rows (λ_H = 400, adaptive rule on) for the plateau budget, best validation epoch",
        "undistilled": "the same student, data and optimiser with λ_H = 0, trained for its budget, "
        "at least the distilled run's training FLOPs, best validation epoch",
        "undistilled_matched": "the undistilled run given the distilled run's training FLOPs "
        "(more epochs), best validation epoch",
        "random_teacher": "control: distilled from the Hessian rows of an untrained network of the "
        "teacher's architecture, rescaled to the true rows' root mean square (same cost per step, "
        "row count and row size, no more epochs than the distilled run; wrong curvature)",
        "direct": "control: the same student with a direct force head (E + F training, "
        "the distilled run's epochs) in NVE MD",
        "teacher": "the foundation teacher (a larger network trained on a broad EMT set); its own "
        "error against EMT and its speed",
        "exactness": "VJP rows vs float64 central-difference Jacobian of the student architecture",
        "rows_vs_columns": "control: VJP rows vs FD columns of a direct-force model (asymmetric)",
    },
    criteria=(
        converged(
            "distilled",
            0.05,
            metric="val_plateau_rel",
            explain="The distilled student has plateaued within its budget: its validation force "
            "MAE moved by at most 5% of its final value over the last fifth of its epochs.",
        ),
        converged(
            "undistilled",
            0.05,
            metric="val_plateau_rel",
            explain="The undistilled student has plateaued by the same rule within its budget (it "
            "trains at least as many epochs as the distilled run's FLOPs pay for).",
        ),
        value(
            "undistilled_matched.val_plateau_rel",
            "<=",
            0.05,
            name="undistilled_matched_plateau",
            gating=False,
            explain="Whether the undistilled run had plateaued by the distilled run's FLOPs (reported "
            "only: the compute-matched arm is read at a compute budget, not at a plateau; the run "
            "itself continues for undistilled_converged).",
        ),
        ratio(
            "distilled.force_mae",
            "undistilled.force_mae",
            "<=",
            _PAPER_WORST_RATIO,
            name="force_mae_ratio",
            paper=_PAPER_RATIOS,
            falsifier="ctrl_random_teacher",
            explain="At their plateaus (each at its best validation epoch of the same budget), students "
            "trained with the imperfect teacher's Hessian rows make test force errors (against EMT) "
            "at most 0.77 times those of the same students trained on energies and forces alone: "
            "the paper's worst case.",
        ),
        fails(
            ratio(
                "random_teacher.force_mae",
                "undistilled.force_mae",
                "<=",
                _PAPER_WORST_RATIO,
                name="ctrl_random_teacher",
                explain="Rows of an untrained network, at the same cost and size, must not reach the "
                "bar: the gain has to come from the teacher's curvature, not from the extra compute "
                "or the second-derivative term itself.",
            )
        ),
        ratio(
            "distilled.force_mae",
            "undistilled_matched.force_mae",
            "<=",
            1.0,
            name="matched_force_mae_ratio",
            falsifier="ctrl_random_teacher_matched",
            explain="Given the distilled run's training FLOPs (more epochs), the undistilled student "
            "is not more accurate than the distilled one: the rows are worth their cost.",
        ),
        fails(
            ratio(
                "random_teacher.force_mae",
                "undistilled_matched.force_mae",
                "<=",
                1.0,
                name="ctrl_random_teacher_matched",
                explain="The random-teacher student, at the same cost, must not match the "
                "compute-matched undistilled student.",
            )
        ),
        ratio(
            "teacher.force_mae",
            "undistilled.force_mae",
            "<=",
            0.85,
            name="teacher_vs_undistilled",
            gating=False,
            paper="0.49-0.85 (SPICE: teacher / undistilled)",
            explain="The teacher's own force error is at most 85% of the undistilled student's, as "
            "for the paper's teachers: whether the check sits in the paper's regime.",
        ),
        ratio(
            "distilled.energy_mae_per_atom",
            "undistilled.energy_mae_per_atom",
            "<=",
            1.0,
            name="energy_mae_ratio",
            gating=False,
            explain="The distilled student's per-atom energy error is not larger than the "
            "undistilled student's (reported only).",
        ),
        diff(
            "distilled.drift_mev_per_atom",
            "undistilled.drift_mev_per_atom",
            "<",
            1.0,
            name="drift_vs_undistilled",
            paper="stable NVE MD (conservative students)",
            falsifier=_DRIFT_FALSIFIER,
            explain="In NVE MD the distilled student's total-energy drift exceeds the undistilled "
            "student's by less than 1 meV/atom: the Hessian rows do not cost the energy "
            "conservation of a conservative student.",
        ),
        fails(
            diff(
                "direct.drift_mev_per_atom",
                "undistilled.drift_mev_per_atom",
                "<",
                1.0,
                name="ctrl_direct_drift",
                explain="A direct-force student trained on the same data must miss the drift bar, "
                "so that the MD run can tell a student that does not conserve energy.",
            )
        ),
        value(
            "distilled.drift_mev_per_atom",
            "<",
            1.0,
            name="drift_bound",
            gating=False,
            paper="stable NVE MD",
            explain="The distilled student's NVE energy drifts by less than 1 meV/atom; any "
            "conservative student does, distilled or not, so this is reported only.",
        ),
        ratio(
            "teacher.md_step_s",
            "distilled.md_step_s",
            ">=",
            5.0,
            name="md_speed_ratio",
            gating=False,
            paper="up to 20x faster",
            explain="The student runs NVE MD steps at least 5 times faster than its teacher on the "
            "same cluster, timed side by side (wall-clock, reported only).",
        ),
        ratio(
            "teacher.call_s",
            "distilled.call_s",
            ">=",
            5.0,
            name="speed_ratio",
            gating=False,
            paper="up to 20x faster",
            explain="The student answers an energy+force call on a 256-atom periodic cell at least "
            "5 times faster than the teacher (wall-clock, reported only).",
        ),
        ratio(
            "teacher.flops",
            "distilled.flops",
            ">=",
            5.0,
            name="flops_ratio",
            gating=False,
            paper="up to 20x faster",
            explain="One energy+force call of the teacher costs at least 5 times the student's "
            "FLOPs (fixed by the two architectures, unit-tested).",
        ),
        value(
            "exactness.vjp_fd_rel_err",
            "<=",
            1e-5,
            name="vjp_rows_exact",
            gating=False,
            explain="The student's Hessian rows by vector-Jacobian products equal float64 finite "
            "differences (an exactness property, unit-tested).",
        ),
        fails(
            value(
                "rows_vs_columns.vjp_fd_rel_err",
                "<=",
                1e-5,
                name="ctrl_rows_vs_columns",
                gating=False,
                explain="For a direct-force model, Jacobian rows and columns differ (the control "
                "of the report-only vjp_rows_exact).",
            )
        ),
    ),
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=260.0),
        "long": Budget("long", _LONG, seeds=3, seconds=1800.0),
    },
    run_fn=run,
    headline="force_mae_ratio",
    unchecked=(
        "The teacher is a foundation model trained to its plateau: here it trains 30 epochs and no "
        "validation curve of it is recorded.",
    ),
    deviations=(
        "Teacher mode B at CPU scale: a TinyPaiNN of hidden 64, 4 layers, 5 Å cutoff, trained for 30 "
        "epochs on 480 broad EMT structures (400 Cu–Au clusters from the specialised domain, 60 "
        "multi-element clusters, 20 slabs), not MACE-OFF/MACE-MP-0/JMP-L; one teacher per check "
        "(its own seed), trained once per process.",
        "Specialised data: 13-atom Cu–Au clusters from short Langevin MD (EMT), not SPICE/MPtrj/MD22; "
        "EMT is the reference of every error.",
        "CPU budget: TinyPaiNN student (hidden 32, 3 layers, 4 Å cutoff); every student trains its "
        "whole budget, 80 epochs at full and 600 at long (the undistilled run 250 / 1,800, and at least "
        "as long as the distilled run's FLOPs pay for), instead of the official up to 10000 epochs with "
        "ReduceLROnPlateau, and the preconditions check that its validation force MAE moved by at most "
        "5% over the last fifth; each arm read at its best validation "
        "epoch; one Hessian row per structure per step (official "
        "force_jac_sample_size 4, 1 for solvated amino acids); student rows by finite-difference "
        "columns (exact for conservative models).",
        "Conservative students (the official configs train PaiNN and GemNet-dT with direct forces).",
        "Compute matching by counted FLOPs of a training step (matrix products), not wall-clock.",
        "NVE MD of 500 steps (spec: 2000) at 1 fs from 300 K; speed timed on one 13-atom cluster "
        "(MD) and one 256-atom fcc Cu cell (single calls).",
    ),
)
