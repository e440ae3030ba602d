"""``torchrun`` entry point: a few steps of a placed expert-parallel MoE stack (NetMoE's objective).

Runs the mechanism of *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*
(Liu et al., ICLR 2025, Algorithm 1) on a real process group: gloo on CPU, NCCL on GPU.
On one CPU machine, 4 processes emulate 2 nodes x 2 devices::

    torchrun --nproc-per-node 4 -m iclr25.methods.netmoe.demo --gpus-per-node 2

Every layer's placement prices its own combine plus the next layer's dispatch, with the next
layer's routing predicted from this layer's input (``num_source="predicted"``), and persists into
the next layer. Rank 0 prints, per step, the measured inter/intra-node bytes of all dispatches
and combines of the placed stack next to those of plain expert parallelism, and whether the
outputs agree, then one line per layer with the device of every sample. ``--overlap-solve`` runs
each solve in a background thread while the dispatch and the expert compute run (Sec. 4).

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR`` (no arXiv version established; no official code).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
import torch.distributed as dist

from .launch import init_from_env
from .layer import ExpertParallelMoE, ExpertParallelStack
from .placement import make_block_batch

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, join the ``torchrun`` job, run the steps; returns the exit code.

    Outside ``torchrun`` it exits with status 2 and one line on stderr saying how to launch it.
    """
    ap = argparse.ArgumentParser(
        prog="python -m iclr25.methods.netmoe.demo",
        description="NetMoE expert-parallel layer demo (run under torchrun)",
    )
    ap.add_argument("--gpus-per-node", type=int, default=None, help="devices per (emulated) node")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--samples-per-rank", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--experts-per-rank", type=int, default=2)
    ap.add_argument("--layers", type=int, default=2, help="MoE layers of the stack")
    ap.add_argument("--backend", default=None, help="gloo or nccl (default: nccl if CUDA is available)")
    ap.add_argument(
        "--overlap-solve",
        action="store_true",
        help="solve each placement in a background thread, overlapped with dispatch and expert compute",
    )
    args = ap.parse_args(argv)
    try:
        topo = init_from_env(args.backend, timeout_s=120.0, gpus_per_node=args.gpus_per_node)
    except RuntimeError as err:
        ap.exit(2, f"{ap.prog}: error: {err}\n")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{torch.cuda.current_device()}" if dist.get_backend() == "nccl" else "cpu")
    topo = type(topo)(topo.nodes, topo.gpus_per_node, bytes_per_token=args.d_model * 4)
    experts = args.experts_per_rank * world
    stacks = {
        name: ExpertParallelStack([
            ExpertParallelMoE(
                args.d_model, 2 * args.d_model, experts, 2, topology=topo, placement=name,
                num_source="predicted", generator=torch.Generator().manual_seed(layer),
                overlap_solve=args.overlap_solve and name == "netmoe",
            )
            for layer in range(args.layers)
        ]).to(device)
        for name in ("identity", "netmoe")
    }  # fmt: skip
    node = topo.node_array()
    cross = node[:, None] != node[None, :]
    off = ~cross & ~np.eye(world, dtype=bool)
    n_glob = args.samples_per_rank * world
    for step in range(args.steps):
        h_all, _, _ = make_block_batch(n_glob, args.seq_len, args.d_model, 2, seed=step)
        ids = torch.arange(rank * args.samples_per_rank, (rank + 1) * args.samples_per_rank)
        outs = {}
        for name, stack in stacks.items():
            y, new_ids, stats = stack(h_all[ids].to(device), ids.to(device))
            full = torch.zeros(n_glob, args.seq_len, args.d_model, device=device)
            full[new_ids] = y.detach()
            dist.all_reduce(full)
            outs[name] = (full, stats)
        if rank == 0:
            same = torch.allclose(outs["identity"][0], outs["netmoe"][0], atol=1e-5)

            def kb(sts: list, mask: np.ndarray) -> float:
                return (
                    sum(float(s.combine_links[mask].sum() + s.dispatch_links[mask].sum()) for s in sts) / 1e3
                )

            row = " ".join(
                f"{n}: inter {kb(sts, cross):.1f} kB intra {kb(sts, off):.1f} kB"
                for n, (_, sts) in outs.items()
            )
            sts = outs["netmoe"][1]
            moved = int((sts[-1].placement.device_of_sample != sts[0].origin).sum())
            print(f"step {step}: {row}; moved {moved}/{n_glob} samples; outputs equal: {same}")
            for layer, st in enumerate(sts):
                where = " ".join(str(int(g)) for g in st.placement.device_of_sample)
                print(f"step {step} layer {layer} placement (device of samples 0..{n_glob - 1}): {where}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
