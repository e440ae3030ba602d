"""Checkpoints of BiGR in the official layout: a ``torch.save`` dict ``{"model": ..., "ema": ...}``,
and the state of an unfinished training run (for recipes that resume).

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672; released generator files hold the trained
    weights under ``"model"`` and their EMA under ``"ema"`` (inference uses ``"ema"``). Paths are
    local; nothing is downloaded.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

__all__ = ["load_state", "save_checkpoint"]


def save_checkpoint(path: str | os.PathLike[str], model: nn.Module, ema: nn.Module | None = None) -> None:
    """Write ``{"model": state_dict, "ema": state_dict}`` (the EMA defaults to the model itself)."""
    torch.save({"model": model.state_dict(), "ema": (ema or model).state_dict()}, path)


def load_state(model: nn.Module, path: str | os.PathLike[str], *, key: str | None = "ema") -> nn.Module:
    """Load weights from a local file into ``model`` (strict), with a clear key-mismatch error.

    Args:
        model: the module to fill.
        path: a local ``torch.save`` file.
        key: entry of the file with the state dict (``"ema"``/``"model"``), or None for a bare one.

    Returns:
        ``model``.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no checkpoint at {path} (weights are read from local paths only)")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if key is not None:
        if key not in blob:
            raise KeyError(f"checkpoint {path} has no {key!r} entry (has {sorted(blob)})")
        blob = blob[key]
    missing, unexpected = model.load_state_dict(blob, strict=False)
    if missing or unexpected:
        raise KeyError(
            f"checkpoint {path} does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    return model


def _train_state(
    step: int, losses: list[float], model: nn.Module, opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler | None, generator: torch.Generator | None,
) -> dict[str, Any]:  # fmt: skip
    """Everything a training loop needs to go on from ``step`` exactly as if never stopped: the
    weights, the optimiser and schedule states, the batch generator and torch's global RNG."""
    return {
        "step": step,
        "losses": list(losses),
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "scheduler": None if sched is None else sched.state_dict(),
        "generator": None if generator is None else generator.get_state(),
        "torch_rng": torch.get_rng_state(),
    }


def _restore_train_state(
    state: dict[str, Any], model: nn.Module, opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler | None, generator: torch.Generator | None,
) -> tuple[int, list[float]]:  # fmt: skip
    """Load what :func:`_train_state` saved; returns the next step and the losses so far."""
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if sched is not None:
        sched.load_state_dict(state["scheduler"])
    if generator is not None:
        generator.set_state(state["generator"])
    torch.set_rng_state(state["torch_rng"])
    return state["step"], list(state["losses"])
