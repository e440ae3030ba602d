"""Sample-placement solvers of NetMoE and the placement baselines.

Implements the placement problem of Sec. 3-4 of *NetMoE: Accelerating MoE Training through
Dynamic Sample Placement* (Liu et al., ICLR 2025): binary ``x[i, g]`` with one device per sample
and the hard balance ``sum_i x[i, g] = I / J``. The method (Algorithm 1) solves it in two
Kuhn-Munkres stages: samples to nodes minimising the inter-node copies ``c``, then, inside each
node, samples to devices minimising the intra-node copies ``c'``. Each stage is an exact
assignment problem once every node (device) column is repeated ``I / N`` (``I / J``) times;
``scipy.optimize.linear_sum_assignment`` solves it. Also here: the exact weighted-sum assignment
(:func:`solve_joint`), a bottleneck proxy of the max model (:func:`solve_bottleneck`), an ILP
oracle on ``scipy.optimize.milp`` (HiGHS) for tests, and the baselines (identity, random, greedy,
SmartMoE-like expert re-placement). :func:`plan_layers` places the samples of an L-layer stack
with the paper's edge weight (Eq. 5/6/10): the placement chosen at layer l's combine also fixes
where layer l+1 dispatches from, so its cost is ``c`` of ``num_l + num_{l+1}`` (the counts add
because ``c`` and ``c'`` are linear in ``num``), with ``num_{l+1}`` from this layer only
(``"current"``: next layer ignored), predicted (Sec. 3.3) or the true routing (``"oracle"``).

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import linear_sum_assignment

from .cost import Topology, inter_cost, intra_cost

__all__ = [
    "Placement",
    "expert_replacement",
    "expert_stats",
    "greedy_placement",
    "identity_placement",
    "placement_cost",
    "plan_layers",
    "random_placement",
    "solve_bottleneck",
    "solve_ilp",
    "solve_joint",
    "solve_two_stage",
]


def _per_device(n_samples: int, topo: Topology) -> int:
    if n_samples % topo.devices:
        raise ValueError(
            f"a batch of I={n_samples} samples is not divisible across J={topo.devices} devices "
            "(the balance constraint needs I / J samples per device)"
        )
    return n_samples // topo.devices


@dataclass(frozen=True)
class Placement:
    """Where every sample of the global batch sits: ``device_of_sample[i] = g_i``.

    Args:
        device_of_sample: int64 ``[I]``, the device of each global sample id.

    Example:
        >>> p = Placement(np.array([1, 0, 0, 1]))
        >>> p.validate(Topology(1, 2)); p.permutation().tolist(), p.samples_on(1).tolist()
        ([1, 2, 0, 3], [0, 3])
    """

    device_of_sample: np.ndarray

    def __post_init__(self) -> None:
        arr = np.asarray(self.device_of_sample, dtype=np.int64)
        if arr.ndim != 1:
            raise ValueError(f"device_of_sample must have shape [I], got {arr.shape}")
        object.__setattr__(self, "device_of_sample", arr)

    def validate(self, topo: Topology) -> None:
        """Raise ``ValueError`` unless every device holds exactly ``I / J`` samples."""
        per = _per_device(len(self.device_of_sample), topo)
        d = self.device_of_sample
        if d.size and (d.min() < 0 or d.max() >= topo.devices):
            raise ValueError(f"placement names devices outside [0, {topo.devices})")
        counts = np.bincount(d, minlength=topo.devices)
        if not np.all(counts == per):
            raise ValueError(f"placement is not balanced: samples per device {counts.tolist()}, want {per}")

    def permutation(self) -> np.ndarray:
        """Global sample ids in device-major order (device 0's samples first, ascending ids)."""
        return np.argsort(self.device_of_sample, kind="stable")

    def samples_on(self, device: int) -> np.ndarray:
        """Sorted global ids of the samples placed on ``device``."""
        return np.flatnonzero(self.device_of_sample == device)


def _weights(num: np.ndarray, topo: Topology) -> np.ndarray:
    """Per-sample combine cost ``w[i, g] = c[i, node(g)] B_intra / B_inter + c'[i, g]``.

    In units of one intra-node copy time ``s / B_intra``; multiply by ``s / B_intra`` for seconds.
    """
    c = inter_cost(num, topo).astype(np.float64)  # [I, N]
    cp = intra_cost(num, topo).astype(np.float64)  # [I, J]
    return np.repeat(c, topo.gpus_per_node, axis=1) * (topo.bw_intra / topo.bw_inter) + cp


def _balanced_lsa(cost: np.ndarray, capacity: int) -> np.ndarray:
    """Exact balanced assignment: each row to one column, ``capacity`` rows per column.

    Repeats every column ``capacity`` times into a square matrix and solves it with the
    Hungarian-type solver of SciPy. Returns the column of every row.
    """
    big = np.repeat(cost, capacity, axis=1)  # [R, C*capacity]
    rows, cols = linear_sum_assignment(big)
    out = np.empty(cost.shape[0], dtype=np.int64)
    out[rows] = cols // capacity
    return out


def solve_two_stage(num: np.ndarray, topo: Topology) -> Placement:
    """NetMoE's placement (Algorithm 1): exact KM on inter-node copies, then on intra-node copies.

    Stage 1 assigns samples to nodes (``I / N`` each) minimising ``sum_i c[i, n_i]``; stage 2
    assigns each node's samples to its devices (``I / J`` each) minimising ``sum_i c'[i, g_i]``.
    Optimal for inter-node volume first; not necessarily for the weighted sum (see
    :func:`solve_joint`).

    Args:
        num: assignment counts ``[I, J]``.
        topo: the cluster.

    Returns:
        A balanced :class:`Placement`.

    Example:
        >>> num = np.array([[0, 0, 4, 0], [4, 0, 0, 0], [0, 0, 0, 4], [0, 4, 0, 0]])
        >>> solve_two_stage(num, Topology(2, 2)).device_of_sample.tolist()
        [2, 0, 3, 1]
    """
    num = np.asarray(num)
    per = _per_device(num.shape[0], topo)
    c = inter_cost(num, topo)  # [I, N]
    cp = intra_cost(num, topo)  # [I, J]
    node = _balanced_lsa(c.astype(np.float64), per * topo.gpus_per_node)
    device = np.empty(num.shape[0], dtype=np.int64)
    for n in range(topo.nodes):
        members = np.flatnonzero(node == n)
        devs = np.asarray(topo.devices_of_node(n))
        local = _balanced_lsa(cp[np.ix_(members, devs)].astype(np.float64), per)
        device[members] = devs[local]
    return Placement(device)


def solve_joint(num: np.ndarray, topo: Topology) -> Placement:
    """Exact single-stage assignment of the weighted sum ``c / B_inter + c' / B_intra``.

    Args:
        num: assignment counts ``[I, J]``.
        topo: the cluster.

    Returns:
        A balanced :class:`Placement` minimising the sum time model.
    """
    num = np.asarray(num)
    per = _per_device(num.shape[0], topo)
    return Placement(_balanced_lsa(_weights(num, topo), per))


def solve_bottleneck(num: np.ndarray, topo: Topology) -> Placement:
    """Proxy of the max model: minimise the largest per-sample combine cost, then the sum.

    Bisection over the distinct values ``w[i, g]`` with a balanced-assignment feasibility test
    (a zero-cost perfect matching on the allowed edges), then a sum-minimising assignment among
    the allowed edges. A labelled proxy: the slowest *device* is optimised exactly only by
    :func:`solve_ilp` with ``objective="max"``.

    Args:
        num: assignment counts ``[I, J]``.
        topo: the cluster.

    Returns:
        A balanced :class:`Placement`.
    """
    num = np.asarray(num)
    per = _per_device(num.shape[0], topo)
    w = _weights(num, topo)
    values = np.unique(w)
    lo, hi = 0, len(values) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        blocked = (w > values[mid]).astype(np.float64)
        rows, cols = linear_sum_assignment(np.repeat(blocked, per, axis=1))
        if np.repeat(blocked, per, axis=1)[rows, cols].sum() == 0:
            hi = mid
        else:
            lo = mid + 1
    cap = values[lo]
    penalty = w.sum() + 1.0  # larger than any feasible total
    return Placement(_balanced_lsa(np.where(w <= cap, w, penalty), per))


def placement_cost(num: np.ndarray, placement: Placement, topo: Topology, objective: str = "sum") -> float:
    """Cost of a placement in the solvers' objectives.

    Args:
        num: assignment counts ``[I, J]``.
        placement: the placement.
        topo: the cluster.
        objective: ``"inter"`` (``sum_i c[i, node(g_i)]``, copies), ``"intra"`` (``sum_i c'[i, g_i]``),
            ``"sum"`` (weighted sum, in intra-copy units), ``"max"`` (slowest receiving device, same
            units) or ``"bottleneck"`` (largest per-sample cost, same units).

    Returns:
        The cost as a float.
    """
    g = placement.device_of_sample
    rows = np.arange(len(g))
    if objective == "inter":
        return float(inter_cost(num, topo)[rows, g // topo.gpus_per_node].sum())
    if objective == "intra":
        return float(intra_cost(num, topo)[rows, g].sum())
    w = _weights(num, topo)[rows, g]
    if objective == "sum":
        return float(w.sum())
    if objective == "max":
        return float(np.bincount(g, weights=w, minlength=topo.devices).max())
    if objective == "bottleneck":
        return float(w.max())
    raise ValueError(f"unknown objective {objective!r}")


def solve_ilp(
    num: np.ndarray,
    topo: Topology,
    objective: Literal["inter", "intra", "sum", "max"] = "sum",
    *,
    node_of_sample: np.ndarray | None = None,
    time_limit: float = 60.0,
) -> tuple[Placement, float]:
    """Exact balanced placement by integer programming (``scipy.optimize.milp``, HiGHS): a test oracle.

    Variables ``x[i, g]`` in {0, 1} with ``sum_g x[i, g] = 1`` and ``sum_i x[i, g] = I / J``.
    ``"max"`` adds ``t >= sum_i w[i, g] x[i, g]`` for every device and minimises ``t`` (the exact
    max model of the combine All-to-All).

    Args:
        num: assignment counts ``[I, J]``.
        topo: the cluster.
        objective: see :func:`placement_cost`.
        node_of_sample: if given, sample i may only use devices of node ``node_of_sample[i]``
            (stage 2 of the two-stage problem).
        time_limit: HiGHS time limit in seconds.

    Returns:
        ``(placement, optimum)`` with the optimum in :func:`placement_cost` units.

    Raises:
        RuntimeError: the solver found no optimal solution.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp

    num = np.asarray(num)
    n_s, n_d = num.shape[0], topo.devices
    per = _per_device(n_s, topo)
    if objective == "inter":
        cost = np.repeat(inter_cost(num, topo), topo.gpus_per_node, axis=1).astype(np.float64)
    elif objective == "intra":
        cost = intra_cost(num, topo).astype(np.float64)
    elif objective in ("sum", "max"):
        cost = _weights(num, topo)
    else:
        raise ValueError(f"unknown objective {objective!r}")
    nv = n_s * n_d + (objective == "max")
    rows_eq = np.zeros((n_s, nv))
    cols_eq = np.zeros((n_d, nv))
    for i in range(n_s):
        rows_eq[i, i * n_d : (i + 1) * n_d] = 1.0
    for g in range(n_d):
        cols_eq[g, g : n_s * n_d : n_d] = 1.0
    cons = [LinearConstraint(rows_eq, 1, 1), LinearConstraint(cols_eq, per, per)]
    upper = np.ones(nv)
    if node_of_sample is not None:
        allowed = np.asarray(node_of_sample)[:, None] == topo.node_array()[None, :]  # [I, J]
        upper[: n_s * n_d] = allowed.ravel().astype(np.float64)
    c = np.zeros(nv)
    if objective == "max":
        load = np.zeros((n_d, nv))
        for g in range(n_d):
            load[g, g : n_s * n_d : n_d] = cost[:, g]
        load[:, -1] = -1.0
        cons.append(LinearConstraint(load, -np.inf, 0))
        c[-1] = 1.0
        upper[-1] = np.inf
    else:
        c[: n_s * n_d] = cost.ravel()
    integrality = np.ones(nv)
    if objective == "max":
        integrality[-1] = 0
    res = milp(
        c,
        constraints=cons,
        integrality=integrality,
        bounds=Bounds(np.zeros(nv), upper),
        options={"time_limit": time_limit},
    )
    if res.status != 0 or res.x is None:
        raise RuntimeError(f"milp did not reach an optimum: {res.message}")
    x = np.round(res.x[: n_s * n_d]).reshape(n_s, n_d)  # [I, J]
    return Placement(x.argmax(1).astype(np.int64)), float(res.fun)


def identity_placement(n_samples: int, topo: Topology) -> Placement:
    """Plain expert parallelism: samples stay where the loader put them (``I / J`` contiguous ids each).

    Example:
        >>> identity_placement(4, Topology(1, 2)).device_of_sample.tolist()
        [0, 0, 1, 1]
    """
    per = _per_device(n_samples, topo)
    return Placement(np.arange(n_samples, dtype=np.int64) // per)


def random_placement(n_samples: int, topo: Topology, seed: int | np.random.Generator) -> Placement:
    """A balanced random permutation of the identity placement.

    Args:
        n_samples: I.
        topo: the cluster.
        seed: an int or a NumPy generator.

    Returns:
        A balanced :class:`Placement`.
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    return Placement(rng.permutation(identity_placement(n_samples, topo).device_of_sample))


def greedy_placement(num: np.ndarray, topo: Topology) -> Placement:
    """Capacity-constrained greedy: samples by descending cost spread, each to its cheapest free device.

    The per-sample cost is the weighted combine cost (intra-copy units); ties go to the lower id.

    Args:
        num: assignment counts ``[I, J]``.
        topo: the cluster.

    Returns:
        A balanced :class:`Placement`.
    """
    num = np.asarray(num)
    per = _per_device(num.shape[0], topo)
    w = _weights(num, topo)
    order = np.argsort(-(w.max(1) - w.min(1)), kind="stable")
    free = np.full(topo.devices, per)
    out = np.empty(num.shape[0], dtype=np.int64)
    for i in order:
        cand = np.where(free > 0, w[i], np.inf)
        g = int(np.argmin(cand))
        out[i] = g
        free[g] -= 1
    return Placement(out)


def expert_stats(
    expert_ids: np.ndarray, device_of_sample: np.ndarray, num_experts: int, devices: int
) -> np.ndarray:
    """``A[g, e]``: token copies routed to expert e from samples held by device g.

    Shape:
        expert_ids ``[I, S, k]``, device_of_sample ``[I]`` -> ``[J, E]``.
    """
    ids = np.asarray(expert_ids)
    src = np.broadcast_to(np.asarray(device_of_sample)[:, None, None], ids.shape)
    out = np.zeros((devices, num_experts), dtype=np.int64)
    np.add.at(out, (src.ravel(), ids.ravel()), 1)
    return out


def expert_replacement(
    stats: np.ndarray,
    topo: Topology,
    expert_device: np.ndarray,
    *,
    expert_bytes: float = 0.0,
) -> tuple[np.ndarray, float]:
    """SmartMoE-like baseline: permute experts across devices from aggregated past routing.

    Places expert e on device j (``E / J`` experts per device) minimising
    ``sum_e sum_g A[g, e] cost(j -> g)``, where a copy costs ``B_intra / B_inter`` across nodes,
    1 within a node and 0 on the same device; an exact balanced assignment.

    Args:
        stats: ``A[g, e]`` from :func:`expert_stats` (past iterations, samples where they sat).
        topo: the cluster.
        expert_device: the current ``dev(e)`` ``[E]``.
        expert_bytes: parameter bytes of one expert (for the migration volume).

    Returns:
        ``(new_expert_device [E], migration_bytes)``.
    """
    stats = np.asarray(stats, dtype=np.float64)
    n_d, n_e = stats.shape
    if n_d != topo.devices or n_e % n_d:
        raise ValueError(
            f"stats must have shape [J={topo.devices}, E] with E divisible by J, got {stats.shape}"
        )
    node = topo.node_array()
    link = np.where(node[:, None] != node[None, :], topo.bw_intra / topo.bw_inter, 1.0)
    np.fill_diagonal(link, 0.0)  # [J, J], symmetric
    cost = stats.T @ link  # [E, J]: copies of expert e weighted by the link cost to device j
    new = _balanced_lsa(cost, n_e // n_d)
    moved = int((new != np.asarray(expert_device)).sum())
    return new, float(moved * expert_bytes)


NumSource = Literal["current", "predicted", "oracle"]


def plan_layers(
    nums: list[np.ndarray],
    topo: Topology,
    *,
    num_source: NumSource = "predicted",
    predicted: list[np.ndarray] | None = None,
    solver: Callable[[np.ndarray, Topology], Placement] = solve_two_stage,
) -> list[Placement]:
    """Placements of every layer of a stack, on the paper's objective.

    At layer l the solver sees ``num_l + next_l``: layer l's combine and layer l+1's dispatch
    both move between the experts and the sample's device after layer l (Eq. 5/6/10). The last
    layer has no next dispatch.

    Args:
        nums: per layer, the true assignment counts ``[I, J]`` (layer l's combine).
        topo: the cluster.
        num_source: ``next_l`` is zero (``"current"``: only this layer's combine is priced),
            ``predicted[l]`` (``"predicted"``: router l+1 applied to layer l's input, Sec. 3.3)
            or ``nums[l + 1]`` (``"oracle"``: the true next-layer routing, an upper bound).
        predicted: per layer l < L - 1, predicted counts of layer l+1 ``[I, J]``.
        solver: ``(num, topo) -> Placement``; NetMoE's two-stage KM by default.

    Returns:
        One balanced :class:`Placement` per layer.

    Raises:
        ValueError: an unknown ``num_source``, or ``"predicted"`` without L - 1 predictions.

    Example:
        >>> a = np.array([[4, 0], [0, 4]]); b = np.array([[0, 9], [9, 0]])
        >>> topo = Topology(2, 1)
        >>> [p.device_of_sample.tolist() for p in plan_layers([a, b], topo, num_source="current")]
        [[0, 1], [1, 0]]
        >>> [p.device_of_sample.tolist() for p in plan_layers([a, b], topo, num_source="oracle")]
        [[1, 0], [1, 0]]
    """
    n_layers = len(nums)
    if num_source not in ("current", "predicted", "oracle"):
        raise ValueError(f"num_source must be 'current', 'predicted' or 'oracle', got {num_source!r}")
    if num_source == "predicted" and (predicted is None or len(predicted) != n_layers - 1):
        raise ValueError(f"num_source='predicted' needs {n_layers - 1} predicted count matrices")
    out = []
    for layer, num in enumerate(nums):
        w = np.asarray(num)
        if layer + 1 < n_layers and num_source == "predicted":
            w = w + np.asarray(predicted[layer])  # type: ignore[index]
        elif layer + 1 < n_layers and num_source == "oracle":
            w = w + np.asarray(nums[layer + 1])
        pl = solver(w, topo)
        pl.validate(topo)
        out.append(pl)
    return out
