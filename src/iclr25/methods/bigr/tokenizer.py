"""The binary autoencoder (B-AE) of BiGR: conv encoder, Bernoulli quantiser, conv decoder.

References:
    Hao et al., *BiGR: Harnessing Binary Latent Codes for Image Generation and Improved Visual
    Representation Capabilities*, ICLR 2025, arXiv:2410.14672, Sec. 3.1 (binary tokenizer), following
    Binary Latent Diffusion (Wang et al., CVPR 2023): p = sigmoid(.), b ~ Bernoulli(p), straight-through
    b_st = sg(b) + p - sg(p), decoder input sum_k b_k E_k.

The B-AE of the claim's shapes world is trained once and shipped (``SHAPES_TOKENIZER``, trained
by :func:`pretrain_tokenizer`, ``iclr25 pretrain bigr bae_shapes16``), as the paper trains one
tokenizer and shares it by every generator.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from iclr25._core.claims import ProgressFn
from iclr25._core.pretrained import RecipeRun, read_training, require_artefact
from iclr25.common import rng
from iclr25.methods.bigr.checkpoint import _restore_train_state, _train_state
from iclr25.methods.bigr.config import BinaryAEConfig, TokenizerRecipe

__all__ = [
    "SHAPES_TOKENIZER",
    "BernoulliQuantizer",
    "BinaryAutoencoder",
    "BinaryCodes",
    "load_tokenizer",
    "pretrain_tokenizer",
    "save_tokenizer",
    "train_tokenizer",
]

#: The B-AE shipped for the claim's 16 x 16 shapes world (``config.json``, ``model.safetensors``
#: with the ``"model."`` and ``"ema."`` weights of the official layout, ``training.json``),
#: written by :func:`pretrain_tokenizer`.
SHAPES_TOKENIZER = Path(__file__).parent / "pretrained" / "bae_shapes16"


class BinaryCodes(NamedTuple):
    """What :meth:`BinaryAutoencoder.encode` returns; each has shape (B, K, h, w).

    Attributes:
        probs: p = sigmoid(logits), the Bernoulli parameters.
        bits: b ~ Bernoulli(p) (stochastic; what the generator trains on).
        bits_det: 1[p > 0.5] (the thresholded mode).
    """

    probs: torch.Tensor
    bits: torch.Tensor
    bits_det: torch.Tensor


class BernoulliQuantizer(nn.Module):
    """1x1 conv to K logits, Bernoulli sampling with a straight-through gradient.

    Args:
        emb_dim: channels of the encoder output (and of the code embedding E).
        code_dim: K, bits per token.
    """

    def __init__(self, emb_dim: int, code_dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(emb_dim, code_dim, 1)
        # E in R^{K x emb_dim}: decoder input is sum_k b_k E_k, a bias-free 1x1 conv.
        self.embed = nn.Conv2d(code_dim, emb_dim, 1, bias=False)

    def forward(
        self, h: torch.Tensor, *, deterministic: bool = False, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, BinaryCodes]:
        """Quantise encoder features.

        Args:
            h: encoder output, shape (B, emb_dim, h, w).
            deterministic: use the 0.5-threshold mode instead of sampling.
            generator: RNG of the Bernoulli draw.

        Returns:
            ``(b_st, codes)``: the straight-through bits (value b, gradient of p), shape (B, K, h, w),
            and the :class:`BinaryCodes`.
        """
        p = torch.sigmoid(self.proj(h))
        b_det = (p > 0.5).to(p.dtype)
        b = b_det if deterministic else rng.bernoulli(p.detach(), generator=generator)
        b_st = b + p - p.detach()  # straight-through: forward b, d b_st / d p = 1
        return b_st, BinaryCodes(p, b, b_det)


def _norm(ch: int) -> nn.GroupNorm:
    """GroupNorm with at most 32 groups of at least 4 channels (paper widths: 32 groups).

    With one channel per group (``ch`` <= 32) GroupNorm becomes InstanceNorm: it removes every
    channel's per-image mean, and the output layer's norm then erases the image's mean colour.
    """
    return nn.GroupNorm(math.gcd(32, max(1, ch // 4)), ch, eps=1e-6)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.n1, self.c1 = _norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.n2, self.c2 = _norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h)))
        return self.skip(x) + h


class _Attn(nn.Module):
    """Single-head spatial self-attention (VQGAN's AttnBlock)."""

    def __init__(self, ch: int) -> None:
        super().__init__()
        self.norm, self.qkv, self.out = _norm(ch), nn.Conv2d(ch, 3 * ch, 1), nn.Conv2d(ch, ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = (
            self.qkv(self.norm(x)).reshape(b, 3, c, h * w).transpose(-1, -2).unbind(1)
        )  # each (b, hw, c)
        o = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]  # (b, hw, c)
        return x + self.out(o.transpose(-1, -2).reshape(b, c, h, w))


class BinaryAutoencoder(nn.Module):
    """B-AE: VQGAN-style encoder/decoder around a :class:`BernoulliQuantizer`.

    Args:
        cfg: the :class:`BinaryAEConfig`.

    Example:
        >>> cfg = BinaryAEConfig(nf=8, ch_mult=(1, 2), num_res_blocks=1, attn_resolutions=(),
        ...                      emb_dim=16, code_dim=6, resolution=8)
        >>> ae = BinaryAutoencoder(cfg)
        >>> codes = ae.encode(torch.zeros(2, 3, 8, 8))
        >>> codes.bits.shape, ae.decode(codes.bits).shape
        (torch.Size([2, 6, 4, 4]), torch.Size([2, 3, 8, 8]))
    """

    def __init__(self, cfg: BinaryAEConfig) -> None:
        super().__init__()
        self.cfg = cfg
        chans = [cfg.nf * m for m in cfg.ch_mult]
        res = cfg.resolution
        enc: list[nn.Module] = [nn.Conv2d(cfg.in_channels, chans[0], 3, padding=1)]
        cin = chans[0]
        for i, ch in enumerate(chans):
            for _ in range(cfg.num_res_blocks):
                enc.append(_ResBlock(cin, ch))
                cin = ch
                if res in cfg.attn_resolutions:
                    enc.append(_Attn(ch))
            if i < len(chans) - 1:
                enc.append(nn.Conv2d(ch, ch, 3, stride=2, padding=1))
                res //= 2
        enc += [_ResBlock(cin, cin), _Attn(cin), _ResBlock(cin, cin), _norm(cin), nn.SiLU()]
        enc.append(nn.Conv2d(cin, cfg.emb_dim, 3, padding=1))
        self.encoder = nn.Sequential(*enc)
        self.quantize = BernoulliQuantizer(cfg.emb_dim, cfg.code_dim)
        dec: list[nn.Module] = [nn.Conv2d(cfg.emb_dim, chans[-1], 3, padding=1)]
        cin = chans[-1]
        dec += [_ResBlock(cin, cin), _Attn(cin), _ResBlock(cin, cin)]
        for i, ch in reversed(list(enumerate(chans))):
            for _ in range(cfg.num_res_blocks):
                dec.append(_ResBlock(cin, ch))
                cin = ch
                if res in cfg.attn_resolutions:
                    dec.append(_Attn(ch))
            if i > 0:
                dec += [nn.Upsample(scale_factor=2.0, mode="nearest"), nn.Conv2d(ch, ch, 3, padding=1)]
                res *= 2
        dec += [_norm(cin), nn.SiLU(), nn.Conv2d(cin, cfg.in_channels, 3, padding=1)]
        self.decoder = nn.Sequential(*dec)

    def _check_images(self, x: torch.Tensor) -> None:
        c, r = self.cfg.in_channels, self.cfg.resolution
        if x.ndim != 4 or x.shape[1] != c or x.shape[-2:] != (r, r):
            raise ValueError(f"images must have shape (B, {c}, {r}, {r}), got {tuple(x.shape)}")

    def encode(self, x: torch.Tensor, *, generator: torch.Generator | None = None) -> BinaryCodes:
        """Images in [-1, 1], shape (B, C, H, W) -> :class:`BinaryCodes` of shape (B, K, h, w)."""
        self._check_images(x)
        return self.quantize(self.encoder(x), generator=generator)[1]

    def decode(self, bits: torch.Tensor) -> torch.Tensor:
        """Bits (B, K, h, w) in {0, 1} (or straight-through values) -> images (B, C, H, W) in ~[-1, 1]."""
        if bits.ndim != 4 or bits.shape[1] != self.cfg.code_dim:
            raise ValueError(f"bits must have shape (B, {self.cfg.code_dim}, h, w), got {tuple(bits.shape)}")
        return self.decoder(self.quantize.embed(bits))

    def forward(
        self, x: torch.Tensor, *, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, BinaryCodes]:
        """Reconstruction through straight-through stochastic bits: ``(x_hat, codes)``."""
        self._check_images(x)
        b_st, codes = self.quantize(self.encoder(x), generator=generator)
        return self.decoder(self.quantize.embed(b_st)), codes

    @classmethod
    def from_pretrained(cls, path: str, cfg: BinaryAEConfig, *, key: str | None = "ema") -> BinaryAutoencoder:
        """Load a B-AE from a local checkpoint file (no download).

        Args:
            path: a ``torch.save`` file holding a state dict or a dict with ``key``.
            cfg: the architecture it was saved with.
            key: entry of the file holding the weights (``"ema"`` for released tokenizers), or None.
        """
        from iclr25.methods.bigr.checkpoint import load_state

        model = cls(cfg)
        load_state(model, path, key=key)
        return model


def train_tokenizer(
    ae: BinaryAutoencoder,
    images: torch.Tensor,
    *,
    steps: int,
    batch_size: int = 64,
    lr: float = 2e-3,
    generator: torch.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
    perceptual: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    perceptual_weight: float = 1.0,
) -> list[float]:
    """Train a B-AE with L1 (+ ``perceptual_weight`` * perceptual) (+ ``code_weight`` * mean p(1 - p)).

    The paper's loss is L1 + LPIPS (weight 1) + a patch GAN; this trainer has no GAN term.

    Args:
        ae: the model (trained in place).
        images: shape (n, C, H, W), values in [-1, 1].
        steps: optimiser steps.
        batch_size: images per step.
        lr: Adam learning rate.
        generator: RNG of batches and Bernoulli draws.
        progress: ``progress(done, total)`` called every 50 steps.
        perceptual: ``perceptual(x_hat, x)`` -> scalar, e.g. a
            :class:`~iclr25.methods.bigr.perceptual.PerceptualLoss` or an LPIPS module; None for L1 only.
        perceptual_weight: its weight.

    Returns:
        The loss of every step.
    """
    return _train_tokenizer(
        ae, images, steps=steps, batch_size=batch_size, lr=lr, generator=generator, progress=progress,
        perceptual=perceptual, perceptual_weight=perceptual_weight,
    )  # fmt: skip


def _train_tokenizer(
    ae: BinaryAutoencoder, images: torch.Tensor, *, steps: int, batch_size: int, lr: float,
    generator: torch.Generator | None, progress: Callable[[int, int], None] | None,
    perceptual: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None, perceptual_weight: float,
    stop: int | None = None, state: dict[str, Any] | None = None,
    checkpoint: Callable[[dict[str, Any]], None] | None = None, every: int = 500,
) -> list[float]:  # fmt: skip
    """The loop of :func:`train_tokenizer`. ``stop`` ends the run after that many steps (the
    cosine schedule still spans ``steps``); ``state`` (what ``checkpoint`` received, every
    ``every`` steps) resumes an unfinished run exactly."""
    if steps < 1 or batch_size < 1:
        raise ValueError("steps and batch_size must be >= 1")
    if perceptual_weight < 0:
        raise ValueError(f"perceptual_weight must be non-negative, got {perceptual_weight}")
    opt = torch.optim.Adam(ae.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    start, losses = 0, []
    if state is not None:
        start, losses = _restore_train_state(state, ae, opt, sched, generator)
    end = steps if stop is None else min(stop, steps)
    ae.train()
    for step in range(start, end):
        idx = rng.randint(0, len(images), (batch_size,), generator=generator, device=images.device)
        x = images[idx]
        x_hat, codes = ae(x, generator=generator)
        loss = (x_hat - x).abs().mean()
        if perceptual is not None and perceptual_weight:
            loss = loss + perceptual_weight * perceptual(x_hat, x)
        if ae.cfg.code_weight:
            loss = loss + ae.cfg.code_weight * (codes.probs * (1 - codes.probs)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if progress and (step + 1) % 50 == 0:
            progress(step + 1, steps)
        if checkpoint is not None and (step + 1) % every == 0 and step + 1 < end:
            checkpoint(_train_state(step + 1, losses, ae, opt, sched, generator))
    ae.eval()
    return losses


def save_tokenizer(
    ae: BinaryAutoencoder,
    directory: str | os.PathLike[str],
    *,
    ema: BinaryAutoencoder | None = None,
    training: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``config.json``, ``model.safetensors`` and, if given, ``training.json``.

    The safetensors file holds the official ``{"model", "ema"}`` layout as key prefixes:
    ``"model.<name>"`` for ``ae``'s weights and ``"ema.<name>"`` for their EMA (``ema``, by default
    ``ae`` itself). :func:`load_tokenizer` reads a folder with all three files.

    Returns:
        The folder.
    """
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(dataclasses.asdict(ae.cfg), indent=1) + "\n")
    tensors = {}
    for prefix, model in (("model", ae), ("ema", ema or ae)):
        # safetensors stores no shared memory: every entry gets its own copy
        tensors.update(
            {f"{prefix}.{k}": v.detach().clone().contiguous() for k, v in model.state_dict().items()}
        )
    save_file(tensors, d / "model.safetensors")
    if training is not None:
        (d / "training.json").write_text(json.dumps(dict(training), indent=1) + "\n")
    return d


def load_tokenizer(
    directory: str | os.PathLike[str] = SHAPES_TOKENIZER, *, key: str = "ema"
) -> BinaryAutoencoder:
    """A B-AE saved by :func:`save_tokenizer` (by default the shipped shapes-world one), eval mode.

    Args:
        directory: the folder.
        key: which weights to load, ``"ema"`` (what inference uses) or ``"model"``.

    Raises:
        ArtefactMissingError: the folder lacks ``config.json``, ``model.safetensors`` or
            ``training.json`` (the message names the command that trains it).
        KeyError: the file holds no weights under ``key``, or they do not fit the config.
    """
    from safetensors.torch import load_file

    d = require_artefact(directory, method="bigr", name="bae_shapes16")
    raw = json.loads((d / "config.json").read_text())
    cfg = BinaryAEConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    prefix = f"{key}."
    weights = {
        k[len(prefix) :]: v for k, v in load_file(d / "model.safetensors").items() if k.startswith(prefix)
    }
    if not weights:
        raise KeyError(f"{d / 'model.safetensors'} holds no {key!r} weights")
    model = BinaryAutoencoder(cfg)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise KeyError(f"{d} does not fit its config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()


def pretrain_tokenizer(
    out: str | os.PathLike[str], *, progress: ProgressFn, max_steps: int | None = None
) -> list[float]:
    """Recipe of the shipped B-AE: :class:`~iclr25.methods.bigr.config.TokenizerRecipe`.

    Trains the claim's B-AE on shapes-world images of seed 100 with L1 + the perceptual term over
    the shipped feature net (:func:`~iclr25.methods.bigr.perceptual.load_feature_net`), then
    trains an evaluator CNN on the same images and records how well the reconstructions of
    held-out test images (thresholded bits) keep their class. Writes ``config.json``,
    ``model.safetensors`` and ``training.json`` (the recipe, the feature net it used, every step's
    loss and that quality) into ``out``. An unfinished run checkpoints into ``out`` every 500
    steps and resumes from there when called again.

    Args:
        out: the folder to write.
        progress: called as ``progress(stage, done, total)`` every 50 steps (stages
            ``"tokenizer"`` and ``"evaluator"``).
        max_steps: stop after this many steps and write nothing (replays the first steps).

    Returns:
        The per-step training losses.
    """
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig
    from iclr25.methods.bigr.perceptual import FEATURE_NET, PerceptualLoss, _to_images, load_feature_net
    from iclr25.methods.bigr.probe import conditional_accuracy, train_evaluator

    recipe = TokenizerRecipe()
    run = RecipeRun(out, replay=max_steps is not None)
    world = ShapesWorld(
        WorldConfig(image_size=recipe.ae.resolution, backgrounds=recipe.backgrounds), seed=recipe.seed
    )
    X, y = world.classification_arrays(recipe.n_train, split="train")
    images, labels = _to_images(X), torch.tensor(y)
    perceptual = PerceptualLoss(load_feature_net(FEATURE_NET))
    torch.manual_seed(recipe.seed)  # the initialisation (and, after it, the evaluator's)
    gen = torch.Generator().manual_seed(recipe.seed)
    ae = BinaryAutoencoder(recipe.ae)
    losses = _train_tokenizer(
        ae, images, steps=recipe.steps, batch_size=recipe.batch_size, lr=recipe.lr, generator=gen,
        progress=lambda d, t: progress("tokenizer", d, t), perceptual=perceptual,
        perceptual_weight=recipe.perceptual_weight, stop=max_steps, state=run.state,
        checkpoint=run.checkpoint,
    )  # fmt: skip
    if max_steps is not None:
        return losses
    n_classes = len(world.class_names("shape_color"))
    evaluator = train_evaluator(
        images, labels, n_classes, steps=recipe.eval_steps, generator=gen,
        progress=lambda d, t: progress("evaluator", d, t),
    )  # fmt: skip
    X, y = world.classification_arrays(recipe.n_test, split="test")
    test, test_labels = _to_images(X), torch.tensor(y)
    with torch.no_grad():
        rec = torch.cat([ae.decode(ae.encode(c).bits_det).clamp(-1, 1) for c in test.split(500)])
    quality = {
        "recon_l1": float((rec - test).abs().mean()),
        "eval_acc_natural": conditional_accuracy(evaluator, test, test_labels),
        "recon_cond_acc": conditional_accuracy(evaluator, rec, test_labels),
    }
    feature_net = read_training(FEATURE_NET)
    save_tokenizer(ae, out)
    run.finish(
        command=f"iclr25 pretrain bigr bae_shapes16 --out {out}",
        loss_curve=losses,
        quality=quality,
        data=f"shapes world seed {recipe.seed}: {recipe.n_train} training images (split 'train'), "
        f"{recipe.ae.resolution} x {recipe.ae.resolution}, {n_classes} classes; quality on "
        f"{recipe.n_test} test images (split 'test'): an evaluator CNN trained on the training "
        "images classifies their reconstructions (bits thresholded at 0.5)",
        loss="L1 through stochastic straight-through bits"
        f" + {recipe.perceptual_weight} x perceptual (LPIPS's distance over the feature net)",
        feature_net={
            "command": feature_net["command"],
            "commit": feature_net["commit"],
            "sha256": hashlib.sha256((FEATURE_NET / "model.safetensors").read_bytes()).hexdigest(),
            "quality": feature_net["quality"],
        },
        config=dataclasses.asdict(recipe),
    )
    return losses
