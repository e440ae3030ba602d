"""The GenSE enhancement pipeline: semantic tokens -> N2S -> S2S (token chain) -> codec decoder.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3 and Fig. 1. The noisy waveform is tokenised
twice (semantic tokens at 50 Hz, acoustic codec tokens at 100 Hz); N2S predicts the clean
semantic tokens; S2S, prompted with the noisy semantic, clean semantic and noisy acoustic tokens,
predicts the clean acoustic tokens, which the codec decodes. Inputs are padded to a multiple of
320 samples so that T_a = 2 T_s holds exactly, and long inputs are processed in chunks.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from iclr25.methods.gense.audio import align_length, as_mono
from iclr25.methods.gense.codec import SimCodec
from iclr25.methods.gense.config import SAMPLE_RATE, SEMANTIC_HOP, CodecConfig, LMConfig, TokenizerConfig
from iclr25.methods.gense.lm import N2S, S2S
from iclr25.methods.gense.semantic import PhoneCTC, PhoneCTCFeatures, SemanticTokenizer

__all__ = ["GenSE", "demo", "enhance_wav"]


class GenSE:
    """Hierarchical LM speech enhancement (16 kHz mono).

    Args:
        tokenizer: a fitted :class:`SemanticTokenizer` (its backend a :class:`PhoneCTCFeatures`).
        codec: the single-quantiser :class:`SimCodec`.
        n2s: the noisy -> clean semantic LM (None: identity N2S, noisy tokens copied).
        s2s: the semantic -> acoustic LM.
        chunk_samples: longest segment processed at once (a multiple of 320).
        strategy, temperature, top_k: decoding settings of both LMs (default: multinomial
            sampling at T = 1, one sample per input, as the official code; "greedy" is an option).
        vocab: the recogniser's phone symbols (stored with the model).

    Example:
        >>> g = GenSE.tiny_random(seed=0)
        >>> g.enhance_batch(torch.zeros(2, 6400) + 0.01 * torch.randn(2, 6400)).shape
        torch.Size([2, 6400])
    """

    def __init__(
        self,
        tokenizer: SemanticTokenizer,
        codec: SimCodec,
        n2s: N2S | None,
        s2s: S2S,
        *,
        chunk_samples: int = 20480,
        strategy: Literal["sample", "greedy", "top_k"] = "sample",
        temperature: float = 1.0,
        top_k: int | None = None,
        vocab: list[str] | None = None,
    ) -> None:
        if chunk_samples % SEMANTIC_HOP:
            raise ValueError(f"chunk_samples must be a multiple of {SEMANTIC_HOP}")
        if codec.quantizer.n_groups != 1:
            raise ValueError("GenSE needs a single-quantiser codec (reorganise the stage-1 codec first)")
        self.tokenizer, self.codec, self.n2s, self.s2s = tokenizer, codec, n2s, s2s
        self.chunk_samples = chunk_samples
        self.strategy, self.temperature, self.top_k = strategy, temperature, top_k
        self.vocab = vocab  # the recogniser's phone symbols (kept for PER decoding)

    def to(self, device: str | torch.device) -> GenSE:
        """Move the recogniser (when a module), codec and LMs to ``device``; returns ``self``.

        Inputs and outputs stay where the caller keeps them: each model moves its input to its own
        device and answers on the input's, and k-means runs on the CPU.
        """
        features = getattr(self.tokenizer.features, "model", None)
        if isinstance(features, torch.nn.Module):
            features.to(device)
        for m in (self.codec, self.n2s, self.s2s):
            if m is not None:
                m.to(device)
        return self

    # -------------------------------------------------------------------------------------------
    def tokens(
        self,
        noisy: torch.Tensor,
        *,
        clean_semantic: torch.Tensor | None = None,
        prompt: torch.Tensor | None = None,
        seed: int = 0,
    ) -> dict[str, torch.Tensor]:
        """All token streams of an aligned batch noisy [B, N] (N a multiple of 320).

        Args:
            noisy: the input.
            clean_semantic: oracle clean semantic tokens [B, N/320] fed to S2S instead of N2S's.
            prompt: waveform [B, N] whose acoustic tokens replace the noisy prompt (the
                mismatched-prompt control); default the input itself.
            seed: decoding seed.

        Returns:
            ``noisy_sem`` [B, T_s], ``sem`` [B, T_s] (N2S output or oracle), ``noisy_ac`` [B, T_a],
            ``acoustic`` [B, T_a] (S2S output), with T_a = 2 T_s.
        """
        if noisy.ndim != 2 or noisy.shape[1] % SEMANTIC_HOP:
            raise ValueError(
                f"expected noisy [B, N] with N a multiple of {SEMANTIC_HOP}, got {tuple(noisy.shape)}"
            )
        kw = {"strategy": self.strategy, "temperature": self.temperature, "top_k": self.top_k, "seed": seed}
        noisy_sem = self.tokenizer.transform_batch(noisy)
        if clean_semantic is not None:
            sem = clean_semantic
        elif self.n2s is None:
            sem = noisy_sem
        else:
            sem = self.n2s.generate(noisy_sem, **kw)
        noisy_ac = self.codec.encode((noisy if prompt is None else prompt)[:, None])[..., 0]  # [B, T_a]
        acoustic = self.s2s.generate(noisy_sem, sem, noisy_ac, **kw)
        return {"noisy_sem": noisy_sem, "sem": sem, "noisy_ac": noisy_ac, "acoustic": acoustic}

    def enhance_batch(
        self,
        noisy: torch.Tensor,
        lengths: torch.Tensor | None = None,
        *,
        clean_semantic: torch.Tensor | None = None,
        prompt: torch.Tensor | None = None,
        seed: int = 0,
    ) -> torch.Tensor:
        """Enhance a batch [B, N] (speechbrain-style; ``lengths`` are relative, in (0, 1]).

        The batch is zero-padded to a multiple of 320 samples; items are enhanced in chunks of
        ``chunk_samples`` and trimmed back to N; samples past an item's length are zeroed.
        """
        if noisy.ndim != 2 or noisy.shape[1] == 0:
            raise ValueError(f"expected noisy [B, N] with N > 0, got {tuple(noisy.shape)}")
        if not torch.isfinite(noisy).all():
            raise ValueError("audio contains NaN or inf")
        N = noisy.shape[1]
        x = torch.nn.functional.pad(noisy.float(), (0, align_length(N) - N))
        outs = []
        with torch.no_grad():
            for s in range(0, x.shape[1], self.chunk_samples):
                seg = x[:, s : s + self.chunk_samples]
                cs = (
                    None
                    if clean_semantic is None
                    else clean_semantic[:, s // SEMANTIC_HOP :][:, : seg.shape[1] // SEMANTIC_HOP]
                )
                pr = None if prompt is None else prompt[:, s : s + seg.shape[1]]
                t = self.tokens(seg, clean_semantic=cs, prompt=pr, seed=seed)
                outs.append(self.codec.decode(t["acoustic"][..., None])[:, 0])
        out = torch.cat(outs, 1)[:, :N]
        if lengths is not None:
            keep = (
                torch.arange(N, device=out.device)[None]
                < (lengths.float().to(out.device) * N).round()[:, None]
            )
            out = out * keep
        return out

    def enhance(self, wav: np.ndarray | torch.Tensor, sample_rate: int, *, seed: int = 0) -> np.ndarray:
        """Enhance a waveform of any sample rate, mono or stereo, integer or float.

        The input is checked, mixed down to mono (channels on either axis of a 2-D array),
        converted to float (integer PCM divided by its type's full scale), resampled to 16 kHz
        with ``librosa`` where its rate differs (a :class:`UserWarning` says so), and scaled to
        the training clips' working peak of 0.5. The enhanced 16 kHz signal is scaled back by
        the inverse gain, resampled to the input's rate and cut or zero-padded to the input's
        length, so the output has the input's length, rate and level (gain undone).

        Args:
            wav: [N] mono, or [N, C] / [C, N] multi-channel; float or integer PCM.
            sample_rate: the input's rate in Hz.
            seed: decoding seed (sampling at T = 1 draws one sample).

        Returns:
            float32 [N] at ``sample_rate``, in the input's float scale (integer input: full scale 1).

        Raises:
            TypeError: an array of neither float nor integer type.
            ValueError: a non-positive rate, empty, NaN / inf, or more than 2-D audio.

        Example:
            >>> g = GenSE.tiny_random(seed=0)
            >>> x = (3000 * np.random.default_rng(0).standard_normal((8000, 2))).astype(np.int16)
            >>> g.enhance(x, 8000).shape
            (8000,)
        """
        x = wav.detach().cpu().numpy() if isinstance(wav, torch.Tensor) else np.asarray(wav)
        if not isinstance(sample_rate, (int, np.integer)) or sample_rate <= 0:
            raise ValueError(f"sample_rate must be a positive integer (Hz), got {sample_rate!r}")
        if np.issubdtype(x.dtype, np.integer):
            info = np.iinfo(x.dtype)
            half = (int(info.max) + 1) / 2
            # full scale of the type: int16 -> 32768; unsigned PCM (8-bit WAV) is centred at half scale
            x = (x.astype(np.float64) - half) / half if info.min == 0 else x.astype(np.float64) / (2 * half)
        elif not np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"audio must be a float or integer array, got dtype {x.dtype}")
        x = as_mono(x, downmix=True)
        n_in = len(x)
        if sample_rate != SAMPLE_RATE:
            import warnings

            import librosa

            warnings.warn(
                f"input at {sample_rate} Hz is resampled to {SAMPLE_RATE} Hz (librosa) and back",
                UserWarning,
                stacklevel=2,
            )
            x = librosa.resample(x, orig_sr=int(sample_rate), target_sr=SAMPLE_RATE).astype(np.float32)
        peak = float(np.abs(x).max())
        gain = 0.5 / peak if peak > 0 else 1.0  # the training clips' peak level
        y = self.enhance_batch(torch.from_numpy(x * gain)[None], seed=seed)[0].cpu().numpy() / gain
        if sample_rate != SAMPLE_RATE:
            import librosa

            y = librosa.resample(y, orig_sr=SAMPLE_RATE, target_sr=int(sample_rate))
        y = np.pad(y[:n_in], (0, max(0, n_in - len(y))))
        return y.astype(np.float32)

    def enhance_file(self, path: str | Path, out: str | Path | None = None, *, seed: int = 0) -> np.ndarray:
        """Enhance an audio file of any rate (mono or stereo, any PCM or float subtype) with
        :meth:`enhance`; write it, at the input's rate and length, to ``out`` if given.

        Returns:
            The enhanced samples (float32, mono, the input's rate).
        """
        import soundfile as sf

        wav, sr = sf.read(str(path), dtype="float32", always_2d=False)
        y = self.enhance(wav, sr, seed=seed)
        if out is not None:
            sf.write(str(out), y, sr)
        return y

    # -------------------------------------------------------------------------------------------
    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``config.json``, ``model.safetensors`` (recogniser, codec, LMs) and ``kmeans.joblib``."""
        from safetensors.torch import save_file

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        ctc: PhoneCTC = self.tokenizer.features.model  # type: ignore[attr-defined]
        conf = {
            "tokenizer": asdict(ctc.cfg),
            "n_phones": ctc.n_phones,
            "vocab": self.vocab,
            "codec": asdict(self.codec.cfg),
            "codebook_size": self.codec.codebook_size,
            "lm": asdict(self.s2s.cfg),
            "n_semantic": self.s2s.n_semantic,
            "chain": self.s2s.chain,
            "identity_n2s": self.n2s is None,
            "chunk_samples": self.chunk_samples,
            "strategy": self.strategy,
            "temperature": self.temperature,
            "top_k": self.top_k,
        }
        (d / "config.json").write_text(json.dumps(conf, indent=1))
        tensors = {f"ctc.{k}": v for k, v in ctc.state_dict().items()}
        tensors |= {f"codec.{k}": v for k, v in self.codec.state_dict().items()}
        tensors |= {f"s2s.{k}": v for k, v in self.s2s.state_dict().items()}
        if self.n2s is not None:
            tensors |= {f"n2s.{k}": v for k, v in self.n2s.state_dict().items()}
        # GPT-2 ties lm_head to the embedding: store independent copies so safetensors accepts them
        save_file(
            {k: v.detach().clone().contiguous() for k, v in tensors.items()}, str(d / "model.safetensors")
        )
        self.tokenizer.save(d / "kmeans.joblib")

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> GenSE:
        """Load a folder written by :meth:`save_pretrained` (local only).

        Raises:
            FileNotFoundError: the folder or one of its files is missing.
            ValueError: the folder was saved with an older codec layout.
        """
        from safetensors.torch import load_file

        d = Path(directory)
        for name in ("config.json", "model.safetensors", "kmeans.joblib"):
            if not (d / name).is_file():
                raise FileNotFoundError(f"{d / name} is missing: not a GenSE folder")
        conf = json.loads((d / "config.json").read_text())
        tensors = load_file(str(d / "model.safetensors"))

        def part(prefix: str) -> dict[str, torch.Tensor]:
            return {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}

        tcfg = TokenizerConfig(**conf["tokenizer"])
        ctc = PhoneCTC(conf["n_phones"], tcfg)
        ctc.load_state_dict(part("ctc."))
        tok = SemanticTokenizer(PhoneCTCFeatures(ctc)).load_kmeans(d / "kmeans.joblib")
        try:
            ccfg = CodecConfig(
                **{k: tuple(v) if isinstance(v, list) else v for k, v in conf["codec"].items()}
            )
        except TypeError as e:
            raise ValueError(
                f"{d} holds a codec of an older layout ({e}); save the models again "
                "(`iclr25 check gense --budget full` rewrites the default folder)"
            ) from None
        codec = SimCodec(ccfg, n_groups=1, codebook_size=conf["codebook_size"])
        codec.load_state_dict(part("codec."))
        lcfg = LMConfig(**conf["lm"])
        s2s = S2S(conf["n_semantic"], conf["codebook_size"], lcfg, chain=conf["chain"])
        s2s.load_state_dict(part("s2s."))
        n2s = None
        if not conf["identity_n2s"]:
            n2s = N2S(conf["n_semantic"], lcfg)
            n2s.load_state_dict(part("n2s."))
        out = cls(
            tok,
            codec.eval(),
            n2s and n2s.eval(),
            s2s.eval(),
            chunk_samples=conf["chunk_samples"],
            strategy=conf["strategy"],
            temperature=conf["temperature"],
            top_k=conf["top_k"],
            vocab=conf["vocab"],
        )
        return out

    @classmethod
    def shipped(cls, *, strategy: Literal["sample", "greedy", "top_k"] = "sample") -> GenSE:
        """The pipeline of the shipped foundations: the semantic tokenizer, the codec, N2S and S2S
        (``iclr25 pretrain gense tokenizer|codec|n2s|s2s``), decoding by sampling at T = 1 as the
        official code (``strategy="greedy"`` is an option).

        Raises:
            ArtefactMissingError: an artefact is missing (the message names the command).
        """
        from iclr25.methods.gense.foundations import load_codec, load_lm, load_tokenizer

        tok, vocab = load_tokenizer()
        n2s, _ = load_lm("n2s")
        s2s, _ = load_lm("s2s")
        return cls(tok, load_codec(), n2s, s2s, strategy=strategy, vocab=vocab)

    def rtf(self, seconds: float = 2.0, *, seed: int = 0) -> float:
        """Real-time factor of :meth:`enhance_batch` on ``seconds`` of noise (processing / audio time)."""
        from iclr25.methods.gense.metrics import real_time_factor

        x = 0.05 * torch.randn(1, round(seconds * SAMPLE_RATE), generator=torch.Generator().manual_seed(seed))
        return real_time_factor(lambda: self.enhance_batch(x, seed=seed), seconds)

    @classmethod
    def tiny_random(cls, *, seed: int = 0, n_semantic: int = 8) -> GenSE:
        """An untrained toy pipeline (for tests and docs): random weights, k-means on noise."""
        torch.manual_seed(seed)
        tcfg = TokenizerConfig(hidden=8, n_clusters=n_semantic)
        tok = SemanticTokenizer(PhoneCTCFeatures(PhoneCTC(4, tcfg)), n_semantic, random_state=seed)
        tok.fit([np.random.default_rng(seed).standard_normal(6400).astype(np.float32)])
        ccfg = CodecConfig(hidden=8, blocks=1, latent_dim=8, top_n=4, top_k=4)
        codec = SimCodec(ccfg, n_groups=1, codebook_size=16).eval()
        lcfg = LMConfig(n_embd=16, n_layer=1, n_head=2, n_positions=160, gen_offset=100)
        return cls(
            tok, codec, N2S(n_semantic, lcfg).eval(), S2S(n_semantic, 16, lcfg).eval(), chunk_samples=6400
        )


def enhance_wav(in_path: str | Path, out_path: str | Path, model_dir: str | Path | None = None) -> np.ndarray:
    """Enhance an audio file (the demo entry point), see :meth:`GenSE.enhance`.

    Args:
        in_path: the noisy file (any rate, mono or stereo).
        out_path: where to write the enhanced file (the input's rate and length).
        model_dir: a :meth:`GenSE.save_pretrained` folder; default the shipped pipeline
            (:meth:`GenSE.shipped`).

    Raises:
        FileNotFoundError: ``model_dir`` holds no saved pipeline, or a shipped artefact is missing.
    """
    if model_dir is None:
        return GenSE.shipped().enhance_file(in_path, out_path)
    d = Path(model_dir)
    if not (d / "config.json").is_file():
        raise FileNotFoundError(
            f"no GenSE pipeline in {d}: pass a folder written by GenSE.save_pretrained, "
            "or leave model_dir out to use the shipped models"
        )
    return GenSE.from_pretrained(d).enhance_file(in_path, out_path)


def demo(
    out_dir: str | Path,
    *,
    input: str | Path | None = None,
    seed: int = 0,
    model_dir: str | Path | None = None,
) -> list[Path]:
    """``iclr25 demo gense [INPUT]``: enhance INPUT, or a generated noisy clip, with the shipped
    models (or those saved in ``model_dir``).

    Without INPUT, espeak-ng speaks a sentence of the grammar and pink noise is mixed in at
    5 dB; the noisy clip is written beside the enhanced one.

    Args:
        out_dir: folder for ``<stem>-enhanced.wav`` (and ``noisy.wav``); created if missing.
        input: a noisy audio file of the user's (any rate, mono or stereo).
        seed: the generated sentence and noise.
        model_dir: as in :func:`enhance_wav`.

    Raises:
        FileNotFoundError: ``model_dir`` holds no saved pipeline, or espeak-ng is missing.
        ValueError: the input is empty or not finite.
    """
    import soundfile as sf

    from iclr25.methods.gense.data import make_noise, mix_at_snr, random_text, synthesize

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    if input is None:
        rng = np.random.default_rng(seed)
        clean = synthesize(random_text(rng), "en-us")
        noisy = mix_at_snr(clean, make_noise("pink", len(clean), rng), 5.0)
        noisy = noisy / max(1.0, float(np.abs(noisy).max()) / 0.9)  # no clipping in the file
        input = out / "noisy.wav"
        sf.write(input, noisy, 16000)
        written.append(input)
    target = out / f"{Path(input).stem}-enhanced.wav"
    enhance_wav(input, target, model_dir=model_dir)
    return [*written, target]
