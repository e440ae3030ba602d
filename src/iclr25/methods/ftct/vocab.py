"""The FTCT vocabulary: one token per letter, per value, per context word and per punctuation mark.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements the token set of
Section 3.1: vertex letters, integer values, ``context_div`` private context tokens per letter,
and the punctuation ``=``, ``,``, ``?:`` and newline. Every value is a single token (the
official code keeps only the first GPT-2 sub-token of a number; here nothing is truncated).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from iclr25.common.tiny_lm import build_word_tokenizer, load_tokenizer
from iclr25.methods.ftct.graph import LETTERS

__all__ = ["FTCTTokenizer"]

EQ, COMMA, QUESTION, NEWLINE = "=", ",", "?:", "<nl>"


class FTCTTokenizer:
    """Word-level tokenizer over letters, values ``0..modulus-1``, context tokens and punctuation.

    Context tokens of letter ``X`` are named ``X~0 .. X~{context_div-1}``. Encoding a word or
    value outside the vocabulary raises (it never maps to ``<unk>`` silently).

    Args:
        n_letters: vertex alphabet size (A-Z, then a-z).
        modulus: values are ``0 .. modulus-1``.
        context_div: context tokens per letter.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 3.1.

    Example:
        >>> tok = FTCTTokenizer(n_letters=3, modulus=10, context_div=2)
        >>> ids = tok.encode(["A", "=", "7", ","])
        >>> tok.decode(ids)
        ['A', '=', '7', ',']
        >>> tok.pretty(tok.encode(["B~1", "B", "=", "3", "<nl>"]))
        'B~1 B = 3\\n'
    """

    def __init__(self, n_letters: int, modulus: int, context_div: int) -> None:
        if not 1 <= n_letters <= len(LETTERS):
            raise ValueError(f"n_letters must be in [1, {len(LETTERS)}], got {n_letters}")
        if modulus < 1 or context_div < 0:
            raise ValueError("modulus must be >= 1 and context_div >= 0")
        self.n_letters = n_letters
        self.modulus = modulus
        self.context_div = context_div
        self.letters: tuple[str, ...] = LETTERS[:n_letters]
        words = [EQ, COMMA, QUESTION, NEWLINE, *self.letters, *(str(v) for v in range(modulus))]
        words += [f"{x}~{j}" for x in self.letters for j in range(context_div)]
        self.hf = build_word_tokenizer(words)
        self._index: dict[str, int] = dict(self.hf.get_vocab())
        self._words: dict[int, str] = {i: w for w, i in self._index.items()}
        self.pad_id = self._index["<pad>"]
        self.eos_id = self._index["<eos>"]
        self.eq_id = self._index[EQ]
        self.comma_id = self._index[COMMA]
        self.question_id = self._index[QUESTION]
        self.newline_id = self._index[NEWLINE]
        self._letter_of = {self._index[x]: x for x in self.letters}
        self._value_of = {self._index[str(v)]: v for v in range(modulus)}
        self._contexts = {x: tuple(self._index[f"{x}~{j}"] for j in range(context_div)) for x in self.letters}
        self._context_owner = {self._index[f"{x}~{j}"]: x for x in self.letters for j in range(context_div)}

    def __len__(self) -> int:
        return len(self._index)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike[str]) -> FTCTTokenizer:
        """Rebuild from a folder written by :meth:`save_pretrained` (local files only)."""
        vocab = load_tokenizer(path).get_vocab()
        n_letters = sum(1 for x in LETTERS if x in vocab)
        modulus = sum(1 for w in vocab if w.isdigit())
        context_div = sum(1 for w in vocab if w.startswith("A~"))
        tok = cls(n_letters=n_letters, modulus=modulus, context_div=context_div)
        if tok._index != dict(vocab):
            raise ValueError(f"tokenizer at {str(path)!r} is not an FTCT vocabulary")
        return tok

    def save_pretrained(self, path: str | os.PathLike[str]) -> None:
        """Write the tokenizer to a local folder (``save_pretrained`` of the wrapped tokenizer)."""
        self.hf.save_pretrained(path)

    def token_id(self, word: str) -> int:
        """The id of one word; raises ``ValueError`` if it is not in the vocabulary."""
        if word not in self._index:
            raise ValueError(f"{word!r} is not in the FTCT vocabulary")
        return self._index[word]

    def value_id(self, value: int) -> int:
        """The single token of a value; raises ``ValueError`` outside ``0..modulus-1``."""
        if not 0 <= int(value) < self.modulus:
            raise ValueError(f"value {value} is outside the vocabulary (0..{self.modulus - 1})")
        return self._index[str(int(value))]

    def letter_id(self, letter: str) -> int:
        """The token of a vertex letter."""
        if letter not in self.letters:
            raise ValueError(f"letter {letter!r} is not in the vocabulary")
        return self._index[letter]

    def context_ids(self, letter: str) -> tuple[int, ...]:
        """The private context tokens of ``letter``."""
        if letter not in self._contexts:
            raise ValueError(f"letter {letter!r} is not in the vocabulary")
        return self._contexts[letter]

    def encode(self, words: Iterable[str | int]) -> list[int]:
        """Ids of words (ints are values). Raises ``ValueError`` on anything outside the vocabulary."""
        return [self.value_id(w) if isinstance(w, int) else self.token_id(w) for w in words]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Words of ids (one per id)."""
        out = []
        for i in ids:
            if int(i) not in self._words:
                raise ValueError(f"id {i} is not in the vocabulary")
            out.append(self._words[int(i)])
        return out

    def pretty(self, ids: Sequence[int]) -> str:
        """Readable text: words joined by spaces, ``<nl>`` as a line break, padding dropped."""
        words = [w for w in self.decode(ids) if w != "<pad>"]
        return " ".join(words).replace(" <nl> ", "\n").replace("<nl> ", "\n").replace(" <nl>", "\n")

    def is_letter(self, i: int) -> bool:
        """Whether id ``i`` is a vertex letter."""
        return int(i) in self._letter_of

    def letter_of(self, i: int) -> str:
        """The letter of id ``i``."""
        return self._letter_of[int(i)]

    def is_value(self, i: int) -> bool:
        """Whether id ``i`` is a value."""
        return int(i) in self._value_of

    def value_of(self, i: int) -> int:
        """The integer value of id ``i``."""
        return self._value_of[int(i)]

    def context_owner(self, i: int) -> str | None:
        """The letter owning context token ``i``, or None if ``i`` is not a context token."""
        return self._context_owner.get(int(i))
