"""VIEDM: the vision-guided expression diffusion model (training loss, sampling, training loop).

``VIEDM.loss`` is the DiffuSeq objective (x_0 MSE + prior + rounding NLL, importance-weighted by
the loss-aware timestep sampler) conditioned through the VTC module;
``VIEDM.generate_expressions`` samples several expressions per target from independent noise
(``num_samples``, like ``num_return_sequences`` of HF ``generate``), clamping x0_hat to the word
embeddings of the weights in use and rounding to the nearest embedding, cut at the first eos / pad.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (VIE-DM, Sec. 3).
    Gong et al., "DiffuSeq", ICLR 2023 (training objective, sampling, clamping).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor, nn

from iclr25.common import rng
from iclr25.methods.vie_dm.config import VIEDMConfig
from iclr25.methods.vie_dm.denoiser import Denoiser
from iclr25.methods.vie_dm.diffusion import (
    GaussianSequenceDiffusion,
    LossAwareSampler,
    UniformSampler,
    round_to_tokens,
)
from iclr25.methods.vie_dm.visual import ImageEncoder
from iclr25.methods.vie_dm.vtc import VisualMemory

__all__ = ["VIEDM", "train_viedm"]


class VIEDM(nn.Module):
    """Vision-guided expression diffusion.

    Args:
        config: the model's sizes and diffusion.
        encoder: the image encoder (``stride``, ``out_channels``); a fresh :class:`ImageEncoder`
            when None.
        grid_tokens: image tokens the encoder yields (h * w of its feature map).
        freeze_encoder: keep the encoder fixed (it is pre-trained and shared at CPU scale).
        decode: ids (B, L) -> sentences (the tokenizer's ``decode``); needed for generation.

    Example:
        >>> from iclr25.methods.vie_dm import ExpressionTokenizer, VIEDMConfig
        >>> tok = ExpressionTokenizer(["the", "red", "circle"])
        >>> model = VIEDM(VIEDMConfig.tiny(len(tok)), grid_tokens=36, decode=tok.decode)
        >>> images, boxes = torch.rand(2, 3, 48, 48), torch.tensor([[4.0, 4, 20, 20], [10, 12, 30, 40]])
        >>> ids = tok.encode(["the red circle", "circle"], length=12)
        >>> model.loss(images, boxes, ids, generator=torch.Generator().manual_seed(0))["loss"].ndim
        0
        >>> out = model.generate_expressions(images, boxes, num_samples=2, steps=5,
        ...                                  generator=torch.Generator().manual_seed(0))
        >>> len(out), len(out[0])
        (2, 2)
    """

    def __init__(
        self,
        config: VIEDMConfig,
        *,
        encoder: nn.Module | None = None,
        grid_tokens: int = 36,
        freeze_encoder: bool = True,
        decode: Callable[[Tensor], list[str]] | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        encoder = encoder if encoder is not None else ImageEncoder((16, 32, config.visual_channels))
        self.memory = VisualMemory(
            encoder, dim=config.d_model, roi_size=config.roi_size, top_k=config.top_k,
            grid_tokens=grid_tokens, freeze=freeze_encoder,
        )  # fmt: skip
        self.embedding = nn.Embedding(config.vocab_size, config.d_emb)
        nn.init.normal_(self.embedding.weight)
        self.denoiser = Denoiser(
            d_emb=config.d_emb, dim=config.d_model, heads=config.heads, seq_len=config.seq_len,
            vtc_layers=config.vtc_layers, layers=config.denoiser_layers, use_vtc=config.use_vtc,
        )  # fmt: skip
        dc = config.diffusion
        self.diffusion = GaussianSequenceDiffusion.from_schedule(
            dc.schedule, dc.steps, offset=dc.schedule_offset
        )
        self.sampler: UniformSampler = (
            LossAwareSampler(dc.steps, dc.sampler_history, dc.sampler_uniform)
            if dc.timestep_sampler == "loss_aware"
            else UniformSampler(dc.steps)
        )
        self.decode = decode

    def _model_fn(self, cond: tuple[Tensor, Tensor, Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
        target, context, pooled = cond
        return lambda x, t: self.denoiser(x, t, target, context, pooled)

    def _timesteps(self, n: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """``n`` timesteps and their importance weights from the sampler (whose state and draws
        stay on the CPU), moved to the model's device."""
        t, weight = self.sampler.sample(n, generator=generator)
        device = self.embedding.weight.device
        return t.to(device), weight.to(device)

    def null_condition(self, batch: int) -> tuple[Tensor, Tensor, Tensor]:
        """The condition of text-only pretraining: one zero memory token and no image tokens (and a
        zero pooled prefix for the no-VTC layout), so the text side learns the language alone."""
        w = self.embedding.weight
        d = self.config.d_model
        return w.new_zeros(batch, 1, d), w.new_zeros(batch, 0, d), w.new_zeros(batch, d)

    def text_loss(self, token_ids: Tensor, *, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """The same importance-weighted DiffuSeq loss as :meth:`loss`, under :meth:`null_condition`
        (text-only pretraining of the foundation)."""
        if token_ids.shape[1] != self.config.seq_len:
            raise ValueError(f"token_ids must have length L={self.config.seq_len}, got {token_ids.shape[1]}")
        t, weight = self._timesteps(len(token_ids), generator)
        terms = self.diffusion.training_losses(
            self._model_fn(self.null_condition(len(token_ids))), self.embedding.weight, token_ids, t,
            generator=generator,
        )  # fmt: skip
        self.sampler.update(t, terms["loss"])
        out = {k: v.mean().detach() for k, v in terms.items() if k != "loss"}
        out["loss"] = (terms["loss"] * weight).mean()
        return out

    def loss(
        self,
        images: Tensor,
        boxes: Tensor,
        token_ids: Tensor,
        *,
        generator: torch.Generator | None = None,
        fmap: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """Importance-weighted DiffuSeq loss of expressions ``token_ids`` for targets ``boxes``.

        Args:
            images: (B, 3, H, W) in [0, 1].
            boxes: (B, 4) XYXY pixel boxes, one target per image row.
            token_ids: (B, L) expression ids (eos + pads included).
            generator: timesteps and noise (drawn on the generator's device, the CPU for the
                usual CPU generator, and moved to the model's).
            fmap: precomputed encoder feature maps (B, C, h, w) (frozen encoder), optional.

        The tensors live on the model's device.

        Returns:
            dict: ``loss`` (scalar to minimise) and the batch means of mse, prior and nll.
        """
        if token_ids.shape[1] != self.config.seq_len:
            raise ValueError(f"token_ids must have length L={self.config.seq_len}, got {token_ids.shape[1]}")
        cond = self.memory(images, boxes, fmap)
        t, weight = self._timesteps(len(token_ids), generator)
        terms = self.diffusion.training_losses(
            self._model_fn(cond), self.embedding.weight, token_ids, t, generator=generator
        )
        self.sampler.update(t, terms["loss"])
        out = {k: v.mean().detach() for k, v in terms.items() if k != "loss"}
        out["loss"] = (terms["loss"] * weight).mean()
        return out

    @torch.no_grad()
    def generate_ids(
        self,
        images: Tensor,
        boxes: Tensor,
        *,
        num_samples: int = 5,
        steps: int | None = None,
        clamp: bool | None = None,
        ddim_eta: float | None = None,
        shared_noise: bool = False,
        generator: torch.Generator | None = None,
        fmap: Tensor | None = None,
    ) -> Tensor:
        """Token ids (B, num_samples, L) from the reverse process; sample j of every target starts
        from its own noise unless ``shared_noise`` (one start noise for all samples of a target).

        ``images``, ``boxes`` and ``fmap`` live on the model's device; the noise is drawn on the
        generator's device (the CPU without one) and moved there, so a CPU generator gives the same
        start noise on every device."""
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        dc = self.config.diffusion
        steps = dc.sampling_steps if steps is None else steps
        if not 1 <= steps <= dc.steps:
            raise ValueError(f"steps must be in [1, T={dc.steps}], got {steps}")
        clamp = dc.clamp if clamp is None else clamp
        self.eval()
        B, L, d = len(boxes), self.config.seq_len, self.config.d_emb
        target, context, pooled = self.memory(images, boxes, fmap)
        rep = lambda x: x.repeat_interleave(num_samples, 0)  # noqa: E731  (B * n, ...)
        cond = (rep(target), rep(context), rep(pooled))
        if shared_noise:
            noise = rng.randn(B, 1, L, d, generator=generator).expand(B, num_samples, L, d)
            noise = noise.reshape(B * num_samples, L, d)
        else:
            noise = rng.randn(B * num_samples, L, d, generator=generator)
        x0 = self.diffusion.spaced(steps).sample(
            self._model_fn(cond), (B * num_samples, L, d), self.embedding.weight, clamp=clamp,
            clamp_below=dc.clamp_below, ddim_eta=ddim_eta, noise=noise.to(self.embedding.weight.device),
            generator=generator,
        )  # fmt: skip
        # rounding: the nearest word embedding (the same map as clamping; with clamping on, x0 already
        # is an embedding row, and the tied head's argmax could differ from it only by row norms)
        ids = round_to_tokens(x0, self.embedding.weight)
        return ids.reshape(B, num_samples, L)

    def generate_expressions(
        self,
        images: Tensor,
        boxes: Tensor,
        *,
        num_samples: int = 5,
        steps: int | None = None,
        clamp: bool | None = None,
        generator: torch.Generator | None = None,
        **kwargs: object,
    ) -> list[list[str]]:
        """``num_samples`` expressions for each target box (list over targets of lists of strings)."""
        if self.decode is None:
            raise ValueError("VIEDM needs decode= (a tokenizer's decode) to return strings")
        ids = self.generate_ids(
            images, boxes, num_samples=num_samples, steps=steps, clamp=clamp, generator=generator, **kwargs
        )
        return [self.decode(row) for row in ids]


def train_viedm(
    model: VIEDM,
    images: Tensor,
    boxes: Tensor,
    token_ids: Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    ema: float = 0.9999,
    generator: torch.Generator | None = None,
    fmap: Tensor | None = None,
    progress: Callable[[int, int], None] | None = None,
    progress_every: int = 100,
    on_block: Callable[[int, VIEDM], None] | None = None,
    device: torch.device | str | None = None,
) -> tuple[VIEDM, list[float]]:
    """Train ``model`` (AdamW) and return its EMA copy (used for sampling) and the loss curve.

    Args:
        model: trained in place.
        images, boxes, token_ids: one row per (target, expression): (N, 3, H, W), (N, 4), (N, L),
            on any device (each batch is moved to ``device``).
        steps: optimiser steps.
        batch_size: rows per step.
        lr: learning rate.
        ema: EMA decay of the returned copy.
        generator: batches, timesteps and noise. Its draws happen on its own device (the CPU for
            the usual CPU generator) and are moved, so a CPU run repeats bit for bit.
        fmap: precomputed feature maps of ``images`` (frozen encoder), optional.
        progress: ``progress(done, total)`` every ``progress_every`` steps.
        on_block: ``on_block(done, ema_model)`` every ``progress_every`` steps (learning curves).
        device: where the model (moved there in place) and its batches go; None keeps the model
            where it is.

    Returns:
        ``(ema_model, losses)``: losses are the mean training loss of each ``progress_every`` block.
    """
    if not len(images) == len(boxes) == len(token_ids):
        raise ValueError("images, boxes and token_ids need one row each per example")
    dev = model.embedding.weight.device if device is None else torch.device(device)
    model.to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    shadow = copy.deepcopy(model)
    shadow.sampler = model.sampler
    losses: list[float] = []
    block: list[float] = []
    for step in range(steps):
        # the batch indices are drawn on the CPU (or the generator's device) and stay there: they
        # index the rows wherever those live, and each batch is then moved to ``dev``
        idx = rng.randint(0, len(images), (batch_size,), generator=generator)
        out = model.loss(
            images[idx].to(dev),
            boxes[idx].to(dev),
            token_ids[idx].to(dev),
            generator=generator,
            fmap=None if fmap is None else fmap[idx].to(dev),
        )
        opt.zero_grad()
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        with torch.no_grad():
            for ps, pm in zip(shadow.parameters(), model.parameters(), strict=True):
                ps.lerp_(pm, 1.0 - ema)
        block.append(float(out["loss"].detach()))
        if (step + 1) % progress_every == 0 or step + 1 == steps:
            losses.append(sum(block) / len(block))
            block = []
            if progress is not None:
                progress(step + 1, steps)
            if on_block is not None:
                on_block(step + 1, shadow)
                model.train()
    model.eval()
    shadow.eval()
    return shadow, losses
