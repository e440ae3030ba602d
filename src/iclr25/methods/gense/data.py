"""The synthetic speech world of the GenSE claim: espeak-ng speech, a noise bank, SNR mixing.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942). The paper trains on DNS Challenge data; this module
stands in for it at CPU scale: clean speech from the Debian ``espeak-ng`` synthesiser (several
voices with pitch and rate jitter, two voices held out), phoneme targets from ``espeak-ng -q -x``,
and six seen noise types plus one unseen type, mixed at exact SNRs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from iclr25.methods.gense.config import SAMPLE_RATE, DataConfig

__all__ = [
    "NOISE_TYPES",
    "EspeakNotFoundError",
    "SpeechSet",
    "default_cache_dir",
    "espeak_phonemes",
    "make_mixtures",
    "make_noise",
    "make_speech_set",
    "mix_at_snr",
    "random_text",
    "synthesize",
]

NOISE_TYPES = ("white", "pink", "brown", "babble", "hum", "traffic", "clicks")
_ESPEAK_RATE = 22050
_STRESS = set("'',%=_:;!")  # stress, length and boundary marks of espeak's -x notation

_ADJ = [
    "red",
    "blue",
    "green",
    "black",
    "white",
    "small",
    "large",
    "old",
    "new",
    "bright",
    "dark",
    "quiet",
    "loud",
    "cold",
    "warm",
    "soft",
    "hard",
    "fast",
    "slow",
    "happy",
    "sad",
    "tall",
    "short",
    "clean",
    "heavy",
    "light",
    "sharp",
    "round",
    "empty",
    "full",
    "early",
    "late",
    "yellow",
    "golden",
    "silver",
    "wooden",
    "sweet",
    "bitter",
    "young",
    "gentle",
    "proud",
]
_NOUN = [
    "cat",
    "dog",
    "bird",
    "fish",
    "horse",
    "cow",
    "sheep",
    "house",
    "garden",
    "river",
    "mountain",
    "forest",
    "window",
    "door",
    "table",
    "chair",
    "book",
    "letter",
    "paper",
    "pencil",
    "doctor",
    "teacher",
    "farmer",
    "driver",
    "pilot",
    "sailor",
    "baker",
    "child",
    "mother",
    "father",
    "sister",
    "brother",
    "apple",
    "orange",
    "lemon",
    "bread",
    "butter",
    "cheese",
    "coffee",
    "water",
    "music",
    "story",
    "picture",
    "morning",
    "evening",
    "winter",
    "summer",
    "island",
    "village",
    "city",
    "market",
    "station",
    "bridge",
    "tower",
    "engine",
    "ship",
    "train",
    "rocket",
    "flower",
    "tree",
    "stone",
    "cloud",
    "storm",
    "rain",
    "snow",
    "wind",
    "fire",
    "light",
    "sound",
    "voice",
    "dream",
]
_VERB = [
    "sees",
    "finds",
    "takes",
    "brings",
    "holds",
    "likes",
    "wants",
    "needs",
    "makes",
    "paints",
    "builds",
    "opens",
    "closes",
    "moves",
    "pushes",
    "pulls",
    "carries",
    "reads",
    "writes",
    "hears",
    "calls",
    "follows",
    "helps",
    "leaves",
    "keeps",
    "drops",
    "throws",
    "catches",
    "plays",
    "cleans",
    "fixes",
    "cooks",
    "washes",
]
_DET = ["the", "a", "this", "that", "every", "my", "your", "his", "her", "our", "their", "some"]
_ADV = ["today", "now", "often", "never", "always", "quickly", "slowly", "again", "soon", "here", "there"]
_PATTERNS = (
    ("adj", "noun"),
    ("det", "noun"),
    ("noun", "verb"),
    ("det", "adj", "noun"),
    ("verb", "det", "noun"),
    ("noun", "verb", "adv"),
    ("adj", "noun", "adv"),
)
_WORDS = {"adj": _ADJ, "noun": _NOUN, "verb": _VERB, "det": _DET, "adv": _ADV}


class EspeakNotFoundError(FileNotFoundError):
    """The ``espeak-ng`` program is not installed (a missing program, like ``subprocess`` reports one)."""


def _espeak() -> str:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise EspeakNotFoundError(
            "the program 'espeak-ng' was not found on PATH; GenSE's speech data needs it: "
            "install it with `apt-get install espeak-ng` (or `make setup`)"
        )
    return exe


def random_text(rng: np.random.Generator, min_words: int = 2, max_words: int = 3) -> str:
    """A short sentence of the grammar (about 200 words, 2-3 word patterns).

    Example:
        >>> random_text(np.random.default_rng(0)).count(" ") >= 1
        True
    """
    patterns = [p for p in _PATTERNS if min_words <= len(p) <= max_words]
    if not patterns:
        raise ValueError(f"no pattern with {min_words}-{max_words} words")
    pattern = patterns[int(rng.integers(len(patterns)))]
    return " ".join(_WORDS[c][int(rng.integers(len(_WORDS[c])))] for c in pattern)


def synthesize(text: str, voice: str, *, rate: int = 170, pitch: int = 50) -> np.ndarray:
    """Speak ``text`` with espeak-ng and return 16 kHz mono float32 audio (deterministic).

    espeak-ng writes 22.05 kHz PCM to a temporary WAV (``-w``); it is resampled with
    ``scipy.signal.resample_poly`` (320/441).

    Raises:
        EspeakNotFoundError: espeak-ng is not installed.
        ValueError: empty text.
    """
    import soundfile as sf
    from scipy.signal import resample_poly

    if not text.strip():
        raise ValueError("text is empty")
    exe = _espeak()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.wav")
        cmd = [exe, "-v", voice, "-s", str(int(rate)), "-p", str(int(pitch)), "-w", path, text]
        subprocess.run(cmd, check=True, capture_output=True)
        wav, sr = sf.read(path, dtype="float32")
    if sr != _ESPEAK_RATE:
        raise RuntimeError(f"espeak-ng wrote {sr} Hz audio, expected {_ESPEAK_RATE}")
    return resample_poly(wav, 320, 441).astype(np.float32)


def espeak_phonemes(text: str, voice: str = "en-us") -> list[str]:
    """Phoneme targets from ``espeak-ng -q -x``: one symbol per character of its ASCII notation,
    stress and boundary marks removed (a character-level phone set).

    Raises:
        EspeakNotFoundError: espeak-ng is not installed.
    """
    lang = voice.split("+")[0]
    out = subprocess.run(
        [_espeak(), "-q", "-x", "-v", lang, text], check=True, capture_output=True, text=True
    )
    return [c for c in out.stdout if not c.isspace() and c not in _STRESS]


@dataclass
class SpeechSet:
    """Clean clips of one split, all ``clip_samples`` long.

    Attributes:
        wavs: [n, N] float32 clean speech at 16 kHz.
        texts: the sentences.
        phones: phoneme targets per clip.
        voices: voice index (into the split's voice list) per clip.
        voice_names: the split's voice list.
    """

    wavs: np.ndarray
    texts: list[str]
    phones: list[list[str]]
    voices: np.ndarray
    voice_names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.texts)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/iclr25/gense`` or ``~/.cache/iclr25/gense``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "iclr25" / "gense"


def _trim(wav: np.ndarray, rel: float = 0.01) -> np.ndarray:
    """Cut the leading and trailing silence espeak-ng adds (samples below ``rel`` x peak)."""
    loud = np.flatnonzero(np.abs(wav) > rel * (np.abs(wav).max() + 1e-12))
    return wav[loud[0] : loud[-1] + 1] if len(loud) else wav


def _espeak_version() -> str:
    out = subprocess.run([_espeak(), "--version"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def make_speech_set(
    cfg: DataConfig, voices: tuple[str, ...], n: int, *, seed: int, cache_dir: Path | None = None
) -> SpeechSet:
    """``n`` clean clips spoken by ``voices`` in turn, with rate and pitch jitter; cached on disk
    under a hash of the config, the voices, ``n``, ``seed`` and the espeak-ng version.

    Utterances that do not fit ``cfg.clip_seconds`` are redrawn; each clip starts after
    ``cfg.lead_seconds`` of silence and is zero-padded to the clip length.
    """
    key = json.dumps(
        {"cfg": asdict(cfg), "voices": voices, "n": n, "seed": seed, "espeak": _espeak_version(), "v": 1},
        sort_keys=True,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    path = (cache_dir or default_cache_dir()) / f"speech-{digest}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        return SpeechSet(
            wavs=z["wavs"],
            texts=list(z["texts"]),
            phones=[str(p).split(" ") for p in z["phones"]],
            voices=z["voices"],
            voice_names=tuple(voices),
        )
    rng = np.random.default_rng([seed, 11])
    N, lead = cfg.clip_samples, round(cfg.lead_seconds * SAMPLE_RATE)
    wavs = np.zeros((n, N), np.float32)
    texts, phones, vids = [], [], []
    for i in range(n):
        v = i % len(voices)
        while True:
            text = random_text(rng, cfg.min_words, cfg.max_words)
            rate = int(rng.integers(cfg.rate_range[0], cfg.rate_range[1] + 1))
            pitch = int(rng.integers(cfg.pitch_range[0], cfg.pitch_range[1] + 1))
            wav = _trim(synthesize(text, voices[v], rate=rate, pitch=pitch))
            if len(wav) + lead <= N:
                break
        peak = float(np.abs(wav).max()) or 1.0
        wavs[i, lead : lead + len(wav)] = 0.5 * wav / peak
        texts.append(text)
        phones.append(espeak_phonemes(text, voices[v]))
        vids.append(v)
    out = SpeechSet(wavs, texts, phones, np.asarray(vids), tuple(voices))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
    np.savez(
        tmp,
        wavs=wavs,
        texts=np.asarray(texts),
        phones=np.asarray([" ".join(p) for p in phones]),
        voices=out.voices,
    )
    os.replace(tmp, path)
    return out


def _coloured(rng: np.random.Generator, n: int, exponent: float) -> np.ndarray:
    """Gaussian noise with power spectrum ~ 1 / f^exponent (0 white, 1 pink, 2 brown)."""
    spec = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n)
    f[0] = f[1]
    return np.fft.irfft(spec / f ** (exponent / 2), n)


def make_noise(
    kind: str, n: int, rng: np.random.Generator, babble_pool: np.ndarray | None = None
) -> np.ndarray:
    """``n`` samples of one noise type of the bank (unit RMS).

    Types: white, pink, brown (1/f^a Gaussian); babble (3-5 summed utterances from
    ``babble_pool``, [m, >= n]); hum (50/60 Hz with 1-6 harmonics); traffic (low-passed brown
    noise with slow amplitude modulation); clicks (sparse decaying impulses, the unseen type).

    Example:
        >>> x = make_noise("pink", 16000, np.random.default_rng(0))
        >>> round(float(np.sqrt(np.mean(x**2))), 6)
        1.0
    """
    t = np.arange(n) / SAMPLE_RATE
    if kind == "white":
        x = rng.standard_normal(n)
    elif kind == "pink":
        x = _coloured(rng, n, 1.0)
    elif kind == "brown":
        x = _coloured(rng, n, 2.0)
    elif kind == "babble":
        if babble_pool is None or len(babble_pool) < 5:
            raise ValueError("babble needs a pool of at least 5 utterances")
        idx = rng.choice(len(babble_pool), size=int(rng.integers(3, 6)), replace=False)
        x = sum(np.roll(babble_pool[i, :n], int(rng.integers(n))) for i in idx)
    elif kind == "hum":
        f0 = 50.0 if rng.random() < 0.5 else 60.0
        x = sum(
            np.sin(2 * np.pi * f0 * h * t + rng.uniform(0, 2 * np.pi)) / h
            for h in range(1, int(rng.integers(2, 7)))
        )
    elif kind == "traffic":
        from scipy.signal import butter, sosfilt

        sos = butter(4, 400, btype="low", fs=SAMPLE_RATE, output="sos")
        x = sosfilt(sos, _coloured(rng, n, 1.0)) * (1.2 + np.sin(2 * np.pi * rng.uniform(0.3, 1.5) * t))
    elif kind == "clicks":
        x = np.zeros(n)
        decay = np.exp(-np.arange(160) / 20.0)
        for pos in rng.integers(0, n - 160, size=max(1, n // 1600)):
            x[pos : pos + 160] += rng.choice([-1.0, 1.0]) * decay * rng.standard_normal(160)
    else:
        raise ValueError(f"unknown noise type {kind!r}; one of {NOISE_TYPES}")
    x = np.asarray(x, np.float64)
    return (x / (np.sqrt(np.mean(x**2)) + 1e-12)).astype(np.float32)


def mix_at_snr(clean: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """``clean + g * noise`` with g chosen so that 10 log10(P_clean / P_{g noise}) = ``snr_db``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> s, v = rng.standard_normal(1000), rng.standard_normal(1000)
        >>> y = mix_at_snr(s, v, 5.0)
        >>> round(float(10 * np.log10(np.sum(s**2) / np.sum((y - s) ** 2))), 6)
        5.0

    Raises:
        ValueError: shapes differ, or either signal is silent.
    """
    clean, noise = np.asarray(clean, np.float64), np.asarray(noise, np.float64)
    if clean.shape != noise.shape:
        raise ValueError(f"clean {clean.shape} and noise {noise.shape} differ in shape")
    pc, pn = np.sum(clean**2), np.sum(noise**2)
    if pc == 0 or pn == 0:
        raise ValueError("clean speech and noise must both be non-silent")
    g = np.sqrt(pc / (pn * 10 ** (snr_db / 10)))
    return clean + g * noise


def make_mixtures(
    clean: np.ndarray,
    kinds: tuple[str, ...],
    snrs: tuple[float, ...],
    rng: np.random.Generator,
    babble_pool: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """One noisy mixture per row of ``clean`` [n, N]: a random noise kind and SNR from the lists.

    Returns:
        ``(noisy [n, N] float32, snr_db [n], kinds)``.
    """
    n, N = clean.shape
    noisy = np.empty_like(clean, dtype=np.float32)
    snr_out = np.empty(n)
    kind_out = []
    for i in range(n):
        kind = kinds[int(rng.integers(len(kinds)))]
        snr = float(snrs[int(rng.integers(len(snrs)))])
        noisy[i] = mix_at_snr(clean[i], make_noise(kind, N, rng, babble_pool), snr)
        snr_out[i] = snr
        kind_out.append(kind)
    return noisy, snr_out, kind_out
