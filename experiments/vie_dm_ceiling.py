"""Room for the REC gate: the grammar ceiling's gain over the small set, by size of the small set.

For each size of the small real set, one listener trains on it alone and one on it plus five fresh
grammar expressions per object (the claim's ceiling arm); both are scored on the same test scenes.
The claim's precondition asks for a gain of at least twice the REC bar (2 x 3 points).

Run: python experiments/vie_dm_ceiling.py --seed 0 --sizes 100 150 250
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.methods.vie_dm import (
    ClaimConfig,
    ExpressionTokenizer,
    ImageEncoder,
    Listener,
    ListenerConfig,
    augment_rec_dataset,
    from_shapes_world,
    listener_accuracy,
    pretrain_encoder,
    train_listener,
)
from iclr25.methods.vie_dm.claim import _grammar_expressions, _object_rows, _world


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 150, 250])
    ap.add_argument("--encoder-cache", default="")
    args = ap.parse_args()
    torch.set_num_threads(1)
    from iclr25.common.data.shapes_world.language import vocabulary

    cfg, seed = ClaimConfig(), args.seed
    t0 = time.perf_counter()
    world = _world(cfg, seed)
    tok = ExpressionTokenizer(vocabulary(world.config, "train"))
    test = from_shapes_world(world, range(cfg.n_test), split="test")
    torch.manual_seed(seed)
    enc = ImageEncoder((16, 32, 32), strides=(2, 2, 1))
    try:
        enc.load_state_dict(torch.load(args.encoder_cache))
        print("encoder from cache", flush=True)
    except (FileNotFoundError, RuntimeError):
        pool = from_shapes_world(world, range(cfg.n_pool), split="pool")
        rows, labels = _object_rows(pool)
        pretrain_encoder(
            enc, pool.images, rows[:, 0], pool.boxes[rows[:, 0], rows[:, 1]], labels,
            n_classes=(8, 8, 3), epochs=cfg.encoder_epochs, generator=torch.Generator().manual_seed(seed),
        )  # fmt: skip
        if args.encoder_cache:
            torch.save(enc.state_dict(), args.encoder_cache)
    print(f"setup {time.perf_counter() - t0:.0f}s", flush=True)
    L = cfg.seq_len
    lcfg = ListenerConfig.tiny(len(tok)).replace(d_model=cfg.d_model, seq_len=L)
    test_rows, test_ids = test.rows(), tok.encode(test.sentences(), length=L)
    for n in args.sizes:
        train = from_shapes_world(world, range(n), split="train")
        aug = _grammar_expressions(world, train, "train", cfg.n_per_object, seed + 1)
        arms = {
            "small": train,
            "grammar": augment_rec_dataset(train, n_per_object=cfg.n_per_object, generated=aug),
        }
        accs = {}
        for arm, data in arms.items():
            torch.manual_seed(seed * 10 + 3)
            lis = Listener(lcfg, encoder=enc)
            with torch.no_grad():
                ft = lis.candidate_features(train.images, train.boxes, train.box_mask)
                fs = lis.candidate_features(test.images, test.boxes, test.box_mask)
            curve = train_listener(
                lis, ft, train.images, train.boxes, train.box_mask, data.rows(),
                tok.encode(data.sentences(), length=L), steps=cfg.listener_steps,
                batch_size=cfg.listener_batch, lr=cfg.listener_lr,
                generator=torch.Generator().manual_seed(seed * 10 + 4),
                evaluate=lambda lis=lis, f=fs: listener_accuracy(
                    lis, f, test.images, test.boxes, test.box_mask, test_rows, test_ids
                ),
                eval_every=max(cfg.listener_steps // 4, 1),
            )  # fmt: skip
            accs[arm] = curve
        gain = accs["grammar"][-1][1] - accs["small"][-1][1]
        print(
            f"n_train {n} refs {len(train)}: small {[round(v, 3) for _, v in accs['small']]} "
            f"grammar {[round(v, 3) for _, v in accs['grammar']]} gain {gain:+.3f} "
            f"({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
