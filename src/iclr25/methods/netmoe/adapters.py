"""NetMoE placement for a real MoE stack: an adapter for Megatron-core's All-to-All token dispatcher.

*NetMoE: Accelerating MoE Training through Dynamic Sample Placement* (Liu et al., ICLR 2025,
Sec. 3-4, Algorithm 1) needs, per MoE layer, the assignment counts ``num[i, j]`` of every sample
``i`` of the expert-parallel batch on every device ``j``; it returns a balanced sample placement
that the layer's combine All-to-All then carries out. This module reads those counts from what
Megatron-core's ``MoEAlltoAllTokenDispatcher`` holds at dispatch time and runs the same solver
as the rest of the package:

- the routing map, a bool tensor ``[tokens, experts]`` (or, without it, the router's ``probs``
  of the same shape, zero for experts not chosen), where Megatron lays the local tokens out
  sequence-first (hidden states ``[S, B, H]`` flattened, so token ``t = s * B + b`` belongs to
  sample ``b`` of the micro-batch);
- the expert-parallel layout: ``ep_size`` ranks, ``ranks_per_node`` of them per node, and
  ``num_experts`` experts, rank ``r`` holding the contiguous block
  ``r * E / ep_size .. (r + 1) * E / ep_size - 1`` (Megatron's ``local_expert_indices``).

:func:`routing_to_counts` turns one rank's routing map into ``[B, ep_size]`` counts;
:func:`plan_expert_parallel` and :func:`plan_from_routing_maps` solve the placement of the whole
expert-parallel batch (``I = B * ep_size`` samples, rank-major ids ``rank * B + b``) and return a
:class:`ExpertParallelPlan`: the device of every sample, the sample permutation, the destination
rank of every local token, and the expert-to-rank map the counts were priced with (NetMoE moves
samples, never experts). :func:`register_megatron_hook` installs a :class:`MegatronPlacementHook`
that runs all of this before every dispatch of a dispatcher object.

What it does not do: it does not rewire Megatron's combine. Carrying the placement out means
sending each token's combine output to ``plan.token_destinations(rank)`` instead of back to its
origin, and moving labels and the rest of the step with the sample; that is a change inside
Megatron's ``token_unpermutation``/``token_combine`` and its data loader, left to the user.

Megatron-core is optional and GPU-oriented, and it is never imported at module load. Everything
here works on plain tensors and plain objects with Megatron's attribute names, which is how it
is tested: against a fake dispatcher, **not** against a real Megatron-core install.

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .cost import Topology
from .planner import AsyncPlanner
from .solve import Placement, solve_two_stage

__all__ = [
    "ExpertParallelLayout",
    "ExpertParallelPlan",
    "MegatronPlacementHook",
    "load_megatron_dispatcher_class",
    "plan_expert_parallel",
    "plan_from_routing_maps",
    "register_megatron_hook",
    "routing_to_counts",
]

Solver = Callable[[np.ndarray, Topology], Placement]

#: The optional dependency behind the adapter (GPU-oriented; not installed by this project).
MEGATRON_HINT = "pip install megatron-core (GPU stack; needed only to check against the real class)"


def load_megatron_dispatcher_class() -> type:
    """Import Megatron-core's ``MoEAlltoAllTokenDispatcher`` on demand.

    The adapter never needs it (it duck-types the dispatcher); use it to check that an object is
    the real class.

    Raises:
        ImportError: Megatron-core is not installed (the message says how to install it).
    """
    try:
        mod = importlib.import_module("megatron.core.transformer.moe.token_dispatcher")
    except ImportError as err:
        raise ImportError(f"megatron-core is not installed; {MEGATRON_HINT}") from err
    return mod.MoEAlltoAllTokenDispatcher


@dataclass(frozen=True)
class ExpertParallelLayout:
    """The expert-parallel group as NetMoE sees it.

    Args:
        ep_size: J, ranks of the expert-parallel group.
        ranks_per_node: G, of those ranks per node (``ep_size`` must be a multiple of it).
        num_experts: E, divisible by ``ep_size``; rank ``r`` holds a contiguous block of ``E / J``.

    Example:
        >>> lay = ExpertParallelLayout(ep_size=4, ranks_per_node=2, num_experts=8)
        >>> lay.expert_to_rank().tolist(), lay.topology().nodes
        ([0, 0, 1, 1, 2, 2, 3, 3], 2)
    """

    ep_size: int
    ranks_per_node: int
    num_experts: int

    def __post_init__(self) -> None:
        for name in ("ep_size", "ranks_per_node", "num_experts"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"ExpertParallelLayout.{name} must be a positive integer, got {v!r}")
        if self.ep_size % self.ranks_per_node:
            raise ValueError(
                f"ep_size={self.ep_size} is not a multiple of ranks_per_node={self.ranks_per_node}"
            )
        if self.num_experts % self.ep_size:
            raise ValueError(f"num_experts={self.num_experts} is not divisible by ep_size={self.ep_size}")

    @property
    def num_local_experts(self) -> int:
        """E / J."""
        return self.num_experts // self.ep_size

    def expert_to_rank(self) -> np.ndarray:
        """``rank[e]``: the expert-parallel rank holding expert ``e`` (int64 ``[E]``)."""
        return np.arange(self.num_experts, dtype=np.int64) // self.num_local_experts

    def topology(self, **bandwidths: Any) -> Topology:
        """The :class:`Topology` ``(J / G) x G``; keyword arguments go to it (bandwidths, bytes)."""
        return Topology(self.ep_size // self.ranks_per_node, self.ranks_per_node, **bandwidths)

    @classmethod
    def from_dispatcher(cls, dispatcher: Any, ranks_per_node: int) -> ExpertParallelLayout:
        """Read the layout from an object with Megatron's dispatcher attributes.

        Reads ``ep_size``, ``num_experts`` (or ``config.num_moe_experts``), and checks
        ``num_local_experts`` and ``local_expert_indices`` when present, and ``tp_size``.

        Raises:
            TypeError: an attribute is missing.
            ValueError: the attributes disagree, or expert tensor parallelism is on (``tp_size >
                1``: each rank then routes only a slice of a sample's tokens).
        """
        try:
            ep_size = int(dispatcher.ep_size)
        except AttributeError as err:
            raise TypeError(f"{type(dispatcher).__name__} has no 'ep_size': not a token dispatcher") from err
        num_experts = getattr(dispatcher, "num_experts", None)
        if num_experts is None:
            num_experts = getattr(getattr(dispatcher, "config", None), "num_moe_experts", None)
        if num_experts is None:
            raise TypeError(
                f"{type(dispatcher).__name__} has neither 'num_experts' nor 'config.num_moe_experts'"
            )
        if int(getattr(dispatcher, "tp_size", 1)) != 1:
            raise ValueError(
                f"expert tensor parallelism (tp_size={dispatcher.tp_size}) is not supported: "
                "NetMoE's counts need every token of a sample on one rank"
            )
        layout = cls(ep_size, int(ranks_per_node), int(num_experts))
        local = getattr(dispatcher, "num_local_experts", None)
        if local is not None and int(local) != layout.num_local_experts:
            raise ValueError(
                f"num_local_experts={local} disagrees with num_experts / ep_size = {layout.num_local_experts}"
            )
        idx = getattr(dispatcher, "local_expert_indices", None)
        if idx is not None:
            idx = [int(i) for i in idx]
            start = idx[0] if idx else 0
            if (
                idx != list(range(start, start + layout.num_local_experts))
                or start % layout.num_local_experts
            ):
                raise ValueError(
                    f"local_expert_indices {idx} are not one contiguous block of {layout.num_local_experts}"
                )
        return layout


def routing_to_counts(
    routing_map: torch.Tensor | None,
    layout: ExpertParallelLayout,
    *,
    micro_batch: int,
    probs: torch.Tensor | None = None,
    sequence_first: bool = True,
) -> np.ndarray:
    """One rank's assignment counts ``num[b, j]``: token copies of its sample ``b`` routed to rank ``j``.

    Args:
        routing_map: bool ``[T, E]`` (Megatron's ``routing_map``), ``T = S * B``; None to use ``probs``.
        layout: the expert-parallel layout.
        micro_batch: B, samples on this rank.
        probs: ``[T, E]`` router probabilities, zero where an expert was not chosen (used only
            when ``routing_map`` is None).
        sequence_first: tokens ordered ``t = s * B + b`` (Megatron's ``[S, B, H]``); False for
            ``t = b * S + s``.

    Returns:
        int64 ``[B, J]``.

    Raises:
        ValueError: shapes that do not fit ``layout`` and ``micro_batch``, or no routing given.

    Example:
        >>> lay = ExpertParallelLayout(2, 1, 4)
        >>> rm = torch.tensor([[1, 0, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)  # S = 1, B = 2
        >>> routing_to_counts(rm, lay, micro_batch=2).tolist()
        [[1, 1], [0, 2]]
    """
    if routing_map is None:
        if probs is None:
            raise ValueError("pass routing_map or probs")
        routing_map = probs != 0
    if routing_map.dim() != 2 or routing_map.shape[1] != layout.num_experts:
        raise ValueError(
            f"routing_map must have shape [tokens, {layout.num_experts}], got {tuple(routing_map.shape)}"
        )
    if micro_batch < 1 or routing_map.shape[0] % micro_batch:
        raise ValueError(f"{routing_map.shape[0]} tokens do not split into micro_batch={micro_batch} samples")
    seq = routing_map.shape[0] // micro_batch
    rm = routing_map.detach().to("cpu", torch.int64)
    per = rm.view(seq, micro_batch, -1).sum(0) if sequence_first else rm.view(micro_batch, seq, -1).sum(1)
    # per: [B, E] copies per expert -> [B, J, E/J] -> copies per rank [B, J]
    return per.view(micro_batch, layout.ep_size, layout.num_local_experts).sum(-1).numpy()


@dataclass(frozen=True)
class ExpertParallelPlan:
    """A NetMoE placement of one expert-parallel batch, in the terms a dispatcher needs.

    Args:
        placement: the device of every sample; global sample id ``rank * B + b``.
        expert_to_rank: ``[E]``, where each expert sits (unchanged by NetMoE).
        micro_batch: B, samples per rank.
        num: ``[I, J]`` counts the solver priced.
    """

    placement: Placement
    expert_to_rank: np.ndarray
    micro_batch: int
    num: np.ndarray

    def sample_permutation(self) -> np.ndarray:
        """Global sample ids in the new device-major order (rank 0's new samples first)."""
        return self.placement.permutation()

    def samples_on(self, rank: int) -> np.ndarray:
        """Global ids of the samples ``rank`` holds after the combine (ascending)."""
        return self.placement.samples_on(rank)

    def token_destinations(self, rank: int, seq_len: int, *, sequence_first: bool = True) -> torch.Tensor:
        """The rank each of ``rank``'s local tokens goes to in the combine (int64 ``[S * B]``).

        Tokens in Megatron's order (``t = s * B + b`` when ``sequence_first``).
        """
        b = self.micro_batch
        dest = torch.as_tensor(self.placement.device_of_sample[rank * b : (rank + 1) * b])  # [B]
        return dest.repeat(seq_len) if sequence_first else dest.repeat_interleave(seq_len)

    def moved(self) -> int:
        """Samples that leave the rank they started on."""
        origin = np.arange(len(self.placement.device_of_sample)) // self.micro_batch
        return int((self.placement.device_of_sample != origin).sum())


def plan_expert_parallel(
    counts: np.ndarray,
    layout: ExpertParallelLayout,
    *,
    next_counts: np.ndarray | None = None,
    solver: Solver = solve_two_stage,
    topology: Topology | None = None,
) -> ExpertParallelPlan:
    """Solve NetMoE's placement for counts of the whole expert-parallel batch.

    Args:
        counts: ``[J, B, J]`` (per rank) or ``[I, J]`` with rank-major sample ids.
        layout: the expert-parallel layout.
        next_counts: the next layer's (predicted) counts, same shape; with them the solver prices
            this layer's combine plus the next layer's dispatch (Eq. 5/6/10).
        solver: ``(num, topology) -> Placement``; NetMoE's two-stage KM by default.
        topology: bandwidths and bytes per token (default: ``layout.topology()``).

    Returns:
        The :class:`ExpertParallelPlan`.

    Example:
        >>> lay = ExpertParallelLayout(2, 1, 2)
        >>> plan = plan_expert_parallel(np.array([[[0, 5], [5, 0]], [[0, 5], [5, 0]]]), lay)
        >>> plan.placement.device_of_sample.tolist(), plan.moved()
        ([1, 0, 1, 0], 2)
    """
    topo = topology or layout.topology()
    if topo.devices != layout.ep_size:
        raise ValueError(f"topology has {topo.devices} devices, the layout {layout.ep_size} ranks")
    num = np.asarray(counts, dtype=np.int64)
    if num.ndim == 3:
        num = num.reshape(-1, num.shape[-1])  # [J, B, J] -> [I, J], ids rank * B + b
    if num.ndim != 2 or num.shape[1] != layout.ep_size or num.shape[0] % layout.ep_size:
        raise ValueError(
            f"counts must be [J, B, J] or [I, J] with J={layout.ep_size}, got {np.shape(counts)}"
        )
    if next_counts is not None:
        nxt = np.asarray(next_counts, dtype=np.int64).reshape(num.shape)
        num = num + nxt
    placement = solver(num, topo)
    placement.validate(topo)
    return ExpertParallelPlan(placement, layout.expert_to_rank(), num.shape[0] // layout.ep_size, num)


def plan_from_routing_maps(
    routing_maps: Sequence[torch.Tensor],
    layout: ExpertParallelLayout,
    *,
    micro_batch: int,
    next_routing_maps: Sequence[torch.Tensor] | None = None,
    solver: Solver = solve_two_stage,
    topology: Topology | None = None,
    sequence_first: bool = True,
) -> ExpertParallelPlan:
    """:func:`plan_expert_parallel` from every rank's routing map (plain tensors, one process).

    Args:
        routing_maps: one bool ``[S * B, E]`` per expert-parallel rank, in rank order.
        layout: the expert-parallel layout.
        micro_batch: B.
        next_routing_maps: the next layer's routing maps, if the next dispatch is priced too.
        solver, topology, sequence_first: as in :func:`plan_expert_parallel` and
            :func:`routing_to_counts`.
    """
    if len(routing_maps) != layout.ep_size:
        raise ValueError(f"need {layout.ep_size} routing maps (one per rank), got {len(routing_maps)}")

    def counts(maps: Sequence[torch.Tensor]) -> np.ndarray:
        return np.stack(
            [
                routing_to_counts(m, layout, micro_batch=micro_batch, sequence_first=sequence_first)
                for m in maps
            ]
        )  # [J, B, J]

    nxt = None if next_routing_maps is None else counts(next_routing_maps)
    return plan_expert_parallel(
        counts(routing_maps), layout, next_counts=nxt, solver=solver, topology=topology
    )


def _distributed(group: Any) -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


class MegatronPlacementHook:
    """Plans NetMoE's placement before every dispatch of a Megatron-style All-to-All token dispatcher.

    The dispatcher is a plain object, not an ``nn.Module``, so "registering" wraps its dispatch
    method on the instance (:meth:`remove` restores it):

    - ``token_permutation(hidden_states, probs, routing_map)`` (Megatron-core's older API): the
      hook reads the routing map and ``hidden_states [S, B, H]`` from the call;
    - ``token_dispatch(tokens, probs)`` (the newer split API, after ``dispatch_preprocess`` stored
      ``routing_map`` and ``hidden_shape`` on the dispatcher): the hook reads those attributes.

    At each call the hook counts this rank's samples on every rank (:func:`routing_to_counts`),
    gathers the counts of the expert-parallel group, solves on group rank 0 and broadcasts the
    placement (all ranks hold the same plan), then calls the original method unchanged. With
    ``overlap=True`` the solve runs in an :class:`AsyncPlanner` thread and is collected before
    the combine method (``token_unpermutation`` or ``token_combine``), the step that would carry
    the placement out (Sec. 4). Plans go to :attr:`plans` and to ``on_plan``.

    Without ``torch.distributed`` (or with an expert-parallel group of one rank) pass ``gather``:
    a function from this rank's counts ``[B, J]`` to the group's ``[J, B, J]``; tests use it to
    play the other ranks.

    Args:
        dispatcher: the object to hook (Megatron's ``MoEAlltoAllTokenDispatcher`` or a look-alike).
        ranks_per_node: G, expert-parallel ranks per node.
        solver: NetMoE's two-stage KM by default.
        topology: bandwidths and bytes per token (default: the layout's topology).
        gather: see above; default ``torch.distributed.all_gather`` over ``dispatcher.ep_group``.
        on_plan: called with every :class:`ExpertParallelPlan` (e.g. to rewire the combine).
        overlap: solve in a background thread, collected before the combine.
        keep: how many recent plans :attr:`plans` keeps.

    Raises:
        TypeError: the object has no dispatch method the hook knows, or lacks layout attributes.
    """

    _DISPATCH = ("token_permutation", "token_dispatch")
    _COMBINE = ("token_unpermutation", "token_combine")

    def __init__(
        self,
        dispatcher: Any,
        *,
        ranks_per_node: int,
        solver: Solver = solve_two_stage,
        topology: Topology | None = None,
        gather: Callable[[np.ndarray], np.ndarray] | None = None,
        on_plan: Callable[[ExpertParallelPlan], None] | None = None,
        overlap: bool = False,
        keep: int = 8,
    ) -> None:
        self.layout = ExpertParallelLayout.from_dispatcher(dispatcher, ranks_per_node)
        self.topology = topology or self.layout.topology()
        if self.topology.devices != self.layout.ep_size:
            raise ValueError(
                f"topology has {self.topology.devices} devices, the group {self.layout.ep_size} ranks"
            )
        self.dispatch_name = next((n for n in self._DISPATCH if callable(getattr(dispatcher, n, None))), None)
        if self.dispatch_name is None:
            raise TypeError(
                f"{type(dispatcher).__name__} has neither token_permutation nor token_dispatch: "
                "not a Megatron-style All-to-All token dispatcher"
            )
        self.combine_name = next((n for n in self._COMBINE if callable(getattr(dispatcher, n, None))), None)
        if overlap and self.combine_name is None:
            raise TypeError("overlap=True needs a token_unpermutation or token_combine method to collect at")
        self.dispatcher, self.solver, self.gather, self.on_plan = dispatcher, solver, gather, on_plan
        self.overlap, self.keep = overlap, keep
        self.plans: list[ExpertParallelPlan] = []
        self._planner = AsyncPlanner(self.topology, solver) if overlap else None
        self._pending_counts: np.ndarray | None = None
        self._wrapped: list[tuple[str, Any]] = []  # (name, instance attribute it shadowed or None)
        self._device = torch.device("cpu")  # where the collectives run (the routing map's device)
        self._wrap(self.dispatch_name, self._before_dispatch)
        if overlap:
            assert self.combine_name is not None
            self._wrap(self.combine_name, self._before_combine)

    # -- wrapping --------------------------------------------------------------------------------
    def _wrap(self, name: str, pre: Callable[[tuple[Any, ...], dict[str, Any]], None]) -> None:
        original = getattr(self.dispatcher, name)

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            pre(args, kwargs)
            return original(*args, **kwargs)

        shadowed = vars(self.dispatcher).get(name)
        setattr(self.dispatcher, name, wrapper)  # an instance attribute shadows the class method
        self._wrapped.append((name, shadowed))

    def remove(self) -> None:
        """Restore the dispatcher's own methods and stop the background solver."""
        for name, shadowed in reversed(self._wrapped):
            if shadowed is not None:
                setattr(self.dispatcher, name, shadowed)
            elif name in vars(self.dispatcher):
                delattr(self.dispatcher, name)
        self._wrapped.clear()
        if self._planner is not None:
            self._planner.close()

    @property
    def last(self) -> ExpertParallelPlan | None:
        """The most recent plan (None before the first dispatch)."""
        return self.plans[-1] if self.plans else None

    # -- the hook --------------------------------------------------------------------------------
    def _routing(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[torch.Tensor, int]:
        d = self.dispatcher
        if self.dispatch_name == "token_permutation":
            names = ("hidden_states", "probs", "routing_map")
            got = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
            hidden, routing = got.get("hidden_states"), got.get("routing_map")
            if routing is None and got.get("probs") is not None:
                routing = got["probs"] != 0
            shape = None if hidden is None else tuple(hidden.shape)
        else:
            routing = getattr(d, "routing_map", None)
            shape = getattr(d, "hidden_shape", None)
            if routing is None and getattr(d, "probs", None) is not None:
                routing = d.probs != 0
        if routing is None or shape is None or len(shape) != 3:
            raise ValueError(
                "the dispatcher call carries no routing map or no [S, B, H] hidden shape; "
                "NetMoE needs both to count tokens per sample"
            )
        return routing, int(shape[1])

    def _group_counts(self, local: np.ndarray) -> np.ndarray:
        group = getattr(self.dispatcher, "ep_group", None)
        if self.gather is not None:
            full = np.asarray(self.gather(local), dtype=np.int64)
        elif _distributed(group):
            import torch.distributed as dist

            t = torch.as_tensor(local, device=self._device)  # NCCL needs device tensors
            parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
            dist.all_gather(parts, t, group=group)
            full = torch.stack(parts).cpu().numpy()
        elif self.layout.ep_size == 1:
            full = local[None]
        else:
            raise ValueError(
                f"ep_size={self.layout.ep_size} but torch.distributed is not initialised; pass gather= "
                "to supply the other ranks' counts"
            )
        want = (self.layout.ep_size, *local.shape)
        if full.shape != want:
            raise ValueError(f"gathered counts have shape {full.shape}, want {want}")
        return full

    def _before_dispatch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        routing, micro_batch = self._routing(args, kwargs)
        self._device = routing.device
        local = routing_to_counts(routing, self.layout, micro_batch=micro_batch)  # [B, J]
        full = self._group_counts(local)  # [J, B, J]
        num = full.reshape(-1, self.layout.ep_size)
        if self._planner is not None:
            self._planner.discard()
            if self._is_solver_rank():
                self._planner.submit(num)
            self._pending_counts = num
        else:
            self._publish(*self._attempt(lambda: self.solver(num, self.topology)), num)

    def _before_combine(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        assert self._planner is not None
        if self._pending_counts is None:
            return  # no dispatch was planned (e.g. the hook was registered mid-step)
        num, self._pending_counts = self._pending_counts, None
        self._publish(*self._attempt(self._planner.wait), num)

    def _attempt(self, solve: Callable[[], Placement]) -> tuple[Placement | None, str]:
        """Solve on the solver rank; an error is passed on (and raised on every rank after the broadcast)."""
        if not self._is_solver_rank():
            return None, ""
        try:
            placement = solve()
            placement.validate(self.topology)
        except (ValueError, TypeError, RuntimeError) as err:
            return None, f"{type(err).__name__}: {err}"
        return placement, ""

    def _is_solver_rank(self) -> bool:
        group = getattr(self.dispatcher, "ep_group", None)
        if self.gather is None and _distributed(group):
            import torch.distributed as dist

            return dist.get_rank(group) == 0
        return True

    def _publish(self, placement: Placement | None, error: str, num: np.ndarray) -> None:
        group = getattr(self.dispatcher, "ep_group", None)
        if self.gather is None and _distributed(group):
            import torch.distributed as dist

            plan = torch.full((num.shape[0],), -1, dtype=torch.int64, device=self._device)
            if placement is not None:
                plan = torch.as_tensor(placement.device_of_sample, dtype=torch.int64, device=self._device)
            dist.broadcast(plan, group=group, group_src=0)
            placement = None if int(plan.min()) < 0 else Placement(plan.cpu().numpy())
        if placement is None:
            raise RuntimeError(
                f"NetMoE placement failed on expert-parallel rank 0: {error or 'no placement'}"
            )
        placement.validate(self.topology)
        plan_obj = ExpertParallelPlan(
            placement, self.layout.expert_to_rank(), num.shape[0] // self.layout.ep_size, num
        )
        self.plans = [*self.plans, plan_obj][-self.keep :]
        if self.on_plan is not None:
            self.on_plan(plan_obj)


def register_megatron_hook(dispatcher: Any, *, ranks_per_node: int, **kwargs: Any) -> MegatronPlacementHook:
    """Install a :class:`MegatronPlacementHook` on ``dispatcher`` and return it (``.remove()`` undoes it).

    Example:
        >>> from types import SimpleNamespace
        >>> class Fake:  # Megatron's attribute names, no Megatron needed
        ...     ep_size, tp_size, num_experts, num_local_experts = 1, 1, 2, 2
        ...     def token_permutation(self, hidden_states, probs, routing_map):
        ...         return hidden_states
        >>> d = Fake()
        >>> hook = register_megatron_hook(d, ranks_per_node=1)
        >>> rm = torch.tensor([[True, False], [False, True]])  # S = 1, B = 2
        >>> _ = d.token_permutation(torch.zeros(1, 2, 4), rm.float(), rm)
        >>> hook.last.num.tolist(), hook.last.placement.device_of_sample.tolist()
        ([[1], [1]], [0, 0])
        >>> hook.remove()
    """
    return MegatronPlacementHook(dispatcher, ranks_per_node=ranks_per_node, **kwargs)
