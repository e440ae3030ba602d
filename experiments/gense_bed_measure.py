"""Where the GenSE test bed stands: codec ceiling vs noisy input at given SNRs, copy-synthesis PER.

Usage: python experiments/gense_bed_measure.py [SNR ...]  (default -5 0)
Loads (or trains) the full-budget front ends exactly as the claim does, then scores on the test set:
noisy input, codec copy-synthesis of clean speech, codec resynthesis of the noisy input, and clean.
"""

import sys
import time

import numpy as np
import torch

from iclr25.methods.gense import (
    ClaimConfig,
    ctc_greedy_decode,
    load_or_train_codecs,
    load_or_train_recognizer,
    make_mixtures,
    make_speech_set,
    phone_error_rate,
    stoi,
)

torch.set_num_threads(1)
snrs = tuple(float(s) for s in sys.argv[1:]) or (-5.0, 0.0)
cfg = ClaimConfig()
dc = cfg.data
t0 = time.time()
train = make_speech_set(dc, dc.train_voices, cfg.n_train, seed=0)
test = make_speech_set(dc, dc.test_voices, cfg.n_test, seed=1)
babble = make_speech_set(dc, dc.train_voices, 12, seed=2).wavs
judge, vocab = load_or_train_recognizer(train, cfg.tokenizer, seed=1)
codec = load_or_train_codecs(train, cfg.codec, seed=0)["reorg"]
print(f"loaded in {time.time() - t0:.0f}s")
noisy, _, _ = make_mixtures(test.wavs, dc.train_noises, snrs, np.random.default_rng([0, 2]), babble)
clean = test.wavs
with torch.no_grad():
    arms = {
        "noisy": noisy,
        "clean": clean,
        "codec_clean": codec.decode(codec.encode(torch.from_numpy(clean)[:, None]))[:, 0].numpy(),
        "codec_noisy": codec.decode(codec.encode(torch.from_numpy(noisy)[:, None]))[:, 0].numpy(),
    }
    for name, est in arms.items():
        hyps = ctc_greedy_decode(judge(torch.from_numpy(est.astype(np.float32))), vocab)
        s = np.mean([stoi(c, e) for c, e in zip(clean, est, strict=True)])
        print(f"SNR {snrs}  {name:12s} STOI {s:.3f}  PER {phone_error_rate(test.phones, hyps):.3f}")
