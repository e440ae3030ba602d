"""Token layouts of the GenSE language models: vocabulary offsets, sequences, position ids, masks.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3.3-3.4 (N2S, S2S and token-chain prompting).

Vocabulary: 0 PAD, 1 BOS, 2 EOS; semantic id s -> 3 + s; acoustic id a -> 3 + K_sem + a.

- N2S: ``[noisy_sem (T) | BOS | clean_sem (T)]``, positions ``0..T-1, T, 0..T-1`` (clean token j
  shares its position with noisy token j).
- S2S: ``[noisy_sem (T_s) | clean_sem (T_s) | BOS | noisy_ac (T_a) | clean_ac (T_a)]``, positions
  ``0..2T_s`` for the semantic part and BOS, ``0..T_a-1`` for the noisy acoustic prompt, and
  ``gen_offset + j`` for clean acoustic token j. Without the token chain the noisy acoustic
  prompt is left out.

Training and inference use the same builders (the inference form is the training form cut before
the target), and labels are -100 everywhere except the target segment. No EOS: lengths follow
from frame alignment (T_a = 2 T_s).
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

__all__ = ["BOS", "EOS", "IGNORE", "N_SPECIAL", "PAD", "RangeMask", "build_n2s", "build_pair", "build_s2s"]

PAD, BOS, EOS = 0, 1, 2
N_SPECIAL = 3
IGNORE = -100


def _batch(x: torch.Tensor) -> torch.Tensor:
    if x.ndim == 1:
        return x[None]
    if x.ndim != 2:
        raise ValueError(f"expected token ids [T] or [B, T], got shape {tuple(x.shape)}")
    return x


def _ar(n: int, start: int, B: int) -> torch.Tensor:
    return torch.arange(start, start + n).expand(B, n)


def build_pair(
    source: torch.Tensor, target: torch.Tensor | None = None, *, offset: int = N_SPECIAL
) -> dict[str, torch.Tensor]:
    """``[source | BOS | target]`` with positions ``0..T-1, T, 0..T-1`` (source and target shifted
    by ``offset``); without ``target``, the inference prompt ``[source | BOS]``.

    Shape:
        source, target [B, T] or [T] -> input_ids, position_ids, labels [B, 2T+1] (prompt [B, T+1]).
    """
    src = _batch(source)
    B, T = src.shape
    ids = [src + offset, torch.full((B, 1), BOS)]
    pos = [_ar(T, 0, B), torch.full((B, 1), T)]
    if target is None:
        return {"input_ids": torch.cat(ids, 1), "position_ids": torch.cat(pos, 1)}
    tgt = _batch(target)
    if tgt.shape != src.shape:
        raise ValueError(f"source {tuple(src.shape)} and target {tuple(tgt.shape)} must have one shape")
    ids.append(tgt + offset)
    pos.append(_ar(T, 0, B))
    input_ids = torch.cat(ids, 1)
    labels = torch.full_like(input_ids, IGNORE)
    labels[:, T + 1 :] = input_ids[:, T + 1 :]
    return {"input_ids": input_ids, "position_ids": torch.cat(pos, 1), "labels": labels}


def build_n2s(noisy_sem: torch.Tensor, clean_sem: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The N2S sequence (noisy semantic -> clean semantic).

    Example:
        >>> out = build_n2s(torch.tensor([5, 6]), torch.tensor([7, 8]))
        >>> out["input_ids"].tolist(), out["position_ids"].tolist(), out["labels"].tolist()
        ([[8, 9, 1, 10, 11]], [[0, 1, 2, 0, 1]], [[-100, -100, -100, 10, 11]])
    """
    return build_pair(noisy_sem, clean_sem, offset=N_SPECIAL)


def build_s2s(
    noisy_sem: torch.Tensor,
    clean_sem: torch.Tensor,
    noisy_ac: torch.Tensor | None,
    clean_ac: torch.Tensor | None = None,
    *,
    n_semantic: int,
    gen_offset: int = 1000,
) -> dict[str, torch.Tensor]:
    """The S2S sequence with token-chain prompting (``noisy_ac=None``: no chain).

    Args:
        noisy_sem, clean_sem: [B, T_s] semantic ids in [0, K_sem).
        noisy_ac: [B, T_a] acoustic ids of the noisy input (the timbre prompt), or None.
        clean_ac: [B, T_a] target acoustic ids (training), or None (inference prompt).
        n_semantic: K_sem (acoustic ids are shifted by 3 + K_sem).
        gen_offset: position of clean acoustic token 0.

    Example:
        >>> o = build_s2s(torch.tensor([0]), torch.tensor([1]), torch.tensor([0, 1]), torch.tensor([2, 3]),
        ...               n_semantic=4, gen_offset=1000)
        >>> o["input_ids"].tolist(), o["position_ids"].tolist()
        ([[3, 4, 1, 7, 8, 9, 10]], [[0, 1, 2, 0, 1, 1000, 1001]])
    """
    ns, cs = _batch(noisy_sem), _batch(clean_sem)
    if ns.shape != cs.shape:
        raise ValueError("noisy_sem and clean_sem must have one shape")
    B, Ts = ns.shape
    ac_off = N_SPECIAL + n_semantic
    ids = [ns + N_SPECIAL, cs + N_SPECIAL, torch.full((B, 1), BOS)]
    pos = [_ar(2 * Ts + 1, 0, B)]
    if noisy_ac is not None:
        na = _batch(noisy_ac)
        if na.shape != (B, 2 * Ts):
            raise ValueError(
                f"noisy_ac must be [B, 2 T_s] = {(B, 2 * Ts)}, got {tuple(na.shape)} (T_a = 2 T_s)"
            )
        ids.append(na + ac_off)
        pos.append(_ar(2 * Ts, 0, B))
    if clean_ac is None:
        return {"input_ids": torch.cat(ids, 1), "position_ids": torch.cat(pos, 1)}
    ca = _batch(clean_ac)
    if ca.shape != (B, 2 * Ts):
        raise ValueError(f"clean_ac must be [B, 2 T_s] = {(B, 2 * Ts)}, got {tuple(ca.shape)}")
    n_prompt = sum(x.shape[1] for x in ids)
    ids.append(ca + ac_off)
    pos.append(_ar(2 * Ts, gen_offset, B))
    input_ids = torch.cat(ids, 1)
    labels = torch.full_like(input_ids, IGNORE)
    labels[:, n_prompt:] = input_ids[:, n_prompt:]
    return {"input_ids": input_ids, "position_ids": torch.cat(pos, 1), "labels": labels}


class RangeMask(LogitsProcessor):
    """Sets every logit outside ``[lo, hi)`` to -inf (specials and the other vocabulary).

    Example:
        >>> RangeMask(1, 3)(torch.zeros(1, 1, dtype=torch.long), torch.zeros(1, 4)).tolist()
        [[-inf, 0.0, 0.0, -inf]]
    """

    def __init__(self, lo: int, hi: int) -> None:
        if not 0 <= lo < hi:
            raise ValueError(f"need 0 <= lo < hi, got lo={lo}, hi={hi}")
        self.lo, self.hi = lo, hi

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        out = torch.full_like(scores, float("-inf"))
        out[:, self.lo : self.hi] = scores[:, self.lo : self.hi]
        return out
