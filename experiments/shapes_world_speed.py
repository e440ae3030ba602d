"""How fast the shapes world draws: 10,000 64 x 64 images, with and without panoptic masks.

Prints seconds for single-object images (``classification_arrays``) and panoptic scenes with
semantic and instance masks (``panoptic_arrays``), with one worker process and with ``--workers``.

Usage: ``python experiments/shapes_world_speed.py --n 10000 --workers 2``
"""

from __future__ import annotations

import argparse
import time

from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    world = ShapesWorld(WorldConfig(image_size=args.size), seed=0)
    for workers in sorted({1, args.workers}):
        t0 = time.perf_counter()
        world.classification_arrays(args.n, workers=workers)
        t1 = time.perf_counter()
        world.panoptic_arrays(args.n, workers=workers)
        t2 = time.perf_counter()
        print(
            f"{args.n} images of {args.size} x {args.size}, {workers} worker(s): "
            f"single objects {t1 - t0:.1f} s, panoptic scenes with masks {t2 - t1:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
