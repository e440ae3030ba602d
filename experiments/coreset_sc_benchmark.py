"""Benchmark of coreset spectral clustering: time, peak memory and ARI on large sparse SBMs.

Usage:
    .venv/bin/python experiments/coreset_sc_benchmark.py --sizes 10000 100000 --ks 100 1000 --ratio 0.05

Each run happens in a fresh subprocess so its peak resident memory (ru_maxrss) is its own. Methods:
``csc`` (ours), ``sklearn`` (SpectralClustering, only where n <= --sklearn-max-n), ``wheel`` (the
coreset-sc package, if installed). Graphs: SBM with average degree about --degree (most of it intra-block).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(method: str, n: int, k: int, ratio: float, degree: float, seed: int) -> dict:
    import numpy as np
    from sklearn.metrics import adjusted_rand_score

    from iclr25.methods.coreset_sc import (
        CoresetSpectralClustering,
        full_spectral_clustering,
        reference_coreset_sc,
        sbm,
    )

    n_per = n // k
    p = min(1.0, 0.9 * degree / n_per)
    q = 0.1 * degree / n
    t0 = time.perf_counter()
    A, y = sbm(n_per, k, p, q, random_state=np.random.RandomState(seed))
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if method == "csc":
        lab = CoresetSpectralClustering(k, coreset_ratio=ratio, random_state=seed).fit_predict(A)
    elif method == "sklearn":
        lab = full_spectral_clustering(A, k, random_state=seed)
    elif method == "wheel":
        lab = reference_coreset_sc(A, k, coreset_ratio=ratio)
    else:
        raise ValueError(method)
    fit_s = time.perf_counter() - t0
    return {
        "method": method,
        "n": A.shape[0],
        "k": k,
        "ratio": ratio,
        "avg_degree": A.nnz / A.shape[0],
        "gen_s": round(gen_s, 2),
        "fit_s": round(fit_s, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "ari": round(float(adjusted_rand_score(y, lab)), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--ks", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--ratio", type=float, default=0.05)
    ap.add_argument("--degree", type=float, default=20.0)
    ap.add_argument("--methods", nargs="+", default=["csc", "wheel", "sklearn"])
    ap.add_argument("--sklearn-max-n", type=int, default=10_000)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--one", nargs=5, metavar=("METHOD", "N", "K", "RATIO", "DEGREE"))
    args = ap.parse_args()
    if args.one:
        m, n, k, r, deg = args.one
        print(json.dumps(one(m, int(n), int(k), float(r), float(deg), args.seed)))
        return
    for n in args.sizes:
        for k in args.ks:
            if k * 10 > n:
                continue
            for m in args.methods:
                if m == "sklearn" and n > args.sklearn_max_n:
                    continue
                cmd = [sys.executable, __file__, "--seed", str(args.seed), "--one", m, str(n), str(k)]
                cmd += [str(args.ratio), str(args.degree)]
                try:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                    text = out.stdout.strip()
                    line = text.splitlines()[-1] if text else out.stderr.strip()[-300:]
                except subprocess.TimeoutExpired:
                    line = json.dumps({"method": m, "n": n, "k": k, "timeout_s": args.timeout})
                print(line, flush=True)


if __name__ == "__main__":
    main()
