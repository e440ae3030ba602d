"""Local loaders for the paper's long-context evaluations: LongBench jsonl files and needle-in-a-haystack.

Paper: *Long Context Compression with Activation Beacon*, Peitian Zhang, Zheng Liu, Shitao Xiao,
Ninglu Shao, Qiwei Ye, Zhicheng Dou. ICLR 2025, arXiv:2401.03462. Its main evaluations are
LongBench (Bai et al., 2023) and needle-in-a-haystack retrieval.

LongBench ships one jsonl file per task (``<task>.jsonl``, and ``<task>_e.jsonl`` for the
length-balanced LongBench-E subset); every line holds the fields :data:`LONGBENCH_FIELDS`. A
prompt too long for the model is cut in the middle (its first and last halves are kept), as
LongBench does, because the instruction and the question sit at the two ends.

The official task prompt templates are not reproduced here: the default template
(:data:`DEFAULT_TEMPLATE`) puts the context first and the question after it, and callers pass
their own templates (one string per task, with ``{context}`` and ``{input}`` fields) to match
published numbers. Nothing is downloaded: every function reads local files only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_TEMPLATE",
    "LONGBENCH_FIELDS",
    "NeedleSample",
    "longbench_prompts",
    "needle_in_haystack",
    "read_haystack",
    "read_longbench",
    "truncate_middle",
]

#: The fields of one LongBench line.
LONGBENCH_FIELDS = ("input", "context", "answers", "length", "dataset", "language", "all_classes", "_id")

#: Default prompt: the context, then the question (``input``). Not LongBench's per-task wording.
DEFAULT_TEMPLATE = "{context}\n\nQuestion: {input}\nAnswer:"


def _check_record(rec: Any, where: str) -> dict[str, Any]:
    """Check one LongBench line's fields and types; return it as a plain dict."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    missing = [f for f in LONGBENCH_FIELDS if f not in rec]
    if missing:
        raise ValueError(f"{where}: missing LongBench field(s) {missing}")
    for f in ("input", "context", "dataset", "language", "_id"):
        if not isinstance(rec[f], str):
            raise ValueError(f"{where}: field {f!r} must be a string, got {type(rec[f]).__name__}")
    if not isinstance(rec["answers"], list) or not all(isinstance(a, str) for a in rec["answers"]):
        raise ValueError(f"{where}: field 'answers' must be a list of strings")
    if isinstance(rec["length"], bool) or not isinstance(rec["length"], int):
        raise ValueError(f"{where}: field 'length' must be an integer, got {rec['length']!r}")
    classes = rec["all_classes"]
    if classes is not None and (
        not isinstance(classes, list) or not all(isinstance(c, str) for c in classes)
    ):
        raise ValueError(f"{where}: field 'all_classes' must be null or a list of strings")
    return dict(rec)


def read_longbench(path: str | os.PathLike[str], task: str | None = None) -> list[dict[str, Any]]:
    """Read one LongBench task from a local jsonl file.

    Args:
        path: the task's ``.jsonl`` file, or the folder that holds ``<task>.jsonl`` (then pass
            ``task``, e.g. ``"hotpotqa"`` or ``"hotpotqa_e"``).
        task: the task name when ``path`` is a folder.

    Returns:
        One dict per line with the fields :data:`LONGBENCH_FIELDS` (and any extra ones), in file order.

    Raises:
        FileNotFoundError: the file (or folder) does not exist.
        ValueError: a line that is not JSON, lacks a field or has a field of the wrong type (the
            message names the file and line), a folder without ``task``, or an empty file.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> row = dict(input="q", context="c", answers=["a"], length=1, dataset="t", language="en",
        ...            all_classes=None, _id="0")
        >>> _ = p.write_text(json.dumps(row) + "\\n")
        >>> read_longbench(p)[0]["answers"]
        ['a']
    """
    p = Path(path)
    if p.is_dir():
        if task is None:
            raise ValueError(f"{p} is a folder: pass task= to pick <task>.jsonl inside it")
        p = p / f"{task}.jsonl"
    if not p.is_file():
        raise FileNotFoundError(f"LongBench file {str(p)!r} does not exist")
    rows = []
    with p.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{p}:{n}: not valid JSON ({err.msg})") from None
            rows.append(_check_record(rec, f"{p}:{n}"))
    if not rows:
        raise ValueError(f"{p}: no records")
    return rows


def truncate_middle(ids: Sequence[int], max_tokens: int) -> list[int]:
    """Keep the first ``⌈max_tokens/2⌉`` and last ``⌊max_tokens/2⌋`` tokens of a too-long sequence.

    Example:
        >>> truncate_middle(list(range(10)), 5)
        [0, 1, 2, 8, 9]
    """
    if max_tokens < 2:
        raise ValueError(f"max_tokens must be >= 2, got {max_tokens}")
    ids = list(ids)
    if len(ids) <= max_tokens:
        return ids
    head = (max_tokens + 1) // 2
    return ids[:head] + ids[len(ids) - (max_tokens - head) :]


def longbench_prompts(
    records: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    max_tokens: int | None = None,
    template: str | Mapping[str, str] = DEFAULT_TEMPLATE,
    add_special_tokens: bool = True,
) -> list[dict[str, Any]]:
    """Turn LongBench records into prompts for ``BeaconModel.generate`` (or a text-generation pipeline).

    Args:
        records: rows from :func:`read_longbench`.
        tokenizer: a Hugging Face tokenizer (``__call__`` and ``decode``).
        max_tokens: if given, prompts longer than this many tokens are cut in the middle
            (:func:`truncate_middle`).
        template: one format string with ``{context}`` and ``{input}`` (any other record field may
            also be used), or a mapping from the record's ``dataset`` to such a string.
        add_special_tokens: passed to the tokenizer (e.g. a leading bos); counted in ``max_tokens``.

    Returns:
        One dict per record: ``prompt`` (the text, decoded from the kept tokens when it was cut),
        ``input_ids`` (list of ints), ``truncated``, and the record's ``answers``, ``all_classes``,
        ``dataset``, ``length``, ``language`` and ``_id`` for scoring.

    Raises:
        ValueError: a template that does not name a field of the record, or no template for a
            record's ``dataset``.
    """
    out = []
    for rec in records:
        if isinstance(template, Mapping):
            if rec["dataset"] not in template:
                raise ValueError(
                    f"no prompt template for dataset {rec['dataset']!r} (have {sorted(template)})"
                )
            tmpl = template[rec["dataset"]]
        else:
            tmpl = template
        try:
            text = tmpl.format(**rec)
        except KeyError as err:
            raise ValueError(
                f"prompt template names {err.args[0]!r}, which is not a LongBench field"
            ) from None
        ids = list(tokenizer(text, add_special_tokens=add_special_tokens)["input_ids"])
        cut = max_tokens is not None and len(ids) > max_tokens
        if cut:
            ids = truncate_middle(ids, max_tokens)
            text = tokenizer.decode(ids, skip_special_tokens=True)
        meta = {k: rec[k] for k in ("answers", "all_classes", "dataset", "length", "language", "_id")}
        out.append({"prompt": text, "input_ids": ids, "truncated": cut, **meta})
    return out


def read_haystack(path: str | os.PathLike[str]) -> str:
    """Read haystack text: one text file, or every ``*.txt`` of a folder in name order, joined by blank lines.

    Raises:
        FileNotFoundError: the path does not exist, or a folder holds no ``.txt`` file.
        ValueError: the text is empty.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.txt"))
        if not files:
            raise FileNotFoundError(f"haystack folder {str(p)!r} holds no .txt file")
        text = "\n\n".join(f.read_text(encoding="utf-8").strip() for f in files)
    elif p.is_file():
        text = p.read_text(encoding="utf-8")
    else:
        raise FileNotFoundError(f"haystack path {str(p)!r} does not exist")
    if not text.strip():
        raise ValueError(f"haystack {str(p)!r} is empty")
    return text


@dataclass(frozen=True)
class NeedleSample:
    """One needle-in-a-haystack context.

    Attributes:
        input_ids: the context's tokens (haystack with the needle inside), exactly ``length`` long.
        text: the decoded context.
        needle_start: token index of the needle's first token.
        needle_end: token index just after the needle.
        depth: the requested depth fraction (0 = start, 1 = end).
    """

    input_ids: list[int]
    text: str
    needle_start: int
    needle_end: int
    depth: float


def needle_in_haystack(
    haystack: str,
    needle: str,
    *,
    tokenizer: Any,
    length: int,
    depth: float,
    sentence_end: str | None = ".",
) -> NeedleSample:
    """Build a context of exactly ``length`` tokens with ``needle`` placed at a depth fraction.

    The haystack's tokens are repeated (if too short) and cut to ``length − len(needle)``; the
    needle's tokens go in after the first ``round(depth · n)`` haystack tokens. With
    ``sentence_end`` set, the insertion point moves back to just after the last earlier haystack
    token whose text ends with it, so the needle starts a sentence (the usual NIAH placement); if
    there is none, the computed point is kept. Building on token ids (not re-tokenised text) makes
    the length exact for any tokenizer; ``text`` is their decoding. Append the retrieval question
    to the prompt yourself (it is not part of ``length``).

    Args:
        haystack: the filler text (e.g. from :func:`read_haystack`).
        needle: the fact to retrieve.
        tokenizer: a Hugging Face tokenizer; special tokens are not added.
        length: total context tokens, haystack plus needle.
        depth: where the needle goes, a fraction in [0, 1] of the haystack part.
        sentence_end: the text that ends a sentence, or None to insert at the exact token.

    Returns:
        A :class:`NeedleSample`.

    Raises:
        ValueError: depth outside [0, 1], an empty haystack or needle, or a needle not shorter
            than ``length``.
    """
    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must lie in [0, 1], got {depth}")
    hay = list(tokenizer(haystack, add_special_tokens=False)["input_ids"])
    pin = list(tokenizer(needle, add_special_tokens=False)["input_ids"])
    if not hay:
        raise ValueError("the haystack encodes to no tokens")
    if not pin:
        raise ValueError("the needle encodes to no tokens")
    n = length - len(pin)
    if n < 1:
        raise ValueError(f"length {length} leaves no room for haystack around a {len(pin)}-token needle")
    filler = (hay * (n // len(hay) + 1))[:n]
    at = round(depth * n)
    if sentence_end is not None and 0 < at < n:
        for i in range(at, 0, -1):
            if tokenizer.decode([filler[i - 1]]).rstrip().endswith(sentence_end):
                at = i
                break
    ids = filler[:at] + pin + filler[at:]
    return NeedleSample(ids, tokenizer.decode(ids), at, at + len(pin), float(depth))
