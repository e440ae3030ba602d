"""Beacon training on the shipped base outside the claim: a direct fit to one batch, or a learning curve.

Beacons (step-random α over ``--ratios``) are trained on the frozen shipped base with the claim's
loss (answer tokens of ``make_pair_recall``, 128-token rows, w = 16, sink 1), AdamW at ``--lr``,
16 rows a step. ``--fixed-batch`` trains on one batch again and again (can the beacon parameters
fit one instance at all?). Otherwise every step draws a new batch with ``--train-pairs`` pairs
per row (the query span grows to hold them), and every ``--every`` steps the held-out recall
(128 rows of 128 tokens, 4 pairs) is printed at each α of ``--ratios``. One CPU thread; nothing
is written to disk.

Examples (the runs quoted in the method README's Diagnosis):

    python experiments/activation_beacon_curve.py --ratios 2 --lr 3e-3 --steps 200 --fixed-batch
    python experiments/activation_beacon_curve.py --ratios 2 --lr 1e-3 --steps 3000
    python experiments/activation_beacon_curve.py --ratios 2 --lr 1e-3 --steps 3000 --train-pairs 12
"""

from __future__ import annotations

import argparse
import time

import torch

from iclr25.methods.activation_beacon import (
    BeaconConfig,
    PairTask,
    load_base,
    make_pair_recall,
    wrap_with_beacon,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ratios", default="2,4,8", help="training ratios α, comma-separated")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--train-pairs", type=int, default=4, help="pairs per training row")
    p.add_argument("--fixed-batch", action="store_true", help="train on one batch only")
    p.add_argument("--every", type=int, default=250)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    ratios = tuple(int(r) for r in a.ratios.split(","))
    bm = wrap_with_beacon(load_base(), BeaconConfig(window=16, ratios=ratios, sink_size=1, seed=a.seed))
    params = list(bm.beacon_parameters().values())
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0)
    train_task = PairTask(n_pairs=a.train_pairs)
    query_len = max(16, 2 * a.train_pairs)
    fixed = make_pair_recall(16, 128, query_len, seed=a.seed * 7919 + 5, task=train_task)
    ev_ids, ev_labels = make_pair_recall(128, 128, 16, seed=10**6 + a.seed, task=PairTask(n_pairs=4))

    @torch.no_grad()
    def recall(alpha: int) -> float:
        logits = bm(ev_ids, beacon_ratio=alpha).logits
        mask = ev_labels[:, 1:] != -100
        return float((logits[:, :-1].argmax(-1)[mask] == ev_labels[:, 1:][mask]).float().mean())

    t0, window = time.perf_counter(), []
    for step in range(1, a.steps + 1):
        if a.fixed_batch:
            ids, labels = fixed
        else:
            ids, labels = make_pair_recall(16, 128, query_len, seed=a.seed * 100_003 + step, task=train_task)
        loss = bm(ids, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        window.append(loss.item())
        if step % a.every == 0 or step == a.steps:
            acc = ", ".join(f"α={r} {recall(r):.3f}" for r in ratios)
            mean = sum(window[-a.every :]) / len(window[-a.every :])
            took = time.perf_counter() - t0
            print(f"step {step}  loss {mean:.3f}  held-out recall {acc}  {took:.0f} s", flush=True)


if __name__ == "__main__":
    main()
