"""Fit the shipped generators' validation curves with a power law and read what the convergence
precondition would say of longer runs at the same constant learning rate.

For v(t) = v_inf + A t^(-alpha) read at T/40, 2T/40, ..., T, the move over the last fifth divided by
the drop since the first reading does not depend on T: the curve has the same shape at every
length. A power law that fits therefore puts the plateau rule's fraction at the same value for
every budget. The exponential v_inf + A exp(-t / tau) is fitted beside it: it does reach a plateau,
and the table gives the fraction it predicts for runs of 20,000 and 40,000 steps.

Usage: python experiments/bigr_power_law.py
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import curve_fit

from iclr25._core.convergence import read_curve
from iclr25._core.pretrained import read_training
from iclr25.methods.bigr.generators import ARMS, SHIPPED_SEEDS, generators_dir


def power(t: np.ndarray, v_inf: float, a: float, alpha: float) -> np.ndarray:
    return v_inf + a * np.power(t, -alpha)


def exponential(t: np.ndarray, v_inf: float, a: float, tau: float) -> np.ndarray:
    return v_inf + a * np.exp(-t / tau)


def plateau_fraction(steps: np.ndarray, values: np.ndarray) -> float:
    r = read_curve(list(steps), list(values), mode="min")
    return r.plateau_gap / (values[0] - r.best)


def main() -> None:
    print(
        "| seed | arm | measured | power law: alpha | rms | fraction at 10k / 40k "
        "| exponential: tau | rms | fraction at 20k / 40k |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for seed in SHIPPED_SEEDS:
        arms = read_training(generators_dir(seed))["arms"]
        for arm in ARMS:
            t, v = np.array(arms[arm]["val_steps"]), np.array(arms[arm]["val_curve"])
            fit = t >= t[0] * 2  # the first reading sits on the initial fall
            p, _ = curve_fit(power, t[fit], v[fit], p0=[v[-1] * 0.8, v[0], 0.3], maxfev=50_000)
            e, _ = curve_fit(exponential, t[fit], v[fit], p0=[v[-1], v[0] - v[-1], t[-1] / 4], maxfev=50_000)
            rms_p = float(np.sqrt(np.mean((power(t[fit], *p) - v[fit]) ** 2)))
            rms_e = float(np.sqrt(np.mean((exponential(t[fit], *e) - v[fit]) ** 2)))
            ahead = {}
            for total in (10_000, 20_000, 40_000):
                grid = np.arange(1, 41) * total / 40
                ahead[total] = (
                    plateau_fraction(grid, power(grid, *p)),
                    plateau_fraction(grid, exponential(grid, *e)),
                )
            print(
                f"| {seed} | {arm} | {plateau_fraction(t, v):.2%} | {p[2]:.3f} | {rms_p:.1e} | "
                f"{ahead[10_000][0]:.2%} / {ahead[40_000][0]:.2%} | {e[2]:,.0f} | {rms_e:.1e} | "
                f"{ahead[20_000][1]:.2%} / {ahead[40_000][1]:.2%} |"
            )


if __name__ == "__main__":
    main()
