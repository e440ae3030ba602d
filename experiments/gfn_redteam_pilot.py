"""Pilot of the GFlowNet red-teaming claim on a calibration seed (outside the check's seeds).

Runs one seed of the claim (or only its Part A) and prints every arm's metrics.

    python experiments/gfn_redteam_pilot.py --seed 100
    python experiments/gfn_redteam_pilot.py --seed 100 --part-a --set exact_steps=1000 exact_lr=5e-3
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.methods.gfn_redteam.claim import CLAIM, _part_a


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--budget", default="full")
    parser.add_argument("--part-a", action="store_true", help="run only Part A (exactness)")
    parser.add_argument("--set", nargs="*", default=[], help="config overrides key=value")
    args = parser.parse_args()
    torch.set_num_threads(1)
    overrides = dict(a.split("=", 1) for a in args.set)
    t0 = time.perf_counter()
    if args.part_a:
        metrics: dict = {}
        series: dict = {}
        _part_a(CLAIM.config(args.budget, overrides), args.seed, metrics, series, lambda *a: None)
        print("TV curve", [round(v, 3) for v in series["exact_tv"].lines["TB + replay"]])
    else:
        metrics = CLAIM.run(args.budget, seed=args.seed, overrides=overrides).metrics
    for arm, ms in metrics.items():
        print(arm, {k: round(v, 3) for k, v in ms.items()})
    print(f"wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
