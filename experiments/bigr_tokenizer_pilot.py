"""Tokenizer-only pilot of the BiGR claim (seed 100, outside the check's seeds).

Trains the claim's B-AE with the given settings on the claim's training images (5,000), trains the
claim's evaluator CNN, and prints the reconstruction L1, the mean bit entropy, the evaluator's
accuracy on natural test images and on the reconstructions of those images (thresholded bits), and
the raw-pixel linear probe (the spec's difficulty rule: <= 0.70). No generator is trained.

Run: python experiments/bigr_tokenizer_pilot.py CODE_WEIGHT LR STEPS NF DOWNSAMPLE K NOISE
(DOWNSAMPLE 4: 4 x 4 tokens, 2: 8 x 8 tokens; NOISE 1 keeps the "noise" background, 0 drops it)
"""

from __future__ import annotations

import dataclasses
import sys
import time

import torch

from iclr25.methods.bigr import (
    BinaryAutoencoder,
    conditional_accuracy,
    linear_probe,
    train_evaluator,
    train_tokenizer,
)
from iclr25.methods.bigr.claim import _FULL, _ae_config, _decode, _grid
from iclr25.methods.bigr.generators import encode_probs, shapes_data

if __name__ == "__main__":
    torch.set_num_threads(1)
    cw, lr, steps, nf = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    down, k, noise = int(sys.argv[5]), int(sys.argv[6]), bool(int(sys.argv[7]))
    bgs = ("plain", "tint", "gradient", "noise") if noise else ("plain", "tint", "gradient")
    cfg = dataclasses.replace(
        _FULL, n_val=10, n_test=500, ae_nf=nf, ae_downsample=down, code_dim=k, backgrounds=bgs,
        ae_code_weight=cw,
    )  # fmt: skip
    (Xtr, ytr, _, _, Xte, yte), n = shapes_data(cfg, 100)
    gen = torch.Generator().manual_seed(100)
    pix = linear_probe(Xtr[: cfg.n_probe].flatten(1), ytr[: cfg.n_probe], Xte.flatten(1), yte, max_iter=100)
    c0 = time.process_time()
    ae = BinaryAutoencoder(_ae_config(cfg))
    train_tokenizer(ae, Xtr, steps=steps, batch_size=cfg.ae_batch, lr=lr, generator=gen)
    c1 = time.process_time()
    ev = train_evaluator(Xtr, ytr, n, steps=cfg.eval_steps, generator=gen)
    c2 = time.process_time()
    p = encode_probs(ae, Xte)
    rec = _decode(ae, (p > 0.5).float(), _grid(cfg))
    ent = -(p * p.clamp_min(1e-6).log2() + (1 - p) * (1 - p).clamp_min(1e-6).log2()).mean()
    print(
        f"cw={cw} lr={lr} steps={steps} nf={nf} down={down} K={k} noise={int(noise)}: "
        f"ae_cpu={c1 - c0:.0f}s eval_cpu={c2 - c1:.0f}s pixel_probe={pix:.3f} "
        f"L1={float((rec - Xte).abs().mean()):.3f} H={float(ent):.2f} "
        f"eval_acc={conditional_accuracy(ev, Xte, yte):.3f} "
        f"recon_acc={conditional_accuracy(ev, rec, yte):.3f}",
        flush=True,
    )
