"""A snapshot of the environment a report was made in.

Numbers from floating-point training depend on the kernels that compute them: the same code
and seed give bit-identical numbers only with the same package versions on the same CPU type.
So ``env.json`` records every installed package, the CPU's model and instruction-set flags,
torch's build and the CPU capability it dispatches to, and the BLAS/LAPACK and OpenMP libraries
loaded (via threadpoolctl), with the environment variables that choose kernels.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["changed_since", "cpu_info", "git_state", "installed_packages", "kernel_info", "snapshot"]

_PACKAGES = ("iclr25", "torch", "numpy", "scipy", "scikit-learn", "transformers", "matplotlib")

#: Environment variables that choose numerical kernels or thread counts.
_KERNEL_VARIABLES = (
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "ATEN_CPU_CAPABILITY",
    "DNNL_MAX_CPU_ISA",
)


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


def installed_packages() -> dict[str, str]:
    """Every installed distribution, name -> version, sorted by name (names lower-case)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name:
            found[name] = dist.version
    return dict(sorted(found.items()))


def cpu_info() -> dict[str, Any]:
    """The CPU's model name, vendor, family/model/stepping and instruction-set flags.

    Read from ``/proc/cpuinfo`` on Linux; elsewhere only what :mod:`platform` knows.
    """
    info: dict[str, Any] = {"model": platform.processor() or None, "flags": []}
    path = Path("/proc/cpuinfo")
    if not path.is_file():
        return info
    fields: dict[str, str] = {}
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            break  # the first processor's block is enough: the others are the same type
        key, _, val = line.partition(":")
        fields[key.strip()] = val.strip()
    info.update(
        model=fields.get("model name") or info["model"],
        vendor=fields.get("vendor_id"),
        family=fields.get("cpu family"),
        model_number=fields.get("model"),
        stepping=fields.get("stepping"),
        flags=sorted(fields.get("flags", "").split()),
    )
    return info


def _plain(value: Any) -> str | int | float | bool | None:
    """A JSON-ready field of threadpoolctl's info (a library may report its version as a getter)."""
    if callable(value):
        try:
            value = value()
        except Exception:  # a getter that fails says nothing: record no version
            return None
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def kernel_info() -> dict[str, Any]:
    """The numerical libraries loaded and the kernels they use.

    ``threadpools``: the BLAS/LAPACK and OpenMP libraries threadpoolctl finds (name, version,
    the kernel architecture OpenBLAS chose). ``torch``: the CPU capability torch dispatches to
    (e.g. AVX512), whether MKL and oneDNN are there, and its build configuration. ``variables``:
    the environment variables that select kernels or threads.
    """
    info: dict[str, Any] = {"variables": {k: os.environ[k] for k in _KERNEL_VARIABLES if k in os.environ}}
    for module in ("numpy", "scipy.linalg", "torch"):  # load their libraries, so threadpoolctl sees them
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    try:
        import threadpoolctl

        keep = ("user_api", "internal_api", "prefix", "version", "threading_layer", "architecture")
        info["threadpools"] = [
            {k: _plain(lib.get(k)) for k in keep} | {"file": Path(lib.get("filepath") or "").name}
            for lib in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        info["threadpools"] = None
    try:
        import torch

        info["torch"] = {
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "mkl": torch.backends.mkl.is_available(),
            "mkldnn": torch.backends.mkldnn.is_available(),
            "config": torch.__config__.show().strip().splitlines(),
        }
    except ImportError:
        info["torch"] = None
    return info


def snapshot() -> dict[str, Any]:
    """Python, platform, CPU (model and flags), threads, accelerator, every installed package,
    the numerical kernels in use, and git state."""
    info: dict[str, Any] = {
        "time": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "cpu": cpu_info(),
        "packages": {p: _version(p) for p in _PACKAGES},
        "installed": installed_packages(),
        "kernels": kernel_info(),
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
