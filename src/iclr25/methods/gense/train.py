"""Training recipes of the GenSE front ends, cached on disk by config hash.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942). The official release has no training code. The phone
recogniser (semantic features), its k-means and the codec are trained once per configuration and
shared by every seed of the language-model stage; the codec recipe is the two-stage
reorganisation (stage 1: two groups; usage ranking; stage 2: the N x K product codebook), with a
directly trained codebook of the same size and a least-used reorganisation as comparisons.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from iclr25.methods.gense.baselines import naive_codec
from iclr25.methods.gense.codec import SimCodec, codec_mel_l1, train_codec
from iclr25.methods.gense.config import CodecConfig, TokenizerConfig
from iclr25.methods.gense.data import SpeechSet, default_cache_dir
from iclr25.methods.gense.semantic import (
    PhoneCTC,
    PhoneCTCFeatures,
    SemanticTokenizer,
    phone_vocabulary,
    train_phone_ctc,
)

__all__ = ["load_or_train_codecs", "load_or_train_recognizer", "load_or_train_tokenizer", "speech_key"]

_VERSION = 3  # 2: frame-rate codec, zero-padded STFTs; 3: held-out curves of the codecs
Progress = Callable[[str, int, int], None]


def _hash(obj: object) -> str:
    blob = json.dumps({"obj": obj, "torch": torch.__version__.split("+")[0], "v": _VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def speech_key(data: SpeechSet) -> str:
    """A hash of a speech set's texts, voices and audio checksum (keys the caches below)."""
    h = hashlib.sha256(data.wavs.tobytes()).hexdigest()[:16]
    return _hash({"texts": data.texts, "voices": data.voices.tolist(), "audio": h})


def _save(state: dict[str, torch.Tensor], path: Path) -> None:
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    save_file({k: v.detach().clone().contiguous() for k, v in state.items()}, str(tmp))
    os.replace(tmp, path)


def load_or_train_recognizer(
    train: SpeechSet,
    cfg: TokenizerConfig,
    *,
    seed: int,
    cache_dir: Path | None = None,
    progress: Progress = lambda s, d, t: None,
) -> tuple[PhoneCTC, list[str]]:
    """The CTC phone recogniser trained on the clean clips of ``train`` (cached)."""
    from safetensors.torch import load_file

    vocab = phone_vocabulary(train.phones)
    path = (
        cache_dir or default_cache_dir()
    ) / f"ctc-{_hash([asdict(cfg), speech_key(train), seed])}.safetensors"
    model = PhoneCTC(len(vocab), cfg)
    if path.exists():
        model.load_state_dict(load_file(str(path)))
        return model.eval(), vocab
    torch.manual_seed(seed)
    model = train_phone_ctc(
        train.wavs,
        train.phones,
        vocab,
        cfg,
        generator=torch.Generator().manual_seed(seed),
        progress=lambda d, t: progress(f"phone recogniser (seed {seed})", d, t),
    )
    _save(model.state_dict(), path)
    return model, vocab


def load_or_train_tokenizer(
    train: SpeechSet,
    cfg: TokenizerConfig,
    *,
    seed: int = 0,
    cache_dir: Path | None = None,
    progress: Progress = lambda s, d, t: None,
) -> tuple[SemanticTokenizer, list[str]]:
    """Recogniser + k-means fitted on the clean training clips (cached); returns it and the vocab."""
    model, vocab = load_or_train_recognizer(train, cfg, seed=seed, cache_dir=cache_dir, progress=progress)
    path = (
        cache_dir or default_cache_dir()
    ) / f"kmeans-{_hash([asdict(cfg), speech_key(train), seed])}.joblib"
    tok = SemanticTokenizer(
        PhoneCTCFeatures(model), cfg.n_clusters, batch_size=cfg.kmeans_batch, random_state=seed
    )
    if path.exists():
        return tok.load_kmeans(path), vocab
    tok.fit(list(train.wavs))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(path)
    return tok, vocab


def load_or_train_codecs(
    train: SpeechSet,
    cfg: CodecConfig,
    *,
    seed: int = 0,
    cache_dir: Path | None = None,
    progress: Progress = lambda s, d, t: None,
    val_wavs: torch.Tensor | None = None,
    curves: dict[str, tuple[list[float], list[float]]] | None = None,
) -> dict[str, SimCodec]:
    """Three codecs trained on the clean training clips (cached), and with ``val_wavs`` (held-out
    clean clips [n, N]) and ``curves`` (a dict) their held-out log-mel L1 every 20 steps of their
    last stage, filled into ``curves`` as ``name -> (steps, values)`` (cached with the weights):

    - ``reorg``: stage 1 (two groups) for ``stage1_steps``, reorganised to the top-N x top-K
      product codebook, stage 2 for ``stage2_steps``;
    - ``naive``: one directly trained N*K codebook for ``stage1_steps + stage2_steps``;
    - ``least``: the same stage 1 reorganised with the *least* used codes (a broken ranking),
      stage 2 for ``stage2_steps``.
    """
    from safetensors.torch import load_file

    val_key = None if val_wavs is None else hashlib.sha256(val_wavs.numpy().tobytes()).hexdigest()[:16]
    key = _hash([asdict(cfg), speech_key(train), seed, val_key])
    root = cache_dir or default_cache_dir()
    paths = {name: root / f"codec-{name}-{key}.safetensors" for name in ("reorg", "naive", "least")}
    curve_path = root / f"codec-curves-{key}.json"
    n1 = cfg.codebook_size
    if all(p.exists() for p in paths.values()) and (val_wavs is None or curve_path.exists()):
        out = {}
        for name, p in paths.items():
            c = SimCodec(cfg, n_groups=1, codebook_size=n1)
            c.load_state_dict(load_file(str(p)))
            out[name] = c.eval()
        if curves is not None and val_wavs is not None:
            curves.update({k: (v[0], v[1]) for k, v in json.loads(curve_path.read_text()).items()})
        return out
    wavs = torch.from_numpy(train.wavs)
    recorded: dict[str, tuple[list[float], list[float]]] = {}

    def report(stage: str, codec: SimCodec | None = None, name: str = "") -> Callable[[int, int], None]:
        if codec is None or val_wavs is None:
            return lambda d, t: progress(stage, d, t)
        recorded[name] = ([], [])

        def read(d: int, t: int) -> None:  # the codecs have no dropout or batch norm: train mode reads alike
            recorded[name][0].append(float(d))
            recorded[name][1].append(codec_mel_l1(codec, val_wavs))
            progress(stage, d, t)

        return read

    torch.manual_seed(seed)
    stage1 = SimCodec(cfg)
    train_codec(
        stage1,
        wavs,
        steps=cfg.stage1_steps,
        generator=torch.Generator().manual_seed(seed),
        progress=report("codec stage 1"),
    )
    usage = stage1.usage(wavs)
    reorg = stage1.reorganize(usage, cfg.top_n, cfg.top_k)
    train_codec(
        reorg,
        wavs,
        steps=cfg.stage2_steps,
        generator=torch.Generator().manual_seed(seed + 1),
        init_codebook=False,
        progress=report("codec stage 2", reorg, "reorg"),
    )
    least = stage1.reorganize([-u for u in usage], cfg.top_n, cfg.top_k)
    train_codec(
        least,
        wavs,
        steps=cfg.stage2_steps,
        generator=torch.Generator().manual_seed(seed + 1),
        init_codebook=False,
        progress=report("codec stage 2 (least-used control)", least, "least"),
    )
    torch.manual_seed(seed)
    naive = naive_codec(cfg)
    train_codec(
        naive,
        wavs,
        steps=cfg.stage1_steps + cfg.stage2_steps,
        generator=torch.Generator().manual_seed(seed),
        progress=report("codec naive VQ", naive, "naive"),
    )
    out = {"reorg": reorg, "naive": naive, "least": least}
    for name, c in out.items():
        _save(c.state_dict(), paths[name])
    if val_wavs is not None:
        curve_path.write_text(json.dumps(recorded))
        if curves is not None:
            curves.update(recorded)
    return out
