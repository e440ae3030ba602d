"""The All-to-All cost model of NetMoE: routing counts, inter/intra-node copies, link bytes, times.

Implements the communication model of Sec. 3 of *NetMoE: Accelerating MoE Training through
Dynamic Sample Placement* (Liu et al., ICLR 2025): the per-sample, per-device assignment
counts ``num[i, j]``, the inter-node copies ``c[i, n]`` and intra-node copies ``c'[i, g]`` of a
sample placed on node ``n`` / device ``g``, and the modelled All-to-All time: the paper's Eq. 1,
``max(t_intra, t_inter)`` over the two channels' totals (the headline metric), a sum over samples
and the slowest device (the max model, secondary). :func:`iteration_traffic` adds up the 2L
All-to-Alls of an L-layer stack whose placement persists across layers. NumPy only.

Units: bandwidths are bytes per second per device (400 GB/s NVLink, 100 GB/s InfiniBand in the
paper's cluster, 1 GB = 1e9 bytes); one token copy moves ``bytes_per_token = d_model x element
size`` bytes. Metadata (sample ids, positions, gate probabilities) is not counted.

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "IterationTraffic",
    "Topology",
    "TrafficReport",
    "assignment_counts",
    "inter_cost",
    "intra_cost",
    "iteration_traffic",
    "link_bytes",
    "traffic",
]


@dataclass(frozen=True)
class Topology:
    """A cluster of ``nodes x gpus_per_node`` devices with two bandwidth tiers.

    Device ``j`` (0-based, ``J = nodes * gpus_per_node`` in all) sits on node ``j // gpus_per_node``.

    Args:
        nodes: N, number of nodes.
        gpus_per_node: G, devices per node.
        bw_intra: B_intra, intra-node (NVLink) bandwidth per device in bytes/s.
        bw_inter: B_inter, inter-node (InfiniBand) bandwidth per device in bytes/s.
        bytes_per_token: s, bytes of one token copy (d_model x element size).

    Example:
        >>> topo = Topology(2, 4, bytes_per_token=2048)
        >>> topo.devices, topo.node_of(5), topo.devices_of_node(1)
        (8, 1, [4, 5, 6, 7])
    """

    nodes: int
    gpus_per_node: int
    bw_intra: float = 400e9
    bw_inter: float = 100e9
    bytes_per_token: int = 2048

    def __post_init__(self) -> None:
        for name in ("nodes", "gpus_per_node", "bytes_per_token"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"Topology.{name} must be a positive integer, got {v!r}")
        for name in ("bw_intra", "bw_inter"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise ValueError(f"Topology.{name} must be a positive finite bandwidth, got {v!r}")

    @property
    def devices(self) -> int:
        """J = N * G."""
        return self.nodes * self.gpus_per_node

    def node_of(self, device: int) -> int:
        """The node holding ``device``."""
        return device // self.gpus_per_node

    def devices_of_node(self, node: int) -> list[int]:
        """The devices of ``node``."""
        return list(range(node * self.gpus_per_node, (node + 1) * self.gpus_per_node))

    def node_array(self) -> np.ndarray:
        """``node[j]`` for every device, int64 of shape ``[J]``."""
        return np.arange(self.devices, dtype=np.int64) // self.gpus_per_node

    def check_world(self, world_size: int) -> None:
        """Raise ``ValueError`` unless the topology has exactly ``world_size`` devices."""
        if world_size != self.devices:
            raise ValueError(
                f"topology {self.nodes}x{self.gpus_per_node} has {self.devices} devices "
                f"but the process group has {world_size} ranks"
            )


def assignment_counts(expert_ids: np.ndarray, expert_device: np.ndarray, devices: int) -> np.ndarray:
    """``num[i, j] = sum_t sum_r 1[dev(e_{t,r}) = j]``: token copies of sample i routed to device j.

    Args:
        expert_ids: routed expert per token and slot.
        expert_device: ``dev(e)``, the device holding each expert.
        devices: J.

    Returns:
        ``num``, int64.

    Shape:
        expert_ids ``[I, S, k]``, expert_device ``[E]`` -> num ``[I, J]``.

    Raises:
        ValueError: an expert id or device out of range, or a wrong rank.

    Example:
        >>> ids = np.array([[[0, 1], [0, 2]], [[3, 2], [3, 1]]])  # I=2, S=2, k=2
        >>> assignment_counts(ids, np.array([0, 0, 1, 1]), 2).tolist()
        [[3, 1], [1, 3]]
    """
    ids = np.asarray(expert_ids)
    dev = np.asarray(expert_device)
    if ids.ndim != 3:
        raise ValueError(f"expert_ids must have shape [I, S, k], got {ids.shape}")
    if dev.ndim != 1:
        raise ValueError(f"expert_device must have shape [E], got {dev.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= len(dev)):
        raise ValueError(f"expert ids must lie in [0, {len(dev)}), got [{ids.min()}, {ids.max()}]")
    if dev.size and (dev.min() < 0 or dev.max() >= devices):
        raise ValueError(f"expert_device entries must lie in [0, {devices}), got max {dev.max()}")
    n_samples = ids.shape[0]
    flat = dev[ids.reshape(n_samples, -1)]  # [I, S*k] device of every copy
    rows = np.repeat(np.arange(n_samples), flat.shape[1])
    num = np.zeros((n_samples, devices), dtype=np.int64)
    np.add.at(num, (rows, flat.ravel()), 1)
    return num


def _check_num(num: np.ndarray, topo: Topology) -> np.ndarray:
    num = np.asarray(num)
    if num.ndim != 2 or num.shape[1] != topo.devices:
        raise ValueError(f"num must have shape [I, {topo.devices}], got {num.shape}")
    if num.size and num.min() < 0:
        raise ValueError("num must be non-negative (token-copy counts)")
    return num


def inter_cost(num: np.ndarray, topo: Topology) -> np.ndarray:
    """``c[i, n] = sum_{j not in node n} num[i, j]``: inter-node copies if sample i sits on node n.

    Shape:
        num ``[I, J]`` -> c ``[I, N]``.

    Example:
        >>> inter_cost(np.array([[3, 1, 0, 4]]), Topology(2, 2)).tolist()
        [[4, 4]]
    """
    num = _check_num(num, topo)
    per_node = num.reshape(num.shape[0], topo.nodes, topo.gpus_per_node).sum(-1)  # [I, N]
    return per_node.sum(1, keepdims=True) - per_node


def intra_cost(num: np.ndarray, topo: Topology) -> np.ndarray:
    """``c'[i, g] = sum_{j in node(g), j != g} num[i, j]``: intra-node copies if sample i sits on g.

    Shape:
        num ``[I, J]`` -> c' ``[I, J]``.

    Example:
        >>> intra_cost(np.array([[3, 1, 0, 4]]), Topology(2, 2)).tolist()
        [[1, 3, 4, 0]]
    """
    num = _check_num(num, topo)
    per_node = num.reshape(num.shape[0], topo.nodes, topo.gpus_per_node).sum(-1)  # [I, N]
    return np.repeat(per_node, topo.gpus_per_node, axis=1) - num


def link_bytes(
    num: np.ndarray,
    device_of_sample: np.ndarray,
    topo: Topology,
    *,
    origin: np.ndarray | None = None,
    residual: Literal["expert_side", "migrate"] = "expert_side",
    tokens_per_sample: int | None = None,
) -> np.ndarray:
    """Bytes on every directed link of one combine All-to-All (expert device -> sample's device).

    ``L[j, g] = s * sum_{i: g_i = g} num[i, j]``; the dispatch All-to-All of samples at ``g_i``
    is the transpose. With ``residual="migrate"``, every sample also carries its residual stream
    from ``origin[i]`` to ``g_i``: ``s * S`` extra bytes on that link (local when it stays), exactly
    as if ``num[i, origin[i]]`` were ``S`` larger.

    Args:
        num: assignment counts.
        device_of_sample: g_i, the device each sample ends on.
        topo: the cluster.
        origin: where each sample was before the combine (needed for ``migrate``).
        residual: ``"expert_side"`` (no extra bytes) or ``"migrate"``.
        tokens_per_sample: S (needed for ``migrate``).

    Returns:
        ``L`` in bytes, float64; the diagonal holds local (free) copies.

    Shape:
        num ``[I, J]``, device_of_sample ``[I]`` -> ``[J, J]``.
    """
    num = _check_num(num, topo)
    g = np.asarray(device_of_sample, dtype=np.int64)
    if g.shape != (num.shape[0],):
        raise ValueError(f"device_of_sample must have shape [{num.shape[0]}], got {g.shape}")
    if g.size and (g.min() < 0 or g.max() >= topo.devices):
        raise ValueError(f"device_of_sample must lie in [0, {topo.devices})")
    onehot = np.zeros((num.shape[0], topo.devices), dtype=np.int64)
    onehot[np.arange(num.shape[0]), g] = 1
    copies = num.T @ onehot  # [J, J]: copies from expert device j to sample device g
    out = copies.astype(np.float64) * topo.bytes_per_token
    if residual == "migrate":
        if origin is None or tokens_per_sample is None:
            raise ValueError("residual='migrate' needs origin and tokens_per_sample")
        o = np.asarray(origin, dtype=np.int64)
        np.add.at(out, (o, g), float(tokens_per_sample * topo.bytes_per_token))  # diagonal: stays local
    elif residual != "expert_side":
        raise ValueError(f"residual must be 'expert_side' or 'migrate', got {residual!r}")
    return out


@dataclass(frozen=True)
class TrafficReport:
    """Modelled traffic of one All-to-All.

    Args:
        links: ``[J, J]`` bytes per directed link (row: sender, column: receiver).
        inter_bytes: bytes crossing nodes.
        intra_bytes: bytes between distinct devices of one node.
        t_sum: sum model, ``inter_bytes / B_inter + intra_bytes / B_intra`` (seconds).
        t_max: max model, slowest receiver's ``inter_in / B_inter + intra_in / B_intra`` (seconds).
        t_eq1: the paper's Eq. 1, ``max(t_intra, t_inter)``: the two channels run concurrently and
            each moves its total over the J devices' links, ``t_inter = inter_bytes / (J B_inter)``,
            ``t_intra = intra_bytes / (J B_intra)`` (seconds).
    """

    links: np.ndarray
    inter_bytes: float
    intra_bytes: float
    t_sum: float
    t_max: float
    t_eq1: float = 0.0


def traffic(
    num: np.ndarray,
    device_of_sample: np.ndarray,
    topo: Topology,
    *,
    origin: np.ndarray | None = None,
    residual: Literal["expert_side", "migrate"] = "expert_side",
    tokens_per_sample: int | None = None,
) -> TrafficReport:
    """Link bytes, inter/intra totals and the sum and max time models of one combine All-to-All.

    Args:
        num: assignment counts ``[I, J]``.
        device_of_sample: g_i ``[I]`` (a :class:`~iclr25.methods.netmoe.Placement`'s array).
        topo: the cluster.
        origin: see :func:`link_bytes`.
        residual: see :func:`link_bytes`.
        tokens_per_sample: see :func:`link_bytes`.

    Returns:
        A :class:`TrafficReport`.

    Example:
        >>> topo = Topology(2, 2, bw_intra=4.0, bw_inter=1.0, bytes_per_token=1)
        >>> rep = traffic(np.array([[3, 1, 0, 0], [0, 0, 2, 2]]), np.array([0, 2]), topo)
        >>> rep.inter_bytes, rep.intra_bytes, rep.t_sum, rep.t_max, rep.t_eq1
        (0.0, 3.0, 0.75, 0.5, 0.1875)
    """
    links = link_bytes(
        num, device_of_sample, topo, origin=origin, residual=residual, tokens_per_sample=tokens_per_sample
    )
    return _report(links, topo)


def _report(links: np.ndarray, topo: Topology) -> TrafficReport:
    """Totals and the three time models of one All-to-All given its ``[J, J]`` link bytes."""
    node = topo.node_array()
    cross = node[:, None] != node[None, :]  # [J, J]
    local = np.eye(topo.devices, dtype=bool)
    inter_m = np.where(cross, links, 0.0)
    intra_m = np.where(~cross & ~local, links, 0.0)
    recv_t = inter_m.sum(0) / topo.bw_inter + intra_m.sum(0) / topo.bw_intra  # [J]
    inter_b, intra_b = float(inter_m.sum()), float(intra_m.sum())
    j = topo.devices
    return TrafficReport(
        links=links,
        inter_bytes=inter_b,
        intra_bytes=intra_b,
        t_sum=inter_b / topo.bw_inter + intra_b / topo.bw_intra,
        t_max=float(recv_t.max()) if recv_t.size else 0.0,
        t_eq1=max(inter_b / (j * topo.bw_inter), intra_b / (j * topo.bw_intra)),
    )


@dataclass(frozen=True)
class IterationTraffic:
    """Modelled All-to-All traffic of one forward pass through L MoE layers (2L All-to-Alls).

    The backward pass mirrors every All-to-All with the same bytes, a constant factor of 2 that
    leaves every ratio unchanged.

    Args:
        inter_bytes: inter-node bytes over all 2L All-to-Alls.
        intra_bytes: intra-node bytes (distinct devices of one node).
        t_eq1: sum over the All-to-Alls of the paper's Eq. 1 time ``max(t_intra, t_inter)``.
        t_max: sum over the All-to-Alls of the slowest device's time (secondary).
        t_sum: sum over the All-to-Alls of the sum model.
    """

    inter_bytes: float
    intra_bytes: float
    t_eq1: float
    t_max: float
    t_sum: float


def iteration_traffic(
    nums: list[np.ndarray], placements: list[np.ndarray], topo: Topology, origin: np.ndarray
) -> IterationTraffic:
    """Traffic of a stack whose sample placement persists from layer to layer.

    Layer l dispatches from where layer l-1's combine left each sample (``origin`` for l = 0)
    and combines toward ``placements[l]``: the dispatch of layer l+1 and the combine of layer l
    both see the same placement, which is why the paper's edge weight adds their costs
    (Eq. 5/6/10).

    Args:
        nums: per layer, assignment counts ``[I, J]``.
        placements: per layer, ``g_i`` after the layer's combine ``[I]``.
        topo: the cluster.
        origin: where the loader put each sample ``[I]``.

    Returns:
        An :class:`IterationTraffic`.

    Example:
        >>> topo = Topology(2, 1, bw_intra=4.0, bw_inter=1.0, bytes_per_token=1)
        >>> num = np.array([[2, 0], [0, 2]])
        >>> it = iteration_traffic([num, num], [np.array([0, 1])] * 2, topo, np.array([1, 0]))
        >>> it.inter_bytes, it.t_eq1
        (4.0, 2.0)
    """
    if len(nums) != len(placements) or not nums:
        raise ValueError(f"need one placement per layer, got {len(nums)} layers and {len(placements)}")
    where = np.asarray(origin, dtype=np.int64)
    totals = np.zeros(5)
    for num, g in zip(nums, placements, strict=True):
        dispatch = _report(link_bytes(num, where, topo).T, topo)  # samples -> experts
        combine = _report(link_bytes(num, g, topo), topo)  # experts -> samples' new devices
        for rep in (dispatch, combine):
            totals += (rep.inter_bytes, rep.intra_bytes, rep.t_eq1, rep.t_max, rep.t_sum)
        where = np.asarray(g, dtype=np.int64)
    return IterationTraffic(*(float(v) for v in totals))
