"""Analytic key/value-memory and attention-score counts of Activation Beacon vs full attention.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3.1 and the efficiency
analysis (an α-fold smaller KV cache; attention cost per chunk over memory + chunk).
"""

from __future__ import annotations

from iclr25.methods.activation_beacon.layout import chunk_layout, chunk_visibility

__all__ = ["beacon_kv_peak", "beacon_kv_resident", "beacon_score_entries", "full_score_entries"]


def _check(length: int, window: int, alpha: int, sink: int) -> None:
    if length < 0 or window <= 0 or alpha <= 0 or sink < 0:
        raise ValueError("need length >= 0, window > 0, alpha > 0, sink >= 0")
    if window % alpha:
        raise ValueError(f"alpha={alpha} must divide window={window}")


def beacon_kv_resident(length: int, window: int, alpha: int, sink: int = 1) -> int:
    """Key/value entries per layer held after reading ``length`` tokens (every full window compressed).

    resident = sink + ⌊L/w⌋·w/α + (L mod w) once a window was compressed, else L.

    Example:
        >>> beacon_kv_resident(4096, 64, 8, 1)
        513
    """
    _check(length, window, alpha, sink)
    n_full = length // window
    if n_full == 0:
        return length
    return min(sink, window) + n_full * (window // alpha) + length % window


def beacon_kv_peak(length: int, window: int, alpha: int, sink: int = 1) -> int:
    """Largest key/value length of any chunk forward while reading ``length`` tokens.

    Chunk n (full) sees memory sink + (n−1)·w/α (none for n = 1) plus its w + w/α items.

    Example:
        >>> beacon_kv_peak(4096, 64, 8, 1)
        577
    """
    _check(length, window, alpha, sink)
    n_full, rest = divmod(length, window)
    per = window // alpha
    peak = 0
    if n_full:
        mem_last = 0 if n_full == 1 else min(sink, window) + (n_full - 1) * per
        peak = mem_last + window + per
    if rest:
        mem = 0 if n_full == 0 else min(sink, window) + n_full * per
        peak = max(peak, mem + rest)
    return peak


def full_score_entries(length: int) -> int:
    """Causal attention-score entries of full attention: L(L+1)/2.

    Example:
        >>> full_score_entries(4096)
        8390656
    """
    return length * (length + 1) // 2


def beacon_score_entries(
    length: int, window: int, alpha: int, sink: int = 1, mode: str = "full-coverage"
) -> int:
    """Attention-score entries (visible query-key pairs) of the beacon pass, per head and layer.

    Full coverage: chunk with T items over memory M costs T·M + T(T+1)/2.

    Example:
        >>> beacon_score_entries(4096, 64, 8, 1)
        1333944
    """
    _check(length, window, alpha, sink)
    n_full, rest = divmod(length, window)
    per = window // alpha
    total = 0
    mem = 0
    for n in range(n_full + (1 if rest else 0)):
        full = n < n_full
        t = window + per if full else rest
        if mode == "full-coverage":
            total += t * mem + t * (t + 1) // 2
        else:
            lay = chunk_layout(window if full else rest, alpha if full else 0)
            total += int(chunk_visibility(lay, mem, mode).sum())
        mem = (min(sink, window) if n == 0 else mem) + per if full else mem + t
    return total
