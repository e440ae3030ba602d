"""Pilot for the DITTO claim: base-model well-formedness, SFT loss curve, and a small lr / β grid
for the DPO stage, on the calibration user (4) and seed (100), outside the claim's users (0-3)
and seeds (0-2).

    python experiments/ditto_pilot.py 3e-4,0.1 1e-3,0.5          # one run per "lr,beta"
    TARGETS=c_attn SFT_T=0 STEPS=120 EVERY=30 python experiments/ditto_pilot.py 3e-4,0.1
    BASE=DIR python experiments/ditto_pilot.py 3e-4,0.1          # a base from `iclr25 pretrain`

Environment overrides (default: ``DittoConfig.cpu_default()``, the claim's full config and the
shipped base): TARGETS (LoRA modules), SFT_T (SFT loss bar), STEPS, EVERY (resample period),
BASE (base folder).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import sys
import time

import torch

from iclr25._core.seeding import numpy_rng
from iclr25.common.data.style_world import AUDIENCES, StyleJudge, build_style_tokenizer
from iclr25.methods.ditto import Demonstration, DittoConfig, DittoTrainer, win_rate
from iclr25.methods.ditto.claim import _FULL, _base, _chat

torch.set_num_threads(1)
SEED, USER = 100, 4
cfg = dataclasses.replace(_FULL, base_dir=os.environ.get("BASE", ""))
DEFAULT = DittoConfig.cpu_default()
SFT_T = float(os.environ.get("SFT_T", _FULL.ditto.sft_loss_threshold))
base, world = _base(cfg)
tok = build_style_tokenizer(world)
judge = StyleJudge(world, USER)
rng = numpy_rng(SEED, 3)
topics = [world.topics[i] for i in rng.permutation(len(world.topics))]
style = world.user_style(USER)
dp = [world.prompt(t, AUDIENCES[int(rng.integers(8))]) for t in topics[: cfg.n_demos]]
demos = [Demonstration(_chat(p), world.sample_response(p, style, rng)) for p in dp]
ev = [
    world.prompt(topics[cfg.n_demos + i % (20 - cfg.n_demos)], AUDIENCES[int(rng.integers(8))])
    for i in range(20)
]
evc = [_chat(p) for p in ev]
grid = [tuple(float(x) for x in a.split(",")) for a in sys.argv[1:]] or [(1e-3, 0.1)]
for lr, beta in grid:
    t1 = time.time()
    dc = dataclasses.replace(
        DittoConfig.cpu_default(),
        seed=SEED,
        lr=lr,
        beta=beta,
        sft_loss_threshold=SFT_T,
        target_modules=tuple(os.environ.get("TARGETS", ",".join(DEFAULT.target_modules)).split(",")),
        max_steps=int(os.environ.get("STEPS", DEFAULT.max_steps)),
        resample_every=int(os.environ.get("EVERY", DEFAULT.resample_every)),
    )
    tr = DittoTrainer(copy.deepcopy(base), tok, demos, dc)
    tr.train_sft()
    print("sft losses", [round(r["loss"], 3) for r in tr.logs.sft])
    z = tr.generate(evc, 5, adapter="base", seed=1)
    s = tr.generate(evc, 5, adapter="sft", seed=1)

    def wf(outs):
        return sum(judge.well_formed(p, y) for p, y in zip(ev, outs, strict=True)) / len(ev)

    print("base well-formed", wf(z), z[0][:2])
    print("sft  well-formed", wf(s), s[0][:2])
    print("sft vs base", win_rate(judge, ev, s, z))
    tr.train_ditto()
    d = tr.generate(evc, 5, adapter="ditto", seed=1)
    print(
        f"lr={lr} beta={beta}: ditto vs sft {win_rate(judge, ev, d, s):.3f} "
        f"vs base {win_rate(judge, ev, d, z):.3f} "
        f"wf {wf(d):.2f} loss {[round(r['loss'], 3) for r in tr.logs.ditto[::5]]} "
        f"({time.time() - t1:.1f} s)",
        flush=True,
    )
    print(d[0][:3])
