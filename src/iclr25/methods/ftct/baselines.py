"""Baselines of FTCT: a windowed MLP next-token predictor.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements the multi-layer
perceptron baseline of Section 4 (the model-size/architecture ablation): the one-hot codes of
the last ``w`` tokens pass through Linear + BatchNorm + ReLU blocks to next-token logits. It
sees no tokens beyond its window, so it cannot copy a vertex order from earlier shots.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["WindowedMLP"]


class WindowedMLP(nn.Module):
    """Next-token MLP over a window of the last ``window`` tokens.

    The first layer acts on the concatenated one-hot codes of the window, written as a sum of
    per-offset embeddings (the same linear map without materialising one-hot vectors). Padding
    (``attention_mask == 0``) and positions before the start contribute zero.

    Args:
        vocab_size: vocabulary size V.
        window: tokens seen, w.
        hidden: width of each block.
        n_blocks: Linear + BatchNorm + ReLU blocks.
        seed: initialisation seed.

    Shape:
        input_ids: ``(B, T)``; returns logits ``(B, T, V)``.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> mlp = WindowedMLP(vocab_size=10, window=3, hidden=8, n_blocks=1, seed=0).eval()
        >>> mlp(torch.tensor([[1, 2, 3, 4]])).shape
        torch.Size([1, 4, 10])
    """

    def __init__(
        self, vocab_size: int, *, window: int = 8, hidden: int = 256, n_blocks: int = 2, seed: int = 0
    ):
        super().__init__()
        if min(vocab_size, window, hidden, n_blocks) < 1:
            raise ValueError("vocab_size, window, hidden and n_blocks must be >= 1")
        self.vocab_size = vocab_size
        self.window = window
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            # one-hot (w*V) -> hidden, as embeddings of (offset, token); last row = absent token
            self.first = nn.Embedding(window * vocab_size + 1, hidden, padding_idx=window * vocab_size)
            self.bias = nn.Parameter(torch.zeros(hidden))
            self.norm0 = nn.BatchNorm1d(hidden)
            blocks = []
            for _ in range(n_blocks - 1):
                blocks += [nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU()]
            self.blocks = nn.Sequential(*blocks)
            self.head = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Logits of the next token at every position."""
        b, t = input_ids.shape
        absent = self.window * self.vocab_size
        ids = input_ids if attention_mask is None else input_ids.masked_fill(attention_mask == 0, -1)
        padded = torch.cat([ids.new_full((b, self.window - 1), -1), ids], dim=1)  # (B, T+w-1)
        win = padded.unfold(1, self.window, 1)  # (B, T, w): tokens t-w+1 .. t
        offsets = torch.arange(self.window, device=ids.device) * self.vocab_size  # (w,)
        codes = torch.where(win >= 0, win + offsets, torch.full_like(win, absent))  # (B, T, w)
        h = self.first(codes).sum(2) + self.bias  # (B, T, hidden)
        h = h.reshape(b * t, -1)  # (B*T, hidden)
        h = self.blocks(torch.relu(self.norm0(h)))
        return self.head(h).reshape(b, t, self.vocab_size)  # (B, T, V)
