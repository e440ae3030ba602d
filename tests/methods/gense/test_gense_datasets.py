"""Paired noisy/clean folder loader on tiny VoiceBank-DEMAND and DNS stand-ins written as WAV files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from iclr25.methods.gense import PairedSpeechFolders

pytestmark = pytest.mark.usefixtures("one_thread")


def _tone(sr: int, seconds: float, hz: float) -> np.ndarray:
    t = np.arange(int(sr * seconds)) / sr
    return (0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def test_voicebank_layout_at_48k_is_resampled_with_a_warning(tmp_path: Path) -> None:
    noisy, clean = tmp_path / "noisy_testset_wav", tmp_path / "clean_testset_wav"
    noisy.mkdir(), clean.mkdir()
    for name, hz in (("p232_001.wav", 440.0), ("p232_002.wav", 880.0)):
        c = _tone(48000, 0.25, hz)
        sf.write(clean / name, c, 48000, subtype="PCM_16")
        sf.write(noisy / name, np.stack([c + 0.05, c - 0.05], 1), 48000, subtype="PCM_16")  # stereo
    (noisy / "readme.txt").write_text("not audio")
    ds = PairedSpeechFolders(noisy, clean)
    assert len(ds) == 2 and [p.name for p, _ in ds.pairs] == ["p232_001.wav", "p232_002.wav"]
    with pytest.warns(UserWarning, match="48000 Hz; audio is resampled to 16000 Hz"):
        n, c = ds[1]
    assert n.dtype == c.dtype == torch.float32 and n.shape == c.shape == (4000,)
    ref = torch.from_numpy(_tone(16000, 0.25, 880.0))
    mid = slice(200, -200)  # away from the filter's edge transients
    assert torch.allclose(c[mid], ref[mid], atol=2e-3)
    assert torch.allclose(n[mid], c[mid], atol=2e-3)  # the stereo mix-down cancels the +-0.05


def test_dns_layout_pairs_by_fileid_without_resampling(tmp_path: Path, recwarn) -> None:
    noisy, clean = tmp_path / "noisy", tmp_path / "clean"
    noisy.mkdir(), clean.mkdir()
    for k in (3, 12):
        c = _tone(16000, 0.1, 300.0 * (k + 1))
        sf.write(clean / f"clean_fileid_{k}.wav", c, 16000)
        sf.write(noisy / f"book_0{k}_snr5_fileid_{k}.wav", c * 0.5, 16000)
    ds = PairedSpeechFolders(noisy, clean, match="fileid")
    assert [(n.name, c.name) for n, c in ds.pairs] == [
        ("book_012_snr5_fileid_12.wav", "clean_fileid_12.wav"),
        ("book_03_snr5_fileid_3.wav", "clean_fileid_3.wav"),
    ]
    n, c = ds[0]
    assert n.shape == c.shape == (1600,) and torch.allclose(n, 0.5 * c, atol=1e-4)
    assert not [w for w in recwarn if issubclass(w.category, UserWarning)]
    sf.write(noisy / "untagged.wav", np.zeros(160, np.float32), 16000)
    with pytest.raises(ValueError, match=r"untagged\.wav has no 'fileid_<n>'"):
        PairedSpeechFolders(noisy, clean, match="fileid")


def test_missing_and_malformed_files_are_named(tmp_path: Path) -> None:
    noisy, clean = tmp_path / "noisy", tmp_path / "clean"
    noisy.mkdir(), clean.mkdir()
    with pytest.raises(FileNotFoundError, match="clean folder"):
        PairedSpeechFolders(noisy, tmp_path / "nope")
    with pytest.raises(ValueError, match=r"no \.wav or \.flac files"):
        PairedSpeechFolders(noisy, clean)
    sf.write(noisy / "a.wav", np.zeros(160, np.float32), 16000)
    with pytest.raises(FileNotFoundError, match=r"no clean file for a\.wav"):
        PairedSpeechFolders(noisy, clean)
    sf.write(clean / "a.wav", np.zeros(320, np.float32), 16000)
    with pytest.raises(ValueError, match=r"a\.wav has 160 samples but a\.wav has 320"):
        PairedSpeechFolders(noisy, clean)[0]
    with pytest.raises(ValueError, match="match must be"):
        PairedSpeechFolders(noisy, clean, match="stem")
