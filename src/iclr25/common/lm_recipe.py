"""The recipe of a shipped base language model: train, score, save and record, resumably.

Activation Beacon and DITTO each ship a tiny causal LM trained once by ``iclr25 pretrain``. Their
training loops differ; what a recipe does around the loop is the same and lives here: progress
every 50 steps, a replay mode that runs the first steps and writes nothing, checkpoints into the
output folder, ``save_pretrained`` and the ``training.json`` record.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from transformers import PreTrainedModel

from iclr25._core.claims import ProgressFn
from iclr25._core.pretrained import RecipeRun

__all__ = ["LMTrainLoop", "run_lm_recipe"]


class LMTrainLoop(Protocol):
    """A resumable training loop: returns the model and every step's loss."""

    def __call__(
        self,
        *,
        steps: int | None = None,
        log: Callable[[int, float], None] | None = None,
        state: dict[str, Any] | None = None,
        checkpoint: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[PreTrainedModel, list[float]]: ...


def run_lm_recipe(
    out: str | os.PathLike[str],
    *,
    method: str,
    name: str,
    config: Any,
    steps: int,
    train: LMTrainLoop,
    quality: Callable[[PreTrainedModel], Mapping[str, float]],
    progress: ProgressFn,
    max_steps: int | None = None,
) -> list[float]:
    """Run one base-LM recipe into ``out`` (or replay its first ``max_steps`` steps).

    Args:
        out: the folder to write (``config.json``, ``model.safetensors``, ``training.json``).
        method: the method that ships the artefact (names the command in ``training.json``).
        name: the artefact's name.
        config: the recipe's dataclass config, recorded in ``training.json``.
        steps: the recipe's number of steps (for progress).
        train: the training loop.
        quality: the trained model's quality numbers, recorded in ``training.json``.
        progress: called as ``progress(name, done, steps)`` every 50 steps and at the end.
        max_steps: stop after this many steps and write nothing (replays the first steps).

    Returns:
        The per-step training losses.
    """

    def log(step: int, _loss: float) -> None:
        if (step + 1) % 50 == 0 or step + 1 == steps:
            progress(name, step + 1, steps)

    run = RecipeRun(out, replay=max_steps is not None)
    if max_steps is not None:
        return train(steps=max_steps, log=log)[1]
    model, losses = train(log=log, state=run.state, checkpoint=run.checkpoint)
    scores = dict(quality(model))
    model.save_pretrained(out)
    # the loaders build the generation config from config.json; ship only the three files
    (Path(out) / "generation_config.json").unlink(missing_ok=True)
    run.finish(
        command=f"iclr25 pretrain {method} {name} --out {out}",
        loss_curve=losses,
        quality=scores,
        config=asdict(config),
    )
    return losses
