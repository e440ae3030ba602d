"""Pilot for the VBLL BO claim's non-stationary benchmark: ReLU NNDraw, 20 + 30 evaluations.

Runs on seeds the claim does not use (100 and up) and prints the final log10 simple regret of each
arm, to size the claim's bar before the claim is run. Usage:
``python experiments/vbll_bo_pilot.py [--seeds 100 101 102] [--dim 10]``.
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from iclr25.methods.vbll_bo import FitConfig, NNDraw, run_bo


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--arms", nargs="+", default=["vbll_ts", "gp_ts", "random"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    fit = FitConfig(max_epochs=300, patience=30, lr=1e-2)
    refit = FitConfig(max_epochs=50, patience=10, lr=1e-2)
    ts = {"num_restarts": 4, "raw_samples": 128}  # as the claim's V3 arms
    ei = {"num_restarts": 4, "raw_samples": 128}
    arms = {
        "vbll_ts": ("vbll", "ts", {"fit_config": fit, "refit_config": refit, **ts}),
        "gp_ts": ("gp", "ts", ts),
        "random": ("random", "random", {}),
        "vbll_logei": ("vbll", "logei", {"fit_config": fit, "refit_config": refit, **ei}),
        "gp_logei": ("gp", "logei", ei),
        "gp_matern_logei": ("gp_matern", "logei", ei),
        "ensemble_ts": ("ensemble", "ts", ts),
    }
    for seed in args.seeds:
        problem = NNDraw(args.dim, seed=seed, activation="relu", weight_var=4.0)
        for name in args.arms:
            surrogate, acquisition, kw = arms[name]
            start = time.perf_counter()
            r = run_bo(problem, surrogate, acquisition, 20, 30, seed, **kw)
            print(
                f"seed {seed} {name}: log10 regret {math.log10(max(r.final_regret, 1e-6)):.3f} "
                f"(f* {problem.optimal_value:.3f}), {time.perf_counter() - start:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
