"""A tiny REC listener: scores every candidate box of an image given an expression.

Text: word embeddings + positions through self-attention layers. Candidates: RoIAlign features of
each box (from the shared image encoder) + a box embedding; fusion layers let the candidates attend
to each other (for relations and extremes) and to the text tokens; a linear head gives one logit per
candidate. At paper scale the augmented annotations are exported for QRNet / TransVG / MDETR-style
REC code instead (see :func:`~iclr25.methods.vie_dm.augment.export_refcoco`).

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (REC trained on data
    augmented with generated expressions).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr25.common import rng
from iclr25.methods.vie_dm.config import ListenerConfig
from iclr25.methods.vie_dm.visual import (
    BoxEmbedding,
    ImageEncoder,
    check_boxes,
    encoder_features,
    roi_features,
)

__all__ = ["Listener", "listener_accuracy", "train_listener"]


class Listener(nn.Module):
    """REC model over ground-truth candidate boxes.

    Args:
        config: sizes.
        encoder: shared image encoder (frozen when ``freeze_encoder``).
        freeze_encoder: keep the encoder fixed.
        pad_id: padding id of the token ids.

    Example:
        >>> lis = Listener(ListenerConfig.tiny(10))
        >>> boxes = torch.tensor([[[2.0, 2, 9, 9], [5, 5, 30, 30], [0, 0, 0, 0]]])
        >>> lis.score(torch.rand(1, 3, 48, 48), boxes, torch.tensor([[4, 5, 2, 0]]),
        ...           box_mask=torch.tensor([[True, True, False]])).shape
        torch.Size([1, 3])
    """

    def __init__(
        self,
        config: ListenerConfig,
        *,
        encoder: nn.Module | None = None,
        freeze_encoder: bool = True,
        pad_id: int = 0,
    ) -> None:
        super().__init__()
        self.config, self.pad_id, self.freeze = config, pad_id, freeze_encoder
        self.encoder = encoder if encoder is not None else ImageEncoder((16, 32, config.visual_channels))
        if freeze_encoder:
            for p in self.encoder.parameters():
                p.requires_grad_(False)
        d, c = config.d_model, config.visual_channels
        self.embed = nn.Embedding(config.vocab_size, d)
        self.pos = nn.Parameter(torch.randn(config.seq_len, d) * 0.02)
        self.text = nn.ModuleList(
            nn.TransformerEncoderLayer(d, config.heads, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(config.text_layers)
        )
        self.roi = nn.Sequential(nn.Linear(c * config.roi_size**2, d), nn.GELU(), nn.Linear(d, d))
        self.box = BoxEmbedding(d)
        self.fusion = nn.ModuleList(
            nn.TransformerDecoderLayer(d, config.heads, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(config.fusion_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 1)

    def features(self, images: Tensor) -> Tensor:
        """Encoder feature maps (no gradient when frozen)."""
        return encoder_features(self.encoder, images, frozen=self.freeze)

    def candidate_features(
        self, images: Tensor, candidate_boxes: Tensor, box_mask: Tensor | None = None
    ) -> Tensor:
        """RoIAlign features (B, n, C * r * r) of every candidate (padded rows get a dummy box).

        With a frozen encoder they can be computed once per scene and passed to :meth:`score`.
        """
        B, n, _ = candidate_boxes.shape
        h, w = images.shape[-2:]
        box_mask = (
            torch.ones(B, n, dtype=torch.bool, device=candidate_boxes.device)
            if box_mask is None
            else box_mask
        )
        check_boxes(candidate_boxes[box_mask], h, w)
        fmap = self.features(images)
        # give padded rows a harmless valid box so RoIAlign runs; their logits are masked later
        safe = torch.where(
            box_mask[..., None], candidate_boxes, candidate_boxes.new_tensor([0.0, 0.0, 1.0, 1.0])
        )
        feats = roi_features(fmap.repeat_interleave(n, 0), safe.reshape(B * n, 4), stride=self.encoder.stride,
                             output_size=self.config.roi_size)  # fmt: skip
        return feats.flatten(1).reshape(B, n, -1)  # (B, n, C * r * r)

    def score(
        self,
        images: Tensor,
        candidate_boxes: Tensor,
        token_ids: Tensor,
        *,
        box_mask: Tensor | None = None,
        feats: Tensor | None = None,
    ) -> Tensor:
        """Logits (B, n) of candidates (B, n, 4) for expressions (B, L); padded candidates get -inf.

        Args:
            images: (B, 3, H, W) (only their size is read when ``feats`` is given).
            candidate_boxes: (B, n, 4) XYXY pixel boxes (padded rows allowed where ``box_mask`` is False).
            token_ids: (B, L) ids (eos and pads).
            box_mask: (B, n) True for real candidates (default: all real).
            feats: precomputed :meth:`candidate_features`, optional.
        """
        B, n, _ = candidate_boxes.shape
        h, w = images.shape[-2:]
        box_mask = (
            torch.ones(B, n, dtype=torch.bool, device=candidate_boxes.device)
            if box_mask is None
            else box_mask
        )
        if feats is None:
            feats = self.candidate_features(images, candidate_boxes, box_mask)
        safe = torch.where(
            box_mask[..., None], candidate_boxes, candidate_boxes.new_tensor([0.0, 0.0, 1.0, 1.0])
        )
        cand = self.roi(feats) + self.box(safe.reshape(B * n, 4), h, w).reshape(B, n, -1)  # (B, n, d)
        tmask = token_ids == self.pad_id  # (B, L) True = pad
        t = self.embed(token_ids) + self.pos[: token_ids.shape[1]]
        for layer in self.text:
            t = layer(t, src_key_padding_mask=tmask)
        for layer in self.fusion:
            cand = layer(cand, t, tgt_key_padding_mask=~box_mask, memory_key_padding_mask=tmask)
        logits = self.head(self.norm(cand))[..., 0]
        return logits.masked_fill(~box_mask, float("-inf"))


def train_listener(
    model: Listener,
    feats: Tensor,
    images: Tensor,
    boxes: Tensor,
    box_mask: Tensor,
    rows: Tensor,
    token_ids: Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator | None = None,
    evaluate: Callable[[], float] | None = None,
    eval_every: int = 0,
    device: torch.device | str | None = None,
) -> list[tuple[int, float]]:
    """Train the listener on (scene, target index, expression) rows.

    Args:
        model: trained in place.
        feats: (S, n, C * r * r) candidate features of the scenes (:meth:`Listener.candidate_features`).
        images: (S, 3, H, W) scenes.
        boxes: (S, n, 4) padded candidate boxes; ``box_mask`` (S, n) marks real ones.
        rows: (N, 2) long: scene index, target candidate index.
        token_ids: (N, L) expressions.
        steps, batch_size, lr: AdamW training.
        generator: batches (drawn on its own device, the CPU for the usual CPU generator, so a
            CPU run repeats bit for bit).
        evaluate: called every ``eval_every`` steps (and at the end) for a learning curve.
        eval_every: steps between calls of ``evaluate`` (0: only at the end).
        device: where the model (moved there in place) and each batch go; None keeps the model
            where it is. The other tensors may live on any device.

    Returns:
        The learning curve ``[(step, evaluate()), ...]`` (empty without ``evaluate``).
    """
    dev = model.head.weight.device if device is None else torch.device(device)
    model.to(dev)
    model.train()
    rows = rows.cpu()  # CPU indices index the scene tensors wherever they live
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    curve = []
    for step in range(steps):
        idx = rng.randint(0, len(rows), (batch_size,), generator=generator)  # on the CPU
        s, tgt = rows[idx, 0], rows[idx, 1]
        logits = model.score(
            images[s].to(dev),
            boxes[s].to(dev),
            token_ids[idx].to(dev),
            box_mask=box_mask[s].to(dev),
            feats=feats[s].to(dev),
        )
        loss = F.cross_entropy(logits, tgt.to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if evaluate is not None and ((eval_every and (step + 1) % eval_every == 0) or step + 1 == steps):
            model.eval()
            curve.append((step + 1, float(evaluate())))
            model.train()
    model.eval()
    return curve


@torch.no_grad()
def listener_accuracy(
    model: Listener,
    feats: Tensor,
    images: Tensor,
    boxes: Tensor,
    box_mask: Tensor,
    rows: Tensor,
    token_ids: Tensor,
    *,
    batch_size: int = 256,
) -> float:
    """Accuracy (the argmax candidate is the target; Acc@0.5 with ground-truth proposals).

    Every tensor lives on the model's device."""
    model.eval()
    hits = 0
    for start in range(0, len(rows), batch_size):
        s, tgt = rows[start : start + batch_size, 0], rows[start : start + batch_size, 1]
        logits = model.score(
            images[s], boxes[s], token_ids[start : start + batch_size], box_mask=box_mask[s], feats=feats[s]
        )
        hits += int((logits.argmax(-1) == tgt).sum())
    return hits / max(len(rows), 1)
