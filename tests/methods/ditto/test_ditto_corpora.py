"""CCAT50 and CMCC loaders on tiny stand-ins written in the corpora's folder layouts."""

from __future__ import annotations

import pytest

from iclr25.methods.ditto import (
    AuthorText,
    Demonstration,
    author_labels,
    load_ccat50,
    load_cmcc,
    to_dataset,
    to_demonstrations,
)


def _ccat50(root, authors=("ZoeB", "AaronP", "MarkC")) -> None:
    for split in ("C50train", "C50test"):
        for a in authors:
            (root / split / a).mkdir(parents=True)
            for k in (2, 1):  # written out of order; the loader sorts
                (root / split / a / f"{k}newsML.txt").write_text(f"  {a} {split} text {k}\n")


def test_ccat50_records_and_stable_labels(tmp_path) -> None:
    _ccat50(tmp_path)
    recs = load_ccat50(tmp_path)
    assert len(recs) == 12
    assert [r.split for r in recs] == ["train"] * 6 + ["test"] * 6
    assert recs[0] == AuthorText(
        "AaronP", 0, "AaronP C50train text 1", "train", "C50train/AaronP/1newsML.txt"
    )
    assert {r.author: r.label for r in recs} == {"AaronP": 0, "MarkC": 1, "ZoeB": 2}
    assert author_labels([r.author for r in recs]) == {"AaronP": 0, "MarkC": 1, "ZoeB": 2}


def test_ccat50_errors_name_the_problem(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="C50train"):
        load_ccat50(tmp_path)
    _ccat50(tmp_path)
    (tmp_path / "C50test" / "Extra").mkdir()
    (tmp_path / "C50test" / "Extra" / "a.txt").write_text("x")
    with pytest.raises(ValueError, match=r"different authors.*Extra"):
        load_ccat50(tmp_path)
    (tmp_path / "C50test" / "Extra" / "a.txt").unlink()
    with pytest.raises(ValueError, match=r"Extra: author folder holds no \.txt"):
        load_ccat50(tmp_path)
    (tmp_path / "C50test" / "Extra").rmdir()
    (tmp_path / "C50train" / "MarkC" / "1newsML.txt").write_bytes(b"\xff\xfe bad")
    with pytest.raises(ValueError, match=r"1newsML\.txt: not valid utf-8"):
        load_ccat50(tmp_path)
    assert load_ccat50(tmp_path, encoding="latin-1")[2].text.endswith("bad")


def test_cmcc_nested_author_folders(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_cmcc(tmp_path / "cmcc")
    for a in ("s2", "s1"):
        for genre in ("email", "essay"):
            (tmp_path / a / genre).mkdir(parents=True)
            (tmp_path / a / genre / "t1.txt").write_text(f"{a} {genre}")
    recs = load_cmcc(tmp_path)
    assert [(r.author, r.label, r.path) for r in recs] == [
        ("s1", 0, "s1/email/t1.txt"),
        ("s1", 0, "s1/essay/t1.txt"),
        ("s2", 1, "s2/email/t1.txt"),
        ("s2", 1, "s2/essay/t1.txt"),
    ]
    (tmp_path / "s3").mkdir()
    (tmp_path / "s3" / "empty.txt").write_text("  \n")
    with pytest.raises(ValueError, match=r"empty\.txt: empty text file"):
        load_cmcc(tmp_path)


def test_dataset_and_demonstrations(tmp_path) -> None:
    _ccat50(tmp_path)
    recs = load_ccat50(tmp_path)
    datasets = pytest.importorskip("datasets")
    ds = to_dataset(recs)
    assert isinstance(ds, datasets.Dataset) and len(ds) == 12
    assert ds.features["label"].int2str(ds[0]["label"]) == ds[0]["author"] == "AaronP"
    demos = to_demonstrations(recs, "MarkC", lambda r: f"write a news story ({r.path})", split="train")
    assert demos[0] == Demonstration(
        "write a news story (C50train/MarkC/1newsML.txt)", "MarkC C50train text 1"
    )
    assert len(demos) == 2
    with pytest.raises(ValueError, match="no prompt for"):
        to_demonstrations(recs, "MarkC", {}, split="test")
    with pytest.raises(ValueError, match="'Nobody' has no text"):
        to_demonstrations(recs, "Nobody", {})
