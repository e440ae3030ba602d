"""The vision-text condition (VTC) module of VIE-DM and its token selection.

The VTC aligns visual features with the *noisy* text representation at every denoising step:
queries are the projected noisy embeddings x_t (+ timestep and positions), keys and values the
visual memory, through cross-attention layers. The memory is the target's RoI tokens (+ a box
embedding) and the k image tokens most relevant to the target ("token selection"); the rest of the
image tokens are dropped. Relevance is the cosine similarity between each image token and the
mean RoI feature of the target in the encoder's feature space (a design decision: the paper names
the mechanism, not its score).

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (VTC module, token
    selection).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr25.methods.vie_dm.visual import BoxEmbedding, check_boxes, encoder_features, roi_features

__all__ = ["VisionTextCondition", "VisualMemory", "select_tokens"]


def select_tokens(
    tokens: Tensor, target: Tensor, k: int, *, mask: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Keep the k image tokens with the highest cosine similarity to the target feature.

    Args:
        tokens: (B, N, C) image tokens.
        target: (B, C) target feature.
        k: tokens kept (1 <= k <= N).
        mask: optional (B, N) bool, True for padded tokens (never selected while others remain).

    Returns:
        ``(selected, index, scores)``: (B, k, C) tokens, their (B, k) indices (highest score first)
        and the (B, N) scores.
    """
    n = tokens.shape[1]
    if not 1 <= k <= n:
        raise ValueError(f"top-k must be in [1, {n}] (the number of visual tokens), got {k}")
    scores = F.cosine_similarity(tokens, target[:, None, :], dim=-1)  # (B, N)
    ranked = scores.masked_fill(mask, float("-inf")) if mask is not None else scores
    index = ranked.topk(k, dim=1).indices  # (B, k)
    selected = tokens.gather(1, index[..., None].expand(-1, -1, tokens.shape[-1]))  # (B, k, C)
    return selected, index, scores


class VisualMemory(nn.Module):
    """Builds the condition tokens of one target: RoI tokens + box embedding, selected image tokens.

    Args:
        encoder: image encoder with ``stride`` and ``out_channels`` (frozen when ``freeze``).
        dim: model width.
        roi_size: RoI grid side (roi_size**2 target tokens).
        top_k: image tokens kept by token selection (None: all tokens).
        grid_tokens: number of image tokens (for the positional table).
        freeze: keep the encoder fixed (no gradients, eval mode).
    """

    def __init__(
        self,
        encoder: nn.Module,
        *,
        dim: int,
        roi_size: int,
        top_k: int | None,
        grid_tokens: int,
        freeze: bool,
    ) -> None:
        super().__init__()
        self.encoder, self.freeze = encoder, freeze
        if freeze:
            for p in encoder.parameters():
                p.requires_grad_(False)
        c = int(encoder.out_channels)
        self.roi_size, self.top_k, self.stride = roi_size, top_k, int(encoder.stride)
        self.token_proj = nn.Linear(c, dim)
        self.roi_proj = nn.Linear(c, dim)
        self.grid_pos = nn.Parameter(torch.randn(grid_tokens, dim) * 0.02)
        self.roi_pos = nn.Parameter(torch.randn(roi_size * roi_size, dim) * 0.02)
        self.box = BoxEmbedding(dim)
        self.kind = nn.Parameter(torch.randn(2, dim) * 0.02)  # target vs context tokens
        #: "similarity" (token selection) or "random": k tokens drawn uniformly, a control that keeps
        #: the number of context tokens and drops what token selection chooses.
        self.selection = "similarity"
        self._random = torch.Generator().manual_seed(0)

    def features(self, images: Tensor) -> Tensor:
        """Encoder feature map (B, C, h, w); no gradient when frozen."""
        return encoder_features(self.encoder, images, frozen=self.freeze)

    def forward(
        self, images: Tensor, boxes: Tensor, fmap: Tensor | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Condition tokens of target ``boxes[b]`` in ``images[b]``.

        Returns:
            ``(target, context, pooled)``: (B, r*r, dim) target tokens (box embedding added),
            (B, k, dim) selected image tokens (grid positions added) and a (B, dim) pooled summary
            (mean target token + mean of all image tokens) for the no-VTC prefix.
        """
        h, w = images.shape[-2:]
        check_boxes(boxes, h, w)
        fmap = self.features(images) if fmap is None else fmap
        tokens = fmap.flatten(2).transpose(1, 2)  # (B, N, C)
        roi = roi_features(fmap, boxes, stride=self.stride, output_size=self.roi_size)  # (B, r*r, C)
        if tokens.shape[1] != self.grid_pos.shape[0]:
            raise ValueError(f"expected {self.grid_pos.shape[0]} image tokens, got {tokens.shape[1]}")
        k = tokens.shape[1] if self.top_k is None else self.top_k
        if self.selection == "random":
            B, N = tokens.shape[:2]
            index = torch.rand(B, N, generator=self._random).argsort(1)[:, :k].to(tokens.device)  # (B, k)
            selected = tokens.gather(1, index[..., None].expand(-1, -1, tokens.shape[-1]))
        elif self.selection == "similarity":
            selected, index, _ = select_tokens(tokens, roi.mean(1), k)
        else:
            raise ValueError(f"selection must be 'similarity' or 'random', got {self.selection!r}")
        ctx = self.token_proj(selected) + self.grid_pos[index] + self.kind[1]  # (B, k, dim)
        tgt = self.roi_proj(roi) + self.roi_pos + self.box(boxes, h, w)[:, None, :] + self.kind[0]
        pooled = tgt.mean(1) + (self.token_proj(tokens) + self.grid_pos).mean(1)
        return tgt, ctx, pooled


class VisionTextCondition(nn.Module):
    """Cross-attention of the noisy text states to the visual memory (pre-norm decoder layers,
    no causal mask: every text position sees every other).

    Args:
        dim: width.
        heads: attention heads.
        layers: number of layers.
    """

    def __init__(self, dim: int, heads: int, layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerDecoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(layers)
        )

    def forward(self, text: Tensor, memory: Tensor, memory_mask: Tensor | None = None) -> Tensor:
        """text (B, L, dim), memory (B, M, dim), memory_mask (B, M) True = padded -> (B, L, dim)."""
        for layer in self.layers:
            text = layer(text, memory, memory_key_padding_mask=memory_mask)
        return text
