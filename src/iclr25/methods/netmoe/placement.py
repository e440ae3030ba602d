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

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from .cost import Topology, link_bytes
from .layer import DenseMoE, ExpertParallelMoE, ExpertParallelStack

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
    """One distributed equivalence check (a stack of pre-norm MoE blocks, forward and backward).

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
        layers: MoE blocks of the stack (the placement persists across them).
        num_source: what the placed run's solver prices (see :class:`ExpertParallelMoE`).
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
    layers: int = 1
    num_source: Literal["current", "predicted", "oracle"] = "predicted"
    device: Literal["cpu", "cuda"] = "cpu"


def _placed_step(
    spec: EquivalenceSpec, placement: str, h_all: torch.Tensor, labels: torch.Tensor, readout: torch.Tensor,
    residual: str, *, stale_labels: bool = False,
) -> dict[str, Any]:  # fmt: skip
    rank, world = dist.get_rank(), dist.get_world_size()
    topo = Topology(spec.nodes, spec.gpus_per_node, bytes_per_token=spec.d_model * 4)
    stack = ExpertParallelStack([
        ExpertParallelMoE(
            spec.d_model, spec.d_ff, spec.num_experts, spec.top_k, topology=topo, placement=placement,  # type: ignore[arg-type]
            num_source=spec.num_source, residual=residual, capacity_factor=spec.capacity_factor,  # type: ignore[arg-type]
            seed=spec.seed, generator=torch.Generator().manual_seed(spec.seed + 1 + layer),
        )
        for layer in range(spec.layers)
    ]).to(h_all.device)  # fmt: skip
    per = spec.samples // world
    ids = torch.arange(rank * per, (rank + 1) * per, device=h_all.device)  # loader: contiguous ids per rank
    h = h_all[ids].clone().requires_grad_(True)
    y, new_ids, stats = stack(h, ids)
    lab = placed_labels(labels, ids if stale_labels else new_ids)  # stale: labels left behind
    logits = y @ readout  # [I_loc, S, V]: the following (data-parallel) layers run on the new device
    loss_sum = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1), reduction="sum")
    loss = global_token_loss(loss_sum, lab.numel())
    loss.backward()
    stack.sync_replicated_grads()
    total = loss.detach().clone()
    dist.all_reduce(total)
    return {"stack": stack, "y": y.detach(), "new_ids": new_ids, "stats": stats, "loss": float(total), "h": h}


def equivalence_worker(rank: int, world: int, spec: EquivalenceSpec) -> dict[str, Any]:
    """One rank of the equivalence check; run it with :func:`~iclr25.methods.netmoe.launch.run`.

    Runs the stack with every sample left in place and with NetMoE's placement (forward, loss
    with labels by global id, backward), builds the single-process dense reference (the same
    blocks in sequence) on every rank, and compares outputs (after undoing the permutation:
    samples by global id), loss and gradients of every layer; checks every per-link byte counter
    of every layer's dispatch and combine against :func:`~iclr25.methods.netmoe.link_bytes`
    (layer l dispatches from where layer l-1 left each sample), that all ranks hold the same
    placements, and runs the labels-left-behind variant. A discarded warm-up step runs first,
    so that the timed All-to-Alls (``a2a_s``, slowest rank) of both runs start on open links.

    Args:
        rank: this process's rank.
        world: J.
        spec: the check.

    Returns:
        Metrics (floats), the same on every rank.
    """
    topo = Topology(spec.nodes, spec.gpus_per_node, bytes_per_token=spec.d_model * 4)
    topo.check_world(world)
    if spec.samples % world:
        raise ValueError(f"samples={spec.samples} is not divisible across {world} ranks")
    if spec.layers < 1:
        raise ValueError(f"layers must be >= 1, got {spec.layers}")
    dev = torch.device("cpu")
    if spec.device == "cuda":
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
    batch = make_block_batch(spec.samples, spec.seq_len, spec.d_model, spec.vocab, seed=spec.seed)
    h_all, labels, readout = (t.to(dev) for t in batch)
    dense = [
        DenseMoE(
            spec.d_model, spec.d_ff, spec.num_experts, spec.top_k,
            generator=torch.Generator().manual_seed(spec.seed + 1 + layer),
            capacity_factor=spec.capacity_factor,
        ).to(dev)
        for layer in range(spec.layers)
    ]  # fmt: skip
    y_ref = h_all
    for blk in dense:
        y_ref = blk(y_ref)[0]
    loss_ref = F.cross_entropy((y_ref @ readout).reshape(-1, spec.vocab), labels.reshape(-1))
    loss_ref.backward()
    out: dict[str, Any] = {}
    # A discarded warm-up step first, so that neither timed run pays gloo's connection set-up.
    _placed_step(spec, "identity", h_all, labels, readout, spec.residual)
    runs = {
        "identity": _placed_step(spec, "identity", h_all, labels, readout, spec.residual),
        "netmoe": _placed_step(spec, "netmoe", h_all, labels, readout, spec.residual),
    }
    lo, hi = rank * (spec.num_experts // world), (rank + 1) * (spec.num_experts // world)
    node = topo.node_array()
    cross = node[:, None] != node[None, :]
    for name, r in runs.items():
        ids = r["new_ids"]
        err_out = float((r["y"] - y_ref.detach()[ids]).abs().max())
        ge = gg = gn = 0.0
        bytes_ok = True
        inter = 0.0
        where = np.repeat(np.arange(world), spec.samples // world)  # the loader's placement
        for layer, blk, stats in zip(r["stack"].layers, dense, r["stats"], strict=True):
            ge = max(ge, *(float((getattr(layer, p).grad - getattr(blk, p).grad[lo:hi]).abs().max())
                           for p in ("w1", "b1", "w2", "b2")))  # fmt: skip
            gg = max(gg, float((layer.gate.grad - blk.gate.grad).abs().max()))
            gn = max(
                gn,
                float((layer.norm.weight.grad - blk.norm.weight.grad).abs().max()),
                float((layer.norm.bias.grad - blk.norm.bias.grad).abs().max()),
            )
            bytes_ok &= np.array_equal(stats.origin, where)
            model_c = link_bytes(
                stats.routed, stats.placement.device_of_sample, topo, origin=stats.origin,
                residual=layer.residual, tokens_per_sample=spec.seq_len,
            )  # fmt: skip
            model_d = link_bytes(stats.routed, stats.origin, topo).T
            bytes_ok &= np.array_equal(model_c, stats.combine_links) and np.array_equal(
                model_d, stats.dispatch_links
            )
            inter += float(stats.combine_links[cross].sum() + stats.dispatch_links[cross].sum())
            where = stats.placement.device_of_sample
        a2a_s = sum(float(st.extra.get("a2a_s", 0.0)) for st in r["stats"])
        vals = torch.tensor(
            [err_out, ge, gg, gn, abs(r["loss"] - loss_ref.item()), 0.0 if bytes_ok else 1.0, a2a_s],
            device=dev,
            dtype=torch.float64,
        )
        dist.all_reduce(vals, op=dist.ReduceOp.MAX)
        last = r["stats"][-1]
        out[name] = {
            "out_err": float(vals[0]), "grad_expert_err": float(vals[1]), "grad_gate_err": float(vals[2]),
            "grad_norm_err": float(vals[3]), "loss_err": float(vals[4]), "bytes_exact": float(vals[5] == 0),
            "inter_bytes": inter, "a2a_s": float(vals[6]),
            "total_bytes": float(sum(st.combine_links.sum() + st.dispatch_links.sum() for st in r["stats"])),
            "moved": float((last.placement.device_of_sample != r["stats"][0].origin).sum()),
            "solve_s": float(sum(st.solve_s for st in r["stats"])),
        }  # fmt: skip
        agree = True
        for st in r["stats"]:
            plans = [torch.empty(spec.samples, dtype=torch.int64, device=dev) for _ in range(world)]
            dist.all_gather(plans, torch.as_tensor(st.placement.device_of_sample, device=dev))
            agree &= all(torch.equal(p, plans[0]) for p in plans)
        out[name]["placement_agree"] = float(agree)
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
    return out
