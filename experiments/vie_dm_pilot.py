"""Pilot of the VIE-DM claim on a seed outside the check's seeds (default 100): learning curves of
the generators (oracle accuracy of sampled expressions on test objects) and of the REC listener
(small set vs the grammar ceiling), with wall-clock per stage. Used once to size the budget.

Run: python experiments/vie_dm_pilot.py --seed 100 --steps 2000
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.common.data.shapes_world import OracleListener
from iclr25.common.data.shapes_world.language import vocabulary
from iclr25.methods.vie_dm import (
    VIEDM,
    ARSpeaker,
    ClaimConfig,
    DiffusionConfig,
    ExpressionTokenizer,
    ImageEncoder,
    Listener,
    ListenerConfig,
    VIEDMConfig,
    augment_rec_dataset,
    from_shapes_world,
    generate_for_targets,
    listener_accuracy,
    oracle_accuracy,
    pretrain_encoder,
    train_ar_speaker,
    train_listener,
    train_viedm,
)
from iclr25.methods.vie_dm.claim import _grammar_expressions, _object_rows, _stack_rows, _world


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--every", type=int, default=250)
    ap.add_argument("--listener-steps", type=int, default=1500)
    ap.add_argument("--skip", default="")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg, seed = ClaimConfig(), args.seed
    t0 = time.perf_counter()
    world = _world(cfg, seed)
    oracle = OracleListener(world.config)
    pool = from_shapes_world(world, range(cfg.n_pool), split="pool")
    train = from_shapes_world(world, range(cfg.n_train), split="train")
    test = from_shapes_world(world, range(cfg.n_test), split="test")
    tok = ExpressionTokenizer(vocabulary(world.config, "train"))
    L = cfg.seq_len
    print(f"data {time.perf_counter() - t0:.1f}s  train refs {len(train)}  test refs {len(test)}", flush=True)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    enc = ImageEncoder((16, 32, 32), strides=(2, 2, 1))
    rows, labels = _object_rows(pool)
    t1 = time.perf_counter()
    losses = pretrain_encoder(enc, pool.images, rows[:, 0], pool.boxes[rows[:, 0], rows[:, 1]], labels,
                              n_classes=(8, 8, 3), epochs=cfg.encoder_epochs, generator=gen)  # fmt: skip
    print(f"encoder {time.perf_counter() - t1:.1f}s losses {[round(v, 3) for v in losses]}", flush=True)
    with torch.no_grad():
        fm_train = enc(train.images)
    imgs, boxes, ids, fm = _stack_rows(train, fm_train, tok, L)
    targets = list(dict.fromkeys((s, k) for s, k, _ in test.refs))[:100]

    def oracle_of(model, n=2) -> float:
        g = generate_for_targets(model, test, n_per_object=n, seed=0, targets=targets)
        ex = [(e, test.rendered[s], test.object_ids[s][k]) for (s, k), es in g.items() for e in es]
        return oracle_accuracy([e for e, _, _ in ex], [r for _, r, _ in ex], [t for _, _, t in ex], oracle)

    mcfg = VIEDMConfig.tiny(len(tok)).replace(
        seq_len=L, top_k=cfg.top_k, diffusion=DiffusionConfig(steps=cfg.T, sampling_steps=cfg.sampling_steps)
    )
    for arm, use_vtc in (("vie_dm", True), ("no_vtc", False)):
        if arm in args.skip:
            continue
        torch.manual_seed(seed * 10 + 1)
        m = VIEDM(mcfg.replace(use_vtc=use_vtc), encoder=enc, grid_tokens=144, decode=tok.decode)
        t1 = time.perf_counter()

        def block(done: int, ema: VIEDM, arm: str = arm, t1: float = t1) -> None:
            el = time.perf_counter() - t1
            print(f"  {arm} step {done} ({el:.0f}s) oracle {oracle_of(ema):.3f}", flush=True)

        ema, curve = train_viedm(m, imgs, boxes, ids, steps=args.steps, batch_size=cfg.reg_batch,
                                 lr=cfg.reg_lr,
                                 ema=cfg.ema, generator=torch.Generator().manual_seed(1), fmap=fm,
                                 progress_every=args.every, on_block=block)  # fmt: skip
        print(f"{arm} loss curve {[round(v, 3) for v in curve]}", flush=True)
        ex = generate_for_targets(ema, test, n_per_object=5, seed=0, targets=targets[:5])
        for key, es in ex.items():
            print(
                "   ", test.sentences()[test.refs.index(next(r for r in test.refs if r[:2] == key))], "->", es
            )
    if "ar" not in args.skip:
        torch.manual_seed(seed * 10 + 1)
        sp = ARSpeaker(mcfg, encoder=enc, grid_tokens=144, decode=tok.decode)
        t1 = time.perf_counter()
        for k in range(args.steps // args.every):
            train_ar_speaker(sp, imgs, boxes, ids, steps=args.every, batch_size=cfg.reg_batch, lr=cfg.reg_lr,
                             generator=torch.Generator().manual_seed(k), fmap=fm)  # fmt: skip
            el = time.perf_counter() - t1
            print(
                f"  ar step {(k + 1) * args.every} ({el:.0f}s) beam oracle {oracle_of(sp, 5):.3f}", flush=True
            )
    if "listener" not in args.skip:
        lcfg = ListenerConfig.tiny(len(tok)).replace(seq_len=L)
        g = _grammar_expressions(world, train, "train", 5, seed + 1)
        test_rows, test_ids = test.rows(), tok.encode(test.sentences(), length=L)
        for arm, data in (
            ("small", train),
            ("grammar", augment_rec_dataset(train, n_per_object=5, generated=g)),
        ):
            torch.manual_seed(3)
            lis = Listener(lcfg, encoder=enc)
            with torch.no_grad():
                f_tr = lis.candidate_features(train.images, train.boxes, train.box_mask)
                f_te = lis.candidate_features(test.images, test.boxes, test.box_mask)
            t1 = time.perf_counter()
            curve = train_listener(
                lis, f_tr, train.images, train.boxes, train.box_mask, data.rows(),
                tok.encode(data.sentences(), length=L), steps=args.listener_steps,
                batch_size=cfg.listener_batch,
                lr=cfg.listener_lr, generator=torch.Generator().manual_seed(4),
                evaluate=lambda lis=lis, f_te=f_te: listener_accuracy(
                    lis, f_te, test.images, test.boxes, test.box_mask, test_rows, test_ids),
                eval_every=250,
            )  # fmt: skip
            print(
                f"listener {arm} ({time.perf_counter() - t1:.0f}s): {[(s, round(v, 3)) for s, v in curve]}",
                flush=True,
            )


if __name__ == "__main__":
    main()
