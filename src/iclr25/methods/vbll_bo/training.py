"""Training of the VBLL surrogate: minibatch AdamW on the full objective with early stopping.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.

Implements the "full model retraining" of Sec. 3-4: the backbone and the head are trained jointly
on the objective of :meth:`VBLLHead.loss` with lambda = kl_scale / T, where T is the number of
observations at this fit (re-set at every fit), AdamW with weight decay on the backbone only,
gradient clipping, and early stopping that restores a deep copy of the best state.

References:
    arXiv:2412.09477, Sec. 3 (training), Sec. 4 (retraining in the continual loop).
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from iclr25._core.claims import ProgressFn
from iclr25.common import rng

from .config import FitConfig

if TYPE_CHECKING:
    from .model import VBLLModel

__all__ = ["EarlyStopping", "FitResult", "fit_vbll"]

logger = logging.getLogger(__name__)

_LOG_EVERY_S = 10.0  # a progress line at INFO at most this often, so short fits log nothing


@dataclass
class FitResult:
    """What one fit did.

    Args:
        n_steps: optimiser (gradient) steps taken.
        n_epochs: epochs run.
        best_loss: the monitored loss of the restored state.
        kl_weight: lambda used, kl_scale / T.
        seconds: wall time of the fit.
    """

    n_steps: int
    n_epochs: int
    best_loss: float
    kl_weight: float
    seconds: float


class EarlyStopping:
    """Stop after ``patience`` epochs without improvement; keep a deep copy of the best state.

    Args:
        patience: epochs without a strictly lower monitored value before stopping.

    Example:
        >>> lin = nn.Linear(1, 1)
        >>> stop = EarlyStopping(patience=2)
        >>> [stop.step(v, lin) for v in (3.0, 2.0, 2.5, 2.1)]
        [False, False, False, True]
        >>> stop.best_epoch, stop.best
        (1, 2.0)
    """

    def __init__(self, patience: int) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}")
        self.patience = patience
        self.best = math.inf
        self.best_epoch = -1
        self.best_state: Mapping[str, Any] | None = None
        self._epoch = -1

    def step(self, value: float, module: nn.Module) -> bool:
        """Record one epoch's monitored value; return True when training should stop."""
        self._epoch += 1
        if value < self.best:
            self.best, self.best_epoch = float(value), self._epoch
            self.best_state = copy.deepcopy(module.state_dict())  # a copy, never a live reference
        return self._epoch - self.best_epoch >= self.patience

    def restore(self, module: nn.Module) -> None:
        """Load the best state into ``module`` (no-op if nothing was recorded)."""
        if self.best_state is not None:
            module.load_state_dict(self.best_state)


def fit_vbll(
    model: VBLLModel,
    config: FitConfig,
    *,
    warm_start: Mapping[str, Any] | None = None,
    val_X: Tensor | None = None,
    val_Y: Tensor | None = None,
    generator: torch.Generator | None = None,
    progress: ProgressFn | None = None,
) -> FitResult:
    """Train backbone and head of a :class:`VBLLModel` on its training data (in place).

    Without ``warm_start`` every parameter of the backbone and the head (noise included) is
    re-initialised from ``generator`` first: nothing learned in an earlier fit is kept.

    Progress: ``progress("fit epoch", epoch, config.max_epochs)`` is called after every epoch, and
    the logger of this module writes a line at INFO level at most every 10 s (so short fits log
    nothing) and a summary at DEBUG level at the end.

    Args:
        model: the surrogate; its stored data are used.
        config: optimiser, batch, epochs, patience, kl_scale.
        warm_start: a ``state_dict`` to start from; None re-initialises everything from ``generator``.
        val_X: optional validation inputs (original units); early stopping then monitors the
            validation NLL computed on these inputs.
        val_Y: validation targets (original units).
        generator: randomness of the initialisation and the minibatch order.
        progress: optional callback ``(stage, done, total)`` called after each epoch.

    Returns:
        A :class:`FitResult`.
    """
    start = time.perf_counter()
    last_log = start
    if warm_start is not None:
        model.load_state_dict(warm_start)
    else:
        model.reset_parameters(generator)
    model.refresh_transforms()  # statistics are recomputed at every full retrain
    X, Y = model.train_inputs_transformed, model.train_targets_transformed
    T = X.shape[0]
    kl_weight = config.kl_scale / T  # lambda = kl_scale / T, re-set for the current T
    model.kl_weight = kl_weight
    model.clear_conditioning()
    for p in model.backbone.parameters():
        p.requires_grad_(not config.freeze_backbone)
    groups = [{"params": list(model.head.parameters()), "weight_decay": 0.0}]
    if not config.freeze_backbone:
        groups.append({"params": list(model.backbone.parameters()), "weight_decay": config.weight_decay})
    opt = torch.optim.AdamW(groups, lr=config.lr, foreach=True)
    trainable = [p for g in groups for p in g["params"]]
    if val_X is not None:
        if val_Y is None:
            raise ValueError("val_Y is required with val_X")
        vX, vY = model.transform_data(val_X, val_Y)
    stopper = EarlyStopping(config.patience)
    n_steps, n_epochs = 0, 0
    model.train()
    for _ in range(config.max_epochs):
        n_epochs += 1
        perm = rng.randperm(T, generator=generator, device=X.device)
        total = 0.0
        for i in range(0, T, config.batch_size):
            idx = perm[i : i + config.batch_size]
            loss = model.head.loss(model.backbone(X[idx]), Y[idx], kl_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(trainable, config.clip_grad)
            opt.step()
            n_steps += 1
            total += float(loss.detach()) * len(idx)
        if val_X is not None:
            with torch.no_grad():
                monitor = float(model.head_nll(vX, vY))  # validation NLL on val_X itself
        else:
            monitor = total / T
        stop = stopper.step(monitor, model)
        if progress is not None:
            progress("fit epoch", n_epochs, config.max_epochs)
        now = time.perf_counter()
        if now - last_log >= _LOG_EVERY_S:
            last_log = now
            logger.info(
                "VBLL fit: epoch %d of at most %d, %d gradient steps, loss %.4g (best %.4g at epoch %d), "
                "%.0f s", n_epochs, config.max_epochs, n_steps, monitor, stopper.best,
                stopper.best_epoch + 1, now - start,
            )  # fmt: skip
        if stop:
            break
    stopper.restore(model)
    for p in model.backbone.parameters():
        p.requires_grad_(True)
    model.eval()
    seconds = time.perf_counter() - start
    logger.debug(
        "VBLL fit done: T=%d, %d epochs, %d gradient steps, best loss %.4g, %.2f s",
        T, n_epochs, n_steps, stopper.best, seconds,
    )  # fmt: skip
    return FitResult(n_steps, n_epochs, stopper.best, kl_weight, seconds)
