"""Checkpoints of BiGR in the official layout: a ``torch.save`` dict ``{"model": ..., "ema": ...}``.

References:
    Hao et al., *BiGR*, ICLR 2025, arXiv:2410.14672; released generator files hold the trained
    weights under ``"model"`` and their EMA under ``"ema"`` (inference uses ``"ema"``). Paths are
    local; nothing is downloaded.
"""

from __future__ import annotations

import os

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
