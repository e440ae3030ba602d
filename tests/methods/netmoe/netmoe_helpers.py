"""Per-rank functions of the distributed NetMoE tests (module level, so child processes can import them)."""

from __future__ import annotations

import numpy as np
import torch

from iclr25.methods.netmoe import (
    DenseMoE,
    ExpertParallelMoE,
    ExpertParallelStack,
    Placement,
    Topology,
    all_to_all_v,
    make_block_batch,
    probe_all_to_all,
)


def probe(rank: int, world: int) -> bool:
    return probe_all_to_all()


def skewed_routing(rank: int, world: int, placement: str) -> dict:
    """All tokens routed to experts 0 and 1: the other ranks receive no tokens, their experts idle."""
    topo = Topology(2, world // 2, bytes_per_token=16 * 4)
    gen_seed = 5
    layer = ExpertParallelMoE(16, 32, world, 2, topology=topo, placement=placement,
                              generator=torch.Generator().manual_seed(gen_seed))  # fmt: skip
    dense = DenseMoE(16, 32, world, 2, generator=torch.Generator().manual_seed(gen_seed))
    with torch.no_grad():
        for m in (layer, dense):
            m.norm.weight.zero_()  # LN(h) = bias for every token: one routing decision for all
            m.norm.bias.fill_(1.0)
            m.gate.zero_()
            m.gate[:, 0] = 2.0
            m.gate[:, 1] = 1.0
    h_all, _, _ = make_block_batch(2 * world, 4, 16, 3, seed=1)
    ids = torch.arange(rank * 2, rank * 2 + 2)
    h = h_all[ids].clone().requires_grad_(True)
    y, new_ids, stats = layer(h, ids)
    y.sum().backward()
    y_ref, ref_ids, _ = dense(h_all)
    y_ref.sum().backward()
    lo = rank
    return {
        "out_err": float((y.detach() - y_ref.detach()[new_ids]).abs().max()),
        # an idle expert takes no part in the graph: no gradient, as the dense zeros
        "grad_err": float(
            ((layer.w1.grad if layer.w1.grad is not None else 0.0) - dense.w1.grad[lo : lo + 1]).abs().max()
        ),
        "idle_grad_none": layer.w1.grad is None,
        "received": int(stats.dispatch_links[:, rank].sum()),
        "experts_used": sorted(set(ref_ids.unique().tolist())),
        "placement": stats.placement.device_of_sample.tolist(),
    }


def split_mismatch(rank: int, world: int) -> str:
    x = torch.ones(world, 2)
    recv = [1] * world
    if rank == 1:
        recv[0] = 3  # this rank expects rows that rank 0 will not send
    try:
        all_to_all_v(x, [1] * world, recv)
    except ValueError as err:
        return str(err)
    return "no error"


def topology_mismatch(rank: int, world: int) -> str:
    try:
        ExpertParallelMoE(8, 8, 4, 2, topology=Topology(2, 2))
    except ValueError as err:
        return str(err)
    return "no error"


def uneven_batch(rank: int, world: int) -> str:
    layer = ExpertParallelMoE(8, 8, 2 * world, 2, topology=Topology(world, 1))
    n = 2 + rank
    ids = torch.arange(sum(2 + r for r in range(rank)), sum(2 + r for r in range(rank)) + n)
    try:
        layer(torch.randn(n, 3, 8), ids)
    except ValueError as err:
        return str(err)
    return "no error"


def callable_placement(rank: int, world: int) -> dict:
    """A user placement callable and a predicted-num callable; the reversed placement is honoured."""
    topo = Topology(world, 1, bytes_per_token=8 * 4)

    def reverse(num: np.ndarray, t: Topology) -> Placement:
        per = num.shape[0] // t.devices
        return Placement((t.devices - 1 - np.arange(num.shape[0]) // per).astype(np.int64))

    seen = {}

    def predicted(h: torch.Tensor, sample_ids: torch.Tensor) -> torch.Tensor:
        seen["called"] = True
        return torch.ones(h.shape[0], world, dtype=torch.int64)

    layer = ExpertParallelMoE(8, 8, 2 * world, 2, topology=topo, placement=reverse, num_source=predicted,
                              generator=torch.Generator().manual_seed(0))  # fmt: skip
    h_all, _, _ = make_block_batch(2 * world, 3, 8, 3, seed=0)
    ids = torch.arange(2 * rank, 2 * rank + 2)
    y, new_ids, stats = layer(h_all[ids], ids)
    dense = DenseMoE(8, 8, 2 * world, 2, generator=torch.Generator().manual_seed(0))
    y_ref, _, _ = dense(h_all)
    return {
        "new_ids": new_ids.tolist(),
        "called": seen.get("called", False),
        "num_rows": stats.num.tolist(),
        "out_err": float((y.detach() - y_ref.detach()[new_ids]).abs().max()),
    }


def stack_num_sources(rank: int, world: int) -> dict:
    """A three-layer stack under each num_source: what the solver priced, and where layers dispatch from."""
    topo = Topology(world, 1, bytes_per_token=8 * 4)
    h_all, _, _ = make_block_batch(4 * world, 6, 8, 3, seed=2)
    ids = torch.arange(4 * rank, 4 * rank + 4)
    dense = [DenseMoE(8, 16, 2 * world, 2, generator=torch.Generator().manual_seed(10 + i)) for i in range(2)]
    y_ref = dense[1](dense[0](h_all)[0])[0]
    out: dict = {}
    for src in ("current", "predicted", "oracle"):
        stack = ExpertParallelStack([
            ExpertParallelMoE(8, 16, 2 * world, 2, topology=topo, num_source=src,
                              generator=torch.Generator().manual_seed(10 + i))
            for i in range(2)
        ])  # fmt: skip
        y, new_ids, stats = stack(h_all[ids], ids)
        nxt = stack.layers[1]
        # The next router on layer 0's input, gathered over ranks in global id order.
        pred = torch.zeros(4 * world, world, dtype=torch.int64)
        pred[ids] = nxt.route_counts(h_all[ids])
        torch.distributed.all_reduce(pred)
        out[src] = {
            "num_is_routed": [bool(np.array_equal(s.num, s.routed)) for s in stats],
            "num_minus_routed": [(s.num - s.routed).tolist() for s in stats],
            "next_router_on_input": pred.tolist(),
            "next_routed": stats[1].routed.tolist(),
            "origin_is_previous_placement": bool(
                np.array_equal(stats[1].origin, stats[0].placement.device_of_sample)
            ),
        }
        out["out_err"] = max(
            out.get("out_err", 0.0), float((y.detach() - y_ref.detach()[new_ids]).abs().max())
        )
    return out


def overlap_vs_inline(rank: int, world: int) -> dict:
    """A two-layer stack with the solve overlapped (background thread) against the inline solve."""
    topo = Topology(2, world // 2, bytes_per_token=16 * 4)
    h_all, _, _ = make_block_batch(4 * world, 8, 16, 3, seed=3)
    ids = torch.arange(4 * rank, 4 * rank + 4)
    runs = {}
    for overlap in (False, True):
        stack = ExpertParallelStack([
            ExpertParallelMoE(16, 32, 2 * world, 2, topology=topo, num_source="predicted",
                              overlap_solve=overlap, generator=torch.Generator().manual_seed(20 + i))
            for i in range(2)
        ])  # fmt: skip
        h = h_all[ids].clone().requires_grad_(True)
        y, new_ids, stats = stack(h, ids)
        (y * y).sum().backward()
        runs[overlap] = (stack, y.detach(), new_ids, stats, h.grad)
    (s0, y0, n0, st0, g0), (s1, y1, n1, st1, g1) = runs[False], runs[True]
    grads_equal = all(
        torch.equal(p0.grad, p1.grad)
        for p0, p1 in zip(s0.parameters(), s1.parameters(), strict=True)
        if p0.grad is not None or p1.grad is not None
    )

    def failing(num: np.ndarray, t: Topology) -> Placement:
        raise ValueError("solver exploded")

    layer = ExpertParallelMoE(16, 32, 2 * world, 2, topology=topo, placement=failing, overlap_solve=True)
    try:
        layer(h_all[ids], ids)
        err = "no error"
    except ValueError as e:
        err = str(e)
    return {
        "y_equal": torch.equal(y0, y1),
        "ids_equal": torch.equal(n0, n1),
        "input_grad_equal": torch.equal(g0, g1),
        "grads_equal": grads_equal,
        "placements_equal": all(
            np.array_equal(a.placement.device_of_sample, b.placement.device_of_sample)
            for a, b in zip(st0, st1, strict=True)
        ),
        "links_equal": all(
            np.array_equal(a.combine_links, b.combine_links)
            and np.array_equal(a.dispatch_links, b.dispatch_links)
            for a, b in zip(st0, st1, strict=True)
        ),
        "moved": int(sum((s.placement.device_of_sample != s.origin).sum() for s in st1)),
        "wait_recorded": all("solve_wait_s" in s.extra for s in st1),
        "error": err,
    }


class FakeMegatronDispatcher:
    """Megatron-core's All-to-All dispatcher surface (older API), on the default process group."""

    def __init__(self, rank: int, world: int, experts: int) -> None:
        self.ep_size, self.tp_size, self.ep_group = world, 1, None
        self.num_experts, self.num_local_experts = experts, experts // world
        self.local_expert_indices = list(
            range(rank * self.num_local_experts, (rank + 1) * self.num_local_experts)
        )

    def token_permutation(self, hidden_states, probs, routing_map):
        return hidden_states.view(-1, hidden_states.shape[-1]), routing_map.sum(0), probs

    def token_unpermutation(self, expert_output, bias=None):
        return expert_output, bias


def megatron_hook_distributed(rank: int, world: int) -> dict:
    """The Megatron adapter's hook on gloo: counts all-gathered, solved on rank 0, broadcast."""
    from iclr25.methods.netmoe.adapters import (
        ExpertParallelLayout,
        plan_from_routing_maps,
        register_megatron_hook,
    )

    seq, batch, experts = 8, 2, 2 * world
    g = torch.Generator().manual_seed(7)
    maps = []
    for _ in range(world):  # every rank draws every rank's routing, to build the reference plan
        top = torch.rand(seq * batch, experts, generator=g).topk(2, dim=-1).indices
        maps.append(torch.zeros(seq * batch, experts, dtype=torch.bool).scatter_(1, top, True))
    want = plan_from_routing_maps(maps, ExpertParallelLayout(world, 2, experts), micro_batch=batch)
    out = {}
    for overlap in (False, True):
        d = FakeMegatronDispatcher(rank, world, experts)
        hook = register_megatron_hook(d, ranks_per_node=2, overlap=overlap)
        hidden = torch.randn(seq, batch, 4)
        d.token_permutation(hidden, maps[rank].float(), maps[rank])
        d.token_unpermutation(hidden.view(-1, 4))
        hook.remove()
        out[overlap] = hook.last.placement.device_of_sample.tolist()
    out["want"] = want.placement.device_of_sample.tolist()
    return out
