"""Alphabets, sequence encoding, FASTA/a3m I/O, MSA subsampling and padding for InvMSAFold.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Luca Alessandro Silva, Barthelemy
Meynard-Piganeau, Carlo Lucibello, Christoph Feinauer, ICLR 2025, arXiv:2406.11975. Sec. 3 (data):
MSA rows are drawn uniformly with replacement, without reweighting, fresh at every step; the gap is
a real Potts state (q = 21) for proteins, and unknown residues (B, J, O, U, X, Z) are read as gaps,
as in the official code. The lattice world uses the 20 amino acids (q = 20).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from torch import Tensor

from iclr25.common import rng

__all__ = [
    "LATTICE_ALPHABET",
    "PROTEIN_ALPHABET",
    "UNKNOWN_RESIDUES",
    "decode",
    "encode",
    "pad_batch",
    "read_a3m",
    "read_fasta",
    "subsample_rows",
    "write_fasta",
]

#: Protein alphabet with the gap first (q = 21), the paper's convention for MSAs. The official code
#: orders the same states ``ACDEFGHIKLMNPQRSTVWY-`` (gap last): permute the states to load its weights.
PROTEIN_ALPHABET = "-ACDEFGHIKLMNPQRSTVWY"
#: The 20 amino acids (q = 20), used by the lattice world (no gaps occur there).
LATTICE_ALPHABET = "ACDEFGHIKLMNPQRSTVWY"
#: IUPAC codes for ambiguous or non-standard residues (Asx, Xle, pyrrolysine, selenocysteine, any,
#: Glx); :func:`encode` maps them to the gap, as the official code maps every unknown letter.
UNKNOWN_RESIDUES = "BJOUXZ"


def encode(seqs: Iterable[str], alphabet: str, *, length: int | None = None) -> Tensor:
    """Map equal-length strings to integer tokens.

    Unknown residues, the IUPAC codes :data:`UNKNOWN_RESIDUES` (B, J, O, U, X, Z), become the gap
    when the alphabet has one ('-'), as the official code does: its MSA reader maps every letter
    outside ``ACDEFGHIKLMNPQRSTVWY-`` to the gap (``util/ioutils.py``, ``read_fasta``). Anything
    else outside the alphabet (digits, punctuation, '.', lower-case a3m insertions, or an unknown
    residue when the alphabet has no gap) raises.

    Args:
        seqs: sequences (upper case letters of ``alphabet``, or unknown residues).
        alphabet: the state letters; token ``a`` is ``alphabet[a]``.
        length: if given, every sequence must have this length (e.g. the structure's L).

    Returns:
        ``[N, L]`` long tensor.

    Raises:
        ValueError: a character that is neither in the alphabet nor an unknown residue that maps to
            the gap (the message names the character, its row and position), unequal lengths, or a
            length mismatch.

    Example:
        >>> encode(["AC", "CA"], "ACD").tolist()
        [[0, 1], [1, 0]]
        >>> encode(["AXC"], PROTEIN_ALPHABET).tolist()  # X -> gap (token 0)
        [[1, 0, 2]]
    """
    lookup = {c: i for i, c in enumerate(alphabet)}
    if "-" in lookup:
        lookup.update({c: lookup["-"] for c in UNKNOWN_RESIDUES if c not in lookup})
    rows = list(seqs)
    if not rows:
        raise ValueError("no sequences to encode")
    want = len(rows[0]) if length is None else length
    out = np.empty((len(rows), want), dtype=np.int64)
    for n, s in enumerate(rows):
        if len(s) != want:
            raise ValueError(f"sequence {n} has length {len(s)}, expected {want} (the structure's length)")
        try:
            out[n] = [lookup[c] for c in s]
        except KeyError as err:
            raise ValueError(_bad_letter(err.args[0], n, s, alphabet)) from None
    return torch.from_numpy(out)


def _bad_letter(c: str, row: int, seq: str, alphabet: str) -> str:
    """The error message for a character ``encode`` cannot map."""
    where = f"row {row}, position {seq.index(c)}: character {c!r} is outside the alphabet {alphabet!r}"
    if c in UNKNOWN_RESIDUES:
        return f"{where}; unknown residues map to the gap '-', which this alphabet lacks"
    if c.islower() or c == ".":
        return f"{where}; a3m insertions (lower case, '.') are dropped by read_a3m"
    return where


def decode(tokens: Tensor | np.ndarray, alphabet: str) -> list[str]:
    """Map ``[N, L]`` tokens (a tensor on any device, or an array) back to strings.

    Example:
        >>> decode(torch.tensor([[0, 2]]), "ACD")
        ['AD']
    """
    arr = tokens.detach().cpu().numpy() if isinstance(tokens, Tensor) else np.asarray(tokens)
    if arr.size and (arr.min() < 0 or arr.max() >= len(alphabet)):
        raise ValueError(f"tokens must lie in [0, {len(alphabet)})")
    return ["".join(alphabet[a] for a in row) for row in arr.tolist()]


def read_fasta(path: str | Path) -> list[tuple[str, str]]:
    """Read ``(header, sequence)`` records from a FASTA file (multi-line sequences joined).

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.fasta")
        >>> write_fasta(p, ["AC"], names=["a"])
        >>> read_fasta(p)
        [('a', 'AC')]
    """
    records: list[tuple[str, str]] = []
    name, chunks = None, []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith(">"):
            if name is not None:
                records.append((name, "".join(chunks)))
            name, chunks = line[1:].strip(), []
        else:
            if name is None:
                raise ValueError(f"{path}: sequence data before the first '>' header")
            chunks.append(line)
    if name is not None:
        records.append((name, "".join(chunks)))
    return records


def read_a3m(path: str | Path) -> list[str]:
    """Read an a3m alignment as match-state rows (lower-case insertions and '.' removed).

    Letters are kept as written (an ``X`` stays ``X``); :func:`encode` maps unknown residues to the
    gap and rejects anything else outside the alphabet.

    Returns:
        Aligned rows of equal length (the query's length), upper case, gaps as '-'.

    Example:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.a3m")
        >>> _ = Path(p).write_text(">q\\nACD\\n>h\\nAkX-\\n")
        >>> read_a3m(p)
        ['ACD', 'AX-']
    """
    rows = ["".join(c for c in s if not (c.islower() or c == ".")) for _, s in read_fasta(path)]
    if rows and any(len(r) != len(rows[0]) for r in rows):
        raise ValueError(f"{path}: a3m match-state rows have unequal lengths")
    return rows


def write_fasta(path: str | Path, seqs: Sequence[str], *, names: Sequence[str] | None = None) -> None:
    """Write sequences as FASTA (one line per sequence; names default to ``sample_<n>``)."""
    if names is not None and len(names) != len(seqs):
        raise ValueError(f"{len(names)} names for {len(seqs)} sequences")
    names = names if names is not None else [f"sample_{n}" for n in range(len(seqs))]
    Path(path).write_text("".join(f">{h}\n{s}\n" for h, s in zip(names, seqs, strict=True)))


def _safetensors_torch() -> ModuleType:
    """``safetensors.torch``, imported on first use, with a clear error if it is missing."""
    try:
        return importlib.import_module("safetensors.torch")
    except ImportError:
        raise ImportError(
            "safetensors files need the 'safetensors' package: pip install 'iclr25[invmsafold]' "
            "(or pip install safetensors)"
        ) from None


def subsample_rows(msa: Tensor, m: int, generator: torch.Generator) -> Tensor:
    """Draw ``m`` MSA rows uniformly with replacement (no reweighting), as in the paper's training.

    The row indices are drawn on the generator's device and moved to the MSA's.

    Shape:
        ``msa [N, L] -> [m, L]``.
    """
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    idx = rng.randint(0, msa.shape[0], (m,), generator=generator, device=msa.device)
    return msa[idx]


def pad_batch(
    items: Sequence[Tensor], length: int | None = None, value: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Right-pad a list of ``[L_b, ...]`` tensors to a common length.

    Returns:
        ``(padded [B, L_max, ...], padding_mask [B, L_max])`` with ``True`` at padded positions,
        both on the first item's device.

    Example:
        >>> x, m = pad_batch([torch.ones(2, 3), torch.ones(1, 3)])
        >>> x.shape, m.tolist()
        (torch.Size([2, 2, 3]), [[False, False], [False, True]])
    """
    lmax = max(int(t.shape[0]) for t in items) if length is None else length
    dev = items[0].device
    out = torch.full((len(items), lmax, *items[0].shape[1:]), value, dtype=items[0].dtype, device=dev)
    mask = torch.ones(len(items), lmax, dtype=torch.bool, device=dev)
    for b, t in enumerate(items):
        if t.shape[0] > lmax:
            raise ValueError(f"item {b} has length {t.shape[0]} > {lmax}")
        out[b, : t.shape[0]] = t
        mask[b, : t.shape[0]] = False
    return out, mask
