"""Why CLM's sets at matched coverage are large on the molecule task (the SCOPE-Gen README's Diagnosis).

Usage:
    .venv/bin/python experiments/scope_gen_molecule_clm.py --seed 0 --splits 3 --alpha 0.3

Builds the claim check's molecule task for one seed and prints how informative its quality (QED)
is about admissibility and how many distinct molecules a prompt's samples hold. Then, on the
claim's first calibration/test splits, it calibrates SCOPE-Gen, tunes CLM to SCOPE-Gen's realised
calibration coverage (``CLM.match``), and prints CLM's selected (λ_sim, λ_qual, λ_stop), its test
coverage and mean set size beside SCOPE-Gen's, once with CLM's full grid (λ_sim on, as the claim
runs it) and once with λ_sim fixed at +∞ (no similarity rejection, the official molecule
configuration).
"""

from __future__ import annotations

import argparse

import numpy as np

from iclr25._core.seeding import numpy_rng
from iclr25.methods.scope_gen import CLM, ScopeGen, clm_losses, evaluate
from iclr25.methods.scope_gen.claim import _clm_arm, _make_task, _variants
from iclr25.methods.scope_gen.config import TASKS, ScopeGenCheckConfig


def main() -> None:
    """Print the molecule task's statistics and CLM's matched selections on a few splits."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", type=int, default=3)
    ap.add_argument("--alpha", type=float, default=0.3)
    args = ap.parse_args()
    cfg = ScopeGenCheckConfig()
    arr, m = _make_task("molecules", cfg, args.seed)
    q, s, lab = arr.qualities, arr.similarities, arr.labels
    distinct = np.mean([np.unique(s[i], axis=0).shape[0] for i in range(len(arr))])
    corr = np.corrcoef(q.ravel(), lab.ravel())[0, 1]
    print(
        f"{len(arr)} prompts, {m} samples each: {lab.mean():.3f} admissible, "
        f"{lab.sum(axis=1).mean():.1f} admissible and {distinct:.1f} distinct samples per prompt, "
        f"correlation of QED with admissibility {corr:.3f}"
    )
    table = _clm_arm(arr, m, cfg)
    no_sim = (np.array([np.inf]), table["grids"][1], table["grids"][2])
    grids = {
        "λ_sim on": (table["miss"], table["cost"], table["grids"]),
        "λ_sim off": (*clm_losses(q, s, lab, no_sim), no_sim),
    }
    task_id = TASKS.index("molecules")
    for r in range(args.splits):
        # The claim's split r of this task (the same permutation and pipeline seed).
        rng = numpy_rng(args.seed, 11, task_id, r)
        perm = rng.permutation(len(arr))
        cal, test = perm[: cfg.n_cal], perm[cfg.n_cal : cfg.n_cal + cfg.n_test]
        state = int(rng.integers(2**31))
        kw = _variants(cfg, args.alpha, m)["scope_gen"]
        model = ScopeGen(random_state=state, **kw).calibrate_arrays(q[cal], s[cal], arr.oracle(cal))
        ev = evaluate(model, q[test], s[test], lab[test])
        target = evaluate(model, q[cal], s[cal], lab[cal])["coverage"]
        print(
            f"split {r}: SCOPE-Gen coverage {ev['coverage']:.3f}, size {ev['size']:.2f}; "
            f"calibration coverage (CLM's target) {target:.3f}"
        )
        for name, (miss, cost, grid) in grids.items():
            clm = CLM(k_max=m, set_score=cfg.clm_set_score, random_state=state)
            clm.calibrate_losses(miss, cost, grid, rows=cal).match(1.0 - target)
            e = evaluate(clm, q[test], s[test], lab[test])
            print(
                f"  CLM matched, {name}: (λ_sim, λ_qual, λ_stop) = {clm.config_}, "
                f"coverage {e['coverage']:.3f}, size {e['size']:.2f}"
            )


if __name__ == "__main__":
    main()
