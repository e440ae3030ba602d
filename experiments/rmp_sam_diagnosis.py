"""Diagnosis of the RMP-SAM claim check: where the joint model's PQ is lost.

Three measurements on the claim's shapes world (64 px, 2-5 things), one CPU thread:

1. direct fit: panoptic batches on 16 training scenes only; thing-class accuracy of the
   Hungarian-matched queries and PQ on those same scenes (can the network learn the world?);
2. learning curve: panoptic batches on 800 training scenes; thing-class accuracy and PQ
   (plus class-agnostic PQ, every thing merged into one class) on 60 test scenes every
   ``--every`` steps;
3. train()/eval() equivalence of the class predictions (BatchNorm statistics).

Usage: ``python experiments/rmp_sam_diagnosis.py --steps 3000 --every 500 --out diag.json``
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import torch

from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig
from iclr25.methods.rmp_sam import (
    RMPSAM,
    LossConfig,
    RMPSAMConfig,
    TrainConfig,
    co_train,
    evaluate_panoptic,
    from_shapes_world,
    hungarian_match,
    match_cost,
)


@torch.no_grad()
def thing_accuracy(model: RMPSAM, data) -> float:
    """Class accuracy of the queries matched to thing instances (Hungarian, the training cost)."""
    out = model(data.images, task="panoptic")
    right = total = 0
    g = torch.Generator().manual_seed(0)
    nt = model.config.num_things
    for i, t in enumerate(data.targets):
        cost = match_cost(
            out["logits"][i], out["masks"][i], t["labels"], t["masks"], torch.rand(1024, 2, generator=g)
        )
        q, j = hungarian_match(cost)
        lab = t["labels"][j]
        thing = lab < nt
        right += int((out["logits"][i][q].argmax(-1) == lab)[thing].sum())
        total += int(thing.sum())
    return right / max(total, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--fit-steps", type=int, default=300)
    ap.add_argument("--out", default="rmp_sam_diagnosis.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    world = ShapesWorld(WorldConfig(image_size=64, n_objects=(2, 5)), seed=0)
    train = from_shapes_world(world, 800, 0, split="train")
    test = from_shapes_world(world, 60, 0, split="test")
    few = from_shapes_world(world, 16, 0, split="train")
    report: dict[str, object] = {}

    torch.manual_seed(0)
    model = RMPSAM(RMPSAMConfig())
    co_train(
        model, few, train=TrainConfig(steps=args.fit_steps, tasks=("panoptic",)), loss=LossConfig(), seed=0
    )
    report["direct_fit"] = {"thing_acc": thing_accuracy(model, few), **evaluate_panoptic(model, few)}

    torch.manual_seed(0)
    model = RMPSAM(RMPSAMConfig())
    curve = []
    t0 = time.perf_counter()
    # constant lr after warm-up; evaluate every `every` steps (a fresh AdamW state per segment)
    opt_steps = list(range(args.every, args.steps + 1, args.every))
    done = 0
    for stop in opt_steps:
        part = TrainConfig(
            steps=stop - done, tasks=("panoptic",), warmup=50 if done == 0 else 1, milestones=(2.0,)
        )
        co_train(model, train, train=part, loss=LossConfig(), seed=stop)
        done = stop
        pq = evaluate_panoptic(model, test)
        agn = evaluate_panoptic(model, test, class_agnostic=True)
        row = {
            "step": stop,
            "thing_acc": thing_accuracy(model, test),
            "pq": pq["pq"],
            "pq_things": pq["pq_things"],
            "pq_agnostic": agn["pq"],
            "seconds": time.perf_counter() - t0,
        }
        curve.append(row)
        print(row, flush=True)
    report["curve"] = curve
    train_mode = copy.deepcopy(model).train()
    report["train_eval"] = {
        "eval": thing_accuracy(model, test),
        "train_mode": thing_accuracy(train_mode, test),
    }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(report["direct_fit"], report["train_eval"])


if __name__ == "__main__":
    main()
