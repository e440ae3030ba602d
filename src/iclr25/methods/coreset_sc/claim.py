"""Claim check: coreset spectral clustering avoids the local optima of coreset kernel k-means.

Paper: *Coreset Spectral Clustering*, Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun.
ICLR 2025, arXiv 2503.07227. Re-measures the headline of Sec. 5 (RQ2: CSC is far more accurate than
coreset kernel k-means on the same coreset) on planted SBMs built from the seed. The faster
construction of Sec. 4/5 RQ1 (the new seeding touches ``Õ(n·min(k, d_avg))`` kernel distances instead
of ``O(nk)``) is reported, not part of the checked statement: its counts follow from the algorithm and
wall-clock time never gates.

Negative controls: the same estimator on an SBM with q = p (no planted clusters, same mean degree), and
the CSC coreset labelled from uniformly random coreset labels (the spectral step broken).

C3 asks whether one of the paper's choices, the degree- and D²-weighted sampling of the coreset, matters:
on a degree-corrected SBM with heterogeneous degrees, CSC against the same pipeline with uniform
sampling, and as its negative control the paper's sampling probabilities handed to randomly permuted
vertices (the same distribution of scores, unrelated to the vertices they weight).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import platform
import time
import warnings
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    fails,
    no_progress,
    ratio,
    value,
)
from iclr25._core.claims import diff as diff_
from iclr25.methods.coreset_sc import (
    CoresetKernelKMeans,
    CoresetSpectralClustering,
    check_adjacency,
    coreset_graph,
    degrees,
    dense_kernel_seeding,
    fast_spectral_clustering,
    full_spectral_clustering,
    label_full_graph,
    nearest_point_labels,
    normalized_cut,
    reference_coreset_sc,
    sample_coreset,
    sampling_probabilities,
    sbm,
    sparse_kernel_seeding,
)
from iclr25.methods.coreset_sc.config import CoresetSCConfig

# numba (optional) is imported here, not lazily inside a fit, so that ``claim_scope`` finds it loaded
# and fixes its thread count like torch's and the BLAS pools'.
with contextlib.suppress(ImportError):
    import numba  # noqa: F401

__all__ = ["CLAIM", "run"]


def _ari(y: np.ndarray, lab: np.ndarray) -> float:
    return float(adjusted_rand_score(y, lab))


def _csc(n_clusters: int, **kw: Any) -> CoresetSpectralClustering:
    """The estimator with the paper's spectral step (fast SC by the power method), not ``"auto"``."""
    return CoresetSpectralClustering(n_clusters, spectral_backend="power", **kw)


def _graph(cfg: CoresetSCConfig, k: int, seed: int, stream: int) -> tuple[sp.csr_array, np.ndarray]:
    q = cfg.q if cfg.q is not None else 1.0 / (cfg.n_per * k)
    return sbm(cfg.n_per, k, cfg.p, q, random_state=np.random.RandomState([seed, stream]))


def _fit_pair(
    cfg: CoresetSCConfig, A: sp.csr_array, k: int, rs: int
) -> tuple[CoresetSpectralClustering, float, CoresetKernelKMeans, float]:
    common = dict(
        coreset_ratio=cfg.coreset_ratio, oversampling=cfg.oversampling, shift=cfg.shift, random_state=rs
    )
    t0 = time.perf_counter()
    csc = _csc(k, **common).fit(A)
    t1 = time.perf_counter()
    ckkm = CoresetKernelKMeans(k, n_init=cfg.ckkm_n_init, max_iter=cfg.ckkm_max_iter, **common).fit(A)
    t2 = time.perf_counter()
    return csc, t1 - t0, ckkm, t2 - t1


def _null_graph(cfg: CoresetSCConfig, A: sp.csr_array, seed: int) -> tuple[sp.csr_array, np.ndarray]:
    """An SBM with q = p (no planted clusters) and the mean degree of ``A``; labels are the blocks."""
    n = A.shape[0]
    p0 = (A.nnz - n) / (n * (n - 1))  # off-diagonal edge density of the planted graph
    return sbm(cfg.n_per, cfg.k, p0, p0, random_state=np.random.RandomState([seed, 11]))


def _isolated(G: sp.csr_array) -> float:
    """Coreset vertices whose only coreset-graph entry is their self-loop (no coreset neighbour)."""
    return float(np.count_nonzero(np.diff(G.indptr) <= 1))


def _components(G: sp.csr_array) -> float:
    """Connected components of a coreset graph (at ≥ k of them its spectral step cannot separate k)."""
    return float(connected_components(G, directed=False)[0])


def _cpu() -> str:
    """The CPU model, for the timing notes."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _seeding_timing(cfg: CoresetSCConfig, seed: int, rs: int) -> tuple[dict[str, dict[str, float]], str]:
    """Wall-clock of sparse against dense D² seeding on one larger SBM, side by side in one run.

    The graph is validated once; both seedings then skip validation (``check_input=False``), so the
    clocks time the seeding alone (validation, O(nnz) with a transpose, would dominate both). They run
    alternately ``timing_repeats`` times and each keeps its fastest run, as ``timeit`` does.
    """
    n = cfg.timing_n_per * cfg.timing_k
    A, _ = sbm(
        cfg.timing_n_per, cfg.timing_k, cfg.timing_p, 1.0 / n, random_state=np.random.RandomState([seed, 31])
    )
    A = check_adjacency(A)
    kp = cfg.c2_k_prime
    best = {"ours": math.inf, "dense": math.inf}
    evals = {}
    for _ in range(cfg.timing_repeats):
        for name, seeding in (("ours", sparse_kernel_seeding), ("dense", dense_kernel_seeding)):
            t0 = time.perf_counter()
            res = seeding(A, kp, shift=cfg.shift, random_state=rs, check_input=False)
            best[name] = min(best[name], time.perf_counter() - t0)
            evals[name] = float(res.n_evals)
    note = (
        f"seeding timed at n={n} (nnz={A.nnz}), k'={kp}, best of {cfg.timing_repeats} alternating runs, "
        f"one thread on {_cpu()}"
    )
    return {
        "csc_seeding": {"seeding_s": best["ours"], "timing_evals": evals["ours"], "timing_n": float(n)},
        "dense_seeding": {"seeding_s": best["dense"], "timing_evals": evals["dense"], "timing_n": float(n)},
    }, note


def _sampling_check(cfg: CoresetSCConfig, seed: int, rs: int) -> dict[str, dict[str, float]]:
    """C3: does the paper's coreset distribution matter on a graph with heterogeneous degrees?

    Why this graph. The default distribution ``p_v ∝ d_vΔ_v/cost + d_v/W*`` is, up to its small D² part
    (mass 1 against ``vol/W* ≈ n/2k``), sampling in proportion to degree. With degree parameters θ
    (log-normal, ``E[θ²]/E[θ]² = e^{σ²}`` ≈ 2.7 at σ = 1), a neighbour of a vertex is drawn ∝ θ, so a
    vertex expects ``ratio·d_v·e^{σ²}`` coreset neighbours under degree sampling and only
    ``ratio·d_v`` under uniform sampling, and the coreset vertices themselves are biased towards high
    degree. At ``ratio × mean degree ≈ 8`` (the density rule) this predicts ≈ 2.5 coreset vertices
    without a coreset neighbour for the paper's distribution and ≈ 75 for uniform sampling (n = 10⁴,
    |C| ≈ 900). An isolated coreset vertex keeps its Gaussian start under the power method while the
    cluster signal decays, so each one takes a k-means cluster; on a regular SBM (C1) the two
    distributions coincide and the ablation scores like the method.
    """
    n = cfg.dc_n_per * cfg.dc_k
    k = cfg.dc_k
    A, y = sbm(
        cfg.dc_n_per,
        k,
        cfg.dc_p,
        cfg.dc_inter_degree / n,
        degree_corrected=True,
        theta_sigma=cfg.dc_theta_sigma,
        random_state=np.random.RandomState([seed, 21]),
    )
    kw = dict(coreset_ratio=cfg.dc_coreset_ratio, oversampling=cfg.oversampling, shift=cfg.shift)
    csc = _csc(k, random_state=rs, **kw).fit(A)
    uni = _csc(k, sampling="uniform", random_state=rs, **kw).fit(A)
    out = {
        arm: {
            "ari": _ari(y, est.labels_),
            "coreset_isolated": _isolated(est.coreset_graph_),
            "coreset_components": _components(est.coreset_graph_),
        }
        for arm, est in (("dc_csc", csc), ("dc_uniform", uni))
    }
    # Negative control: the estimator's own steps and random numbers, with the paper's probabilities
    # permuted over the vertices (weights d_v/(m p_v) keep the coreset unbiased).
    rng = np.random.RandomState(rs)
    d = degrees(A)
    k_prime = max(1, math.floor(k * cfg.oversampling))
    seeding = sparse_kernel_seeding(A, k_prime, shift=cfg.shift, random_state=rng)
    p = sampling_probabilities(d, seeding, "smoothed")
    p_perm = p[np.random.RandomState([seed, 17]).permutation(n)]
    m = math.floor(cfg.dc_coreset_ratio * n)
    idx, w = sample_coreset(d, seeding, m, probabilities=p_perm, random_state=rng)
    G = coreset_graph(A, idx, w, shift=cfg.shift, degrees_=d)
    lab_c = fast_spectral_clustering(G, k, backend="power", random_state=rng)
    lab, _ = label_full_graph(A, idx, w, lab_c, k, shift=cfg.shift, A_C=G)
    out["dc_shuffled_sampling"] = {
        "ari": _ari(y, lab),
        "coreset_isolated": _isolated(G),
        "coreset_components": _components(G),
    }
    # Reports: the other ablations on this graph, coreset kernel k-means, whole-graph spectral clustering.
    idx, w = csc.coreset_indices_, csc.coreset_weights_
    sub = sp.csr_array(A[idx][:, idx])
    lab_u = fast_spectral_clustering(sub, k, random_state=rs)
    lab_np = fast_spectral_clustering(csc.coreset_graph_, k, project=False, random_state=rs)
    out["dc_ablations"] = {
        "unweighted_ari": _ari(y, label_full_graph(A, idx, w, lab_u, k, shift=cfg.shift)[0]),
        "nearest_point_ari": _ari(y, nearest_point_labels(A, idx, csc.coreset_labels_)),
        "no_projection_ari": _ari(y, label_full_graph(A, idx, w, lab_np, k, shift=cfg.shift)[0]),
    }
    ckkm = CoresetKernelKMeans(k, n_init=cfg.ckkm_n_init, max_iter=cfg.ckkm_max_iter, random_state=rs, **kw)
    out["dc_ckkm"] = {"ari": _ari(y, ckkm.fit(A).labels_)}
    whole = CoresetSpectralClustering(k, coreset_ratio=1.0, spectral_backend="eigsh", random_state=rs)
    out["dc_whole_sc"] = {"ari": _ari(y, whole.fit(A).labels_)}
    # Both samplings again with the estimator's default spectral step ("auto": eigsh on this small
    # coreset graph, rows normalised), on the same coresets (same random_state).
    for arm, sampling in (("dc_csc", "smoothed"), ("dc_uniform", "uniform")):
        auto = CoresetSpectralClustering(k, sampling=sampling, random_state=rs, **kw).fit(A)
        out[arm]["ari_default_backend"] = _ari(y, auto.labels_)
    return out


def run(
    config: CoresetSCConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """One seed of the check (see :func:`_run`), without the sparse- and fragmented-coreset warnings.

    The check's graphs sit at the edge of the README's density rule by design (coreset ratio 0.1
    × intra-cluster degree ≈ 7.9 against 8), so the density warning would fire on every fit, and the
    uniform coresets of C3 fall apart into many components on purpose (that is the mechanism C3
    tests); the components are recorded as metrics instead.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="the coreset is too sparse", category=UserWarning)
        warnings.filterwarnings("ignore", message="the coreset graph has", category=UserWarning)
        return _run(config, seed=seed, device=device, progress=progress)


def _run(
    config: CoresetSCConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """One seed: a fresh SBM and algorithm seed; CSC vs CKKM on the same coreset, controls, reports.

    Args:
        config: the budget's config.
        seed: the run's seed (graphs and algorithm seeds derive from it).
        device: unused (CPU only).
        progress: called at each stage as ``progress(stage, done, total)``.

    Returns:
        Per-arm metrics and the ARI-vs-k and time-vs-n figures.
    """
    cfg = config
    stages = 7
    progress("C1: CSC vs CKKM", 0, stages)
    rs = int(np.random.RandomState([seed, 99]).randint(2**31 - 1))
    metrics: dict[str, dict[str, float]] = {}
    notes: list[str] = []

    # C1: CSC vs coreset kernel k-means, same coreset (same random_state), same labelling step.
    A, y = _graph(cfg, cfg.k, seed, 0)
    ncut_truth = normalized_cut(A, y)
    csc, t_csc, ckkm, t_ckkm = _fit_pair(cfg, A, cfg.k, rs)
    if not np.array_equal(csc.coreset_indices_, ckkm.coreset_indices_):
        raise RuntimeError("CSC and CKKM did not share their coreset")
    for arm, est, t in (("csc", csc, t_csc), ("ckkm", ckkm, t_ckkm)):
        metrics[arm] = {
            "ari": _ari(y, est.labels_),
            "nmi": float(normalized_mutual_info_score(y, est.labels_)),
            "ncut_ratio": normalized_cut(A, est.labels_) / ncut_truth,
            "fit_s": t,
            "coreset_size": float(est.coreset_indices_.size),
        }
    metrics["csc"]["coreset_components"] = float(csc.coreset_n_components_)
    metrics["csc"]["components_per_cluster"] = csc.coreset_n_components_ / cfg.k
    t0 = time.perf_counter()
    whole = _csc(cfg.k, coreset_ratio=1.0, random_state=rs).fit(A)
    metrics["full_fast_sc"] = {"ari": _ari(y, whole.labels_), "fit_s": time.perf_counter() - t0}

    # Negative controls. (1) No clusters: an SBM with q = p at the same mean degree; ARI to its
    # arbitrary blocks must stay near 0. (2) The spectral step broken: the CSC coreset and labelling,
    # but uniformly random coreset labels in place of the spectral clustering of the coreset graph.
    progress("controls", 1, stages)
    An, yn = _null_graph(cfg, A, seed)
    null = _csc(
        cfg.k,
        coreset_ratio=cfg.coreset_ratio,
        oversampling=cfg.oversampling,
        shift=cfg.shift,
        random_state=rs,
    ).fit(An)
    metrics["null_sbm"] = {"ari": _ari(yn, null.labels_)}
    lab_rand = np.random.RandomState([seed, 13]).randint(cfg.k, size=csc.coreset_indices_.size)
    broken, _ = label_full_graph(
        A, csc.coreset_indices_, csc.coreset_weights_, lab_rand, cfg.k, shift=cfg.shift
    )
    metrics["csc_random_labels"] = {"ari": _ari(y, broken)}

    # Ablations on the CSC coreset (reported; their exactness is covered by unit tests).
    progress("ablations", 2, stages)
    idx, w, k = csc.coreset_indices_, csc.coreset_weights_, cfg.k
    uni = _csc(k, coreset_ratio=cfg.coreset_ratio, sampling="uniform", random_state=rs).fit(A)
    metrics["ablation_uniform"] = {"ari": _ari(y, uni.labels_)}
    sub = sp.csr_array(A[idx][:, idx])
    lab_c = fast_spectral_clustering(sub, k, random_state=rs)
    metrics["ablation_unweighted"] = {
        "ari": _ari(y, label_full_graph(A, idx, w, lab_c, k, shift=cfg.shift)[0])
    }
    metrics["ablation_nearest_point"] = {"ari": _ari(y, nearest_point_labels(A, idx, csc.coreset_labels_))}
    lab_np = fast_spectral_clustering(csc.coreset_graph_, k, project=False, random_state=rs)
    metrics["ablation_no_projection"] = {
        "ari": _ari(y, label_full_graph(A, idx, w, lab_np, k, shift=cfg.shift)[0])
    }

    # C2 (report-only): kernel-distance evaluations during seeding, ours vs the dense O(nk)
    # construction. The counts follow from the algorithm, so they describe it rather than test it.
    progress("C2: seeding counts and time", 3, stages)
    ours, dense = {}, {}
    for kp in cfg.seeding_k_primes:
        ours[kp] = sparse_kernel_seeding(A, kp, shift=cfg.shift, random_state=rs).n_evals
        dense[kp] = dense_kernel_seeding(A, kp, shift=cfg.shift, random_state=rs).n_evals
    kps = list(cfg.seeding_k_primes)
    speed = [dense[kp] / ours[kp] for kp in kps]
    metrics["csc_seeding"] = {
        "evals_speedup": dense[cfg.c2_k_prime] / ours[cfg.c2_k_prime],
        "speedup_growth": min(b / a for a, b in itertools.pairwise(speed)),
        **{f"evals_k{kp}": float(ours[kp]) for kp in kps},
    }
    metrics["dense_seeding"] = {f"evals_k{kp}": float(dense[kp]) for kp in kps}
    # Wall-clock (reported): both seedings on a larger graph, side by side in this run.
    timing, note = _seeding_timing(cfg, seed, rs)
    for arm, ms in timing.items():
        metrics[arm].update(ms)
    notes.append(note)

    # Figures: ARI against k and time against n = n_per·k.
    progress("k grid", 4, stages)
    ari_c, ari_k, t_c, t_k, t_w = [], [], [], [], []
    for kk in cfg.k_grid:
        if kk == cfg.k:
            ari_c.append(metrics["csc"]["ari"])
            ari_k.append(metrics["ckkm"]["ari"])
            t_c.append(t_csc)
            t_k.append(t_ckkm)
            t_w.append(metrics["full_fast_sc"]["fit_s"])
            continue
        Ak, yk = _graph(cfg, kk, seed, kk)
        c_, tc_, k_, tk_ = _fit_pair(cfg, Ak, kk, rs)
        t0 = time.perf_counter()
        _csc(kk, coreset_ratio=1.0, random_state=rs).fit(Ak)
        t_w.append(time.perf_counter() - t0)
        ari_c.append(_ari(yk, c_.labels_))
        ari_k.append(_ari(yk, k_.labels_))
        t_c.append(tc_)
        t_k.append(tk_)
    series = {
        "ari_vs_k": Series(
            "ARI against k (SBM)",
            "k (planted clusters)",
            "ARI",
            [float(k_) for k_ in cfg.k_grid],
            {"CSC": ari_c, "coreset kernel k-means": ari_k},
        ),
        "time_vs_n": Series(
            "fit time against n (SBM)",
            "n (vertices)",
            "seconds",
            [float(cfg.n_per * k_) for k_ in cfg.k_grid],
            {"CSC": t_c, "coreset kernel k-means": t_k, "fast SC, whole graph": t_w},
        ),
    }

    # Wall-clock against sklearn SpectralClustering: one run (the sklearn_seed), NaN elsewhere.
    progress("reports", 5, stages)
    nan = math.nan
    metrics["sklearn_sc"] = {"ari": nan, "fit_s": nan}
    metrics["csc_vs_sklearn"] = {"ari": nan, "fit_s": nan}
    if seed == cfg.sklearn_seed:
        q = 1.0 / (cfg.sklearn_n_per * cfg.sklearn_k)
        As, ys = sbm(
            cfg.sklearn_n_per, cfg.sklearn_k, cfg.p, q, random_state=np.random.RandomState([seed, 7])
        )
        t0 = time.perf_counter()
        lab = full_spectral_clustering(As, cfg.sklearn_k, random_state=rs)
        metrics["sklearn_sc"] = {"ari": _ari(ys, lab), "fit_s": time.perf_counter() - t0}
        t0 = time.perf_counter()
        est = _csc(cfg.sklearn_k, coreset_ratio=cfg.coreset_ratio, random_state=rs).fit(As)
        metrics["csc_vs_sklearn"] = {"ari": _ari(ys, est.labels_), "fit_s": time.perf_counter() - t0}

    # C3: the coreset distribution on a degree-corrected SBM with heterogeneous degrees.
    progress("C3: sampling on a degree-corrected SBM", 6, stages)
    metrics.update(_sampling_check(cfg, seed, rs))

    # Report: the digits kNN graph.
    if cfg.digits:
        from sklearn.datasets import load_digits

        X, yx = load_digits(return_X_y=True)
        knn = dict(affinity="nearest_neighbors", n_neighbors=30, random_state=rs)
        est = _csc(10, coreset_ratio=0.5, **knn).fit(X)
        whole = _csc(10, coreset_ratio=1.0, **knn).fit(X)
        metrics["digits"] = {"csc_ari": _ari(yx, est.labels_), "fast_sc_ari": _ari(yx, whole.labels_)}
    if cfg.reference:
        try:
            t0 = time.perf_counter()
            lab = reference_coreset_sc(
                A, cfg.k, coreset_ratio=cfg.coreset_ratio, oversampling=cfg.oversampling
            )
            metrics["reference_wheel"] = {"ari": _ari(y, lab), "fit_s": time.perf_counter() - t0}
        except ImportError as err:
            notes.append(f"reference wheel skipped: {err}")
    notes.append(
        f"graph: n={A.shape[0]}, nnz={A.nnz}; coreset: {idx.size} distinct vertices of "
        f"{math.floor(cfg.coreset_ratio * A.shape[0])} draws"
    )
    progress("done", stages, stages)
    return RunResult(metrics=metrics, series=series, notes=notes)


_FULL = CoresetSCConfig()
_SMOKE = CoresetSCConfig(
    n_per=100,
    k=20,
    coreset_ratio=0.2,
    seeding_k_primes=(10, 20, 40, 80),
    c2_k_prime=40,
    k_grid=(5, 10, 20),
    sklearn_n_per=100,
    sklearn_k=10,
    dc_n_per=200,
    dc_k=10,
    dc_p=0.3,
    dc_coreset_ratio=0.2,
    timing_n_per=100,
    timing_k=20,
    timing_p=0.5,
    digits=True,
)

CLAIM = Claim(
    name="coreset_sc",
    paper=PaperRef(
        title="Coreset Spectral Clustering",
        authors="Ben Jourdan, Gregory Schwartzman, Peter Macgregor, He Sun",
        arxiv="2503.07227",
        code="BenJourdan/coreset-sc",
    ),
    statement=(
        "Spectral clustering of a small weighted coreset graph recovers the normalised-cut clusters of a "
        "large graph and avoids the local optima of coreset kernel k-means on the same coreset."
    ),
    arms={
        "csc": "method: CoresetSpectralClustering (coreset → W K W → fast SC → kernel-centre labelling)",
        "ckkm": "comparator: CKKM (same coreset and labelling; weighted kernel k-means++, Lloyd)",
        "full_fast_sc": "baseline: fast spectral clustering of the whole graph (coreset_ratio=1)",
        "csc_seeding": "report: sparse D² seeding with x* and neighbour-only repairs (evaluation counts on "
        "the C1 graph; wall-clock on a 10⁵-vertex SBM)",
        "dense_seeding": "report: the O(nk) D² seeding that evaluates every distance (same measurements)",
        "null_sbm": "negative control: CSC on an SBM with q = p (no clusters, same mean degree)",
        "csc_random_labels": "negative control: CSC coreset and labelling with random coreset labels",
        "sklearn_sc": "baseline: sklearn SpectralClustering(affinity='precomputed'), one timed run",
        "csc_vs_sklearn": "method: CSC on the sklearn timing graph",
        "ablation_uniform": "ablation: uniform coreset sampling",
        "ablation_unweighted": "ablation: cluster A[C,C] instead of W K[C,C] W",
        "ablation_nearest_point": "ablation: label by nearest coreset point instead of kernel centres",
        "ablation_no_projection": "ablation: power method without projecting out the trivial eigenvector",
        "dc_csc": "method: CSC on the degree-corrected SBM of C3 (heterogeneous degrees); also its ARI "
        "with the estimator's default spectral backend",
        "dc_uniform": "ablation: the same estimator with uniform coreset sampling (C3), with the paper's "
        "and with the default spectral backend",
        "dc_shuffled_sampling": "negative control: the paper's sampling probabilities permuted over the "
        "vertices, same seeding, random numbers, spectral step and labelling (C3)",
        "dc_ablations": "report: unweighted A[C,C], nearest-point labelling, no projection on the C3 graph",
        "dc_ckkm": "report: coreset kernel k-means on the C3 graph",
        "dc_whole_sc": "report: spectral clustering of the whole C3 graph (eigsh backend, ratio 1)",
        "digits": "report: load_digits kNN graph",
        "reference_wheel": "report: the coreset-sc 0.1.5 wheel (optional, unseeded)",
    },
    criteria=(
        value(
            "full_fast_sc.ari",
            ">=",
            0.85,
            name="C1_ceiling_whole_graph",
            precondition=True,
            part="C1",
            explain="Precondition (ceiling): fast spectral clustering of the whole graph, the best a "
            "coreset can hope to match, recovers the planted clusters at C1_csc_ari's own bar.",
        ),
        value(
            "csc.components_per_cluster",
            "<",
            1.0,
            name="C1_coreset_not_fragmented",
            precondition=True,
            part="C1",
            explain="Precondition: the C1 coreset graph has fewer connected components than clusters; with "
            "k or more, every grouping of whole components has zero normalised cut and the spectral step "
            "cannot separate the clusters, whatever the method.",
        ),
        diff_(
            "dc_whole_sc.ari",
            "dc_uniform.ari",
            ">=",
            0.2,
            name="C3_ceiling_whole_graph",
            precondition=True,
            part="C3",
            explain="Precondition (ceiling): on the degree-corrected graph of C3, spectral clustering of "
            "the whole graph beats uniform coreset sampling by at least C3_sampling_gap's margin, so "
            "there is room for the paper's sampling to show that gain.",
        ),
        value(
            "csc.ari",
            ">=",
            0.85,
            name="C1_csc_ari",
            part="C1",
            paper="Sec. 5, RQ2: CSC recovers the clusters of SBM and real graphs (table values not "
            "transcribed)",
            falsifier="C1_control_null_sbm",
            explain="Coreset spectral clustering recovers the planted SBM clusters from a small coreset "
            "(ARI of at least 0.85 at the full budget).",
        ),
        diff_(
            "csc.ari",
            "ckkm.ari",
            ">=",
            0.5,
            name="C1_gap",
            part="C1",
            paper="abstract and Sec. 5, RQ2: CSC overcomes the local optima of coreset kernel k-means "
            "(table values not transcribed)",
            falsifier="C1_control_random_labels",
            explain="On the same coreset with the same labelling step, spectral clustering beats coreset "
            "kernel k-means by at least 0.5 ARI (at the full budget).",
        ),
        fails(
            value(
                "null_sbm.ari",
                ">=",
                0.85,
                name="C1_control_null_sbm",
                part="C1",
                explain="On an SBM with q = p (no clusters, same mean degree) the same estimator must miss "
                "the ARI bar of C1_csc_ari against the arbitrary blocks.",
            )
        ),
        fails(
            diff_(
                "csc_random_labels.ari",
                "ckkm.ari",
                ">=",
                0.5,
                name="C1_control_random_labels",
                part="C1",
                explain="With the spectral step replaced by random coreset labels, the gap over coreset "
                "kernel k-means must vanish.",
            )
        ),
        value(
            "ckkm.ari",
            "<",
            0.85,
            name="C1_ckkm_ari",
            gating=False,
            part="C1",
            paper="abstract and Sec. 5, RQ2: CKKM gets stuck in local optima on sparse kernels",
            explain="Coreset kernel k-means on the same coreset stays below 0.85 ARI (the comparator's local "
            "optima; reported, the gap gates).",
        ),
        diff_(
            "dc_csc.ari",
            "dc_uniform.ari",
            ">=",
            0.2,
            name="C3_sampling_gap",
            part="C3",
            falsifier="C3_control_shuffled_sampling",
            explain="On a degree-corrected SBM with heterogeneous degrees, the paper's degree- and "
            "D²-weighted coreset beats uniform sampling of the same size by at least 0.2 ARI (margin fixed "
            "before measuring; the graph was chosen for why the distribution should matter).",
        ),
        fails(
            diff_(
                "dc_shuffled_sampling.ari",
                "dc_uniform.ari",
                ">=",
                0.2,
                name="C3_control_shuffled_sampling",
                part="C3",
                explain="With the paper's sampling probabilities handed to randomly permuted vertices "
                "(same scores, unrelated to the vertices they weight), the gap over uniform sampling must "
                "vanish.",
            )
        ),
        diff_(
            "dc_csc.ari_default_backend",
            "dc_uniform.ari_default_backend",
            ">=",
            0.2,
            name="C3_sampling_gap_default_backend",
            gating=False,
            part="C3",
            explain="The same sampling gap on the same coresets with the estimator's default spectral step "
            "(eigsh, rows scaled to unit length) instead of the paper's raw power-method rows (reported).",
        ),
        diff_(
            "csc.ari",
            "ablation_uniform.ari",
            ">=",
            0.2,
            name="C3_gap_regular_sbm",
            gating=False,
            part="C3",
            explain="Context: on the regular SBM of C1, where degree and uniform sampling nearly coincide, "
            "the same gap is expected to be absent (reported).",
        ),
        value(
            "csc_seeding.evals_speedup",
            ">=",
            10.0,
            name="C2_eval_ratio",
            gating=False,
            explain="The sparse seeding counts at least 10x fewer kernel distances than the dense O(nk) one "
            "(a count of the algorithm's own work; reported).",
        ),
        value(
            "csc_seeding.speedup_growth",
            ">",
            1.0,
            name="C2_ratio_grows",
            gating=False,
            explain="The saving in kernel distances grows with the number of seeds k' (a count; reported).",
        ),
        ratio(
            "csc_seeding.seeding_s",
            "dense_seeding.seeding_s",
            "<=",
            1.0,
            name="seeding_time_ratio",
            gating=False,
            explain="On a 10⁵-vertex SBM, the sparse seeding of k' = 200 seeds is no slower in wall-clock "
            "time than the dense O(nk) one, both timed side by side in one run (reported: wall-clock never "
            "gates).",
        ),
        ratio(
            "csc_vs_sklearn.fit_s",
            "sklearn_sc.fit_s",
            "<=",
            1.0,
            name="fit_time_vs_sklearn",
            gating=False,
            explain="Coreset spectral clustering fits no slower than sklearn SpectralClustering on the same "
            "graph (one timed seed; reported).",
        ),
    ),
    budgets={
        "smoke": Budget(
            "smoke",
            _SMOKE,
            seeds=3,
            seconds=15.0,
            report_only=False,
            thresholds={
                "C1_ceiling_whole_graph": 0.8,  # each ceiling keeps its gate's bar
                "C1_csc_ari": 0.8,
                "C1_gap": 0.2,
                "C1_control_null_sbm": 0.8,  # each control keeps its gate's bar
                "C1_control_random_labels": 0.2,
                "C3_sampling_gap": 0.2,
                "C3_control_shuffled_sampling": 0.2,
            },
        ),
        "full": Budget("full", _FULL, seeds=5, seconds=30.0),
    },
    run_fn=run,
    headline="C1_gap",
    deviations=(
        "Planted SBMs of 2·10⁴ vertices (k = 100) instead of the paper's 10⁶-scale graphs; ratio 0.1.",
        "Real-graph tables of the paper are not re-measured; the reference wheel gives context.",
        "C3 (the sampling ablation) is this check's own, on a degree-corrected SBM (n = 10⁴, k = 20, "
        "θ log-normal with σ = 1, ratio 0.1) chosen by the argument in claim.py; the paper gives no number.",
        "Coreset kernel k-means uses 10 k-means++/Lloyd restarts, matching CSC's KMeans(n_init=10).",
        "Wall-clock vs sklearn SpectralClustering: one run (n = 4000, k = 50) at one seed; report only.",
        "The paper's faster construction (Õ(n·min(k, d_avg)) instead of Õ(nk)) is left out of the checked "
        "statement: its evaluation counts follow from the algorithm (unit-tested) and wall-clock time "
        "never gates; both are reported, the seeding time at n = 10⁵ side by side with the dense seeding.",
    ),
)
