"""Calibration of the wicked_oddities bed: clean, dirty-label and random clean-label only.

Pilot seed 100 (outside the claim's seeds 0-2); no hard or easy selection is run here. Rule:
keep the first candidate whose final-epoch clean CA >= 0.85, dirty-label ASR >= 0.8 and random
clean-label ASR in [0.1, 0.6] at the paper's rate (10 % of the target class). The README's table
lists every candidate tried and the order in which they were added. Each call runs one bed with
BadNets 3 x 3, then 2 x 2, stopping at the first that meets the rule. Run, e.g.:

    .venv/bin/python experiments/wicked_oddities_calibrate.py                  # the claim's bed
    .venv/bin/python experiments/wicked_oddities_calibrate.py --n-train 4000 --epochs 60 --constant
"""

from __future__ import annotations

import dataclasses
import sys
import time

import torch

from iclr25.methods.wicked_oddities import (
    BadNetsTrigger,
    ClaimConfig,
    HardnessSelector,
    PoisonedDataset,
    TensorImageDataset,
    attack_success_rate,
    clean_accuracy,
    poison_budget,
    shapes_pools,
    train_victim,
)

CANDIDATES = ((3, 1), (2, 1))  # (patch size, offset)


def main(seed: int, n_train: int | None, epochs: int | None, constant: bool) -> None:
    torch.set_num_threads(1)
    cfg = ClaimConfig()
    vcfg = dataclasses.replace(
        cfg.victim,
        epochs=epochs or cfg.victim.epochs,
        schedule="constant" if constant else cfg.victim.schedule,
    )
    pools = shapes_pools(seed, 1, n_train or cfg.shapes_n_train, cfg.shapes_n_test)
    x, y = pools.train.images, pools.train.labels
    target, vseed = cfg.shapes_target, 1000 * seed + 99
    idx = torch.where(y == target)[0]
    budget = poison_budget(cfg.budget_frac, len(idx))
    for size, offset in CANDIDATES:
        trig = BadNetsTrigger(size, offset)
        gen = torch.Generator().manual_seed(vseed)
        others = torch.where(y != target)[0]
        pick = others[torch.randperm(len(others), generator=gen)[:budget]]
        xd, yd = x.clone(), y.clone()
        xd[pick], yd[pick] = trig.apply(x[pick]), target
        sel = HardnessSelector(strategy="random", budget_frac=cfg.budget_frac, random_state=vseed).fit(
            x[idx], idx
        )
        row = {}
        for arm, ds in (
            ("clean", pools.train),
            ("dirty", TensorImageDataset(xd, yd)),
            ("random", PoisonedDataset(pools.train, sel.poison_indices_, trig)),
        ):
            t0 = time.perf_counter()
            model = train_victim(ds, vcfg, vseed, num_classes=pools.num_classes)
            row[arm] = (
                clean_accuracy(model, pools.test),
                attack_success_rate(model, pools.test, trig, target),
            )
            ca, asr = row[arm]
            print(f"{size}x{size} {arm}: CA {ca:.3f} ASR {asr:.3f} ({time.perf_counter() - t0:.0f} s)")
        ok = row["clean"][0] >= 0.85 and row["dirty"][1] >= 0.8 and 0.1 <= row["random"][1] <= 0.6
        print(f"{size}x{size}: {'meets' if ok else 'misses'} the preconditions", flush=True)
        if ok:
            break


def _arg(name: str) -> int | None:
    return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else None


if __name__ == "__main__":
    main(_arg("--seed") or 100, _arg("--n-train"), _arg("--epochs"), "--constant" in sys.argv)
