"""Claim check of NetMoE: placing samples near their tokens' experts cuts All-to-All traffic.

The paper's headline (up to 1.67x training efficiency on 32 GPUs) needs a GPU cluster; the check
re-measures the mechanism on **real routing**: a 4-layer, 16-expert byte-level MoE language model
trained on text that ships with Python packages (source, headers, prose, data), traced on
held-out files at the paper's shape (S = 1024, E = 2J, I / J = 4) on a modelled 2 x 4 cluster.
Placements are solved on the paper's objective (this layer's combine plus the next layer's
dispatch, Eq. 5/6/10) with the next layer's routing predicted as in Sec. 3.3, persist from layer
to layer, and are timed with the paper's Eq. 1. Gates: NetMoE beats a random placement; the
next-layer-aware objective beats the current-layer-only one; NetMoE reaches the paper's Table 5
inter-node volume bar. Controls: the solver fed shuffled device columns, and a predictor whose
device columns are shuffled. Report-only: the synthetic locality sweep, G2 (each KM stage equals
an ILP optimum), G3 (a placed two-layer stack on gloo processes equals the unplaced and dense
runs, byte counters equal the cost model) and the solver time.
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
from iclr25.methods.netmoe.launch import run as launch_run
from iclr25.methods.netmoe.routing_data import routing_entropy, synthetic_trace
from iclr25.methods.netmoe.text_lm import TextMoELM, package_text_corpus, train_text_moe_lm

__all__ = ["CLAIM", "run"]


def _device_counts(ids: np.ndarray, experts_per_device: int, devices: int) -> np.ndarray:
    """num ``[I, J]`` of routed experts ``[I, S, k]`` with expert e on device ``e // (E / J)``."""
    n_experts = devices * experts_per_device
    return assignment_counts(ids, np.arange(n_experts) // experts_per_device, devices)


def _overlap(pred: np.ndarray, true: np.ndarray) -> float:
    """Share of true token copies whose device the prediction also names (sum of row-wise minima)."""
    return float(np.minimum(pred, true).sum() / max(true.sum(), 1))


_REAL_ARMS = ("identity", "random", "current", "netmoe", "oracle", "shuffled", "broken_predictor")


def _real_routing(cfg: ClaimConfig, seed: int, m: dict, series: dict, progress: ProgressFn) -> None:
    """Train the text MoE LM, trace held-out batches at the paper's shape and place them."""
    topo = Topology(cfg.nodes, cfg.gpus_per_node, cfg.bw_intra, cfg.bw_inter, cfg.bytes_per_token)
    j = topo.devices
    per_dev = cfg.lm_experts // j
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
    totals = {a: np.zeros(5) for a in _REAL_ARMS}
    entropy, overlap, kinds = [], [], []
    ident = identity_placement(cfg.eval_samples, topo)
    for b in range(cfg.eval_batches):
        progress("real routing batches", b, cfg.eval_batches)
        rng = np.random.default_rng([seed, 40, b])
        pick = rng.choice(len(corpus.heldout), size=cfg.eval_samples, replace=False)
        kinds.append(len(np.unique(corpus.heldout_kind[pick])))
        tr = lm.trace(torch.as_tensor(corpus.heldout[pick]))
        nums = [_device_counts(ids, per_dev, j) for ids in tr.expert_ids]  # per layer [I, J]
        pred = [_device_counts(ids, per_dev, j) for ids in tr.predicted_next]
        entropy += [routing_entropy(ids, cfg.lm_experts) for ids in tr.expert_ids]
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
        m.setdefault(arm, {}).update(
            inter_ratio=float(t[0] / base[0]), eq1_ratio=float(t[2] / base[2]),
            tmax_ratio=float(t[3] / base[3]), eq1_time=float(t[2]), inter_bytes=float(t[0]),
        )  # fmt: skip
    m["routing"] = {
        "entropy": float(np.mean(entropy)),
        "entropy_max": float(np.log(cfg.lm_experts)),
        "predictor_overlap": float(np.mean(overlap)),
        "kinds_per_batch": float(np.mean(kinds)),
        "final_loss_bits": float(np.mean(losses[-20:]) / np.log(2)),
        "first_loss_bits": float(losses[0] / np.log(2)),
    }
    per = max(1, len(losses) // 50)
    series["lm_loss"] = Series(
        title="Byte-level MoE LM on local package text: training loss", xlabel="step",
        ylabel="bits per byte", x=[float(i) for i in range(0, len(losses), per)],
        lines={"loss": [v / np.log(2) for v in losses[::per]]},
    )  # fmt: skip


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
            worst["out_err_vs_identity"] = max(
                worst["out_err_vs_identity"], r["netmoe"]["out_err_vs_identity"]
            )
            if sp.residual == "expert_side":
                stale.append(r["stale_labels"]["loss_err"])
                moved.append(r["netmoe"]["moved"] / cfg.g3_samples)
    m["distributed"] = {
        **worst, "bytes_exact": float(min(exact)), "placement_agree": float(min(agree)),
        "moved_frac": float(np.mean(moved)),
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
    _real_routing(config, seed, m, series, progress)
    _synthetic_sweep(config, seed, m, series, progress)
    _g2(config, seed, m, progress)
    _solver_time(config, seed, m)
    _g3(config, seed, m, progress)
    r = m["routing"]
    notes = [
        "Times are modelled from exact byte counts (Eq. 1 over channel totals; the per-device max is "
        "secondary); wall-clock numbers (*_s) are report-only.",
        f"Per-sample routing entropy of the text LM: {r['entropy']:.2f} nats of a {r['entropy_max']:.2f}-nat "
        f"maximum (uniform over {config.lm_experts} experts); the predicted next-layer routing names the "
        f"right device for {100 * r['predictor_overlap']:.0f}% of the token copies.",
    ]
    return RunResult(metrics=m, series=series, notes=notes)


_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    samples=32, seq_len=64, trace_seeds=1, beta_sweep=(0.1, 10.0), opt_instances=10, g3_nodes=2,
    g3_gpus_per_node=1, g3_experts=4, g3_seeds=1, lm_steps=8, lm_batch=8, lm_context=32,
    eval_seq_len=256, eval_batches=1,
)  # fmt: skip

# Thresholds of the three gates. The two relative bars come from the pre-registered pilot
# (experiments/netmoe_pilot.py, seed 100, which the claim does not use; full-budget config), by a
# rule fixed before the pilot ran: halfway between the pilot's ratio and 1 (no gain), to three
# decimals. Pilot: NetMoE / random = 0.9533 -> 0.977; next-layer-aware / current-only = 0.9929
# -> 0.996. The absolute bar is the paper's: inter-node volume ratio 0.66 (Table 5, App. C;
# cuts of 34-43%).
_VS_RANDOM = 0.977
_VS_CURRENT = 0.996
_PAPER_INTER = 0.66

_CRITERIA = (
    # Preconditions (ceilings): the oracle placement, with the true next-layer routing, reaches each
    # gate's bar; otherwise no placement can reach it on this routing.
    ratio(
        "oracle.eq1_ratio",
        "random.eq1_ratio",
        "<",
        _VS_RANDOM,
        name="ceiling_vs_random",
        part="real_routing",
        precondition=True,
        explain="Precondition (ceiling): the oracle placement beats random placement by "
        "real_vs_random's bar.",
    ),
    ratio(
        "oracle.eq1_ratio",
        "current.eq1_ratio",
        "<",
        _VS_CURRENT,
        name="ceiling_next_layer",
        part="real_routing",
        precondition=True,
        explain="Precondition (ceiling): pricing the true next-layer dispatch beats pricing this "
        "layer's combine alone by next_layer_aware's bar.",
    ),
    value(
        "oracle.inter_ratio",
        "<=",
        _PAPER_INTER,
        name="ceiling_paper_inter",
        part="paper_bar",
        precondition=True,
        explain="Precondition (ceiling): the oracle placement reaches the paper's inter-node volume "
        "bar (66% of plain expert parallelism's bytes); otherwise no placement can reach it on this "
        "routing.",
    ),
    ratio(
        "netmoe.eq1_ratio",
        "random.eq1_ratio",
        "<",
        _VS_RANDOM,
        name="real_vs_random",
        part="real_routing",
        falsifier="ctrl_shuffled_vs_random",
        paper="modelled All-to-All time cut (Fig. 7); up to 1.67x end-to-end on 32 GPUs (Fig. 6)",
        explain="On a text MoE LM's real routing (S = 1024, E = 2J, I/J = 4), NetMoE's placement gives a "
        "lower Eq. 1 All-to-All time over all layers than a balanced random placement (bar from the pilot).",
    ),
    fails(
        ratio(
            "shuffled.eq1_ratio",
            "random.eq1_ratio",
            "<",
            _VS_RANDOM,
            name="ctrl_shuffled_vs_random",
            part="real_routing",
            explain="The same solver fed the routing with its device columns shuffled must not beat "
            "random placement by that margin.",
        )
    ),
    ratio(
        "netmoe.eq1_ratio",
        "current.eq1_ratio",
        "<",
        _VS_CURRENT,
        name="next_layer_aware",
        part="real_routing",
        falsifier="ctrl_broken_predictor",
        paper="edge weight = this layer's combine + next layer's dispatch (Eq. 5/6/10; prediction Sec. 3.3)",
        explain="Pricing the next layer's dispatch with its routing predicted from this layer's input "
        "lowers the Eq. 1 time below pricing this layer's combine alone (bar from the pilot).",
    ),
    fails(
        ratio(
            "broken_predictor.eq1_ratio",
            "current.eq1_ratio",
            "<",
            _VS_CURRENT,
            name="ctrl_broken_predictor",
            part="real_routing",
            explain="A next-layer prediction with shuffled device columns must not beat current-only "
            "placement.",
        )
    ),
    value(
        "netmoe.inter_ratio",
        "<=",
        _PAPER_INTER,
        name="paper_inter_volume",
        part="paper_bar",
        falsifier="ctrl_shuffled_inter",
        paper="inter-node A2A volume cut 34-43%, ratio 0.57-0.66 (Table 5, App. C)",
        explain="At the paper's shape, NetMoE carries at most 66% of plain expert parallelism's "
        "inter-node All-to-All bytes (the paper's weakest Table 5 cut).",
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
        "routing.entropy",
        "<",
        2.0,
        name="routing_entropy",
        gating=False,
        paper="locality of routing within a sample (Fig. 2); no entropy figure to quote",
        explain="Mean per-sample routing entropy (nats; uniform over 16 experts is 2.77): lower means "
        "more locality for a placement to exploit. The 2-nat line (about 7 effective experts) is a "
        "reference, not a figure from the paper.",
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
        "routing": "the text LM's routing statistics (entropy, predictor overlap, loss)",
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
    figure="lm_loss",
    deviations=(
        "Mechanism only: modelled All-to-All times (Eq. 1 over channel totals) on 2 x 4 devices from exact "
        "byte counts, not the paper's end-to-end speed on 32 A800 GPUs; wall-clock is report-only.",
        "Routing from a 4-layer, 16-expert, d = 64 byte-level MoE LM trained 300 Adam steps (context 64) on "
        "text shipped with the Python standard library, torch, numpy and scipy, instead of GPT-MoE on a "
        "web corpus; held-out 1024-byte samples are routed in 64-byte chunks.",
        "Thresholds of the two relative gates come from a pre-registered pilot on seed 100 (halfway from "
        "the pilot's ratio to 1); the inter-node volume bar is the paper's 0.66 (Table 5).",
        "Placements persist across layers; the first layer dispatches from the loader's placement and the "
        "backward All-to-Alls mirror the forward ones (same bytes, not modelled separately).",
        "The distributed check runs a two-layer stack on local gloo processes (2 emulated nodes x 2).",
        "Synthetic Dirichlet traces, ILP optimality (G2) and distributed exactness (G3) are report-only "
        "mechanism rows, covered by unit tests.",
    ),
    unchecked=(
        "the routing has the per-sample locality the paper's Fig. 2 shows: its entropy is reported, but "
        "the paper gives no figure to hold it to",
    ),
)
