"""Training PAL: seen users (Sec. 3 losses) and few-shot fitting of new users (W only).

Implements the training of *PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic
Alignment* (Chen, Chen, Rege, Wang, Vinayak; ICLR 2025; arXiv:2406.08469):

- seen users: Adam with parameter groups (projectors f, g_k with weight decay; prototypes P and
  user logits W; reward scale t; the encoder only for PAL-B-Large), hinge (A) or CE (B) loss;
- new users (Sec. 4, unseen users): register ids with u ~ N(0, I_K), freeze every other tensor
  with ``requires_grad_(False)`` and fit only the new rows of W with AdamW. The paper's
  sample-complexity argument rests on this: K numbers per user instead of d.

:class:`PALEstimator` is a scikit-learn classifier of comparisons on precomputed embeddings:
``fit(X, y)`` with one comparison per row of ``X`` (user id, then embeddings; see
:func:`comparison_matrix`), flat hyper-parameters, so ``clone``, ``set_params`` and
``GridSearchCV`` work;
:class:`PALTrainer` trains a :class:`~iclr25.methods.pal.PALRewardModel` from text comparisons or
TRL-style ``prompt``/``chosen``/``rejected`` records with a ``user_id``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from torch import Tensor, nn

from iclr25._core.claims import ProgressFn
from iclr25.common import rng

from .config import PALConfig
from .data import Comparisons, EmbeddedComparisons, check_finite, embed_comparisons, from_records
from .model import PALHead, PALRewardModel, preference_loss

__all__ = [
    "PALEstimator",
    "PALTrainer",
    "as_tensor_inputs",
    "comparison_accuracy_scorer",
    "comparison_matrix",
]


def _numpy(x: Any) -> np.ndarray:
    """``x`` as a numpy array; a tensor is detached and copied to the CPU first (any device)."""
    return x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)


def as_tensor_inputs(
    prompt_emb: Any, left_emb: Any, right_emb: Any, label: Any | None, user_ids: Sequence[str], d_in: int
) -> EmbeddedComparisons:
    """Validate and convert array-like inputs into :class:`EmbeddedComparisons` on the CPU.

    Tensors on any device are accepted; the result is on the CPU and the trainers move it.

    Raises:
        ValueError: mismatched lengths, wrong embedding dimension, NaN or infinite embeddings,
            labels outside {0, 1}.
    """
    left = torch.as_tensor(_numpy(left_emb), dtype=torch.float32)
    right = torch.as_tensor(_numpy(right_emb), dtype=torch.float32)
    prompt = None if prompt_emb is None else torch.as_tensor(_numpy(prompt_emb), dtype=torch.float32)
    n = left.shape[0] if left.dim() else 0
    for name, x in (("left_emb", left), ("right_emb", right), ("prompt_emb", prompt)):
        if x is None:
            continue
        if x.dim() != 2 or x.shape[1] != d_in:
            raise ValueError(f"{name} must have shape (n, {d_in}), got {tuple(x.shape)}")
        if x.shape[0] != n:
            raise ValueError(f"{name} has {x.shape[0]} rows, left_emb has {n}")
        check_finite(x, name)
    ids = [str(u) for u in user_ids]
    if len(ids) != n:
        raise ValueError(f"{len(ids)} user ids for {n} comparisons")
    if label is None:
        y = torch.zeros(n, dtype=torch.long)
    else:
        arr = _numpy(label)
        if arr.shape != (n,):
            raise ValueError(f"label must have shape ({n},), got {arr.shape}")
        if not np.isin(arr, (0, 1)).all():
            raise ValueError(f"labels must be 0 (left) or 1 (right), got {sorted(set(arr.tolist()))[:5]}")
        y = torch.as_tensor(arr.astype(np.int64))
    return EmbeddedComparisons(ids, prompt, left, right, y)


def _param_groups(head: PALHead, config: PALConfig) -> list[dict[str, Any]]:
    proj = list(head.f.parameters()) + list(head.g.parameters())
    user = list(head.users.parameters()) + ([head.prototypes] if head.prototypes is not None else [])
    groups = [
        {
            "params": [p for p in proj if p.requires_grad],
            "lr": config.lr_projector,
            "weight_decay": config.weight_decay,
        },
        {"params": [p for p in user if p.requires_grad], "lr": config.lr_user, "weight_decay": 0.0},
    ]
    if config.variant == "B":
        groups.append({"params": [head.logit_scale], "lr": config.lr_logit_scale, "weight_decay": 0.0})
    return [g for g in groups if g["params"]]


def _train_seen(
    head: PALHead,
    data: EmbeddedComparisons,
    config: PALConfig,
    generator: torch.Generator,
    device: torch.device,
    progress: ProgressFn | None = None,
    on_epoch: Callable[[], None] | None = None,
) -> list[float]:
    """Minibatch training of all head parameters on seen users' comparisons. Returns epoch losses.

    ``progress("training", epoch, epochs)`` and ``on_epoch()`` are called after every epoch when
    given (``on_epoch`` may evaluate the head; the training mode is restored around it). The head
    must already be on ``device``; the batch order is drawn on the (CPU) ``generator`` and moved.
    """
    opt = torch.optim.AdamW(_param_groups(head, config))
    head.train()
    head.users.generator = generator
    n, losses = len(data), []
    # Move everything once and look user rows up once: no per-step string handling or copies.
    rows = head.users.rows(data.user_id).to(device)
    prompt = None if data.prompt is None else data.prompt.to(device)
    left, right, label = data.left.to(device), data.right.to(device), data.label.to(device)
    for _ in range(config.epochs):
        order = rng.randperm(n, generator=generator, device=device)
        total = torch.zeros((), device=device)
        for i in range(0, n, config.batch_size):
            ix = order[i : i + config.batch_size]
            w = head.users.mix(head.users.logits()[rows[ix]])
            p = None if prompt is None else prompt[ix]
            loss = head.loss(w, p, left[ix], right[ix], label[ix])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach() * len(ix)
        losses.append(float(total) / n)
        if on_epoch is not None:
            on_epoch()
        if progress is not None:
            progress("training", len(losses), config.epochs)
    head.eval()
    return losses


def _fit_new_users(
    head: PALHead,
    data: EmbeddedComparisons,
    *,
    steps: int,
    lr: float,
    generator: torch.Generator,
    init: str,
    device: torch.device,
    loss: str = "auto",
) -> int:
    """Register the new ids of ``data`` and fit only their W rows (everything else frozen).

    ``loss`` is "hinge", "ce" or "auto" (``config.new_user_loss``, whose "auto" is the training
    loss ``config.loss``). The head must already be on ``device``; the new rows are drawn on
    ``generator``'s device and moved there.

    Returns:
        The number of trainable parameters during the fit (K x new users).
    """
    new = list(dict.fromkeys(data.user_id))
    known = [u for u in new if u in head.users]
    if known:
        raise ValueError(f"partial_fit_new_users: ids already registered: {known[:5]}")
    k = head.config.k
    kind = head.config.new_user_loss if loss == "auto" else loss
    kind = head.config.loss if kind == "auto" else kind
    if kind not in ("hinge", "ce"):
        raise ValueError(f"loss must be 'auto', 'hinge' or 'ce', got {loss!r}")
    if init == "random":
        head.users.add_users(new, generator=generator)
    elif init == "uniform":
        head.users.add_users(new, init=torch.zeros(len(new), k))
    else:
        raise ValueError(f"init must be 'random' or 'uniform', got {init!r}")
    block = head.users.blocks[len(head.users.blocks) - 1]
    with torch.no_grad():
        block.data = block.data.to(device)
    flags = {name: p.requires_grad for name, p in head.named_parameters()}
    head.requires_grad_(False)
    block.requires_grad_(True)
    count = head.trainable_parameter_count()
    try:
        if steps > 0:
            opt = torch.optim.AdamW([block], lr=lr, weight_decay=0.0)
            head.eval()  # no dropout; partition mode off only matters in eval, so train the soft weights
            part = head.users.partition
            head.users.partition = False
            p = None if data.prompt is None else data.prompt.to(device)
            left, right, y = data.left.to(device), data.right.to(device), data.label.to(device)
            rows = head.users.rows(data.user_id).to(device)
            with torch.no_grad():  # f, g_k and t are frozen: their outputs are fixed
                feats = head.user_free_features(p, left, right)
            for _ in range(steps):
                w = head.users.mix(head.users.logits()[rows])
                objective = preference_loss(head.logits_from_features(w, feats), y, kind)
                opt.zero_grad()
                objective.backward()
                opt.step()
            head.users.partition = part
    finally:
        for name, p in head.named_parameters():
            p.requires_grad_(flags.get(name, True))
    head.eval()
    return count


def comparison_matrix(
    user_ids: Sequence[Any], left_emb: Any, right_emb: Any, prompt_emb: Any | None = None
) -> np.ndarray:
    """Stack comparisons into the 2-D ``X`` that :class:`PALEstimator` takes.

    Column 0 holds the user id; the remaining columns hold the embeddings: ``[left | right]``
    for PAL-A (items embed prompt + response jointly) or ``[prompt | left | right]`` for PAL-B.
    The array has dtype ``object`` so that string ids survive; rows can be indexed and split
    like any array (``GridSearchCV``, ``train_test_split``).

    Args:
        user_ids: one id per comparison (strings or integers).
        left_emb, right_emb: item embeddings. Shape: (n, d).
        prompt_emb: prompt embeddings for PAL-B, or None. Shape: (n, d).
            Tensors may live on any device (they are copied to the CPU).

    Returns:
        ``X``. Shape: (n, 1 + 2 d) or (n, 1 + 3 d).

    Raises:
        ValueError: the parts disagree in rows or dimension.

    Example:
        >>> comparison_matrix(["a", "b"], np.zeros((2, 3)), np.ones((2, 3))).shape
        (2, 7)
    """
    parts = [_numpy(p).astype(np.float64) for p in (prompt_emb, left_emb, right_emb) if p is not None]
    ids = np.asarray(list(user_ids), dtype=object)
    for p in parts:
        if p.ndim != 2 or p.shape != parts[-1].shape:
            raise ValueError(f"embeddings must share one 2-D shape (n, d), got {[q.shape for q in parts]}")
    if len(ids) != parts[-1].shape[0]:
        raise ValueError(f"{len(ids)} user ids for {parts[-1].shape[0]} comparisons")
    x = np.empty((len(ids), 1 + sum(p.shape[1] for p in parts)), dtype=object)
    x[:, 0] = ids
    x[:, 1:] = np.concatenate(parts, axis=1)  # (n, 2d) or (n, 3d)
    return x


def _user_id(u: Any) -> str:
    """A user id as the registry stores it: integer-valued numbers lose their ``.0``."""
    if isinstance(u, (float, np.floating)) and float(u).is_integer():
        return str(int(u))
    return str(u)


def comparison_accuracy_scorer(estimator: PALEstimator, X: Any, y: Any) -> float:
    """Scorer (``scoring=`` of ``GridSearchCV`` / ``cross_val_score``): share of comparisons whose
    preferred side the estimator predicts.

    Args:
        estimator: a fitted :class:`PALEstimator`.
        X: comparisons as built by :func:`comparison_matrix`.
        y: labels, 0 = left preferred, 1 = right preferred.

    Returns:
        Accuracy in [0, 1].
    """
    return float((estimator.predict(X) == np.asarray(y)).mean())


class PALEstimator(ClassifierMixin, BaseEstimator):
    """PAL on precomputed embeddings, as a scikit-learn classifier of comparisons.

    ``X`` holds one comparison per row: column 0 the user id, then the embeddings, ``[left |
    right]`` for PAL-A or ``[prompt | left | right]`` for PAL-B (build it with
    :func:`comparison_matrix`); ``y`` is 0 when the left item is preferred and 1 when the right
    one is. Every hyper-parameter is a constructor argument with the paper's default, so
    ``clone``, ``set_params(k=3)`` and ``GridSearchCV`` work; the embedding dimension ``d_in`` is
    read from ``X``. ``score`` is comparison accuracy (also :func:`comparison_accuracy_scorer`).
    For text and TRL-style ``prompt``/``chosen``/``rejected`` records use :class:`PALTrainer`.

    Args:
        variant: "A" (ideal points, distance + hinge) or "B" (prompt-conditioned, cosine + CE).
        k: K, the number of shared prototypes (K = 1 is one Bradley-Terry model for everybody).
        d_pref: dimension of the preference space.
        projector: projector spec ``mlpL-act-dropoutP[-residual]`` for f and g_k.
        user_map: PAL-A map from weights and prototypes to the ideal point.
        loss: "auto" (hinge for A, CE for B), "hinge" or "ce".
        mixing: "softmax" or "gumbel" user weights.
        tau: softmax temperature of the user weights.
        partition: one-hot argmax weights at evaluation.
        logit_scale_init, logit_scale_max: PAL-B reward scale t0 and the clamp of exp(t).
        lr_projector, weight_decay, lr_user, lr_logit_scale: Adam groups (f and g_k; P and W; t).
        epochs, batch_size: seen-user training.
        new_user_lr, new_user_steps, new_user_loss: fitting new users' W only.
        random_state: seed of init, batch order and new-user init.
        device: where the head is trained and evaluated ("cpu", "cuda", a ``torch.device``;
            default the CPU). ``X`` stays a numpy array on the CPU and is moved per call; the
            seeded draws (init, batch order, new users) stay on a CPU ``torch.Generator``, so a
            CPU run gives the same numbers whatever the default device.

    Attributes:
        config_: the :class:`PALConfig` built from the arguments and ``X``.
        head_: the fitted :class:`PALHead`.
        classes_: ``[0, 1]``.
        n_features_in_: columns of ``X``.
        loss_curve_: mean training loss per epoch.
        validation_curve_: accuracy on ``eval_set`` after every epoch (empty without one).
        new_user_trainable_: trainable parameter count during the last new-user fit.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x, y = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
        >>> X = comparison_matrix(["u"] * 40, x, y)
        >>> lab = (x[:, 0] < y[:, 0]).astype(int)
        >>> est = PALEstimator(variant="A", k=1, d_pref=4, epochs=2, batch_size=8).fit(X, lab)
        >>> est.predict_proba(X).shape
        (40, 2)
    """

    def __init__(
        self,
        variant: str = "B",
        k: int = 2,
        d_pref: int = 512,
        projector: str = "mlp2-gelu-dropout0",
        user_map: str = "f(Pw)",
        loss: str = "auto",
        mixing: str = "softmax",
        tau: float = 1.0,
        partition: bool = False,
        logit_scale_init: float = 2.6592600369644043,
        logit_scale_max: float = 100.0,
        lr_projector: float = 1e-4,
        weight_decay: float = 0.01,
        lr_user: float = 5e-3,
        lr_logit_scale: float = 0.1,
        epochs: int = 1,
        batch_size: int = 4,
        new_user_lr: float = 5e-3,
        new_user_steps: int = 20,
        new_user_loss: str = "auto",
        random_state: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        self.variant = variant
        self.k = k
        self.d_pref = d_pref
        self.projector = projector
        self.user_map = user_map
        self.loss = loss
        self.mixing = mixing
        self.tau = tau
        self.partition = partition
        self.logit_scale_init = logit_scale_init
        self.logit_scale_max = logit_scale_max
        self.lr_projector = lr_projector
        self.weight_decay = weight_decay
        self.lr_user = lr_user
        self.lr_logit_scale = lr_logit_scale
        self.epochs = epochs
        self.batch_size = batch_size
        self.new_user_lr = new_user_lr
        self.new_user_steps = new_user_steps
        self.new_user_loss = new_user_loss
        self.random_state = random_state
        self.device = device

    @classmethod
    def from_config(
        cls, config: PALConfig, *, random_state: int = 0, device: str | torch.device = "cpu"
    ) -> PALEstimator:
        """An estimator with the hyper-parameters of ``config`` (``d_in`` is read from ``X`` at fit;
        the config's ``seed`` is replaced by ``random_state``; ``device`` as in the class).

        Example:
            >>> PALEstimator.from_config(PALConfig(variant="A", k=3, d_in=8, d_pref=4)).k
            3
        """
        names = cls._get_param_names()
        kw = {f: getattr(config, f) for f in names if f not in ("random_state", "device")}
        return cls(**kw, random_state=random_state, device=device)

    def _make_config(self, d_in: int) -> PALConfig:
        kw = {f: getattr(self, f) for f in self._get_param_names() if f not in ("random_state", "device")}
        return PALConfig(d_in=d_in, seed=int(self.random_state), **kw)

    def _parts(self, X: Any, *, fitting: bool) -> tuple[list[str], Tensor | None, Tensor, Tensor]:
        """Split ``X`` into user ids and embedding tensors (checked: 2-D, sizes, finite)."""
        if hasattr(X, "toarray") or hasattr(X, "tocsr"):  # scipy.sparse, without importing scipy
            raise TypeError("sparse input is not supported: X holds a user id column and dense embeddings")
        x = np.asarray(X, dtype=object) if not isinstance(X, np.ndarray) else X
        if x.ndim != 2:
            raise ValueError(f"X must be 2-D (one comparison per row), got shape {x.shape}")
        if x.shape[0] == 0:
            raise ValueError("X holds 0 comparisons (0 samples); at least one is required")
        if not fitting and x.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {x.shape[1]} columns, the estimator was fitted on {self.n_features_in_}")
        n_parts = 2 if self.variant == "A" else 3
        width = x.shape[1] - 1
        if width < n_parts or width % n_parts:
            layout = "[user | left | right]" if n_parts == 2 else "[user | prompt | left | right]"
            raise ValueError(
                f"X must have 1 + {n_parts} d columns {layout} for PAL-{self.variant}, got {x.shape[1]}"
            )
        try:
            emb = np.asarray(x[:, 1:], dtype=np.float32)
        except (TypeError, ValueError) as err:
            raise ValueError(f"X columns 1.. must hold numbers (embeddings): {err}") from err
        d = width // n_parts
        names = ("left_emb", "right_emb") if n_parts == 2 else ("prompt_emb", "left_emb", "right_emb")
        ts = []
        for i, name in enumerate(names):
            t = torch.from_numpy(np.ascontiguousarray(emb[:, i * d : (i + 1) * d]))  # (n, d)
            check_finite(t, name)
            ts.append(t)
        ids = [_user_id(u) for u in x[:, 0]]
        prompt = ts[0] if n_parts == 3 else None
        return ids, prompt, ts[-2], ts[-1]

    def _data(self, X: Any, y: Any | None, *, fitting: bool = False) -> EmbeddedComparisons:
        ids, prompt, left, right = self._parts(X, fitting=fitting)
        d = left.shape[1]
        return as_tensor_inputs(prompt, left, right, y, ids, d)

    def fit(
        self,
        X: Any,
        y: Any,
        *,
        eval_set: tuple[Any, Any] | None = None,
        progress: ProgressFn | None = None,
    ) -> PALEstimator:
        """Fit the head on seen users' comparisons (all parameters; users registered first-seen).

        Args:
            X: comparisons, see :func:`comparison_matrix`. Shape: (n, 1 + 2 d) or (n, 1 + 3 d).
            y: labels, 0 = left preferred, 1 = right preferred. Shape: (n,).
            eval_set: optional ``(X_val, y_val)`` of the same users, scored after every epoch
                into ``validation_curve_`` (read only: no early stopping, no model selection).
            progress: optional ``progress(stage, done, total)``, called after every epoch.

        Returns:
            ``self``.
        """
        data = self._data(X, y, fitting=True)
        self.config_ = self._make_config(data.left.shape[1])
        self.n_features_in_ = int(np.asarray(X, dtype=object).shape[1])
        self.classes_ = np.array([0, 1])
        dev = torch.device(self.device)
        gen = torch.Generator().manual_seed(int(self.random_state))
        self.head_ = PALHead(self.config_, generator=gen)
        self.head_.users.add_users(list(dict.fromkeys(data.user_id)), generator=gen)
        self.head_.to(dev)
        self._gen = gen
        self.validation_curve_: list[float] = []
        on_epoch = None
        if eval_set is not None:
            x_val, y_val = eval_set
            val = self._data(x_val, y_val)

            def on_epoch() -> None:
                self.validation_curve_.append(_accuracy(self.head_, val, dev))

        self.loss_curve_ = _train_seen(self.head_, data, self.config_, gen, dev, progress, on_epoch)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "head_"):
            raise NotFittedError("this PALEstimator is not fitted yet: call fit() first")

    def partial_fit_new_users(
        self,
        X: Any,
        y: Any,
        *,
        steps: int | None = None,
        lr: float | None = None,
        init: str = "random",
        loss: str = "auto",
    ) -> PALEstimator:
        """Register new users and fit only their weights (every other tensor is frozen).

        Args:
            X: the new users' comparisons (see :func:`comparison_matrix`); every id must be
                unregistered (``ValueError`` otherwise).
            y: their labels.
            steps: full-batch AdamW steps (default ``new_user_steps``; 0 = no fitting).
            lr: AdamW lr (default ``new_user_lr``).
            init: "random" (u ~ N(0, I_K)) or "uniform" (u = 0, i.e. w = 1/K).
            loss: "hinge", "ce" (Bradley-Terry cross-entropy on the two rewards) or "auto"
                (``new_user_loss``; its own "auto" is the training loss).

        The new-user settings (``new_user_steps``, ``new_user_lr``, ``new_user_loss``) are read
        when this is called, so ``set_params`` after ``fit`` changes how new users are fitted
        without refitting the seen users.

        Returns:
            ``self``.
        """
        self._check_fitted()
        data = self._data(X, y)
        self.new_user_trainable_ = _fit_new_users(
            self.head_,
            data,
            steps=self.new_user_steps if steps is None else steps,
            lr=self.new_user_lr if lr is None else lr,
            generator=self._gen,
            init=init,
            device=torch.device(self.device),
            loss=self.new_user_loss if loss == "auto" else loss,
        )
        return self

    @torch.no_grad()
    def predict_proba(self, X: Any) -> np.ndarray:
        """[P(left preferred), P(right preferred)] per comparison. Shape: (n, 2)."""
        self._check_fitted()
        d = self._data(X, None)
        dev = torch.device(self.device)
        self.head_.eval()
        p = None if d.prompt is None else d.prompt.to(dev)
        pr = self.head_.prob_right(d.user_id, p, d.left.to(dev), d.right.to(dev)).cpu().numpy()
        return np.stack([1.0 - pr, pr], axis=1)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels (0 = left, 1 = right). Shape: (n,)."""
        return (self.predict_proba(X)[:, 1] > 0.5).astype(np.int64)

    def per_user_accuracy(self, X: Any, y: Any) -> dict[str, float]:
        """Accuracy of each user's comparisons."""
        hit = self.predict(X) == np.asarray(y)
        ids = np.asarray([_user_id(u) for u in np.asarray(X, dtype=object)[:, 0]])
        return {u: float(hit[ids == u].mean()) for u in dict.fromkeys(ids.tolist())}

    def user_weights(self, user_ids: Sequence[Any]) -> np.ndarray:
        """The learned simplex weights w of ``user_ids``. Shape: (len(user_ids), K)."""
        self._check_fitted()
        with torch.no_grad():
            return self.head_.users([_user_id(u) for u in user_ids]).cpu().numpy()

    def trainable_parameter_count(self) -> int:
        """Parameters trained when fitting seen users (head only; the encoder is frozen)."""
        self._check_fitted()
        return sum(p.numel() for p in self.head_.parameters())


@torch.no_grad()
def _accuracy(head: PALHead, d: EmbeddedComparisons, device: torch.device) -> float:
    """Comparison accuracy of ``head`` on ``d`` in eval mode (the caller's mode is restored)."""
    was = head.training
    head.eval()
    p = None if d.prompt is None else d.prompt.to(device)
    pr = head.prob_right(d.user_id, p, d.left.to(device), d.right.to(device)).cpu()
    head.train(was)
    return float(((pr > 0.5).long() == d.label).float().mean())


class PALTrainer:
    """Train a :class:`PALRewardModel` from text comparisons.

    Every data argument is either :class:`Comparisons` or TRL-style preference records with a
    user id (columns ``user_id``, ``prompt``, ``chosen``, ``rejected``; a list of dicts, a dict of
    lists, a ``pandas.DataFrame`` or a ``datasets.Dataset``), converted with
    :func:`~iclr25.methods.pal.from_records`: the chosen response goes left or right by a coin
    seeded from ``random_state``.

    With ``config.train_encoder`` (PAL-B-Large) the encoder must be an :class:`HFEncoder` built
    with ``trainable=True``; texts are then re-encoded in every batch.

    Args:
        model: the reward model (encoder + head).
        random_state: seed of batch order and new-user init.
        device: where the head is trained and evaluated ("cpu", "cuda", a ``torch.device``;
            default the CPU); every method moves the head there. The encoder keeps its own
            device (build an :class:`HFEncoder` with ``device=`` to run it there too); its
            embeddings are moved. Seeded draws stay on a CPU ``torch.Generator``.

    Example:
        >>> from iclr25.methods.pal import HashedNgramEncoder, PALHead, PALRewardModel
        >>> cfg = PALConfig(variant="B", k=2, d_in=32, d_pref=8, epochs=1, batch_size=2)
        >>> tr = PALTrainer(PALRewardModel(HashedNgramEncoder(dim=32), PALHead(cfg)))
        >>> ds = Comparisons(["u", "v"], ["p", "q"], ["short", "a b c"], ["long one here", "a"], [1, 0])
        >>> sorted(tr.fit_seen(ds).evaluate(ds))
        ['u', 'v']
        >>> rows = [{"user_id": "w", "prompt": "p", "chosen": "a long answer", "rejected": "a"}] * 3
        >>> sorted(tr.fit_new_users(rows).evaluate(rows))
        ['w']
    """

    def __init__(
        self, model: PALRewardModel, *, random_state: int = 0, device: str | torch.device = "cpu"
    ) -> None:
        self.model = model
        self.random_state = random_state
        self.device = torch.device(device)
        self._gen = torch.Generator().manual_seed(int(random_state))
        self._sides = np.random.default_rng([int(random_state), 505])  # coins for chosen/rejected

    def _comparisons(self, data: Comparisons | Any) -> Comparisons:
        return data if isinstance(data, Comparisons) else from_records(data, rng=self._sides)

    def _embed(self, ds: Comparisons) -> EmbeddedComparisons:
        return embed_comparisons(ds, self.model.encoder, joint=self.model.joint)

    def fit_seen(self, data: Comparisons | Any) -> PALTrainer:
        """Register the data's users (existing ids kept) and train the head (and encoder if set).

        Args:
            data: :class:`Comparisons` or TRL-style records with a ``user_id`` (see the class).
        """
        ds = self._comparisons(data)
        head, cfg = self.model.head, self.model.head.config
        head.users.add_users(ds.users(), generator=self._gen, exist_ok=True)
        head.to(self.device)
        if not cfg.train_encoder:
            _train_seen(head, self._embed(ds), cfg, self._gen, self.device)
            return self
        enc = self.model.encoder
        if not isinstance(getattr(enc, "model", None), nn.Module) or not getattr(enc, "trainable", False):
            raise ValueError("train_encoder=True needs an HFEncoder built with trainable=True")
        groups = [*_param_groups(head, cfg), {"params": list(enc.model.parameters()), "lr": cfg.lr_encoder}]
        opt = torch.optim.AdamW(groups)
        head.train()
        for _ in range(cfg.epochs):
            order = torch.randperm(len(ds), generator=self._gen).tolist()
            for i in range(0, len(ds), cfg.batch_size):
                part = ds.select(order[i : i + cfg.batch_size])
                pe, le = self.model.embed(part.prompt, part.left)
                _, re_ = self.model.embed(part.prompt, part.right)
                y = torch.tensor(part.label, device=self.device)
                loss = head.loss(
                    list(part.user_id),
                    None if pe is None else pe.to(self.device),
                    le.to(self.device),
                    re_.to(self.device),
                    y,
                )
                opt.zero_grad()
                loss.backward()
                opt.step()
        head.eval()
        return self

    def fit_new_users(
        self, data: Comparisons | Any, epochs: int = 20, lr: float = 5e-3, *, loss: str = "auto"
    ) -> PALTrainer:
        """Register the data's (new) users and fit only their weights, ``epochs`` full-batch steps.

        Args:
            data: :class:`Comparisons` or TRL-style records with a ``user_id`` (see the class).
            epochs: full-batch AdamW steps on the new users' weights.
            lr: AdamW learning rate.
            loss: "hinge", "ce" or "auto" (``config.new_user_loss``).
        """
        self.model.head.to(self.device)
        _fit_new_users(
            self.model.head,
            self._embed(self._comparisons(data)),
            steps=epochs,
            lr=lr,
            generator=self._gen,
            init="random",
            device=self.device,
            loss=loss,
        )
        return self

    @torch.no_grad()
    def evaluate(self, data: Comparisons | Any) -> dict[str, float]:
        """Per-user accuracy on ``data`` (:class:`Comparisons` or TRL-style records)."""
        ds = self._comparisons(data)
        d = self._embed(ds)
        head = self.model.head.to(self.device).eval()
        p = None if d.prompt is None else d.prompt.to(self.device)
        pr = head.prob_right(d.user_id, p, d.left.to(self.device), d.right.to(self.device)).cpu()
        hit = ((pr > 0.5).long() == d.label.cpu()).numpy()
        ids = np.asarray(d.user_id)
        return {u: float(hit[ids == u].mean()) for u in ds.users()}
