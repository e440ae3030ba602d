"""Pre-registered pilot of the NetMoE real-routing check, on seed 100 (the claim uses seeds 0, 1, 2).

Trains the byte-level MoE LM of the claim at its full-budget config, places its held-out routing
with every arm of the claim, and prints the statistics the claim's gates read. The gates'
thresholds were set from this output before any claim seed was run (see the method README).

Run: ``python experiments/netmoe_pilot.py [--seed 100] [--set field=value ...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from iclr25.methods.netmoe.claim import _real_routing
from iclr25.methods.netmoe.config import ClaimConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--set", nargs="*", default=[], help="config overrides, field=value")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    cfg = ClaimConfig()
    for kv in args.set:
        k, v = kv.split("=", 1)
        cfg = dataclasses.replace(cfg, **{k: type(getattr(cfg, k))(v)})
    m: dict = {}
    t0 = time.perf_counter()
    _real_routing(
        cfg, args.seed, m, {}, lambda stage, done, total: print(f"{stage} {done}/{total}", flush=True)
    )
    stats = {
        "netmoe_vs_random": m["netmoe"]["eq1_ratio"] / m["random"]["eq1_ratio"],
        "shuffled_vs_random": m["shuffled"]["eq1_ratio"] / m["random"]["eq1_ratio"],
        "netmoe_vs_current": m["netmoe"]["eq1_ratio"] / m["current"]["eq1_ratio"],
        "broken_predictor_vs_current": m["broken_predictor"]["eq1_ratio"] / m["current"]["eq1_ratio"],
        "oracle_vs_current": m["oracle"]["eq1_ratio"] / m["current"]["eq1_ratio"],
    }
    print(json.dumps({"seconds": time.perf_counter() - t0, "metrics": m, "gate_stats": stats}, indent=1))


if __name__ == "__main__":
    main()
