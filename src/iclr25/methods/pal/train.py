"""Training PAL: seen users (Sec. 3 losses) and few-shot fitting of new users (W only).

Implements the training of *PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic
Alignment* (Chen, Chen, Rege, Wang, Vinayak; ICLR 2025; arXiv:2406.08469):

- seen users: Adam with parameter groups (projectors f, g_k with weight decay; prototypes P and
  user logits W; reward scale t; the encoder only for PAL-B-Large), hinge (A) or CE (B) loss;
- new users (Sec. 4, unseen users): register ids with u ~ N(0, I_K), freeze every other tensor
  with ``requires_grad_(False)`` and fit only the new rows of W with AdamW. The paper's
  sample-complexity argument rests on this: K numbers per user instead of d.

:class:`PALEstimator` is an estimator on precomputed embeddings (``get_params``/``set_params``
and ``sklearn.base.clone`` from scikit-learn's ``BaseEstimator``; its ``fit`` takes comparison
arrays, not ``(X, y)``, so it is not a drop-in for scikit-learn pipelines or cross-validation);
:class:`PALTrainer` trains a :class:`~iclr25.methods.pal.PALRewardModel` from text comparisons or
TRL-style ``prompt``/``chosen``/``rejected`` records with a ``user_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from torch import nn

from iclr25._core.claims import ProgressFn

from .config import PALConfig
from .data import Comparisons, EmbeddedComparisons, check_finite, embed_comparisons, from_records
from .model import PALHead, PALRewardModel, preference_loss

__all__ = ["PALEstimator", "PALTrainer", "as_tensor_inputs"]


def as_tensor_inputs(
    prompt_emb: Any, left_emb: Any, right_emb: Any, label: Any | None, user_ids: Sequence[str], d_in: int
) -> EmbeddedComparisons:
    """Validate and convert array-like inputs into :class:`EmbeddedComparisons`.

    Raises:
        ValueError: mismatched lengths, wrong embedding dimension, NaN or infinite embeddings,
            labels outside {0, 1}.
    """
    left = torch.as_tensor(np.asarray(left_emb), dtype=torch.float32)
    right = torch.as_tensor(np.asarray(right_emb), dtype=torch.float32)
    prompt = None if prompt_emb is None else torch.as_tensor(np.asarray(prompt_emb), dtype=torch.float32)
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
        arr = np.asarray(label)
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
) -> list[float]:
    """Minibatch training of all head parameters on seen users' comparisons. Returns epoch losses.

    ``progress("training", epoch, epochs)`` is called after every epoch when given.
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
        order = torch.randperm(n, generator=generator).to(device)
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
    loss ``config.loss``).

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


class PALEstimator(BaseEstimator):
    """PAL on precomputed embeddings, as an estimator.

    It follows scikit-learn's estimator conventions where they fit comparisons: ``__init__`` only
    stores its arguments, ``get_params``/``set_params`` and ``sklearn.base.clone`` work, ``fit``
    returns ``self``, learned state ends in ``_``, randomness comes from ``random_state``, and an
    unfitted estimator raises ``sklearn.exceptions.NotFittedError``. Unlike a scikit-learn
    estimator, ``fit`` takes five arrays (prompt, left and right embeddings, labels, user ids)
    rather than ``(X, y)``, so it does not plug into pipelines or ``cross_val_score``. For text
    and TRL-style ``prompt``/``chosen``/``rejected`` records use :class:`PALTrainer`.

    Args:
        config: the model config (``variant``, ``k``, ``d_in`` ...).
        random_state: seed of init, batch order and new-user init.
        device: where tensors live (the caller chooses).

    Attributes:
        head_: the fitted :class:`PALHead`.
        loss_curve_: mean training loss per epoch.
        new_user_trainable_: trainable parameter count during the last new-user fit.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> x, y = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
        >>> lab = (x[:, 0] < y[:, 0]).astype(int)
        >>> cfg = PALConfig(variant="A", k=1, d_in=4, d_pref=4, epochs=2, batch_size=8)
        >>> est = PALEstimator(cfg).fit(None, x, y, lab, ["u"] * 40)
        >>> est.predict_proba(None, x, y, ["u"] * 40).shape
        (40, 2)
    """

    def __init__(
        self, config: PALConfig, *, random_state: int = 0, device: str | torch.device = "cpu"
    ) -> None:
        self.config = config
        self.random_state = random_state
        self.device = device

    def _data(
        self, prompt_emb: Any, left_emb: Any, right_emb: Any, label: Any, user_ids: Sequence[str]
    ) -> EmbeddedComparisons:
        if self.config.variant == "B" and prompt_emb is None:
            raise ValueError("PAL-B needs prompt embeddings")
        return as_tensor_inputs(
            None if self.config.variant == "A" else prompt_emb,
            left_emb,
            right_emb,
            label,
            user_ids,
            self.config.d_in,
        )

    def fit(
        self,
        prompt_emb: Any,
        left_emb: Any,
        right_emb: Any,
        label: Any,
        user_ids: Sequence[str],
        *,
        progress: ProgressFn | None = None,
    ) -> PALEstimator:
        """Fit the head on seen users' comparisons (all parameters; users registered first-seen).

        Args:
            prompt_emb, left_emb, right_emb, label, user_ids: the seen users' comparisons.
            progress: optional ``progress(stage, done, total)``, called after every epoch.

        Shape:
            prompt_emb (n, d_in) or None for PAL-A; left_emb, right_emb (n, d_in); label (n,).
        """
        data = self._data(prompt_emb, left_emb, right_emb, label, user_ids)
        dev = torch.device(self.device)
        gen = torch.Generator().manual_seed(int(self.random_state))
        self.head_ = PALHead(self.config, generator=gen)
        self.head_.users.add_users(list(dict.fromkeys(data.user_id)), generator=gen)
        self.head_.to(dev)
        self._gen = gen
        self.loss_curve_ = _train_seen(self.head_, data, self.config, gen, dev, progress)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "head_"):
            raise NotFittedError("this PALEstimator is not fitted yet: call fit() first")

    def partial_fit_new_users(
        self,
        prompt_emb: Any,
        left_emb: Any,
        right_emb: Any,
        label: Any,
        user_ids: Sequence[str],
        *,
        steps: int | None = None,
        lr: float | None = None,
        init: str = "random",
        loss: str = "auto",
    ) -> PALEstimator:
        """Register new users and fit only their weights (every other tensor is frozen).

        Args:
            prompt_emb, left_emb, right_emb, label, user_ids: the new users' comparisons; every
                id must be unregistered (``ValueError`` otherwise).
            steps: full-batch AdamW steps (default ``config.new_user_steps``; 0 = no fitting).
            lr: AdamW lr (default ``config.new_user_lr``).
            init: "random" (u ~ N(0, I_K)) or "uniform" (u = 0, i.e. w = 1/K).
            loss: "hinge", "ce" (Bradley-Terry cross-entropy on the two rewards) or "auto"
                (``config.new_user_loss``; its own "auto" is the training loss).
        """
        self._check_fitted()
        data = self._data(prompt_emb, left_emb, right_emb, label, user_ids)
        self.new_user_trainable_ = _fit_new_users(
            self.head_,
            data,
            steps=self.config.new_user_steps if steps is None else steps,
            lr=self.config.new_user_lr if lr is None else lr,
            generator=self._gen,
            init=init,
            device=torch.device(self.device),
            loss=loss,
        )
        return self

    @torch.no_grad()
    def predict_proba(
        self, prompt_emb: Any, left_emb: Any, right_emb: Any, user_ids: Sequence[str]
    ) -> np.ndarray:
        """[P(left preferred), P(right preferred)] per comparison. Shape: (n, 2)."""
        self._check_fitted()
        d = self._data(prompt_emb, left_emb, right_emb, None, user_ids)
        dev = torch.device(self.device)
        self.head_.eval()
        p = None if d.prompt is None else d.prompt.to(dev)
        pr = self.head_.prob_right(d.user_id, p, d.left.to(dev), d.right.to(dev)).cpu().numpy()
        return np.stack([1.0 - pr, pr], axis=1)

    def predict(self, prompt_emb: Any, left_emb: Any, right_emb: Any, user_ids: Sequence[str]) -> np.ndarray:
        """Predicted labels (0 = left, 1 = right). Shape: (n,)."""
        return (self.predict_proba(prompt_emb, left_emb, right_emb, user_ids)[:, 1] > 0.5).astype(np.int64)

    def score(
        self, prompt_emb: Any, left_emb: Any, right_emb: Any, label: Any, user_ids: Sequence[str]
    ) -> float:
        """Accuracy over all comparisons."""
        return float((self.predict(prompt_emb, left_emb, right_emb, user_ids) == np.asarray(label)).mean())

    def per_user_accuracy(
        self, prompt_emb: Any, left_emb: Any, right_emb: Any, label: Any, user_ids: Sequence[str]
    ) -> dict[str, float]:
        """Accuracy of each user's comparisons."""
        hit = self.predict(prompt_emb, left_emb, right_emb, user_ids) == np.asarray(label)
        ids = np.asarray([str(u) for u in user_ids])
        return {u: float(hit[ids == u].mean()) for u in dict.fromkeys(ids.tolist())}

    def trainable_parameter_count(self) -> int:
        """Parameters trained when fitting seen users (head only; the encoder is frozen)."""
        self._check_fitted()
        return sum(p.numel() for p in self.head_.parameters())


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
        device: where the head runs.

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
        head = self.model.head.eval()
        p = None if d.prompt is None else d.prompt.to(self.device)
        pr = head.prob_right(d.user_id, p, d.left.to(self.device), d.right.to(self.device)).cpu()
        hit = ((pr > 0.5).long() == d.label).numpy()
        ids = np.asarray(d.user_id)
        return {u: float(hit[ids == u].mean()) for u in ds.users()}
