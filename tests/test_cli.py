"""The command line end to end, on fast fake claims (and `list`, `describe` on real ones)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from iclr25.cli import app

runner = CliRunner()


def _invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_list_is_fast_and_imports_no_method() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); from iclr25.cli import app; "
        "from typer.testing import CliRunner; r = CliRunner().invoke(app, ['list']); "
        "assert r.exit_code == 0, r.output; assert 'ftct' in r.output; "
        "assert not [m for m in sys.modules if m.startswith('iclr25.methods.')]; "
        "assert 'torch' not in sys.modules; print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert float(out.stdout.strip()) >= 0  # the timing is shown by `make check` users, not asserted


def test_describe_shows_claim_config_and_sources(fake_registry: dict) -> None:
    result = _invoke("describe", "fake")
    assert result.exit_code == 0
    for text in (
        "The method beats the baseline.",
        "fails: diff(control.acc, baseline.acc)",
        "paper: nowhere",
        "a toy",
    ):
        assert text in result.output


def test_check_writes_report_and_exit_code(fake_registry: dict, tmp_path: Path) -> None:
    out = tmp_path / "r"
    result = _invoke("check", "fake", "--budget", "full", "--out", str(out))
    assert result.exit_code == 0, result.output
    record = json.loads((out / "fake.json").read_text())
    assert record["verdict"] == "SUPPORTED" and [s["seed"] for s in record["seeds"]] == [0, 1, 2]
    assert record["config"]["n"] == 200
    for name in ("env.json", "report.md", "report.html", "figures/fake-curve.png"):
        assert (out / name).exists(), name
    md = (out / "report.md").read_text()
    assert md.index("## Summary") < md.index("## fake")
    assert "data:image/png;base64," in (out / "report.html").read_text()


def test_check_not_supported_exits_nonzero(fake_registry: dict, tmp_path: Path) -> None:
    result = _invoke(
        "check", "fake", "--set", "effect=0.0", "--seeds", "1", "--seed", "4", "--out", str(tmp_path)
    )
    assert result.exit_code == 1
    record = json.loads((tmp_path / "fake.json").read_text())
    assert record["verdict"] == "NOT_SUPPORTED" and record["overrides"] == {"effect": "0.0"}
    assert record["seeds"][0]["seed"] == 4


def test_error_claim_is_recorded_and_run_goes_on(fake_registry: dict, tmp_path: Path) -> None:
    result = _invoke("check", "fake_broken", "fake", "--budget", "smoke", "--out", str(tmp_path))
    assert result.exit_code == 1
    broken = json.loads((tmp_path / "fake_broken.json").read_text())
    assert broken["verdict"] == "ERROR" and "boom" in broken["seeds"][0]["error"]
    assert json.loads((tmp_path / "fake.json").read_text())["verdict"] == "INCONCLUSIVE"


def test_ctrl_c_keeps_finished_claims(fake_registry: dict, tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", "fake", "fake_interrupt", "--out", str(tmp_path)])
    assert result.exit_code == 130
    assert json.loads((tmp_path / "fake.json").read_text())["verdict"] == "SUPPORTED"
    assert not (tmp_path / "fake_interrupt.json").exists()
    assert "fake" in (tmp_path / "report.md").read_text()


def test_same_seed_same_numbers(fake_registry: dict, tmp_path: Path) -> None:
    for d in ("a", "b"):
        _invoke("check", "fake", "--budget", "smoke", "--seed", "3", "--out", str(tmp_path / d))
    a, b = (json.loads((tmp_path / d / "fake.json").read_text())["seeds"] for d in ("a", "b"))
    assert [s["metrics"] for s in a] == [s["metrics"] for s in b]


def test_parallel_jobs_match_serial(fake_registry: dict, tmp_path: Path) -> None:
    _invoke("check", "fake", "--out", str(tmp_path / "serial"))
    _invoke("check", "fake", "--jobs", "2", "--out", str(tmp_path / "par"))
    a, b = (json.loads((tmp_path / d / "fake.json").read_text())["seeds"] for d in ("serial", "par"))
    assert [s["metrics"] for s in a] == [s["metrics"] for s in b]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "nope"], "unknown method 'nope'"),
        (["check", "fake", "--budget", "huge"], "--budget must be smoke, full or long"),
        (["check", "fake_broken", "--budget", "long"], "fake_broken has no long budget; claims with one:"),
        (["check", "fake", "--resume", "nowhere"], "is not a folder written by `iclr25 check`"),
        (["check", "fake", "--set", "nope=1"], "unknown field 'nope'"),
        (["check", "fake", "--set", "n=ten"], "expected an integer"),
        (["check", "fake", "--set", "n"], "--set expects key=value"),
        (["check", "fake", "--device", "tpu"], "--device must be cpu, cuda or auto"),
        (
            ["check", "fake", "--preset", "paper"],
            "fake: --preset paper: no preset 'paper'; this config offers: none",
        ),
        (["check", "fake", "fake_broken", "--preset", "paper"], "name exactly one method"),
        (["check"], "name at least one method"),
        (["describe", "nope"], "unknown method"),
        (["check", "fake_extra"], "pip install 'iclr25[fakeextra]'"),
        (["report", "does-not-exist"], "does not exist"),
    ],
)
def test_bad_input_gets_one_error_line(fake_registry: dict, args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_on_a_machine_without_one_is_one_line(fake_registry: dict) -> None:
    result = runner.invoke(app, ["check", "fake", "--device", "cuda"])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --device cuda was asked for, but no CUDA device is available"


def test_unwritable_out_is_refused(fake_registry: dict, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = runner.invoke(app, ["check", "fake", "--out", str(blocker / "sub")])
    assert result.exit_code == 2 and "not writable" in result.output


def test_report_rerenders_from_json(fake_registry: dict, tmp_path: Path) -> None:
    _invoke("check", "fake", "--out", str(tmp_path))
    (tmp_path / "report.md").unlink()
    result = _invoke("report", str(tmp_path))
    assert result.exit_code == 0 and (tmp_path / "report.md").exists()


def test_console_script_runs() -> None:
    out = subprocess.run([sys.executable, "-m", "iclr25", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "check" in out.stdout


def test_long_budget_runs_where_defined(fake_registry: dict, tmp_path: Path) -> None:
    result = _invoke("check", "fake", "--budget", "long", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    record = json.loads((tmp_path / "fake.json").read_text())
    assert record["budget"] == "long" and record["config"]["n"] == 400


@pytest.fixture
def clean_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs traced to one clean commit, whatever state this checkout is in."""
    import iclr25._core.report

    monkeypatch.setattr(iclr25._core.report, "git_state", lambda: {"sha": "a" * 40, "dirty": False})


def test_resume_skips_complete_claims_and_refuses_other_budgets(
    fake_registry: dict, clean_commit: None, tmp_path: Path
) -> None:
    result = runner.invoke(app, ["check", "fake", "fake_interrupt", "--out", str(tmp_path)])
    assert result.exit_code == 130 and "--resume" in result.output
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["complete"] is False and manifest["budget"] == "full"
    before = (tmp_path / "fake.json").read_text()
    result = _invoke("check", "fake", "--resume", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "kept fake: SUPPORTED" in result.output
    assert (tmp_path / "fake.json").read_text() == before  # not run again
    assert json.loads((tmp_path / "run.json").read_text())["complete"] is True
    result = runner.invoke(app, ["check", "fake", "--budget", "smoke", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "used the 'full' budget, not 'smoke'" in result.output
    manifest["commit"] = "0" * 40
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["check", "fake", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "was made at commit 0000000000" in result.output
    manifest["dirty"] = True
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    result = runner.invoke(app, ["check", "fake", "--resume", str(tmp_path)])
    assert result.exit_code == 2 and "made from uncommitted code" in result.output


def test_resume_latest_finds_the_newest_unfinished_run(
    fake_registry: dict, clean_commit: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner.invoke(app, ["check", "fake", "fake_interrupt", "--out", "reports/20260101-000000-full"])
    result = _invoke("check", "fake", "--resume", "latest")
    assert "resuming reports/20260101-000000-full" in result.output and result.exit_code == 0
    result = _invoke("check", "fake", "--resume", "latest")  # that run is complete now: a fresh one
    assert "resuming" not in result.output and len(list(Path("reports").iterdir())) == 2


def test_progress_inside_claims_is_logged_without_a_terminal(fake_registry: dict, tmp_path: Path) -> None:
    result = _invoke("check", "fake", "--seeds", "1", "--out", str(tmp_path))
    assert "fake seed 0: counting 1/3" in result.output and "fake seed 0: counting 3/3" in result.output
    assert "fake seed 0 done" in result.output
    result = _invoke("check", "fake", "--seeds", "2", "--jobs", "2", "--out", str(tmp_path / "par"))
    assert "fake seed 1: counting 3/3" in result.output, result.output


def test_a_fresh_run_into_a_used_folder_runs_again(fake_registry: dict, tmp_path: Path) -> None:
    _invoke("check", "fake", "--out", str(tmp_path))
    result = _invoke("check", "fake", "--set", "effect=0.0", "--out", str(tmp_path))
    assert "kept fake" not in result.output
    assert json.loads((tmp_path / "fake.json").read_text())["verdict"] == "NOT_SUPPORTED"


def test_demo_writes_its_files_and_takes_an_input(fake_registry: dict, tmp_path: Path) -> None:
    result = _invoke("demo", "fake", "--out", str(tmp_path / "d"), "--seed", "3")
    assert result.exit_code == 0 and "fake-demo.txt" in result.output
    assert (tmp_path / "d" / "fake-demo.txt").read_text() == "seed 3, input none\n"
    given = tmp_path / "mine.txt"
    given.write_text("hello")
    assert _invoke("demo", "fake", str(given), "--out", str(tmp_path / "d")).exit_code == 0
    assert (tmp_path / "d" / "fake-demo.txt").read_text() == "seed 0, input 5\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fake_broken"], "has no demo; methods with one: fake"),
        (["nosuch"], "nosuch"),
        (["fake", "missing.txt"], "does not exist"),
        (["fake", "__WAV__"], "expected a .txt file"),
        (["fake", "--model-dir", "no-such-folder"], "is not a folder"),
        (["fake", "--model-dir", "__DIR__"], "takes no --model-dir"),
    ],
)
def test_demo_bad_input_is_one_error_line(
    fake_registry: dict, tmp_path: Path, args: list, message: str
) -> None:
    wav = tmp_path / "x.wav"
    wav.write_bytes(b"RIFF")
    args = [{"__WAV__": str(wav), "__DIR__": str(tmp_path)}.get(a, a) for a in args]
    result = _invoke("demo", *args, "--out", str(tmp_path / "d"))
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output
