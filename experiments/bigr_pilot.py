"""Pilot of the BiGR claim on a seed outside the check's seeds (timing per stage and all metrics).

Run: python experiments/bigr_pilot.py [seed] [key=value ...]
"""

from __future__ import annotations

import json
import sys
import time

import torch

from iclr25.methods.bigr.claim import CLAIM

if __name__ == "__main__":
    torch.set_num_threads(1)
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    overrides = dict(a.split("=", 1) for a in sys.argv[2:])
    t0, c0 = time.perf_counter(), time.process_time()
    last: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        now, cpu = time.perf_counter() - t0, time.process_time() - c0
        if stage not in last:
            print(f"[wall {now:7.1f}s cpu {cpu:7.1f}s] start {stage}", flush=True)
        last[stage] = now

    result = CLAIM.run("full", seed=seed, overrides=overrides, progress=progress)
    print(f"total wall {time.perf_counter() - t0:.1f}s cpu {time.process_time() - c0:.1f}s")
    print(json.dumps(result.metrics, indent=1))
    for key, s in result.series.items():
        print(key, s.x, {k: [round(v, 3) for v in ys] for k, ys in s.lines.items()})
