"""The rest of a placed training step, and the distributed equivalence check of NetMoE.

In *NetMoE: Accelerating MoE Training through Dynamic Sample Placement* (Liu et al., ICLR 2025,
Sec. 4) a sample that the combine All-to-All moves to a new device continues its forward there:
the layers after the MoE block, its labels and its loss all follow the same permutation. Here:
labels are read by global sample id on the new device (the loader is deterministic, so every
rank knows the whole batch), and the loss is normalised by the **global** token count. The
placement is a permutation, so outputs, loss and gradients must equal the unplaced run;
:func:`equivalence_worker` measures that on ``J`` processes against a single-process
:class:`~iclr25.methods.netmoe.DenseMoE` and checks the per-link byte counters against the cost
model.

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from .cost import Topology, link_bytes
from .layer import DenseMoE, ExpertParallelMoE

__all__ = ["EquivalenceSpec", "equivalence_worker", "global_token_loss", "make_block_batch", "placed_labels"]


def placed_labels(labels: torch.Tensor, sample_ids: torch.Tensor) -> torch.Tensor:
    """Labels of the samples now on this rank, read by global id from the deterministic batch.

    Shape:
        labels ``[I, S]`` (the whole global batch), sample_ids ``[I_loc]`` -> ``[I_loc, S]``.

    Example:
        >>> placed_labels(torch.arange(6).view(3, 2), torch.tensor([2, 0])).tolist()
        [[4, 5], [0, 1]]
    """
    return labels[sample_ids]


def global_token_loss(token_loss_sum: torch.Tensor, tokens: int, group: Any = None) -> torch.Tensor:
    """This rank's share of the mean loss over all tokens of the global batch.

    Divides by the all-reduced token count, so summing the ranks' gradients gives the gradient of
    the global mean however samples are placed (a per-rank mean would not).

    Args:
        token_loss_sum: the sum of this rank's per-token losses (scalar).
        tokens: this rank's token count.
        group: the data-parallel group (None: no distributed reduction).

    Returns:
        ``token_loss_sum / total_tokens`` (scalar).
    """
    total = torch.tensor([float(tokens)], device=token_loss_sum.device)
    if group is not None or (dist.is_available() and dist.is_initialized()):
        dist.all_reduce(total, group=group)
    return token_loss_sum / total[0]


def make_block_batch(
    n_samples: int, seq_len: int, d_model: int, vocab: int, *, seed: int, locality: float = 2.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A global batch for one MoE block: hidden states with per-sample locality, labels, a readout.

    Each sample's tokens share a random direction (scaled by ``locality``) plus noise, so a
    random gate routes them to similar experts.

    Returns:
        ``h [I, S, d]``, ``labels [I, S]`` (int64), ``readout [d, vocab]``.
    """
    g = torch.Generator().manual_seed(seed)
    centre = torch.randn(n_samples, 1, d_model, generator=g) * locality
    h = centre + torch.randn(n_samples, seq_len, d_model, generator=g)
    labels = torch.randint(0, vocab, (n_samples, seq_len), generator=g)
    readout = torch.randn(d_model, vocab, generator=g) / d_model**0.5
    return h, labels, readout


@dataclass(frozen=True)
class EquivalenceSpec:
    """One distributed equivalence check (a pre-norm MoE block, forward and backward).

    Args:
        nodes: N.
        gpus_per_node: G (J = N G processes).
        d_model: d.
        d_ff: expert hidden width.
        num_experts: E.
        top_k: k.
        samples: I (global batch).
        seq_len: S.
        vocab: classes of the loss readout.
        seed: data and parameter seed.
        residual: residual mode of the placed run.
        capacity_factor: None (dropless) or the capacity factor.
        emulate_bandwidth: optional ``(bw_inter, bw_intra)`` bytes/s for timed steps (report-only).
        timed_steps: forward+backward steps timed per placement (0: none).
        device: ``"cpu"`` (gloo) or ``"cuda"`` (NCCL; rank r uses ``cuda:r``).
    """

    nodes: int = 2
    gpus_per_node: int = 2
    d_model: int = 32
    d_ff: int = 64
    num_experts: int = 4
    top_k: int = 2
    samples: int = 8
    seq_len: int = 16
    vocab: int = 11
    seed: int = 0
    residual: Literal["expert_side", "migrate"] = "expert_side"
    capacity_factor: float | None = None
    emulate_bandwidth: tuple[float, float] | None = None
    timed_steps: int = 0
    device: Literal["cpu", "cuda"] = "cpu"


def _placed_step(
    spec: EquivalenceSpec, placement: str, h_all: torch.Tensor, labels: torch.Tensor, readout: torch.Tensor,
    residual: str, *, stale_labels: bool = False, emulate: tuple[float, float] | None = None,
) -> dict[str, Any]:  # fmt: skip
    rank, world = dist.get_rank(), dist.get_world_size()
    topo = Topology(spec.nodes, spec.gpus_per_node, bytes_per_token=spec.d_model * 4)
    layer = ExpertParallelMoE(
        spec.d_model, spec.d_ff, spec.num_experts, spec.top_k, topology=topo, placement=placement,  # type: ignore[arg-type]
        residual=residual, capacity_factor=spec.capacity_factor, seed=spec.seed,  # type: ignore[arg-type]
        generator=torch.Generator().manual_seed(spec.seed + 1), emulate_bandwidth=emulate,
    ).to(h_all.device)  # fmt: skip
    per = spec.samples // world
    ids = torch.arange(rank * per, (rank + 1) * per, device=h_all.device)  # loader: contiguous ids per rank
    h = h_all[ids].clone().requires_grad_(True)
    y, new_ids, stats = layer(h, ids)
    lab = placed_labels(labels, ids if stale_labels else new_ids)  # stale: labels left behind
    logits = y @ readout  # [I_loc, S, V]: the following (data-parallel) layers run on the new device
    loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1), reduction="sum")
    loss = global_token_loss(loss_sum, lab.numel())
    loss.backward()
    layer.sync_replicated_grads()
    total = loss.detach().clone()
    dist.all_reduce(total)
    return {"layer": layer, "y": y.detach(), "new_ids": new_ids, "stats": stats, "loss": float(total), "h": h}


def equivalence_worker(rank: int, world: int, spec: EquivalenceSpec) -> dict[str, Any]:
    """One rank of the equivalence check; run it with :func:`~iclr25.methods.netmoe.launch.run`.

    Runs the block with the identity placement and with NetMoE's placement (forward, loss with
    labels by global id, backward), builds the single-process dense reference on every rank, and
    compares outputs (after undoing the permutation: samples by global id), loss and gradients;
    checks every per-link byte counter against :func:`~iclr25.methods.netmoe.link_bytes`, that all
    ranks hold the same placement, and runs the labels-left-behind variant.

    Args:
        rank: this process's rank.
        world: J.
        spec: the check.

    Returns:
        Metrics (floats) and, per rank, the placement array.
    """
    topo = Topology(spec.nodes, spec.gpus_per_node, bytes_per_token=spec.d_model * 4)
    topo.check_world(world)
    if spec.samples % world:
        raise ValueError(f"samples={spec.samples} is not divisible across {world} ranks")
    dev = torch.device("cpu")
    if spec.device == "cuda":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    batch = make_block_batch(spec.samples, spec.seq_len, spec.d_model, spec.vocab, seed=spec.seed)
    h_all, labels, readout = (t.to(dev) for t in batch)
    dense = DenseMoE(
        spec.d_model, spec.d_ff, spec.num_experts, spec.top_k,
        generator=torch.Generator().manual_seed(spec.seed + 1), capacity_factor=spec.capacity_factor,
    ).to(dev)  # fmt: skip
    y_ref, _, _ = dense(h_all)
    loss_ref = F.cross_entropy((y_ref @ readout).reshape(-1, spec.vocab), labels.reshape(-1))
    loss_ref.backward()
    out: dict[str, Any] = {}
    runs = {
        "identity": _placed_step(spec, "identity", h_all, labels, readout, spec.residual),
        "netmoe": _placed_step(spec, "netmoe", h_all, labels, readout, spec.residual),
    }
    lo, hi = rank * (spec.num_experts // world), (rank + 1) * (spec.num_experts // world)
    for name, r in runs.items():
        layer, stats = r["layer"], r["stats"]
        ids = r["new_ids"]
        err_out = float((r["y"] - y_ref.detach()[ids]).abs().max())
        ge = max(
            float((getattr(layer, p).grad - getattr(dense, p).grad[lo:hi]).abs().max())
            for p in ("w1", "b1", "w2", "b2")
        )
        gg = float((layer.gate.grad - dense.gate.grad).abs().max())
        gn = max(
            float((layer.norm.weight.grad - dense.norm.weight.grad).abs().max()),
            float((layer.norm.bias.grad - dense.norm.bias.grad).abs().max()),
        )
        origin = stats.origin
        model_c = link_bytes(
            stats.num, stats.placement.device_of_sample, topo, origin=origin,
            residual=r["layer"].residual, tokens_per_sample=spec.seq_len,
        )  # fmt: skip
        model_d = link_bytes(stats.num, origin, topo).T
        bytes_ok = np.array_equal(model_c, stats.combine_links) and np.array_equal(
            model_d, stats.dispatch_links
        )
        vals = torch.tensor(
            [err_out, ge, gg, gn, abs(r["loss"] - loss_ref.item()), 0.0 if bytes_ok else 1.0], device=dev
        )
        dist.all_reduce(vals, op=dist.ReduceOp.MAX)
        node = topo.node_array()
        cross = node[:, None] != node[None, :]
        local = np.eye(world, dtype=bool)
        recv_inter = np.where(cross, stats.combine_links, 0.0).sum(0)  # [J] bytes received per rank
        recv_intra = np.where(~cross & ~local, stats.combine_links, 0.0).sum(0)
        out[name] = {
            "out_err": float(vals[0]), "grad_expert_err": float(vals[1]), "grad_gate_err": float(vals[2]),
            "grad_norm_err": float(vals[3]), "loss_err": float(vals[4]), "bytes_exact": float(vals[5] == 0),
            "combine_inter_bytes": float(stats.combine_links[cross].sum()),
            "combine_intra_bytes": float(stats.combine_links[~cross & ~np.eye(world, dtype=bool)].sum()),
            "combine_tmax": float((recv_inter / topo.bw_inter + recv_intra / topo.bw_intra).max()),
            "moved": float((stats.placement.device_of_sample != origin).sum()),
            "solve_s": float(stats.solve_s),
        }  # fmt: skip
        plans = [torch.empty(spec.samples, dtype=torch.int64, device=dev) for _ in range(world)]
        dist.all_gather(plans, torch.as_tensor(stats.placement.device_of_sample, device=dev))
        out[name]["placement_agree"] = float(all(torch.equal(p, plans[0]) for p in plans))
    # Both runs agree with each other after undoing the permutation (gathered by global id).
    ys = {}
    for name, r in runs.items():
        full = torch.zeros_like(y_ref)
        full[r["new_ids"]] = r["y"]
        dist.all_reduce(full)
        ys[name] = full
    out["netmoe"]["out_err_vs_identity"] = float((ys["netmoe"] - ys["identity"]).abs().max())
    # Negative control: labels left on the old device (read by the old ids after the move).
    stale = _placed_step(spec, "netmoe", h_all, labels, readout, spec.residual, stale_labels=True)
    out["stale_labels"] = {"loss_err": abs(stale["loss"] - loss_ref.item())}
    if spec.timed_steps and spec.emulate_bandwidth is not None:
        # Alternate the placements step by step and keep the median: a shared machine is noisy.
        times: dict[str, list[float]] = {"identity": [], "netmoe": []}
        for _ in range(spec.timed_steps):
            for name in times:
                dist.barrier()
                t0 = time.perf_counter()
                _placed_step(
                    spec, name, h_all, labels, readout, spec.residual, emulate=spec.emulate_bandwidth
                )
                dist.barrier()
                times[name].append(time.perf_counter() - t0)
        for name, ts in times.items():
            out[name]["step_s"] = float(np.median(ts))
    return out
