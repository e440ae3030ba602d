"""Benchmark of coreset spectral clustering against the coreset-sc wheel on large SBMs.

Usage (the README's table):
    .venv/bin/python experiments/coreset_sc_benchmark.py --sizes 100000 1000000

Graphs: for each θσ of --theta-sigmas (default 0 and 0.5) an SBM with k blocks, about --degree
intra-block and --inter-degree inter-block neighbours per vertex; θσ = 0 is the plain SBM, θσ > 0 the
degree-corrected one with degree parameters θ log-normal (log-sd θσ). The coreset ratio defaults to
8/degree, the README's density rule (ratio × intra-degree ≳ 8) at its limit.

Each graph is generated once, in its own process, and written to a temporary .npz file. Each method then
fits in a fresh process that loads the file, converts it to the method's input type, and only then starts
the clock and the memory count: the peak resident memory of the fit alone is the high-water mark of the
process after it was reset to the current resident size (Linux ``/proc/self/clear_refs``), minus that
size. This also counts the wheel's Rust allocations, which tracemalloc cannot see. Rows, all on the same
graph: ``wheel`` (the official coreset-sc package, if installed; it cannot be seeded), ``csc_power`` (our
code in the paper's mode: k-means on the raw power-method rows, as the wheel) and ``csc`` (our estimator's
defaults apart from the coreset ratio; at these sizes the default spectral step is the power method with
rows scaled to unit length, and coreset vertices without a coreset neighbour are left to the labelling
step), so each row says what it changes from the row above it. The results print as
JSON lines, then as a Markdown table with the machine's load before and after.
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
    """Draw the SBM once and write it (``graph.npz``, ``labels.npy``) to ``out``."""
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
        degree_corrected=theta_sigma > 0,
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
    """Fit one method on the stored graph in this process; time and measure the fit alone."""
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
        "spectral_backend": getattr(est, "spectral_backend_", "power"),
    }


_NAMES = {
    "wheel": "coreset-sc 0.1.5 wheel",
    "csc_power": 'ours, paper\'s mode (`spectral_backend="power"`)',
    "csc": "ours, defaults",
}


def _changes(r: dict) -> str:
    """What a row changes from the row above it (wheel → ours in the paper's mode → our defaults)."""
    if r["method"] == "wheel":
        return "the official code: Rust seeding and labelling, k-means on raw power-method rows"
    if r["method"] == "csc_power":
        return "our code, same algorithm as the wheel (raw power-method rows)"
    backend = r.get("spectral_backend", "")
    rows = (
        "the same power-method rows scaled to unit length"
        if backend == "power_normalized"
        else f"`{backend}` (top-k eigenvectors, rows scaled to unit length)"
    )
    return (
        f"our default spectral step: {rows}; coreset vertices without a coreset neighbour labelled afterwards"
    )


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


def _cpu() -> str:
    """The CPU model (Linux), else the platform's processor string."""
    import platform

    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load(avg: tuple[float, float, float]) -> str:
    return ", ".join(f"{x:.2f}" for x in avg)


def _fmt_n(n: int) -> str:
    e = round(math.log10(n))
    return f"10{str(e).translate(str.maketrans('0123456789', '⁰¹²³⁴⁵⁶⁷⁸⁹'))}" if 10**e == n else str(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--degree", type=float, default=80.0, help="intra-block neighbours per vertex")
    ap.add_argument("--inter-degree", type=float, default=2.0, help="inter-block neighbours per vertex")
    ap.add_argument(
        "--theta-sigmas",
        type=float,
        nargs="+",
        default=[0.0, 0.5],
        help="log-sds of the degree parameters, one graph each (0: plain SBM)",
    )
    ap.add_argument("--ratio", type=float, default=None, help="coreset ratio (default 8/degree)")
    ap.add_argument("--methods", nargs="+", default=list(_NAMES), choices=list(_NAMES))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--generate", nargs=3, metavar=("N", "THETA_SIGMA", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument("--fit", nargs=4, metavar=("METHOD", "DIR", "K", "RATIO"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate:
        n, theta_sigma, out = int(args.generate[0]), float(args.generate[1]), Path(args.generate[2])
        info = generate(n, args.k, args.degree, args.inter_degree, theta_sigma, args.seed, out)
        print(json.dumps(info))
        return
    if args.fit:
        m, path, k, r = args.fit
        print(json.dumps(fit(m, Path(path), int(k), float(r), args.seed)))
        return
    ratio = args.ratio if args.ratio is not None else min(1.0, 8.0 / args.degree)
    common = ["--k", str(args.k), "--degree", str(args.degree), "--inter-degree", str(args.inter_degree)]
    common += ["--seed", str(args.seed)]
    methods = [m for m in _NAMES if m in args.methods]  # wheel, paper's mode, defaults: one change a row
    load_before = os.getloadavg()
    rows = []
    for theta_sigma in args.theta_sigmas:
        for n in args.sizes:
            with tempfile.TemporaryDirectory(prefix="csc-bench-") as tmp:
                graph = _run([*common, "--generate", str(n), str(theta_sigma), tmp], args.timeout)
                print(json.dumps({"n": n, "theta_sigma": theta_sigma, **graph}), flush=True)
                if "error" in graph:
                    continue
                for m in methods:
                    res = _run([*common, "--fit", m, tmp, str(args.k), str(ratio)], args.timeout)
                    res = {"n": n, "theta_sigma": theta_sigma, "k": args.k, "ratio": ratio, **graph, **res}
                    res["method"] = m
                    print(json.dumps(res), flush=True)
                    rows.append(res)
    load_after = os.getloadavg()
    print()
    print(
        f"SBMs: k = {args.k}, intra-degree ≈ {args.degree:g}, inter-degree ≈ {args.inter_degree:g}, "
        f"coreset ratio {ratio:.3g}, seed {args.seed}; {os.cpu_count()} cores ({_cpu()}); load average "
        f"(1, 5, 15 min) {_load(load_before)} before, {_load(load_after)} after"
    )
    print()
    print(
        "| θσ | n | mean neighbours | row | what it changes | fit (s) | fit peak memory (MB) "
        "| coreset vertices | ARI |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        head = f"| {r['theta_sigma']:g} | {_fmt_n(r['n'])} | {r.get('mean_neighbours', 0.0):.1f} "
        if "error" in r:
            print(f"{head}| {_NAMES[r['method']]} | — | — | — | — | {r['error']} |")
            continue
        mem = f"{r['fit_peak_mb']:.0f}" + ("" if r["peak_exact"] else " (process peak)")
        print(
            f"{head}| {_NAMES[r['method']]} | {_changes(r)} | {r['fit_s']:.1f} | {mem} | "
            f"{r['coreset_size']} | {r['ari']:.3f} |"
        )


if __name__ == "__main__":
    main()
