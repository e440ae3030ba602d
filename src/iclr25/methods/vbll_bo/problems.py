"""Test problems: ``NNDraw``, a function drawn from a random neural network, and BoTorch benchmarks.

*Bayesian Optimization via Continual Variational Last Layer Training*, Paul Brunzema, Mikkel Jordahn,
John Willes, Sebastian Trimpe, Jasper Snoek, James Harrison, ICLR 2025, arXiv:2412.09477.

Implements the "NNdraw" benchmark family of the paper's experiments (Sec. 5): an objective with
complex, non-stationary correlations obtained as one draw of a random MLP on [0, 1]^d. The exact
construction is not published; ours is a seeded MLP (``depth`` layers of width ``width``, tanh or ReLU,
weights and biases N(0, weight_var/fan_in), inputs centred and scaled to unit variance), maximised,
with the optimum from 64-start L-BFGS-B on the known function. The default (tanh, weight_var 1) is
smooth and close to a draw from a GP with a stationary kernel; ReLU with weight_var 4 is piecewise
linear with kinks along random hyperplanes, where a stationary kernel is misspecified. Branin,
Hartmann and Ackley come from BoTorch.

References:
    arXiv:2412.09477, Sec. 5 (benchmarks).
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from iclr25._core.registry import require

__all__ = ["NNDraw", "benchmark", "simple_regret"]

_synthetic = require("botorch.test_functions.synthetic", "vbll_bo")


class NNDraw(_synthetic.SyntheticTestFunction):
    """A function drawn from a random tanh or ReLU network on [0, 1]^d (to be maximised).

    Args:
        dim: input dimension d.
        width: hidden width.
        depth: number of hidden layers.
        seed: the draw.
        activation: ``"tanh"`` (smooth) or ``"relu"`` (piecewise linear, non-stationary).
        weight_var: weights and biases are drawn N(0, weight_var / fan_in).
        noise_std: optional observation noise.
        negate: negate the function (BoTorch convention).
        dtype: dtype of the bounds and weights.

    Example:
        >>> f = NNDraw(3, seed=0)
        >>> y = f(torch.rand(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1)))
        >>> y.shape, bool((y <= f.optimal_value + 1e-9).all())
        (torch.Size([5]), True)
    """

    _check_grad_at_opt = False

    def __init__(
        self,
        dim: int,
        width: int = 50,
        depth: int = 2,
        seed: int = 0,
        activation: Literal["tanh", "relu"] = "tanh",
        weight_var: float = 1.0,
        noise_std: float | None = None,
        negate: bool = False,
        dtype: torch.dtype = torch.double,
    ) -> None:
        if dim < 1 or width < 1 or depth < 1:
            raise ValueError(f"dim, width and depth must be >= 1, got {dim}, {width}, {depth}")
        if activation not in ("tanh", "relu"):
            raise ValueError(f"activation must be 'tanh' or 'relu', got {activation!r}")
        if not weight_var > 0:
            raise ValueError(f"weight_var must be > 0, got {weight_var}")
        self.activation = activation
        self.dim = dim
        self.continuous_inds = list(range(dim))
        self.discrete_inds: list[int] = []
        self.categorical_inds: list[int] = []
        super().__init__(noise_std=noise_std, negate=negate, bounds=[(0.0, 1.0)] * dim, dtype=dtype)
        g = torch.Generator().manual_seed(int(seed))
        sizes = [dim] + [width] * depth + [1]
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            scale = math.sqrt(weight_var / a)  # std of N(0, weight_var / fan_in)
            self.register_buffer(f"w{i}", torch.randn(b, a, generator=g, dtype=dtype) * scale)
            self.register_buffer(f"b{i}", torch.randn(b, generator=g, dtype=dtype) * scale)
        self._n_layers = len(sizes) - 1
        self._optimal_value = self._find_max(g)
        self._seed = seed

    def _evaluate_true(self, X: Tensor) -> Tensor:
        h = math.sqrt(3.0) * (2.0 * X - 1.0)  # uniform [0,1] -> zero mean, unit variance
        for i in range(self._n_layers):
            h = h @ getattr(self, f"w{i}").transpose(-1, -2) + getattr(self, f"b{i}")
            if i < self._n_layers - 1:
                h = torch.tanh(h) if self.activation == "tanh" else torch.relu(h)
        return h[..., 0]

    def _find_max(self, g: torch.Generator, starts: int = 64, raw: int = 4096) -> float:
        optimize = require("scipy.optimize", "vbll_bo")
        dtype = self.bounds.dtype
        with torch.no_grad():
            pts = torch.rand(raw, self.dim, generator=g, dtype=dtype)
            vals = self._evaluate_true(pts)
        best = float(vals.max())

        starts_x = pts[torch.argsort(vals, descending=True)[:starts]]  # (starts, d)

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            # the starts are independent, so one L-BFGS-B run on their sum optimises each of them
            xt = torch.tensor(x, dtype=dtype).reshape(starts_x.shape).requires_grad_(True)
            v = -self._evaluate_true(xt).sum()
            (grad,) = torch.autograd.grad(v, xt)
            return float(v.detach()), grad.reshape(-1).cpu().numpy()

        res = optimize.minimize(
            fun,
            starts_x.reshape(-1).cpu().numpy(),
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, 1.0)] * starts_x.numel(),
        )
        with torch.no_grad():
            xs = torch.as_tensor(res.x, dtype=dtype).reshape(starts_x.shape).clamp(0.0, 1.0)
            best = max(best, float(self._evaluate_true(xs).max()))
        return best


def benchmark(name: str, *, dim: int | None = None, seed: int = 0) -> object:
    """A maximisation problem by name: ``"nndraw"``, ``"branin"``, ``"hartmann"`` or ``"ackley"``.

    BoTorch's minimisation benchmarks are negated so that every problem is maximised.

    Args:
        name: problem name.
        dim: dimension (NNDraw and Ackley; Hartmann takes 6 or 3).
        seed: the NNDraw draw.

    Returns:
        A BoTorch ``SyntheticTestFunction`` with ``optimal_value`` the maximum.

    Example:
        >>> round(benchmark("branin").optimal_value, 6)
        -0.397887
    """
    name = name.lower()
    if name == "nndraw":
        return NNDraw(dim or 10, seed=seed)
    if name == "branin":
        return _synthetic.Branin(negate=True)
    if name == "hartmann":
        return _synthetic.Hartmann(dim=dim or 6, negate=True)
    if name == "ackley":
        return _synthetic.Ackley(dim=dim or 2, negate=True)
    raise ValueError(f"unknown problem {name!r}; known: nndraw, branin, hartmann, ackley")


def simple_regret(problem: object, Y: Tensor) -> Tensor:
    """f* - max_{t <= i} y_t for each i (maximisation), shape ``(n,)``."""
    best = torch.cummax(Y.reshape(-1), dim=0).values
    return problem.optimal_value - best  # type: ignore[attr-defined]
