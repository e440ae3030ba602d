"""Paired noisy / clean speech folders (VoiceBank-DEMAND, DNS Challenge) read lazily from disk.

GenSE (Yao et al., ICLR 2025, arXiv 2502.02942) trains on DNS Challenge data and reports on the
DNS test sets and CHiME-4; VoiceBank-DEMAND is the common small benchmark in the same layout.
Both ship as two folders of WAV files: VoiceBank-DEMAND pairs ``noisy_testset_wav/p232_001.wav``
with ``clean_testset_wav/p232_001.wav`` (same name), the DNS synthetic sets pair
``noisy/<...>_fileid_12.wav`` with ``clean/clean_fileid_12.wav`` (same ``fileid``). Nothing is
downloaded; each item is read from disk when asked for.
"""

from __future__ import annotations

import re
import warnings
from math import gcd
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from iclr25.methods.gense.audio import as_mono
from iclr25.methods.gense.config import SAMPLE_RATE

__all__ = ["PairedSpeechFolders"]

_AUDIO = (".wav", ".flac")
_FILEID = re.compile(r"fileid_(\d+)")


def _key(path: Path, match: str) -> str:
    if match == "name":
        return path.name
    found = _FILEID.findall(path.stem)
    if not found:
        raise ValueError(f"{path.name} has no 'fileid_<n>' in its name (match='fileid')")
    return found[-1]


class PairedSpeechFolders(Dataset):
    """``(noisy, clean)`` waveform pairs from a noisy and a clean folder, as float32 tensors.

    Each item is read with ``soundfile``, mixed down to mono, and resampled to the method's
    rate (16 kHz) with ``scipy.signal.resample_poly`` where the file's rate differs; the first
    resampled read warns once (:class:`UserWarning`) naming both rates. VoiceBank-DEMAND ships
    at 48 kHz, DNS at 16 kHz.

    Args:
        noisy: folder of noisy files (``.wav`` / ``.flac``).
        clean: folder of the clean references.
        match: ``"name"`` pairs equal file names (VoiceBank-DEMAND); ``"fileid"`` pairs the
            ``fileid_<n>`` tag of the names (DNS Challenge synthetic sets).
        sample_rate: rate of the returned waveforms (GenSE: 16 kHz).

    Attributes:
        pairs: ``(noisy path, clean path)`` per item, sorted by the noisy name.

    Raises:
        FileNotFoundError: a folder is missing, or a noisy file has no clean partner (named).
        ValueError: an unknown ``match``, no audio in ``noisy``, or (when read) a pair whose
            lengths differ after resampling.

    Example:
        >>> ds = PairedSpeechFolders("vbd/noisy_testset_wav", "vbd/clean_testset_wav")  # doctest: +SKIP
        >>> noisy, clean = ds[0]  # float32 [N] each, 16 kHz  # doctest: +SKIP
    """

    def __init__(
        self,
        noisy: str | Path,
        clean: str | Path,
        *,
        match: str = "name",
        sample_rate: int = SAMPLE_RATE,
    ) -> None:
        if match not in ("name", "fileid"):
            raise ValueError(f"match must be 'name' or 'fileid', got {match!r}")
        if not isinstance(sample_rate, int) or sample_rate <= 0:
            raise ValueError(f"sample_rate must be a positive integer (Hz), got {sample_rate!r}")
        noisy, clean = Path(noisy), Path(clean)
        for folder, what in ((noisy, "noisy folder"), (clean, "clean folder")):
            if not folder.is_dir():
                raise FileNotFoundError(f"{what} {folder} not found")

        def audio(folder: Path) -> list[Path]:
            return sorted(p for p in folder.iterdir() if p.suffix.lower() in _AUDIO and p.is_file())

        noisy_files = audio(noisy)
        if not noisy_files:
            raise ValueError(f"no .wav or .flac files in {noisy}")
        clean_of: dict[str, Path] = {}
        for p in audio(clean):
            k = _key(p, match)
            if k in clean_of:
                raise ValueError(f"{clean_of[k].name} and {p.name} in {clean} share the key {k!r}")
            clean_of[k] = p
        self.pairs: list[tuple[Path, Path]] = []
        for p in noisy_files:
            k = _key(p, match)
            if k not in clean_of:
                raise FileNotFoundError(f"no clean file for {p.name} in {clean} (match={match!r})")
            self.pairs.append((p, clean_of[k]))
        self.sample_rate = sample_rate
        self._warned = False

    def __len__(self) -> int:
        return len(self.pairs)

    def _read(self, path: Path) -> np.ndarray:
        import soundfile as sf

        if not path.is_file():
            raise FileNotFoundError(f"audio file {path} not found")
        wav, sr = sf.read(str(path), dtype="float32", always_2d=True)  # [N, C]
        try:
            wav = as_mono(wav.mean(1))  # channels averaged; empty or non-finite audio refused
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from err
        if sr != self.sample_rate:
            from scipy.signal import resample_poly

            if not self._warned:
                warnings.warn(
                    f"{path.name} is at {sr} Hz; audio is resampled to {self.sample_rate} Hz (resample_poly)",
                    UserWarning,
                    stacklevel=3,
                )
                self._warned = True
            g = gcd(int(sr), self.sample_rate)
            wav = resample_poly(wav, self.sample_rate // g, int(sr) // g)
        return np.asarray(wav, dtype=np.float32)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(noisy, clean)``: float32 [N] tensors at ``sample_rate``."""
        n_path, c_path = self.pairs[index]
        noisy, clean = self._read(n_path), self._read(c_path)
        if len(noisy) != len(clean):
            raise ValueError(f"{n_path.name} has {len(noisy)} samples but {c_path.name} has {len(clean)}")
        return torch.from_numpy(noisy), torch.from_numpy(clean)
