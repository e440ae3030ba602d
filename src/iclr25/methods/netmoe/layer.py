"""An expert-parallel MoE layer on ``torch.distributed`` with NetMoE sample placement in the combine.

Implements the training-time mechanism of *NetMoE: Accelerating MoE Training through Dynamic
Sample Placement* (Liu et al., ICLR 2025), Sec. 3-4 and Algorithm 1: after gating, every rank
shares its samples' assignment counts ``num``, rank 0 solves the placement (inline, or in a
background thread overlapped with the dispatch and the expert compute) and broadcasts it just
before the combine, and the **combine** All-to-All sends each sample's expert outputs to the
sample's new device, so a sample moves with no extra message. The dispatcher pipeline is
permute -> All-to-All (split sizes first, then payload and metadata) -> grouped expert compute
-> All-to-All toward the new devices -> scatter in fixed slot order, samples ordered by global
id. One code path for gloo (CPU) and NCCL (GPU); the caller chooses the device.

The solver prices the paper's edge weight (Eq. 5/6/10) when ``num_source`` is ``"predicted"``
or ``"oracle"``: this layer's combine plus the next layer's dispatch, which leaves from the
same new device. :class:`ExpertParallelStack` chains blocks so the placement persists from
layer to layer and each block can feed its input to the next block's router (Sec. 3.3).

Residual (``y = h + sum_r p_r E_r(LN h)``): ``"expert_side"`` dispatches ``h`` itself, applies the
replicated norm on the expert side and adds ``h`` once per token (on the slot-0 copy), so the
residual follows the sample at no extra bytes; ``"migrate"`` sends ``h`` to the new device inside
the combine call (``s * S`` extra bytes per moved sample).

:class:`DenseMoE` is the single-process reference with the same parameters and arithmetic.

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .cost import Topology
from .planner import AsyncPlanner
from .solve import Placement, random_placement, solve_two_stage

__all__ = [
    "A2AStats",
    "DenseMoE",
    "ExpertParallelMoE",
    "ExpertParallelStack",
    "all_to_all_v",
    "exchange_counts",
    "init_moe_parameters",
    "probe_all_to_all",
]

PlacementFn = Callable[[np.ndarray, Topology], Placement]


def init_moe_parameters(
    d_model: int, d_ff: int, num_experts: int, generator: torch.Generator
) -> dict[str, torch.Tensor]:
    """Parameters of a full MoE block drawn from ``generator`` (identical on every rank).

    Returns:
        ``gate [d, E]``, ``norm_weight/norm_bias [d]``, ``w1 [E, d, d_ff]``, ``b1 [E, d_ff]``,
        ``w2 [E, d_ff, d]``, ``b2 [E, d]`` (float32).
    """

    def u(*shape: int, fan_in: int) -> torch.Tensor:
        bound = 1.0 / math.sqrt(fan_in)
        return (torch.rand(*shape, generator=generator) * 2 - 1) * bound

    return {
        "gate": u(d_model, num_experts, fan_in=d_model),
        "norm_weight": 1.0 + 0.1 * u(d_model, fan_in=1),
        "norm_bias": 0.1 * u(d_model, fan_in=1),
        "w1": u(num_experts, d_model, d_ff, fan_in=d_model),
        "b1": u(num_experts, d_ff, fan_in=d_model),
        "w2": u(num_experts, d_ff, d_model, fan_in=d_ff),
        "b2": u(num_experts, d_model, fan_in=d_ff),
    }


def _route(x: torch.Tensor, gate: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k routing: expert ids ``[..., k]`` and their renormalised softmax probabilities."""
    logits = x @ gate  # [..., E]
    top_val, top_idx = logits.topk(top_k, dim=-1)  # [..., k]
    return top_idx, torch.softmax(top_val, dim=-1)


def _ffn(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    return F.gelu(x @ w1 + b1) @ w2 + b2


def _capacity_keep(keys: torch.Tensor, experts: torch.Tensor, capacity: int | None) -> torch.Tensor:
    """Keep mask: per expert, the ``capacity`` copies with the smallest global keys (order-free)."""
    keep = torch.ones_like(keys, dtype=torch.bool)
    if capacity is None:
        return keep
    for e in torch.unique(experts).tolist():
        idx = torch.nonzero(experts == e).squeeze(1)
        if idx.numel() > capacity:
            drop = idx[torch.argsort(keys[idx])[capacity:]]
            keep[drop] = False
    return keep


def _capacity(capacity_factor: float | None, copies: int, num_experts: int) -> int | None:
    if capacity_factor is None:
        return None
    return math.ceil(capacity_factor * copies / num_experts)


class DenseMoE(nn.Module):
    """Single-process MoE block ``y = h + sum_r p_r E_r(LN h)``: the reference of :class:`ExpertParallelMoE`.

    Args:
        d_model: model width d.
        d_ff: expert hidden width.
        num_experts: E.
        top_k: k experts per token.
        generator: draws the parameters (see :func:`init_moe_parameters`).
        norm: apply the pre-norm LayerNorm (the gate and experts see ``LN h``).
        capacity_factor: None for dropless; else each expert keeps
            ``ceil(cf * I S k / E)`` copies, dropping by global token id.

    Shape:
        h ``[I, S, d]`` -> y ``[I, S, d]``, expert ids ``[I, S, k]``.

    Example:
        >>> moe = DenseMoE(8, 16, 4, 2, generator=torch.Generator().manual_seed(0))
        >>> y, ids, probs = moe(torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(1)))
        >>> tuple(y.shape), tuple(ids.shape)
        ((2, 3, 8), (2, 3, 2))
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        num_experts: int,
        top_k: int = 2,
        *,
        generator: torch.Generator,
        norm: bool = True,
        capacity_factor: float | None = None,
    ) -> None:
        super().__init__()
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"top_k must lie in [1, num_experts={num_experts}], got {top_k}")
        p = init_moe_parameters(d_model, d_ff, num_experts, generator)
        self.gate = nn.Parameter(p["gate"])
        self.norm = nn.LayerNorm(d_model) if norm else None
        if self.norm is not None:
            with torch.no_grad():
                self.norm.weight.copy_(p["norm_weight"])
                self.norm.bias.copy_(p["norm_bias"])
        self.w1, self.b1 = nn.Parameter(p["w1"]), nn.Parameter(p["b1"])
        self.w2, self.b2 = nn.Parameter(p["w2"]), nn.Parameter(p["b2"])
        self.num_experts, self.top_k, self.capacity_factor = num_experts, top_k, capacity_factor

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns ``(y, expert_ids, probs)`` (ids and probs ``[I, S, k]``)."""
        n_s, seq, d = h.shape
        x = self.norm(h) if self.norm is not None else h
        ids, probs = _route(x, self.gate, self.top_k)  # [I, S, k]
        xf = x.reshape(n_s * seq, d)  # [T, d]
        flat_ids = ids.reshape(-1)  # [T*k] copy order (token, slot)
        keys = torch.arange(flat_ids.numel(), device=h.device)  # global key: (sample*S + pos)*k + slot
        cap = _capacity(self.capacity_factor, flat_ids.numel(), self.num_experts)
        keep = _capacity_keep(keys, flat_ids, cap)
        out = xf.new_zeros(flat_ids.numel(), d)  # [T*k, d]
        tok = keys // self.top_k
        for e in range(self.num_experts):
            idx = torch.nonzero((flat_ids == e) & keep).squeeze(1)
            if idx.numel():
                out = out.index_copy(
                    0, idx, _ffn(xf[tok[idx]], self.w1[e], self.b1[e], self.w2[e], self.b2[e])
                )
        contrib = (out * probs.reshape(-1, 1)).reshape(n_s, seq, self.top_k, d)  # [I, S, k, d]
        # Accumulate in the expert-parallel layer's fixed order: (h + slot 0) + slot 1 + ...
        y = h + contrib[:, :, 0]
        for r in range(1, self.top_k):
            y = y + contrib[:, :, r]
        return y, ids, probs


class _AllToAll(torch.autograd.Function):
    """Differentiable ``all_to_all_single``: the backward swaps the split sizes."""

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, out_splits: list[int], in_splits: list[int], group: Any
    ) -> torch.Tensor:
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits, group=ctx.group)
        return back, None, None, None


def exchange_counts(send_counts: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Exchange split sizes before a payload All-to-All: ``recv[j]`` = rows rank j sends here.

    Args:
        send_counts: int64 ``[J]``, rows this rank sends to each rank.
        group: the process group.

    Returns:
        int64 ``[J]`` rows this rank receives from each rank.
    """
    recv = torch.empty_like(send_counts)
    dist.all_to_all_single(recv, send_counts.contiguous(), group=group)
    return recv


def all_to_all_v(
    x: torch.Tensor,
    send_splits: list[int],
    recv_splits: list[int] | None = None,
    group: Any = None,
) -> torch.Tensor:
    """Uneven, differentiable All-to-All; split sizes are exchanged (and checked) first.

    Args:
        x: rows to send, grouped by destination rank.
        send_splits: rows to each rank (sums to ``len(x)``).
        recv_splits: rows expected from each rank; if given, every rank checks them against
            what its peers announce, and all ranks raise together on any mismatch (no hang).
        group: the process group.

    Returns:
        The received rows, grouped by source rank.

    Raises:
        ValueError: the split sizes disagree across ranks, or do not sum to ``len(x)``.
    """
    world = dist.get_world_size(group)
    if len(send_splits) != world or sum(send_splits) != x.shape[0]:
        raise ValueError(f"send_splits {send_splits} do not match {world} ranks and {x.shape[0]} rows")
    announced = exchange_counts(torch.tensor(send_splits, dtype=torch.int64, device=x.device), group)
    bad = torch.zeros(1, dtype=torch.int64, device=x.device)
    if recv_splits is not None:
        bad += int(announced.tolist() != list(recv_splits))
    dist.all_reduce(bad, group=group)  # every rank learns of any mismatch before the payload call
    if int(bad.item()):
        raise ValueError(
            f"All-to-All split sizes disagree across ranks (rank {dist.get_rank(group)} expected "
            f"{recv_splits}, peers announce {announced.tolist()})"
        )
    return _AllToAll.apply(x, announced.tolist(), list(send_splits), group)


def probe_all_to_all(group: Any = None, device: torch.device | str = "cpu") -> bool:
    """Whether the backend supports uneven ``all_to_all_single`` (rank r sends r+1 rows to everyone).

    All ranks of ``group`` must call it. Returns True when the received rows are as expected.
    """
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    x = torch.full(((rank + 1) * world, 1), float(rank), device=device)
    out = torch.empty((sum(r + 1 for r in range(world)), 1), device=device)
    try:
        dist.all_to_all_single(out, x, [r + 1 for r in range(world)], [rank + 1] * world, group=group)
    except RuntimeError:
        return False
    want = torch.cat([torch.full((r + 1, 1), float(r)) for r in range(world)]).to(device)
    return bool(torch.equal(out, want))


@dataclass
class A2AStats:
    """What one forward of :class:`ExpertParallelMoE` moved and decided.

    Args:
        placement: the broadcast :class:`Placement` of the global batch.
        origin: ``[I]`` rank holding each sample before the layer.
        num: ``[I, J]`` counts the placement was solved on (this layer's routing, plus the next
            layer's predicted or true routing when ``num_source`` says so).
        routed: ``[I, J]`` this layer's own assignment counts (what its All-to-Alls move).
        dispatch_links: ``[J, J]`` payload bytes per link of the dispatch (measured counts).
        combine_links: ``[J, J]`` payload bytes per link of the combine (measured counts).
        meta_bytes: bytes of metadata this rank sent (ids, positions, slots, gate probabilities).
        solve_s: wall-clock seconds rank 0 spent in the solver.
        dropped: token copies dropped by the capacity on this rank's experts.
        extra: ``solve_wait_s`` (this rank's wait for the background solve) and ``a2a_s`` (this
            rank's forward wall-clock in the dispatch and combine All-to-Alls, counts included).
    """

    placement: Placement
    origin: np.ndarray
    num: np.ndarray
    routed: np.ndarray
    dispatch_links: np.ndarray
    combine_links: np.ndarray
    meta_bytes: int = 0
    solve_s: float = 0.0
    dropped: int = 0
    extra: dict[str, float] = field(default_factory=dict)


class ExpertParallelMoE(nn.Module):
    """Expert-parallel MoE block with NetMoE's dynamic sample placement folded into the combine.

    Every rank of ``ep_group`` holds ``E / J`` experts (rank r: experts ``r E/J .. (r+1) E/J - 1``)
    and replicas of the gate and norm (their gradients need :meth:`sync_replicated_grads`).

    Args:
        d_model: d.
        d_ff: expert hidden width.
        num_experts: E (divisible by the world size J).
        top_k: k.
        topology: the cluster (``nodes * gpus_per_node`` must equal J).
        ep_group: the expert-parallel process group (default: the world).
        placement: ``"netmoe"`` (:func:`solve_two_stage`), ``"identity"``, ``"random"`` or a
            callable ``(num [I, J], topology) -> Placement``.
        num_source: what the solver prices (the paper's edge weight, Eq. 5/6/10, is this layer's
            combine plus the next layer's dispatch): ``"current"`` (this layer's routing only),
            ``"predicted"`` (plus the next layer's router applied to this layer's input, Sec. 3.3;
            the next layer is set by :class:`ExpertParallelStack`), ``"oracle"`` (plus the true
            next-layer counts passed as ``num_next``), or a callable
            ``(h, sample_ids) -> num rows [I_loc, J]`` that replaces the counts.
        residual: ``"expert_side"`` or ``"migrate"``.
        norm: apply the replicated pre-norm LayerNorm.
        capacity_factor: None for dropless; else drop by global token id beyond
            ``ceil(cf * I S k / E)`` copies per expert.
        generator: draws the parameters of all E experts (same seed on every rank).
        seed: seed of ``placement="random"`` (combined with a step counter).
        overlap_solve: run rank 0's solve in a background thread (:class:`AsyncPlanner`) while
            the dispatch All-to-All and the expert compute run, and wait for it just before the
            combine, the first step that needs the placement (Sec. 4). The placement, outputs and
            byte counts are the same as with the inline solve; ``stats.extra["solve_wait_s"]`` is
            the time rank 0 still waited at the combine.

    Shape:
        h ``[I_loc, S, d]``, sample_ids ``[I_loc]`` -> y ``[I_loc, S, d]``, new ids ``[I_loc]``.

    Example:
        >>> moe = ExpertParallelMoE(8, 16, 4, topology=Topology(2, 2))  # doctest: +SKIP
        >>> y, new_ids, stats = moe(h, ids)  # inside an initialised 4-rank group  # doctest: +SKIP
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        num_experts: int,
        top_k: int = 2,
        *,
        topology: Topology,
        ep_group: Any = None,
        placement: Literal["netmoe", "identity", "random"] | PlacementFn = "netmoe",
        num_source: Literal["current", "predicted", "oracle"]
        | Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = "current",
        residual: Literal["expert_side", "migrate"] = "expert_side",
        norm: bool = True,
        capacity_factor: float | None = None,
        generator: torch.Generator | None = None,
        seed: int = 0,
        overlap_solve: bool = False,
    ) -> None:
        super().__init__()
        if not dist.is_initialized():
            raise RuntimeError("ExpertParallelMoE needs an initialised torch.distributed process group")
        world = dist.get_world_size(ep_group)
        topology.check_world(world)
        if num_experts % world:
            raise ValueError(f"num_experts={num_experts} is not divisible by the world size {world}")
        if not 1 <= top_k <= num_experts:
            raise ValueError(f"top_k must lie in [1, num_experts={num_experts}], got {top_k}")
        if residual not in ("expert_side", "migrate"):
            raise ValueError(f"residual must be 'expert_side' or 'migrate', got {residual!r}")
        if not (callable(num_source) or num_source in ("current", "predicted", "oracle")):
            raise ValueError(
                f"num_source must be 'current', 'predicted', 'oracle' or a callable, got {num_source!r}"
            )
        if not (callable(placement) or placement in ("netmoe", "identity", "random")):
            raise ValueError(
                f"placement must be 'netmoe', 'identity', 'random' or a callable, got {placement!r}"
            )
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        p = init_moe_parameters(d_model, d_ff, num_experts, gen)
        self.rank, self.world, self.group = dist.get_rank(ep_group), world, ep_group
        self.local_experts = num_experts // world
        lo, hi = self.rank * self.local_experts, (self.rank + 1) * self.local_experts
        self.gate = nn.Parameter(p["gate"])
        self.norm = nn.LayerNorm(d_model) if norm else None
        if self.norm is not None:
            with torch.no_grad():
                self.norm.weight.copy_(p["norm_weight"])
                self.norm.bias.copy_(p["norm_bias"])
        self.w1, self.b1 = nn.Parameter(p["w1"][lo:hi].clone()), nn.Parameter(p["b1"][lo:hi].clone())
        self.w2, self.b2 = nn.Parameter(p["w2"][lo:hi].clone()), nn.Parameter(p["b2"][lo:hi].clone())
        self.register_buffer(
            "expert_device",
            torch.arange(num_experts, dtype=torch.int64) // self.local_experts,
            persistent=False,
        )
        self.d_model, self.num_experts, self.top_k = d_model, num_experts, top_k
        self.topology, self.placement, self.num_source = topology, placement, num_source
        self.residual, self.capacity_factor, self.seed = residual, capacity_factor, seed
        self._step = 0
        self.overlap_solve = bool(overlap_solve)
        self._planner: AsyncPlanner | None = None  # rank 0's background solver, made on first use
        self.__dict__["next_layer"] = None  # set by ExpertParallelStack; not a submodule

    def route_counts(self, h: torch.Tensor) -> torch.Tensor:
        """Device counts ``[I_loc, J]`` of this layer's router applied to ``h [I_loc, S, d]`` (no grad)."""
        with torch.no_grad():
            x = self.norm(h) if self.norm is not None else h
            ids, _ = _route(x, self.gate, self.top_k)  # [I_loc, S, k]
            dev = self.expert_device[ids].reshape(h.shape[0], -1)  # [I_loc, S*k]
            out = torch.zeros(h.shape[0], self.world, dtype=torch.int64, device=h.device)
            return out.scatter_add_(1, dev, torch.ones_like(dev))

    # -- helpers -------------------------------------------------------------------------------
    def replicated_parameters(self) -> list[nn.Parameter]:
        """Gate and norm parameters (replicated on every rank, data-parallel gradients)."""
        out = [self.gate]
        if self.norm is not None:
            out += [self.norm.weight, self.norm.bias]
        return out

    def sync_replicated_grads(self) -> None:
        """All-reduce (sum) the gradients of the replicated gate and norm across the group."""
        for prm in self.replicated_parameters():
            if prm.grad is not None:
                dist.all_reduce(prm.grad, group=self.group)

    def _solve(self, num: np.ndarray, origin: np.ndarray, override: str | None = None) -> Placement:
        how = self.placement if override is None else override
        if callable(how):
            return how(num, self.topology)
        if how == "netmoe":
            return solve_two_stage(num, self.topology)
        if how == "random":
            return random_placement(
                num.shape[0], self.topology, np.random.default_rng([self.seed, self._step])
            )
        return Placement(origin.copy())  # identity: every sample stays where it is

    def _get_planner(self) -> AsyncPlanner:
        if self._planner is None:
            self._planner = AsyncPlanner(self.topology)
        return self._planner

    def _solve_inline(
        self, num: np.ndarray, origin: np.ndarray, override: str | None
    ) -> tuple[Placement | None, str, float, float]:
        """Rank 0's inline solve: ``(placement or None, error, solve seconds, wait seconds)``."""
        t0 = time.perf_counter()
        try:
            pl = self._solve(num, origin, override)
            pl.validate(self.topology)
        except ValueError as err:  # every rank raises after the broadcast instead of hanging
            return None, str(err), time.perf_counter() - t0, 0.0
        return pl, "", time.perf_counter() - t0, 0.0

    def _collect_planned(self) -> tuple[Placement | None, str, float, float]:
        """Rank 0 at the combine: wait for the background solve (Sec. 4's overlap)."""
        planner = self._get_planner()
        t0 = time.perf_counter()
        try:
            pl = planner.wait()
        except RuntimeError as err:
            return None, str(err), 0.0, time.perf_counter() - t0
        return pl, "", planner.last_solve_s, time.perf_counter() - t0

    def _share_plan(
        self, result: tuple[Placement | None, str, float, float] | None, n_glob: int, dev: torch.device
    ) -> tuple[Placement, float, float]:
        """Broadcast rank 0's placement; all ranks validate it or raise together."""
        plan = torch.full((n_glob,), -1, dtype=torch.int64, device=dev)
        error, solve_s, wait_s = "", 0.0, 0.0
        if result is not None:
            pl, error, solve_s, wait_s = result
            if pl is not None:
                plan = torch.as_tensor(pl.device_of_sample, device=dev)
        dist.broadcast(plan, group=self.group, group_src=0)  # group rank 0 of ep_group
        if int(plan.min()) < 0:
            raise ValueError(f"placement failed on rank 0: {error or 'invalid placement'}")
        placement = Placement(plan.cpu().numpy())
        placement.validate(self.topology)
        return placement, solve_s, wait_s

    def _all_gather(self, t: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(t) for _ in range(self.world)]
        dist.all_gather(parts, t.contiguous(), group=self.group)
        return torch.cat(parts)

    # -- forward -------------------------------------------------------------------------------
    def forward(
        self,
        h: torch.Tensor,
        sample_ids: torch.Tensor,
        *,
        num_next: np.ndarray | None = None,
        placement: str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, A2AStats]:
        """Gate, place, dispatch, compute, combine toward the new devices.

        Args:
            h: this rank's samples ``[I_loc, S, d]``.
            sample_ids: their global ids ``[I_loc]`` (int64; all ranks together hold ``0..I-1``).
            num_next: with ``num_source="oracle"``, the next layer's true counts ``[I, J]`` in
                global id order (the same on every rank); None for the last layer.
            placement: overrides the layer's ``placement`` for this call (e.g. ``"identity"``).

        Returns:
            ``(y, new_sample_ids, stats)``: the block output of the samples now on this rank, in
            ascending global id order, their ids, and an :class:`A2AStats`.
        """
        n_loc, seq, d = h.shape
        k, world, rank, dev = self.top_k, self.world, self.rank, h.device
        sizes = self._all_gather(torch.tensor([n_loc, seq], dtype=torch.int64, device=dev)).view(world, 2)
        if not bool((sizes == sizes[0]).all()):
            raise ValueError(f"every rank must hold the same [I_loc, S]; got {sizes.tolist()}")
        x = self.norm(h) if self.norm is not None else h
        ids, probs = _route(x, self.gate, k)  # [I_loc, S, k]
        copy_dev = self.expert_device[ids]  # [I_loc, S, k]
        routed_loc = torch.zeros(n_loc, world, dtype=torch.int64, device=dev)
        routed_loc.scatter_add_(1, copy_dev.reshape(n_loc, -1), torch.ones_like(copy_dev.reshape(n_loc, -1)))
        nxt = self.__dict__["next_layer"]
        if callable(self.num_source):
            num_loc = self.num_source(h, sample_ids).to(dev, torch.int64)  # [I_loc, J]
        elif self.num_source == "predicted" and nxt is not None:
            num_loc = routed_loc + nxt.route_counts(h)  # Sec. 3.3: this input through the next router
        else:
            num_loc = routed_loc

        # Share the num rows; rank 0 solves and broadcasts one placement.
        all_ids = self._all_gather(sample_ids.to(dev, torch.int64)).cpu().numpy()  # [I]
        both = self._all_gather(torch.cat([num_loc, routed_loc], 1)).cpu().numpy()  # [I, 2J]
        n_glob = n_loc * world
        if not np.array_equal(np.sort(all_ids), np.arange(n_glob)):
            raise ValueError("sample_ids across ranks must be a permutation of 0..I-1")
        num = np.empty((n_glob, world), dtype=np.int64)
        routed = np.empty((n_glob, world), dtype=np.int64)
        num[all_ids], routed[all_ids] = both[:, :world], both[:, world:]
        if self.num_source == "oracle" and num_next is not None:
            if np.shape(num_next) != (n_glob, world):
                raise ValueError(f"num_next must have shape [{n_glob}, {world}], got {np.shape(num_next)}")
            num = num + np.asarray(num_next, dtype=np.int64)
        origin = np.empty(n_glob, dtype=np.int64)
        origin[all_ids] = np.repeat(np.arange(world), n_loc)
        cost_num = num
        if self.residual == "migrate":  # the residual rows act as S more copies at the origin
            cost_num = num.copy()
            cost_num[np.arange(n_glob), origin] += seq
        result = None  # rank 0: (placement or None, error, solve s, wait s)
        if rank == 0 and self.overlap_solve:  # solve in the background while dispatch and experts run
            planner = self._get_planner()
            planner.discard()  # a result left by a step that raised before its combine is stale
            planner.submit(cost_num, solver=lambda n, _t: self._solve(n, origin, placement))
        elif rank == 0:
            result = self._solve_inline(cost_num, origin, placement)

        # Dispatch: copies in (sample, token, slot) order, stably grouped by destination rank.
        flat_dev = copy_dev.reshape(-1)  # [I_loc*S*k]
        order = torch.argsort(flat_dev, stable=True)
        send_counts = torch.bincount(flat_dev, minlength=world)
        tok = order // k  # local token index of each copy
        send_h = h.reshape(-1, d)[tok]  # [C, d]
        send_p = probs.reshape(-1)[order]  # [C]
        meta = torch.stack(
            [sample_ids.to(dev)[order // (seq * k)], (order // k) % seq, order % k, ids.reshape(-1)[order]], 1
        )  # [C, 4]: global sample id, position, slot, expert
        splits = send_counts.tolist()
        t_a2a = time.perf_counter()  # forward wall-clock of the All-to-Alls (counts + payload)
        rsplits = exchange_counts(send_counts, self.group).tolist()  # split sizes first
        recv_h = _AllToAll.apply(send_h, rsplits, splits, self.group)
        recv_p = _AllToAll.apply(send_p, rsplits, splits, self.group)
        recv_meta = _AllToAll.apply(meta, rsplits, splits, self.group)
        a2a_s = time.perf_counter() - t_a2a
        disp_bytes = send_counts * d * h.element_size()

        # Expert side: replicated norm, grouped expert compute, drop by global key if capacitated.
        xe = self.norm(recv_h) if self.norm is not None else recv_h
        keys = (recv_meta[:, 0] * seq + recv_meta[:, 1]) * k + recv_meta[:, 2]
        cap = _capacity(self.capacity_factor, n_glob * seq * k, self.num_experts)
        keep = _capacity_keep(keys, recv_meta[:, 3], cap)
        out = xe.new_zeros(recv_h.shape)
        for le in range(self.local_experts):
            e = rank * self.local_experts + le
            idx = torch.nonzero((recv_meta[:, 3] == e) & keep).squeeze(1)
            if idx.numel():
                y_e = _ffn(xe[idx], self.w1[le], self.b1[le], self.w2[le], self.b2[le])
                out = out.index_copy(0, idx, y_e)
        out = out * recv_p[:, None]
        if self.residual == "expert_side":
            out = out + recv_h * (recv_meta[:, 2:3] == 0).to(recv_h.dtype)  # residual once, on slot 0
        rows, rmeta = out, recv_meta[:, :3]
        if self.residual == "migrate":
            res_meta = torch.stack(
                [
                    sample_ids.to(dev).repeat_interleave(seq),
                    torch.arange(seq, device=dev).repeat(n_loc),
                    torch.full((n_loc * seq,), k, dtype=torch.int64, device=dev),
                ],
                1,
            )  # [I_loc*S, 3]: the residual rows, slot k
            rows = torch.cat([rows, h.reshape(-1, d)])
            rmeta = torch.cat([rmeta, res_meta])

        # The placement is needed from here on: collect it (waiting for the background solve if
        # overlapped) and broadcast rank 0's decision; every rank raises together on a failure.
        if rank == 0 and self.overlap_solve:
            result = self._collect_planned()
        placement_obj, solve_s, wait_s = self._share_plan(result, n_glob, dev)
        plan_t = torch.as_tensor(placement_obj.device_of_sample, device=dev)
        self._step += 1

        # Combine toward each sample's new device (the placement acts here: no extra message).
        dest = plan_t[rmeta[:, 0]]
        corder = torch.argsort(dest, stable=True)
        comb_counts = torch.bincount(dest, minlength=world)
        csplits = comb_counts.tolist()
        t_a2a = time.perf_counter()
        crsplits = exchange_counts(comb_counts, self.group).tolist()
        got = _AllToAll.apply(rows[corder], crsplits, csplits, self.group)
        got_meta = _AllToAll.apply(rmeta[corder], crsplits, csplits, self.group)
        a2a_s += time.perf_counter() - t_a2a
        comb_bytes = comb_counts * d * h.element_size()

        new_ids = torch.as_tensor(placement_obj.samples_on(rank), device=dev)
        lut = torch.full((n_glob,), -1, dtype=torch.int64, device=dev)
        lut[new_ids] = torch.arange(new_ids.numel(), device=dev)
        nslots = k + (self.residual == "migrate")
        slot_idx = (lut[got_meta[:, 0]] * seq + got_meta[:, 1]) * nslots + got_meta[:, 2]
        buf = got.new_zeros(new_ids.numel() * seq * nslots, d).index_copy(0, slot_idx, got)
        slots = buf.view(new_ids.numel(), seq, nslots, d)  # [I_new, S, slots, d]
        y = slots[:, :, 0]
        for r in range(1, nslots):  # fixed slot order, independent of arrival order
            y = y + slots[:, :, r]

        # Per-link byte counters from the measured split sizes (payload only).
        links_d = self._all_gather(disp_bytes.view(1, -1)).cpu().numpy().astype(np.float64)
        links_c = self._all_gather(comb_bytes.view(1, -1)).cpu().numpy().astype(np.float64)
        meta_bytes = int(meta.numel() * meta.element_size() + send_p.numel() * send_p.element_size())
        meta_bytes += int(rmeta.numel() * rmeta.element_size())
        stats = A2AStats(
            placement=placement_obj,
            origin=origin,
            num=num,
            routed=routed,
            dispatch_links=links_d,
            combine_links=links_c,
            meta_bytes=meta_bytes,
            solve_s=solve_s,
            dropped=int((~keep).sum()),
            extra={"solve_wait_s": wait_s, "a2a_s": a2a_s},
        )
        return y, new_ids, stats


class ExpertParallelStack(nn.Module):
    """Consecutive :class:`ExpertParallelMoE` blocks whose sample placement persists across layers.

    Layer l dispatches from the devices where layer l-1's combine put the samples, so the
    placement chosen at layer l prices layer l's combine and layer l+1's dispatch together (the
    paper's edge weight, Eq. 5/6/10). Each layer knows the next one, so ``num_source="predicted"``
    feeds a layer's input through the next layer's router (Sec. 3.3). With ``"oracle"`` the stack
    first runs a gradient-free pass with every sample left in place to record every layer's true
    routing (placement never changes outputs), then the placed pass.

    Args:
        layers: the blocks, in order (same ``topology`` and process group).

    Shape:
        h ``[I_loc, S, d]``, sample_ids ``[I_loc]`` -> y ``[I_loc, S, d]``, new ids ``[I_loc]``,
        one :class:`A2AStats` per layer.
    """

    def __init__(self, layers: list[ExpertParallelMoE]) -> None:
        super().__init__()
        if not layers:
            raise ValueError("an ExpertParallelStack needs at least one layer")
        self.layers = nn.ModuleList(layers)
        for cur, nxt in itertools.pairwise(layers):
            cur.__dict__["next_layer"] = nxt
        layers[-1].__dict__["next_layer"] = None

    def sync_replicated_grads(self) -> None:
        """All-reduce the replicated gate and norm gradients of every layer."""
        for layer in self.layers:
            layer.sync_replicated_grads()

    def forward(
        self, h: torch.Tensor, sample_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, list[A2AStats]]:
        """Run the layers; returns ``(y, sample ids now on this rank, stats per layer)``."""
        oracle: list[np.ndarray | None] = [None] * len(self.layers)
        if any(layer.num_source == "oracle" for layer in self.layers):
            with torch.no_grad():
                x, ids = h, sample_ids
                counts = []
                for layer in self.layers:
                    x, ids, st = layer(x, ids, placement="identity")
                    counts.append(st.routed)
            oracle = [*counts[1:], None]
        stats = []
        for layer, nxt in zip(self.layers, oracle, strict=True):
            h, sample_ids, st = layer(h, sample_ids, num_next=nxt)
            stats.append(st)
        return h, sample_ids, stats
