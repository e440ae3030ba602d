"""SimCodec-style single-quantiser acoustic codec with the two-stage codebook reorganisation.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3.2 (SimCodec). At CPU scale the encoder and
decoder work at the 100 Hz frame rate (as in Vocos, Siuzdak, arXiv 2306.00814, and WavTokenizer):
the encoder reads the log-magnitude STFT (hop 160) through ConvNeXt blocks; the decoder's ConvNeXt
blocks predict each frame's log-magnitude and phase, and an inverse STFT makes the waveform.
SimCodec's strided waveform convolutions learnt too slowly for a CPU budget (see the README's
Deviations). Between them, a vector quantiser with L2 lookup and a straight-through gradient.
VQ losses: codebook ``||q - sg(r)||^2`` (1.0), commitment
``||sg(q) - r||^2`` (0.25) and code distinctness (0.1): the cross-entropy of the rows of
``softmax(3 E E^T)`` against identity targets.

Reorganisation: stage 1 trains two group quantisers with small codebooks; each group's codes are
ranked by usage; the top-N of group 1 and top-K of group 2 form the N x K product codebook of
concatenations ``[e_n; e_k]`` (entry ``n * K + k``); stage 2 trains one quantiser on it, starting
from the stage-1 encoder and decoder.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common import rng
from iclr25.methods.gense.audio import log_mel
from iclr25.methods.gense.config import ACOUSTIC_HOP, CodecConfig

__all__ = ["GroupVQ", "SimCodec", "code_perplexity", "codec_mel_l1", "distinctness_loss", "train_codec"]


def distinctness_loss(codebook: torch.Tensor, scale: float = 3.0) -> torch.Tensor:
    """Code distinctness: cross-entropy of the rows of softmax(scale * E E^T) against identity.

    Rows of E are L2-normalised first, so the term cannot be lowered by inflating code norms.

    Example:
        >>> e = torch.eye(2)
        >>> ce = -torch.log_softmax(torch.tensor([3.0, 0.0]), 0)[0]  # each row: [3, 0] vs target 0
        >>> bool(torch.isclose(distinctness_loss(e, 3.0), ce))
        True
    """
    e = F.normalize(codebook, dim=-1)
    logits = scale * e @ e.T  # [K, K]
    return F.cross_entropy(logits, torch.arange(len(e), device=e.device))


class GroupVQ(nn.Module):
    """G group quantisers, each with its own codebook of K codes of size D / G; L2 lookup.

    Shape:
        z [B, D, T] -> (q [B, D, T] straight-through, codes [B, T, G], losses dict).
    """

    def __init__(self, dim: int, n_groups: int, codebook_size: int, *, normalize: bool = False) -> None:
        super().__init__()
        self.normalize = normalize
        self.n_groups, self.codebook_size, self.group_dim = n_groups, codebook_size, dim // n_groups
        self.codebooks = nn.Parameter(torch.randn(n_groups, codebook_size, dim // n_groups) * 0.1)

    @torch.no_grad()
    def init_from(self, z: torch.Tensor, generator: torch.Generator) -> None:
        """Initialise every codebook from random latent frames of z [B, D, T]."""
        r = z.transpose(1, 2).reshape(-1, self.n_groups, self.group_dim)  # [B*T, G, d]
        idx = rng.randint(0, len(r), (self.codebook_size,), generator=generator, device=r.device)
        self.codebooks.copy_(r[idx].transpose(0, 1))

    def lookup(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, T, G] -> q [B, D, T]."""
        e = F.normalize(self.codebooks, dim=-1) if self.normalize else self.codebooks
        q = torch.stack([e[g][codes[..., g]] for g in range(self.n_groups)], dim=2)  # [B, T, G, d]
        return q.flatten(2).transpose(1, 2)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        B, D, T = z.shape
        r = z.transpose(1, 2).reshape(B, T, self.n_groups, self.group_dim)  # [B, T, G, d]
        e = self.codebooks  # [G, K, d]
        if self.normalize:  # lookup on the unit sphere: latents and codes L2-normalised per group
            r, e = F.normalize(r, dim=-1), F.normalize(e, dim=-1)
        # squared L2 distance ||r||^2 - 2 r.e + ||e||^2
        dist = (
            r.pow(2).sum(-1, keepdim=True)
            - 2 * torch.einsum("btgd,gkd->btgk", r, e)
            + e.pow(2).sum(-1)[None, None]
        )
        codes = dist.argmin(-1)  # [B, T, G]
        q = torch.stack([e[g][codes[..., g]] for g in range(self.n_groups)], dim=2)  # [B, T, G, d]
        losses = {
            "codebook": F.mse_loss(q, r.detach()),
            "commitment": F.mse_loss(r, q.detach()),
        }
        q_st = r + (q - r).detach()  # straight-through: forward q, gradient to r
        return q_st.reshape(B, T, D).transpose(1, 2), codes, losses


class _ConvNeXt(nn.Module):
    """Depthwise conv (kernel 7) -> LayerNorm -> pointwise MLP (3x) -> residual sum."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.dw = nn.Conv1d(ch, ch, 7, padding=3, groups=ch)
        self.norm = nn.LayerNorm(ch)
        self.up, self.down = nn.Linear(ch, 3 * ch), nn.Linear(3 * ch, ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.dw(x).transpose(1, 2))
        return x + self.down(F.gelu(self.up(y))).transpose(1, 2)


class _SpecEncoder(nn.Module):
    """wav [B, 1, N] -> latents [B, D, N / hop]: log-magnitude STFT frames through ConvNeXt blocks."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.n_fft = cfg.n_fft
        self.register_buffer("window", torch.hann_window(cfg.n_fft), persistent=False)
        self.net = nn.Sequential(
            nn.Conv1d(cfg.n_fft // 2 + 1, cfg.hidden, 7, padding=3),
            *(_ConvNeXt(cfg.hidden) for _ in range(cfg.blocks)),
            nn.Conv1d(cfg.hidden, cfg.latent_dim, 1),
        )

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(
            wav[:, 0],
            self.n_fft,
            ACOUSTIC_HOP,
            window=self.window,
            center=True,
            pad_mode="constant",  # any length of at least one hop
            return_complex=True,
        )[..., :-1]  # exactly N / hop frames
        return self.net(torch.log(spec.abs() + 1e-5))


_MAX_LOG_MAG = 4.6  # |X| <= 100 per STFT bin; far above speech at the clips' 0.5 peak


class _SpecDecoder(nn.Module):
    """latents [B, D, T] -> wav [B, 1, hop T]: ConvNeXt blocks predict log-magnitude and phase per
    frame; an inverse STFT synthesises the waveform."""

    def __init__(self, cfg: CodecConfig) -> None:
        super().__init__()
        self.n_fft = cfg.n_fft
        self.register_buffer("window", torch.hann_window(cfg.n_fft), persistent=False)
        self.net = nn.Sequential(
            nn.Conv1d(cfg.latent_dim, cfg.hidden, 7, padding=3),
            *(_ConvNeXt(cfg.hidden) for _ in range(cfg.blocks)),
            nn.Conv1d(cfg.hidden, 2 * (cfg.n_fft // 2 + 1), 1),
        )

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        log_mag, phase = self.net(q).chunk(2, dim=1)  # [B, F, T] each
        spec = torch.polar(torch.exp(log_mag.clamp(max=_MAX_LOG_MAG)), phase)
        spec = F.pad(spec, (0, 1))  # the centred STFT's last frame, dropped by the encoder
        wav = torch.istft(
            spec, self.n_fft, ACOUSTIC_HOP, window=self.window, center=True, length=ACOUSTIC_HOP * q.shape[-1]
        )
        return wav[:, None]


class SimCodec(nn.Module):
    """The codec (EnCodec/DAC-shaped API): ``encode``, ``decode``, ``reorganize``.

    Args:
        cfg: sizes; ``n_groups`` and ``codebook_size`` pick stage 1 (groups) or stage 2 (one).
        n_groups: quantiser groups (default ``cfg.n_groups``).
        codebook_size: codes per group (default ``cfg.group_codebook``).

    Shape:
        encode: wav [B, 1, N] (N a multiple of 160) -> codes [B, N / 160, G];
        decode: codes [B, T', G] -> wav [B, 1, 160 T'].

    Example:
        >>> codec = SimCodec(CodecConfig(hidden=8, blocks=1, latent_dim=8))
        >>> codes = codec.encode(torch.zeros(1, 1, 320))
        >>> codes.shape, codec.decode(codes).shape
        (torch.Size([1, 2, 2]), torch.Size([1, 1, 320]))
    """

    sample_rate = 16000
    frame_rate = 100

    def __init__(
        self, cfg: CodecConfig, *, n_groups: int | None = None, codebook_size: int | None = None
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = _SpecEncoder(cfg)
        self.decoder = _SpecDecoder(cfg)
        self.quantizer = GroupVQ(
            cfg.latent_dim, n_groups or cfg.n_groups, codebook_size or cfg.group_codebook
        )

    @property
    def codebook_size(self) -> int:
        """Codes per group (the vocabulary of one token when there is a single group)."""
        return self.quantizer.codebook_size

    def _check(self, wav: torch.Tensor) -> None:
        if wav.ndim != 3 or wav.shape[1] != 1:
            raise ValueError(f"expected wav [B, 1, N], got {tuple(wav.shape)}")
        if wav.shape[-1] % ACOUSTIC_HOP:
            raise ValueError(f"length {wav.shape[-1]} is not a multiple of {ACOUSTIC_HOP}")

    def forward(self, wav: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Reconstruction [B, 1, N], codes [B, T', G] and the VQ losses (training)."""
        self._check(wav)
        q, codes, losses = self.quantizer(self.encoder(wav))
        losses["distinct"] = torch.stack(
            [distinctness_loss(cb, self.cfg.distinct_scale) for cb in self.quantizer.codebooks]
        ).mean()
        return self.decoder(q), codes, losses

    @torch.no_grad()
    def encode(self, wav: torch.Tensor) -> torch.Tensor:
        """Codes [B, T', G] of wav [B, 1, N], on ``wav``'s device (the codec may live on another)."""
        self._check(wav)
        dev = self.quantizer.codebooks.device
        return self.quantizer(self.encoder(wav.to(dev)))[1].to(wav.device)

    @torch.no_grad()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Waveform [B, 1, N] of codes [B, T', G], on ``codes``' device."""
        dev = self.quantizer.codebooks.device
        return self.decoder(self.quantizer.lookup(codes.to(dev))).to(codes.device)

    @torch.no_grad()
    def reorganize(self, usage: list[torch.Tensor], top_n: int, top_k: int) -> SimCodec:
        """The stage-2 codec: product codebook of the top-N (group 1) x top-K (group 2) codes.

        Args:
            usage: per-group code counts (two tensors of length ``codebook_size``).
            top_n: N, codes kept from group 1 (ranked by usage, most used first).
            top_k: K, codes kept from group 2.

        Returns:
            A new single-quantiser :class:`SimCodec` whose code ``n * K + k`` is ``[e1_n; e2_k]``,
            with this codec's encoder and decoder weights.
        """
        if self.quantizer.n_groups != 2 or len(usage) != 2:
            raise ValueError("reorganisation needs a two-group stage-1 codec and two usage vectors")
        order1 = torch.argsort(usage[0], descending=True, stable=True)[:top_n]
        order2 = torch.argsort(usage[1], descending=True, stable=True)[:top_k]
        e1, e2 = self.quantizer.codebooks[0][order1], self.quantizer.codebooks[1][order2]  # [N, d], [K, d]
        product = torch.cat([e1[:, None].expand(-1, top_k, -1), e2[None].expand(top_n, -1, -1)], dim=-1)
        out = SimCodec(self.cfg, n_groups=1, codebook_size=top_n * top_k)
        out.encoder = copy.deepcopy(self.encoder)
        out.decoder = copy.deepcopy(self.decoder)
        out.quantizer.codebooks.copy_(product.reshape(1, top_n * top_k, -1))  # [1, N*K, D]
        return out

    @torch.no_grad()
    def usage(self, wavs: torch.Tensor, batch: int = 32) -> list[torch.Tensor]:
        """Per-group code counts over aligned clips [n, N]."""
        counts = [torch.zeros(self.codebook_size) for _ in range(self.quantizer.n_groups)]
        for s in range(0, len(wavs), batch):
            codes = self.encode(wavs[s : s + batch, None]).cpu()
            for g in range(len(counts)):
                counts[g] += torch.bincount(codes[..., g].flatten(), minlength=self.codebook_size).float()
        return counts


def code_perplexity(counts: torch.Tensor) -> float:
    """exp(entropy) of a code histogram: the effective number of codes used.

    Example:
        >>> code_perplexity(torch.tensor([5.0, 5, 0, 0]))
        2.0
    """
    p = counts / counts.sum()
    p = p[p > 0]
    return float(torch.exp(-(p * p.log()).sum()))


def codec_mel_l1(codec: SimCodec, wavs: torch.Tensor, batch: int = 32) -> float:
    """Mean L1 between log-mel (100 Hz) of clips [n, N] and of their copy-synthesis."""
    total = 0.0
    with torch.no_grad():
        for s in range(0, len(wavs), batch):
            x = wavs[s : s + batch]
            y = codec.decode(codec.encode(x[:, None]))[:, 0]
            total += float((log_mel(x, hop=ACOUSTIC_HOP) - log_mel(y, hop=ACOUSTIC_HOP)).abs().mean()) * len(
                x
            )
    return total / len(wavs)


def train_codec(
    codec: SimCodec,
    wavs: torch.Tensor,
    *,
    steps: int,
    generator: torch.Generator,
    init_codebook: bool = True,
    restart_every: int | None = None,
    progress: Callable[[int, int], None] = lambda d, t: None,
    resume: dict | None = None,
    checkpoint: Callable[[dict], None] | None = None,
    checkpoint_every: int = 500,
    stop: int | None = None,
    step_losses: list[float] | None = None,
    device: str | torch.device | None = None,
) -> list[float]:
    """Train the codec on random crops of clips [n, N]: multi-resolution STFT (auraloss) + L1
    log-mel + the weighted VQ terms. No GAN at CPU scale. Every ``restart_every`` steps (default
    ``cfg.restart_every``; 0 disables) codes unused since the last restart are moved to random
    latents of the current batch.

    Args:
        codec: trained in place.
        wavs: clean clips [n, N].
        steps: total training steps.
        generator: the crops and restarts (its state is part of a checkpoint).
        init_codebook: initialise the codebook from random latents first (not on a resume).
        restart_every: dead-code restart period (``None``: the config's).
        progress: called as ``progress(done, steps)`` every 20 steps.
        resume: a state written through ``checkpoint`` (model, optimiser, generator, step):
            training continues from there, bit for bit as if never interrupted.
        checkpoint: called with such a state every ``checkpoint_every`` steps.
        checkpoint_every: the checkpoint period in steps.
        stop: stop after this many steps (of ``steps``) without finishing.
        step_losses: when given, every step's loss is appended to it.
        device: where to train (default: where ``codec`` already is); crops are cut on the CPU
            with ``generator`` and moved, so a CPU generator gives the same crops anywhere.

    Returns:
        The loss every 20 steps (and at the last step run).
    """
    import auraloss

    cfg = codec.cfg
    stft = auraloss.freq.MultiResolutionSTFTLoss(
        fft_sizes=[256, 512, 1024], hop_sizes=[64, 128, 256], win_lengths=[256, 512, 1024]
    )
    seg = round(cfg.segment_seconds * 16000) // ACOUSTIC_HOP * ACOUSTIC_HOP
    if device is not None:
        codec.to(device)
    dev = codec.quantizer.codebooks.device
    stft = stft.to(dev)
    opt = torch.optim.Adam(codec.parameters(), lr=cfg.lr)
    n, N = wavs.shape

    def crops() -> torch.Tensor:
        rows = torch.randint(n, (cfg.batch_size,), generator=generator)
        starts = (
            torch.randint(0, (N - seg) // ACOUSTIC_HOP + 1, (cfg.batch_size,), generator=generator)
            * ACOUSTIC_HOP
        )
        return torch.stack(
            [wavs[r, s : s + seg] for r, s in zip(rows.tolist(), starts.tolist(), strict=True)]
        )[:, None].to(dev)

    vq_mod = codec.quantizer
    seen = torch.zeros(vq_mod.n_groups, vq_mod.codebook_size, dtype=torch.bool, device=dev)
    first = 0
    if resume is not None:
        codec.load_state_dict(resume["model"])
        opt.load_state_dict(resume["optimizer"])
        generator.set_state(resume["generator"])
        seen = resume["seen"].clone().to(dev)
        first = int(resume["step"])
    elif init_codebook:
        with torch.no_grad():
            codec.quantizer.init_from(codec.encoder(crops()), generator)
    curve: list[float] = []
    restart_every = cfg.restart_every if restart_every is None else restart_every
    last = steps if stop is None else min(steps, stop)
    codec.train()
    for step in range(first, last):
        x = crops()  # [B, 1, seg]
        y, codes, vq = codec(x)
        seen |= torch.stack(
            [
                torch.bincount(codes[..., g].flatten(), minlength=vq_mod.codebook_size) > 0
                for g in range(vq_mod.n_groups)
            ]
        )
        loss = (
            stft(y, x)
            + (log_mel(y[:, 0], hop=ACOUSTIC_HOP) - log_mel(x[:, 0], hop=ACOUSTIC_HOP)).abs().mean()
            + cfg.codebook_weight * vq["codebook"]
            + cfg.commitment * vq["commitment"]
            + cfg.distinct * vq["distinct"]
        )
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(codec.parameters(), 1.0)
        opt.step()
        if restart_every and (step + 1) % restart_every == 0:
            # dead-code restart: codes unused over the last window move to random current latents
            with torch.no_grad():
                r = codec.encoder(x).transpose(1, 2).reshape(-1, vq_mod.n_groups, vq_mod.group_dim)
                for g in range(vq_mod.n_groups):
                    dead = (~seen[g]).nonzero()[:, 0]
                    if len(dead):
                        pick = rng.randint(0, len(r), (len(dead),), generator=generator, device=r.device)
                        vq_mod.codebooks[g, dead] = r[pick, g]
            seen.zero_()
        if step_losses is not None:
            step_losses.append(float(loss.detach()))
        if step % 20 == 0 or step == last - 1:
            curve.append(float(loss.detach()))
            progress(step + 1, steps)
        if checkpoint is not None and (step + 1) % checkpoint_every == 0 and step + 1 < steps:
            checkpoint(
                {
                    "step": step + 1,
                    "model": codec.state_dict(),
                    "optimizer": opt.state_dict(),
                    "generator": generator.get_state(),
                    "seen": seen.cpu().clone(),
                }
            )
    codec.eval()
    return curve
