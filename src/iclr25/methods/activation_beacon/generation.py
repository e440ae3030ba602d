"""Decoding state of Activation Beacon for Hugging Face ``generate``: one beacon memory per row group.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Section 3.1 (the context is
compressed chunk by chunk from the first token of a sequence on) and the generation path
(decoded tokens stay raw until they fill a window, which is then re-read with beacons).

Chunk boundaries count from each sequence's first real token, so rows of a left-padded batch with
different lengths cannot share one chunk grid. Rows of equal length form a group that is read
as one batch over its own memory; the padding itself is never read.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache

from iclr25.methods.activation_beacon.memory import BeaconMemory

__all__ = ["BeaconGenerationCache", "RowGroup", "left_padding"]


@dataclass
class RowGroup:
    """Rows of a batch that have the same number of left-padding tokens, read together.

    Attributes:
        rows: (b,) indices of the rows in the batch.
        pad: left-padding tokens of these rows (never read).
        memory: their beacon memory (sink, beacons of compressed windows, raw tail).
        tail: (b, n) raw tokens read since the last compressed window, n < window.
        fixed: memory entries before the tail's raw key/values.
        seen: real tokens read so far (padding excluded).
    """

    rows: torch.Tensor
    pad: int
    memory: BeaconMemory
    tail: torch.Tensor
    fixed: int
    seen: int


class BeaconGenerationCache(Cache):
    """The ``cache`` object that :class:`BeaconModel` returns and ``generate`` passes back.

    It holds one :class:`RowGroup` per distinct prompt length of the batch, each with its own
    beacon memory, and the number of input columns (padding included) read so far, which is what
    ``get_seq_length`` reports so that ``generate`` feeds only the new tokens. Beam search and
    rewinding are not supported (the compressed memory cannot be cropped back).

    Example:
        >>> cache = BeaconGenerationCache()
        >>> cache.get_seq_length(), cache.groups
        (0, [])
    """

    def __init__(self) -> None:
        super().__init__(layers=[])
        self.groups: list[RowGroup] = []
        self.length = 0
        self.batch = 0

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Input columns read so far (prompt padding included)."""
        return self.length

    def get_max_length(self, layer_idx: int | None = None) -> int:
        """No maximum (-1)."""
        return -1

    @property
    def is_linear(self) -> list[bool]:
        """One attention-style entry, so ``generate`` slices the inputs by ``get_seq_length``."""
        return [False]

    @property
    def is_compileable(self) -> bool:
        """Never compiled: the memory changes shape when a window is compressed."""
        return False

    @property
    def is_croppable(self) -> bool:
        """Compressed memory cannot be rolled back."""
        return False

    def reset(self) -> None:
        """Forget every group."""
        self.groups = []
        self.length = 0
        self.batch = 0

    def crop(self, tokens_to_remove: int) -> None:
        raise ValueError("a beacon memory cannot be cropped: compressed windows cannot be rolled back")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise ValueError("beam search is not supported with beacon memory; use greedy decoding or sampling")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise ValueError("expanding a beacon memory is not supported; expand the inputs before reading them")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        raise ValueError("selecting rows of a beacon memory is not supported")


def left_padding(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> torch.Tensor:
    """Left-padding length of each row, after checking that the mask is zeros then ones.

    Args:
        attention_mask: (B, L) 0/1 mask, or None (no padding).
        input_ids: (B, L) token ids.

    Returns:
        (B,) long tensor: the number of leading zeros of each row.

    Raises:
        ValueError: the mask has the wrong shape, values other than 0/1, zeros after a one (right
            padding or holes), or a row with no token.

    Example:
        >>> left_padding(torch.tensor([[0, 1, 1], [1, 1, 1]]), torch.zeros(2, 3, dtype=torch.long)).tolist()
        [1, 0]
    """
    b, length = input_ids.shape
    if attention_mask is None:
        return torch.zeros(b, dtype=torch.long, device=input_ids.device)
    if attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"attention_mask has shape {tuple(attention_mask.shape)}, expected {tuple(input_ids.shape)}"
        )
    mask = attention_mask.to(torch.long)
    if bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError("attention_mask must hold only 0 and 1")
    if length > 1 and bool((mask[:, 1:] < mask[:, :-1]).any()):
        raise ValueError(
            "only left padding is supported: each attention_mask row must be zeros then ones "
            "(padding on the right or inside a sequence would fall inside compressed chunks)"
        )
    pads = length - mask.sum(1)
    if bool((pads == length).any()):
        raise ValueError("a row of attention_mask is all zeros (a sequence without tokens)")
    return pads
