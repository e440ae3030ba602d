"""Does the text foundation help? VIE-DM and the AR speaker fine-tuned on the claim's small set,
from the shipped foundation and from scratch, with validation oracle accuracy every 100 steps.

Run: python experiments/vie_dm_foundation_probe.py --seed 0 --arms vie_dm ar
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time

import torch

from iclr25.common.data.shapes_world import OracleListener
from iclr25.common.data.shapes_world.language import vocabulary
from iclr25.methods.vie_dm import (
    AR_TEXT,
    TEXT_DIFFUSION,
    VIEDM,
    ARSpeaker,
    ClaimConfig,
    DiffusionConfig,
    ExpressionTokenizer,
    ImageEncoder,
    VIEDMConfig,
    from_shapes_world,
    generate_for_targets,
    load_text_foundation,
    pretrain_encoder,
    train_ar_speaker,
    train_viedm,
)
from iclr25.methods.vie_dm.claim import (
    _Greedy,
    _object_rows,
    _oracle,
    _OtherScene,
    _stack_rows,
    _token_placement,
    _world,
)


def _controls(model, world, enc, cfg, seed, oracle) -> None:
    """Oracle accuracy on the claim's test objects: VIE-DM, another scene's tokens, random tokens,
    every token (top_k=None at sampling); where token selection puts its tokens."""
    test = from_shapes_world(world, range(cfg.n_test), split="test")
    targets = list(dict.fromkeys((s, k) for s, k, _ in test.refs))[: cfg.n_quality]
    out = {}
    variants = {"vie_dm": model, "shuffled": _OtherScene(model)}
    rnd = copy.deepcopy(model)
    rnd.memory.selection = "random"
    allt = copy.deepcopy(model)
    allt.memory.top_k = None
    variants |= {"random_sel": rnd, "no_selection": allt}
    for name, m in variants.items():
        g = generate_for_targets(m, test, n_per_object=cfg.n_per_object, seed=seed, targets=targets)
        out[name] = round(_oracle(g, test, oracle), 3)
    with torch.no_grad():
        fmap = enc(test.images)
    place = _token_placement(cfg.top_k, fmap, test, targets, int(enc.stride), 3)
    print(f"test oracle accuracy {out}; token placement {place}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arms", nargs="+", default=["vie_dm", "ar"])
    ap.add_argument("--inits", nargs="+", default=["foundation", "scratch"])
    ap.add_argument("--encoder-cache", default="")
    ap.add_argument("--lr", type=float, default=0.0, help="VIE-DM lr (0: the claim's)")
    ap.add_argument("--steps", type=int, default=0, help="generator steps (0: the claim's)")
    ap.add_argument("--every", type=int, default=0, help="steps between readings (0: the claim's)")
    ap.add_argument(
        "--controls", action="store_true", help="VIE-DM at its best step on test scenes: controls"
    )
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg, seed = ClaimConfig(), args.seed
    if args.steps or args.every:
        cfg = dataclasses.replace(
            cfg, reg_steps=args.steps or cfg.reg_steps, ar_steps=args.steps or cfg.ar_steps,
            eval_every=args.every or cfg.eval_every,
        )  # fmt: skip
    t0 = time.perf_counter()
    world = _world(cfg, seed)
    oracle = OracleListener(world.config)
    train = from_shapes_world(world, range(cfg.n_train), split="train")
    val = from_shapes_world(world, range(cfg.n_val), split="val")
    tok = ExpressionTokenizer(vocabulary(world.config, "train"))
    torch.manual_seed(seed)
    enc = ImageEncoder((16, 32, 32), strides=(2, 2, 1))
    try:
        enc.load_state_dict(torch.load(args.encoder_cache))
    except (FileNotFoundError, RuntimeError):
        pool = from_shapes_world(world, range(cfg.n_pool), split="pool")
        rows, labels = _object_rows(pool)
        pretrain_encoder(
            enc, pool.images, rows[:, 0], pool.boxes[rows[:, 0], rows[:, 1]], labels,
            n_classes=(8, 8, 3), epochs=cfg.encoder_epochs, generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
    with torch.no_grad():
        fm_train = enc(train.images)
    grid = fm_train.shape[-1] * fm_train.shape[-2]
    L = cfg.seq_len
    imgs, boxes, ids, fm = _stack_rows(train, fm_train, tok, L)
    vt = list(dict.fromkeys((s, k) for s, k, _ in val.refs))[: cfg.n_val_objects]
    mcfg = VIEDMConfig.tiny(len(tok)).replace(
        d_model=cfg.d_model, d_emb=cfg.d_emb, vtc_layers=cfg.vtc_layers, denoiser_layers=cfg.denoiser_layers,
        top_k=cfg.top_k, seq_len=L, diffusion=DiffusionConfig(steps=cfg.T, sampling_steps=cfg.sampling_steps),
    )  # fmt: skip
    print(f"setup {time.perf_counter() - t0:.0f}s, train refs {len(train)}", flush=True)
    for arm in args.arms:
        for init in args.inits:
            torch.manual_seed(seed * 10 + 1)
            curve: list[tuple[int, float]] = []
            t1 = time.perf_counter()
            if arm == "vie_dm":
                model = VIEDM(mcfg, encoder=enc, grid_tokens=grid, decode=tok.decode)
                if init == "foundation":
                    load_text_foundation(model, TEXT_DIFFUSION, vocabulary=tok.itos)

                best: dict = {"acc": -1.0}

                def block(done, ema, curve=curve, best=best):
                    g = generate_for_targets(ema, val, n_per_object=2, seed=seed + 5, targets=vt)
                    curve.append((done, round(_oracle(g, val, oracle), 3)))
                    if curve[-1][1] > best["acc"]:
                        best.update(acc=curve[-1][1], state=copy.deepcopy(ema.state_dict()))

                train_viedm(
                    model, imgs, boxes, ids, steps=cfg.reg_steps, batch_size=cfg.reg_batch,
                    lr=args.lr or cfg.reg_lr, ema=cfg.ema,
                    generator=torch.Generator().manual_seed(seed * 10 + 2), fmap=fm,
                    progress_every=cfg.eval_every, on_block=block,
                )  # fmt: skip
                if args.controls:
                    ema = copy.deepcopy(model)
                    ema.load_state_dict(best["state"])
                    _controls(ema, world, enc, cfg, seed, oracle)
            else:
                sp = ARSpeaker(mcfg, encoder=enc, grid_tokens=grid, decode=tok.decode)
                if init == "foundation":
                    load_text_foundation(sp, AR_TEXT, vocabulary=tok.itos)

                def block_ar(done, model, curve=curve):
                    g = generate_for_targets(_Greedy(model), val, n_per_object=1, seed=seed + 5, targets=vt)
                    curve.append((done, round(_oracle(g, val, oracle), 3)))

                train_ar_speaker(
                    sp, imgs, boxes, ids, steps=cfg.ar_steps, batch_size=cfg.reg_batch, lr=cfg.ar_lr,
                    generator=torch.Generator().manual_seed(seed * 10 + 2), fmap=fm,
                    progress_every=cfg.eval_every, on_block=block_ar,
                )  # fmt: skip
            print(f"{arm} {init}: {[v for _, v in curve]} ({time.perf_counter() - t1:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
