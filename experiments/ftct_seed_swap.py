"""FTCT: does a seed fail to copy because of its data or its initialisation?

Run as a script (never imported by the library)::

    python experiments/ftct_seed_swap.py --data-seed 2 --init-seeds 2 0 --steps 3000

Graph, corpus and batch order come from ``--data-seed`` exactly as in ``claim.run``; the model's
initialisation comes from each of ``--init-seeds`` in turn. Each run trains the `long` budget's
model and optimiser (cosine schedule over ``--steps``) and records, at ``--points`` evenly
spaced checkpoints, the official icl copy test at k = 1 and whole-chain accuracy at k = 0 and
k = 1, on prompts drawn as the claim's learning curve draws them. If the data seed's copying
failure follows the data, every initialisation fails alike; if it follows the initialisation,
another initialisation on the same data copies. Results are printed and written as JSON to
``--out``.

Cost: about 0.2-0.3 s a step at d = 96 with 2 threads on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

from iclr25._core.seeding import claim_scope, numpy_rng
from iclr25.methods.ftct import (
    CausalGraph,
    FTCTTokenizer,
    build_model,
    evaluate,
    make_compositional_tests,
    make_copy_tests,
    make_training_corpus,
    train_model,
)
from iclr25.methods.ftct.claim import LONG


def main() -> None:
    """Parse arguments, train one model per initialisation seed and print the curves."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-seed", type=int, default=2)
    parser.add_argument("--init-seeds", type=int, nargs="+", default=[2, 0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--points", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default="ftct_seed_swap.json")
    args = parser.parse_args()

    cfg = LONG.data
    train_cfg = dataclasses.replace(LONG.train, steps=args.steps)
    seed = args.data_seed
    marks = [round(args.steps * (i + 1) / args.points) for i in range(args.points)]
    # the same draws as claim.run for this seed: graph, corpus and the learning curve's prompts
    graph = CausalGraph.random(cfg, numpy_rng(seed, 0))
    tok = FTCTTokenizer(n_letters=cfg.n_letters, modulus=cfg.modulus, context_div=cfg.context_div)
    corpus = make_training_corpus(graph, tok, cfg, numpy_rng(seed, 1))
    whole_tests = [
        it
        for k in (0, 1)
        for it in make_compositional_tests(graph, tok, cfg, k, args.prompts, numpy_rng(seed, 6, k))
    ]
    icl_tests = make_copy_tests(graph, tok, cfg, 1, args.prompts, numpy_rng(seed, 7), kind="icl")
    batch = LONG.eval_batch_size

    rows = {}
    for init in args.init_seeds:
        curve: dict[str, list[float]] = {"step": [], "icl_k1": [], "whole_k0": [], "whole_k1": []}

        def record(step: int, model: torch.nn.Module, curve: dict[str, list[float]] = curve) -> None:
            res = evaluate(model, tok, whole_tests, batch_size=batch)
            curve["step"].append(float(step))
            curve["icl_k1"].append(evaluate(model, tok, icl_tests, batch_size=batch)[1]["copy"])
            curve["whole_k0"].append(res[0]["whole"])
            curve["whole_k1"].append(res[1]["whole"])
            print(
                f"  step {step}: icl {curve['icl_k1'][-1]:.2f} "
                f"whole k0 {curve['whole_k0'][-1]:.2f} k1 {curve['whole_k1'][-1]:.2f}",
                flush=True,
            )

        t0 = time.perf_counter()
        with claim_scope(seed, threads=args.threads):
            model = build_model(LONG.model, tok, seed=init)
            losses = train_model(model, corpus, train_cfg, seed=seed, checkpoints=marks, on_checkpoint=record)
        seconds = time.perf_counter() - t0
        rows[init] = {"seconds": seconds, "curve": curve, "final_loss": losses[-1]}
        print(f"data seed {seed}, init seed {init}: {seconds:.0f} s, final loss {losses[-1]:.3f}")
        with open(args.out, "w") as f:
            json.dump({"args": vars(args), "runs": rows}, f, indent=1)


if __name__ == "__main__":
    main()
