"""Speech data (espeak-ng), noise mixing, input checks and the metrics of the GenSE claim."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from iclr25.methods.gense import (
    EspeakNotFoundError,
    SpeakerProxy,
    as_mono,
    dnsmos,
    dnsmos_available,
    espeak_phonemes,
    make_noise,
    mix_at_snr,
    pesq_wb,
    phone_error_rate,
    si_sdr,
    stoi,
    synthesize,
)
from iclr25.methods.gense import data as gdata

# tiny models: a second torch thread only spins on a busy machine
pytestmark = pytest.mark.usefixtures("one_thread")

needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")


def _speech(seed: int = 0, n: int = 16000) -> np.ndarray:
    """A voiced, speech-like test signal (harmonics with a syllable envelope)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000
    x = sum(np.sin(2 * np.pi * 120 * h * t + rng.uniform(0, 6)) / h for h in range(1, 20))
    return (x * (0.6 + 0.4 * np.sin(2 * np.pi * 4 * t)) ** 2 * 0.1).astype(np.float64)


@needs_espeak
def test_espeak_synthesis_is_deterministic() -> None:
    a = synthesize("green bridge", "en-us+m1", rate=160, pitch=40)
    b = synthesize("green bridge", "en-us+m1", rate=160, pitch=40)
    assert a.dtype == np.float32 and len(a) > 4000
    assert hash(a.tobytes()) == hash(b.tobytes())
    assert len(espeak_phonemes("green bridge")) >= 6


def test_missing_espeak_names_the_program(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gdata.shutil, "which", lambda name: None)
    with pytest.raises(EspeakNotFoundError, match=r"espeak-ng.*apt-get install espeak-ng"):
        synthesize("hello", "en-us")


@pytest.mark.parametrize("snr", [-5.0, 0.0, 7.5, 10.0])
def test_mix_at_snr_is_exact(snr: float) -> None:
    rng = np.random.default_rng(0)
    s, v = _speech(), make_noise("pink", 16000, rng)
    y = mix_at_snr(s, v, snr)
    assert abs(10 * np.log10(np.sum(s**2) / np.sum((y - s) ** 2)) - snr) < 1e-6


@pytest.mark.parametrize("kind", ["white", "pink", "brown", "hum", "traffic", "clicks"])
def test_noise_bank_unit_rms(kind: str) -> None:
    x = make_noise(kind, 8000, np.random.default_rng(0))
    assert abs(np.sqrt(np.mean(x.astype(np.float64) ** 2)) - 1) < 1e-4
    with pytest.raises(ValueError, match="babble"):
        make_noise("babble", 8000, np.random.default_rng(0))


def test_si_sdr_scale_invariant_and_equals_snr_of_orthogonal_mixture() -> None:
    s = _speech()
    s = s - s.mean()
    v = np.random.default_rng(1).standard_normal(len(s))
    v = v - v.mean()
    v = v - (v @ s) / (s @ s) * s  # orthogonal to the (zero-mean) clean signal
    y = mix_at_snr(s, v, 3.0)
    assert abs(si_sdr(s, y) - 3.0) < 1e-6
    assert abs(si_sdr(s, 0.1 * y) - si_sdr(s, y)) < 1e-9


def test_pesq_and_stoi_maximal_on_identity_and_checked() -> None:
    s = _speech(n=32000)
    assert pesq_wb(s, s) > 4.5
    assert stoi(s, s) > 0.999 and stoi(s, s, extended=True) > 0.999
    with pytest.raises(ValueError, match="16000"):
        stoi(s, s, 8000)
    with pytest.raises(ValueError, match="length"):
        pesq_wb(s, s[:-10])


def test_phone_error_rate() -> None:
    assert phone_error_rate([["a", "b"], ["c"]], [["a", "b"], ["c"]]) == 0.0
    assert phone_error_rate([["a", "b"]], [["x", "b", "y"]]) == 1.0
    with pytest.raises(ValueError):
        phone_error_rate([["a"]], [])


def test_input_checks() -> None:
    with pytest.raises(ValueError, match="mono"):
        as_mono(np.zeros((100, 2)))
    assert as_mono(np.ones((100, 2)), downmix=True).shape == (100,)
    with pytest.raises(ValueError, match="empty"):
        as_mono(np.zeros(0))
    with pytest.raises(ValueError, match="NaN"):
        as_mono(np.array([0.0, np.nan]))


@needs_espeak
def test_speaker_proxy_same_voice_beats_cross_voice() -> None:
    texts = ["red house", "old river", "my sister", "cold winter"]
    voices = ["en-us+m1", "en-us+f2"]
    clips = {v: [synthesize(t, v, rate=170, pitch=50) for t in texts] for v in voices}
    proxy = SpeakerProxy().fit([c for v in voices for c in clips[v]])
    same = np.mean(
        [proxy.similarity(clips[v][i], clips[v][j]) for v in voices for i in range(4) for j in range(i)]
    )
    cross = np.mean(
        [proxy.similarity(clips[voices[0]][i], clips[voices[1]][j]) for i in range(4) for j in range(4)]
    )
    assert same > cross + 0.2


@pytest.mark.skipif(not dnsmos_available(), reason="speechmos or onnxruntime is not installed")
def test_dnsmos_scores_noise_as_worse_background_and_checks_input() -> None:
    s = _speech(n=32000)
    noisy = s + np.random.default_rng(1).standard_normal(len(s)) * np.sqrt(np.mean(s**2))  # 0 dB white
    clean_mos, noisy_mos = dnsmos([s]), dnsmos([noisy])
    assert set(clean_mos) == {"sig", "bak", "ovrl"}
    assert all(1.0 <= v <= 5.0 for v in (*clean_mos.values(), *noisy_mos.values()))
    assert noisy_mos["bak"] < clean_mos["bak"] - 0.5
    with pytest.raises(ValueError, match="16000"):
        dnsmos([s], 8000)
    with pytest.raises(ValueError, match="finite 1-D"):
        dnsmos([np.full(100, np.nan)])
