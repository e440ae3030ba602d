"""Reddit TL;DR comparisons (OpenAI's summarize-from-feedback) as PAL preference records.

PAL (*PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*, Chen et al.,
ICLR 2025, arXiv:2406.08469) evaluates on the Reddit TL;DR comparisons of Stiennon et al. (2020).
Their ``comparisons`` folder holds jsonl files (named ``batch*.json``); each line is one human
comparison::

    {"info": {"id", "post", "title", "subreddit", ...},
     "summaries": [{"text", "policy", ...}, {"text", "policy", ...}],
     "choice": 0 or 1, "worker": "...", "split": "train" | "valid1" | "valid2", "batch": "...", ...}

:func:`read_tldr_comparisons` reads them into the TRL-style records PAL's
:func:`~iclr25.methods.pal.from_records` takes (``user_id`` = the worker, ``prompt``,
``chosen``, ``rejected``). :func:`relabel_by_length` builds PAL's semi-synthetic users, whose
preference is a summary's length in characters (longer for the majority, shorter for a minority).
Everything reads local files; nothing is downloaded.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

__all__ = ["TLDR_PROMPT", "read_tldr_comparisons", "relabel_by_length", "top_workers"]

#: Prompt format of PAL's TL;DR setup (the post only); responses get a leading space.
TLDR_PROMPT = "Human: {post} Assistant:"


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl") and p.is_file())
        if not files:
            raise FileNotFoundError(f"comparisons folder {str(path)!r} holds no .json/.jsonl file")
        return files
    raise FileNotFoundError(f"comparisons path {str(path)!r} does not exist")


def _field(obj: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise ValueError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ValueError(f"{where}: field {key!r} has type {type(value).__name__}")
    return value


def read_tldr_comparisons(
    path: str | os.PathLike[str],
    *,
    splits: Collection[str] | None = None,
    template: str = TLDR_PROMPT,
    response_prefix: str = " ",
    sft_only: bool = False,
    skip_other_sources: bool = False,
) -> list[dict[str, Any]]:
    """Read summarize-from-feedback comparison files into ``user_id/prompt/chosen/rejected`` records.

    Args:
        path: one comparisons file, or the ``comparisons`` folder (every ``.json``/``.jsonl``
            file in it, in name order).
        splits: keep only these ``split`` values (e.g. ``{"train"}``), or all.
        template: the prompt, formatted with the ``info`` fields (``{post}``, ``{title}``,
            ``{subreddit}``, ...).
        response_prefix: put before each summary text.
        sft_only: keep only pairs whose two ``policy`` names both contain ``"sup"`` and neither
            ``"ppo"`` (supervised-baseline samples, the pairs PAL's TL;DR setup keeps).
        skip_other_sources: skip lines without ``info.post`` that carry ``info.article`` (the
            CNN/DM comparisons that share the folder) instead of raising.

    Returns:
        One dict per comparison: ``user_id`` (the worker), ``prompt``, ``chosen`` (the summary
        the worker picked), ``rejected``, plus ``post_id``, ``split``, ``batch``, ``left``,
        ``right`` (the summaries in file order) and ``policies``.

    Raises:
        FileNotFoundError: a missing file or folder.
        ValueError: invalid JSON, a missing or mistyped field, a ``choice`` other than 0/1, a
            line without exactly two summaries (each message names the file and line), or no
            record left.
    """
    out: list[dict[str, Any]] = []
    for f in _files(Path(path)):
        with f.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{f}:{n}"
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{where}: not valid JSON ({err.msg})") from None
                info = _field(rec, "info", where, dict)
                if "post" not in info and "article" in info and skip_other_sources:
                    continue
                post = _field(info, "post", f"{where} info", str)
                summaries = _field(rec, "summaries", where, list)
                if len(summaries) != 2:
                    raise ValueError(f"{where}: expected 2 summaries, got {len(summaries)}")
                texts = [_field(s, "text", f"{where} summaries[{i}]", str) for i, s in enumerate(summaries)]
                policies = [str(s.get("policy", "")) for s in summaries]
                choice = _field(rec, "choice", where, int)
                if choice not in (0, 1):
                    raise ValueError(f"{where}: choice must be 0 or 1, got {choice}")
                worker = _field(rec, "worker", where, str)
                split = str(rec.get("split", ""))
                if splits is not None and split not in splits:
                    continue
                if sft_only and not all("sup" in p and "ppo" not in p for p in policies):
                    continue
                try:
                    prompt = template.format(**{**info, "post": post})
                except KeyError as err:
                    raise ValueError(f"{where}: template names {err.args[0]!r}, absent from info") from None
                left, right = (response_prefix + t for t in texts)
                out.append(
                    {
                        "user_id": worker,
                        "prompt": prompt,
                        "chosen": (left, right)[choice],
                        "rejected": (left, right)[1 - choice],
                        "post_id": str(info.get("id", "")),
                        "split": split,
                        "batch": str(rec.get("batch", "")),
                        "left": left,
                        "right": right,
                        "policies": policies,
                    }
                )
    if not out:
        raise ValueError(f"no comparison left in {str(path)!r} after the split/policy filters")
    return out


def top_workers(records: Sequence[dict[str, Any]], n: int) -> list[str]:
    """The ``n`` workers with the most comparisons, most active first (ties by worker id).

    Example:
        >>> top_workers([{"user_id": "b"}, {"user_id": "a"}, {"user_id": "b"}], 1)
        ['b']
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    counts = Counter(r["user_id"] for r in records)
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def relabel_by_length(
    records: Sequence[dict[str, Any]], prefer_shorter: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Replace each worker's choice by a length preference (PAL's semi-synthetic TL;DR users).

    Users in ``prefer_shorter`` choose the summary with fewer characters, every other user the one
    with more. A pair of equal length is labelled "right" (the second summary in file order is
    chosen) for every user. Lengths count the texts as stored (prefix included, the same for both).

    Returns:
        Copies of the records with ``chosen``/``rejected`` set by that rule.
    """
    out = []
    for r in records:
        left, right = r["left"], r["right"]
        if len(left) == len(right):
            pick_right = True
        elif r["user_id"] in prefer_shorter:
            pick_right = len(right) < len(left)
        else:
            pick_right = len(right) > len(left)
        chosen, rejected = (right, left) if pick_right else (left, right)
        out.append({**r, "chosen": chosen, "rejected": rejected})
    return out
