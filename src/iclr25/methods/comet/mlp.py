"""COMET multilayer perceptrons, their training loop and scikit-learn estimators.

Paper: *More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired
Fixed Routing*, Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter,
Matt Jones. ICLR 2025, arXiv:2410.08003.

Implements the masked backbone of Sec. 3 (Eq. 7 and the masking rule x_l = m_l * f(a_l), with the
bias the official code keeps), the COMET model whose masks come from the fixed router of
:mod:`routing` (Eqs. 4-6), the layer-wise routing variant (c_l = V_l x_{l-1}, Sec. 4 baselines),
a shared mini-batch training loop, and ``COMETClassifier`` / ``COMETRegressor``.

References:
    Shaier et al., "More Experts Than Galaxies", ICLR 2025, arXiv:2410.08003, Secs. 3-4.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from torch import Tensor, nn

from iclr25.common import rng
from iclr25.methods.comet.config import _check_schedule
from iclr25.methods.comet.routing import COMETRouter, Ties, _check_p

__all__ = [
    "COMETMLP",
    "COMETClassifier",
    "COMETRegressor",
    "MaskedMLP",
    "TrainLog",
    "train_mlp",
]

Activation = Literal["softplus", "relu", "gelu", "tanh"]
_ACTS: dict[str, Callable[[], nn.Module]] = {
    "softplus": nn.Softplus,
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "tanh": nn.Tanh,
}


def init_linear(n_in: int, n_out: int, generator: torch.Generator) -> nn.Linear:
    """An ``nn.Linear`` with weight and bias from U(-n_in^{-1/2}, n_in^{-1/2}) drawn from ``generator``."""
    lin = nn.Linear(n_in, n_out)
    bound = 1.0 / math.sqrt(n_in)
    with torch.no_grad():
        lin.weight.copy_((torch.rand(n_out, n_in, generator=generator) * 2 - 1) * bound)
        lin.bias.copy_((torch.rand(n_out, generator=generator) * 2 - 1) * bound)
    return lin


class MaskedMLP(nn.Module):
    """The shared trunk: L-1 hidden layers x_l = m_l * f(W_l x_{l-1} + b_l) and a linear output.

    Without masks (this class itself) it is the standard dense MLP. Subclasses choose the masks
    by overriding :meth:`precompute_masks` (masks from the raw input, before the pass) or
    :meth:`layer_mask` (masks from the layer's own quantities). The output layer is never masked.
    Weights come from a ``torch.Generator`` seeded with ``seed``, so two models with the same
    widths and seed start from the same backbone (paired comparisons).

    Args:
        in_features: N_0.
        hidden: widths N_1..N_{L-1} of the hidden layers.
        out_features: output width.
        activation: f, one of "softplus" (paper), "relu", "gelu", "tanh".
        seed: seed of the backbone initialisation.
        dropout: drop probability after each hidden activation (0 = none).

    Shape:
        x: (n, N_0) -> (n, out_features).

    Example:
        >>> net = MaskedMLP(4, (8, 8), 3, seed=0)
        >>> net(torch.randn(5, 4)).shape
        torch.Size([5, 3])
    """

    uses_example_index = False

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        activation: Activation = "softplus",
        seed: int = 0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if in_features < 1 or out_features < 1 or not hidden or any(int(h) < 1 for h in hidden):
            raise ValueError(f"widths must be positive, got in={in_features}, hidden={tuple(hidden)}, "
                             f"out={out_features}")  # fmt: skip
        if activation not in _ACTS:
            raise ValueError(f"activation must be one of {sorted(_ACTS)}, got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.hidden = tuple(int(h) for h in hidden)
        gen = torch.Generator().manual_seed(int(seed))
        widths = (self.in_features, *self.hidden)
        self.layers = nn.ModuleList(init_linear(a, b, gen) for a, b in itertools.pairwise(widths))
        self.output = init_linear(self.hidden[-1], self.out_features, gen)
        self.act = _ACTS[activation]()
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def precompute_masks(self, x: Tensor, index: Tensor | None) -> list[Tensor] | None:
        """Masks that depend on the raw input only (None: use :meth:`layer_mask`)."""
        return None

    def layer_mask(self, layer: int, a: Tensor, x_prev: Tensor, index: Tensor | None) -> Tensor | None:
        """Mask of hidden layer ``layer`` from its pre-activation ``a`` and input ``x_prev`` (None: dense)."""
        return None

    def _check_input(self, x: Tensor) -> None:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"input width {x.shape[-1]} does not match in_features {self.in_features}")

    def forward_all(
        self, x: Tensor, index: Tensor | None = None
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Output, per-layer masks (empty for dense) and masked hidden activations x_1..x_{L-1}."""
        self._check_input(x)
        pre = self.precompute_masks(x, index)
        h, masks, states = x, [], []
        for i, lin in enumerate(self.layers):
            a = lin(h)
            y = self.act(a)
            m = pre[i] if pre is not None else self.layer_mask(i, a, h, index)
            if m is not None:
                y = y * m.to(y.dtype)  # mask the post-activation (f(0) != 0 for softplus)
                masks.append(m)
            y = self.drop(y)
            states.append(y)
            h = y
        return self.output(h), masks, states

    def forward(self, x: Tensor, return_masks: bool = False, index: Tensor | None = None) -> Any:
        """Logits (or regression outputs); with ``return_masks`` also the list of masks."""
        out, masks, _ = self.forward_all(x, index)
        return (out, masks) if return_masks else out


class COMETMLP(MaskedMLP):
    """COMET: a masked MLP whose masks come from a fixed random routing chain on x_0 (Sec. 3).

    ``routing="comet"`` computes every mask from the raw input through :class:`COMETRouter`
    (the example keeps one expert for life). ``routing="layerwise"`` is the Layer-wise Routing
    baseline: c_l = V_l x_{l-1} from the backbone's own (detached) activations, so masks move as
    W trains. Both run under ``no_grad``; gradients flow only through kept units.

    Args:
        in_features: N_0.
        hidden: N_1..N_{L-1}.
        out_features: output width.
        p_keep: p_k in (0, 1].
        activation: f.
        seed: seed of the backbone init; the router uses an independent stream of the same seed
            unless ``routing_seed`` is given.
        routing: "comet" or "layerwise".
        ties: tie rule of the k-WTA.
        routing_norm: None or "layer_noaffine".
        routing_seed: seed of V (default: ``seed``).

    Shape:
        x: (n, N_0) -> (n, out_features).

    Example:
        >>> net = COMETMLP(4, (16, 16), 2, p_keep=0.25, seed=0)
        >>> out, masks = net(torch.randn(3, 4), return_masks=True)
        >>> out.shape, [m.sum(-1).tolist() for m in masks]
        (torch.Size([3, 2]), [[4, 4, 4], [4, 4, 4]])
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        out_features: int,
        p_keep: float,
        activation: Activation = "softplus",
        seed: int = 0,
        routing: Literal["comet", "layerwise"] = "comet",
        ties: Ties = "threshold",
        routing_norm: Literal["layer_noaffine"] | None = None,
        routing_seed: int | None = None,
    ) -> None:
        _check_p(p_keep)
        super().__init__(in_features, hidden, out_features, activation=activation, seed=seed)
        if routing not in ("comet", "layerwise"):
            raise ValueError(f"routing must be 'comet' or 'layerwise', got {routing!r}")
        self.routing = routing
        self.p_keep = float(p_keep)
        self.router = COMETRouter(
            self.in_features,
            self.hidden,
            p_keep,
            seed=seed if routing_seed is None else routing_seed,
            ties=ties,
            routing_norm=routing_norm,
        )

    def precompute_masks(self, x: Tensor, index: Tensor | None) -> list[Tensor] | None:
        if self.routing == "comet":
            return self.router(x)
        return None

    def layer_mask(self, layer: int, a: Tensor, x_prev: Tensor, index: Tensor | None) -> Tensor | None:
        # Layer-wise routing: c_l = V_l x_{l-1}, from the trained backbone (the trap COMET avoids).
        return self.router.mask(layer, x_prev.detach())

    def masks(self, x: Tensor) -> list[Tensor]:
        """The per-layer masks of inputs ``x`` (for ``routing="comet"`` they depend on x alone)."""
        with torch.no_grad():
            return self.forward_all(x)[1]


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainLog:
    """What :func:`train_mlp` records.

    Args:
        step_loss: training loss of every optimiser step (task loss, without auxiliary terms).
        epoch_metric: evaluation metric on ``(X_eval, y_eval)`` after every epoch (accuracy, or MSE
            for regression).
        steps_per_epoch: optimiser steps per epoch.
        eval_metrics: the same metric on each named set of ``eval_sets``, after every epoch.
        step_lr: the learning rate every optimiser step used (constant, or the cosine decay).
    """

    step_loss: list[float] = field(default_factory=list)
    epoch_metric: list[float] = field(default_factory=list)
    steps_per_epoch: int = 0
    eval_metrics: dict[str, list[float]] = field(default_factory=dict)
    step_lr: list[float] = field(default_factory=list)


#: learning-rate schedules of :func:`train_mlp`
LRSchedule = Literal["constant", "cosine"]


def _model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter or buffer (the CPU for a model with neither)."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return first.device if first is not None else torch.device("cpu")


def evaluate(model: nn.Module, X: Tensor, y: Tensor, task: Literal["classification", "regression"]) -> float:
    """Accuracy (classification) or mean squared error (regression) of ``model`` on (X, y), in eval mode.

    ``X`` and ``y`` are moved to the model's device first (a no-op where they already are).
    """
    dev = _model_device(model)
    X, y = X.to(dev), y.to(dev)
    was = model.training
    model.eval()
    with torch.no_grad():
        out = model(X)
    model.train(was)
    if task == "classification":
        return float((out.argmax(-1) == y).double().mean())
    return float(((out - y) ** 2).mean())


def train_mlp(
    model: nn.Module,
    X: Tensor,
    y: Tensor,
    *,
    task: Literal["classification", "regression"] = "classification",
    epochs: int = 20,
    batch_size: int = 32,
    lr: float = 1e-3,
    optimizer: Literal["adam", "adamw", "sgd", "sgd_momentum"] = "adam",
    lr_schedule: LRSchedule = "constant",
    l1: float = 0.0,
    seed: int = 0,
    X_eval: Tensor | None = None,
    y_eval: Tensor | None = None,
    eval_sets: Mapping[str, tuple[Tensor, Tensor]] | None = None,
    epoch_end: Callable[[int, nn.Module], None] | None = None,
    device: torch.device | str | None = None,
) -> TrainLog:
    """Mini-batch training shared by COMET and every baseline (same order for the same seed).

    Cross-entropy (classification) or MSE (regression); a model's ``aux_loss`` attribute (the
    MoE load-balancing loss) is added when present; ``l1`` adds λ Σ|W| over hidden weights.
    Models with ``uses_example_index`` receive the training rows' indices (Bernoulli masks).

    Args:
        model: the network.
        X: inputs (n, d).
        y: class ids (n,) or targets (n, t).
        task: "classification" or "regression".
        epochs: passes over the data.
        batch_size: rows per step.
        lr: learning rate (the peak rate under ``lr_schedule="cosine"``).
        optimizer: "adam", "adamw", "sgd" or "sgd_momentum" (momentum 0.9).
        lr_schedule: "constant" (the paper's), or "cosine": the rate of step t of T = epochs x
            steps_per_epoch is lr (1 + cos(pi t / T)) / 2, a cosine decay to zero over the run,
            stepped after every optimiser step (``torch.optim.lr_scheduler.CosineAnnealingLR``).
        l1: L1 penalty on hidden-layer weights ("standard + L1" baseline).
        seed: seed of the batch order.
        X_eval: optional evaluation inputs, scored after every epoch.
        y_eval: their labels/targets.
        eval_sets: further named ``(X, y)`` sets scored after every epoch (e.g. a validation split
            for picking each run's best epoch, and a test split), logged in ``eval_metrics``.
        epoch_end: called after every epoch (and its evaluations) as ``epoch_end(epoch, model)``,
            ``epoch`` counting from 0; e.g. to score a test set only at a new best validation epoch.
            It must leave the model's train/eval mode as it found it (:func:`evaluate` does).
        device: where to train: the model is moved there (in place) and every batch and
            evaluation set is moved there too. None (the default) keeps the model where it is
            and moves the data to it. The batch order is drawn on the CPU from ``seed`` and then
            moved, so the same seed gives the same batches on every device.

    Returns:
        A :class:`TrainLog`.

    Example:
        >>> X, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
        >>> log = train_mlp(MaskedMLP(4, (8,), 2), X, y, epochs=2, batch_size=16)
        >>> len(log.step_loss), log.steps_per_epoch
        (8, 4)
    """
    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"epochs, batch_size and lr must be positive, got {epochs}, {batch_size}, {lr}")
    _check_schedule("lr_schedule", lr_schedule)
    sets = dict(eval_sets or {})
    for name, pair in sets.items():
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"eval_sets[{name!r}] must be an (X, y) tuple, got {type(pair).__name__}")
    dev = torch.device(device) if device is not None else _model_device(model)
    model.to(dev)  # before the optimiser is built, so that it holds the moved parameters
    X, y = X.to(dev), y.to(dev)
    if X_eval is not None and y_eval is not None:
        X_eval, y_eval = X_eval.to(dev), y_eval.to(dev)
    sets = {name: (Xs.to(dev), ys.to(dev)) for name, (Xs, ys) in sets.items()}
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adam":
        opt: torch.optim.Optimizer = torch.optim.Adam(params, lr=lr)
    elif optimizer == "adamw":
        opt = torch.optim.AdamW(params, lr=lr)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr)
    elif optimizer == "sgd_momentum":
        opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
    else:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    loss_fn: Callable[[Tensor, Tensor], Tensor] = (
        nn.functional.cross_entropy if task == "classification" else nn.functional.mse_loss
    )
    n = X.shape[0]
    gen = torch.Generator().manual_seed(int(seed))
    log = TrainLog(steps_per_epoch=math.ceil(n / batch_size), eval_metrics={k: [] for k in sets})
    sched = None
    if lr_schedule == "cosine":  # to exactly zero after the last step (eta_min = 0)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs * log.steps_per_epoch, eta_min=0.0)
    model.train()
    with_index = getattr(model, "uses_example_index", False)
    for epoch in range(epochs):
        order = rng.randperm(n, generator=gen, device=dev)  # drawn on the CPU, moved to dev
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            out = model(X[idx], index=idx) if with_index else model(X[idx])
            loss = loss_fn(out, y[idx])
            total = loss
            aux = getattr(model, "aux_loss", None)
            if aux is not None:
                total = total + aux
            if l1 > 0:
                total = total + l1 * sum(lin.weight.abs().sum() for lin in getattr(model, "layers", []))
            opt.zero_grad(set_to_none=True)
            total.backward()
            log.step_lr.append(float(opt.param_groups[0]["lr"]))
            opt.step()
            if sched is not None:
                sched.step()
            log.step_loss.append(float(loss.detach()))
        if X_eval is not None and y_eval is not None:
            log.epoch_metric.append(evaluate(model, X_eval, y_eval, task))
        for name, (Xs, ys) in sets.items():
            log.eval_metrics[name].append(evaluate(model, Xs, ys, task))
        if epoch_end is not None:
            epoch_end(epoch, model)
    model.eval()
    return log


# ---------------------------------------------------------------------------------------------
# scikit-learn estimators
# ---------------------------------------------------------------------------------------------


class _COMETEstimator:
    """Shared fit logic of the COMET estimators (mixed into scikit-learn base classes)."""

    _task: Literal["classification", "regression"] = "classification"

    def __init__(
        self,
        hidden: Sequence[int] = (512, 512, 512),
        p_keep: float = 0.5,
        activation: Activation = "softplus",
        lr: float = 1e-3,
        epochs: int = 20,
        batch_size: int = 32,
        optimizer: Literal["adam", "adamw", "sgd", "sgd_momentum"] = "adam",
        ties: Ties = "threshold",
        random_state: int | None = None,
        lr_schedule: LRSchedule = "constant",
        device: str = "cpu",
    ) -> None:
        self.hidden = hidden
        self.p_keep = p_keep
        self.activation = activation
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.optimizer = optimizer
        self.ties = ties
        self.random_state = random_state
        self.lr_schedule = lr_schedule
        self.device = device

    def _validate_params(self) -> None:
        _check_p(self.p_keep)
        if not self.hidden or any(int(h) < 1 for h in self.hidden):
            raise ValueError(f"hidden must be a non-empty tuple of positive widths, got {self.hidden!r}")
        for name in ("epochs", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        _check_schedule("lr_schedule", self.lr_schedule)

    def _fit_net(self, X: np.ndarray, target: Tensor, out_features: int) -> None:
        from sklearn.utils import check_random_state

        self._validate_params()
        seed = int(check_random_state(self.random_state).randint(0, 2**31 - 1))
        self.model_ = COMETMLP(
            X.shape[1], tuple(self.hidden), out_features, p_keep=self.p_keep,
            activation=self.activation, seed=seed, ties=self.ties,
        )  # fmt: skip
        self.log_ = train_mlp(
            self.model_, torch.as_tensor(X, dtype=torch.float32), target, task=self._task,
            epochs=int(self.epochs), batch_size=int(self.batch_size), lr=float(self.lr),
            optimizer=self.optimizer, lr_schedule=self.lr_schedule, seed=seed, device=self.device,
        )  # fmt: skip

    def _forward(self, X: Any) -> Tensor:
        from sklearn.utils.validation import check_is_fitted, validate_data

        check_is_fitted(self, "model_")  # NotFittedError before fit
        X = validate_data(self, X, reset=False, dtype=np.float32)
        with torch.no_grad():
            out = self.model_(torch.as_tensor(X).to(_model_device(self.model_)))
        return out.cpu()  # the callers turn it into NumPy arrays


class COMETClassifier(ClassifierMixin, _COMETEstimator, BaseEstimator):
    """A COMET MLP classifier with the scikit-learn estimator contract.

    ``fit`` validates X and y (NaN/inf and a wrong feature count raise ``ValueError``),
    trains a :class:`COMETMLP` with cross-entropy, and stores ``classes_``, ``model_``,
    ``n_features_in_``. All randomness comes from ``random_state``.

    Args:
        hidden: hidden widths.
        p_keep: p_k in (0, 1].
        activation: f.
        lr: learning rate.
        epochs: passes over the data.
        batch_size: rows per step.
        optimizer: "adam", "adamw", "sgd" or "sgd_momentum".
        ties: k-WTA tie rule.
        random_state: seed (None draws one from NumPy's global state, as scikit-learn does).
        lr_schedule: "constant" or "cosine" (decay to zero over all steps; see :func:`train_mlp`).
        device: where the network trains and predicts ("cpu", "cuda", ...); inputs and
            predictions are NumPy arrays on the CPU either way.

    Example:
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)
        >>> clf = COMETClassifier(hidden=(16,), epochs=5, random_state=0).fit(X, y)
        >>> clf.predict(X[:4]).shape
        (4,)
    """

    _task = "classification"

    def fit(self, X: Any, y: Any) -> COMETClassifier:
        """Fit on (X, y); returns self."""
        from sklearn.utils.multiclass import check_classification_targets
        from sklearn.utils.validation import validate_data

        X, y = validate_data(self, X, y, dtype=np.float32)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        self._fit_net(X, torch.as_tensor(codes, dtype=torch.long), len(self.classes_))
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (n, n_classes)."""
        return torch.softmax(self._forward(X), -1).numpy().astype(np.float64)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels (n,)."""
        codes = self._forward(X).argmax(-1).numpy()  # checks fitted before classes_ is read
        return self.classes_[codes]


class COMETRegressor(RegressorMixin, _COMETEstimator, BaseEstimator):
    """A COMET MLP regressor (MSE) with the scikit-learn estimator contract.

    Args:
        hidden: hidden widths.
        p_keep: p_k in (0, 1].
        activation: f.
        lr: learning rate.
        epochs: passes over the data.
        batch_size: rows per step.
        optimizer: "adam", "adamw", "sgd" or "sgd_momentum".
        ties: k-WTA tie rule.
        random_state: seed.
        lr_schedule: "constant" or "cosine" (decay to zero over all steps; see :func:`train_mlp`).
        device: where the network trains and predicts ("cpu", "cuda", ...); inputs and
            predictions are NumPy arrays on the CPU either way.

    Example:
        >>> import numpy as np
        >>> X = np.random.default_rng(0).normal(size=(40, 3)); y = X @ np.ones(3)
        >>> COMETRegressor(hidden=(16,), epochs=5, random_state=0).fit(X, y).predict(X[:2]).shape
        (2,)
    """

    _task = "regression"

    def __sklearn_tags__(self) -> Any:
        """scikit-learn tags: the regressor takes y of shape (n,) or (n, t)."""
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X: Any, y: Any) -> COMETRegressor:
        """Fit on (X, y) with y of shape (n,) or (n, t); returns self."""
        from sklearn.utils.validation import validate_data

        X, y = validate_data(self, X, y, dtype=np.float32, multi_output=True, y_numeric=True)
        y = np.asarray(y, dtype=np.float32)
        self.single_output_ = y.ndim == 1
        y2 = y.reshape(len(y), -1)  # (n, t)
        self._fit_net(X, torch.as_tensor(y2), y2.shape[1])
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predictions (n,) or (n, t)."""
        out = self._forward(X).numpy().astype(np.float64)
        return out[:, 0] if self.single_output_ else out
