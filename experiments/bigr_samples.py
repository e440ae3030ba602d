"""Sample grids of the BiGR claim setting: real images, tokenizer reconstructions, BiGR and AR samples.

Trains the claim's tokenizer and the two generators on one seed, then writes one PNG with a row per
source and a column per class.

Run: python experiments/bigr_samples.py OUT.png [seed] [key=value ...]
"""

from __future__ import annotations

import sys

import torch

from iclr25._core.config import apply_overrides
from iclr25.methods.bigr import BiGR, BinaryAutoencoder, CausalAR, generate, train_bigr, train_tokenizer
from iclr25.methods.bigr.claim import _FULL, _ae_config, _decode, _grid, _load
from iclr25.methods.bigr.generators import bigr_config, encode_probs


def main(out: str, seed: int, overrides: dict[str, str]) -> None:
    """Train on one seed and write the grid to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    torch.set_num_threads(1)
    cfg = apply_overrides(_FULL, overrides)
    gen = torch.Generator().manual_seed(seed)
    (Xtr, ytr, _, _, Xte, yte), n_cls = _load(cfg.dataset, cfg, seed)
    grid = _grid(cfg)
    ae = BinaryAutoencoder(_ae_config(cfg))
    train_tokenizer(ae, Xtr, steps=cfg.ae_steps, batch_size=cfg.ae_batch, lr=cfg.ae_lr, generator=gen)
    p_tr = encode_probs(ae, Xtr)
    bigr = BiGR(bigr_config(cfg, n_cls))
    ar = CausalAR(
        code_dim=cfg.code_dim, grid=grid, num_classes=n_cls, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads
    )
    for model in (bigr, ar):
        train_bigr(
            model, lambda i: torch.bernoulli(p_tr[i], generator=gen), ytr, steps=cfg.steps,
            batch_size=cfg.batch_size, lr=cfg.lr, generator=gen,
        )  # fmt: skip
    labels = torch.arange(n_cls)
    bigr_bits = generate(
        bigr, labels, num_iter=cfg.num_iter, cfg_scale=cfg.cfg_scale, gumbel_temp=cfg.gumbel_temp,
        diffusion_steps=cfg.diffusion_steps, generator=gen,
    ).bits  # fmt: skip
    real = torch.stack([Xte[yte == c][0] for c in range(n_cls)])
    rows = {
        "real": real,
        "reconstruction": _decode(ae, (encode_probs(ae, real) > 0.5).float(), grid),
        "BiGR": _decode(ae, bigr_bits, grid),
        "AR": _decode(ae, ar.generate(labels, cfg_scale=cfg.cfg_scale, generator=gen)[0], grid),
    }
    fig, axes = plt.subplots(len(rows), n_cls, figsize=(n_cls * 0.8, len(rows) * 0.9), squeeze=False)
    for r, (name, imgs) in enumerate(rows.items()):
        for c in range(n_cls):
            ax = axes[r][c]
            ax.imshow(((imgs[c].permute(1, 2, 0) + 1) / 2).clamp(0, 1).numpy())
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(name, fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    main(sys.argv[1], seed, dict(a.split("=", 1) for a in sys.argv[3:]))
