"""Budget calibration of the wicked_oddities claim: random selection only, pilot seed 100.

Tries the spec's budgets {10, 15, 20, 30} % of the target class with random selection, for each
gated trigger, over the claim's targets, with the claim's victim recipe. The rule (fixed before
any run): take the smallest budget whose mean random ASR lies in [0.15, 0.6]; if none does,
take the budget with the highest mean random ASR below 0.6. The shapes world (reported only in
the claim) is calibrated the same way, with BadNets and target 0. Run:

    .venv/bin/python experiments/wicked_oddities_calibrate.py [--shapes-only]
"""

from __future__ import annotations

import sys
import time

import torch

from iclr25.methods.wicked_oddities import (
    BadNetsTrigger,
    BlendTrigger,
    ClaimConfig,
    HardnessSelector,
    PoisonedDataset,
    attack_success_rate,
    clean_accuracy,
    digits_pools,
    shapes_pools,
    train_victim,
)

SEED = 100
FRACS = (0.10, 0.15, 0.20, 0.30)


def _pick(means: dict[float, float]) -> tuple[float, bool]:
    inside = [f for f in FRACS if 0.15 <= means[f] <= 0.6]
    if inside:
        return inside[0], True
    return max((f for f in FRACS if means[f] < 0.6), key=lambda f: means[f], default=FRACS[0]), False


def shapes() -> None:
    """Random-only calibration on the shapes world (BadNets, target 0), the claim's pool sizes."""
    cfg = ClaimConfig()
    pools = shapes_pools(SEED, cfg.shapes_n_public, cfg.shapes_n_train, cfg.shapes_n_test)
    trig = BadNetsTrigger(cfg.trigger.patch_size, cfg.trigger.patch_offset)
    target, vseed = 0, 1000 * SEED + 99
    idx = torch.where(pools.train.labels == target)[0]
    means = {}
    for frac in FRACS:
        sel = HardnessSelector(None, strategy="random", budget_frac=frac, random_state=vseed)
        sel.fit(pools.train.images[idx], idx)
        model = train_victim(PoisonedDataset(pools.train, sel.poison_indices_, trig), cfg.victim, vseed)
        means[frac] = attack_success_rate(model, pools.test, trig, target)
        ca = clean_accuracy(model, pools.test)
        print(f"shapes badnets frac={frac:.2f} random ASR={means[frac]:.3f} CA={ca:.3f}", flush=True)
    pick, ok = _pick(means)
    print(f"shapes: picked {pick} ({'in range' if ok else 'none in [0.15, 0.6]'})", flush=True)


def main() -> None:
    torch.set_num_threads(1)
    cfg = ClaimConfig()
    pools = digits_pools(SEED)
    y = pools.train.labels
    triggers = {
        "badnets": BadNetsTrigger(cfg.trigger.patch_size, cfg.trigger.patch_offset),
        "blend": BlendTrigger.noise((1, 16, 16), cfg.trigger.blend_alpha, seed=10_000 + SEED),
    }
    t0 = time.perf_counter()
    for name, trig in triggers.items():
        means = {}
        for frac in FRACS:
            asrs = []
            for target in cfg.targets:
                vseed = 1000 * SEED + target
                idx = torch.where(y == target)[0]
                sel = HardnessSelector(None, strategy="random", budget_frac=frac, random_state=vseed).fit(
                    pools.train.images[idx], idx
                )
                model = train_victim(
                    PoisonedDataset(pools.train, sel.poison_indices_, trig), cfg.victim, vseed
                )
                asrs.append(attack_success_rate(model, pools.test, trig, target))
                print(
                    f"{name} frac={frac:.2f} target={target} random ASR={asrs[-1]:.3f} "
                    f"CA={clean_accuracy(model, pools.test):.3f}",
                    flush=True,
                )
            means[frac] = sum(asrs) / len(asrs)
            print(f"{name} frac={frac:.2f} mean random ASR={means[frac]:.3f}", flush=True)
        pick, ok = _pick(means)
        print(f"{name}: picked {pick} ({'in range' if ok else 'none in [0.15, 0.6]'})", flush=True)
    print(f"wall {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    torch.set_num_threads(1)
    if "--shapes-only" not in sys.argv:
        main()
    shapes()
