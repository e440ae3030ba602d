"""The runner's schedule: ``--jobs`` counts cores, and a claim on two threads takes two."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from iclr25._core import registry
from iclr25._core.runner import run_checks


def test_two_thread_seeds_never_share_two_cores(fake_registry: dict, tmp_path: Path) -> None:
    log = tmp_path / "intervals.txt"
    wide = registry.load_claim("fake_wide")
    runs = run_checks(
        [wide],
        budget="smoke",
        seeds={"fake_wide": [0, 1, 2]},
        overrides={"mode": str(log)},
        device="cpu",
        jobs=2,
    )
    assert all(s.error is None for s in runs[0].seeds)
    intervals = sorted(tuple(map(float, line.split())) for line in log.read_text().splitlines())
    assert len(intervals) == 3
    for (_, end), (start, _) in itertools.pairwise(intervals):
        assert start >= end, "two seeds of a two-thread claim ran side by side on two cores"


def test_make_check_seconds_counts_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    entry = registry.Entry
    table = {
        "a": entry("a", "x:A", "p", "c", full_s=10.0, full_seeds=3, threads=2),
        "b": entry("b", "x:B", "p", "c", full_s=4.0, full_seeds=3),
    }
    monkeypatch.setattr(registry, "REGISTRY", table)
    assert registry.make_check_seconds(1) == 3 * 10 + 3 * 4
    # on two cores: a's seeds one after the other (30 s), then b's three on two cores (4 + 4)
    assert registry.make_check_seconds(2) == 30 + 8
    with pytest.raises(ValueError, match="jobs"):
        registry.make_check_seconds(0)
