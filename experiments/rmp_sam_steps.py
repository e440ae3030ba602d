"""How many co-training steps the RMP-SAM joint model needs on the claim's shapes world.

Trains the claim's joint model (same data, seed, batches and schedule as the claim, only
``steps`` changed) and prints PQ, class-agnostic PQ, tube mAP, click mIoU and NoC@85 on the
claim's test split. One CPU thread.

Usage: ``python experiments/rmp_sam_steps.py --steps 6000 --seed 0``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from iclr25.methods.rmp_sam import RMPSAM, ClaimConfig, co_train, from_shapes_world
from iclr25.methods.rmp_sam.claim import _evaluate, _world


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = ClaimConfig(steps=args.steps)
    world = _world(cfg, args.seed)
    train = from_shapes_world(world, cfg.n_train_scenes, cfg.n_train_videos, split="train")
    test = from_shapes_world(world, cfg.n_test_scenes, cfg.n_test_videos, split="test")
    torch.manual_seed(args.seed * 100 + 1)
    model = RMPSAM(cfg.model)
    t0 = time.perf_counter()
    co_train(
        model, train, train=dataclasses.replace(cfg.train, steps=args.steps), loss=cfg.loss, seed=args.seed
    )
    out = _evaluate(model, test, cfg) | {"steps": args.steps, "train_s": time.perf_counter() - t0}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
