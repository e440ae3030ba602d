"""Short pilots for the Activation Beacon base: does key→value pair recall form an induction circuit?

A 2-layer Llama (default hidden 128, 4 heads, 4 key/value heads, MLP 256) is trained with full
attention on ``make_pair_recall`` through a schedule of stages ``len:pairs:steps[:batch]`` (a
length curriculum when several are given; ``batch`` defaults to ``--batch``), answer tokens only,
AdamW with linear warm-up and cosine decay over all stages.
Optionally a share of each batch is replaced by auxiliary rows:

- ``--copy F``: a random segment is written twice at random offsets in filler, and the second copy
  is predicted (an induction target without the key/value vocabulary split);
- ``--aux F``: "skip-bigram" rows where token ``t + 1`` is a fixed permutation of token ``t - 1``
  (a direct training signal for a previous-token head).

Every ``--eval-every`` steps it prints held-out recall with 4 pairs at L = 64, 128 and 512 (chance
with an in-context-values guess is 1/4); at the end, the retrieval attention mass per layer at
L = 512, and the held-out recall and attention mass exactly as the shipped base's recipe
(``pretrain_base``) measures them (512 rows, L = 512, 4 pairs). One CPU thread;
nothing is written to disk.

Example (the runs quoted in the method README's Diagnosis):

    python experiments/activation_beacon_base_pilot.py --schedule 64:8:2000 --batch 32
    python experiments/activation_beacon_base_pilot.py --schedule 32:4:1500 --batch 64 --aux 0.25
    python experiments/activation_beacon_base_pilot.py \
        --schedule 32:2:800:128,64:4:300:64,128:4:300:32,256:8:300:16,512:8:300:8
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from iclr25.methods.activation_beacon import PairTask, make_pair_recall, retrieval_mass

FILLER = (8, 64)


def _copy_rows(n: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(*FILLER, (n, length), generator=g)
    ids[:, 0] = 2
    labels = torch.full_like(ids, -100)
    for r in range(n):
        h = int(torch.randint(4, (length - 1) // 2 + 1, (1,), generator=g))
        seg = torch.randint(8, 128, (h,), generator=g)
        start = 1 + int(torch.randint(0, length - 2 * h, (1,), generator=g))
        ids[r, start : start + h] = seg
        ids[r, length - h :] = seg
        labels[r, length - h + 1 :] = seg[1:]  # the second copy after its first token
    return ids, labels


def _skip_bigram_rows(n: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(FILLER[1] - FILLER[0], generator=torch.Generator().manual_seed(12345))
    x = torch.zeros((n, length), dtype=torch.long)
    x[:, 1:3] = torch.randint(0, FILLER[1] - FILLER[0], (n, 2), generator=g)
    for t in range(3, length):
        x[:, t] = perm[x[:, t - 2]]  # token t is fixed by token t - 2
    ids = x + FILLER[0]
    ids[:, 0] = 2
    labels = ids.clone()
    labels[:, :3] = -100
    return ids, labels


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schedule", default="64:8:2000", help="stages len:pairs:steps[:batch], comma-separated")
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, default=256)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--copy", type=float, default=0.0, help="share of copy rows per batch")
    p.add_argument("--aux", type=float, default=0.0, help="share of skip-bigram rows per batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=100)
    a = p.parse_args()
    torch.set_num_threads(1)
    config = LlamaConfig(
        vocab_size=128, hidden_size=a.d_model, intermediate_size=a.intermediate, num_hidden_layers=2,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, max_position_embeddings=1024,
        tie_word_embeddings=True, pad_token_id=0, bos_token_id=2, eos_token_id=3,
    )  # fmt: skip
    config._attn_implementation = "sdpa"
    torch.manual_seed(a.seed)
    model = LlamaForCausalLM(config)
    stages = [tuple(int(v) for v in s.split(":")) for s in a.schedule.split(",")]
    stages = [st if len(st) == 4 else (*st, a.batch) for st in stages]  # (len, pairs, steps, batch)
    total = sum(s[2] for s in stages)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0, betas=(0.9, 0.98))

    def lr_at(step: int) -> float:
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        return a.lr * 0.5 * (1 + math.cos(math.pi * (step - a.warmup) / max(1, total - a.warmup)))

    @torch.no_grad()
    def recall(length: int, n: int = 128) -> float:
        ids, labels = make_pair_recall(n, length, 16, seed=10**7 + length, task=PairTask(n_pairs=4))
        model.eval()
        logits = torch.cat([model(input_ids=ids[i : i + 32]).logits for i in range(0, n, 32)])
        model.train()
        mask = labels[:, 1:] != -100
        return float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())

    t0, step, window = time.perf_counter(), 0, []
    for length, pairs, n, batch in stages:
        for _ in range(n):
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            ids, labels = make_pair_recall(
                batch, length, 16, seed=a.seed * 1_000_003 + step, task=PairTask(n_pairs=pairs)
            )
            for share, rows in ((a.copy, _copy_rows), (a.aux, _skip_bigram_rows)):
                k = int(share * batch)
                if k:
                    extra = rows(k, length, seed=step + (77 if rows is _copy_rows else 99))
                    ids = torch.cat([ids[k:], extra[0]])
                    labels = torch.cat([labels[k:], extra[1]])
            loss = model(input_ids=ids, labels=labels).loss
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            window.append(float(loss.detach()))
            step += 1
            if step % 25 == 0:
                print(
                    f"step {step} L{length} loss {sum(window[-25:]) / 25:.3f} {time.perf_counter() - t0:.0f}s"
                )
            if step % a.eval_every == 0:
                print(
                    f"  recall (4 pairs) L64 {recall(64):.3f} L128 {recall(128):.3f} L512 {recall(512):.3f}"
                )
    model.config._attn_implementation = "eager"
    ids, labels = make_pair_recall(16, 512, 16, seed=99, task=PairTask(n_pairs=4))
    print(f"final recall L128 {recall(128):.3f} L512 {recall(512, 256):.3f}")
    print("value attention per layer at L=512:", retrieval_mass(model, ids, labels))
    # the base script's held-out measurement: 512 rows, L = 512, 4 pairs, mass on the first 64
    ids, labels = make_pair_recall(512, 512, 16, seed=10**7 + a.seed)
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(input_ids=ids[i : i + 64]).logits for i in range(0, 512, 64)])
    mask = labels[:, 1:] != -100
    acc = float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())
    mass = retrieval_mass(model, ids[:64], labels[:64])
    print(f"held-out recall (512 rows, L=512): {acc:.4f}; value attention per layer {mass}")


if __name__ == "__main__":
    main()
