"""``iclr25 compare``: per-claim, per-seed differences of two report folders and their env.json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from iclr25._core.compare import compare_runs, env_differences
from iclr25.cli import app


def _run(fake_registry: dict, out: Path) -> Path:
    result = CliRunner().invoke(app, ["check", "fake", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_identical_runs_compare_equal(fake_registry: dict, tmp_path: Path) -> None:
    a = _run(fake_registry, tmp_path / "a")
    b = _run(fake_registry, tmp_path / "b")
    (claim,) = compare_runs(a, b).claims
    assert claim.identical and claim.compared == 9
    result = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 0 and "9/9" in result.output


def test_a_changed_metric_and_verdict_are_reported(fake_registry: dict, tmp_path: Path) -> None:
    a = _run(fake_registry, tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    record = json.loads((b / "fake.json").read_text())
    record["seeds"][1]["metrics"]["method"]["acc"] += 0.25
    record["verdict"] = "NOT_SUPPORTED"
    (b / "fake.json").write_text(json.dumps(record))
    (claim,) = compare_runs(a, b).claims
    assert [(d.seed, d.metric) for d in claim.differing] == [(1, "method.acc")]
    result = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 1 and "seed 1 method.acc" in result.output and "≠" in result.output


def test_env_differences_name_packages_cpu_and_kernels() -> None:
    base = {
        "installed": {"numpy": "2.4.6", "torch": "2.14.1"},
        "cpu": {"model": "X", "flags": ["avx2", "avx512f"]},
        "kernels": {"torch": {"cpu_capability": "AVX512"}, "threadpools": []},
    }
    other = json.loads(json.dumps(base))
    other["installed"]["numpy"] = "2.4.5"
    other["cpu"]["flags"] = ["avx2"]
    other["kernels"]["torch"]["cpu_capability"] = "AVX2"
    diff = env_differences(base, other)
    assert diff["package numpy"] == ("2.4.6", "2.4.5")
    assert diff["cpu flags"] == (["avx512f"], [])
    assert diff["torch cpu capability"] == ("AVX512", "AVX2")
    assert env_differences(base, base) == {}
