"""COMET diagnosis: the keep fraction p_k at large width on the distorted-digits set.

Run as a script (never imported by the library)::

    python experiments/comet_keep_sweep.py --seed 10 --width 1024 --keep 0.1 0.25 0.5 0.9

Trains the dense network and COMET at each p_k on the same backbone, the same batches and the
claim's distorted-digits set (20 epochs, Adam 1e-3, batch 32), and prints each run's test
accuracy at its best validation epoch, that epoch, the last-epoch accuracy and the mean
training loss of epoch 1. The claim fixes p_k = 0.5; the paper sweeps p_k in {0.1, 0.5, 0.9}
and reports that the benefit needs enough capacity, so this checks whether another p_k changes
the sign of COMET - dense.
Seed 10 lies outside the claim's seeds (0-2).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from iclr25.methods.comet.claim import _FULL, _build, _fit, _hard_digits, _split_val


def main() -> None:
    """Parse the arguments, train the arms and print one line per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--keep", type=float, nargs="+", default=[0.1, 0.25, 0.5, 0.9])
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = _FULL
    data = _split_val(_hard_digits(cfg, args.seed), cfg.g4_val_frac, args.seed)
    d_in, n_tr = data[0].shape[1], len(data[0])
    hidden = (args.width,) * 3
    runs = [("dense", cfg.p_keep)] + [("comet", p) for p in args.keep]
    for arm, p in runs:
        t0 = time.perf_counter()
        run_cfg = dataclasses.replace(cfg, p_keep=p)
        fit = _fit(_build(arm, d_in, n_tr, hidden, p, args.seed), data, run_cfg, args.seed)
        label = arm if arm == "dense" else f"comet p_k={p}"
        print(
            f"{label:16s} width {args.width}: test acc at best val epoch {fit.test[fit.best]:.4f} "
            f"(epoch {fit.best + 1}), last {fit.test[-1]:.4f}, epoch-1 loss {fit.auc1:.3f} "
            f"[{time.perf_counter() - t0:.0f} s]",
            flush=True,
        )


if __name__ == "__main__":
    main()
