"""Train the B-AE that the BiGR claim check ships and loads (``methods/bigr/data/bae_shapes16``).

The paper trains one tokenizer and shares it by every generator; so does the check. This script
trains it once on shapes-world seed 100 (outside the check's seeds 0-2; the world draws the same
distribution for every seed), with the paper's recipe less LPIPS and the GAN: stochastic Bernoulli
bits with the straight-through estimator, L1 loss, no code regulariser, Adam with a cosine
schedule. It then trains the claim's evaluator CNN on the same seed and records how many
reconstructions of 1,000 natural test images (thresholded bits) it classifies correctly.

Usage: ``python experiments/bigr_tokenizer.py --steps 8000 --out src/iclr25/methods/bigr/data/bae_shapes16``
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from iclr25.methods.bigr import (
    BinaryAutoencoder,
    conditional_accuracy,
    save_tokenizer,
    train_evaluator,
    train_tokenizer,
)
from iclr25.methods.bigr.claim import _FULL, _ae_config, _decode, _encode_probs, _grid, _shapes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--out", default="src/iclr25/methods/bigr/data/bae_shapes16")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = dataclasses.replace(_FULL, n_val=10, n_test=1000)
    (Xtr, ytr, _, _, Xte, yte), n_cls = _shapes(cfg, args.seed)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    ae = BinaryAutoencoder(_ae_config(cfg))
    t0 = time.process_time()
    losses = train_tokenizer(
        ae,
        Xtr,
        steps=args.steps,
        batch_size=args.batch,
        lr=args.lr,
        generator=gen,
        progress=lambda d, t: print(f"tokenizer {d}/{t}", flush=True) if d % 1000 == 0 else None,
    )
    cpu = time.process_time() - t0
    ev = train_evaluator(Xtr, ytr, n_cls, steps=cfg.eval_steps, generator=gen)
    p = _encode_probs(ae, Xte)
    rec = _decode(ae, (p > 0.5).float(), _grid(cfg))
    result = {
        "recon_l1": float((rec - Xte).abs().mean()),
        "eval_acc_natural": conditional_accuracy(ev, Xte, yte),
        "recon_cond_acc": conditional_accuracy(ev, rec, yte),
    }
    print(result, flush=True)
    training = {
        "command": f"python experiments/bigr_tokenizer.py --steps {args.steps} --lr {args.lr} "
        f"--batch {args.batch} --seed {args.seed} --out {args.out}",
        "data": f"shapes world seed {args.seed}: {len(Xtr)} training images, 16 x 16, 16 classes",
        "recipe": {"steps": args.steps, "lr": args.lr, "batch": args.batch, "optimizer": "Adam, cosine",
                   "loss": "L1 through stochastic straight-through bits"},
        "cpu_seconds": round(cpu, 1),
        "loss_every_100": [round(sum(losses[i : i + 100]) / len(losses[i : i + 100]), 5)
                           for i in range(0, len(losses), 100)],
        f"seed_{args.seed}_test": result,
    }  # fmt: skip
    print("wrote", save_tokenizer(ae, args.out, training=training))


if __name__ == "__main__":
    main()
