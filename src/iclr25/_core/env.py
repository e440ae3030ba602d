"""A snapshot of the environment a report was made in."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["changed_since", "git_state", "snapshot"]

_PACKAGES = ("iclr25", "torch", "numpy", "scipy", "scikit-learn", "transformers", "matplotlib")


def _git(*args: str, cwd: str | os.PathLike[str]) -> str | None:
    """The output of ``git ARGS`` in ``cwd``, or ``None`` when git fails or is missing."""
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def git_state(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The git commit and whether the work tree is dirty (``None`` outside a checkout)."""
    where = Path(cwd) if cwd else Path(__file__).resolve().parent
    sha = _git("rev-parse", "HEAD", cwd=where)
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=where)
    if sha is None or status is None:
        return {"sha": None, "dirty": None}
    return {"sha": sha.strip(), "dirty": bool(status.strip())}


def changed_since(
    sha: str, paths: list[str], cwd: str | os.PathLike[str], exclude: list[str] = ()
) -> list[str] | None:
    """Files under ``paths`` that differ between commit ``sha`` and the work tree.

    Args:
        sha: a commit.
        paths: paths relative to the repository root.
        cwd: a folder inside the repository.
        exclude: paths to leave out (e.g. a README whose tables are generated).

    Returns:
        The changed files, or ``None`` when git or the commit is not available.
    """
    out = _git("diff", "--name-only", sha, "--", *paths, *(f":(exclude){p}" for p in exclude), cwd=cwd)
    return None if out is None else [line for line in out.splitlines() if line.strip()]


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def snapshot() -> dict[str, Any]:
    """Python, platform, CPU, threads, accelerator, package versions and git state."""
    info: dict[str, Any] = {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "packages": {p: _version(p) for p in _PACKAGES},
        "git": git_state(),
    }
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.is_available()
        info["cuda_device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        info["cuda"] = False
    return info
