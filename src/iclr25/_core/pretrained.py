"""Shipped foundations: what a paper takes as pretrained, trained once here and shipped.

A method that needs a pretrained part (a base language model, a codec, a tokenizer) names it as
an :class:`Artefact` in the registry. Its *recipe* trains it from scratch, deterministically,
and writes one folder, ``methods/<method>/pretrained/<artefact>/``:

- ``config.json``: what the loader needs to build the model;
- ``model.safetensors``: the weights (no pickles in the package);
- ``training.json``: how it was made: ``command``, ``commit``, ``steps``, ``wall_seconds``,
  ``loss_curve`` (one loss per training step), ``quality`` (named final metrics), and anything
  else the recipe records.

``iclr25 pretrain METHOD [ARTEFACT] --out DIR`` runs a recipe; a test per artefact replays its
first steps and matches the recorded losses. A recipe is a function::

    recipe(out: Path, *, progress: ProgressFn, max_steps: int | None = None) -> list[float]

that trains into ``out`` and returns the per-step losses. With ``max_steps`` it stops after that
many steps and writes nothing (the replay test's mode). A :class:`RecipeRun` keeps a recipe's
books: the state to resume from (an interrupted run checkpoints into ``out`` and picks up from
there), the wall time across resumptions, and the final ``training.json``.
"""

from __future__ import annotations

import importlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iclr25._core.env import git_state

__all__ = [
    "ARTEFACT_FILES",
    "TRAINING_KEYS",
    "Artefact",
    "ArtefactMissingError",
    "RecipeRun",
    "artefact_dir",
    "clear_progress",
    "load_progress",
    "read_training",
    "require_artefact",
    "save_progress",
    "write_training",
]

ARTEFACT_FILES = ("config.json", "model.safetensors", "training.json")
TRAINING_KEYS = ("command", "commit", "steps", "wall_seconds", "loss_curve", "quality")
_METHODS = Path(__file__).resolve().parents[1] / "methods"
_PROGRESS = "resume.pt"  # a checkpoint of an unfinished run, in the run's --out folder only


@dataclass(frozen=True)
class Artefact:
    """A pretrained part a method ships.

    Args:
        method: the registry name of the method that ships it.
        name: the artefact's folder name under ``methods/<method>/pretrained/``.
        recipe: "module:function" of the recipe that trains it (see the module docstring).
        about: one line: what it is and what it is trained on.
        expected_s: expected wall time of the whole recipe on one core, shown by
            ``iclr25 list`` and ``iclr25 pretrain``.
        replay_steps: how many first steps the replay test re-runs.
    """

    method: str
    name: str
    recipe: str
    about: str
    expected_s: float = 600.0
    replay_steps: int = 20

    @property
    def path(self) -> Path:
        """The shipped folder."""
        return artefact_dir(self.method, self.name)

    def load_recipe(self) -> Callable[..., list[float]]:
        """Import the recipe function."""
        module, attr = self.recipe.split(":")
        return getattr(importlib.import_module(module), attr)


class ArtefactMissingError(FileNotFoundError):
    """A shipped artefact's folder or one of its files is missing."""


def artefact_dir(method: str, name: str) -> Path:
    """The shipped folder ``methods/<method>/pretrained/<name>/`` inside the package."""
    return _METHODS / method / "pretrained" / name


def require_artefact(directory: str | os.PathLike[str], *, method: str = "", name: str = "") -> Path:
    """Check that an artefact folder holds its three files and return it.

    Args:
        directory: the folder (a shipped one, or one written by ``iclr25 pretrain``).
        method: the method that ships it (names the command that rebuilds it in the error).
        name: the artefact's name.

    Raises:
        ArtefactMissingError: the folder or a file is missing; the message names the files and
            the command that trains it again.
    """
    d = Path(directory)
    missing = [f for f in ARTEFACT_FILES if not (d / f).is_file()]
    if missing:
        how = f"; `iclr25 pretrain {method} {name} --out {d}` trains it" if method and name else ""
        raise ArtefactMissingError(f"pretrained folder {str(d)!r} lacks {', '.join(missing)}{how}")
    return d


def read_training(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``training.json`` of an artefact folder.

    Raises:
        ArtefactMissingError: no ``training.json``.
        ValueError: it lacks one of :data:`TRAINING_KEYS`.
    """
    path = Path(directory) / "training.json"
    if not path.is_file():
        raise ArtefactMissingError(f"{str(path)!r} does not exist")
    record = json.loads(path.read_text())
    lacking = [k for k in TRAINING_KEYS if k not in record]
    if lacking:
        raise ValueError(f"{path} lacks {', '.join(lacking)}")
    return record


def write_training(
    directory: str | os.PathLike[str],
    *,
    command: str,
    loss_curve: Sequence[float],
    wall_seconds: float,
    quality: Mapping[str, float],
    **extra: Any,
) -> Path:
    """Write ``training.json``: the command, the commit it ran at, the steps, the wall time, the
    per-step losses, the final quality metrics, and ``extra`` (e.g. the recipe's config).

    Returns:
        The file's path.
    """
    git = git_state()
    commit = git["sha"] and git["sha"] + (" (dirty)" if git["dirty"] else "")
    record = {
        "command": command,
        "commit": commit,
        "steps": len(loss_curve),
        "wall_seconds": round(float(wall_seconds), 1),
        "quality": {k: float(v) for k, v in quality.items()},
        **extra,
        "loss_curve": [float(v) for v in loss_curve],
    }
    path = Path(directory) / "training.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def save_progress(out: str | os.PathLike[str], state: Mapping[str, Any]) -> Path:
    """Checkpoint an unfinished recipe run (model and optimiser states, step, losses, RNG states)
    into ``out/resume.pt``. The file lives only in the run's output folder, never in the package,
    and :func:`clear_progress` removes it when the run finishes."""
    import torch

    path = Path(out) / _PROGRESS
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(dict(state), tmp)
    tmp.replace(path)  # a run killed while writing keeps the previous checkpoint
    return path


def load_progress(out: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The checkpoint :func:`save_progress` wrote into ``out``, or ``None`` when there is none."""
    import torch

    path = Path(out) / _PROGRESS
    return torch.load(path, weights_only=False) if path.is_file() else None


def clear_progress(out: str | os.PathLike[str]) -> None:
    """Remove the checkpoint of a finished run."""
    (Path(out) / _PROGRESS).unlink(missing_ok=True)


class RecipeRun:
    """The book-keeping of one recipe run into ``out``.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> run = RecipeRun(out, replay=False)
        >>> run.state is None  # nothing to resume
        True
        >>> run.checkpoint({"step": 100})
        >>> RecipeRun(out, replay=False).state["step"]  # a second call resumes
        100
        >>> path = run.finish(command="iclr25 pretrain m a", loss_curve=[1.0, 0.5], quality={"acc": 1.0})
        >>> read_training(out)["steps"], load_progress(out)
        (2, None)

    Args:
        out: the folder the recipe writes.
        replay: True when the recipe only replays its first steps (``max_steps`` given): no
            resumption, no checkpoints, nothing written.
    """

    def __init__(self, out: str | os.PathLike[str], *, replay: bool) -> None:
        self.out = Path(out)
        self.replay = replay
        self._start = time.perf_counter()
        #: The state :meth:`checkpoint` saved in an earlier, interrupted run (``None`` if none).
        self.state = None if replay else load_progress(self.out)
        self._spent = float(self.state["wall_seconds"]) if self.state is not None else 0.0

    @property
    def wall_seconds(self) -> float:
        """Wall time of the whole run, earlier interrupted parts included."""
        return self._spent + time.perf_counter() - self._start

    def checkpoint(self, state: Mapping[str, Any]) -> None:
        """Save the training state (no-op when replaying)."""
        if not self.replay:
            save_progress(self.out, {**state, "wall_seconds": self.wall_seconds})

    def finish(
        self, *, command: str, loss_curve: Sequence[float], quality: Mapping[str, float], **extra: Any
    ) -> Path:
        """Write ``training.json`` (with the thread count and torch version) and drop the checkpoint.

        Returns:
            The path of ``training.json``.
        """
        import torch

        path = write_training(
            self.out,
            command=command,
            loss_curve=loss_curve,
            wall_seconds=self.wall_seconds,
            quality=quality,
            threads=torch.get_num_threads(),
            torch=torch.__version__,
            **extra,
        )
        clear_progress(self.out)
        return path
