"""LongBench jsonl and needle-in-a-haystack loaders, on tiny stand-ins written in the real formats."""

from __future__ import annotations

import json

import pytest
import torch
from beacon_test_models import VOCAB, lively, tiny

from iclr25.common.tiny_lm import build_word_tokenizer
from iclr25.methods.activation_beacon import (
    LONGBENCH_FIELDS,
    BeaconConfig,
    longbench_prompts,
    needle_in_haystack,
    read_haystack,
    read_longbench,
    truncate_middle,
    wrap_with_beacon,
)

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = [f"w{i}" for i in range(30)] + ["Question:", "Answer:", "end.", "magic", "is", "7"]


def _row(i: int, context: str, **kw) -> dict:
    row = dict(input=f"w{i} w2", context=context, answers=[f"w{i}"], length=len(context.split()),
               dataset="toyqa", language="en", all_classes=None, _id=f"id{i}")  # fmt: skip
    row.update(kw)
    return row


def _write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_read_longbench_file_and_folder(tmp_path) -> None:
    rows = [_row(0, "w5 w6 w7"), _row(1, "w8 w9", all_classes=["w1", "w2"])]
    _write(tmp_path / "toyqa.jsonl", rows)
    assert read_longbench(tmp_path / "toyqa.jsonl") == rows
    assert read_longbench(tmp_path, task="toyqa") == rows
    assert set(LONGBENCH_FIELDS) <= set(rows[0])
    with pytest.raises(FileNotFoundError, match=r"other\.jsonl"):
        read_longbench(tmp_path, task="other")
    with pytest.raises(ValueError, match="task="):
        read_longbench(tmp_path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"bad.jsonl:2: not valid JSON"),
        (json.dumps({k: v for k, v in _row(0, "w1").items() if k != "answers"}), r"missing .*'answers'"),
        (json.dumps(_row(0, "w1", length="3")), "'length' must be an integer"),
        (json.dumps(_row(0, "w1", answers="w1")), "'answers' must be a list"),
    ],
)
def test_read_longbench_malformed_line_names_file_line_field(tmp_path, line, message) -> None:
    (tmp_path / "bad.jsonl").write_text(json.dumps(_row(0, "w1")) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=message):
        read_longbench(tmp_path / "bad.jsonl")


def test_truncate_middle_keeps_both_ends() -> None:
    assert truncate_middle(range(10), 4) == [0, 1, 8, 9]
    assert truncate_middle(range(3), 4) == [0, 1, 2]
    with pytest.raises(ValueError):
        truncate_middle(range(3), 1)


def test_longbench_prompts_feed_beacon_generate(tmp_path) -> None:
    tok = build_word_tokenizer(WORDS)
    context = " ".join(f"w{i % 30}" for i in range(40))
    _write(tmp_path / "toyqa.jsonl", [_row(3, context), _row(4, "w1 w2 w3")])
    prompts = longbench_prompts(read_longbench(tmp_path / "toyqa.jsonl"), tok, max_tokens=24)
    long, short = prompts
    assert long["truncated"] and len(long["input_ids"]) == 24
    full = tok(f"{context}\n\nQuestion: w3 w2\nAnswer:")["input_ids"]
    assert long["input_ids"] == full[:12] + full[-12:]  # the question at the end survives
    assert long["prompt"].split()[-3:] == ["w3", "w2", "Answer:"]
    assert not short["truncated"] and short["prompt"] == "w1 w2 w3\n\nQuestion: w4 w2\nAnswer:"
    assert short["answers"] == ["w4"] and short["_id"] == "id4"
    # the prompts go straight into a beacon model's generate as a left-padded batch
    model = wrap_with_beacon(lively(tiny("llama")).float(), BeaconConfig(window=8, ratios=(2,), sink_size=1))
    assert len(tok) <= VOCAB  # the tokenizer's ids fit the tiny model's embedding
    batch = tok.pad({"input_ids": [p["input_ids"] for p in prompts]}, return_tensors="pt")
    out = model.generate(**batch, max_new_tokens=3, beacon_ratio=2, eos_token_id=None)
    assert out.shape == (2, 27)
    alone = model.generate(
        torch.tensor([short["input_ids"]]), max_new_tokens=3, beacon_ratio=2, eos_token_id=None
    )
    assert torch.equal(out[1, -3:], alone[0, -3:])


def test_longbench_templates_per_dataset(tmp_path) -> None:
    tok = build_word_tokenizer(WORDS)
    rows = [_row(1, "w5")]
    got = longbench_prompts(rows, tok, template={"toyqa": "{input} || {context}"})
    assert got[0]["prompt"] == "w1 w2 || w5"
    with pytest.raises(ValueError, match="no prompt template for dataset 'toyqa'"):
        longbench_prompts(rows, tok, template={"other": "{context}"})
    with pytest.raises(ValueError, match="'question'"):
        longbench_prompts(rows, tok, template="{question}")


def test_needle_in_haystack_length_and_depth(tmp_path) -> None:
    tok = build_word_tokenizer(WORDS)
    (tmp_path / "essays").mkdir()
    (tmp_path / "essays" / "b.txt").write_text("w5 w6 end.")
    (tmp_path / "essays" / "a.txt").write_text("w1 w2 w3 end.")
    hay = read_haystack(tmp_path / "essays")
    assert hay.split() == ["w1", "w2", "w3", "end.", "w5", "w6", "end."]
    needle = "magic is 7"
    for depth in (0.0, 0.5, 1.0):
        s = needle_in_haystack(hay, needle, tokenizer=tok, length=40, depth=depth, sentence_end=None)
        assert len(s.input_ids) == 40
        assert tok.decode(s.input_ids[s.needle_start : s.needle_end]) == needle
        assert s.needle_start == round(depth * 37)
    snapped = needle_in_haystack(hay, needle, tokenizer=tok, length=40, depth=0.5)
    assert tok.decode([snapped.input_ids[snapped.needle_start - 1]]) == "end."  # starts a sentence
    assert snapped.needle_start <= round(0.5 * 37) and snapped.text.split().count("magic") == 1
    with pytest.raises(ValueError, match="depth"):
        needle_in_haystack(hay, needle, tokenizer=tok, length=40, depth=1.5)
    with pytest.raises(ValueError, match="no room"):
        needle_in_haystack(hay, needle, tokenizer=tok, length=3, depth=0.5)
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no \.txt"):
        read_haystack(tmp_path / "empty_dir")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_haystack(tmp_path / "missing.txt")
