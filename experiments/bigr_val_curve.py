"""Validation-loss curve of one generator of the BiGR claim (full recipe, EMA weights, the claim's
fixed validation set) on a check seed, read as the convergence precondition reads it.

Usage: python experiments/bigr_val_curve.py ARM STEPS [SEED]   (ARM: bigr, ar, perbit, causal)
"""

from __future__ import annotations

import sys

import torch

from iclr25._core.convergence import read_curve
from iclr25.methods.bigr import BiGR, CausalAR, load_tokenizer, train_bigr
from iclr25.methods.bigr.claim import _FULL, _grid
from iclr25.methods.bigr.generators import bigr_config, encode_probs, shapes_data, val_loss_fn

torch.set_num_threads(1)
arm, steps = sys.argv[1], int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
cfg = _FULL
(xtr, ytr, xva, yva, _, _), n_cls = shapes_data(cfg, seed)
ae = load_tokenizer()
p_tr, p_va = encode_probs(ae, xtr), encode_probs(ae, xva)
grid = _grid(cfg)
model = {
    "bigr": lambda: BiGR(bigr_config(cfg, n_cls)),
    "ar": lambda: CausalAR(
        code_dim=cfg.code_dim, grid=grid, num_classes=n_cls, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads
    ),
    "perbit": lambda: BiGR(bigr_config(cfg, n_cls, head="bit")),
    "causal": lambda: BiGR(bigr_config(cfg, n_cls, causal=True)),
}[arm]()
val_loss = val_loss_fn(p_va[: cfg.n_val_loss], yva[: cfg.n_val_loss], seed)
gen = torch.Generator().manual_seed(seed)
xs: list[float] = []
ys: list[float] = []


def on_eval(step: int, m: torch.nn.Module) -> None:
    xs.append(float(step))
    ys.append(val_loss(m))
    print(f"step {step}: validation loss {ys[-1]:.4f}", flush=True)


train_bigr(
    model,
    lambda idx: torch.bernoulli(p_tr[idx], generator=gen),
    ytr,
    steps=steps,
    batch_size=cfg.batch_size,
    lr=cfg.lr,
    ema_decay=cfg.ema_decay,
    generator=gen,
    on_eval=on_eval,
    eval_every=steps // cfg.n_evals,
)
r = read_curve(xs, ys, mode="min")
print(
    f"{arm}: best {r.best:.4f} at {r.best_step:.0f}, final {r.final:.4f}, plateau gap {r.plateau_gap:.4f} "
    f"({r.plateau_gap / abs(r.final):.2%} of the final loss, "
    f"{r.plateau_gap / (ys[0] - r.best):.2%} of the drop "
    "since the first reading)"
)
