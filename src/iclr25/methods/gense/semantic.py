"""Semantic tokens: frame features of a speech model, mapped to the nearest k-means centroid.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3.1: semantic tokens are 50 Hz XLS-R features
(6th transformer layer) quantised by 1024-centroid k-means (fairseq ``learn_kmeans``, i.e.
scikit-learn ``MiniBatchKMeans``). At CPU scale the features come from a 2-layer BiGRU CTC phone
recogniser on 80-bin log-mel (:class:`PhoneCTCFeatures`); :class:`HFSSLFeatures` loads XLS-R or
WavLM from a local directory for the paper scale. K-means is fitted on clean speech, so the tokens
carry phonetic content and little speaker identity (spec trap 6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from iclr25.common import rng
from iclr25.methods.gense.audio import align_length, as_mono, log_mel
from iclr25.methods.gense.config import SEMANTIC_HOP, TokenizerConfig

__all__ = [
    "HFSSLFeatures",
    "PhoneCTC",
    "PhoneCTCFeatures",
    "SemanticTokenizer",
    "ctc_greedy_decode",
    "phone_vocabulary",
    "train_phone_ctc",
]


def phone_vocabulary(phones: Sequence[Sequence[str]]) -> list[str]:
    """Sorted phone symbols of a corpus; index 0 of the recogniser is the CTC blank."""
    return sorted({p for seq in phones for p in seq})


class PhoneCTC(nn.Module):
    """A 2-layer BiGRU CTC phone recogniser on 50 Hz log-mel.

    Args:
        n_phones: phone symbols (the output has one more class, the blank, at index 0).
        cfg: sizes.

    Shape:
        wav [B, N] (N a multiple of 320) -> logits [B, N / 320, n_phones + 1];
        ``features`` -> [B, N / 320, 2 * hidden].
    """

    def __init__(self, n_phones: int, cfg: TokenizerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_phones = n_phones
        self.norm = nn.LayerNorm(cfg.n_mels)
        self.gru = nn.GRU(cfg.n_mels, cfg.hidden, num_layers=cfg.layers, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * cfg.hidden, n_phones + 1)

    def features(self, wav: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(self.norm(log_mel(wav, hop=SEMANTIC_HOP, n_mels=self.cfg.n_mels)))
        return h

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(wav))


def ctc_greedy_decode(logits: torch.Tensor, vocab: Sequence[str]) -> list[list[str]]:
    """Best-path CTC decoding: argmax per frame, merge repeats, drop blanks (index 0).

    Example:
        >>> lg = torch.tensor([[[0.0, 5, 0], [0, 5, 0], [5, 0, 0], [0, 0, 5]]])
        >>> ctc_greedy_decode(lg, ["a", "b"])
        [['a', 'b']]
    """
    out = []
    for row in logits.argmax(-1).tolist():
        seq, prev = [], 0
        for t in row:
            if t != prev and t != 0:
                seq.append(vocab[t - 1])
            prev = t
        out.append(seq)
    return out


def train_phone_ctc(
    wavs: np.ndarray,
    phones: Sequence[Sequence[str]],
    vocab: Sequence[str],
    cfg: TokenizerConfig,
    *,
    generator: torch.Generator,
    progress: Callable[[int, int], None] = lambda d, t: None,
    epoch_end: Callable[[int, PhoneCTC], None] | None = None,
    step_losses: list[float] | None = None,
    device: str | torch.device = "cpu",
) -> PhoneCTC:
    """Train :class:`PhoneCTC` with ``torch.nn.CTCLoss`` on clean clips [n, N] on ``device``
    (batch orders are drawn with ``generator`` on its own device, so a CPU generator gives the
    same orders anywhere).

    ``epoch_end(epoch, model)`` is called after every epoch (the model in eval mode, switched back
    to training after); ``step_losses``, when given, receives every step's loss.
    """
    index = {p: i + 1 for i, p in enumerate(vocab)}
    model = PhoneCTC(len(vocab), cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    x = torch.from_numpy(np.asarray(wavs, np.float32))
    targets = [torch.tensor([index[p] for p in seq]) for seq in phones]
    n = len(x)
    model.train()
    for epoch in range(cfg.epochs):
        perm = rng.randperm(n, generator=generator)
        for start in range(0, n, cfg.batch_size):
            idx = perm[start : start + cfg.batch_size]
            logp = model(x[idx].to(device)).log_softmax(-1).transpose(0, 1)  # [T, B, C]
            tgt = [targets[i] for i in idx.tolist()]
            loss = ctc(
                logp,
                torch.cat(tgt).to(device),
                torch.full((len(idx),), logp.shape[0], device=device),
                torch.tensor([len(t) for t in tgt], device=device),
            )
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if step_losses is not None:
                step_losses.append(float(loss.detach()))
        progress(epoch + 1, cfg.epochs)
        if epoch_end is not None:
            epoch_end(epoch + 1, model.eval())
            model.train()
    return model.eval()


class PhoneCTCFeatures:
    """Feature backend: the hidden states of a trained :class:`PhoneCTC` (50 Hz).

    Shape:
        ``__call__(wav [N])`` -> float32 [N' / 320, 2 * hidden], N' = N padded to a multiple of 320.
    """

    frame_rate = 50

    def __init__(self, model: PhoneCTC) -> None:
        self.model = model.eval()

    @torch.no_grad()
    def batch(self, wavs: torch.Tensor) -> torch.Tensor:
        """Features of an aligned batch [B, N] -> [B, N / 320, F], on the CPU."""
        dev = next(self.model.parameters()).device
        return self.model.features(wavs.to(dev)).cpu()

    def __call__(self, wav: np.ndarray | torch.Tensor) -> np.ndarray:
        x = as_mono(wav)
        x = np.pad(x, (0, align_length(len(x)) - len(x)))
        return self.batch(torch.from_numpy(x)[None])[0].numpy()


class HFSSLFeatures:
    """Paper-scale feature backend: a ``transformers`` Wav2Vec2 / WavLM model from a local folder.

    Args:
        local_dir: a folder written by ``save_pretrained`` (nothing is downloaded).
        layer: ``hidden_states`` index; fairseq ``layer_results[5]`` (the paper's XLS-R layer)
            is ``hidden_states[6]``, since ``hidden_states[0]`` is the pre-transformer input.
        pad: zero samples appended before encoding (the official pipeline pads 100).

    Raises:
        FileNotFoundError: ``local_dir`` does not exist.
    """

    frame_rate = 50

    def __init__(self, local_dir: str | Path, layer: int = 6, pad: int = 100) -> None:
        from transformers import AutoConfig, Wav2Vec2Model, WavLMModel

        path = Path(local_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"no model folder at {path}")
        kind = AutoConfig.from_pretrained(path).model_type
        cls = WavLMModel if kind == "wavlm" else Wav2Vec2Model
        self.model = cls.from_pretrained(path).eval()
        self.layer, self.pad = layer, pad

    @torch.no_grad()
    def __call__(self, wav: np.ndarray | torch.Tensor) -> np.ndarray:
        x = np.pad(as_mono(wav), (0, self.pad))
        dev = next(self.model.parameters()).device
        out = self.model(torch.from_numpy(x)[None].to(dev), output_hidden_states=True)
        return out.hidden_states[self.layer][0].cpu().numpy()


class SemanticTokenizer:
    """Frame features -> nearest of K k-means centroids (scikit-learn estimator).

    Args:
        features: a feature backend (:class:`PhoneCTCFeatures` or :class:`HFSSLFeatures`).
        n_clusters: K (64 at CPU scale; 1024 in the paper).
        batch_size: MiniBatchKMeans batch size.
        random_state: seed of the k-means.

    Example:
        >>> cfg = TokenizerConfig(hidden=8, n_clusters=4)
        >>> feats = PhoneCTCFeatures(PhoneCTC(3, cfg))
        >>> tok = SemanticTokenizer(feats, n_clusters=4).fit([np.random.default_rng(0).standard_normal(3200)])
        >>> tok.transform(np.zeros(3200)).shape
        torch.Size([10])
    """

    def __init__(
        self,
        features: Callable[[np.ndarray], np.ndarray],
        n_clusters: int = 64,
        *,
        batch_size: int = 1024,
        random_state: int = 0,
    ) -> None:
        self.features = features
        self.n_clusters = n_clusters
        self.batch_size = batch_size
        self.random_state = random_state

    def fit(self, wavs: Sequence[np.ndarray] | np.ndarray) -> SemanticTokenizer:
        """Fit k-means on the frames of (clean) waveforms; returns ``self``."""
        from sklearn.cluster import MiniBatchKMeans

        frames = np.concatenate([self.features(w) for w in wavs])
        self.kmeans_ = MiniBatchKMeans(
            n_clusters=self.n_clusters, batch_size=self.batch_size, n_init=3, random_state=self.random_state
        ).fit(frames)
        return self

    def transform(self, wav: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Token ids [T_s] in [0, K) of one waveform (padded to a multiple of 320)."""
        return torch.from_numpy(self.kmeans_.predict(self.features(wav)).astype(np.int64))

    def transform_batch(self, wavs: torch.Tensor) -> torch.Tensor:
        """Token ids [B, N / 320] of an aligned batch [B, N] (PhoneCTC backend only)."""
        if not hasattr(self.features, "batch"):
            return torch.stack([self.transform(w) for w in wavs])
        f = self.features.batch(wavs)  # [B, T, F]
        ids = self.kmeans_.predict(f.reshape(-1, f.shape[-1]).numpy())
        return torch.from_numpy(ids.astype(np.int64)).reshape(f.shape[:2])  # [B, T]

    def save(self, path: str | Path) -> None:
        """Write the fitted k-means with joblib (a fairseq ``learn_kmeans``-style file)."""
        import joblib

        joblib.dump(self.kmeans_, path)

    def load_kmeans(self, path: str | Path) -> SemanticTokenizer:
        """Read a joblib k-means file (ours or fairseq ``learn_kmeans`` output); returns ``self``."""
        import joblib

        self.kmeans_ = joblib.load(path)
        self.n_clusters = int(self.kmeans_.n_clusters)
        return self
