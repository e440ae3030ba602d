"""Training a student on energies, forces and teacher Hessian rows; evaluation helpers.

Implements the training procedure of *Towards Fast, Specialized Machine Learning Force Fields:
Distilling Foundation Models via Energy Hessians* (Ishan Amin, Sanjeev Raja, Aditi S.
Krishnapriyan; ICLR 2025; arXiv:2501.09009), Sec. 3 (Eq. 3 objective, rows sampled per
structure per step, adaptive λ_H) and Sec. 4 (AdamW with AMSGrad, ReduceLROnPlateau, EMA of the
weights, gradient clipping). Outputs are normalised by the training force std σ_F and
per-element reference energies (least squares on composition).

:func:`train_teacher` trains the NN teacher of mode B (a larger :class:`TinyPaiNN`) on a broad
set with the same trainer and energy + force loss only (λ_H = 0), standing in for a foundation
model trained on broad data (Sec. 4).
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from iclr25._core.convergence import plateau_gap

from .baselines import make_student
from .config import DistillConfig, StudentConfig
from .data import LabelledStructures
from .hessian import hessian_rows, sample_rows
from .loss import AdaptiveHessianWeight, HessianDistillationLoss, energy_force_loss
from .teachers import TorchTeacher

__all__ = ["DistillTrainer", "evaluate", "fit_normalisation", "train_teacher"]


def fit_normalisation(data: LabelledStructures) -> tuple[float, dict[int, float]]:
    """σ_F (std of all training force components) and per-element energies by least squares.

    Example:
        >>> from iclr25.methods.hessian_distill import make_clusters
        >>> ds = LabelledStructures.from_atoms(make_clusters(2, 2, seed=0, warmup_steps=1))
        >>> sigma, ref = fit_normalisation(ds)
        >>> sigma > 0 and sorted(ref) == [29, 79]
        True
    """
    sigma = float(data.forces.double().std())
    elements = sorted(set(data.batch.numbers.tolist()))
    counts = np.zeros((len(data), len(elements)))
    for b in range(len(data)):
        z = data.batch.numbers[int(data.batch.ptr[b]) : int(data.batch.ptr[b + 1])].numpy()
        counts[b] = [np.sum(z == e) for e in elements]
    coef, *_ = np.linalg.lstsq(counts, data.energy.double().numpy(), rcond=None)
    return sigma, {int(e): float(c) for e, c in zip(elements, coef, strict=True)}


def _device_of(model: nn.Module) -> torch.device:
    """The device of a model's first parameter or buffer (the CPU for a model with neither)."""
    t = next(iter(model.parameters()), None)
    if t is None:
        t = next(iter(model.buffers()), None)
    return t.device if t is not None else torch.device("cpu")


def evaluate(model: nn.Module, data: LabelledStructures, *, chunk: int = 64) -> dict[str, float]:
    """Force MAE (mean |ΔF| over components, eV/Å), force L2MAE and per-atom energy MAE (eV/atom).

    One definition for students and teachers (Trap 8): means over all atoms of the set.
    """
    was = model.training
    model.eval()
    device = _device_of(model)
    f_abs, f_l2, e_abs, n_atoms = 0.0, 0.0, 0.0, 0
    for start in range(0, len(data), chunk):
        part = data.select(range(start, min(start + chunk, len(data)))).to(device)
        out = model(part.batch)
        df = out["forces"].detach().double() - part.forces.double()
        f_abs += float(df.abs().sum())
        f_l2 += float(df.norm(dim=-1).sum())
        n = part.batch.sizes.double()
        e_abs += float(((out["energy"].detach().double() - part.energy.double()).abs() / n).sum())
        n_atoms += int(part.forces.shape[0])
    model.train(was)
    return {
        "force_mae": f_abs / (3 * n_atoms),
        "force_l2mae": f_l2 / n_atoms,
        "energy_mae_per_atom": e_abs / len(data),
    }


class DistillTrainer:
    """Train a student with ``λ_E·L_E + λ_F·L_F + λ_H·L_H`` (Eq. 3).

    Args:
        student: the model to train (``forward(batch) -> {"energy", "forces"}``).
        teacher_labels: an object with ``rows_for(batch, rows)`` and ``allowed_for(batch)``
            (a :class:`~iclr25.methods.hessian_distill.TeacherLabelStore`), or ``None`` when
            ``lambda_h == 0``.
        config: the run settings.
        device: where the student trains. The data stay on the CPU and each batch is moved;
            the batch order and the sampled Hessian rows are drawn on the CPU, so they do not
            depend on the device.

    Attributes:
        model_: the EMA weights after :meth:`fit` (used for evaluation and MD): those of the
            epoch with the lowest validation force MAE when ``config.keep_best``, else the last.
        best_epoch_: the epoch (1-based) ``model_`` comes from.
        last_model_: the EMA weights after the last epoch.
        history_: per-epoch dicts (losses, validation MAE, λ_H, learning rate, and
            ``hessian_steps``, the steps of the epoch trained with λ_H > 0), one per trained
            epoch: fewer than ``config.epochs`` when ``config.stop_at_plateau`` ended the run.
        step_seconds_: mean wall time of a training step (report-only).
        step_flops_: counted FLOPs of the first training step (forward, loss and backward;
            matrix products only, ``torch.utils.flop_counter``): a deterministic cost.
        weight_: the :class:`AdaptiveHessianWeight` state machine.

    Example:
        >>> from iclr25.methods.hessian_distill import TinyPaiNN, make_clusters
        >>> ds = LabelledStructures.from_atoms(make_clusters(1, 4, seed=0, warmup_steps=1), cutoff=4.0)
        >>> cfg = DistillConfig(lambda_h=0.0, epochs=1, batch_size=2)
        >>> tr = DistillTrainer(TinyPaiNN(hidden=8, layers=1, n_rbf=4, cutoff=4.0), None, cfg).fit(ds, ds)
        >>> len(tr.history_)
        1
    """

    def __init__(
        self,
        student: nn.Module,
        teacher_labels: Any,
        config: DistillConfig,
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        if config.lambda_h > 0 and teacher_labels is None:
            raise ValueError("lambda_h > 0 needs teacher_labels")
        self.device = torch.device(device)
        self.student = student
        self.labels = teacher_labels
        self.config = config

    def fit(
        self,
        train: LabelledStructures,
        val: LabelledStructures,
        *,
        progress: Callable[[str, int, int], None] | None = None,
    ) -> DistillTrainer:
        """Train on ``train``; ``val`` drives the LR plateau scheduler, the adaptive λ_H and the
        choice of the best epoch.

        Args:
            train: the training structures.
            val: the validation structures (EMA weights are scored on them every epoch).
            progress: called as ``progress("epoch", done, total)`` before the first epoch and
                after each one.

        Returns:
            ``self``, trained.
        """
        cfg = self.config
        if progress is not None:
            progress("epoch", 0, cfg.epochs)
        gen = torch.Generator().manual_seed(cfg.seed)
        sigma, atomref = fit_normalisation(train)
        if hasattr(self.student, "set_normalisation"):
            self.student.set_normalisation(sigma, atomref)
        model = self.student.to(self.device)
        model.train()
        ema = copy.deepcopy(model)
        ema.requires_grad_(False)
        params = list(model.parameters())
        ema_params = list(ema.parameters())
        opt = torch.optim.AdamW(
            params, lr=cfg.lr, weight_decay=cfg.weight_decay, eps=cfg.eps, amsgrad=cfg.amsgrad, foreach=True
        )
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, factor=cfg.plateau_factor, patience=cfg.plateau_patience
        )
        loss_h = HessianDistillationLoss(rows_per_structure=cfg.force_jac_sample_size, force_std=sigma)
        weight = AdaptiveHessianWeight(
            base=cfg.lambda_h,
            teacher_val_force_mae=cfg.teacher_val_force_mae,
            band_percent=cfg.adaptive_band_percent,
            every=cfg.adaptive_every,
            restore=cfg.adaptive_restore,
        )
        running: dict[str, torch.Tensor] = {}
        history: list[dict[str, float]] = []
        step, step_time, step_flops = 0, 0.0, 0
        # every epoch that lowers the validation MAE: (epoch, val MAE, EMA state), for best_up_to
        self._improved: list[tuple[int, float, dict[str, torch.Tensor]]] = []
        n = len(train)
        for epoch in range(cfg.epochs):
            order = torch.randperm(n, generator=gen).tolist()
            sums = {"loss": 0.0, "l_e": 0.0, "l_f": 0.0, "l_h": 0.0}
            n_steps, h_steps = 0, 0
            for start in range(0, n, cfg.batch_size):
                t0 = time.perf_counter()
                part = train.select(order[start : start + cfg.batch_size])
                lam_h = weight.weight
                counter = FlopCounterMode(display=False) if step == 0 else contextlib.nullcontext()
                with counter:
                    loss, l_e, l_f, l_h = self._loss(model, part, lam_h, sigma, loss_h, gen, running)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                if step == 0:
                    step_flops = int(counter.get_total_flops())  # type: ignore[union-attr]
                nn.utils.clip_grad_norm_(params, cfg.clip_grad, foreach=True)
                opt.step()
                with torch.no_grad():
                    torch._foreach_lerp_(ema_params, params, 1 - cfg.ema_decay)
                    for b_e, b in zip(ema.buffers(), model.buffers(), strict=True):
                        b_e.copy_(b)
                step += 1
                step_time += time.perf_counter() - t0
                if lam_h > 0 and weight.state != "disabled" and step % cfg.adaptive_every == 0:
                    weight.update(step, evaluate(ema, val)["force_mae"])
                for k, v in (("loss", loss), ("l_e", l_e), ("l_f", l_f), ("l_h", l_h)):
                    sums[k] += float(v.detach())
                n_steps += 1
                h_steps += int(lam_h > 0)
            val_metrics = evaluate(ema, val)
            sched.step(val_metrics["force_mae"])
            history.append(
                {
                    **{k: v / n_steps for k, v in sums.items()},
                    "val_force_mae": val_metrics["force_mae"],
                    "lambda_h": weight.weight,
                    "lr": opt.param_groups[0]["lr"],
                    "hessian_steps": float(h_steps),
                }
            )
            if not self._improved or val_metrics["force_mae"] < self._improved[-1][1]:
                self._improved.append((epoch + 1, val_metrics["force_mae"], copy.deepcopy(ema.state_dict())))
            if progress is not None:
                progress("epoch", epoch + 1, cfg.epochs)
            if cfg.stop_at_plateau > 0 and epoch + 1 >= cfg.min_epochs and self._plateaued(history):
                break
        ema.eval()
        self.last_model_ = ema
        self.history_ = history
        trained = len(history)
        self.best_epoch_, self.model_ = self.best_up_to(trained) if cfg.keep_best else (trained, ema)
        self.weight_ = weight
        self.step_seconds_ = step_time / max(step, 1)
        self.step_flops_ = step_flops
        return self

    def _plateaued(self, history: list[dict[str, float]]) -> bool:
        """Whether the validation force MAE moved by at most ``stop_at_plateau`` of its last value
        over the last fifth of the epochs so far (:func:`~iclr25._core.convergence.plateau_gap`)."""
        curve = [h["val_force_mae"] for h in history]
        return plateau_gap(curve) <= self.config.stop_at_plateau * curve[-1]

    def best_up_to(self, epoch: int) -> tuple[int, nn.Module]:
        """The epoch (<= ``epoch``) with the lowest validation force MAE and its EMA weights.

        Nothing in the schedule depends on the total epoch count, so this is the model that a run
        of only ``epoch`` epochs would keep: one long run gives the equal-epoch and the
        compute-matched baselines at once.

        Args:
            epoch: the last epoch considered (1 .. ``config.epochs``).

        Returns:
            ``(best epoch, model in eval mode)``.

        Raises:
            ValueError: ``epoch`` outside the trained range.
        """
        trained = len(getattr(self, "history_", []))
        if not 1 <= epoch <= trained:
            raise ValueError(f"epoch must lie in [1, {trained}] (the trained epochs), got {epoch}")
        best, _, state = [imp for imp in self._improved if imp[0] <= epoch][-1]
        model = copy.deepcopy(self.last_model_)
        model.load_state_dict(state)
        return best, model.eval()

    def _loss(
        self,
        model: nn.Module,
        part: LabelledStructures,
        lam_h: float,
        sigma: float,
        loss_h: HessianDistillationLoss,
        gen: torch.Generator,
        running: dict[str, torch.Tensor],
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Eq. 3 on one batch: ``(L, L_E, L_F, L_H)``.

        ``part`` is on the CPU, where the rows are drawn; the model sees its copy on the device.
        """
        cfg = self.config
        dev = part.to(self.device)
        pred = model(dev.batch)
        l_e, l_f = energy_force_loss(pred, dev.energy, dev.forces, dev.batch, force_std=sigma)
        loss = cfg.lambda_e * l_e + cfg.lambda_f * l_f
        l_h = torch.zeros((), device=self.device)
        if lam_h > 0:
            rows = sample_rows(
                part.batch,
                cfg.force_jac_sample_size,
                gen,
                strategy=cfg.row_strategy,
                running_loss=running,
                allowed=self.labels.allowed_for(part.batch),
            )
            rows_dev = rows.to(self.device)
            j_s = hessian_rows(
                model, dev.batch, rows_dev, mode=cfg.hessian_mode, create_graph=True, fd_step=cfg.fd_step
            )
            j_t = self.labels.rows_for(part.batch, rows).to(j_s)
            l_h = loss_h(j_s, j_t, rows_dev, dev.batch)
            if cfg.row_strategy == "hard":
                self._update_running(running, part, rows, j_s.detach().cpu(), j_t.cpu(), sigma)
            loss = loss + lam_h * l_h
        return loss, l_e, l_f, l_h

    @staticmethod
    def _update_running(
        running: dict[str, torch.Tensor],
        part: LabelledStructures,
        rows: torch.Tensor,
        j_s: torch.Tensor,
        j_t: torch.Tensor,
        sigma: float,
    ) -> None:
        """Exponential running per-row loss for hard mining (NaN = never visited)."""
        err = ((j_s - j_t) / sigma).norm(dim=-1).sum(dim=1)  # [R]
        for k in range(rows.shape[0]):
            b = int(rows[k, 0])
            sid = part.batch.ids[b]
            if sid not in running:
                running[sid] = torch.full((3 * int(part.batch.sizes[b]),), float("nan"), dtype=torch.float64)
            r = 3 * int(rows[k, 1]) + int(rows[k, 2])
            old = running[sid][r]
            running[sid][r] = err[k] if torch.isnan(old) else 0.9 * old + 0.1 * err[k]


def train_teacher(
    train: LabelledStructures,
    val: LabelledStructures,
    *,
    architecture: StudentConfig | None = None,
    config: DistillConfig | None = None,
    elements: Sequence[int] | None = None,
    dtype: torch.dtype = torch.float64,
    progress: Callable[[str, int, int], None] | None = None,
    device: str | torch.device = "cpu",
) -> TorchTeacher:
    """Train the NN teacher (mode B) on a broad set with energies and forces only.

    The teacher is a :class:`TinyPaiNN` built by
    :func:`~iclr25.methods.hessian_distill.make_student` at teacher size and trained by
    :class:`DistillTrainer` without the Hessian term, so it shares the loss, optimiser, EMA and
    normalisation of the students. Save it with ``teacher.model.save_pretrained(folder)`` and load
    it with :meth:`TorchTeacher.from_local`.

    Args:
        train: broad training set (e.g. ``LabelledStructures.from_atoms(make_broad_set(...))``),
            built with a cutoff of at least ``architecture.cutoff``.
        val: validation set (LR plateau scheduler).
        architecture: teacher size (default :meth:`StudentConfig.nn_teacher`).
        config: the training run; must have ``lambda_h == 0`` (default:
            ``DistillConfig().undistilled()``). Its ``seed`` also seeds the initialisation.
        elements: atomic numbers the teacher accepts (default: those in ``train``).
        dtype: dtype the returned teacher is evaluated in (float64 for exact rows).
        progress: passed to :meth:`DistillTrainer.fit` (called once per epoch).
        device: where the teacher trains; it is returned on the CPU.

    Returns:
        A :class:`TorchTeacher` holding the EMA weights of the trained model.

    Raises:
        ValueError: ``config.lambda_h`` is not 0, or the data cutoff is below the model's.

    Example:
        >>> from iclr25.methods.hessian_distill import make_broad_set
        >>> ds = LabelledStructures.from_atoms(make_broad_set(2, 2, seed=0, elements=(29, 79)), cutoff=3.0)
        >>> arch = StudentConfig(hidden=8, layers=1, n_rbf=4, cutoff=3.0)
        >>> cfg = DistillConfig(lambda_h=0.0, epochs=1, batch_size=2)
        >>> teacher = train_teacher(ds, ds, architecture=arch, config=cfg)
        >>> teacher.model.hparams["elements"], teacher.dtype
        ([29, 79], torch.float64)
    """
    arch = StudentConfig.nn_teacher() if architecture is None else architecture
    cfg = DistillConfig().undistilled() if config is None else config
    if cfg.lambda_h != 0:
        raise ValueError(f"the teacher is trained on energies and forces only; got lambda_h={cfg.lambda_h}")
    for name, data in (("train", train), ("val", val)):
        if data.batch.cutoff < arch.cutoff - 1e-9:
            raise ValueError(
                f"{name} was built with cutoff {data.batch.cutoff} < teacher cutoff {arch.cutoff}"
            )
    zs = sorted(set(train.batch.numbers.tolist())) if elements is None else [int(z) for z in elements]
    model = make_student(arch, elements=tuple(zs), seed=cfg.seed)
    trainer = DistillTrainer(model, None, cfg, device=device).fit(train, val, progress=progress)
    return TorchTeacher(trainer.model_.cpu(), dtype=dtype)
