"""Train the frozen base of the Activation Beacon claim check and write it as package data.

The base is a 2-layer Llama (hidden 64, GQA 4/2 heads) trained with full attention, on one CPU
thread, through the schedule of ``BaseTrainConfig.stages``
(``iclr25.methods.activation_beacon.base``): rows with a repeated random segment until an
induction circuit forms, then key→value pair recall at L = 128, 256 and 512. The exact command
and seed of the shipped weights are in the method README and in ``data/base/training.json``.

It writes ``config.json`` and ``model.safetensors`` (``save_pretrained``) and ``training.json``
(the training config, this command, every step's loss, held-out accuracy, the accuracy with each
layer's reads of the context blocked, and the attention mass on the fact's value per layer). A
test re-runs the first steps and compares them with the recorded losses.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

from iclr25.methods.activation_beacon.base import (
    BaseTrainConfig,
    knockout_accuracy,
    make_pair_recall,
    retrieval_mass,
    train_base,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=BaseTrainConfig.seed, help="seed")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    cfg = BaseTrainConfig(seed=args.seed)
    t0 = time.perf_counter()

    def log(step: int, loss: float) -> None:
        if step % 25 == 0 or step == cfg.steps - 1:
            print(f"step {step:5d}  loss {loss:.4f}  {time.perf_counter() - t0:7.1f} s", flush=True)

    model, losses = train_base(cfg, log=log)
    ids, labels = make_pair_recall(512, 512, 16, seed=10**7 + cfg.seed)
    with torch.no_grad():
        logits = torch.cat([model(input_ids=ids[i : i + 64]).logits for i in range(0, 512, 64)])
    mask = labels[:, 1:] != -100
    acc = float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())
    mass = retrieval_mass(model, ids[:64], labels[:64])
    blocked = [knockout_accuracy(model, ids[:64], labels[:64], 16, [i]) for i in range(cfg.n_layer)]
    print(f"held-out accuracy (4 pairs, L=512): {acc:.4f}; with layer i's context reads blocked {blocked}")
    print(f"attention from the query key to the fact's value, per layer: {mass}")
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    record = {
        "command": f"python experiments/activation_beacon_base.py --out <folder> --seed {cfg.seed}",
        "threads": 1,
        "torch": torch.__version__,
        "config": dataclasses.asdict(cfg),
        "losses": losses,
        "heldout_accuracy": acc,
        "accuracy_layer_blocked": blocked,
        "value_attention_per_layer": mass,
        "seconds": time.perf_counter() - t0,
    }
    (args.out / "training.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
