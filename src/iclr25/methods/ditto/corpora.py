"""Local loaders for the paper's author corpora, CCAT50 and CMCC, as ``(author, text)`` records.

DITTO (*Aligning Language Models with Demonstrated Feedback*, Shaikh et al., ICLR 2025,
arXiv:2406.00888) treats each author of an authorship corpus as one user whose texts are the
demonstrations. The corpora are not shipped (their licences are unclear); these functions read a
local copy and never download.

Layouts read:

- **CCAT50** (the Reuter_50_50 release): ``<root>/C50train/<author>/*.txt`` and
  ``<root>/C50test/<author>/*.txt``, one folder per author in each split.
- **CMCC**: ``<root>/<author>/**/*.txt``, one folder per author, its text files directly inside
  or in sub-folders (e.g. one per genre or topic); the relative path is kept in ``path`` so genre
  and topic can be read from it. Re-arrange a copy into this layout if it comes otherwise.

Author labels are the positions of the author names in sorted order, so they do not depend on the
file system's listing order. Prompts are not part of either corpus: :func:`to_demonstrations` takes
them from the caller.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .trainer import Demonstration, Prompt

__all__ = [
    "AuthorText",
    "author_labels",
    "load_ccat50",
    "load_cmcc",
    "to_dataset",
    "to_demonstrations",
]


@dataclass(frozen=True)
class AuthorText:
    """One text of one author.

    Attributes:
        author: the author's name (the folder name).
        label: the author's index among the sorted author names of the loaded corpus.
        text: the file's text, surrounding whitespace stripped.
        split: ``"train"``/``"test"`` (CCAT50) or ``"all"`` (CMCC).
        path: the file's path relative to the corpus root, with ``/`` separators.
    """

    author: str
    label: int
    text: str
    split: str
    path: str


def _read_text(path: Path, encoding: str) -> str:
    try:
        text = path.read_text(encoding=encoding)
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not valid {encoding} text ({err.reason}); pass encoding=") from None
    if not text.strip():
        raise ValueError(f"{path}: empty text file")
    return text.strip()


def _author_files(folder: Path, recursive: bool) -> dict[str, list[Path]]:
    """Map each author sub-folder of ``folder`` to its sorted ``.txt`` files."""
    authors = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not authors:
        raise ValueError(f"{folder}: no author folders inside")
    out = {}
    for a in authors:
        files = sorted(a.rglob("*.txt") if recursive else a.glob("*.txt"))
        if not files:
            raise ValueError(f"{a}: author folder holds no .txt file")
        out[a.name] = files
    return out


def author_labels(authors: Sequence[str]) -> dict[str, int]:
    """The stable author → label map: the index of each distinct name in sorted order.

    Example:
        >>> author_labels(["b", "a", "b"])
        {'a': 0, 'b': 1}
    """
    return {a: i for i, a in enumerate(sorted(set(authors)))}


def load_ccat50(root: str | os.PathLike[str], *, encoding: str = "utf-8") -> list[AuthorText]:
    """Read CCAT50 from ``<root>/C50train/<author>/*.txt`` and ``<root>/C50test/<author>/*.txt``.

    Args:
        root: the folder that holds ``C50train`` and ``C50test``.
        encoding: the files' text encoding.

    Returns:
        Train records then test records, each sorted by author and file name.

    Raises:
        FileNotFoundError: ``root``, ``C50train`` or ``C50test`` is missing.
        ValueError: a split without author folders, an author folder without ``.txt`` files, the
            two splits naming different authors, or a file that is empty or not valid text.
    """
    base = Path(root)
    splits = {}
    for split, name in (("train", "C50train"), ("test", "C50test")):
        folder = base / name
        if not folder.is_dir():
            raise FileNotFoundError(f"CCAT50 folder {str(folder)!r} does not exist")
        splits[split] = _author_files(folder, recursive=False)
    if set(splits["train"]) != set(splits["test"]):
        only = sorted(set(splits["train"]) ^ set(splits["test"]))
        raise ValueError(f"C50train and C50test name different authors (in one only: {only[:5]})")
    labels = author_labels(list(splits["train"]))
    return [
        AuthorText(a, labels[a], _read_text(f, encoding), split, f.relative_to(base).as_posix())
        for split, by_author in splits.items()
        for a, files in by_author.items()
        for f in files
    ]


def load_cmcc(root: str | os.PathLike[str], *, encoding: str = "utf-8") -> list[AuthorText]:
    """Read CMCC from ``<root>/<author>/**/*.txt`` (one folder per author, sub-folders allowed).

    Args:
        root: the folder of author folders.
        encoding: the files' text encoding.

    Returns:
        Records sorted by author and relative path, split ``"all"``.

    Raises:
        FileNotFoundError: ``root`` is missing.
        ValueError: no author folders, an author folder without ``.txt`` files, or a file that is
            empty or not valid text.
    """
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"CMCC folder {str(base)!r} does not exist")
    by_author = _author_files(base, recursive=True)
    labels = author_labels(list(by_author))
    return [
        AuthorText(a, labels[a], _read_text(f, encoding), "all", f.relative_to(base).as_posix())
        for a, files in by_author.items()
        for f in files
    ]


def to_dataset(records: Sequence[AuthorText]) -> Any:
    """A ``datasets.Dataset`` with columns ``author, label, text, split, path`` (``label``: a ``ClassLabel``).

    The class names are the sorted authors, so ``features["label"].int2str`` gives the author.

    Raises:
        ImportError: the optional ``datasets`` package is not installed.
        ValueError: no records, or labels that do not follow :func:`author_labels`.
    """
    try:
        import datasets
    except ImportError:
        raise ImportError("to_dataset needs the 'datasets' package (pip install datasets)") from None
    if not records:
        raise ValueError("no records")
    labels = author_labels([r.author for r in records])
    if any(labels[r.author] != r.label for r in records):
        raise ValueError("record labels do not match the sorted author names; build records with a loader")
    features = datasets.Features(
        {
            "author": datasets.Value("string"),
            "label": datasets.ClassLabel(names=list(labels)),
            "text": datasets.Value("string"),
            "split": datasets.Value("string"),
            "path": datasets.Value("string"),
        }
    )
    return datasets.Dataset.from_list([asdict(r) for r in records], features=features)


def to_demonstrations(
    records: Sequence[AuthorText],
    author: str,
    prompts: Mapping[str, Prompt] | Callable[[AuthorText], Prompt],
    *,
    split: str | None = None,
) -> list[Demonstration]:
    """One author's texts as DITTO demonstrations ``(prompt, response = the author's text)``.

    Args:
        records: loaded records.
        author: whose texts to take.
        prompts: the prompt of each text, by its ``path``, or a function of the record.
        split: keep only this split (e.g. ``"train"``), or all.

    Returns:
        The :class:`~iclr25.methods.ditto.Demonstration` list, in record order.

    Raises:
        ValueError: the author has no text (in that split), or a text has no prompt in the mapping.
    """
    mine = [r for r in records if r.author == author and (split is None or r.split == split)]
    if not mine:
        raise ValueError(f"author {author!r} has no text" + (f" in split {split!r}" if split else ""))
    out = []
    for r in mine:
        if callable(prompts):
            prompt = prompts(r)
        elif r.path in prompts:
            prompt = prompts[r.path]
        else:
            raise ValueError(f"no prompt for {r.path!r}")
        out.append(Demonstration(prompt, r.text))
    return out
