"""Evaluation metrics of the GenSE claim: PESQ, STOI/ESTOI, SI-SDR, a speaker-similarity proxy,
phone error rate and real-time factor.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 4 (evaluation). WB-PESQ comes from ``pesq``,
STOI/ESTOI and SI-SDR from ``torchmetrics``, PER from ``jiwer`` over phone strings. The paper's
SECS uses a WavLM speaker-verification model; here the proxy is the cosine of standardised MFCC
statistics of the voiced frames (:class:`SpeakerProxy`), which separates the espeak-ng voices
(tested). DNSMOS P.835 (Reddy et al., arXiv 2110.01763) comes from the ``speechmos`` package,
whose wheel carries the ONNX models, so it runs offline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from iclr25.methods.gense.config import SAMPLE_RATE

__all__ = [
    "SpeakerProxy",
    "dnsmos",
    "dnsmos_available",
    "pesq_wb",
    "phone_error_rate",
    "real_time_factor",
    "si_sdr",
    "stoi",
]


def _pair(ref: np.ndarray, est: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    if sample_rate != SAMPLE_RATE:
        raise ValueError(f"metrics expect {SAMPLE_RATE} Hz audio, got {sample_rate}")
    ref, est = np.asarray(ref, np.float64), np.asarray(est, np.float64)
    if ref.ndim != 1 or ref.shape != est.shape:
        raise ValueError(f"reference {ref.shape} and estimate {est.shape} must be 1-D and of one length")
    if not (np.all(np.isfinite(ref)) and np.all(np.isfinite(est))):
        raise ValueError("audio contains NaN or inf")
    return ref, est


def si_sdr(ref: np.ndarray, est: np.ndarray) -> float:
    """Scale-invariant SDR in dB: 10 log10(||a s||^2 / ||a s - e||^2), a = <e, s> / ||s||^2,
    after removing the means (``torchmetrics``).

    Example:
        >>> s = np.sin(np.arange(1000) / 7.0)
        >>> round(si_sdr(s, 3.0 * s + 0.01 * np.cos(np.arange(1000) / 3.0)), 1) > 40
        True
    """
    import torch
    from torchmetrics.functional.audio import scale_invariant_signal_distortion_ratio

    ref, est = _pair(ref, est, SAMPLE_RATE)
    out = scale_invariant_signal_distortion_ratio(
        torch.from_numpy(est), torch.from_numpy(ref), zero_mean=True
    )
    return float(out)


def pesq_wb(ref: np.ndarray, est: np.ndarray, sample_rate: int = SAMPLE_RATE) -> float:
    """Wide-band PESQ (ITU-T P.862.2) via the ``pesq`` package; NaN when no utterance is found."""
    from pesq import NoUtterancesError, pesq

    ref, est = _pair(ref, est, sample_rate)
    try:
        return float(pesq(sample_rate, ref, est, "wb"))
    except NoUtterancesError:
        return float("nan")


def stoi(
    ref: np.ndarray, est: np.ndarray, sample_rate: int = SAMPLE_RATE, *, extended: bool = False
) -> float:
    """STOI (or ESTOI with ``extended=True``) via ``torchmetrics`` (which wraps ``pystoi``)."""
    import torch
    from torchmetrics.functional.audio import short_time_objective_intelligibility

    ref, est = _pair(ref, est, sample_rate)
    out = short_time_objective_intelligibility(
        torch.from_numpy(est), torch.from_numpy(ref), sample_rate, extended=extended
    )
    return float(out)


def phone_error_rate(refs: Sequence[Sequence[str]], hyps: Sequence[Sequence[str]]) -> float:
    """Corpus phone error rate (edit operations / reference phones) via ``jiwer``.

    Example:
        >>> phone_error_rate([["a", "b", "c"]], [["a", "c"]])
        0.3333333333333333
    """
    import jiwer

    if len(refs) != len(hyps) or not refs:
        raise ValueError("need one hypothesis per reference and at least one pair")
    if any(len(r) == 0 for r in refs):
        raise ValueError("references must not be empty")
    out = jiwer.process_words([" ".join(r) for r in refs], [" ".join(h) for h in hyps])
    return float(out.wer)


def dnsmos_available() -> bool:
    """Whether DNSMOS can run: ``speechmos`` and ``onnxruntime`` are installed."""
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("speechmos", "onnxruntime"))


def dnsmos(wavs: Sequence[np.ndarray], sample_rate: int = SAMPLE_RATE) -> dict[str, float]:
    """Mean DNSMOS P.835 scores (signal, background, overall; 1-5) of 16 kHz clips.

    Clips shorter than the model's 9 s window are repeated to fill it, as DNSMOS does.

    Raises:
        ModuleNotFoundError: ``speechmos`` or ``onnxruntime`` is missing (``pip install iclr25[gense]``).
        ValueError: not 16 kHz, or a clip that is not a finite 1-D waveform.
    """
    if not dnsmos_available():
        raise ModuleNotFoundError("DNSMOS needs speechmos and onnxruntime: pip install 'iclr25[gense]'")
    if sample_rate != SAMPLE_RATE:
        raise ValueError(f"DNSMOS expects {SAMPLE_RATE} Hz audio, got {sample_rate}")
    from speechmos import dnsmos as _dnsmos

    rows = []
    for w in wavs:
        x = np.asarray(w, np.float32)
        if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
            raise ValueError(f"expected a finite 1-D waveform, got shape {x.shape}")
        peak = float(np.abs(x).max())
        r = _dnsmos.run(x / peak if peak > 1 else x, sr=SAMPLE_RATE)  # the package rejects |x| > 1
        rows.append((r["sig_mos"], r["bak_mos"], r["ovrl_mos"]))
    m = np.asarray(rows, np.float64).mean(0)
    return {"sig": float(m[0]), "bak": float(m[1]), "ovrl": float(m[2])}


def real_time_factor(fn: Callable[[], object], audio_seconds: float) -> float:
    """Processing time of ``fn()`` divided by the duration of the audio it processes."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) / audio_seconds


class SpeakerProxy:
    """Speaker-similarity proxy: cosine of standardised MFCC mean/std vectors of voiced frames.

    ``fit`` learns the per-dimension mean and scale of the statistics over a set of clean clips,
    so no single coefficient dominates the cosine.

    Args:
        n_mfcc: MFCCs per frame (c0 is dropped).
        energy_quantile: frames below this quantile of frame energy are treated as silence.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> p = SpeakerProxy().fit([rng.standard_normal(8000) for _ in range(4)])
        >>> a, b = rng.standard_normal(8000), rng.standard_normal(8000)
        >>> -1.0 <= p.similarity(a, b) <= 1.0
        True
    """

    def __init__(self, n_mfcc: int = 20, energy_quantile: float = 0.4) -> None:
        self.n_mfcc = n_mfcc
        self.energy_quantile = energy_quantile

    def _stats(self, wav: np.ndarray) -> np.ndarray:
        import librosa

        x = np.asarray(wav, np.float32)
        m = librosa.feature.mfcc(y=x, sr=SAMPLE_RATE, n_mfcc=self.n_mfcc, n_fft=512, hop_length=160)[
            1:
        ]  # [C, T]
        e = librosa.feature.rms(y=x, frame_length=512, hop_length=160)[0][: m.shape[1]]
        voiced = m[:, e >= np.quantile(e, self.energy_quantile)]
        return np.concatenate([voiced.mean(1), voiced.std(1)])

    def fit(self, wavs: Sequence[np.ndarray]) -> SpeakerProxy:
        s = np.stack([self._stats(w) for w in wavs])
        self.mean_, self.scale_ = s.mean(0), s.std(0) + 1e-6
        return self

    def embed(self, wav: np.ndarray) -> np.ndarray:
        """The standardised statistics vector of one clip."""
        return (self._stats(wav) - self.mean_) / self.scale_

    def similarity(self, a: np.ndarray, b: np.ndarray) -> float:
        """Cosine similarity of the two clips' embeddings, in [-1, 1]."""
        ea, eb = self.embed(a), self.embed(b)
        return float(ea @ eb / (np.linalg.norm(ea) * np.linalg.norm(eb) + 1e-12))
