"""Diagnosis of the NetMoE real-routing check: how much locality the text MoE LM's routing has.

Trains the claim's byte-level MoE LM (full-budget config) on one seed (default 100, the pilot's,
which the claim does not use), then, for held-out samples of several lengths S, reports the mean
per-sample routing entropy, NetMoE's inter-node byte ratio against plain expert parallelism (the
paper's Table 5 quantity), and the same ratio for greedy placement on the same objective (when
greedy is close to Kuhn-Munkres). Also the entropy per file kind at S = 1024.

With ``--synthetic``, instead: entropy and inter-node ratio of Dirichlet traces at the same shape.

Run: ``python experiments/netmoe_locality.py [--seed 100] [--steps 900] [--synthetic]``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from iclr25.methods.netmoe import (
    Topology,
    assignment_counts,
    greedy_placement,
    identity_placement,
    iteration_traffic,
    plan_layers,
    random_placement,
    solve_two_stage,
    traffic,
)
from iclr25.methods.netmoe.config import ClaimConfig
from iclr25.methods.netmoe.routing_data import routing_entropy, synthetic_trace
from iclr25.methods.netmoe.text_lm import TextMoELM, package_text_corpus, train_text_moe_lm


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--steps", type=int, default=None, help="LM training steps (default: the claim's)")
    ap.add_argument("--synthetic", action="store_true", help="only the synthetic entropy-vs-ratio table")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = ClaimConfig() if args.steps is None else ClaimConfig(lm_steps=args.steps)
    topo = Topology(cfg.nodes, cfg.gpus_per_node, cfg.bw_intra, cfg.bw_inter, cfg.bytes_per_token)
    j = topo.devices
    dev = np.arange(cfg.lm_experts) // (cfg.lm_experts // j)
    if args.synthetic:
        _synthetic(cfg, topo, dev)
        return
    corpus = package_text_corpus(context=cfg.lm_context, sample_len=cfg.eval_seq_len)
    lm = TextMoELM(
        d_model=cfg.lm_d_model, n_layers=cfg.lm_layers, d_ff=cfg.lm_d_ff, num_experts=cfg.lm_experts,
        top_k=cfg.top_k, context=cfg.lm_context, generator=torch.Generator().manual_seed(args.seed),
    )  # fmt: skip
    train_text_moe_lm(
        lm, corpus.train, steps=cfg.lm_steps, batch_size=cfg.lm_batch, aux_weight=cfg.lm_aux_weight,
        seed=args.seed, progress=lambda s, d, t: print(f"{s} {d}/{t}", flush=True),
    )  # fmt: skip
    out: dict = {}
    ident = identity_placement(cfg.eval_samples, topo).device_of_sample
    for seq in (64, 256, 1024):
        ent, rows = [], {"netmoe": [], "greedy": [], "random": []}
        for b in range(args.batches):
            rng = np.random.default_rng([args.seed, 50, b])
            pick = rng.choice(len(corpus.heldout), size=cfg.eval_samples, replace=False)
            start = int(rng.integers(0, cfg.eval_seq_len - seq + 1))
            tr = lm.trace(torch.as_tensor(corpus.heldout[pick, start : start + seq]))
            nums = [assignment_counts(ids, dev, j) for ids in tr.expert_ids]
            pred = [assignment_counts(ids, dev, j) for ids in tr.predicted_next]
            ent += [routing_entropy(ids, cfg.lm_experts) for ids in tr.expert_ids]
            base = iteration_traffic(nums, [ident] * len(nums), topo, ident).inter_bytes
            plans = {
                "netmoe": plan_layers(nums, topo, num_source="predicted", predicted=pred),
                "greedy": plan_layers(
                    nums, topo, num_source="predicted", predicted=pred, solver=greedy_placement
                ),
                "random": [random_placement(cfg.eval_samples, topo, rng) for _ in nums],
            }
            for arm, pls in plans.items():
                it = iteration_traffic(nums, [p.device_of_sample for p in pls], topo, ident)
                rows[arm].append(it.inter_bytes / base)
        out[f"S={seq}"] = {"entropy": float(np.mean(ent)), **{a: float(np.mean(v)) for a, v in rows.items()}}
        print(seq, out[f"S={seq}"], flush=True)
    tr = lm.trace(torch.as_tensor(corpus.heldout))
    per_kind = {}
    for k, name in enumerate(corpus.kinds):
        sel = corpus.heldout_kind == k
        if sel.any():
            per_kind[name] = float(
                np.mean([routing_entropy(ids[sel], cfg.lm_experts) for ids in tr.expert_ids])
            )
    out["entropy_per_kind_S1024"] = per_kind
    out["entropy_max"] = float(np.log(cfg.lm_experts))
    print(json.dumps(out, indent=1))


def _synthetic(cfg: ClaimConfig, topo: Topology, dev: np.ndarray) -> None:
    """Entropy and one-layer NetMoE inter-node ratio of Dirichlet traces at the claim's shape."""
    ident = identity_placement(cfg.eval_samples, topo).device_of_sample
    for beta in (0.03, 0.1, 0.3, 1.0, 3.0):
        ratios, ents = [], []
        for t in range(3):
            ids = synthetic_trace(
                cfg.eval_samples, cfg.eval_seq_len, cfg.lm_experts, cfg.top_k, beta=beta, seed=[9, t]
            )
            num = assignment_counts(ids, dev, topo.devices)
            placed = solve_two_stage(num, topo).device_of_sample
            ratios.append(traffic(num, placed, topo).inter_bytes / traffic(num, ident, topo).inter_bytes)
            ents.append(routing_entropy(ids, cfg.lm_experts))
        print(f"beta {beta}: entropy {np.mean(ents):.3f} nats, inter-node ratio {np.mean(ratios):.3f}")


if __name__ == "__main__":
    main()
