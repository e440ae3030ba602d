"""Baselines of the GenSE claim: a BLSTM mask enhancer (discriminative) and the naive 256-code VQ.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942). The paper compares against FullSubNet/Inter-SubNet
(discriminative, paper-scale weights only); :class:`BLSTMMask` is a size-matched stand-in trained
with negative SI-SDR. :func:`naive_codec` is the codec with one directly trained 256-entry
codebook, the baseline of the codebook reorganisation. The other ablations (single-stage LM, no
token chain, identity N2S, mismatched prompt, codec resynthesis) are modes of the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from iclr25.methods.gense.codec import SimCodec
from iclr25.methods.gense.config import CodecConfig

__all__ = ["BLSTMMask", "naive_codec", "neg_si_sdr", "train_blstm"]


def naive_codec(cfg: CodecConfig) -> SimCodec:
    """The codec with a single directly trained ``top_n * top_k``-entry codebook (no reorganisation)."""
    return SimCodec(cfg, n_groups=1, codebook_size=cfg.codebook_size)


def neg_si_sdr(est: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Mean negative SI-SDR (dB) over a batch [B, N]; the training loss of the mask model."""
    est, ref = est - est.mean(-1, keepdim=True), ref - ref.mean(-1, keepdim=True)
    a = (est * ref).sum(-1, keepdim=True) / (ref.pow(2).sum(-1, keepdim=True) + 1e-8)
    target = a * ref
    ratio = target.pow(2).sum(-1) / ((target - est).pow(2).sum(-1) + 1e-8)
    return -(10 * torch.log10(ratio + 1e-8)).mean()


class BLSTMMask(nn.Module):
    """STFT magnitude-mask enhancer: log-magnitude -> 2-layer BLSTM -> sigmoid mask; noisy phase.

    Shape:
        noisy [B, N] -> enhanced [B, N].

    Example:
        >>> BLSTMMask(hidden=8)(torch.zeros(2, 1600)).shape
        torch.Size([2, 1600])
    """

    def __init__(self, *, n_fft: int = 512, hop: int = 128, hidden: int = 96, layers: int = 2) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        bins = n_fft // 2 + 1
        self.lstm = nn.LSTM(bins, hidden, num_layers=layers, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, bins)

    def forward(self, noisy: torch.Tensor) -> torch.Tensor:
        window = torch.hann_window(self.n_fft, device=noisy.device)
        spec = torch.stft(noisy, self.n_fft, self.hop, window=window, return_complex=True)  # [B, F, T]
        h, _ = self.lstm(torch.log(spec.abs() + 1e-5).transpose(1, 2))  # [B, T, 2H]
        mask = torch.sigmoid(self.head(h)).transpose(1, 2)  # [B, F, T]
        return torch.istft(spec * mask, self.n_fft, self.hop, window=window, length=noisy.shape[-1])


def train_blstm(
    model: BLSTMMask,
    noisy: torch.Tensor,
    clean: torch.Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    progress: Callable[[int, int], None] = lambda d, t: None,
) -> list[float]:
    """Train on (noisy, clean) pairs [n, N] with the negative SI-SDR loss; returns the loss curve."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    curve = []
    model.train()
    for step in range(steps):
        idx = torch.randint(len(noisy), (batch_size,), generator=generator)
        loss = neg_si_sdr(model(noisy[idx]), clean[idx])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            curve.append(float(loss.detach()))
            progress(step + 1, steps)
    return curve
