"""Reading a trained arm honestly: its best validation step, or whether it reached a plateau.

A gate read while an arm is still climbing says nothing about the method (DESIGN rule 8c, 11).
A claim records each trained arm's validation curve and reads it with :func:`read_curve`; the
resulting :class:`CurveReading` gives the metrics a precondition gates (``plateau_gap``) and the
value to compare (``best`` for reading at the best validation step, ``final`` for reading at
equal compute), and :func:`converged` builds the precondition itself. :func:`curve_series`
turns the curves into a report figure.

Example:
    >>> r = read_curve([100, 200, 300, 400, 500], [0.2, 0.6, 0.79, 0.8, 0.8])
    >>> r.best, r.best_step, round(r.plateau_gap, 3)
    (0.8, 400.0, 0.0)
    >>> converged("method", 0.02).describe()
    'method.plateau_gap <= 0.02'
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from iclr25._core.claims import Criterion, Series, value

__all__ = ["CurveReading", "converged", "curve_series", "plateau_gap", "read_curve"]


def plateau_gap(values: Sequence[float], *, tail: float = 0.2) -> float:
    """How much a curve still moves over the last ``tail`` of training (absolute, metric units).

    The window is the last ``ceil(tail * len(values))`` points (at least two). The gap is
    ``|m_end - m_start|``, where ``m_start`` and ``m_end`` are the medians of the first and last
    quarter of the window (at least one point each), so one noisy evaluation does not decide it.
    A curve that still climbs, or one that falls (overfits), has a large gap.

    Args:
        values: the validation metric at increasing training steps.
        tail: the fraction of the curve read as its end ("the last fifth" by default).

    Returns:
        The gap; ``inf`` for a curve of fewer than two points or with a non-finite value in the
        window (no evidence of a plateau).

    Raises:
        ValueError: ``tail`` is not in (0, 1].
    """
    if not 0 < tail <= 1:
        raise ValueError(f"tail must be in (0, 1], got {tail}")
    if len(values) < 2:
        return math.inf
    width = max(2, math.ceil(tail * len(values)))
    window = [float(v) for v in values[-width:]]
    if not all(math.isfinite(v) for v in window):
        return math.inf
    k = max(1, width // 4)
    return abs(statistics.median(window[-k:]) - statistics.median(window[:k]))


@dataclass(frozen=True)
class CurveReading:
    """One arm's validation curve, read.

    Args:
        steps: training steps at which the metric was measured.
        values: the metric at those steps.
        mode: "max" when higher is better, "min" when lower is.
        best: the best value.
        best_step: the step where it was reached (the first, on ties).
        final: the last value.
        plateau_gap: :func:`plateau_gap` of the curve.
    """

    steps: tuple[float, ...]
    values: tuple[float, ...]
    mode: Literal["max", "min"]
    best: float
    best_step: float
    final: float
    plateau_gap: float

    def metrics(self, prefix: str = "") -> dict[str, float]:
        """``{prefix}best``, ``{prefix}best_step``, ``{prefix}final``, ``{prefix}plateau_gap``."""
        return {
            f"{prefix}best": self.best,
            f"{prefix}best_step": self.best_step,
            f"{prefix}final": self.final,
            f"{prefix}plateau_gap": self.plateau_gap,
        }


def read_curve(
    steps: Sequence[float],
    values: Sequence[float],
    *,
    mode: Literal["max", "min"] = "max",
    tail: float = 0.2,
) -> CurveReading:
    """Read a validation curve: its best point, its last point and its plateau gap.

    Args:
        steps: increasing training steps.
        values: the metric at each step (same length).
        mode: "max" if higher is better, "min" if lower is.
        tail: the fraction of the curve :func:`plateau_gap` reads.

    Returns:
        The :class:`CurveReading`.

    Raises:
        ValueError: empty or mismatched inputs, steps not increasing, or an unknown mode.
    """
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    if not values or len(steps) != len(values):
        raise ValueError(f"need one value per step, got {len(steps)} steps and {len(values)} values")
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError("steps must increase")
    finite = [(v, s) for s, v in zip(steps, values, strict=True) if math.isfinite(v)]
    if finite:
        pick = max if mode == "max" else min
        best, best_step = pick(finite, key=lambda vs: vs[0])
        # the first step reaching the best value, so ties read the earlier step
        best_step = next(s for v, s in finite if v == best)
    else:
        best, best_step = math.nan, math.nan
    return CurveReading(
        steps=tuple(float(s) for s in steps),
        values=tuple(float(v) for v in values),
        mode=mode,
        best=float(best),
        best_step=float(best_step),
        final=float(values[-1]),
        plateau_gap=plateau_gap(values, tail=tail),
    )


def converged(
    arm: str,
    epsilon: float,
    *,
    metric: str = "plateau_gap",
    name: str = "",
    explain: str = "",
    part: str = "",
) -> Criterion:
    """The precondition that ``arm`` plateaued: ``arm.metric <= epsilon``.

    When it fails, the verdict is INCONCLUSIVE with the reason class "not converged".

    Args:
        arm: the trained arm whose curve the claim read with :func:`read_curve`.
        epsilon: the largest change over the curve's last fifth that counts as a plateau, in the
            metric's units.
        metric: the arm's metric holding the gap (the claim stores ``CurveReading.metrics()``).
        name: the criterion's name (default ``"<arm>_converged"``).
        explain: what it means, for the report (a default sentence names the arm and epsilon).
        part: the part it belongs to, if any (preconditions cover every part anyway).
    """
    return value(
        f"{arm}.{metric}",
        "<=",
        epsilon,
        name=name or f"{arm}_converged",
        precondition=True,
        convergence=True,
        part=part,
        explain=explain
        or f"The {arm} arm has plateaued: its validation metric moved at most {epsilon:g} over "
        "the last fifth of training.",
    )


def curve_series(
    title: str,
    curves: Mapping[str, CurveReading],
    *,
    xlabel: str = "training step",
    ylabel: str = "validation metric",
) -> Series:
    """A report figure of several arms' validation curves, on the first curve's steps.

    Raises:
        ValueError: the curves were measured at different steps.
    """
    if not curves:
        raise ValueError("curve_series needs at least one curve")
    first = next(iter(curves.values()))
    for label, c in curves.items():
        if c.steps != first.steps:
            raise ValueError(f"curve {label!r} was measured at other steps than the first one")
    return Series(title, xlabel, ylabel, list(first.steps), {k: list(c.values) for k, c in curves.items()})
