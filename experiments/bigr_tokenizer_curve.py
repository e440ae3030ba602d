"""Learning curve of the BiGR claim's B-AE on shapes-world seed 100 (outside the check's seeds).

Trains a B-AE (stochastic straight-through bits, L1, Adam with a cosine schedule over STEPS) on the
claim's 5,000 training images and prints, every EVERY steps, the reconstruction L1 and the share of
500 natural test images whose reconstruction (thresholded bits) the claim's evaluator CNN
classifies correctly: the quantity the check's precondition gates at 0.8.

Usage: ``python experiments/bigr_tokenizer_curve.py STEPS LR NF EVERY BATCH RES_BLOCKS K EMB_DIM``
(the claim's tokenizer: ``8000 2e-3 16 1000 32 1 10 64``)
"""

from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np
import torch

from iclr25.methods.bigr import BinaryAutoencoder, conditional_accuracy, train_evaluator
from iclr25.methods.bigr.claim import _FULL, _ae_config, _decode, _grid
from iclr25.methods.bigr.generators import encode_probs, shapes_data


def main() -> None:
    steps, lr, nf, every, batch = (
        int(sys.argv[1]),
        float(sys.argv[2]),
        int(sys.argv[3]),
        int(sys.argv[4]),
        int(sys.argv[5]),
    )
    res_blocks, k, emb = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
    torch.set_num_threads(1)
    cfg = dataclasses.replace(_FULL, n_val=10, n_test=500, ae_nf=nf, code_dim=k)
    (Xtr, ytr, _, _, Xte, yte), n_cls = shapes_data(cfg, 100)
    ev = train_evaluator(Xtr, ytr, n_cls, steps=cfg.eval_steps, generator=torch.Generator().manual_seed(100))
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    ae = BinaryAutoencoder(dataclasses.replace(_ae_config(cfg), num_res_blocks=res_blocks, emb_dim=emb))
    opt = torch.optim.Adam(ae.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    t0 = time.process_time()
    for step in range(1, steps + 1):
        ae.train()
        x = Xtr[torch.randint(0, len(Xtr), (batch,), generator=gen)]
        x_hat, _ = ae(x, generator=gen)
        loss = (x_hat - x).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % every == 0:
            ae.eval()
            rec = _decode(ae, (encode_probs(ae, Xte) > 0.5).float(), _grid(cfg))
            print(
                f"step {step} cpu={time.process_time() - t0:.0f}s L1={float((rec - Xte).abs().mean()):.3f} "
                f"recon_acc={conditional_accuracy(ev, rec, yte):.3f}",
                flush=True,
            )
    errors(ev, ae, cfg, Xte, yte)


@torch.no_grad()
def errors(ev, ae: BinaryAutoencoder, cfg, Xte: torch.Tensor, yte: torch.Tensor) -> None:
    """Where the last reconstructions lose the class: by object size, shape vs colour, and whether
    the evaluator itself misreads slightly blurred natural images."""
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig

    ae.eval()
    rec = _decode(ae, (encode_probs(ae, Xte) > 0.5).float(), _grid(cfg))
    pred = ev(rec).argmax(-1).numpy()
    y = yte.numpy()
    world = ShapesWorld(
        WorldConfig(image_size=cfg.image_size, shapes=("circle", "square", "triangle", "star"),
                    colors=("red", "green", "blue", "yellow"), backgrounds=cfg.backgrounds),
        seed=100,
    )  # fmt: skip
    sizes = np.array([world.single_object(i, split="test")[2].size for i in range(len(y))])
    for size in ("small", "medium", "large"):
        m = sizes == size
        print(f"{size}: n={m.sum()} recon_acc={(pred[m] == y[m]).mean():.3f}")
    print(f"shape right {(pred // 4 == y // 4).mean():.3f}, colour right {(pred % 4 == y % 4).mean():.3f}")
    for sigma in (0.5, 0.8):
        k = torch.tensor([np.exp(-(d * d) / (2 * sigma * sigma)) for d in (-1, 0, 1)], dtype=torch.float32)
        k = k / k.sum()
        kernel = (k[:, None] * k[None, :]).expand(3, 1, 3, 3)
        blur = torch.nn.functional.conv2d(
            torch.nn.functional.pad(Xte, (1, 1, 1, 1), mode="replicate"), kernel, groups=3
        )
        print(
            f"evaluator on natural images blurred (sigma {sigma}): {conditional_accuracy(ev, blur, yte):.3f}"
        )


if __name__ == "__main__":
    main()
