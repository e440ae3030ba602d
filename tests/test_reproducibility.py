"""Same seed, same numbers in every run mode (DESIGN.md, "What makes a claim check evidence", 6).

Every registered claim runs at the smoke budget, seed 0, three ways, and its metrics other than
wall-clock ones (``*_s``) must be identical:

- alone: a fresh ``iclr25 check NAME`` process that runs nothing else;
- after other claims in one process: this test session, where the smoke runs of the contract
  suite share the process with every other claim;
- under ``--jobs 2``: ``iclr25 check --all --jobs 2``, two workers side by side, each running
  several claims in turn.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from iclr25._core.claims import WALL_CLOCK_SUFFIX
from iclr25._core.registry import REGISTRY

METHODS = sorted(REGISTRY)
_CHECK = [sys.executable, "-m", "iclr25", "check", "--budget", "smoke", "--seeds", "1", "--seed", "0"]


def _metrics(path: Path) -> dict[str, dict[str, float]]:
    record = json.loads(path.read_text())
    seed = record["seeds"][0]
    assert seed["error"] is None, seed["error"]
    return {
        arm: {k: v for k, v in ms.items() if not k.endswith(WALL_CLOCK_SUFFIX)}
        for arm, ms in seed["metrics"].items()
    }


@pytest.fixture(scope="module")
def run_modes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Report folders of the two out-of-process modes: ``alone/<name>`` and ``jobs2``."""
    root = tmp_path_factory.mktemp("modes")
    jobs2 = subprocess.Popen(
        [*_CHECK, "--all", "--jobs", "2", "--out", str(root / "jobs2")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = jobs2.communicate(timeout=900)
    assert (root / "jobs2" / "run.json").exists(), err[-2000:]
    # Alone: one process per claim, two at a time on the two cores.
    pending = list(METHODS)
    running: list[subprocess.Popen] = []
    while pending or running:
        while pending and len(running) < 2:
            name = pending.pop(0)
            cmd = [*_CHECK, name, "--out", str(root / "alone" / name)]
            running.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        running[0].wait(timeout=600)
        running = [p for p in running if p.poll() is None]
    return {"alone": root / "alone", "jobs2": root / "jobs2"}


@pytest.mark.parametrize("name", METHODS)
def test_same_seed_same_numbers_in_every_run_mode(name: str, run_modes, smoke_runs) -> None:
    in_session, _ = smoke_runs(name)
    alone = _metrics(run_modes["alone"] / name / f"{name}.json")
    jobs2 = _metrics(run_modes["jobs2"] / f"{name}.json")
    shared = in_session.deterministic_metrics()
    for mode, metrics in (("--jobs 2", jobs2), ("after other claims in one process", shared)):
        differ = sorted(
            f"{arm}.{k}: {alone[arm][k]!r} alone vs {metrics.get(arm, {}).get(k)!r}"
            for arm in alone
            for k in alone[arm]
            if metrics.get(arm, {}).get(k) != alone[arm][k]
        )
        assert not differ and metrics.keys() == alone.keys(), f"{mode}: {differ[:8]}"
