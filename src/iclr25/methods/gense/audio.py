"""Audio front end shared by the GenSE modules: input checks, frame alignment and log-mel.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942). Frame alignment (Sec. 3, spec trap 1): a waveform of N
samples, N a multiple of 320, has T_s = N / 320 semantic (50 Hz) and T_a = N / 160 acoustic
(100 Hz) frames, so T_a = 2 T_s exactly.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from iclr25.methods.gense.config import SAMPLE_RATE, SEMANTIC_HOP

__all__ = ["align_length", "as_mono", "log_mel"]


def as_mono(wav: np.ndarray | torch.Tensor, *, downmix: bool = False) -> np.ndarray:
    """Check a waveform and return it as 1-D float32.

    Args:
        wav: [T] mono, or [T, C] / [C, T] multi-channel (only with ``downmix=True``).
        downmix: average the channels of a multi-channel input.

    Raises:
        ValueError: multi-channel input without ``downmix``, empty audio, or NaN / inf.
    """
    x = wav.detach().cpu().numpy() if isinstance(wav, torch.Tensor) else np.asarray(wav)
    if x.ndim == 2:
        if not downmix:
            raise ValueError(
                f"expected mono audio, got shape {x.shape}; pass downmix=True to average channels"
            )
        x = x.mean(axis=int(np.argmin(x.shape)))
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D waveform, got shape {x.shape}")
    if x.size == 0:
        raise ValueError("audio is empty")
    if not np.all(np.isfinite(x)):
        raise ValueError("audio contains NaN or inf")
    return x.astype(np.float32)


def align_length(n: int, hop: int = SEMANTIC_HOP) -> int:
    """The length (a multiple of ``hop``, at least one hop) a waveform of n samples is padded to.

    Example:
        >>> align_length(1000), align_length(640)
        (1280, 640)
    """
    return max(hop, -(-n // hop) * hop)


@functools.lru_cache(maxsize=8)
def _mel_basis(n_fft: int, n_mels: int) -> torch.Tensor:
    import librosa

    return torch.from_numpy(librosa.filters.mel(sr=SAMPLE_RATE, n_fft=n_fft, n_mels=n_mels)).float()


def log_mel(wav: torch.Tensor, *, hop: int, n_mels: int = 80, n_fft: int | None = None) -> torch.Tensor:
    """Log-mel spectrogram with exactly N / hop frames (a centred STFT minus its last frame).

    Shape:
        wav [B, N] (N a multiple of hop) -> [B, N / hop, n_mels].
    """
    if wav.shape[-1] % hop:
        raise ValueError(f"waveform length {wav.shape[-1]} is not a multiple of {hop}")
    n_fft = n_fft or 2 * hop
    window = torch.hann_window(n_fft, device=wav.device)
    spec = torch.stft(
        wav, n_fft, hop_length=hop, window=window, center=True, pad_mode="constant", return_complex=True
    )  # zero padding: any length of at least one hop
    power = spec.abs().pow(2)[..., :-1]  # [B, F, N / hop]
    mel = torch.einsum("mf,bft->btm", _mel_basis(n_fft, n_mels).to(wav.device), power)
    return torch.log(mel + 1e-5)
