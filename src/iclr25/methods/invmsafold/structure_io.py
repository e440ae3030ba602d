"""MSA files to token tensors, and Cα contact maps from PDB files, for CATH-like domains.

*Fast Uncovering of Protein Sequence Diversity from Structure*, Luca Alessandro Silva, Barthelemy
Meynard-Piganeau, Carlo Lucibello, Christoph Feinauer, ICLR 2025, arXiv:2406.11975. The paper
trains on CATH domains, each with a structure and an MSA of its homologues. :func:`load_msa` turns
one MSA file into the ``[N, L]`` token tensor :func:`~iclr25.methods.invmsafold.train_invmsafold`
takes; :func:`read_ca_coords` and :func:`ca_contact_map` read the domain's Cα trace and its
contacts (for evaluation or for structure-aware diagnostics; the encoders read structures
themselves).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from torch import Tensor

from .data import PROTEIN_ALPHABET, encode, read_a3m, read_fasta

__all__ = ["THREE_TO_ONE", "ca_contact_map", "load_msa", "read_ca_coords"]

#: File suffixes read as a3m, and as aligned FASTA (A2M included).
_A3M = (".a3m",)
_FASTA = (".fasta", ".fa", ".faa", ".afa", ".aln", ".a2m", ".fas")

#: The 20 standard residues' three-letter codes; any other residue name reads as 'X'.
THREE_TO_ONE = {
    "ALA": "A", "ARG": "R", "ASN": "N", "ASP": "D", "CYS": "C", "GLN": "Q", "GLU": "E", "GLY": "G",
    "HIS": "H", "ILE": "I", "LEU": "L", "LYS": "K", "MET": "M", "PHE": "F", "PRO": "P", "SER": "S",
    "THR": "T", "TRP": "W", "TYR": "Y", "VAL": "V",
}  # fmt: skip


def load_msa(
    path: str | os.PathLike[str],
    alphabet: str = PROTEIN_ALPHABET,
    *,
    fmt: str | None = None,
    length: int | None = None,
) -> Tensor:
    """Read an MSA file into the ``[N, L]`` long tensor of tokens over ``alphabet``.

    Formats:

    - ``"a3m"``: rows may differ in length; lower-case letters (insertions) and '.' are dropped,
      leaving the query's match columns.
    - ``"fasta"`` (aligned FASTA, A2M included): every row must have the same length as written;
      lower-case letters and '.' (A2M insert columns) are then dropped as in a3m, so an A2M file and
      its a3m give the same tensor. Write upper case for columns that should stay.

    In both, '-' is the gap state, the IUPAC unknown residues (B, J, O, U, X, Z) become the gap as
    in the official reader (see :func:`~iclr25.methods.invmsafold.encode`), and any other
    character raises. The first row is the query.

    Args:
        path: the file.
        alphabet: the state letters (default :data:`PROTEIN_ALPHABET`, gap first, q = 21).
        fmt: ``"a3m"`` or ``"fasta"``; by default from the suffix (``.a3m``; ``.fasta``, ``.fa``,
            ``.faa``, ``.afa``, ``.aln``, ``.a2m``, ``.fas``).
        length: if given, the match-column count the MSA must have (the structure's length).

    Returns:
        ``[N, L]`` long tensor.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: an unknown suffix or ``fmt``, no sequences, unequal aligned-FASTA rows, no
            match column left, a wrong ``length``, or a character outside the alphabet (named
            with its row and position).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"MSA file {str(p)!r} does not exist")
    if fmt is None:
        suffix = p.suffix.lower()
        fmt = "a3m" if suffix in _A3M else "fasta" if suffix in _FASTA else None
        if fmt is None:
            raise ValueError(f"{p}: unknown MSA suffix {suffix!r}; pass fmt='a3m' or fmt='fasta'")
    if fmt == "a3m":
        rows = read_a3m(p)
    elif fmt == "fasta":
        raw = [s for _, s in read_fasta(p)]
        bad = next((i for i, s in enumerate(raw) if len(s) != len(raw[0])), None)
        if bad is not None:
            raise ValueError(
                f"{p}: aligned FASTA row {bad} has {len(raw[bad])} columns, row 0 has {len(raw[0])} "
                "(for an a3m file pass fmt='a3m')"
            )
        rows = ["".join(c for c in s if not (c.islower() or c == ".")) for s in raw]
    else:
        raise ValueError(f"fmt must be 'a3m' or 'fasta', got {fmt!r}")
    if not rows:
        raise ValueError(f"{p}: no sequences")
    if not rows[0]:
        raise ValueError(f"{p}: no match column (every column is lower case or '.')")
    if length is not None and len(rows[0]) != length:
        raise ValueError(f"{p}: the MSA has {len(rows[0])} match columns, the structure {length}")
    try:
        return encode(rows, alphabet)
    except ValueError as err:
        raise ValueError(f"{p}: {err}") from None


def read_ca_coords(path: str | os.PathLike[str], chain: str | None = None) -> tuple[np.ndarray, str]:
    """Read the Cα trace of one chain from a PDB-format file (fixed columns).

    Only ``ATOM`` records of the first model are read (up to the first ``ENDMDL``); of alternate
    locations, the first one listed for a residue is kept; residues are identified by residue
    number and insertion code, in file order.

    Args:
        path: the ``.pdb`` file.
        chain: the chain identifier; by default the chain of the first Cα atom.

    Returns:
        ``(coords [L, 3] float64 in Å, sequence)``, where residue names outside
        :data:`THREE_TO_ONE` read as 'X'.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: a Cα line whose coordinates do not parse (named by line number), or no Cα atom
            in the chain.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"structure file {str(p)!r} does not exist")
    coords: list[tuple[float, float, float]] = []
    seq: list[str] = []
    seen: set[tuple[str, str]] = set()
    for n, line in enumerate(p.read_text().splitlines(), 1):
        if line.startswith("ENDMDL"):
            break
        if not line.startswith("ATOM  ") or line[12:16].strip() != "CA":
            continue
        if chain is None:
            chain = line[21]
        if line[21] != chain:
            continue
        key = (line[22:26], line[26])  # residue number, insertion code
        if key in seen:  # a second alternate location of the same residue
            continue
        try:
            xyz = (float(line[30:38]), float(line[38:46]), float(line[46:54]))
        except ValueError:
            raise ValueError(f"{p}:{n}: Cα coordinates do not parse (columns 31-54)") from None
        seen.add(key)
        coords.append(xyz)
        seq.append(THREE_TO_ONE.get(line[17:20].strip(), "X"))
    if not coords:
        raise ValueError(f"{p}: no Cα atom" + (f" in chain {chain!r}" if chain is not None else ""))
    return np.asarray(coords, dtype=np.float64), "".join(seq)


def ca_contact_map(coords: np.ndarray, cutoff: float = 8.0, min_separation: int = 1) -> np.ndarray:
    """Symmetric 0/1 contact map from Cα coordinates: distance below ``cutoff`` Å.

    Args:
        coords: ``[L, 3]`` Cα coordinates.
        cutoff: contact distance in Å (8 Å, the usual Cα threshold).
        min_separation: pairs closer than this in sequence (``|i − j| < min_separation``) are not
            contacts; 1 only removes the diagonal.

    Returns:
        ``[L, L]`` float32, the same form as ``LatticeStructure.contact_map``.

    Example:
        >>> ca_contact_map(np.array([[0.0, 0, 0], [3.8, 0, 0], [20.0, 0, 0]])).tolist()
        [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    x = np.asarray(coords, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"coords must be [L, 3], got shape {x.shape}")
    if cutoff <= 0 or min_separation < 1:
        raise ValueError("cutoff must be > 0 and min_separation >= 1")
    d = np.linalg.norm(x[:, None] - x[None], axis=-1)
    i, j = np.indices(d.shape)
    return ((d < cutoff) & (np.abs(i - j) >= min_separation)).astype(np.float32)
