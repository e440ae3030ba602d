"""A torch function mode that fails what would fail on a GPU for device reasons, on any device.

Tests run paths with their tensors on the ``meta`` device under :class:`DeviceGuard`: a CPU
tensor meeting a meta one, or a CPU generator feeding a meta draw, raises as the same path
would on CUDA.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

__all__ = ["DeviceGuard"]

#: Ops that move or compare data between devices by design.
_CROSSING = {"to", "cpu", "cuda", "copy_", "_has_compatible_shallow_copy_type"}


class DeviceGuard(TorchFunctionMode):
    """Fail every torch op that would fail on a GPU for device reasons, on any device.

    An op fails when its tensor arguments live on more than one device (0-d CPU tensors, which
    CUDA kernels accept as scalars, and integer or boolean CPU index tensors of ``[]`` excepted),
    or when it draws from a ``torch.Generator`` on another device than the tensors it meets or
    the ``device=`` it creates on. Run a path with its tensors on ``meta`` under the guard and a
    CPU generator fed to a meta (later: CUDA) draw, or a CPU tensor meeting a meta one, raises.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name not in _CROSSING:
            flat = tree_flatten((args, kwargs))[0]
            if name in ("__getitem__", "__setitem__"):
                # CUDA tensors take CPU integer / boolean indices: only the data must agree
                idx = args[1] if len(args) > 1 else None
                index_ids = {id(t) for t in tree_flatten(idx)[0] if isinstance(t, torch.Tensor)}
                flat = [
                    t
                    for t in flat
                    if not (
                        id(t) in index_ids
                        and isinstance(t, torch.Tensor)
                        and t.device.type == "cpu"
                        and (t.dtype == torch.bool or not t.is_floating_point())
                    )
                ]
            devices = {
                t.device.type
                for t in flat
                if isinstance(t, torch.Tensor) and not (t.device.type == "cpu" and t.dim() == 0)
            }
            if len(devices) > 1:
                raise AssertionError(f"{name}: tensors on {sorted(devices)}")
            gen = kwargs.get("generator")
            if isinstance(gen, torch.Generator):
                where = set(devices)
                if kwargs.get("device") is not None:
                    where.add(torch.device(kwargs["device"]).type)
                if where and where != {gen.device.type}:
                    raise AssertionError(
                        f"{name}: generator on {gen.device.type}, tensors on {sorted(where)}"
                    )
        return func(*args, **kwargs)
