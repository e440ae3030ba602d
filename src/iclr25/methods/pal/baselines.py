"""Baselines of the PAL claim check: unconstrained per-user ideal points, per-user logistic
regression, and a larger user-conditioned MLP reward model.

Compared against *PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*
(Chen, Chen, Rege, Wang, Vinayak; ICLR 2025; arXiv:2406.08469), Sec. 4. The homogeneous
Bradley-Terry reward model is PAL with K = 1 (:class:`~iclr25.methods.pal.PALEstimator`).

- :class:`UnconstrainedIdealPoint`: a P-RM-style model, a free ideal point a_i in R^{d_pref}
  per user (no simplex) with a shared projector f; new users fit only their own a_i, started
  from the mean seen point (the "generic user").
- :class:`PerUserLogistic`: one scikit-learn ``LogisticRegression`` per user on e(right) - e(left).
- :class:`MLPRewardModel`: r(x, y, u) = MLP([e(x), e(y), onehot(u)]), trained with the BT loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from iclr25._core.claims import ProgressFn
from iclr25.common import rng

from .model import parse_projector
from .train import _numpy, as_tensor_inputs

__all__ = ["MLPRewardModel", "PerUserLogistic", "UnconstrainedIdealPoint"]


def _init_linear(module: nn.Module, gen: torch.Generator) -> None:
    for m in module.modules():
        if isinstance(m, nn.Linear):
            bound = 1.0 / m.in_features**0.5
            with torch.no_grad():
                m.weight.copy_((torch.rand(m.weight.shape, generator=gen) * 2 - 1) * bound)
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) * 2 - 1) * bound)


class UnconstrainedIdealPoint:
    """Free per-user ideal points a_i in R^{d_pref} with a shared projector f (P-RM-style).

    Score: distance (``variant="A"``: r = -||f(e) - a_i||, hinge) or scaled cosine
    (``variant="B"``: r = s cos(f(e_y), a_i), CE). Prompts are not used.

    Args:
        d_in: embedding dimension.
        d_pref: preference-space dimension.
        variant: "A" or "B".
        projector: projector spec of f.
        epochs: training epochs on seen users.
        batch_size: comparisons per step.
        lr_projector: lr of f.
        lr_user: lr of the ideal points.
        new_user_steps: full-batch steps for new users.
        new_user_lr: lr for new users.
        random_state: seed.
        device: where f and the ideal points are trained and evaluated ("cpu", "cuda", a
            ``torch.device``; default the CPU). Inputs are moved there and predictions come
            back as numpy arrays; the seeded draws stay on a CPU ``torch.Generator``.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> x, y = rng.normal(size=(20, 4)), rng.normal(size=(20, 4))
        >>> m = UnconstrainedIdealPoint(4, 4, epochs=1).fit(x, y, (x[:, 0] > 0).astype(int), ["u"] * 20)
        >>> m.predict(x, y, ["u"] * 20).shape
        (20,)
    """

    def __init__(
        self,
        d_in: int,
        d_pref: int,
        *,
        variant: str = "A",
        projector: str = "mlp2-gelu-dropout0",
        epochs: int = 20,
        batch_size: int = 64,
        lr_projector: float = 1e-3,
        lr_user: float = 5e-2,
        new_user_steps: int = 200,
        new_user_lr: float = 0.05,
        random_state: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        if variant not in ("A", "B"):
            raise ValueError(f"variant must be 'A' or 'B', got {variant!r}")
        self.d_in, self.d_pref, self.variant, self.projector = d_in, d_pref, variant, projector
        self.epochs, self.batch_size, self.lr_projector, self.lr_user = (
            epochs,
            batch_size,
            lr_projector,
            lr_user,
        )
        self.new_user_steps, self.new_user_lr, self.random_state = new_user_steps, new_user_lr, random_state
        self.device = device

    def _rows(self, ids: Sequence[str]) -> torch.Tensor:
        missing = [u for u in ids if u not in self.index_]
        if missing:
            raise KeyError(f"unknown user id(s): {sorted(set(missing))[:5]}")
        return torch.tensor([self.index_[u] for u in ids], dtype=torch.long)

    def _logits(
        self, rows: torch.Tensor, left: torch.Tensor, right: torch.Tensor, *, projected: bool = False
    ) -> torch.Tensor:
        a = torch.cat(list(self.points_))[rows]  # (n, d_pref)
        zl, zr = (left, right) if projected else (self.f_(left), self.f_(right))
        if self.variant == "A":
            return torch.stack([-(zl - a).norm(dim=-1), -(zr - a).norm(dim=-1)], 1)
        s = self.t_.exp().clamp(max=100.0)
        return torch.stack(
            [s * F.cosine_similarity(zl, a, dim=-1), s * F.cosine_similarity(zr, a, dim=-1)], 1
        )

    def _loss(
        self, rows: torch.Tensor, left: torch.Tensor, right: torch.Tensor, y: torch.Tensor, **kw: bool
    ) -> torch.Tensor:
        lg = self._logits(rows, left, right, **kw)
        if self.variant == "A":
            return F.relu(1.0 - (2.0 * y - 1.0) * (lg[:, 1] - lg[:, 0])).mean()
        return F.cross_entropy(lg, y)

    def fit(
        self,
        left_emb: Any,
        right_emb: Any,
        label: Any,
        user_ids: Sequence[str],
        *,
        progress: ProgressFn | None = None,
    ) -> UnconstrainedIdealPoint:
        """Fit f and every seen user's a_i.

        ``progress("training", epoch, epochs)`` is called after every epoch when given.
        """
        d = as_tensor_inputs(None, left_emb, right_emb, label, user_ids, self.d_in)
        dev = torch.device(self.device)
        self._gen = torch.Generator().manual_seed(int(self.random_state))
        self.f_ = parse_projector(self.projector, self.d_in, self.d_pref)
        _init_linear(self.f_, self._gen)  # drawn on the CPU generator, then moved
        self.f_.to(dev)
        self.t_ = nn.Parameter(torch.tensor(2.6592600369644043, device=dev))
        users = list(dict.fromkeys(d.user_id))
        self.index_ = {u: i for i, u in enumerate(users)}
        self.points_ = nn.ParameterList(
            [nn.Parameter(rng.randn(len(users), self.d_pref, generator=self._gen, device=dev))]
        )
        opt = torch.optim.AdamW(
            [
                {"params": list(self.f_.parameters()), "lr": self.lr_projector, "weight_decay": 0.01},
                {"params": list(self.points_), "lr": self.lr_user, "weight_decay": 0.0},
                {"params": [self.t_], "lr": 0.1, "weight_decay": 0.0},
            ]
        )
        n, rows = len(d), self._rows(d.user_id).to(dev)
        left, right, y = d.left.to(dev), d.right.to(dev), d.label.to(dev)
        for epoch in range(self.epochs):
            order = rng.randperm(n, generator=self._gen, device=dev)
            for i in range(0, n, self.batch_size):
                ix = order[i : i + self.batch_size]
                loss = self._loss(rows[ix], left[ix], right[ix], y[ix])
                opt.zero_grad()
                loss.backward()
                opt.step()
            if progress is not None:
                progress("training", epoch + 1, self.epochs)
        return self

    def partial_fit_new_users(
        self, left_emb: Any, right_emb: Any, label: Any, user_ids: Sequence[str]
    ) -> UnconstrainedIdealPoint:
        """Add new users at the mean seen ideal point and fit only their a_i (f frozen)."""
        d = as_tensor_inputs(None, left_emb, right_emb, label, user_ids, self.d_in)
        new = list(dict.fromkeys(d.user_id))
        if any(u in self.index_ for u in new):
            raise ValueError("partial_fit_new_users: some ids are already registered")
        mean = self.points_[0].detach().mean(0, keepdim=True)
        block = nn.Parameter(mean.repeat(len(new), 1))
        start = sum(p.shape[0] for p in self.points_)
        self.points_.append(block)
        self.index_.update({u: start + j for j, u in enumerate(new)})
        frozen = [*self.f_.parameters(), self.t_, *self.points_[:-1]]
        for p in frozen:
            p.requires_grad_(False)
        opt = torch.optim.AdamW([block], lr=self.new_user_lr, weight_decay=0.0)
        dev = block.device  # where fit put the model
        rows, y = self._rows(d.user_id).to(dev), d.label.to(dev)
        with torch.no_grad():  # f is frozen: project once
            zl, zr = self.f_(d.left.to(dev)), self.f_(d.right.to(dev))
        for _ in range(self.new_user_steps):
            loss = self._loss(rows, zl, zr, y, projected=True)
            opt.zero_grad()
            loss.backward()
            opt.step()
        for p in frozen:
            p.requires_grad_(True)
        return self

    @torch.no_grad()
    def predict(self, left_emb: Any, right_emb: Any, user_ids: Sequence[str]) -> np.ndarray:
        """Predicted labels (1 = right preferred). Shape: (n,)."""
        d = as_tensor_inputs(None, left_emb, right_emb, None, user_ids, self.d_in)
        dev = self.t_.device
        lg = self._logits(self._rows(d.user_id).to(dev), d.left.to(dev), d.right.to(dev))
        return (lg[:, 1] > lg[:, 0]).long().cpu().numpy()

    def trainable_parameter_count(self) -> int:
        """Parameters of f, t and every a_i."""
        return sum(p.numel() for p in self.f_.parameters()) + 1 + sum(p.numel() for p in self.points_)


class PerUserLogistic:
    """Independent per-user ``LogisticRegression`` on the feature e(right) - e(left).

    A user whose training labels are all one class predicts that class.

    Args:
        C: inverse L2 strength of scikit-learn's ``LogisticRegression``.
        max_iter: solver iterations.

    Example:
        >>> import numpy as np
        >>> x = np.eye(4)
        >>> m = PerUserLogistic().fit(x, -x, [0, 0, 1, 1], ["u", "u", "v", "v"])
        >>> m.predict(x, -x, ["u", "v"] * 2).tolist()
        [0, 1, 0, 1]
    """

    def __init__(self, *, C: float = 1.0, max_iter: int = 1000) -> None:
        self.C, self.max_iter = C, max_iter

    def fit(self, left_emb: Any, right_emb: Any, label: Any, user_ids: Sequence[str]) -> PerUserLogistic:
        """Fit one model per user (refitting a known user replaces its model)."""
        from sklearn.linear_model import LogisticRegression

        left, right = _numpy(left_emb).astype(np.float64), _numpy(right_emb).astype(np.float64)
        if left.shape != right.shape or left.ndim != 2:
            raise ValueError(
                f"left/right embeddings must share a 2-d shape, got {left.shape} vs {right.shape}"
            )
        y, ids = _numpy(label), np.asarray([str(u) for u in user_ids])
        if len(y) != len(left) or len(ids) != len(left):
            raise ValueError("left_emb, label and user_ids must have the same length")
        if not hasattr(self, "models_"):
            self.models_: dict[str, Any] = {}
            self.dim_ = left.shape[1]
        if left.shape[1] != self.dim_:
            raise ValueError(f"embedding dim {left.shape[1]} != {self.dim_}")
        x = right - left
        for u in dict.fromkeys(ids.tolist()):
            m = ids == u
            if len(set(y[m].tolist())) < 2:
                self.models_[u] = int(y[m][0])
            else:
                self.models_[u] = LogisticRegression(C=self.C, max_iter=self.max_iter).fit(x[m], y[m])
        return self

    def predict(self, left_emb: Any, right_emb: Any, user_ids: Sequence[str]) -> np.ndarray:
        """Predicted labels. Shape: (n,)."""
        x = _numpy(right_emb).astype(np.float64) - _numpy(left_emb).astype(np.float64)
        ids = np.asarray([str(u) for u in user_ids])
        missing = sorted(set(ids.tolist()) - set(self.models_))
        if missing:
            raise KeyError(f"unknown user id(s): {missing[:5]}")
        out = np.zeros(len(ids), dtype=np.int64)
        for u in dict.fromkeys(ids.tolist()):
            m, model = ids == u, self.models_[u]
            out[m] = model if isinstance(model, int) else model.predict(x[m])
        return out

    def parameters_per_user(self) -> int:
        """d + 1 learned numbers per user."""
        return int(self.dim_) + 1


class MLPRewardModel:
    """A larger reward model r(x, y, u) = MLP([e(x), e(y), onehot(u)]) trained with Bradley-Terry.

    Args:
        d_in: embedding dimension.
        hidden: hidden width (two hidden layers).
        epochs: training epochs.
        batch_size: comparisons per step.
        lr: Adam lr.
        random_state: seed.
        device: where the MLP is trained and evaluated ("cpu", "cuda", a ``torch.device``;
            default the CPU). Inputs are moved there and predictions come back as numpy
            arrays; the seeded draws stay on a CPU ``torch.Generator``.

    Example:
        >>> import numpy as np
        >>> x = np.random.default_rng(0).normal(size=(8, 4))
        >>> m = MLPRewardModel(4, hidden=8, epochs=1).fit(x, x, -x, [0, 1] * 4, ["u"] * 8)
        >>> m.trainable_parameter_count() == (2 * 4 + 1) * 8 + 8 + 8 * 8 + 8 + 8 + 1
        True
    """

    def __init__(
        self,
        d_in: int,
        *,
        hidden: int = 1024,
        epochs: int = 20,
        batch_size: int = 64,
        lr: float = 1e-3,
        random_state: int = 0,
        device: str | torch.device = "cpu",
    ) -> None:
        self.d_in, self.hidden, self.epochs, self.batch_size = d_in, hidden, epochs, batch_size
        self.lr, self.random_state, self.device = lr, random_state, device

    def _onehot(self, ids: Sequence[str]) -> torch.Tensor:
        missing = [u for u in ids if u not in self.index_]
        if missing:
            raise KeyError(f"unknown user id(s): {sorted(set(missing))[:5]}")
        return F.one_hot(torch.tensor([self.index_[u] for u in ids]), len(self.index_)).float()

    def _r(self, prompt: torch.Tensor, item: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
        return self.net_(torch.cat([prompt, item, onehot], dim=1)).squeeze(-1)

    def fit(
        self,
        prompt_emb: Any,
        left_emb: Any,
        right_emb: Any,
        label: Any,
        user_ids: Sequence[str],
        *,
        progress: ProgressFn | None = None,
    ) -> MLPRewardModel:
        """Fit on seen users' comparisons (prompt_emb may be None: zeros are used).

        ``progress("training", epoch, epochs)`` is called after every epoch when given.
        """
        d = as_tensor_inputs(None, left_emb, right_emb, label, user_ids, self.d_in)
        p = (
            torch.zeros_like(d.left)
            if prompt_emb is None
            else torch.as_tensor(_numpy(prompt_emb), dtype=torch.float32)
        )
        if p.shape != d.left.shape:
            raise ValueError(f"prompt_emb must have shape {tuple(d.left.shape)}, got {tuple(p.shape)}")
        gen = torch.Generator().manual_seed(int(self.random_state))
        self.index_ = {u: i for i, u in enumerate(dict.fromkeys(d.user_id))}
        h = self.hidden
        self.net_ = nn.Sequential(
            nn.Linear(2 * self.d_in + len(self.index_), h),
            nn.GELU(),
            nn.Linear(h, h),
            nn.GELU(),
            nn.Linear(h, 1),
        )
        _init_linear(self.net_, gen)  # drawn on the CPU generator, then moved
        dev = torch.device(self.device)
        self.net_.to(dev)
        opt = torch.optim.Adam(self.net_.parameters(), lr=self.lr)
        n, onehot = len(d), self._onehot(d.user_id).to(dev)
        p, left, right, y = p.to(dev), d.left.to(dev), d.right.to(dev), d.label.to(dev)
        for epoch in range(self.epochs):
            order = rng.randperm(n, generator=gen, device=dev)
            for i in range(0, n, self.batch_size):
                ix = order[i : i + self.batch_size]
                diff = self._r(p[ix], right[ix], onehot[ix]) - self._r(p[ix], left[ix], onehot[ix])
                loss = F.binary_cross_entropy_with_logits(diff, y[ix].float())
                opt.zero_grad()
                loss.backward()
                opt.step()
            if progress is not None:
                progress("training", epoch + 1, self.epochs)
        return self

    @torch.no_grad()
    def predict(self, prompt_emb: Any, left_emb: Any, right_emb: Any, user_ids: Sequence[str]) -> np.ndarray:
        """Predicted labels. Shape: (n,)."""
        d = as_tensor_inputs(None, left_emb, right_emb, None, user_ids, self.d_in)
        p = (
            torch.zeros_like(d.left)
            if prompt_emb is None
            else torch.as_tensor(_numpy(prompt_emb), dtype=torch.float32)
        )
        dev = next(self.net_.parameters()).device
        p, left, right, onehot = p.to(dev), d.left.to(dev), d.right.to(dev), self._onehot(d.user_id).to(dev)
        return (self._r(p, right, onehot) > self._r(p, left, onehot)).long().cpu().numpy()

    def trainable_parameter_count(self) -> int:
        """All MLP parameters."""
        return sum(q.numel() for q in self.net_.parameters())
