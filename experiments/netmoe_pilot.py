"""Pre-registered pilot of the NetMoE real-routing check, on seed 100 (the claim uses seeds 0, 1, 2).

Trains one routing source of the claim at its full-budget config (``domain``: the Mixtral on
mixed-domain token streams, the gated source; ``text``: the byte-level MoE LM on package text),
places its held-out routing with every arm of the claim, and prints the statistics the claim's
gates read and the source's routing entropy. Each source's relative thresholds were set from this
output before any claim seed was run on it (see the method README).

Run: ``python experiments/netmoe_pilot.py [--source domain|text] [--seed 100] [--set field=value ...]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from iclr25.methods.netmoe.claim import _domain_routing, _text_routing
from iclr25.methods.netmoe.config import ClaimConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--source", choices=("domain", "text"), default="domain")
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
    source, p = (_domain_routing, "") if args.source == "domain" else (_text_routing, "text_")
    source(cfg, args.seed, m, {}, lambda stage, done, total: print(f"{stage} {done}/{total}", flush=True))

    def r(a: str, b: str) -> float:
        return m[p + a]["eq1_ratio"] / m[p + b]["eq1_ratio"]

    stats = {
        "netmoe_vs_random": r("netmoe", "random"),
        "shuffled_vs_random": r("shuffled", "random"),
        "oracle_vs_random": r("oracle", "random"),
        "netmoe_vs_current": r("netmoe", "current"),
        "broken_predictor_vs_current": r("broken_predictor", "current"),
        "oracle_vs_current": r("oracle", "current"),
        "netmoe_inter": m[p + "netmoe"]["inter_ratio"],
        "oracle_inter": m[p + "oracle"]["inter_ratio"],
    }
    print(json.dumps({"seconds": time.perf_counter() - t0, "metrics": m, "gate_stats": stats}, indent=1))


if __name__ == "__main__":
    main()
