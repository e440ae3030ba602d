"""FTCT learning curve against training steps and model width.

Run as a script (never imported by the library)::

    python experiments/ftct_scale.py --widths 48 96 120 --steps 3000 --seed 3
    python experiments/ftct_scale.py --data full --widths 48 --steps 1500 --seed 3

Each width trains the claim's 3-layer, 3-head GPT-2 on the long budget's data (``--data long``:
52 letters, addlen 5, 5 traces per sequence, 30 roots) or the full budget's (``--data full``),
with the long budget's optimiser (lr 1e-3, cosine, batch 12) for ``--steps`` steps, and records
at ``--points`` evenly spaced checkpoints the whole-chain accuracy at k = 1 and k = 3, the
vertex order through depth M + 1 and the official icl copy test, on prompts that the final
evaluation does not use. The final evaluation is the claim's own (``claim.run``), so the last
column equals the claim's metrics at that setting. Use seeds other than the claim's 0-2 when
the curve is used to choose a budget. Results are printed and written as JSON to ``--out``.

Cost: about 0.1 s a step at d = 48 on the full data and 0.2-0.3 s a step at d = 96-120 on the
long data, on an idle 2-core machine, plus the 1-layer control unless ``--no-control``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from iclr25._core.seeding import claim_scope
from iclr25.methods.ftct.claim import FULL, LONG, run


def main() -> None:
    """Parse arguments, train one model per width and print the curves."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--widths", type=int, nargs="+", default=[48, 96, 120])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--data", choices=["long", "full"], default="long")
    parser.add_argument("--no-control", action="store_true", help="skip the 1-layer, 1-head model")
    parser.add_argument("--prompts", type=int, default=0, help="prompts per k (0: the budget's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="ftct_scale.json")
    args = parser.parse_args()

    base = LONG if args.data == "long" else FULL
    rows = {}
    for d in args.widths:
        heads = base.model.n_head
        if d % heads:
            sys.exit(f"width {d} is not divisible by {heads} heads")
        config = dataclasses.replace(
            base,
            model=dataclasses.replace(base.model, d_model=d, max_positions=512),
            train=dataclasses.replace(LONG.train, steps=args.steps),
            curve_points=args.points,
            shallow_control=not args.no_control,
        )
        if args.prompts:
            config = dataclasses.replace(
                config, prompts_per_k=args.prompts, copy_prompts=args.prompts, curve_prompts=args.prompts
            )
        t0 = time.perf_counter()

        def show(stage: str, done: int, total: int, d: int = d) -> None:
            if stage.startswith("training") and done % max(1, total // 10) == 0:
                print(f"  d={d} {stage} {done}/{total}", flush=True)

        with claim_scope(args.seed, threads=args.threads):
            result = run(config, seed=args.seed, progress=show)
        curve = result.series["curve"]
        rows[d] = {
            "seconds": time.perf_counter() - t0,
            "steps": curve.x,
            "curve": curve.lines,
            "metrics": result.metrics,
        }
        print(f"d = {d} ({rows[d]['seconds']:.0f} s, {args.threads} threads)")
        for label, ys in curve.lines.items():
            print(f"  {label:45s} " + " ".join(f"{y:5.2f}" for y in ys))
        print(f"  at steps {' '.join(str(int(x)) for x in curve.x)}")
        few = result.metrics["few_shot"]
        print(
            f"  final: whole {few['whole']:.2f} (k={int(few['best_k'])}), te_val {few['te_val']:.2f}, "
            f"tr_val {few['tr_val']:.2f}, tr_ver {few['tr_ver']:.2f}, order@M+1 {few['order_at_m1']:.2f}"
        )
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "widths": rows}, f, indent=1)


if __name__ == "__main__":
    main()
