"""Why BiGR's transcoder trails the per-bit head and AR at the claim's budget (seed 0).

With the shipped tokenizer and the claim's evaluator, trains BiGR (transcoder) and the per-bit
control for ``--steps`` AdamW steps each (the claim's recipe otherwise), then samples the claim's
256 images in confidence order at CFG 3.0 and S = 6 with 16 reverse transcoder steps (the
claim's setting) and with all T = 64, and prints conditional accuracy and the FID proxy above the
natural floor. Run it at the claim's 1,000 steps and at more to see the learning curve against
budget, and whether the truncated reverse chain costs quality.

Usage: ``python experiments/bigr_transcoder_curve.py --steps 1000 3000``
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.methods.bigr import (
    BiGR,
    conditional_accuracy,
    fid_proxy,
    generate,
    load_tokenizer,
    train_bigr,
    train_evaluator,
)
from iclr25.methods.bigr.claim import _FULL, _decode, _grid
from iclr25.methods.bigr.generators import bigr_config, encode_probs, shapes_data


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, nargs="+", default=[_FULL.steps])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = _FULL
    (Xtr, ytr, Xva, _, Xte, yte), n_cls = shapes_data(cfg, args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    ae = load_tokenizer()
    p_tr = encode_probs(ae, Xtr)
    ev = train_evaluator(Xtr, ytr, n_cls, steps=cfg.eval_steps, generator=gen)
    labels = torch.arange(cfg.n_samples) % n_cls
    floor = fid_proxy(ev, Xte, torch.cat([Xva, Xtr])[: cfg.n_samples])
    print(
        f"natural floor {floor:.1f}; evaluator on test images {conditional_accuracy(ev, Xte, yte):.3f}",
        flush=True,
    )
    for steps in args.steps:
        for head in ("transcoder", "bit"):
            torch.manual_seed(args.seed)
            model = BiGR(bigr_config(cfg, n_cls, head=head))
            t0 = time.perf_counter()
            losses, _ = train_bigr(
                model, lambda idx: torch.bernoulli(p_tr[idx], generator=gen), ytr, steps=steps,
                batch_size=cfg.batch_size, lr=cfg.lr, generator=gen,
            )  # fmt: skip
            model.eval()
            train_s = time.perf_counter() - t0
            for diffusion_steps in (cfg.diffusion_steps, cfg.timesteps) if head == "transcoder" else (0,):
                out = generate(
                    model, labels, num_iter=cfg.num_iter, cfg_scale=cfg.cfg_scale,
                    gumbel_temp=cfg.gumbel_temp, diffusion_steps=max(1, diffusion_steps), generator=gen,
                )  # fmt: skip
                fake = _decode(ae, out.bits, _grid(cfg))
                acc = conditional_accuracy(ev, fake, labels)
                print(
                    f"steps {steps} head {head} reverse steps {diffusion_steps or '-'}: "
                    f"final loss {sum(losses[-50:]) / 50:.4f}, cond_acc {acc:.3f}, "
                    f"FID proxy - floor {fid_proxy(ev, Xte, fake) - floor:.1f} (train {train_s:.0f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
