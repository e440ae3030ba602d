"""Thompson sampling with VBLL sample paths, optimised by multi-start L-BFGS-B.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.

Implements the Thompson-sampling acquisition of Sec. 3: one w ~ q(w) per path, so that
f(x) = w^T phi(x) is a closed-form, differentiable function; it is maximised in the box with
L-BFGS-B from the best of ``raw_samples`` uniform points, and a batch of q uses q independent paths.

References:
    arXiv:2412.09477, Sec. 3 (Thompson sampling with last-layer models).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import Tensor, nn

from iclr25._core.registry import require
from iclr25.common import rng

from .model import VBLLModel

__all__ = ["DEDUP_TOL", "maximize_path", "thompson_candidates"]

#: Two points are the same proposal when every coordinate differs by at most this fraction of its box side.
DEDUP_TOL = 1e-6


def _minimize(fun, x0, bounds):
    optimize = require("scipy.optimize", "vbll_bo")
    return optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds)


def maximize_path(
    path: nn.Module,
    bounds: Tensor,
    *,
    num_restarts: int = 10,
    raw_samples: int = 512,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, float]:
    """Maximise a sample path (its first output) in a box.

    Args:
        path: a sample path ``(..., d) -> (..., m)``: a :class:`ThompsonPath`, a GP pathwise sample,
            an ensemble member.
        bounds: ``(2, d)`` lower and upper bounds.
        num_restarts: L-BFGS-B runs, started from the best raw samples.
        raw_samples: uniform points scored to choose the starts.
        generator: randomness of the raw samples.

    Returns:
        ``(x, value)``: the best point ``(d,)`` and its path value. If every L-BFGS-B run fails,
        the best raw sample is returned.
    """
    lo, hi = bounds[0].to(torch.float64), bounds[1].to(torch.float64)
    d = lo.shape[-1]
    raw = lo + (hi - lo) * rng.rand(
        raw_samples, d, generator=generator, device=lo.device, dtype=torch.float64
    )
    with torch.no_grad():
        vals = path(raw)[..., 0]
    order = torch.argsort(vals, descending=True)[:num_restarts]
    best_x, best_v = raw[order[0]].clone(), float(vals[order[0]])
    box = list(zip(lo.tolist(), hi.tolist(), strict=True))

    starts = raw[order]  # (r, d)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        # independent starts: one L-BFGS-B run on the summed objective optimises each of them
        xt = torch.tensor(x, dtype=torch.float64, device=lo.device).reshape(starts.shape).requires_grad_(True)
        v = -path(xt)[..., 0].sum()
        (g,) = torch.autograd.grad(v, xt)
        return float(v.detach()), g.reshape(-1).cpu().numpy().astype(np.float64)

    try:
        res = _minimize(fun, starts.reshape(-1).cpu().numpy(), box * starts.shape[0])
        xs = torch.as_tensor(res.x, dtype=torch.float64, device=lo.device).reshape(starts.shape).clamp(lo, hi)
        with torch.no_grad():
            v = path(xs)[..., 0]
        i = int(torch.argmax(torch.nan_to_num(v, nan=-torch.inf)))
        if bool(torch.isfinite(v[i])) and float(v[i]) > best_v:
            best_x, best_v = xs[i], float(v[i])
    except (ValueError, RuntimeError, FloatingPointError, np.linalg.LinAlgError):
        pass  # fall back to the best raw sample
    return best_x, best_v


def thompson_candidates(
    model: VBLLModel,
    bounds: Tensor,
    q: int = 1,
    *,
    num_restarts: int = 10,
    raw_samples: int = 512,
    generator: torch.Generator | None = None,
    dedup: bool = False,
    dedup_tol: float = DEDUP_TOL,
    max_redraws: int = 10,
) -> Tensor:
    """q Thompson candidates from q independent sample paths of a VBLL surrogate.

    With ``dedup=True`` a candidate that lies within ``dedup_tol`` (a fraction of each box side, in
    every coordinate) of an observed input or of an earlier candidate of the batch is discarded and
    a new path is drawn, up to ``max_redraws`` times per candidate. Re-evaluating a point of a
    noise-free objective adds no information; a repeat is also a sign of an under-fitted surrogate
    whose paths all peak at the incumbent. If every redraw repeats a point, the last candidate is
    kept and a ``RuntimeWarning`` says so.

    Args:
        model: a fitted :class:`VBLLModel` (unbatched).
        bounds: ``(2, d)`` box.
        q: batch size (one path per candidate).
        num_restarts: L-BFGS-B restarts per path.
        raw_samples: raw samples per path.
        generator: randomness of the paths and raw samples.
        dedup: re-draw a path whose maximiser repeats an observed input or an earlier candidate.
        dedup_tol: the tolerance of ``dedup`` as a fraction of each box side (>= 0).
        max_redraws: new paths drawn per candidate at most (``dedup`` only, >= 1).

    Returns:
        ``(q, d)`` candidates inside the bounds.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> X = torch.rand(8, 2, dtype=torch.float64, generator=g)
        >>> model = VBLLModel(X, X[:, :1], width=8, depth=0, generator=g)
        >>> b = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
        >>> thompson_candidates(model, b, q=2, num_restarts=2, raw_samples=16, generator=g).shape
        torch.Size([2, 2])
    """
    if bounds.dim() != 2 or bounds.shape[0] != 2 or bounds.shape[1] != model.train_X.shape[-1]:
        raise ValueError(
            f"bounds must have shape (2, {model.train_X.shape[-1]}) (the input dimension), "
            f"got {tuple(bounds.shape)}"
        )
    if q < 1:
        raise ValueError(f"q must be >= 1, got {q}")
    if dedup_tol < 0:
        raise ValueError(f"dedup_tol must be >= 0, got {dedup_tol}")
    if max_redraws < 1:
        raise ValueError(f"max_redraws must be >= 1, got {max_redraws}")
    lo, hi = bounds[0].to(torch.float64), bounds[1].to(torch.float64)
    seen = model.train_X.detach().to(torch.float64)

    def repeats(x: Tensor) -> bool:
        gap = ((seen - x.reshape(1, -1)).abs() / (hi - lo)).amax(-1)
        return bool((gap <= dedup_tol).any())

    out = []
    for i in range(q):
        for _ in range(1 + (max_redraws if dedup else 0)):
            path = model.sample_path(generator)
            x, _ = maximize_path(
                path, bounds, num_restarts=num_restarts, raw_samples=raw_samples, generator=generator
            )
            if not (dedup and repeats(x)):
                break
        else:
            warnings.warn(
                f"Thompson candidate {i}: all {max_redraws} redrawn paths peak within {dedup_tol:g} of an "
                "observed point; the last one is returned",
                RuntimeWarning,
                stacklevel=2,
            )
        out.append(x)
        seen = torch.cat([seen, x.reshape(1, -1)])
    return torch.stack(out)
