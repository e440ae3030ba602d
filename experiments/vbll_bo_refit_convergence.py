"""How converged is a from-scratch VBLL refit, under the claim's schedule and the paper's?

On 20 and 50 uniform points of the claim's two V3 problems (ReLU NNDraw-10D, draw 1000, and
Branin), one VBLL surrogate is fitted from the same initialisation under three schedules: the
claim's long V3 schedule (lr 1e-2, at most 1,000 epochs, patience 100), the same three times as long
(3,000 epochs, patience 300) and the paper's (lr 1e-3, at most 10,000 epochs, patience 100). Printed
per pair: the final training losses (nats per point, standardised units) and their gap, the epochs
run, and how far the other fit moves the posterior mean over 1,000 test points of the box: RMSE over
the output's std, and the mean of |change| over the first fit's posterior std. Usage:
``python experiments/vbll_bo_refit_convergence.py [--epochs 1000]``.
"""

from __future__ import annotations

import argparse

import torch
from botorch.models import transforms as tf

from iclr25.methods.vbll_bo import ClaimConfig, FitConfig, NNDraw, VBLLModel, benchmark

F64 = torch.float64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1000, help="epoch cap of the claim's V3 schedule")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = ClaimConfig()
    schedules = {
        "claim": FitConfig(max_epochs=args.epochs, patience=cfg.refit_patience, lr=cfg.bo_lr),
        "claim x3": FitConfig(max_epochs=3 * args.epochs, patience=3 * cfg.refit_patience, lr=cfg.bo_lr),
        "paper": FitConfig(max_epochs=10_000, patience=100, lr=1e-3),
    }
    problems = {
        "ReLU NNDraw-10D": NNDraw(cfg.ns_dim, seed=1000, activation="relu", weight_var=cfg.ns_weight_var),
        "Branin": benchmark("branin"),
    }
    for title, problem in problems.items():
        bounds = problem.bounds.to(F64)
        g = torch.Generator().manual_seed(0)
        X = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(50, bounds.shape[1], generator=g, dtype=F64)
        Y = problem(X).unsqueeze(-1).to(F64)
        X_test = bounds[0] + (bounds[1] - bounds[0]) * torch.rand(
            1000, bounds.shape[1], generator=g, dtype=F64
        )
        for n in (20, 50):
            fits = {}
            for name, schedule in schedules.items():
                model = VBLLModel(
                    X[:n], Y[:n], width=cfg.width, depth=cfg.depth,
                    input_transform=tf.Normalize(X.shape[-1], bounds=bounds),
                    outcome_transform=tf.Standardize(1), generator=torch.Generator().manual_seed(7 + n),
                )  # fmt: skip
                result = model.fit(schedule)
                with torch.no_grad():
                    post = model.posterior(X_test)
                fits[name] = (result, post.mean[:, 0], post.variance[:, 0].sqrt())
            base, mean, std = fits["claim"]
            for name in ("claim x3", "paper"):
                other, other_mean, _ = fits[name]
                change = mean - other_mean
                print(
                    f"{title}, n={n}, claim vs {name}: loss {base.best_loss:.3f} vs {other.best_loss:.3f} "
                    f"(gap {base.best_loss - other.best_loss:.3f}), "
                    f"epochs {base.n_epochs} vs {other.n_epochs}, "
                    f"mean change RMSE / std(y) {float(change.pow(2).mean().sqrt() / Y[:n].std()):.3f}, "
                    f"mean |change| / posterior std {float((change.abs() / std).mean()):.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
