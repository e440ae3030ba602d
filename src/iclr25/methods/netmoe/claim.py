"""Claim check of NetMoE: placing samples near their tokens' experts cuts All-to-All traffic.

The paper's headline (up to 1.67x training efficiency on 32 GPUs) needs a GPU cluster; the check
re-measures the mechanism on **real routing** at the paper's shape (S = 1024, E = 2J, I / J = 4)
on a modelled 2 x 4 cluster, from two sources:

* the gated source, with the per-sample locality the paper relies on (Fig. 2): a 4-layer,
  16-expert ``transformers`` Mixtral built from a config and trained, without a balance loss,
  on mixed-domain token streams (each domain a Markov chain over its own vocabulary subset),
  traced on fresh one-domain documents;
* a second source: a byte-level MoE LM trained on text that ships with Python packages, traced
  on held-out files (little locality).

Placements are solved on the paper's objective (this layer's combine plus the next layer's
dispatch, Eq. 5/6/10) with the next layer's routing predicted as in Sec. 3.3, persist from layer
to layer, and are timed with the paper's Eq. 1. Gates per source: NetMoE beats a random
placement; the next-layer-aware objective beats the current-layer-only one. On the gated source,
NetMoE reaches the paper's Table 5 inter-node volume bar, if the oracle placement (true
next-layer routing) reaches it at all (a precondition). Controls: the solver fed shuffled device
columns, and a predictor whose device columns are shuffled. Report-only: the routing entropy of
each source, the synthetic locality sweep, G2 (each KM stage equals an ILP optimum), G3 (a placed
two-layer stack on gloo processes equals the unplaced and dense runs, byte counters equal the
cost model) and the solver time.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    diff,
    fails,
    no_progress,
    ratio,
    value,
)
from iclr25.methods.netmoe import (
    EquivalenceSpec,
    Topology,
    assignment_counts,
    equivalence_worker,
    greedy_placement,
    identity_placement,
    placement_cost,
    plan_layers,
    random_placement,
    solve_ilp,
    solve_joint,
    solve_two_stage,
    traffic,
)
from iclr25.methods.netmoe.config import ClaimConfig
from iclr25.methods.netmoe.cost import iteration_traffic
from iclr25.methods.netmoe.domain_lm import (
    DomainCorpus,
    build_mixtral,
    global_routing_entropy,
    trace_mixtral,
    train_domain_lm,
)
from iclr25.methods.netmoe.launch import run as launch_run
from iclr25.methods.netmoe.routing_data import routing_entropy, synthetic_trace
from iclr25.methods.netmoe.text_lm import (
    RoutingTrace,
    TextMoELM,
    package_text_corpus,
    train_text_moe_lm,
)

__all__ = ["CLAIM", "run"]


def _device_counts(ids: np.ndarray, experts_per_device: int, devices: int) -> np.ndarray:
    """num ``[I, J]`` of routed experts ``[I, S, k]`` with expert e on device ``e // (E / J)``."""
    n_experts = devices * experts_per_device
    return assignment_counts(ids, np.arange(n_experts) // experts_per_device, devices)


def _overlap(pred: np.ndarray, true: np.ndarray) -> float:
    """Share of true token copies whose device the prediction also names (sum of row-wise minima)."""
    return float(np.minimum(pred, true).sum() / max(true.sum(), 1))


_REAL_ARMS = ("identity", "random", "current", "netmoe", "oracle", "shuffled", "broken_predictor")


def _place_traces(
    cfg: ClaimConfig,
    seed: int,
    traces: list[RoutingTrace],
    m: dict,
    prefix: str,
    progress: ProgressFn,
) -> dict[str, float]:
    """Place every held-out batch's routing with every arm; write ``<prefix><arm>`` metrics.

    Returns:
        The routing statistics: per-sample and global entropy (nats, mean over layers and
        batches, and per layer ``_l<l>``), its maximum and the predictor's overlap with the true
        next-layer routing.
    """
    topo = Topology(cfg.nodes, cfg.gpus_per_node, cfg.bw_intra, cfg.bw_inter, cfg.bytes_per_token)
    j = topo.devices
    per_dev = cfg.lm_experts // j
    totals = {a: np.zeros(5) for a in _REAL_ARMS}
    entropy, global_entropy, overlap = [], [], []
    ident = identity_placement(cfg.eval_samples, topo)
    for b, tr in enumerate(traces):
        progress(f"{prefix or 'domain '}placement batches", b, len(traces))
        rng = np.random.default_rng([seed, 41, b])
        nums = [_device_counts(ids, per_dev, j) for ids in tr.expert_ids]  # per layer [I, J]
        pred = [_device_counts(ids, per_dev, j) for ids in tr.predicted_next]
        entropy += [routing_entropy(ids, cfg.lm_experts) for ids in tr.expert_ids]
        global_entropy += [global_routing_entropy(ids, cfg.lm_experts) for ids in tr.expert_ids]
        overlap += [_overlap(p, n) for p, n in zip(pred, nums[1:], strict=True)]
        perm = rng.permutation(j)  # the controls' shuffled device columns
        shuffled_pred = [p[:, perm] for p in pred]
        plans = {
            "identity": [ident] * len(nums),
            "random": [random_placement(cfg.eval_samples, topo, rng) for _ in nums],
            "current": plan_layers(nums, topo, num_source="current"),
            "netmoe": plan_layers(nums, topo, num_source="predicted", predicted=pred),
            "oracle": plan_layers(nums, topo, num_source="oracle"),
            "shuffled": plan_layers([n[:, perm] for n in nums], topo, num_source="predicted",
                                    predicted=shuffled_pred),
            "broken_predictor": plan_layers(nums, topo, num_source="predicted", predicted=shuffled_pred),
        }  # fmt: skip
        for arm, pls in plans.items():
            it = iteration_traffic(nums, [p.device_of_sample for p in pls], topo, ident.device_of_sample)
            totals[arm] += (it.inter_bytes, it.intra_bytes, it.t_eq1, it.t_max, it.t_sum)
    base = totals["identity"]
    for arm, t in totals.items():
        m.setdefault(prefix + arm, {}).update(
            inter_ratio=float(t[0] / base[0]), eq1_ratio=float(t[2] / base[2]),
            tmax_ratio=float(t[3] / base[3]), eq1_time=float(t[2]), inter_bytes=float(t[0]),
        )  # fmt: skip
    n_layers = len(traces[0].expert_ids)
    by_layer = {
        f"{name}_l{layer}": float(np.mean(vals[layer::n_layers]))
        for name, vals in (("entropy", entropy), ("global_entropy", global_entropy))
        for layer in range(n_layers)
    }  # entropy per MoE layer, mean over batches
    return {
        **by_layer,
        "entropy": float(np.mean(entropy)),
        "global_entropy": float(np.mean(global_entropy)),
        "entropy_max": float(np.log(cfg.lm_experts)),
        "predictor_overlap": float(np.mean(overlap)),
    }


def _loss_series(losses: list[float], title: str, ylabel: str, scale: float = 1.0) -> Series:
    per = max(1, len(losses) // 50)
    return Series(
        title=title, xlabel="step", ylabel=ylabel, x=[float(i) for i in range(0, len(losses), per)],
        lines={"loss": [v / scale for v in losses[::per]]},
    )  # fmt: skip


def _domain_routing(cfg: ClaimConfig, seed: int, m: dict, series: dict, progress: ProgressFn) -> None:
    """The gated source: a Mixtral trained on mixed-domain token streams, traced on fresh documents."""
    corpus = DomainCorpus(
        domains=cfg.dom_domains, vocab=cfg.dom_vocab, tokens_per_domain=cfg.dom_tokens_per_domain,
        concentration=cfg.dom_concentration, seed=[seed, 70],
    )  # fmt: skip
    lm = build_mixtral(
        vocab=cfg.dom_vocab, d_model=cfg.dom_d_model, d_ff=cfg.dom_d_ff, layers=cfg.dom_layers,
        heads=cfg.dom_heads, experts=cfg.lm_experts, top_k=cfg.top_k, context=cfg.dom_context, seed=seed,
    )  # fmt: skip
    losses = train_domain_lm(
        lm, corpus, steps=cfg.dom_steps, batch_size=cfg.dom_batch, context=cfg.dom_context,
        aux_weight=cfg.dom_aux_weight, seed=seed, progress=progress,
    )  # fmt: skip
    traces, kinds = [], []
    for b in range(cfg.eval_batches):
        toks, dom = corpus.sample(cfg.eval_samples, cfg.eval_seq_len, np.random.default_rng([seed, 40, b]))
        kinds.append(len(np.unique(dom)))
        traces.append(trace_mixtral(lm, torch.as_tensor(toks), context=cfg.dom_context))
    stats = _place_traces(cfg, seed, traces, m, "", progress)
    tail = max(1, len(losses) // 15)
    m["routing"] = {
        **stats,
        "kinds_per_batch": float(np.mean(kinds)),
        "final_loss": float(np.mean(losses[-tail:])),
        "first_loss": float(losses[0]),
        "entropy_rate": corpus.entropy_rate(),
    }
    series["domain_lm_loss"] = _loss_series(
        losses, "Mixtral on mixed-domain token streams: training loss", "nats per token"
    )


def _text_routing(cfg: ClaimConfig, seed: int, m: dict, series: dict, progress: ProgressFn) -> None:
    """The second source: a byte-level MoE LM on local package text, traced on held-out files."""
    corpus = package_text_corpus(context=cfg.lm_context, sample_len=cfg.eval_seq_len)
    gen = torch.Generator().manual_seed(seed)
    lm = TextMoELM(
        d_model=cfg.lm_d_model, n_layers=cfg.lm_layers, d_ff=cfg.lm_d_ff, num_experts=cfg.lm_experts,
        top_k=cfg.top_k, context=cfg.lm_context, generator=gen,
    )  # fmt: skip
    losses = train_text_moe_lm(
        lm, corpus.train, steps=cfg.lm_steps, batch_size=cfg.lm_batch, aux_weight=cfg.lm_aux_weight,
        seed=seed, progress=progress,
    )  # fmt: skip
    traces, kinds = [], []
    for b in range(cfg.eval_batches):
        rng = np.random.default_rng([seed, 40, b])
        pick = rng.choice(len(corpus.heldout), size=cfg.eval_samples, replace=False)
        kinds.append(len(np.unique(corpus.heldout_kind[pick])))
        traces.append(lm.trace(torch.as_tensor(corpus.heldout[pick])))
    stats = _place_traces(cfg, seed, traces, m, "text_", progress)
    m["text_routing"] = {
        **stats,
        "kinds_per_batch": float(np.mean(kinds)),
        "final_loss_bits": float(np.mean(losses[-20:]) / np.log(2)),
        "first_loss_bits": float(losses[0] / np.log(2)),
    }
    series["lm_loss"] = _loss_series(
        losses, "Byte-level MoE LM on local package text: training loss", "bits per byte", float(np.log(2))
    )


def _synthetic_sweep(cfg: ClaimConfig, seed: int, m: dict, series: dict, progress: ProgressFn) -> None:
    """Report-only: one-layer Eq. 1 time ratio against the Dirichlet locality knob beta."""
    topo = Topology(cfg.nodes, cfg.gpus_per_node, cfg.bw_intra, cfg.bw_inter, cfg.bytes_per_token)
    j, e = topo.devices, cfg.num_experts
    dev = np.arange(e) % j  # round-robin experts
    ident = identity_placement(cfg.samples, topo).device_of_sample
    curve: dict[str, list[float]] = {"NetMoE": [], "joint": [], "greedy": [], "random": []}
    for i, b in enumerate((*cfg.beta_sweep, None)):  # None: uniform routing (lam = 0)
        progress("synthetic locality sweep", i, len(cfg.beta_sweep) + 1)
        vals = []
        for t in range(cfg.trace_seeds):
            ids = synthetic_trace(
                cfg.samples, cfg.seq_len, e, cfg.top_k, beta=b or 1.0, lam=0.0 if b is None else 1.0,
                seed=[seed, 5, i, t],
            )  # fmt: skip
            num = assignment_counts(ids, dev, j)
            base = traffic(num, ident, topo).t_eq1
            pls = (solve_two_stage(num, topo), solve_joint(num, topo), greedy_placement(num, topo),
                   random_placement(cfg.samples, topo, [seed, 6, i, t]))  # fmt: skip
            vals.append([traffic(num, p.device_of_sample, topo).t_eq1 / base for p in pls])
        v = np.asarray(vals).mean(0)
        if b is None:
            m["synthetic"] = {"uniform_eq1_ratio": float(v[0])}
            continue
        for key, x in zip(curve, v, strict=True):
            curve[key].append(float(x))
    m["synthetic"]["strong_locality_eq1_ratio"] = curve["NetMoE"][0]
    series["gain_vs_locality"] = Series(
        title="Synthetic traces: one-layer Eq. 1 All-to-All time vs identity (2x4 devices, top-2)",
        xlabel="log10 Dirichlet beta (small = strong locality)", ylabel="ratio to identity",
        x=[float(np.log10(b)) for b in cfg.beta_sweep], lines=curve,
    )  # fmt: skip


def _g2(cfg: ClaimConfig, seed: int, m: dict, progress: ProgressFn) -> None:
    rng = np.random.default_rng([seed, 10])
    match1 = match2 = matchj = order = never = 0
    gap = max_gap = 0.0
    for t in range(cfg.opt_instances):
        if t % 5 == 0:
            progress("G2 ILP instances", t, cfg.opt_instances)
        topo = Topology(2, 2) if t % 2 == 0 else Topology(2, 4)
        j = topo.devices
        sizes = [s for s in range(j, cfg.opt_max_samples + 1, j)] or [j]
        n = int(rng.choice(sizes))
        ids = synthetic_trace(
            n, int(rng.integers(4, 17)), 2 * j, 2, beta=float(rng.uniform(0.05, 2.0)), seed=rng
        )
        num = assignment_counts(ids, np.arange(2 * j) % j, j)
        p2 = solve_two_stage(num, topo)
        _, opt1 = solve_ilp(num, topo, "inter")
        _, opt2 = solve_ilp(num, topo, "intra", node_of_sample=p2.device_of_sample // topo.gpus_per_node)
        _, optj = solve_ilp(num, topo, "sum")
        joint = placement_cost(num, solve_joint(num, topo), topo, "sum")
        two = placement_cost(num, p2, topo, "sum")
        match1 += abs(placement_cost(num, p2, topo, "inter") - opt1) < 1e-6
        match2 += abs(placement_cost(num, p2, topo, "intra") - opt2) < 1e-6
        matchj += abs(joint - optj) <= 1e-9 * max(1.0, abs(optj))
        order += two >= joint - 1e-9 * max(1.0, joint)
        if joint > 0:
            gap = (two - joint) / joint
            max_gap = max(max_gap, gap)
        inter2 = placement_cost(num, p2, topo, "inter")
        others = (identity_placement(n, topo), random_placement(n, topo, rng), greedy_placement(num, topo))
        never += all(inter2 <= placement_cost(num, o, topo, "inter") for o in others)
    k = float(cfg.opt_instances)
    m["optimality"] = {
        "stage1_match": match1 / k, "stage2_match": match2 / k, "joint_match": matchj / k,
        "two_stage_ge_joint": order / k, "never_worse": never / k, "max_sum_gap": max_gap,
    }  # fmt: skip


def _g3(cfg: ClaimConfig, seed: int, m: dict, progress: ProgressFn) -> None:
    world = cfg.g3_nodes * cfg.g3_gpus_per_node
    base = EquivalenceSpec(
        nodes=cfg.g3_nodes, gpus_per_node=cfg.g3_gpus_per_node, d_model=cfg.g3_d_model,
        d_ff=2 * cfg.g3_d_model, num_experts=cfg.g3_experts, top_k=cfg.top_k, samples=cfg.g3_samples,
        seq_len=cfg.g3_seq_len, layers=cfg.g3_layers,
    )  # fmt: skip
    worst = {"out_err": 0.0, "out_err_vs_identity": 0.0, "grad_err": 0.0, "loss_err": 0.0}
    exact, agree, stale, moved = [], [], [], []
    inter = {"identity": 0.0, "netmoe": 0.0}  # measured inter-node bytes, summed over runs
    a2a = {"identity": 0.0, "netmoe": 0.0}  # All-to-All wall-clock (slowest rank), summed
    for s in range(cfg.g3_seeds):
        progress("G3 gloo runs", s, cfg.g3_seeds)
        specs = [dataclasses.replace(base, seed=1000 * seed + s)]
        if s == 0:  # the other residual mode once
            specs.append(dataclasses.replace(base, seed=1000 * seed + s, residual="migrate"))
        for sp in specs:
            r = launch_run(equivalence_worker, world, sp, timeout_s=300.0)[0]
            for name in ("identity", "netmoe"):
                q = r[name]
                worst["out_err"] = max(worst["out_err"], q["out_err"])
                worst["grad_err"] = max(
                    worst["grad_err"], q["grad_expert_err"], q["grad_gate_err"], q["grad_norm_err"]
                )
                worst["loss_err"] = max(worst["loss_err"], q["loss_err"])
                exact.append(q["bytes_exact"])
                agree.append(q["placement_agree"])
                inter[name] += q["inter_bytes"]
                a2a[name] += q["a2a_s"]
            worst["out_err_vs_identity"] = max(
                worst["out_err_vs_identity"], r["netmoe"]["out_err_vs_identity"]
            )
            if sp.residual == "expert_side":
                stale.append(r["stale_labels"]["loss_err"])
                moved.append(r["netmoe"]["moved"] / cfg.g3_samples)
    m["distributed"] = {
        **worst, "bytes_exact": float(min(exact)), "placement_agree": float(min(agree)),
        "moved_frac": float(np.mean(moved)), "world": float(world),
        "inter_bytes_ratio": inter["netmoe"] / max(inter["identity"], 1.0),
        "identity_a2a_s": a2a["identity"], "netmoe_a2a_s": a2a["netmoe"],
        "a2a_ratio_s": a2a["netmoe"] / max(a2a["identity"], 1e-12),
    }  # fmt: skip
    m["stale_labels"] = {"loss_err": float(min(stale))}


def _solver_time(cfg: ClaimConfig, seed: int, m: dict) -> None:
    topo = Topology(cfg.solver_nodes, cfg.solver_gpus_per_node)
    j = topo.devices
    ids = synthetic_trace(cfg.solver_samples, 64, 2 * j, cfg.top_k, beta=cfg.beta, seed=[seed, 30])
    num = assignment_counts(ids, np.arange(2 * j) % j, j)
    best = {"two_stage": np.inf, "joint": np.inf}
    for _ in range(3):
        for name, fn in (("two_stage", solve_two_stage), ("joint", solve_joint)):
            t0 = time.perf_counter()
            fn(num, topo)
            best[name] = min(best[name], time.perf_counter() - t0)
    m["solver"] = {"solve_512_s": float(best["two_stage"]), "joint_512_s": float(best["joint"])}


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """Train the text MoE LM and place its routing, then the report-only parts, for one seed (CPU).

    The distributed check starts ``g3_nodes * g3_gpus_per_node`` local gloo processes (one thread
    each). Threads and global RNGs of this process are fixed by the caller (``Claim.run``).

    Args:
        config: the budget's config.
        seed: seed of the LM, the held-out batches, the traces, the ILP instances and the gloo runs.
        device: unused (CPU only).
        progress: called from the LM-training, batch, sweep, instance and gloo loops.

    Returns:
        The per-arm metrics, the figures' series and notes.
    """
    m: dict[str, dict[str, float]] = {}
    series: dict[str, Series] = {}
    _domain_routing(config, seed, m, series, progress)
    _text_routing(config, seed, m, series, progress)
    _synthetic_sweep(config, seed, m, series, progress)
    _g2(config, seed, m, progress)
    _solver_time(config, seed, m)
    _g3(config, seed, m, progress)
    notes = [
        "Times are modelled from exact byte counts (Eq. 1 over channel totals; the per-device max is "
        "secondary); wall-clock numbers (*_s) are report-only.",
    ]
    for key, name in (("routing", "mixed-domain Mixtral"), ("text_routing", "package-text LM")):
        r = m[key]
        notes.append(
            f"Routing entropy of the {name}: {r['entropy']:.2f} nats per sample, {r['global_entropy']:.2f} "
            f"pooled over the batch, of a {r['entropy_max']:.2f}-nat maximum ({config.lm_experts} experts); "
            f"the predicted next-layer routing names the right device for "
            f"{100 * r['predictor_overlap']:.0f}% of the token copies."
        )
    return RunResult(metrics=m, series=series, notes=notes)


_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    samples=32, seq_len=64, trace_seeds=1, beta_sweep=(0.1, 10.0), opt_instances=10, g3_nodes=2,
    g3_gpus_per_node=1, g3_experts=4, g3_seeds=1, lm_steps=8, lm_batch=8, lm_context=32,
    eval_seq_len=256, eval_batches=1, dom_steps=8, dom_batch=8, dom_context=32,
)  # fmt: skip

# Thresholds. The relative bars of each source come from a pre-registered pilot on seed 100,
# which the claim does not use (full-budget config), by a rule fixed before any pilot ran:
# halfway between the pilot's ratio and 1 (no gain), to three decimals.
# - Mixed-domain Mixtral (experiments/netmoe_pilot.py --source domain): NetMoE / random =
#   0.7917 -> 0.896; next-layer-aware / current-only = 0.9616 -> 0.981.
# - Package-text LM (experiments/netmoe_pilot.py --source text): 0.9533 -> 0.977; 0.9929 -> 0.996.
# The absolute bar is the paper's: inter-node volume ratio 0.66 (Table 5, App. C; cuts of 34-43%).
_VS_RANDOM = 0.896
_VS_CURRENT = 0.981
_TEXT_VS_RANDOM = 0.977
_TEXT_VS_CURRENT = 0.996
_PAPER_INTER = 0.66


def _relative_gates(prefix: str, part: str, vs_random: float, vs_current: float, source: str) -> tuple:
    """Ceilings, gates and controls of the two relative gates on one routing source."""
    p = prefix
    return (
        # Preconditions (ceilings): the oracle placement, with the true next-layer routing, reaches
        # each gate's bar; otherwise no placement can reach it on this routing.
        ratio(
            f"{p}oracle.eq1_ratio", f"{p}random.eq1_ratio", "<", vs_random,
            name=f"{p}ceiling_vs_random", part=part, precondition=True,
            explain=f"Precondition (ceiling): on the {source}, the oracle placement beats random "
            "placement by the gate's bar.",
        ),
        ratio(
            f"{p}oracle.eq1_ratio", f"{p}current.eq1_ratio", "<", vs_current,
            name=f"{p}ceiling_next_layer", part=part, precondition=True,
            explain=f"Precondition (ceiling): on the {source}, pricing the true next-layer dispatch "
            "beats pricing this layer's combine alone by the gate's bar.",
        ),
        ratio(
            f"{p}netmoe.eq1_ratio", f"{p}random.eq1_ratio", "<", vs_random,
            name=f"{p}real_vs_random", part=part, falsifier=f"{p}ctrl_shuffled_vs_random",
            paper="modelled All-to-All time cut (Fig. 7); up to 1.67x end-to-end on 32 GPUs (Fig. 6)",
            explain=f"On the {source} (S = 1024, E = 2J, I/J = 4), NetMoE's placement gives a lower "
            "Eq. 1 All-to-All time over all layers than a balanced random placement (bar from the pilot).",
        ),
        fails(
            ratio(
                f"{p}shuffled.eq1_ratio", f"{p}random.eq1_ratio", "<", vs_random,
                name=f"{p}ctrl_shuffled_vs_random", part=part,
                explain="The same solver fed the routing with its device columns shuffled must not "
                "beat random placement by that margin.",
            )
        ),
        ratio(
            f"{p}netmoe.eq1_ratio", f"{p}current.eq1_ratio", "<", vs_current,
            name=f"{p}next_layer_aware", part=part, falsifier=f"{p}ctrl_broken_predictor",
            paper="edge weight = this layer's combine + next layer's dispatch (Eq. 5/6/10; prediction "
            "Sec. 3.3)",
            explain=f"On the {source}, pricing the next layer's dispatch with its routing predicted "
            "from this layer's input lowers the Eq. 1 time below pricing this layer's combine alone.",
        ),
        fails(
            ratio(
                f"{p}broken_predictor.eq1_ratio", f"{p}current.eq1_ratio", "<", vs_current,
                name=f"{p}ctrl_broken_predictor", part=part,
                explain="A next-layer prediction with shuffled device columns must not beat "
                "current-only placement.",
            )
        ),
    )  # fmt: skip


_CRITERIA = (
    *_relative_gates("", "real_routing", _VS_RANDOM, _VS_CURRENT, "mixed-domain Mixtral's routing"),
    value(
        "oracle.inter_ratio",
        "<=",
        _PAPER_INTER,
        name="ceiling_paper_inter",
        part="paper_bar",
        precondition=True,
        explain="Precondition (ceiling): on the mixed-domain Mixtral's routing, the oracle placement "
        "reaches the paper's inter-node volume bar (66% of plain expert parallelism's bytes); "
        "otherwise no placement can reach it on this routing.",
    ),
    value(
        "netmoe.inter_ratio",
        "<=",
        _PAPER_INTER,
        name="paper_inter_volume",
        part="paper_bar",
        falsifier="ctrl_shuffled_inter",
        paper="inter-node A2A volume cut 34-43%, ratio 0.57-0.66 (Table 5, App. C)",
        explain="On the mixed-domain Mixtral's routing at the paper's shape, NetMoE carries at most "
        "66% of plain expert parallelism's inter-node All-to-All bytes (the paper's weakest Table 5 cut).",
    ),
    fails(
        value(
            "shuffled.inter_ratio",
            "<=",
            _PAPER_INTER,
            name="ctrl_shuffled_inter",
            part="paper_bar",
            explain="The solver fed shuffled device columns must not reach the paper's volume bar.",
        )
    ),
    *_relative_gates("text_", "text_routing", _TEXT_VS_RANDOM, _TEXT_VS_CURRENT, "package-text LM's routing"),
    # Report-only rows: what the gates do not decide.
    value(
        "oracle.eq1_ratio",
        "<",
        1.0,
        name="oracle_eq1",
        gating=False,
        explain="The true next-layer routing (an upper bound on any predictor) lowers the Eq. 1 time "
        "below plain expert parallelism's.",
    ),
    value(
        "netmoe.tmax_ratio",
        "<",
        1.0,
        name="netmoe_tmax",
        gating=False,
        explain="Secondary time model: the slowest device's All-to-All time drops below identity's.",
    ),
    value(
        "text_netmoe.inter_ratio",
        "<=",
        _PAPER_INTER,
        name="text_paper_inter_volume",
        gating=False,
        explain="Second source: NetMoE's inter-node byte ratio on the package-text LM's routing "
        "against the paper's 0.66.",
    ),
    value(
        "text_oracle.inter_ratio",
        "<=",
        _PAPER_INTER,
        name="text_ceiling_paper_inter",
        gating=False,
        explain="Second source: the oracle placement's inter-node byte ratio on the package-text "
        "LM's routing (whether any placement could reach the paper's bar there).",
    ),
    value(
        "routing.entropy",
        "<",
        2.0,
        name="routing_entropy",
        gating=False,
        paper="locality of routing within a sample (Fig. 2); no entropy figure to quote",
        explain="Mixed-domain Mixtral: mean per-sample routing entropy (nats; uniform over 16 experts "
        "is 2.77); lower means more locality. The 2-nat line (about 7 effective experts) is a "
        "reference, not a figure from the paper.",
    ),
    value(
        "routing.global_entropy",
        ">",
        2.0,
        name="routing_global_entropy",
        gating=False,
        explain="Mixed-domain Mixtral: entropy of the batch-pooled expert distribution (nats); high "
        "with a low per-sample entropy means samples prefer different experts (no collapse).",
    ),
    diff(
        "routing.final_loss",
        "routing.entropy_rate",
        "<=",
        0.25,
        name="domain_lm_fit",
        gating=False,
        explain="Mixed-domain Mixtral: final training loss minus the domains' entropy rate (the loss "
        "floor of a model that knows the domain), nats per token; 0.25 is a reference line.",
    ),
    value(
        "text_routing.entropy",
        "<",
        2.0,
        name="text_routing_entropy",
        gating=False,
        explain="Package-text LM: mean per-sample routing entropy (nats, of 2.77).",
    ),
    value(
        "text_routing.global_entropy",
        ">",
        2.0,
        name="text_routing_global_entropy",
        gating=False,
        explain="Package-text LM: entropy of the batch-pooled expert distribution (nats).",
    ),
    value(
        "synthetic.uniform_eq1_ratio",
        ">=",
        0.95,
        name="synthetic_uniform",
        gating=False,
        explain="Mechanism: on uniform synthetic routing there is nothing to exploit (ratio near 1).",
    ),
    value(
        "optimality.stage1_match",
        ">=",
        1.0,
        name="g2_stage1_ilp",
        gating=False,
        paper="KM gives the optimal placement",
        explain="Exactness: the first Kuhn-Munkres stage (samples to nodes) equals the integer "
        "program's optimum on every small instance.",
    ),
    value(
        "optimality.stage2_match",
        ">=",
        1.0,
        name="g2_stage2_ilp",
        gating=False,
        explain="Exactness: the second stage (devices within a node) equals the integer program's "
        "optimum on every instance.",
    ),
    value(
        "optimality.joint_match",
        ">=",
        1.0,
        name="g2_joint_ilp",
        gating=False,
        explain="Exactness: the single-stage weighted-sum assignment equals its integer program's "
        "optimum on every instance.",
    ),
    value(
        "distributed.out_err",
        "<=",
        1e-6,
        name="g3_forward_vs_dense",
        gating=False,
        explain="Exactness: the placed two-layer expert-parallel stack on gloo processes gives the "
        "dense single-process outputs to 1e-6.",
    ),
    value(
        "distributed.out_err_vs_identity",
        "<=",
        1e-6,
        name="g3_forward_vs_identity",
        gating=False,
        explain="Exactness: re-placing samples does not change any sample's output (to 1e-6).",
    ),
    value(
        "distributed.grad_err",
        "<=",
        1e-5,
        name="g3_gradients",
        gating=False,
        explain="Exactness: expert, gate and norm gradients of every layer equal the dense reference's.",
    ),
    value(
        "distributed.bytes_exact",
        ">=",
        1.0,
        name="g3_bytes_equal_model",
        gating=False,
        explain="Exactness: the bytes every layer's dispatch and combine send per link equal the cost "
        "model's, with each layer dispatching from where the previous one left the samples.",
    ),
    value(
        "distributed.placement_agree",
        ">=",
        1.0,
        name="g3_placement_agree",
        gating=False,
        explain="Exactness: every rank applies the same placement at every layer.",
    ),
    value(
        "distributed.inter_bytes_ratio",
        "<",
        1.0,
        name="g3_inter_bytes_ratio",
        gating=False,
        explain="End to end on gloo processes (2 emulated nodes x 2): the inter-node bytes the placed "
        "stack's All-to-Alls measured, over the unplaced stack's (synthetic block inputs).",
    ),
    value(
        "distributed.a2a_ratio_s",
        "<",
        1.0,
        name="g3_a2a_time_ratio",
        gating=False,
        explain="Wall-clock: the placed stack's forward All-to-All time over the unplaced one's, "
        "slowest rank, on loopback gloo (which does not model NVLink against InfiniBand).",
    ),
    fails(
        value(
            "stale_labels.loss_err",
            "<=",
            1e-5,
            name="ctrl_labels_left_behind",
            gating=False,
            explain="Leaving labels on the old device after re-placement must change the loss (the "
            "exactness rows can fail).",
        )
    ),
    value(
        "solver.solve_512_s",
        "<=",
        0.05,
        name="solver_time",
        gating=False,
        explain="Wall-clock: the two-stage solver places 512 samples on 4 x 8 devices within 50 ms.",
    ),
)

CLAIM = Claim(
    name="netmoe",
    paper=PaperRef(
        title="NetMoE: Accelerating MoE Training through Dynamic Sample Placement",
        authors="Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui",
        arxiv="",
        code="",
    ),
    statement=(
        "Tokens of one training sample show locality in expert routing; dynamically re-placing samples "
        "(an integer program solved exactly in polynomial time by two Kuhn-Munkres stages) minimises "
        "All-to-All communication and gives up to 1.67x training efficiency on 32 GPUs."
    ),
    arms={
        "netmoe": "two-stage KM on this layer's combine + the predicted next-layer dispatch (the method)",
        "current": "two-stage KM on this layer's combine only",
        "oracle": "two-stage KM with the true next-layer routing (upper bound)",
        "random": "balanced random sample placement at every layer",
        "identity": "plain expert parallelism (samples stay; the ratios' reference)",
        "shuffled": "control: NetMoE fed routing with shuffled device columns",
        "broken_predictor": "control: next-layer prediction with shuffled device columns",
        "routing": "the mixed-domain Mixtral's routing statistics (entropy, predictor overlap, loss)",
        **{f"text_{a}": f"second source (package-text LM's routing): the {a} arm" for a in _REAL_ARMS},
        "text_routing": "the package-text LM's routing statistics",
        "synthetic": "report-only: Dirichlet traces (uniform routing, strongest locality)",
        "optimality": "G2 (report-only): KM stages vs the ILP oracle",
        "distributed": "G3 (report-only): a placed two-layer gloo stack vs unplaced and dense runs",
        "stale_labels": "control of G3 (report-only): labels left on the old device",
        "solver": "solver wall-clock, I = 512 on 4 x 8",
    },
    criteria=_CRITERIA,
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=150.0),
    },
    run_fn=run,
    headline="real_vs_random",
    figure="domain_lm_loss",
    deviations=(
        "Mechanism only: modelled All-to-All times (Eq. 1 over channel totals) on 2 x 4 devices from exact "
        "byte counts, not the paper's end-to-end speed on 32 A800 GPUs; wall-clock is report-only.",
        "Gated routing from a 4-layer, 16-expert, d = 64 transformers Mixtral (built from a config) trained "
        "300 Adam steps without a balance loss on 8 synthetic Markov-chain domains (32-token vocabulary "
        "subsets of 256), instead of GPT-MoE on a web corpus; each sample is one domain's document.",
        "Second routing source: a 4-layer, 16-expert byte-level MoE LM trained 300 steps (Switch balance "
        "loss 0.01) on text shipped with the Python standard library, torch, numpy and scipy.",
        "Thresholds of the relative gates come from a pre-registered pilot on seed 100 per source (halfway "
        "from the pilot's ratio to 1); the inter-node volume bar is the paper's 0.66 (Table 5).",
        "Placements persist across layers; the first layer dispatches from the loader's placement and the "
        "backward All-to-Alls mirror the forward ones (same bytes, not modelled separately).",
        "The distributed check runs a two-layer stack on local gloo processes (2 emulated nodes x 2).",
        "Synthetic Dirichlet traces, ILP optimality (G2) and distributed exactness (G3) are report-only "
        "mechanism rows, covered by unit tests.",
    ),
    unchecked=(
        "the routing has the per-sample locality the paper's Fig. 2 shows: each source's entropy is "
        "reported, but the paper gives no figure to hold it to",
    ),
)
