"""Which claim metrics depend on the CPU's floating-point kernels, and by how much.

Runs the same claims twice on this machine, once with the kernels torch picks for this CPU and
once with MKL and oneDNN held to AVX2 (as on a CPU without AVX-512), then compares the two runs
seed by seed with ``iclr25 compare``'s logic. Same commit, same packages, same seeds: every
difference comes from the kernels' rounding.

    .venv/bin/python experiments/kernel_sensitivity.py --budget smoke --out reports/kernels

prints a Markdown table (claim · metrics compared · metrics that differ · largest relative
difference) and leaves both report folders under ``--out``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from iclr25._core.compare import compare_runs

#: MKL's and oneDNN's instruction-set caps: what an AVX2-only CPU would run.
AVX2_KERNELS = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "DNNL_MAX_CPU_ISA": "AVX2"}


def run(out: Path, budget: str, seeds: int, methods: list[str], extra_env: dict[str, str]) -> None:
    """One ``iclr25 check`` into ``out`` (its exit code says only whether all were SUPPORTED)."""
    env = {**os.environ, **extra_env}
    which = methods or ["--all"]
    cmd = [sys.executable, "-m", "iclr25", "check", *which, "--budget", budget, "--out", str(out)]
    if seeds:
        cmd += ["--seeds", str(seeds)]
    print("$", " ".join(f"{k}={v}" for k, v in extra_env.items()), " ".join(cmd), flush=True)
    subprocess.run(cmd, env=env, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the two report folders")
    parser.add_argument("--budget", default="smoke", help="smoke (minutes for all) or full (hours)")
    parser.add_argument("--seeds", type=int, default=0, help="seeds per claim (default: the budget's)")
    parser.add_argument("methods", nargs="*", help="methods (default: all)")
    args = parser.parse_args()
    native, avx2 = args.out / "native", args.out / "avx2"
    if not (native / "run.json").exists():
        run(native, args.budget, args.seeds, args.methods, {})
    if not (avx2 / "run.json").exists():
        run(avx2, args.budget, args.seeds, args.methods, AVX2_KERNELS)
    result = compare_runs(native, avx2)
    print(f"\n{args.budget} budget; native kernels vs MKL and oneDNN capped at AVX2\n")
    print("| claim | metrics compared | differ | largest relative difference |")
    print("|---|---|---|---|")
    for c in result.claims:
        worst = max(c.differing, key=lambda d: d.relative, default=None)
        where = (
            "—" if worst is None else f"{worst.relative:.1%} ({worst.metric}: {worst.a:.4g} → {worst.b:.4g})"
        )
        print(f"| {c.name} | {c.compared} | {len(c.differing)} | {where} |")
    for c in result.claims:
        moved = [(n, a, b) for n, a, b in c.medians if a != b and not (a != a and b != b)]
        if moved:
            cells = "; ".join(f"{n} {a:.4g} → {b:.4g}" for n, a, b in moved)
            print(f"\n{c.name}: criterion medians that moved: {cells}")


if __name__ == "__main__":
    main()
