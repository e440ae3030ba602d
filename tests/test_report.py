"""Report rendering and README regeneration from JSON records."""

from __future__ import annotations

import shutil
from pathlib import Path

from fake_claim import CLAIM
from iclr25._core.claims import judge
from iclr25._core.report import (
    RESULTS_MARKERS,
    STATUS_MARKERS,
    render_report,
    summary_rows,
    update_readmes,
    write_claim_json,
)
from iclr25._core.runner import ClaimRun, SeedRun


def _finished_run() -> ClaimRun:
    run = ClaimRun(CLAIM, "full", {}, "cpu")
    run.seeds = [SeedRun(s, CLAIM.run("full", s), None, 0.5) for s in (0, 1, 2)]
    run.judgement = judge(CLAIM, "full", [s.result for s in run.seeds])
    return run


def test_summary_row_shows_headline_numbers(tmp_path: Path) -> None:
    write_claim_json(tmp_path, _finished_run())
    md, _ = render_report(tmp_path)
    head, row = summary_rows([__import__("json").loads((tmp_path / "fake.json").read_text())])
    assert head[:4] == ["method", "claim", "metric", "baseline"]
    assert row[0] == "fake" and row[2] == "acc" and row[5] == "Δ 0.3" and row[6] == "+0.3"
    assert "**SUPPORTED**" in row[7]
    assert "![acc vs n](figures/fake-curve.png)" in md.read_text()


def test_update_readmes_fills_both_tables_and_keeps_other_rows(tmp_path: Path) -> None:
    report = tmp_path / "report"
    report.mkdir()
    write_claim_json(report, _finished_run())
    root = tmp_path / "repo"
    method_dir = root / "src" / "iclr25" / "methods" / "fake"
    method_dir.mkdir(parents=True)
    start, end = STATUS_MARKERS
    other = "| [`other`](src/iclr25/methods/other/README.md) | kept | SUPPORTED | x | y | z |"
    (root / "README.md").write_text(f"# top\n{start}\n{other}\n{end}\ntail\n")
    rs, re_ = RESULTS_MARKERS
    (method_dir / "README.md").write_text(f"## Results\n{rs}\n_Not run yet._\n{re_}\n")
    shutil.copy(Path(__file__), root / "unused.py")
    update_readmes(report, root)
    top = (root / "README.md").read_text()
    assert (
        other in top and "[`fake`]" in top and "SUPPORTED (full, 3 seeds)" in top and top.endswith("tail\n")
    )
    method = (method_dir / "README.md").read_text()
    assert "_Not run yet._" not in method and "| gain |" in method and "control_gain (control)" in method
