"""Ablations of the recipe of the B-AE that the BiGR claim check ships and loads.

The shipped B-AE and the feature net of its perceptual term are trained by ``iclr25 pretrain
bigr`` (recipes ``pretrain_feature_net`` and ``pretrain_tokenizer``, configs
``FeatureNetRecipe`` and ``TokenizerRecipe``). This script retrains both in one process with other
settings, to compare recipes: on shapes-world seed 100 (outside the check's seeds 0-2), stochastic
Bernoulli bits with the straight-through estimator, L1 + the perceptual term (LPIPS's distance over
a :class:`~iclr25.methods.bigr.perceptual.FeatureNet` first trained to name shape and colour on
8,000 images of the world's split "perceptual", every background), no code regulariser, Adam with
a cosine schedule. It then trains the claim's evaluator CNN on the claim's 16 classes of the same
seed and records how many reconstructions of 1,000 natural test images (thresholded bits) it
classifies correctly. ``--perceptual-weight 0`` gives the L1-only tokenizer, ``--feature-world
broad`` a feature net of 64 classes in every style; the defaults are the shipped recipe.

Usage: ``python experiments/bigr_tokenizer.py --steps 3000 --feature-world broad --out DIR``
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig
from iclr25.common.data.shapes_world.vocab import COLORS, SHAPES, STYLES
from iclr25.methods.bigr import (
    BinaryAutoencoder,
    PerceptualLoss,
    conditional_accuracy,
    save_tokenizer,
    train_evaluator,
    train_feature_net,
    train_tokenizer,
)
from iclr25.methods.bigr.claim import _FULL, _ae_config, _decode, _grid, _to_tensor
from iclr25.methods.bigr.generators import encode_probs, shapes_data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8000)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--out", required=True, help="folder of the B-AE (config, weights, record)")
    ap.add_argument("--perceptual-weight", type=float, default=1.0)
    ap.add_argument("--feature-steps", type=int, default=2000)
    ap.add_argument(
        "--feature-world",
        choices=("claim", "broad"),
        default="claim",
        help="the feature net's classes: the claim's 4 shapes x 4 colours, or 8 x 8 in every style",
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = dataclasses.replace(_FULL, n_val=10, n_test=1000)
    (Xtr, ytr, _, _, Xte, yte), n_cls = shapes_data(cfg, args.seed)
    t0 = time.process_time()
    perceptual, feature_acc = None, None
    if args.perceptual_weight:
        world_cfg = WorldConfig(image_size=cfg.image_size)
        if args.feature_world == "broad":
            world_cfg = WorldConfig(
                image_size=cfg.image_size, shapes=SHAPES, colors=tuple(COLORS), styles=STYLES
            )
        world = ShapesWorld(world_cfg, seed=args.seed)
        X, y = world.classification_arrays(8000, split="perceptual")
        Xf, yf = _to_tensor(X), torch.tensor(y)
        X, y = world.classification_arrays(1000, split="perceptual_test")
        Xfv, yfv = _to_tensor(X), torch.tensor(y)
        torch.manual_seed(args.seed)
        net = train_feature_net(
            Xf, yf, len(world.class_names()), steps=args.feature_steps,
            generator=torch.Generator().manual_seed(args.seed),
        )  # fmt: skip
        with torch.no_grad():
            feature_acc = float((net(Xfv).argmax(-1) == yfv).float().mean())
        n_feat = len(world.class_names())
        print(f"feature net: held-out accuracy {feature_acc:.3f} on {n_feat} classes", flush=True)
        perceptual = PerceptualLoss(net)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    ae = BinaryAutoencoder(_ae_config(cfg))
    losses = train_tokenizer(
        ae,
        Xtr,
        steps=args.steps,
        batch_size=args.batch,
        lr=args.lr,
        generator=gen,
        progress=lambda d, t: print(f"tokenizer {d}/{t}", flush=True) if d % 1000 == 0 else None,
        perceptual=perceptual,
        perceptual_weight=args.perceptual_weight,
    )
    cpu = time.process_time() - t0
    ev = train_evaluator(Xtr, ytr, n_cls, steps=cfg.eval_steps, generator=gen)
    p = encode_probs(ae, Xte)
    rec = _decode(ae, (p > 0.5).float(), _grid(cfg))
    result = {
        "recon_l1": float((rec - Xte).abs().mean()),
        "eval_acc_natural": conditional_accuracy(ev, Xte, yte),
        "recon_cond_acc": conditional_accuracy(ev, rec, yte),
    }
    print(result, flush=True)
    training = {
        "command": f"python experiments/bigr_tokenizer.py --steps {args.steps} --lr {args.lr} "
        f"--batch {args.batch} --seed {args.seed} --perceptual-weight {args.perceptual_weight} "
        f"--feature-steps {args.feature_steps} --feature-world {args.feature_world} --out {args.out}",
        "data": f"shapes world seed {args.seed}: {len(Xtr)} training images, 16 x 16, 16 classes",
        "recipe": {"steps": args.steps, "lr": args.lr, "batch": args.batch, "optimizer": "Adam, cosine",
                   "loss": "L1 through stochastic straight-through bits"
                   + (f" + {args.perceptual_weight} x perceptual" if args.perceptual_weight else "")},
        "feature_net": None if feature_acc is None else {
            "data": f"shapes world seed {args.seed}, split 'perceptual': 8000 images, "
                    f"{n_feat} shape x colour classes ({args.feature_world}), every background",
            "steps": args.feature_steps, "heldout_accuracy": round(feature_acc, 4)},
        "cpu_seconds": round(cpu, 1),
        "loss_every_100": [round(sum(losses[i : i + 100]) / len(losses[i : i + 100]), 5)
                           for i in range(0, len(losses), 100)],
        f"seed_{args.seed}_test": result,
    }  # fmt: skip
    print("wrote", save_tokenizer(ae, args.out, training=training))


if __name__ == "__main__":
    main()
