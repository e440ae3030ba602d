"""The chunk loop of Activation Beacon: ratio schedules, one forward per chunk, and the training loss.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3.1 (streaming the
context chunk by chunk over the beacon memory), Section 3.3 (compression-based auto-regression:
next-token loss on raw tokens only, gradients through the memory; randomly sampled α per step).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.methods.activation_beacon.cache import BeaconCache
from iclr25.methods.activation_beacon.config import BeaconConfig
from iclr25.methods.activation_beacon.layout import additive_mask, chunk_layout, chunk_visibility
from iclr25.methods.activation_beacon.wrap import BeaconContext

__all__ = ["BeaconMemory", "MemoryStats", "chunk_lm_loss", "ratio_schedule", "run_chunks"]


@dataclass
class MemoryStats:
    """Counters of one pass: attention-score entries computed and chunk forwards run."""

    score_entries: int = 0
    forwards: int = 0
    ratios: list[int] = field(default_factory=list)


class BeaconMemory:
    """The memory state of one read: the cache plus counters.

    Attributes:
        cache: the :class:`BeaconCache`.
        stats: counters of the last pass (attention-score entries, forwards, α per chunk).
    """

    def __init__(self, cache: BeaconCache) -> None:
        self.cache = cache
        self.stats = MemoryStats()

    def reset(self) -> None:
        """Forget all context (memory, counters)."""
        self.cache.reset()
        self.stats = MemoryStats()

    def num_entries(self) -> int:
        """Resident key/value entries per layer."""
        return self.cache.num_entries()

    @property
    def peak_entries(self) -> int:
        """Largest key/value length any attention call saw since the last reset."""
        return self.cache.peak_entries


def ratio_schedule(
    n_chunks: int,
    config: BeaconConfig,
    generator: torch.Generator,
    *,
    call_index: int = 0,
    total_len: int = 0,
    max_positions: int | None = None,
    override: int | None = None,
) -> list[int]:
    """α for each chunk of one sequence.

    Args:
        n_chunks: chunks that may carry beacons.
        config: beacon config (``ratios``, ``ratio_mix``, ``span_ratios``, ``window``).
        generator: source of randomness for the random mixes.
        call_index: how many sequences came before (for the ``sequence`` cycle).
        total_len: length of the input (for ``adapt-N``).
        max_positions: positional limit P of the model (for ``adapt-N``).
        override: a fixed α for every chunk (e.g. ``beacon_ratio`` at inference).

    Returns:
        One α per chunk; a span in ``span_ratios`` overlapping a chunk sets its α to the span's
        (the smallest when several overlap).

    References:
        Zhang et al., ICLR 2025, Sec. 3.3 (step-wise randomised ratios).

    Example:
        >>> cfg = BeaconConfig(window=8, ratios=(2, 4), ratio_mix="sequence")
        >>> ratio_schedule(3, cfg, torch.Generator().manual_seed(0), call_index=1)
        [4, 4, 4]
    """
    w = config.window
    choices = list(config.ratios)
    if override is not None:
        if override < 0 or (override > 0 and w % override):
            raise ValueError(f"beacon_ratio={override} must be 0 or a divisor of window={w}")
        alphas = [override] * n_chunks
    elif config.ratio_mix == "step-random":
        idx = torch.randint(len(choices), (n_chunks,), generator=generator).tolist()
        alphas = [choices[i] for i in idx]
        if n_chunks and all(a == 0 for a in alphas):  # α=0 only beside a compressing chunk
            alphas[-1] = max(choices)
    elif config.ratio_mix == "instance-random":
        positive = [a for a in choices if a > 0]
        alphas = [positive[int(torch.randint(len(positive), (1,), generator=generator))]] * n_chunks
    elif config.ratio_mix == "sequence":
        positive = [a for a in choices if a > 0]
        alphas = [positive[call_index % len(positive)]] * n_chunks
    else:  # adapt-N: smallest α whose coverage (P − w)·α + w reaches the length + N
        extra = int(config.ratio_mix[6:])
        limit = max_positions if max_positions is not None else 10**9
        positive = sorted(a for a in choices if a > 0)
        pick = positive[-1]
        for a in positive:
            if (limit - w) * a + w >= total_len + extra:
                pick = a
                break
        alphas = [pick] * n_chunks
    for start, end, a in config.span_ratios or ():
        for c in range(n_chunks):
            if start < (c + 1) * w and end > c * w:
                alphas[c] = a if alphas[c] == 0 else min(alphas[c], a) if a > 0 else 0
    return alphas


def _cache_kwarg(lm: nn.Module) -> str:
    params = inspect.signature(lm.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def run_chunks(
    lm: nn.Module,
    cache: BeaconCache,
    input_ids: torch.Tensor,
    alphas: Sequence[int],
    *,
    window: int,
    attn: str = "full-coverage",
    pos: str = "interleave",
    context: BeaconContext | None = None,
    beacon_embedding: torch.Tensor | None = None,
    stats: MemoryStats | None = None,
    raw_offset: int = 0,
) -> torch.Tensor:
    """Stream ``input_ids`` through a stock HF causal LM chunk by chunk over ``cache``.

    Chunk c (w raw tokens) gets ``alphas[c]`` (0 or missing = no beacons); the ⟨b⟩ items are
    built from ``beacon_embedding`` and routed to the beacon projections through ``context``.
    Positions continue the compressed stream and an explicit 4-D mask is passed, so the stock
    model needs no change. After each chunk ``cache.finish_chunk`` applies the memory policy.

    Args:
        lm: a ``*ForCausalLM`` (its ``get_input_embeddings``, rotary and attention are used as is).
        cache: the memory (already holding earlier context, or empty).
        input_ids: (B, L) raw tokens.
        alphas: α per chunk (chunks beyond the list get none).
        window: chunk size w.
        attn: attention scheme inside a chunk.
        pos: "interleave" or "append".
        context: routing state of the beacon projections (None for the stock model).
        beacon_embedding: (H,) the ⟨b⟩ embedding (needed when some α > 0).
        stats: counters to update.
        raw_offset: global index of ``input_ids[:, 0]`` (for the sink).

    Returns:
        (B, L, V) logits of the raw tokens only.
    """
    b, length = input_ids.shape
    emb = lm.get_input_embeddings()
    key = _cache_kwarg(lm)
    outs = []
    for c, start in enumerate(range(0, length, window)):
        ids = input_ids[:, start : start + window]
        n = ids.shape[1]
        alpha = alphas[c] if c < len(alphas) and n == window else 0
        if alpha and (beacon_embedding is None or context is None):
            raise ValueError("beacon compression needs a beacon embedding and context")
        layout = chunk_layout(n, alpha, pos=pos)
        x = emb(ids)  # (B, n, H)
        if layout.n_beacon:
            beacons = beacon_embedding.to(x.dtype)[None, None].expand(b, layout.n_beacon, -1)
            x = torch.cat([x, beacons], dim=1)[:, layout.order.to(x.device)]  # (B, T, H)
        m = cache.num_entries()
        t = len(layout)
        position_ids = torch.arange(m, m + t, device=x.device)[None].expand(b, t)  # (B, T)
        visible = chunk_visibility(layout, m, attn)
        mask = additive_mask(visible, b, x.dtype).to(x.device)  # (B, 1, T, M+T)
        if stats is not None:
            stats.score_entries += int(visible.sum())
            stats.forwards += 1
            stats.ratios.append(alpha)
        if context is not None:
            context.beacon_mask = (
                layout.is_beacon.to(x.device)[None].expand(b, t) if layout.n_beacon else None
            )
        cache.begin(position_ids, x)
        try:
            out = lm(
                inputs_embeds=x,
                attention_mask=mask,
                position_ids=position_ids,
                use_cache=True,
                **{key: cache},
            )
        finally:
            if context is not None:
                context.beacon_mask = None
        outs.append(out.logits[:, ~layout.is_beacon.to(x.device)])  # (B, n, V): drop ⟨b⟩ logits
        cache.finish_chunk(layout, raw_offset + start)
    return torch.cat(outs, dim=1)


def chunk_lm_loss(
    logits: torch.Tensor, labels: torch.Tensor, *, skip_first: int = 0, ignore_index: int = -100
) -> torch.Tensor:
    """Token-weighted next-token loss over raw tokens, labels shifted once over the whole sequence.

    The last raw token of chunk i predicts the first raw token of chunk i+1.

    Args:
        logits: (B, L, V) raw-token logits in order.
        labels: (B, L) targets aligned with the inputs (−100 = ignore).
        skip_first: targets inside the first ``skip_first`` tokens (the first chunk) are ignored;
            the last token of that chunk still predicts the next chunk's first token.
        ignore_index: the ignored label.

    Returns:
        Scalar: Σ token losses / Σ valid tokens (NaN-free: 0 when nothing is valid).

    Example:
        >>> logits = torch.zeros(1, 3, 4)
        >>> round(chunk_lm_loss(logits, torch.tensor([[0, 1, 2]])).item(), 4)  # log 4
        1.3863
    """
    shift_logits = logits[:, :-1]  # (B, L−1, V)
    target = labels[:, 1:].clone()  # (B, L−1)
    if skip_first:
        target[:, : skip_first - 1] = ignore_index
    valid = target != ignore_index
    if not bool(valid.any()):
        return shift_logits.sum() * 0.0
    return F.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), target.reshape(-1), ignore_index=ignore_index
    )
