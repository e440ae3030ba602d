"""Probe: copy-synthesis STOI of the stage-1 codec against training steps and codebook size.

Usage: python experiments/gense_codec_probe.py GROUP_CODEBOOK STEPS [HIDDEN]
"""

import sys
import time

import numpy as np
import torch

from iclr25.methods.gense import ClaimConfig, SimCodec, make_speech_set, stoi, train_codec

torch.set_num_threads(1)
gc, steps = int(sys.argv[1]), int(sys.argv[2])
hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 128
cfg = ClaimConfig()
dc = cfg.data
train = make_speech_set(dc, dc.train_voices, cfg.n_train, seed=0)
test = make_speech_set(dc, dc.test_voices, 20, seed=1)
ccfg = cfg.codec.replace(group_codebook=gc, hidden=hidden)
torch.manual_seed(0)
codec = SimCodec(ccfg)
wavs = torch.from_numpy(train.wavs)
gen = torch.Generator().manual_seed(0)
t0 = time.time()
chunk = 300
for k in range(0, steps, chunk):
    curve = train_codec(codec, wavs, steps=chunk, generator=gen, init_codebook=(k == 0))
    with torch.no_grad():
        y = codec.decode(codec.encode(torch.from_numpy(test.wavs)[:, None]))[:, 0].numpy()
    s = np.mean([stoi(c, e) for c, e in zip(test.wavs, y, strict=True)])
    t = time.time() - t0
    print(
        f"gc {gc} hidden {hidden} step {k + chunk} loss {curve[-1]:.3f} STOI {s:.3f} t {t:.0f}s", flush=True
    )
