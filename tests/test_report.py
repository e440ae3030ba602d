"""Report rendering and README regeneration from JSON records."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from fake_claim import CLAIM
from iclr25._core.claims import judge
from iclr25._core.report import (
    RESULTS_MARKERS,
    STATUS_MARKERS,
    common_dependencies,
    render_figures,
    render_report,
    stale_files,
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
    head, row = summary_rows([json.loads((tmp_path / "fake.json").read_text())])
    assert head[:4] == ["method", "claim", "metric", "baseline"]
    assert row[0] == "fake" and row[2] == "acc" and row[5] == "Δ 0.3" and row[6] == "+0.3"
    assert "**SUPPORTED**" in row[7]
    assert "![acc vs n](figures/fake-curve.png)" in md.read_text()


def _repo(tmp_path: Path) -> Path:
    """A tiny git checkout with a README status table and a method README."""
    root = tmp_path / "repo"
    method_dir = root / "src" / "iclr25" / "methods" / "fake"
    method_dir.mkdir(parents=True)
    (root / "src" / "iclr25" / "_core").mkdir()
    (root / "src" / "iclr25" / "_core" / "x.py").write_text("x = 1\n")
    (method_dir / "core.py").write_text("y = 1\n")
    start, end = STATUS_MARKERS
    other = "| [`other`](src/iclr25/methods/other/README.md) | kept | SUPPORTED | x | y | z |"
    (root / "README.md").write_text(f"# top\n{start}\n{other}\n{end}\ntail\n")
    rs, re_ = RESULTS_MARKERS
    (method_dir / "README.md").write_text(f"## Results\n{rs}\n_Not run yet._\n{re_}\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return root


def _report_at(tmp_path: Path, root: Path) -> Path:
    report = tmp_path / "report"
    report.mkdir(exist_ok=True)
    write_claim_json(report, _finished_run())
    sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    env = {"time": "2026-01-02T00:00:00", "git": {"sha": sha.stdout.strip(), "dirty": False}}
    (report / "env.json").write_text(json.dumps(env))
    return report


def test_update_readmes_fills_both_tables_and_keeps_other_rows(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    update_readmes(_report_at(tmp_path, root), root)
    top = (root / "README.md").read_text()
    assert "[`fake`]" in top and "SUPPORTED (full, 3 seeds) |" in top and top.endswith("tail\n")
    # the row of another method is kept, and marked stale: it records no commit
    assert "| [`other`](src/iclr25/methods/other/README.md) | kept | SUPPORTED · **stale** |" in top
    method = (root / "src/iclr25/methods/fake/README.md").read_text()
    assert "_Not run yet._" not in method and "| gain |" in method and "control_gain (control)" in method
    assert "commit `" in method and "Stale" not in method


def test_results_are_marked_stale_when_the_code_changes(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    report = _report_at(tmp_path, root)
    update_readmes(report, root)
    fake_row = next(line for line in (root / "README.md").read_text().splitlines() if "[`fake`]" in line)
    assert "stale" not in fake_row
    (root / "src/iclr25/_core/x.py").write_text("x = 2\n")  # the shared core changed since the run
    update_readmes(report, root)
    fake_row = next(line for line in (root / "README.md").read_text().splitlines() if "[`fake`]" in line)
    assert "SUPPORTED (full, 3 seeds) · **stale**" in fake_row
    assert "> **Stale:**" in (root / "src/iclr25/methods/fake/README.md").read_text()
    (root / "src/iclr25/_core/x.py").write_text("x = 1\n")  # back as it was: the mark goes
    update_readmes(report, root)
    assert "Stale" not in (root / "src/iclr25/methods/fake/README.md").read_text()


def test_a_method_never_run_keeps_an_empty_results_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iclr25._core import registry

    root = _repo(tmp_path)
    unrun = root / "src/iclr25/methods/unrun/README.md"
    unrun.parent.mkdir()
    rs, re_ = RESULTS_MARKERS
    unrun.write_text(f"## Results\n{rs}\n{re_}\n")
    table = {"unrun": registry.Entry("unrun", "x:CLAIM", "A paper", "a claim")}
    monkeypatch.setattr(registry, "REGISTRY", table)
    report = _report_at(tmp_path, root)
    update_readmes(report, root)
    first = unrun.read_text()
    update_readmes(report, root)
    assert unrun.read_text() == first and "Stale" not in first


def test_only_the_common_modules_a_method_imports_make_it_stale(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    common = root / "src" / "iclr25" / "common"
    (common / "data" / "world").mkdir(parents=True)
    for init in (
        common / "__init__.py",
        common / "data" / "__init__.py",
        common / "data" / "world" / "__init__.py",
    ):
        init.write_text("")
    (common / "data" / "world" / "draw.py").write_text("z = 1\n")
    (common / "data" / "world" / "__init__.py").write_text("from .draw import z\n")
    (common / "other.py").write_text("w = 1\n")
    (root / "src" / "iclr25" / "_core" / "report.py").write_text("# renderer\n")
    (root / "src" / "iclr25" / "_core" / "media.py").write_text("# pictures and sounds\n")
    method = root / "src" / "iclr25" / "methods" / "fake" / "core.py"
    method.write_text("from iclr25.common.data.world import z\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(root)]
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "common"], check=True)
    assert "src/iclr25/common/data/world" in common_dependencies(root, "fake")
    assert "src/iclr25/common/other.py" not in common_dependencies(root, "fake")
    (common / "other.py").write_text("w = 2\n")  # a module the method does not import
    assert stale_files(root, "fake", _sha(root)) == []
    (common / "data" / "world" / "draw.py").write_text("z = 2\n")  # one it imports through a package
    assert stale_files(root, "fake", _sha(root)) == ["src/iclr25/common/data/world/draw.py"]
    (root / "src" / "iclr25" / "_core" / "report.py").write_text("# renderer, edited\n")  # changes no numbers
    (root / "src" / "iclr25" / "_core" / "media.py").write_text("# pictures, edited\n")  # nor does this
    assert stale_files(root, "fake", _sha(root)) == ["src/iclr25/common/data/world/draw.py"]


def _sha(root: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def test_report_section_opens_with_figure_and_shows_falsifiers_and_diagnosis(tmp_path: Path) -> None:
    run = _finished_run()
    write_claim_json(tmp_path, run)
    record = json.loads((tmp_path / "fake.json").read_text())
    record["verdict"] = "NOT_SUPPORTED"
    record["commit"] = "0a40441a6b27cfe0b970b20901bf6d9ffd73a1c4"
    here = "Measured at commit `0a40441`, `--budget full`: the toy effect is too small."
    record["diagnosis"] = f"{here}\n\n- one\n  wrapped\n- two\n\n- three"
    (tmp_path / "fake.json").write_text(json.dumps(record))
    md = render_report(tmp_path)[0].read_text()
    section = md.split("## fake", 1)[1]
    assert section.index("![acc vs n]") < section.index("### Criteria") < section.index("### Diagnosis")
    assert "`control_gain`" in section and "at least 0.1 more accurate" in section
    assert "the toy effect is too small." in section and "- one wrapped\n- two\n- three" in section
    assert "🔴 **NOT_SUPPORTED**" in md
    assert "background:#cf222e" in (tmp_path / "report.html").read_text()
    # a Diagnosis of another run (another commit, or no commit named) is linked, not shown
    for other in ("Measured at commit `1234567`, `--budget full`: old.", "Under `--budget full`: old."):
        record["diagnosis"] = other
        (tmp_path / "fake.json").write_text(json.dumps(record))
        section = render_report(tmp_path)[0].read_text().split("## fake", 1)[1]
        assert "old." not in section and "describes another run" in section


def test_verdict_reason_classes_banner_and_info_rows(tmp_path: Path) -> None:
    write_claim_json(tmp_path, _finished_run())
    record = json.loads((tmp_path / "fake.json").read_text())
    assert (record["kind"], record["default_seeds"]) == ("supported", 3)
    record.update(verdict="INCONCLUSIVE", kind="cannot discriminate", reason="cannot discriminate: control x")
    record["seeds"] = record["seeds"][:1]
    record["outcomes"][0]["gating"] = False  # a report-only row that misses its bar
    record["outcomes"][0]["state"] = "fail"
    record["unchecked"] = ["the teacher's zero-shot accuracy"]
    (tmp_path / "fake.json").write_text(json.dumps(record))
    md = render_report(tmp_path)[0].read_text()
    assert "INCONCLUSIVE**: cannot discriminate (1 of 3 seeds: not a verdict)" in md
    assert "**1 of 3 seeds: not a verdict.**" in md
    assert "- the teacher's zero-shot accuracy" in md
    criteria = md.split("### Criteria", 1)[1].split("###", 1)[0]
    gain_row = next(line for line in criteria.splitlines() if line.startswith("| gain "))
    assert gain_row.rstrip(" |").endswith("info") and "fail" not in gain_row
    html_text = (tmp_path / "report.html").read_text()
    assert "<figcaption>acc vs n</figcaption>" not in html_text  # the title is drawn in the figure


def test_test_ids_wrap_at_separators(tmp_path: Path) -> None:
    from dataclasses import replace

    gain, control = CLAIM.criteria
    claim = replace(
        CLAIM, criteria=[replace(gain, falsifier="tests/test_claims.py::test_claim_validation"), control]
    )
    run = ClaimRun(claim, "full", {}, "cpu")
    run.seeds = [SeedRun(s, claim.run("full", s), None, 0.5) for s in (0, 1, 2)]
    run.judgement = judge(claim, "full", [s.result for s in run.seeds])
    write_claim_json(tmp_path, run)
    render_report(tmp_path)
    html_text = (tmp_path / "report.html").read_text()
    assert "tests/<wbr>test_claims.py::<wbr>test_claim_validation" in html_text


def test_old_records_get_their_reason_class_from_the_reason() -> None:
    from iclr25._core.report import verdict_kind, verdict_label

    cases = {
        "test not applicable: precondition not met: x": "not applicable",
        "failed: gain (median 0.1)": "not supported",
        "mixed over seeds: gain held in 1/3 seeds": "mixed",
    }
    for reason, kind in cases.items():
        assert verdict_kind({"verdict": "INCONCLUSIVE", "reason": reason}) == kind
    assert verdict_label("NOT_SUPPORTED", "not supported") == "NOT_SUPPORTED (bed discriminates)"
    assert verdict_label("SUPPORTED", "supported") == "SUPPORTED"


def test_parts_are_shown_beside_the_verdict(tmp_path: Path) -> None:
    write_claim_json(tmp_path, _finished_run())
    record = json.loads((tmp_path / "fake.json").read_text())
    assert record["parts"] == {}  # a claim without parts shows none
    record["parts"] = {"learns faster": {"verdict": "SUPPORTED", "reason": "all 1 gating criteria held"}}
    (tmp_path / "fake.json").write_text(json.dumps(record))
    section = render_report(tmp_path)[0].read_text().split("## fake", 1)[1]
    assert "| learns faster | 🟢 **SUPPORTED** | all 1 gating criteria held |" in section


def test_a_line_only_some_seeds_draw_is_plotted_from_those_seeds(tmp_path: Path) -> None:
    def seed(n: int, label: str) -> dict:
        lines = {"always": [0.1 * n, 0.2], label: [0.5, 0.6]}
        series = {
            "curve": {"title": "t", "xlabel": "x", "ylabel": "y", "x": [1, 2], "kind": "line", "lines": lines}
        }
        return {"seed": n, "metrics": {"m": 1.0}, "series": series}

    record = {"name": "fake", "seeds": [seed(0, "best k=1"), seed(1, "best k=2")]}
    figures = render_figures(record, tmp_path)
    assert len(figures) == 1 and all(p.exists() for p in tmp_path.iterdir())
