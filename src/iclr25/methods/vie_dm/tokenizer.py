"""Word-level tokenizer of referring expressions (pad / bos / eos / unk), with an optional local HF one.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (expressions are token
    sequences of a fixed length L; the paper scale uses a BERT wordpiece tokenizer).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

__all__ = ["ExpressionTokenizer", "HFExpressionTokenizer"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"


def _pack(rows: Sequence[list[int]], length: int, *, pad: int, bos: int | None, eos: int) -> Tensor:
    """``[bos] ids eos pad ..`` per row, shape (len(rows), length); the ids are cut to fit."""
    out = torch.full((len(rows), length), pad, dtype=torch.long)
    head = [] if bos is None else [bos]
    for i, ids in enumerate(rows):
        row = head + ids[: length - 1 - len(head)] + [eos]
        out[i, : len(row)] = torch.tensor(row)
    return out


def _cut(ids: Tensor, *, bos: int, stops: tuple[int, ...]) -> list[list[int]]:
    """Each row's ids with bos skipped, up to the first of ``stops`` (eos, pad)."""
    out = []
    for row in ids.tolist():
        keep: list[int] = []
        for t in row:
            if t == bos:
                continue
            if t in stops:
                break
            keep.append(t)
        out.append(keep)
    return out


class ExpressionTokenizer:
    """Lower-cased whitespace tokens; ids 0-3 are pad, bos, eos and unk.

    Args:
        words: the vocabulary (order kept, duplicates dropped).

    Example:
        >>> tok = ExpressionTokenizer(["the", "red", "circle"])
        >>> tok.encode(["the red circle"], length=5).tolist()
        [[4, 5, 6, 2, 0]]
        >>> tok.decode(tok.encode(["the red circle"], length=5))
        ['the red circle']
    """

    def __init__(self, words: Iterable[str]) -> None:
        self.itos: list[str] = [PAD, BOS, EOS, UNK]
        for w in words:
            w = w.lower()
            if w not in self.itos:
                self.itos.append(w)
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3

    @classmethod
    def from_corpus(cls, sentences: Iterable[str]) -> ExpressionTokenizer:
        """A tokenizer over every word of ``sentences`` (sorted, so the ids do not depend on order)."""
        return cls(sorted({w for s in sentences for w in s.lower().split()}))

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, sentences: Sequence[str], *, length: int, bos: bool = False) -> Tensor:
        """Ids ``[bos] w_1 .. w_n eos pad ..`` of shape (len(sentences), length), truncated to fit.

        Truncation keeps the first words and always ends with eos. Unknown words map to unk.
        """
        if length < 2 + int(bos):
            raise ValueError(f"length must be at least {2 + int(bos)}, got {length}")
        rows = [[self.stoi.get(w, self.unk_id) for w in s.lower().split()] for s in sentences]
        return _pack(rows, length, pad=self.pad_id, bos=self.bos_id if bos else None, eos=self.eos_id)

    def decode(self, ids: Tensor) -> list[str]:
        """Sentences from ids (batch, L): bos skipped, cut at the first eos or pad."""
        rows = _cut(ids, bos=self.bos_id, stops=(self.eos_id, self.pad_id))
        return [" ".join(self.itos[t] if 0 <= t < len(self.itos) else UNK for t in row) for row in rows]


class HFExpressionTokenizer:
    """The same interface over a local Hugging Face tokenizer folder (e.g. BERT wordpiece).

    Args:
        path: a local folder holding the tokenizer files; nothing is downloaded.
    """

    def __init__(self, path: str) -> None:
        import os

        if not os.path.isdir(path):
            raise ValueError(f"tokenizer folder {path!r} does not exist")
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.pad_id = int(self.tok.pad_token_id or 0)
        self.bos_id = int(self.tok.cls_token_id if self.tok.cls_token_id is not None else self.pad_id)
        self.eos_id = int(self.tok.sep_token_id if self.tok.sep_token_id is not None else self.pad_id)
        self.unk_id = int(self.tok.unk_token_id or 0)

    def __len__(self) -> int:
        return len(self.tok)

    def encode(self, sentences: Sequence[str], *, length: int, bos: bool = False) -> Tensor:
        """Ids of shape (len(sentences), length) ending with eos, padded."""
        rows = [self.tok.encode(s, add_special_tokens=False) for s in sentences]
        return _pack(rows, length, pad=self.pad_id, bos=self.bos_id if bos else None, eos=self.eos_id)

    def decode(self, ids: Tensor) -> list[str]:
        """Sentences, cut at the first eos or pad."""
        return [self.tok.decode(row) for row in _cut(ids, bos=self.bos_id, stops=(self.eos_id, self.pad_id))]
