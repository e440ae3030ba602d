"""Benchmark of coreset spectral clustering against the coreset-sc wheel on large degree-corrected SBMs.

Usage (the README's table):
    .venv/bin/python experiments/coreset_sc_benchmark.py --sizes 100000 1000000

Graph: a degree-corrected SBM with k blocks, degree parameters θ log-normal (σ = --theta-sigma), about
--degree intra-block neighbours and --inter-degree inter-block neighbours per vertex. The coreset ratio
defaults to 8/degree, the README's density rule (ratio × intra-degree ≳ 8) at its limit.

Each graph is generated once, in its own process, and written to a temporary .npz file. Each method then
fits in a fresh process that loads the file, converts it to the method's input type, and only then starts
the clock and the memory count: the peak resident memory of the fit alone is the high-water mark of the
process after it was reset to the current resident size (Linux ``/proc/self/clear_refs``), minus that
size. This also counts the wheel's Rust allocations, which tracemalloc cannot see. Methods: ``csc`` (ours,
estimator defaults apart from the coreset ratio), ``csc_power`` (ours with the paper's spectral step,
k-means on the raw power-method rows, as the wheel does) and ``wheel`` (the official coreset-sc package,
if installed; it cannot be seeded). The results print as JSON lines, then as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _memory_mb() -> dict[str, float]:
    """Current (VmRSS) and peak (VmHWM) resident memory of this process, in MB."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, val = line.split(":")
                out[key] = int(val.split()[0]) / 1024  # kB → MB
    return out


def _reset_peak() -> bool:
    """Reset the peak resident size to the current one (Linux ≥ 4.0); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def generate(
    n: int, k: int, degree: float, inter_degree: float, theta_sigma: float, seed: int, out: Path
) -> dict:
    import numpy as np
    import scipy.sparse as sp

    from iclr25.methods.coreset_sc import sbm

    n_per = n // k
    # The SBM draws p·C(n_per, 2) endpoint pairs per block; p = degree/(n_per − 1) gives `degree`
    # neighbours before deduplication (which removes few at these densities).
    p = min(1.0, degree / (n_per - 1))
    t0 = time.perf_counter()
    A, y = sbm(
        n_per,
        k,
        p,
        inter_degree / (n_per * k),
        degree_corrected=True,
        theta_sigma=theta_sigma,
        random_state=np.random.RandomState(seed),
    )
    gen_s = time.perf_counter() - t0
    sp.save_npz(out / "graph.npz", sp.csr_matrix(A), compressed=False)
    np.save(out / "labels.npy", y)
    return {
        "n": A.shape[0],
        "nnz": int(A.nnz),
        "mean_neighbours": (A.nnz - A.shape[0]) / A.shape[0],
        "gen_s": gen_s,
    }


def fit(method: str, path: Path, k: int, ratio: float, seed: int) -> dict:
    import numpy as np
    import scipy.sparse as sp
    from sklearn.metrics import adjusted_rand_score

    A = sp.load_npz(path / "graph.npz")
    y = np.load(path / "labels.npy")
    if method in ("csc", "csc_power"):
        from iclr25.methods.coreset_sc import CoresetSpectralClustering

        X = sp.csr_array(A)
        backend = "power" if method == "csc_power" else "auto"
        est = CoresetSpectralClustering(k, coreset_ratio=ratio, spectral_backend=backend, random_state=seed)
    elif method == "wheel":
        import coreset_sc

        X = sp.csr_matrix(A)
        est = coreset_sc.CoresetSpectralClustering(
            num_clusters=int(k), coreset_ratio=float(ratio), ignore_warnings=True
        )
    else:
        raise ValueError(f"unknown method {method!r}")
    del A
    base = _memory_mb()["VmRSS"]
    exact = _reset_peak()
    t0 = time.perf_counter()
    est.fit(X)
    fit_s = time.perf_counter() - t0
    peak = _memory_mb()["VmHWM"]
    labels = np.asarray(est.labels_, dtype=np.int64)
    return {
        "method": method,
        "fit_s": fit_s,
        "fit_peak_mb": peak - base,
        "peak_exact": exact,
        "input_mb": base,
        "coreset_size": int(np.asarray(est.coreset_indices_).size),
        "ari": float(adjusted_rand_score(y, labels)),
    }


_NAMES = {
    "csc": "ours (defaults)",
    "csc_power": 'ours, `spectral_backend="power"` (raw rows, as the paper)',
    "wheel": "coreset-sc 0.1.5 wheel",
}


def _run(args: list[str], timeout: float) -> dict:
    cmd = [sys.executable, __file__, *args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    text = out.stdout.strip()
    if out.returncode != 0 or not text:
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(text.splitlines()[-1])


def _fmt_n(n: int) -> str:
    e = round(math.log10(n))
    return f"10{str(e).translate(str.maketrans('0123456789', '⁰¹²³⁴⁵⁶⁷⁸⁹'))}" if 10**e == n else str(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--degree", type=float, default=80.0, help="intra-block neighbours per vertex")
    ap.add_argument("--inter-degree", type=float, default=2.0, help="inter-block neighbours per vertex")
    ap.add_argument("--theta-sigma", type=float, default=0.5, help="log-sd of the degree parameters")
    ap.add_argument("--ratio", type=float, default=None, help="coreset ratio (default 8/degree)")
    ap.add_argument("--methods", nargs="+", default=["csc", "csc_power", "wheel"], choices=list(_NAMES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--generate", nargs=2, metavar=("N", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--fit", nargs=4, metavar=("METHOD", "DIR", "K", "RATIO"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        n, out = int(args.generate[0]), Path(args.generate[1])
        info = generate(n, args.k, args.degree, args.inter_degree, args.theta_sigma, args.seed, out)
        print(json.dumps(info))
        return
    if args.fit:
        m, path, k, r = args.fit
        print(json.dumps(fit(m, Path(path), int(k), float(r), args.seed)))
        return
    ratio = args.ratio if args.ratio is not None else min(1.0, 8.0 / args.degree)
    common = ["--k", str(args.k), "--degree", str(args.degree), "--inter-degree", str(args.inter_degree)]
    common += ["--theta-sigma", str(args.theta_sigma), "--seed", str(args.seed)]
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory(prefix="csc-bench-") as tmp:
            graph = _run([*common, "--generate", str(n), tmp], args.timeout)
            print(json.dumps({"n": n, **graph}), flush=True)
            if "error" in graph:
                continue
            for m in args.methods:
                res = _run([*common, "--fit", m, tmp, str(args.k), str(ratio)], args.timeout)
                res = {"n": n, "k": args.k, "ratio": ratio, **graph, "method": m, **res}
                print(json.dumps(res), flush=True)
                rows.append(res)
    print()
    print(
        f"DC-SBM: k = {args.k}, θ log-normal σ = {args.theta_sigma}, intra-degree ≈ {args.degree:g}, "
        f"inter-degree ≈ {args.inter_degree:g}, coreset ratio {ratio:.3g}; {os.cpu_count()} cores"
    )
    print()
    print("| n | mean neighbours | method | fit (s) | fit peak memory (MB) | coreset vertices | ARI |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            nb = r.get("mean_neighbours", 0.0)
            print(f"| {_fmt_n(r['n'])} | {nb:.1f} | {r['method']} | — | — | — | {r['error']} |")
            continue
        mem = f"{r['fit_peak_mb']:.0f}" + ("" if r["peak_exact"] else " (process peak)")
        name = _NAMES[r["method"]]
        print(
            f"| {_fmt_n(r['n'])} | {r['mean_neighbours']:.1f} | {name} | {r['fit_s']:.1f} | {mem} | "
            f"{r['coreset_size']} | {r['ari']:.3f} |"
        )


if __name__ == "__main__":
    main()
