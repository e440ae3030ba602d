"""PAL reward heads: user weights on the simplex, shared prototypes, PAL-A and PAL-B scores.

Implements *PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*
(Chen, Chen, Rege, Wang, Vinayak; ICLR 2025; arXiv:2406.08469):

- Sec. 3: user i has logits u_i in R^K and weights w_i = softmax(u_i / tau) on the simplex.
- Sec. 3.1 (PAL-A): items z = f(e(x + y)) encoded jointly; ideal point a_i = f(w_i P) (or the
  ``Pw``, ``f(P)w``, ``|f(P)|w`` maps); score s = ||z_l - a_i|| - ||z_r - a_i||, hinge loss.
- Sec. 3.2 (PAL-B): z_y = f(e(y)); a_i(x) = sum_k w_ik g_k(e(x)); reward
  r_i(x, y) = min(exp(t), 100) cos(z_y, a_i(x)); cross-entropy over the two rewards.
- Pooling of token states (last non-pad token, masked mean) and the token-wise ``cumulative``
  weights of the official TL;DR code (parity only).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr25.common import rng

from .config import PALConfig

__all__ = [
    "PALHead",
    "PALRewardModel",
    "RewardOutput",
    "UserRegistry",
    "cumulative_weights",
    "hinge_loss",
    "parse_projector",
    "pool_last",
    "pool_mean",
    "preference_loss",
]

_SPEC = re.compile(r"^mlp(\d+)(?:-(relu|gelu|tanh|silu))?(?:-dropout([0-9.]+))?(-residual)?$")
_ACTS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


class _Residual(nn.Module):
    def __init__(self, body: nn.Module) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: Tensor) -> Tensor:
        return x + self.body(x)


def parse_projector(spec: str, d_in: int, d_pref: int) -> nn.Module:
    """Build a projector from its spec string ``mlpL-act-dropoutP[-residual]`` or ``identity``.

    ``mlpL`` is L blocks of Linear(., d_pref) -> Dropout(P) -> act, then Linear(d_pref, d_pref);
    act defaults to GELU and P to 0. ``-residual`` adds the input (needs ``d_in == d_pref``).

    Args:
        spec: e.g. ``"mlp2-gelu-dropout0"``, ``"mlp2-relu-dropout0-residual"``, ``"identity"``.
        d_in: input dimension.
        d_pref: output dimension.

    Returns:
        The projector module.

    Raises:
        ValueError: an unknown spec, or a residual/identity projector with ``d_in != d_pref``.

    Example:
        >>> f = parse_projector("mlp2", 8, 8)
        >>> sum(p.numel() for p in f.parameters()) == 3 * (8 * 8 + 8)
        True
    """
    if spec == "identity":
        if d_in != d_pref:
            raise ValueError(f"identity projector needs d_in == d_pref, got {d_in} != {d_pref}")
        return nn.Identity()
    m = _SPEC.match(spec)
    if m is None:
        raise ValueError(f"unknown projector spec {spec!r}; expected mlpL-act-dropoutP[-residual]")
    n_blocks, act, drop, residual = (
        int(m.group(1)),
        m.group(2) or "gelu",
        float(m.group(3) or 0.0),
        m.group(4),
    )
    if not 0.0 <= drop < 1.0:
        raise ValueError(f"projector dropout must be in [0, 1), got {drop}")
    if residual and d_in != d_pref:
        raise ValueError(f"residual projector needs d_in == d_pref, got {d_in} != {d_pref}")
    layers: list[nn.Module] = []
    width = d_in
    for _ in range(n_blocks):
        layers += [nn.Linear(width, d_pref), nn.Dropout(drop), _ACTS[act]()]
        width = d_pref
    layers.append(nn.Linear(width, d_pref))
    body = nn.Sequential(*layers)
    return _Residual(body) if residual else body


def pool_last(hidden: Tensor, mask: Tensor) -> Tensor:
    """The state of the last non-pad token, for left or right padding.

    Args:
        hidden: token states.
        mask: attention mask (1 = token, 0 = pad).

    Returns:
        One vector per sequence.

    Shape:
        hidden (n, T, d), mask (n, T) -> (n, d).

    Example:
        >>> h = torch.arange(6.0).view(1, 3, 2)
        >>> pool_last(h, torch.tensor([[1, 1, 0]])).tolist()
        [[2.0, 3.0]]
    """
    t = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask.bool(), t, torch.full_like(t, -1)).max(dim=1).values  # (n,)
    if (last < 0).any():
        raise ValueError("pool_last: a sequence has no tokens (all-zero mask)")
    return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]


def pool_mean(hidden: Tensor, mask: Tensor) -> Tensor:
    """Mean of the token states over non-pad tokens.

    Shape:
        hidden (n, T, d), mask (n, T) -> (n, d).

    Example:
        >>> h = torch.tensor([[[1.0], [3.0], [100.0]]])
        >>> pool_mean(h, torch.tensor([[1, 1, 0]])).tolist()
        [[2.0]]
    """
    m = mask.to(hidden.dtype).unsqueeze(-1)  # (n, T, 1)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)


def cumulative_weights(length: int) -> Tensor:
    """Token-wise ``cumulative`` weights of the official TL;DR code: position j gets j / (l(l+1)/2).

    Args:
        length: number of scored positions l >= 1.

    Returns:
        Weights summing to 1. Shape: (l,).

    Example:
        >>> cumulative_weights(3).tolist()
        [0.1666666716337204, 0.3333333432674408, 0.5]
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    pos = torch.arange(1, length + 1, dtype=torch.float32)
    return pos / (length * (length + 1) / 2)


def hinge_loss(s: Tensor, label: Tensor) -> Tensor:
    """PAL-A hinge loss mean(max(0, 1 - y s)) with y = 2 label - 1 (label 1: right preferred).

    Example:
        >>> hinge_loss(torch.tensor([0.5, -2.0]), torch.tensor([1, 1])).item()
        1.75
    """
    y = 2.0 * label.to(s.dtype) - 1.0
    return F.relu(1.0 - y * s).mean()


def preference_loss(logits: Tensor, label: Tensor, kind: str) -> Tensor:
    """The paper's loss on two logits ``[r_left, r_right]``: ``"ce"`` or ``"hinge"`` (on r_r - r_l).

    Shape:
        logits (n, 2), label (n,) in {0, 1} -> scalar.

    Example:
        >>> loss = preference_loss(torch.tensor([[0.0, 0.0]]), torch.tensor([1]), "ce")
        >>> abs(loss.item() - math.log(2)) < 1e-6
        True
    """
    if kind == "ce":
        return F.cross_entropy(logits, label.long())
    if kind == "hinge":
        return hinge_loss(logits[:, 1] - logits[:, 0], label)
    raise ValueError(f"unknown loss {kind!r}")


class UserRegistry(nn.Module):
    """String user ids -> rows of the user-logit matrix W; weights w_i = softmax(u_i / tau).

    Users are stored in blocks, one per :meth:`add_users` call, so a new block can be trained
    while earlier blocks stay bitwise fixed. Re-registering an id raises ``ValueError`` unless
    ``exist_ok=True``, in which case the existing row (and its weights) is kept unchanged.

    Args:
        k: K, the number of prototypes.
        tau: softmax temperature.
        mixing: "softmax" or "gumbel" (Gumbel noise only in training mode, needs a generator).
        partition: one-hot argmax weights in eval mode.

    Example:
        >>> reg = UserRegistry(3)
        >>> reg.add_users(["ann", "bo"], generator=torch.Generator().manual_seed(0))
        [0, 1]
        >>> round(reg.weights("bo").detach().sum().item(), 6)
        1.0
    """

    def __init__(self, k: int, *, tau: float = 1.0, mixing: str = "softmax", partition: bool = False) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k, self.tau, self.mixing, self.partition = k, tau, mixing, partition
        self.blocks = nn.ParameterList()
        self._index: dict[str, int] = {}
        self.generator: torch.Generator | None = None

    @property
    def ids(self) -> list[str]:
        """Registered ids in row order."""
        return list(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, uid: object) -> bool:
        return uid in self._index

    def add_users(
        self,
        ids: Sequence[str],
        *,
        generator: torch.Generator | None = None,
        init: Tensor | None = None,
        exist_ok: bool = False,
    ) -> list[int]:
        """Register new ids with logits u ~ N(0, I_K) (or ``init``) as one new block.

        Args:
            ids: user ids (strings).
            generator: RNG of the N(0, I) init (required unless ``init`` is given).
            init: explicit logits for the new ids, shape (len(new ids), K).
            exist_ok: keep already-registered ids unchanged instead of raising.

        Returns:
            The row of every requested id.
        """
        ids = [str(u) for u in ids]
        if len(set(ids)) != len(ids):
            raise ValueError("add_users: duplicate ids in one call")
        known = [u for u in ids if u in self._index]
        if known and not exist_ok:
            raise ValueError(
                f"add_users: ids already registered: {known[:5]} (pass exist_ok=True to keep them)"
            )
        new = [u for u in ids if u not in self._index]
        if new:
            if init is None:
                if generator is None:
                    raise ValueError("add_users: pass a torch.Generator (or init) for the N(0, I) init")
                # Drawn on the generator's device, then moved to the registry's (the first block's).
                dev = self.blocks[0].device if len(self.blocks) else torch.device("cpu")
                init = rng.randn(len(new), self.k, generator=generator, device=dev)
            if tuple(init.shape) != (len(new), self.k):
                raise ValueError(
                    f"add_users: init has shape {tuple(init.shape)}, expected {(len(new), self.k)}"
                )
            self.blocks.append(nn.Parameter(init.detach().clone().float()))
            start = len(self._index)
            for j, u in enumerate(new):
                self._index[u] = start + j
        return [self._index[u] for u in ids]

    def rows(self, ids: Sequence[str]) -> Tensor:
        """Row indices of ``ids``; unknown ids raise ``KeyError``."""
        missing = [u for u in ids if u not in self._index]
        if missing:
            raise KeyError(f"unknown user id(s): {sorted(set(missing))[:5]}")
        return torch.tensor([self._index[u] for u in ids], dtype=torch.long)

    def logits(self) -> Tensor:
        """All user logits U. Shape: (n_users, K)."""
        if not len(self.blocks):
            raise KeyError("no users registered")
        return torch.cat(list(self.blocks), dim=0)

    def mix(self, u: Tensor) -> Tensor:
        """Simplex weights from logits (softmax / Gumbel-softmax; one-hot in eval partition mode).

        Shape:
            (n, K) -> (n, K).
        """
        if self.partition and not self.training:
            return F.one_hot(u.argmax(-1), self.k).to(u.dtype)
        if self.mixing == "gumbel" and self.training:
            if self.generator is None:
                raise ValueError("gumbel mixing needs registry.generator set to a torch.Generator")
            # Gumbel noise -log(-log U), U drawn on the generator's device and moved to u's.
            uni = rng.rand(*u.shape, generator=self.generator, device=u.device)
            g = -torch.log(-torch.log(uni.clamp(1e-9, 1 - 1e-9)))
            u = u + g
        return torch.softmax(u / self.tau, dim=-1)

    def forward(self, ids: Sequence[str]) -> Tensor:
        """Weights w_i of the given ids. Shape: (n, K)."""
        rows = self.rows(ids).to(self.logits().device)
        return self.mix(self.logits()[rows])

    def weights(self, uid: str) -> Tensor:
        """The simplex point w_i of one user. Shape: (K,)."""
        return self.forward([uid])[0]

    def block_of(self, uid: str) -> int:
        """Index of the block that holds ``uid``'s row."""
        row = int(self.rows([uid])[0])
        for b, p in enumerate(self.blocks):
            if row < p.shape[0]:
                return b
            row -= p.shape[0]
        raise KeyError(uid)  # pragma: no cover


class PALHead(nn.Module):
    """The PAL head over frozen embeddings: user registry, prototypes and projectors.

    PAL-A: ``forward`` returns s = ||z_l - a_i|| - ||z_r - a_i|| (positive: right preferred);
    ``prompt_emb`` is ignored (items are prompt + response encoded jointly).
    PAL-B: ``forward`` returns the two logits [r_i(x, y_l), r_i(x, y_r)].

    Args:
        config: the model's :class:`PALConfig`.
        generator: RNG of the parameter init.

    Example:
        >>> cfg = PALConfig(variant="B", k=2, d_in=8, d_pref=4)
        >>> head = PALHead(cfg, generator=torch.Generator().manual_seed(0))
        >>> _ = head.users.add_users(["u"], generator=torch.Generator().manual_seed(1))
        >>> e = torch.randn(3, 8, generator=torch.Generator().manual_seed(2))
        >>> head(["u"] * 3, e, e, e).shape
        torch.Size([3, 2])
    """

    def __init__(self, config: PALConfig, *, generator: torch.Generator | None = None) -> None:
        super().__init__()
        self.config = config
        gen = generator if generator is not None else torch.Generator().manual_seed(config.seed)
        c = config
        self.users = UserRegistry(c.k, tau=c.tau, mixing=c.mixing, partition=c.partition)
        self.f = parse_projector(c.projector, c.d_in, c.d_pref)
        self.logit_scale = nn.Parameter(torch.tensor(float(c.logit_scale_init)))
        if c.variant == "A":
            d_proto = c.d_pref if c.user_map == "Pw" else c.d_in
            self.prototypes = nn.Parameter(torch.randn(c.k, d_proto, generator=gen))
            self.g = nn.ModuleList()
        else:
            self.prototypes = None
            self.g = nn.ModuleList(parse_projector(c.projector, c.d_in, c.d_pref) for _ in range(c.k))
        # Re-initialise Linear layers from the generator so init never touches the global RNG.
        for mod in self.modules():
            if isinstance(mod, nn.Linear):
                bound = 1.0 / math.sqrt(mod.in_features)
                with torch.no_grad():
                    mod.weight.copy_((torch.rand(mod.weight.shape, generator=gen) * 2 - 1) * bound)
                    mod.bias.copy_((torch.rand(mod.bias.shape, generator=gen) * 2 - 1) * bound)

    # --- user weights -------------------------------------------------------------------
    def user_weights(self, users_or_weights: Sequence[str] | Tensor, n: int) -> Tensor:
        """Weights (n, K) from ids or from explicit simplex weights ((K,) or (n, K))."""
        if isinstance(users_or_weights, Tensor):
            w = users_or_weights.float()
            if w.dim() == 1:
                w = w.expand(n, -1)
            if w.shape != (n, self.config.k):
                raise ValueError(f"weights have shape {tuple(w.shape)}, expected ({n}, {self.config.k})")
            return w
        if len(users_or_weights) != n:
            raise ValueError(f"{len(users_or_weights)} user ids for {n} comparisons")
        return self.users(list(users_or_weights))

    def _check(self, x: Tensor, name: str) -> None:
        if x.dim() != 2 or x.shape[1] != self.config.d_in:
            raise ValueError(f"{name} must have shape (n, {self.config.d_in}), got {tuple(x.shape)}")

    # --- PAL-A ----------------------------------------------------------------------------
    def ideal_points(self, w: Tensor) -> Tensor:
        """PAL-A ideal points a_i from weights (Sec. 3.1). Shape: (n, K) -> (n, d_pref)."""
        p, m = self.prototypes, self.config.user_map
        if m == "f(Pw)":
            return self.f(w @ p)
        if m == "Pw":
            return w @ p
        fp = self.f(p)  # (K, d_pref)
        if m == "|f(P)|w":
            fp = F.normalize(fp, dim=-1)
        return w @ fp

    # --- PAL-B ----------------------------------------------------------------------------
    def scale(self) -> Tensor:
        """Reward scale s = min(exp(t), logit_scale_max): the clamp is on exp(t), not t."""
        return self.logit_scale.exp().clamp(max=self.config.logit_scale_max)

    def prompt_points(self, w: Tensor, prompt_emb: Tensor) -> Tensor:
        """PAL-B a_i(x) = sum_k w_ik g_k(e(x)). Shape: (n, K), (n, d_in) -> (n, d_pref)."""
        gx = torch.stack([g(prompt_emb) for g in self.g], dim=1)  # (n, K, d_pref)
        return (w.unsqueeze(-1) * gx).sum(1)

    def rewards(
        self, users_or_weights: Sequence[str] | Tensor, prompt_emb: Tensor | None, item_emb: Tensor
    ) -> Tensor:
        """Scalar rewards r_i of single items (A: -||z - a_i||; B: s cos(z_y, a_i(x))). Shape: (n,)."""
        self._check(item_emb, "item_emb")
        n = item_emb.shape[0]
        w = self.user_weights(users_or_weights, n).to(item_emb.device)
        z = self.f(item_emb)
        if self.config.variant == "A":
            return -(z - self.ideal_points(w)).norm(dim=-1)
        if prompt_emb is None:
            raise ValueError("PAL-B needs prompt embeddings")
        self._check(prompt_emb, "prompt_emb")
        a = self.prompt_points(w, prompt_emb)
        return self.scale() * F.cosine_similarity(z, a, dim=-1, eps=1e-8)

    def logits(
        self,
        users_or_weights: Sequence[str] | Tensor,
        prompt_emb: Tensor | None,
        left_emb: Tensor,
        right_emb: Tensor,
    ) -> Tensor:
        """Two logits [r_left, r_right] for every comparison. Shape: (n, 2)."""
        self._check(left_emb, "left_emb")
        self._check(right_emb, "right_emb")
        if left_emb.shape != right_emb.shape:
            raise ValueError(
                f"left/right embeddings differ in shape: {tuple(left_emb.shape)} vs {tuple(right_emb.shape)}"
            )
        n = left_emb.shape[0]
        w = self.user_weights(users_or_weights, n).to(left_emb.device)
        return torch.stack(
            [self.rewards(w, prompt_emb, left_emb), self.rewards(w, prompt_emb, right_emb)], dim=1
        )

    def user_free_features(
        self, prompt_emb: Tensor | None, left_emb: Tensor, right_emb: Tensor
    ) -> tuple[Tensor, ...]:
        """The parts of :meth:`logits` that do not depend on the user weights.

        With everything but W frozen (new-user fitting) they are computed once, and
        :meth:`logits_from_features` then only mixes the user weights in.

        Returns:
            PAL-A: (z_left, z_right), each (n, d_pref). PAL-B: (z_left, z_right, g(x)) with
            g(x) of shape (n, K, d_pref).
        """
        self._check(left_emb, "left_emb")
        self._check(right_emb, "right_emb")
        if left_emb.shape != right_emb.shape:
            raise ValueError(
                f"left/right embeddings differ in shape: {tuple(left_emb.shape)} vs {tuple(right_emb.shape)}"
            )
        zl, zr = self.f(left_emb), self.f(right_emb)
        if self.config.variant == "A":
            return zl, zr
        if prompt_emb is None:
            raise ValueError("PAL-B needs prompt embeddings")
        self._check(prompt_emb, "prompt_emb")
        return zl, zr, torch.stack([g(prompt_emb) for g in self.g], dim=1)

    def logits_from_features(self, w: Tensor, features: tuple[Tensor, ...]) -> Tensor:
        """Two logits [r_left, r_right] from weights w (n, K) and :meth:`user_free_features`.

        Equals :meth:`logits` (same operations, same order). Shape: (n, 2).
        """
        if self.config.variant == "A":
            zl, zr = features
            a = self.ideal_points(w)
            return torch.stack([-(zl - a).norm(dim=-1), -(zr - a).norm(dim=-1)], dim=1)
        zl, zr, gx = features
        a = (w.unsqueeze(-1) * gx).sum(1)
        s = self.scale()
        return torch.stack(
            [
                s * F.cosine_similarity(zl, a, dim=-1, eps=1e-8),
                s * F.cosine_similarity(zr, a, dim=-1, eps=1e-8),
            ],
            dim=1,
        )

    def forward(
        self,
        users_or_weights: Sequence[str] | Tensor,
        prompt_emb: Tensor | None,
        left_emb: Tensor,
        right_emb: Tensor,
    ) -> Tensor:
        """PAL-A: s = ||z_l - a|| - ||z_r - a|| (n,); PAL-B: logits (n, 2)."""
        lg = self.logits(users_or_weights, prompt_emb, left_emb, right_emb)
        return lg[:, 1] - lg[:, 0] if self.config.variant == "A" else lg

    def loss(
        self,
        users: Sequence[str] | Tensor,
        prompt_emb: Tensor | None,
        left: Tensor,
        right: Tensor,
        label: Tensor,
    ) -> Tensor:
        """The configured loss (hinge for A, CE for B by default)."""
        return preference_loss(self.logits(users, prompt_emb, left, right), label, self.config.loss)

    def prob_right(
        self, users: Sequence[str] | Tensor, prompt_emb: Tensor | None, left: Tensor, right: Tensor
    ) -> Tensor:
        """P(right preferred) = sigmoid(r_r - r_l). Shape: (n,)."""
        lg = self.logits(users, prompt_emb, left, right)
        return torch.sigmoid(lg[:, 1] - lg[:, 0])

    def trainable_parameter_count(self) -> int:
        """Number of parameters with ``requires_grad``."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


@dataclass
class RewardOutput:
    """Output of :meth:`PALRewardModel.as_reward_model`, shaped like a sequence-classification head.

    Args:
        logits: rewards. Shape: (n, 1).
    """

    logits: Tensor


class _FixedUserRewardModel(nn.Module):
    def __init__(self, parent: PALRewardModel, user_id: str | None, weights: Tensor | None) -> None:
        super().__init__()
        self.parent = parent
        self.user_id, self.fixed_weights = user_id, weights

    def forward(self, prompts: Sequence[str], responses: Sequence[str]) -> RewardOutput:
        r = self.parent.reward(prompts, responses, user_id=self.user_id, weights=self.fixed_weights)
        return RewardOutput(logits=r.unsqueeze(-1))  # (n, 1)


class PALRewardModel(nn.Module):
    """A text encoder plus a :class:`PALHead`: scalar personalised rewards for (prompt, response).

    PAL-A embeds ``prompt + response`` jointly; PAL-B embeds prompt and response separately.

    Args:
        encoder: any object with ``dim`` and ``encode(texts) -> Tensor (n, dim)``.
        head: the PAL head (``head.config.d_in`` must equal ``encoder.dim``).

    Example:
        >>> from iclr25.methods.pal import HashedNgramEncoder
        >>> enc = HashedNgramEncoder(dim=16)
        >>> m = PALRewardModel(enc, PALHead(PALConfig(variant="B", k=2, d_in=16, d_pref=8)))
        >>> _ = m.head.users.add_users(["u"], generator=torch.Generator().manual_seed(0))
        >>> m.reward(["a post"], ["a summary"], user_id="u").shape
        torch.Size([1])
    """

    def __init__(self, encoder: Any, head: PALHead) -> None:
        super().__init__()
        if int(encoder.dim) != head.config.d_in:
            raise ValueError(f"encoder dim {encoder.dim} != head d_in {head.config.d_in}")
        self.encoder = encoder
        self.head = head

    @property
    def joint(self) -> bool:
        """Whether items are encoded as prompt + response together (PAL-A)."""
        return self.head.config.variant == "A"

    def embed(self, prompts: Sequence[str], responses: Sequence[str]) -> tuple[Tensor | None, Tensor]:
        """(prompt embeddings or None, item embeddings) as the variant needs them."""
        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        if self.joint:
            return None, self.encoder.encode([p + r for p, r in zip(prompts, responses, strict=True)])
        return self.encoder.encode(list(prompts)), self.encoder.encode(list(responses))

    def reward(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        user_id: str | None = None,
        weights: Tensor | None = None,
    ) -> Tensor:
        """Scalar rewards r_i(x, y) for one user (by id or by explicit simplex weights).

        Returns:
            Shape: (n,).
        """
        if (user_id is None) == (weights is None):
            raise ValueError("pass exactly one of user_id or weights")
        pe, ye = self.embed(prompts, responses)
        dev = next(self.head.parameters()).device
        pe = None if pe is None else pe.to(dev)
        ye = ye.to(dev)
        w = (
            self.head.users.weights(user_id).detach()
            if user_id is not None
            else torch.as_tensor(weights).float().to(dev)
        )
        return self.head.rewards(w, pe, ye)

    def as_reward_model(self, user_id: str | None = None, weights: Tensor | None = None) -> nn.Module:
        """A module ``m(prompts, responses).logits`` of shape (n, 1), like a 1-label classifier head."""
        if (user_id is None) == (weights is None):
            raise ValueError("pass exactly one of user_id or weights")
        if user_id is not None:
            self.head.users.rows([user_id])
        return _FixedUserRewardModel(self, user_id, weights)

    def trainable_parameter_count(self) -> int:
        """Trainable parameters of the head plus the encoder's (if it is an ``nn.Module``)."""
        n = self.head.trainable_parameter_count()
        if isinstance(self.encoder, nn.Module):
            n += sum(p.numel() for p in self.encoder.parameters() if p.requires_grad)
        return n

    def save_pretrained(self, path: str | Path) -> None:
        """Save config, head weights and the user registry to a folder (the encoder is not saved).

        Tensors are stored on the CPU, so a head trained on a GPU loads on any machine.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "pal_config.json").write_text(json.dumps(asdict(self.head.config), indent=1))
        (path / "users.json").write_text(json.dumps(self.head.users.ids))
        state = {k: v.cpu() for k, v in self.head.state_dict().items() if not k.startswith("users.blocks.")}
        state["users.logits"] = (
            self.head.users.logits().detach().cpu() if len(self.head.users) else torch.zeros(0)
        )
        torch.save(state, path / "pal_head.pt")

    @classmethod
    def from_pretrained(cls, path: str | Path, encoder: Any) -> PALRewardModel:
        """Load a model saved with :meth:`save_pretrained`, with the given encoder (head on the CPU)."""
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"model folder {str(path)!r} does not exist")
        config = PALConfig(**json.loads((path / "pal_config.json").read_text()))
        head = PALHead(config)
        state = torch.load(path / "pal_head.pt", map_location="cpu", weights_only=True)
        ids = json.loads((path / "users.json").read_text())
        logits = state.pop("users.logits")
        if ids:
            head.users.add_users(ids, init=logits)
        head.load_state_dict(state, strict=False)
        return cls(encoder, head)
