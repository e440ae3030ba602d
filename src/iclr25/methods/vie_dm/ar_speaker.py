"""The autoregressive REG speaker baseline: a causal transformer captioner on the same visual memory.

It reads the same condition tokens as VIE-DM (target RoI tokens + box embedding, top-k selected
image tokens), cross-attends to them from a causal decoder, and decodes greedily, by batched beam
search (returning the best ``num_return`` beams) or by sampling.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (the CNN-LSTM /
    transformer REG baselines it compares with).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from iclr25.common import rng
from iclr25.methods.vie_dm.config import VIEDMConfig
from iclr25.methods.vie_dm.visual import ImageEncoder
from iclr25.methods.vie_dm.vtc import VisualMemory

__all__ = ["ARSpeaker", "train_ar_speaker"]


class ARSpeaker(nn.Module):
    """Transformer REG speaker with the width and depth of a :class:`VIEDMConfig`.

    Args:
        config: sizes (d_model, heads, vtc_layers + denoiser_layers decoder layers, top_k, seq_len).
        encoder: shared image encoder (frozen when ``freeze_encoder``).
        grid_tokens: image tokens of the encoder.
        bos_id, eos_id, pad_id: special ids.
        decode: ids (B, L) -> sentences, for :meth:`generate_expressions`.

    Example:
        >>> sp = ARSpeaker(VIEDMConfig.tiny(10))
        >>> ids = sp.generate(torch.rand(2, 3, 48, 48), torch.tensor([[2.0, 2, 9, 9], [5, 5, 30, 30]]),
        ...                   mode="beam", beam=3, num_return=2)
        >>> ids.shape
        torch.Size([2, 2, 12])
    """

    def __init__(
        self,
        config: VIEDMConfig,
        *,
        encoder: nn.Module | None = None,
        grid_tokens: int = 36,
        freeze_encoder: bool = True,
        bos_id: int = 1,
        eos_id: int = 2,
        pad_id: int = 0,
        decode: Callable[[Tensor], list[str]] | None = None,
    ) -> None:
        super().__init__()
        self.config, self.bos_id, self.eos_id, self.pad_id = config, bos_id, eos_id, pad_id
        self.decode = decode
        encoder = encoder if encoder is not None else ImageEncoder((16, 32, config.visual_channels))
        d = config.d_model
        self.memory = VisualMemory(
            encoder, dim=d, roi_size=config.roi_size, top_k=config.top_k, grid_tokens=grid_tokens,
            freeze=freeze_encoder,
        )  # fmt: skip
        self.embed = nn.Embedding(config.vocab_size, d)
        self.pos = nn.Parameter(torch.randn(config.seq_len, d) * 0.02)
        self.layers = nn.ModuleList(
            nn.TransformerDecoderLayer(d, config.heads, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
            for _ in range(config.vtc_layers + config.denoiser_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.vocab_size)

    def condition(self, images: Tensor, boxes: Tensor, fmap: Tensor | None = None) -> Tensor:
        """Visual memory (B, r + k, d)."""
        target, context, _ = self.memory(images, boxes, fmap)
        return torch.cat([target, context], 1)

    def logits(self, memory: Tensor, prefix: Tensor) -> Tensor:
        """Next-token logits (B, n, V) for every prefix position of ids (B, n)."""
        n = prefix.shape[1]
        h = self.embed(prefix) + self.pos[:n]
        causal = nn.Transformer.generate_square_subsequent_mask(n, device=prefix.device)
        for layer in self.layers:
            h = layer(h, memory, tgt_mask=causal, tgt_is_causal=True)
        return self.head(self.norm(h))

    def text_loss(self, token_ids: Tensor) -> Tensor:
        """Teacher-forced cross-entropy under a null visual memory (one zero token): text-only
        pretraining of the speaker as a language model of expressions."""
        memory = self.embed.weight.new_zeros(len(token_ids), 1, self.config.d_model)
        inputs = torch.cat([torch.full_like(token_ids[:, :1], self.bos_id), token_ids[:, :-1]], 1)
        logits = self.logits(memory, inputs)
        return F.cross_entropy(logits.transpose(1, 2), token_ids, ignore_index=self.pad_id)

    def sample_text(self, n: int, *, generator: torch.Generator | None = None) -> Tensor:
        """``n`` sampled id rows (n, L) under the null memory (temperature 1)."""
        self.eval()
        with torch.no_grad():
            memory = self.embed.weight.new_zeros(n, 1, self.config.d_model)
            return self._sample(memory, 1, 1.0, generator).reshape(n, -1)

    def loss(self, images: Tensor, boxes: Tensor, token_ids: Tensor, *, fmap: Tensor | None = None) -> Tensor:
        """Teacher-forced cross-entropy of ``token_ids`` (B, L) = words + eos + pads (pads ignored)."""
        memory = self.condition(images, boxes, fmap)
        inputs = torch.cat([torch.full_like(token_ids[:, :1], self.bos_id), token_ids[:, :-1]], 1)
        logits = self.logits(memory, inputs)
        return F.cross_entropy(logits.transpose(1, 2), token_ids, ignore_index=self.pad_id)

    @torch.no_grad()
    def generate(
        self,
        images: Tensor,
        boxes: Tensor,
        *,
        mode: str = "greedy",
        beam: int = 5,
        num_return: int = 1,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
        fmap: Tensor | None = None,
    ) -> Tensor:
        """Ids (B, num_return, L) by "greedy", "beam" (best ``num_return`` of ``beam`` beams, by
        summed log-probability) or "sample" (``num_return`` independent samples).

        ``images``, ``boxes`` and ``fmap`` live on the model's device; samples are drawn on the
        generator's device (the CPU without one), so a CPU generator repeats on every device."""
        if num_return < 1:
            raise ValueError(f"num_return must be >= 1, got {num_return}")
        self.eval()
        memory = self.condition(images, boxes, fmap)
        if mode == "greedy":
            if num_return != 1:
                raise ValueError("greedy decoding returns one sequence (num_return=1)")
            return self._sample(memory, 1, None, generator)
        if mode == "sample":
            return self._sample(memory, num_return, temperature, generator)
        if mode == "beam":
            if not 1 <= num_return <= beam:
                raise ValueError(f"num_return must be in [1, beam={beam}], got {num_return}")
            return self._beam(memory, beam, num_return)
        raise ValueError(f"mode must be 'greedy', 'beam' or 'sample', got {mode!r}")

    def generate_expressions(
        self,
        images: Tensor,
        boxes: Tensor,
        *,
        num_samples: int = 5,
        mode: str = "beam",
        beam: int | None = None,
        generator: torch.Generator | None = None,
        fmap: Tensor | None = None,
    ) -> list[list[str]]:
        """``num_samples`` expressions per target: the best beams (``mode="beam"``, width
        ``max(beam, num_samples)``), samples (``"sample"``) or the greedy one repeated (``"greedy"``)."""
        if self.decode is None:
            raise ValueError("ARSpeaker needs decode= (a tokenizer's decode) to return strings")
        if mode == "greedy":
            ids = self.generate(images, boxes, mode="greedy", fmap=fmap).expand(-1, num_samples, -1)
        elif mode == "beam":
            width = max(beam or num_samples, num_samples)
            ids = self.generate(images, boxes, mode="beam", beam=width, num_return=num_samples, fmap=fmap)
        else:
            ids = self.generate(
                images, boxes, mode=mode, num_return=num_samples, generator=generator, fmap=fmap
            )
        return [self.decode(row) for row in ids]

    def _sample(
        self, memory: Tensor, n: int, temperature: float | None, gen: torch.Generator | None
    ) -> Tensor:
        B, L = len(memory), self.config.seq_len
        memory = memory.repeat_interleave(n, 0)
        seq = torch.full((B * n, 1), self.bos_id, dtype=torch.long, device=memory.device)
        done = torch.zeros(B * n, dtype=torch.bool, device=memory.device)
        for _ in range(L):
            logits = self.logits(memory, seq)[:, -1]
            if temperature is None:
                nxt = logits.argmax(-1)
            else:
                # drawn on the CPU (or the generator's device), then moved back to the logits' device
                probs = F.softmax(logits / temperature, -1)
                nxt = rng.multinomial(probs.cpu(), 1, generator=gen)[:, 0].to(probs.device)
            nxt = torch.where(done, torch.full_like(nxt, self.pad_id), nxt)
            done = done | (nxt == self.eos_id) | (nxt == self.pad_id)
            seq = torch.cat([seq, nxt[:, None]], 1)
        return seq[:, 1:].reshape(B, n, L)

    def _beam(self, memory: Tensor, W: int, n: int) -> Tensor:
        B, L, V = len(memory), self.config.seq_len, self.config.vocab_size
        memory = memory.repeat_interleave(W, 0)  # (B * W, M, d)
        seq = torch.full((B * W, 1), self.bos_id, dtype=torch.long, device=memory.device)
        score = torch.full((B, W), float("-inf"), device=memory.device)
        score[:, 0] = 0.0
        done = torch.zeros(B * W, dtype=torch.bool, device=memory.device)
        for _ in range(L):
            logp = F.log_softmax(self.logits(memory, seq)[:, -1], -1)  # (B * W, V)
            # a finished beam only extends by pad, at no cost
            frozen = torch.full_like(logp, float("-inf"))
            frozen[:, self.pad_id] = 0.0
            logp = torch.where(done[:, None], frozen, logp)
            cand = (score[:, :, None] + logp.reshape(B, W, V)).reshape(B, W * V)
            score, flat = cand.topk(W, dim=1)  # (B, W)
            parent = flat // V + torch.arange(B, device=memory.device)[:, None] * W
            token = (flat % V).reshape(-1)
            parent = parent.reshape(-1)
            done = done[parent] | (token == self.eos_id) | (token == self.pad_id)
            seq = torch.cat([seq[parent], token[:, None]], 1)
        return seq[:, 1:].reshape(B, W, L)[:, :n]


def train_ar_speaker(
    model: ARSpeaker,
    images: Tensor,
    boxes: Tensor,
    token_ids: Tensor,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator | None = None,
    fmap: Tensor | None = None,
    progress: Callable[[int, int], None] | None = None,
    progress_every: int = 100,
    on_block: Callable[[int, ARSpeaker], None] | None = None,
    device: torch.device | str | None = None,
) -> list[float]:
    """Train the speaker (AdamW, teacher forcing); returns the mean loss of each progress block.

    Args:
        model: trained in place.
        images, boxes, token_ids: one row per (target, expression): (N, 3, H, W), (N, 4), (N, L),
            on any device (each batch is moved to ``device``).
        steps: optimiser steps.
        batch_size: rows per step.
        lr: learning rate.
        generator: batches (drawn on its own device, the CPU for the usual CPU generator, and
            moved, so a CPU run repeats bit for bit).
        fmap: precomputed feature maps of ``images`` (frozen encoder), optional.
        progress: ``progress(done, total)`` every ``progress_every`` steps.
        progress_every: steps per block.
        on_block: ``on_block(done, model)`` every ``progress_every`` steps (validation curves); the
            model is put back in training mode afterwards.
        device: where the model (moved there in place) and its batches go; None keeps the model
            where it is.

    Returns:
        The mean training loss of each ``progress_every`` block.
    """
    dev = model.head.weight.device if device is None else torch.device(device)
    model.to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    losses, block = [], []
    for step in range(steps):
        idx = rng.randint(0, len(images), (batch_size,), generator=generator)  # on the CPU
        loss = model.loss(
            images[idx].to(dev),
            boxes[idx].to(dev),
            token_ids[idx].to(dev),
            fmap=None if fmap is None else fmap[idx].to(dev),
        )
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        block.append(float(loss.detach()))
        if (step + 1) % progress_every == 0 or step + 1 == steps:
            losses.append(sum(block) / len(block))
            block = []
            if progress is not None:
                progress(step + 1, steps)
            if on_block is not None:
                on_block(step + 1, model)
                model.train()
    model.eval()
    return losses
