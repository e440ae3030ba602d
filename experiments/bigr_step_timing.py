"""Seconds per training step of each generator of the BiGR claim (full config), with the EMA and
the validation-loss evaluations, to size the ``long`` budget from a short run.

Usage: python experiments/bigr_step_timing.py [STEPS]
"""

from __future__ import annotations

import sys
import time

import torch

from iclr25.methods.bigr import BiGR, CausalAR, train_bigr
from iclr25.methods.bigr.claim import _FULL, _grid
from iclr25.methods.bigr.generators import bigr_config

torch.set_num_threads(1)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
cfg, n_cls, grid = _FULL, 16, _grid(_FULL)
gen = torch.Generator().manual_seed(0)
probs = torch.rand(5000, grid * grid, cfg.code_dim, generator=gen)
labels = torch.randint(0, n_cls, (5000,), generator=gen)
val = torch.bernoulli(probs[:512], generator=gen)


def val_loss(model: torch.nn.Module) -> None:
    g = torch.Generator().manual_seed(1)
    for b, y in zip(val.split(64), labels[:512].split(64), strict=True):
        model.loss(b, y, generator=g)  # type: ignore[operator]


arms = {
    "bigr": BiGR(bigr_config(cfg, n_cls)),
    "ar": CausalAR(
        code_dim=cfg.code_dim, grid=grid, num_classes=n_cls, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads
    ),
    "perbit": BiGR(bigr_config(cfg, n_cls, head="bit")),
    "causal": BiGR(bigr_config(cfg, n_cls, causal=True)),
}
total = 0.0
for arm, model in arms.items():
    t0 = time.perf_counter()
    train_bigr(
        model,
        lambda idx: torch.bernoulli(probs[idx], generator=gen),
        labels,
        steps=steps,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        ema_decay=cfg.ema_decay,
        generator=gen,
    )
    train_s = (time.perf_counter() - t0) / steps
    t0 = time.perf_counter()
    with torch.no_grad():
        val_loss(model)
    eval_s = time.perf_counter() - t0
    total += train_s
    print(f"{arm}: {train_s * 1e3:.1f} ms a step, {eval_s:.2f} s a validation evaluation")
print(f"all four arms: {total:.3f} s a step")
