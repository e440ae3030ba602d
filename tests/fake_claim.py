"""Fast claims for harness tests: a deterministic toy, and one that raises."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    diff,
    fails,
    no_progress,
)
from iclr25._core.config import param


@dataclass(frozen=True)
class FakeConfig:
    n: int = param(200, doc="samples", source="deviation: test toy")
    effect: float = param(0.3, doc="true gain of the method", source="paper: nowhere")
    mode: str = param("a", doc="a string field", source="deviation: test toy")

    def __post_init__(self) -> None:
        if self.n < 10:
            raise ValueError(f"n must be at least 10, got {self.n}")


def _run(config: FakeConfig, *, seed: int, device: str, progress: ProgressFn = no_progress) -> RunResult:
    for step in range(1, 4):
        progress("counting", step, 3)
    rng = np.random.default_rng(seed)
    base = float(rng.normal(0.5, 0.01, config.n).mean())
    return RunResult(
        metrics={
            "method": {"acc": base + config.effect},
            "baseline": {"acc": base},
            "control": {"acc": base + 0.01},
        },
        series={"curve": Series("acc vs n", "n", "acc", [1, 2, 3], {"method": [0.1, 0.2, 0.3]})},
        notes=[f"device={device}"],
    )


def _raise(config: FakeConfig, *, seed: int, device: str) -> RunResult:
    raise RuntimeError("boom")


_PAPER = PaperRef(title="A fake paper", authors="A. Author", arxiv="0000.00000")
_CRITERIA = (
    diff(
        "method.acc",
        "baseline.acc",
        ">=",
        0.1,
        name="gain",
        paper="+0.3",
        falsifier="control_gain",
        explain="The method is at least 0.1 more accurate than the baseline.",
    ),
    fails(diff("control.acc", "baseline.acc", ">=", 0.1, name="control_gain")),
)
_BUDGETS = {
    "smoke": Budget("smoke", FakeConfig(n=50), seconds=0.1, report_only=True),
    "full": Budget("full", FakeConfig(), seeds=3, seconds=0.1),
}
_BUDGETS_WITH_LONG = {**_BUDGETS, "long": Budget("long", FakeConfig(n=400), seeds=3, seconds=0.1)}
_ARMS = {"method": "the method", "baseline": "the baseline", "control": "a broken variant"}

CLAIM = Claim(
    name="fake",
    paper=_PAPER,
    statement="The method beats the baseline.",
    arms=_ARMS,
    criteria=_CRITERIA,
    budgets=_BUDGETS_WITH_LONG,
    run_fn=_run,
    headline="gain",
    deviations=("a toy",),
)
BROKEN = Claim(
    name="fake_broken",
    paper=_PAPER,
    statement="Raises.",
    arms=_ARMS,
    criteria=_CRITERIA,
    budgets=_BUDGETS,
    run_fn=_raise,
    headline="gain",
)


def _interrupt(config: FakeConfig, *, seed: int, device: str) -> RunResult:
    raise KeyboardInterrupt


INTERRUPTED = Claim(
    name="fake_interrupt",
    paper=_PAPER,
    statement="Stands for a user pressing Ctrl-C.",
    arms=_ARMS,
    criteria=_CRITERIA,
    budgets=_BUDGETS,
    run_fn=_interrupt,
    headline="gain",
)


def demo(out_dir: Path, *, input: Path | None = None, seed: int = 0) -> list[Path]:
    """Write one text file: the seed, and the size of the input file if one is given."""
    if input is not None and input.suffix != ".txt":
        raise ValueError(f"expected a .txt file, got {input.name!r}")
    path = out_dir / "fake-demo.txt"
    path.write_text(f"seed {seed}, input {input.stat().st_size if input else 'none'}\n")
    return [path]


def _timed(config: FakeConfig, *, seed: int, device: str) -> RunResult:
    """Record when this seed ran (``config.mode`` names the log file), for the scheduler test."""
    import time

    start = time.monotonic()
    time.sleep(0.3)
    with open(config.mode, "a") as log:
        log.write(f"{start} {time.monotonic()}\n")
    return _run(config, seed=seed, device=device)


#: A claim on two threads: under ``--jobs 2`` two of its seeds must never run side by side.
WIDE = Claim(
    name="fake_wide",
    paper=_PAPER,
    statement="Runs on two threads.",
    arms=_ARMS,
    criteria=_CRITERIA,
    budgets=_BUDGETS,
    run_fn=_timed,
    headline="gain",
    threads=2,
)


def pretrain_fake(
    out: Path, *, progress: ProgressFn = no_progress, max_steps: int | None = None
) -> list[float]:
    """A toy recipe: fits a scalar by gradient steps on ``(w - 3)^2``; writes the artefact."""
    import json

    import torch
    from safetensors.torch import save_file

    from iclr25._core.pretrained import write_training

    steps = 20 if max_steps is None else max_steps
    w, losses = torch.zeros(1), []
    for step in range(steps):
        losses.append(float((w - 3) ** 2))
        w -= 0.1 * 2 * (w - 3)
        progress("fitting", step + 1, steps)
    if max_steps is None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps({"size": 1}))
        save_file({"w": w}, str(out / "model.safetensors"))
        write_training(
            out,
            command=f"iclr25 pretrain fake toy --out {out}",
            loss_curve=losses,
            wall_seconds=0.0,
            quality={"w": float(w)},
        )
    return losses
