"""GenSE: the S2S language model's learning curve against training steps, with a perfect N2S.

Run as a script (never imported by the library)::

    python experiments/gense_s2s_curve.py --steps 300 1200 --lr 1e-3 3e-3

For every (steps, lr) pair, one S2S is trained exactly as the claim trains it (same data, noisy
mixtures of seed 0, token-chain prompting, the cached tokeniser and reorganised codec of the full
budget), then decodes the first 20 test mixtures from the *clean* semantic tokens (the claim's
``oracle_sem`` arm, i.e. a perfect N2S). It prints the final training loss, the acoustic-token
accuracy against the clean speech's codes, distinct tokens per clip (a stationary output uses a
handful), STOI and PER, next to the noisy input and the codec's copy-synthesis of clean speech.
Each S2S of 1,200 steps takes about 8 minutes at one thread.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from iclr25.methods.gense import (
    S2S,
    ClaimConfig,
    GenSE,
    SpeakerProxy,
    load_or_train_codecs,
    load_or_train_recognizer,
    load_or_train_tokenizer,
    make_mixtures,
    make_speech_set,
    train_lm,
)
from iclr25.methods.gense.claim import _score


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[300, 1200])
    ap.add_argument("--lr", type=float, nargs="+", default=[1e-3, 3e-3])
    ap.add_argument("--n-test", type=int, default=20)
    ap.add_argument(
        "--strategy", nargs="+", default=["sample", "greedy"], help="decodings to score (sample: T = 1)"
    )
    ap.add_argument("--out", default=None, help="also write the rows as JSON here")
    args = ap.parse_args()
    torch.set_num_threads(1)

    cfg = ClaimConfig()
    dc, lc = cfg.data, cfg.lm
    train = make_speech_set(dc, dc.train_voices, cfg.n_train, seed=0)
    test = make_speech_set(dc, dc.test_voices, cfg.n_test, seed=1)
    babble = make_speech_set(dc, dc.train_voices, 12, seed=2).wavs
    tok, vocab = load_or_train_tokenizer(train, cfg.tokenizer, seed=0)
    judge, _ = load_or_train_recognizer(train, cfg.tokenizer, seed=1)
    codec = load_or_train_codecs(train, cfg.codec, seed=0)["reorg"]
    proxy = SpeakerProxy().fit(list(train.wavs))

    rng = np.random.default_rng([0, 1])  # the claim's seed-0 mixtures
    clean = torch.from_numpy(train.wavs)
    noisy = torch.from_numpy(
        np.concatenate(
            [
                make_mixtures(train.wavs, dc.train_noises, dc.train_snrs, rng, babble)[0]
                for _ in range(cfg.mixtures_per_clip)
            ]
        )
    )
    rows = torch.arange(len(noisy)) % cfg.n_train
    with torch.no_grad():
        clean_sem, noisy_sem = tok.transform_batch(clean)[rows], tok.transform_batch(noisy)
        clean_ac = codec.encode(clean[:, None])[..., 0][rows]
        noisy_ac = codec.encode(noisy[:, None])[..., 0]

    n = args.n_test
    noisy_te, _, _ = make_mixtures(
        test.wavs, dc.train_noises, dc.test_snrs, np.random.default_rng([0, 2]), babble
    )
    x_te, clean_te, phones = torch.from_numpy(noisy_te[:n]), test.wavs[:n], test.phones[:n]
    ref_sem = tok.transform_batch(torch.from_numpy(clean_te))
    ref_ac = codec.encode(torch.from_numpy(clean_te)[:, None])[..., 0]
    with torch.no_grad():
        copy = codec.decode(codec.encode(torch.from_numpy(clean_te)[:, None]))[:, 0].numpy()
    out = {
        "noisy": _score(noisy_te[:n], clean_te, phones, judge, vocab, proxy),
        "codec_clean": _score(copy, clean_te, phones, judge, vocab, proxy),
    }
    for k, m in out.items():
        print(f"{k:>12}: STOI {m['stoi']:.3f}  PER {m['per']:.3f}")

    rows_out = []
    for steps in args.steps:
        for lr in args.lr:
            torch.manual_seed(2)
            s2s = S2S(cfg.tokenizer.n_clusters, codec.codebook_size, lc)
            t0 = time.perf_counter()
            curve = train_lm(
                s2s,
                lambda i, s2s=s2s: s2s.batch(noisy_sem[i], clean_sem[i], noisy_ac[i], clean_ac[i]),
                len(noisy),
                steps=steps,
                batch_size=lc.batch_size,
                lr=lr,
                generator=torch.Generator().manual_seed(52),
            )
            seconds = time.perf_counter() - t0
            for strategy in args.strategy:
                g = GenSE(
                    tok, codec, None, s2s, chunk_samples=dc.clip_samples, strategy=strategy, vocab=vocab
                )
                tk = g.tokens(x_te, clean_semantic=ref_sem)
                with torch.no_grad():
                    wav = codec.decode(tk["acoustic"][..., None])[:, 0].numpy()
                m = _score(wav, clean_te, phones, judge, vocab, proxy)
                row = {
                    "steps": steps,
                    "lr": lr,
                    "strategy": strategy,
                    "train_s": round(seconds, 1),
                    "final_loss": round(curve[-1], 3),
                    "token_acc": round(float((tk["acoustic"] == ref_ac).float().mean()), 3),
                    "distinct_per_clip": float(np.mean([len(set(r.tolist())) for r in tk["acoustic"]])),
                    "stoi": round(float(m["stoi"]), 3),
                    "per": round(float(m["per"]), 3),
                }
                rows_out.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"reference": out, "rows": rows_out}, f, indent=1, default=float)


if __name__ == "__main__":
    main()
