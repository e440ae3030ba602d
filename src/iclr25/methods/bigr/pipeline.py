"""A diffusers-style pipeline around the B-AE and BiGR: class labels in, images out.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672, Sec. 3.3 (sampling) and Sec. 4.3 (zero-shot
    inpainting, outpainting, editing and class interpolation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from iclr25.methods.bigr.model import BiGR
from iclr25.methods.bigr.sampling import generate
from iclr25.methods.bigr.tokenizer import BinaryAutoencoder

__all__ = ["BiGRPipeline", "PipelineOutput"]


@dataclass
class PipelineOutput:
    """Images and cost.

    Attributes:
        images: a (B, C, H, W) tensor in [0, 1] ("pt"), a (B, H, W, C) array ("np") or PIL images.
        bits: the sampled tokens (B, N, K).
        passes: sequential backbone passes.
        network_evals: backbone evaluations counting the CFG doubling.
    """

    images: Any
    bits: torch.Tensor
    passes: int
    network_evals: int


class BiGRPipeline:
    """Class-conditional generation with BiGR, like a diffusers pipeline.

    Args:
        tokenizer: the trained :class:`BinaryAutoencoder`.
        model: the trained bidirectional :class:`BiGR` (its EMA for inference).

    Example:
        >>> from iclr25.methods.bigr.config import BinaryAEConfig, tiny
        >>> ae = BinaryAutoencoder(BinaryAEConfig(nf=8, ch_mult=(1, 2, 2), num_res_blocks=1,
        ...     attn_resolutions=(), emb_dim=16, code_dim=8, resolution=16))
        >>> pipe = BiGRPipeline(ae, BiGR(tiny()))
        >>> out = pipe(torch.tensor([0, 1]), num_iter=4, diffusion_steps=4,
        ...            generator=torch.Generator().manual_seed(0))
        >>> out.images.shape, out.passes
        (torch.Size([2, 3, 16, 16]), 4)
    """

    def __init__(
        self, tokenizer: BinaryAutoencoder, model: BiGR, *, feature_layer: int | None = None
    ) -> None:
        if tokenizer.cfg.code_dim != model.cfg.code_dim:
            raise ValueError(f"tokenizer K {tokenizer.cfg.code_dim} != model K {model.cfg.code_dim}")
        if tokenizer.cfg.grid != model.cfg.grid:
            raise ValueError(f"tokenizer grid {tokenizer.cfg.grid} != model grid {model.cfg.grid}")
        layer = max(1, model.cfg.depth // 2) if feature_layer is None else feature_layer
        if not 1 <= layer <= model.cfg.depth:
            raise ValueError(f"feature_layer must lie in [1, {model.cfg.depth}], got {feature_layer}")
        self.tokenizer, self.model = tokenizer.eval(), model.eval()
        self.feature_layer = layer

    @torch.no_grad()
    def encode_images(
        self, images: torch.Tensor, *, layer: int | None = None, batch_size: int = 256
    ) -> torch.Tensor:
        """Images -> BiGR's representation (the paper's linear-probe features), shape (B, D).

        Each image is encoded by the B-AE into its deterministic binary code (bits thresholded at
        p = 0.5); every token is visible (nothing masked), the class token holds the null class
        (true labels would leak into the features); the backbone stops after block ``layer`` and
        its output is taken *before* the final RMSNorm, the class token dropped and the N image
        tokens average-pooled. The paper reads an intermediate layer chosen on validation data;
        ``layer`` defaults to the pipeline's ``feature_layer`` (depth // 2 unless given).

        Args:
            images: float tensor (B, C, H, W) in [-1, 1] (the tokenizer's range; map images in
                [0, 1] with ``2 * x - 1``), C and H = W as the tokenizer's config.
            layer: block whose output is pooled, in [1, depth].
            batch_size: images per forward pass.

        Returns:
            Float tensor (B, D).

        Raises:
            TypeError: ``images`` is not a floating-point tensor.
            ValueError: wrong shape, non-finite values, values outside [-1, 1], or a bad layer.
        """
        if not isinstance(images, torch.Tensor):
            raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
        if not images.is_floating_point():
            raise TypeError(f"images must be a floating-point tensor in [-1, 1], got dtype {images.dtype}")
        c, r = self.tokenizer.cfg.in_channels, self.tokenizer.cfg.resolution
        if images.ndim != 4 or images.shape[1] != c or images.shape[-2:] != (r, r):
            raise ValueError(f"images must have shape (B, {c}, {r}, {r}), got {tuple(images.shape)}")
        if len(images) == 0:
            raise ValueError("images is empty")
        if not torch.isfinite(images).all():
            raise ValueError("images contain NaN or infinite values")
        lo, hi = float(images.min()), float(images.max())
        if lo < -1.0 - 1e-4 or hi > 1.0 + 1e-4:
            raise ValueError(
                f"images must lie in [-1, 1], got values in [{lo:.3g}, {hi:.3g}] "
                "(map [0, 1] images with 2 * x - 1, uint8 ones with x / 127.5 - 1)"
            )
        layer = self.feature_layer if layer is None else layer
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out = []
        for chunk in images.split(batch_size):
            tokens = self.bits_to_tokens(self.tokenizer.encode(chunk.float()).bits_det)  # (b, N, K)
            out.append(self.model.extract_features(tokens, layer=layer))
        return torch.cat(out)

    def bits_to_tokens(self, bits: torch.Tensor) -> torch.Tensor:
        """(B, K, h, w) -> (B, N, K) (raster order)."""
        return bits.flatten(2).transpose(1, 2)

    def tokens_to_bits(self, tokens: torch.Tensor) -> torch.Tensor:
        """(B, N, K) -> (B, K, h, w)."""
        g = self.model.cfg.grid
        return tokens.transpose(1, 2).reshape(len(tokens), -1, g, g)

    @torch.no_grad()
    def decode(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens (B, N, K) -> images (B, C, H, W) in [-1, 1]."""
        return self.tokenizer.decode(self.tokens_to_bits(tokens)).clamp(-1, 1)

    def _output(self, tokens: torch.Tensor, passes: int, evals: int, output_type: str) -> PipelineOutput:
        images = (self.decode(tokens) + 1) / 2  # (B, C, H, W) in [0, 1]
        if output_type == "pt":
            out: Any = images
        elif output_type in ("np", "pil"):
            out = images.permute(0, 2, 3, 1).cpu().numpy()
            if output_type == "pil":
                from PIL import Image

                out = [Image.fromarray((a * 255).round().astype(np.uint8)) for a in out]
        else:
            raise ValueError(f"output_type must be 'pt', 'np' or 'pil', got {output_type!r}")
        return PipelineOutput(out, tokens, passes, evals)

    def __call__(
        self,
        class_labels: torch.Tensor,
        *,
        cfg_scale: float = 3.0,
        num_iter: int = 20,
        gumbel_temp: float = 0.01,
        gumbel_schedule: Literal["constant", "down", "up"] = "constant",
        diffusion_steps: int = 100,
        temperature: float = 1.0,
        order: Literal["confidence", "entropy", "random"] = "confidence",
        generator: torch.Generator | None = None,
        output_type: str = "pt",
    ) -> PipelineOutput:
        """Generate images of ``class_labels`` (B,); see :func:`~iclr25.methods.bigr.sampling.generate`."""
        s = generate(
            self.model, class_labels, num_iter=num_iter, cfg_scale=cfg_scale, gumbel_temp=gumbel_temp,
            gumbel_schedule=gumbel_schedule, diffusion_steps=diffusion_steps, temperature=temperature,
            order=order, generator=generator,
        )  # fmt: skip
        return self._output(s.bits, s.passes, s.network_evals, output_type)

    @torch.no_grad()
    def inpaint(
        self, images: torch.Tensor, token_mask: torch.Tensor, class_labels: torch.Tensor, *,
        num_iter: int = 8, cfg_scale: float = 3.0, gumbel_temp: float = 10.0, diffusion_steps: int = 100,
        generator: torch.Generator | None = None, output_type: str = "pt",
    ) -> PipelineOutput:  # fmt: skip
        """Refill the tokens where ``token_mask`` (B, N) is True; the others keep the image's bits.

        Editing is inpainting with another class; outpainting uses
        :func:`~iclr25.methods.bigr.sampling.outpaint_mask`. Gumbel temperature 10 as in the paper's
        zero-shot scripts.
        """
        known = self.bits_to_tokens(self.tokenizer.encode(images, generator=generator).bits_det)
        mask = token_mask.expand(len(images), -1) if token_mask.ndim == 1 else token_mask
        s = generate(
            self.model, class_labels, num_iter=num_iter, cfg_scale=cfg_scale, gumbel_temp=gumbel_temp,
            diffusion_steps=diffusion_steps, known_bits=known, known_mask=~mask, generator=generator,
        )  # fmt: skip
        return self._output(s.bits, s.passes, s.network_evals, output_type)

    @torch.no_grad()
    def interpolate(
        self, label_a: int, label_b: int, weights: list[float] | torch.Tensor, *, num_iter: int = 20,
        cfg_scale: float = 3.0, gumbel_temp: float = 0.01, diffusion_steps: int = 100,
        generator: torch.Generator | None = None, output_type: str = "pt",
    ) -> PipelineOutput:  # fmt: skip
        """One image per weight w, conditioned on (1 - w) e_a + w e_b (class-embedding interpolation)."""
        w = torch.as_tensor(weights, dtype=torch.float32)[:, None]  # (B, 1)
        emb = self.model.backbone.class_embedding(torch.tensor([label_a, label_b]))  # (2, D)
        s = generate(
            self.model, None, class_emb=(1 - w) * emb[0] + w * emb[1], num_iter=num_iter, cfg_scale=cfg_scale,
            gumbel_temp=gumbel_temp, diffusion_steps=diffusion_steps, generator=generator,
        )  # fmt: skip
        return self._output(s.bits, s.passes, s.network_evals, output_type)
