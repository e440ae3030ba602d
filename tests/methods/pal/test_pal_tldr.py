"""TL;DR comparisons loader on a tiny stand-in written in summarize-from-feedback's jsonl format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from iclr25.methods.pal import from_records, read_tldr_comparisons, relabel_by_length, top_workers


def _line(
    i: int, worker: str, choice: int, texts=(" short", " a longer one"), policies=("sup4", "sup2"), **kw
):
    rec = {
        "info": {"id": f"t3_{i}", "post": f"post {i}", "title": f"title {i}", "subreddit": "relationships"},
        "summaries": [{"text": t, "policy": p, "note": None} for t, p in zip(texts, policies, strict=True)],
        "choice": choice,
        "worker": worker,
        "batch": "batch3",
        "split": "train",
        "extra": {"confidence": 7},
    }
    rec.update(kw)
    return json.dumps(rec)


def _write(folder, name, lines) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n")


def test_records_follow_the_worker_choice(tmp_path) -> None:
    cmp = tmp_path / "comparisons"
    _write(cmp, "batch3.json", [_line(0, "w1", 1), _line(1, "w2", 0, split="valid1")])
    _write(cmp, "batch4.json", [_line(2, "w1", 0, policies=("sup4", "ppo_xl"))])
    recs = read_tldr_comparisons(cmp)
    assert [(r["user_id"], r["split"]) for r in recs] == [("w1", "train"), ("w2", "valid1"), ("w1", "train")]
    assert recs[0]["prompt"] == "Human: post 0 Assistant:"
    assert (recs[0]["chosen"], recs[0]["rejected"]) == ("  a longer one", "  short")  # response prefix
    assert recs[1]["chosen"] == "  short"
    assert len(read_tldr_comparisons(cmp, splits={"train"})) == 2
    assert [r["post_id"] for r in read_tldr_comparisons(cmp, sft_only=True)] == ["t3_0", "t3_1"]
    custom = read_tldr_comparisons(
        cmp / "batch3.json", template="r/{subreddit} {title}: {post}", response_prefix=""
    )
    assert custom[0]["prompt"] == "r/relationships title 0: post 0" and custom[0]["chosen"] == " a longer one"
    # PAL's converter takes them as they are
    comps = from_records(recs, rng=np.random.default_rng(0))
    assert comps.users() == ["w1", "w2"]
    assert all((comps.left[i], comps.right[i])[comps.label[i]] == recs[i]["chosen"] for i in range(3))
    assert top_workers(recs, 1) == ["w1"]


def test_length_users_and_ties(tmp_path) -> None:
    _write(
        tmp_path, "c.jsonl", [_line(0, "w1", 0), _line(1, "w2", 0), _line(2, "w1", 0, texts=(" ab", " cd"))]
    )
    recs = relabel_by_length(read_tldr_comparisons(tmp_path / "c.jsonl"), prefer_shorter={"w2"})
    assert recs[0]["chosen"] == "  a longer one"  # majority: longer
    assert recs[1]["chosen"] == "  short"  # minority: shorter
    assert recs[2]["chosen"] == "  cd"  # equal length: the right one for every user


def test_cnndm_lines_skip_or_raise(tmp_path) -> None:
    cnndm = json.dumps({"info": {"id": "x", "article": "news"}, "summaries": [], "choice": 0, "worker": "w"})
    _write(tmp_path, "mix.json", [_line(0, "w1", 1), cnndm])
    with pytest.raises(ValueError, match=r"mix\.json:2 info: missing field 'post'"):
        read_tldr_comparisons(tmp_path / "mix.json")
    assert len(read_tldr_comparisons(tmp_path / "mix.json", skip_other_sources=True)) == 1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{oops", "not valid JSON"),
        (_line(0, "w1", 2), "choice must be 0 or 1, got 2"),
        (_line(0, "w1", True), "field 'choice' has type bool"),
        (_line(0, "w1", 0, texts=(" a",), policies=("sup",)), "expected 2 summaries, got 1"),
        (json.dumps({"info": {"post": "p"}, "summaries": [{"text": "a"}, {"note": 1}], "choice": 0}),
         r"summaries\[1\]: missing field 'text'"),
        (json.dumps({"info": {"post": "p"}, "summaries": [{"text": "a"}, {"text": "b"}], "choice": 0}),
         "missing field 'worker'"),
    ],
)  # fmt: skip
def test_malformed_lines_name_file_line_and_field(tmp_path, line, message) -> None:
    _write(tmp_path, "bad.json", [_line(0, "w1", 0), line])
    with pytest.raises(ValueError, match=message):
        read_tldr_comparisons(tmp_path / "bad.json")


def test_missing_paths_and_empty_results(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_tldr_comparisons(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"no \.json/\.jsonl file"):
        read_tldr_comparisons(tmp_path)
    _write(tmp_path, "c.json", [_line(0, "w1", 0)])
    with pytest.raises(ValueError, match="no comparison left"):
        read_tldr_comparisons(tmp_path, splits={"valid2"})
