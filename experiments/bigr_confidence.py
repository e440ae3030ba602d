"""What BiGR's confidence order ranks at this scale (seed 0, the claim's full-budget generator).

Trains BiGR as the claim does (the shipped tokenizer, 400 AdamW steps of batch 64) and, at the
first sampler iteration (every token masked, CFG 3.0, 16 reverse steps), draws the transcoder's
p̂ for each token ``--draws`` times. Prints the spread of the sampler's confidence
mean |2p̂ - 1| over tokens, and its rank correlation with the agreement of the bits drawn across
the repeats (how sure the model is of a token's code). A confidence that tracks the model's
certainty correlates positively with the agreement.

Usage: ``python experiments/bigr_confidence.py --draws 8``
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
import torch
from scipy.stats import spearmanr

from iclr25.methods.bigr import BiGR, load_tokenizer, train_bigr
from iclr25.methods.bigr.claim import _FULL
from iclr25.methods.bigr.generators import bigr_config, encode_probs, shapes_data
from iclr25.methods.bigr.sampling import _conditions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=8)
    ap.add_argument("--steps", type=int, default=_FULL.steps)
    ap.add_argument("--images", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = dataclasses.replace(_FULL, n_val=10, n_test=10, steps=args.steps)
    (Xtr, ytr, *_), n_cls = shapes_data(cfg, 0)
    gen = torch.Generator().manual_seed(0)
    p_tr = encode_probs(load_tokenizer(), Xtr)
    torch.manual_seed(0)
    model = BiGR(bigr_config(cfg, n_cls))
    train_bigr(
        model,
        lambda idx: torch.bernoulli(p_tr[idx], generator=gen),
        ytr,
        steps=cfg.steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        generator=gen,
    )
    model.eval()
    labels = torch.arange(args.images) % n_cls
    n, k = model.cfg.num_tokens, model.cfg.code_dim
    bits = torch.zeros(args.images, n, k)
    mask = torch.ones(args.images, n, dtype=torch.bool)
    with torch.no_grad():
        c, cu, _ = _conditions(model, bits, labels, None, mask, cfg.cfg_scale)
        c, cu = c.reshape(args.images * n, -1), cu.reshape(args.images * n, -1)
        draws = torch.stack(
            [
                model.head.prob(
                    c, gen, steps=cfg.diffusion_steps, cond_null=cu, cfg_scale=cfg.cfg_scale, temperature=1.0
                )
                for _ in range(args.draws)
            ]
        )  # (draws, B N, K)
    conf = (2 * draws - 1).abs().mean(-1)  # (draws, B N): the sampler's confidence per draw
    sampled = torch.bernoulli(draws, generator=gen)
    agreement = (2 * sampled.mean(0) - 1).abs().mean(-1)  # how often the repeats agree, per token
    rho = spearmanr(conf[0].numpy(), agreement.numpy()).statistic
    q = np.quantile(conf[0].numpy(), [0.1, 0.5, 0.9])
    saturated = float(((2 * draws - 1).abs() > 0.99).float().mean())
    print(
        f"confidence quantiles 10/50/90 %: {q[0]:.3f} / {q[1]:.3f} / {q[2]:.3f}; "
        f"bits with |2p - 1| > 0.99: {saturated:.3f}; "
        f"Spearman(confidence, agreement of {args.draws} draws): {rho:.3f}; "
        f"same token's confidence across draws, Spearman of draws 1 and 2: "
        f"{spearmanr(conf[0].numpy(), conf[1].numpy()).statistic:.3f}"
    )


if __name__ == "__main__":
    main()
