"""Claim check of FTCT: few-shot chain-of-thought chains fragments never seen whole; zero-shot fails.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Re-measures the headline result of
Section 4 (Figure 3: whole-chain accuracy against shots and chain depth) at CPU scale: a
3-layer GPT-2 trained only on fragments of at most M = 3 vertices of 5-vertex chains, tested
with k = 0..3 demonstrations. Negative controls: demonstrations of the other chain,
demonstrations with the vertex order shuffled, and a 1-layer, 1-head model of the same width
(the paper's contrast: at least 2 layers and 2 heads are needed); all must break the chaining.
Report-only diagnostics show where a chain breaks: vertex order by depth, order through depth
M + 1 (past the longest training fragment), the official icl copy test and three copy probes,
and a learning curve over training checkpoints (whole chains at k = 0, 1 and k_max).

The claim has two parts, judged apart: "few-shot CoT composes chains" and "zero-shot fails".
Both rest on the model having fitted its training text (copying an order and the values along
an edge, in distribution); each also needs its own learning curve (k = 1, k = 0) to have
plateaued. Zero-shot diagnostics, reported only: whether zero-shot completions just walk the
graph's learnt edges (and to which chain), the same with the question naming the root, and how
many training traces hold a graph path longer than M. ``full`` runs at d = 48 and has not
converged; ``long`` runs the spec's CPU model (d = 96) with data closer to the paper for 6k
steps (the learning curve of ``experiments/ftct_scale.py`` on a seed outside the claim's puts
the effect between 3k and 4k) and is the budget whose verdict counts.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Sequence

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
from iclr25._core.convergence import plateau_gap, read_curve
from iclr25._core.seeding import numpy_rng, seed_everything
from iclr25.methods.ftct import (
    COPY_KINDS,
    CausalGraph,
    ClaimConfig,
    Corpus,
    FTCTConfig,
    FTCTTokenizer,
    ModelConfig,
    TestItem,
    TrainConfig,
    build_model,
    count_long_paths,
    evaluate,
    greedy_generate,
    make_compositional_tests,
    make_copy_tests,
    make_in_distribution_tests,
    make_training_corpus,
    parse_pairs,
    score_output,
    train_model,
)

__all__ = ["CLAIM", "FULL", "LONG", "SMOKE", "run"]

_REPORTED = ("whole", "whole_lenient", "final", "vertex_order", "te_val")
_VARIANTS = ("same", "other_chain", "shuffled")
#: The claim's two parts; preconditions that name no part (the skills) cover both.
FEW = "few-shot CoT composes chains"
ZERO = "zero-shot fails"
#: Largest change of a learning-curve point over the last fifth of training that counts as a
#: plateau: the standard deviation of the difference of two independent accuracies on 50
#: prompts at p = 0.5, sqrt(2 * 0.25 / 50) = 0.1, the curve's largest sampling noise. A smaller
#: move is no evidence that the accuracy still changes; the curve has 50 prompts a point
#: (``ClaimConfig.curve_prompts``), so the bar is tied to that count, not to any result.
CURVE_EPSILON = 0.1


def _best_k(per_k: dict[int, dict[str, float]]) -> int:
    """The k >= 1 with the highest strict whole accuracy (ties: the smallest k)."""
    ks = sorted(k for k in per_k if k >= 1)
    return max(ks, key=lambda k: (per_k[k]["whole"], -k))


def _order_at(per_k: dict[str, float], m: int) -> tuple[float, float]:
    """Vertex-order accuracy through depth ``m + 1``, and the same given the order through ``m``.

    Depth counts vertices with the root as 1; ``m + 1`` is the first depth that no training
    fragment of at most ``m`` vertices spans from the root.
    """
    upto_m1 = per_k[f"order_depth{m + 1}"]
    upto_m = per_k[f"order_depth{m}"] if m >= 2 else 1.0
    return upto_m1, (upto_m1 / upto_m if upto_m > 0 else 0.0)


def _first_step_question(tok: FTCTTokenizer, item: TestItem) -> TestItem:
    """The same zero-shot prompt with the question naming the root (the first step) instead of
    the queried last vertex, so the prompt no longer says which chain is asked."""
    ids = list(item.prompt_ids)
    if ids[item.query_start] != tok.letter_id(item.chain[-1]):
        raise ValueError("the query's question does not name its last vertex")
    ids[item.query_start] = tok.letter_id(item.chain[0])
    return dataclasses.replace(item, prompt_ids=tuple(ids))


def _walks(
    model: torch.nn.Module,
    tok: FTCTTokenizer,
    graph: CausalGraph,
    items: Sequence[TestItem],
    *,
    batch_size: int,
    device: str,
) -> dict[str, float]:
    """Whether zero-shot completions just walk the graph's edges from the given root.

    ``whole``: the asked chain exactly (values included); ``edge_walk``: the root and the first
    n - 1 generated vertices form a path along graph edges (values ignored), any chain;
    ``other_chain``: such a path, but to a chain other than the asked one; ``asked_order``: the
    asked chain's vertex order. Every edge is seen in training (fragments of 2..M vertices cover
    all edges), so ``edge_walk`` near 1 with ``other_chain`` near half of it means the model
    follows learnt edges and does not read which chain the question asks for.
    """
    gens = greedy_generate(
        model,
        [it.prompt_ids for it in items],
        max_new_tokens=max(it.max_new_tokens for it in items),
        pad_id=tok.pad_id,
        stop_ids=(tok.newline_id, tok.eos_id),
        batch_size=batch_size,
        device=device,
    )
    sums = {"whole": 0.0, "edge_walk": 0.0, "other_chain": 0.0, "asked_order": 0.0}
    for it, gen in zip(items, gens, strict=True):
        gen = gen[: it.max_new_tokens]
        n = len(it.chain)
        path = (it.chain[0], *(v for v, _ in parse_pairs(tok, gen)[: n - 1]))
        walk = len(path) == n and all(e in graph.edges for e in itertools.pairwise(path))
        sums["whole"] += score_output(tok, it, gen)["whole"]
        sums["edge_walk"] += walk
        sums["other_chain"] += walk and path != tuple(it.chain)
        sums["asked_order"] += path == tuple(it.chain)
    return {k: v / len(items) for k, v in sums.items()}


def _checkpoints(total: int, points: int) -> list[int]:
    """``points`` evenly spaced step counts in 1..total, the last one ``total``."""
    if points <= 0:
        return []
    return sorted({max(1, round(total * i / points)) for i in range(1, points + 1)})


def _train(
    config: ClaimConfig,
    model_cfg: ModelConfig,
    corpus: Corpus,
    tok: FTCTTokenizer,
    *,
    seed: int,
    device: str,
    progress: ProgressFn,
    stage: str,
    on_checkpoint: Callable[[int, torch.nn.Module], None] | None = None,
) -> tuple[torch.nn.Module, list[float], float]:
    """Build and train one model; returns ``(model, losses, seconds)``."""
    model = build_model(model_cfg, tok, seed=seed).to(device)
    total = config.train.steps or round(
        config.train.epochs * math.ceil(len(corpus) / config.train.batch_size)
    )
    t0 = time.perf_counter()
    losses = train_model(
        model,
        corpus,
        config.train,
        seed=seed,
        device=device,
        progress=lambda _stage, done, n: progress(stage, done, n),
        checkpoints=_checkpoints(total, config.curve_points) if on_checkpoint else (),
        on_checkpoint=on_checkpoint,
    )
    return model, losses, time.perf_counter() - t0


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """Train on fragments, then evaluate few-shot, zero-shot, the controls and the diagnostics.

    Graph, corpus, tests and the model's initialisation all derive from ``seed``. The model
    scored is the one after the last training step (a rule fixed in advance; the learning curve
    is recorded at ``config.curve_points`` checkpoints on separate prompts and never chooses it).

    Args:
        config: the claim config.
        seed: the run's seed.
        device: "cpu" or "cuda".
        progress: ``progress(stage, done, total)``, called from the training loops and once per
            evaluated test family.

    Returns:
        Per-arm metrics; the shots, depth, vertex-order, copy-probe, learning-curve and loss
        series.
    """
    seed_everything(seed)
    cfg = config.data
    m = cfg.max_child_len
    graph = CausalGraph.random(cfg, numpy_rng(seed, 0))
    tok = FTCTTokenizer(n_letters=cfg.n_letters, modulus=cfg.modulus, context_div=cfg.context_div)
    corpus = make_training_corpus(graph, tok, cfg, numpy_rng(seed, 1))
    shots = sorted(config.shots)
    k_max = shots[-1]
    ev = dict(batch_size=config.eval_batch_size, device=device)

    # learning curve: whole-chain accuracy at k = 0, 1 and k_max, vertex order through depth
    # M + 1 at k = 1, and the official icl copy test at k = 1, on prompts of their own
    curve_ks = sorted({0, 1, k_max})
    curve_tests = [
        it
        for k in curve_ks
        for it in make_compositional_tests(graph, tok, cfg, k, config.curve_prompts, numpy_rng(seed, 6, k))
    ]
    curve_icl = make_copy_tests(graph, tok, cfg, 1, config.curve_prompts, numpy_rng(seed, 7), kind="icl")
    curve: dict[str, list[float]] = {
        "step": [],
        **{f"whole_k{k}": [] for k in curve_ks},
        "order_m1_k1": [],
        "icl_k1": [],
    }

    def record(step: int, model: torch.nn.Module) -> None:
        res = evaluate(model, tok, curve_tests, **ev)
        curve["step"].append(float(step))
        for k in curve_ks:
            curve[f"whole_k{k}"].append(res[k]["whole"])
        curve["order_m1_k1"].append(_order_at(res[1], m)[0])
        curve["icl_k1"].append(evaluate(model, tok, curve_icl, **ev)[1]["copy"])

    model, losses, train_s = _train(
        config,
        config.model,
        corpus,
        tok,
        seed=seed,
        device=device,
        progress=progress,
        stage="training",
        on_checkpoint=record if config.curve_points else None,
    )

    t0 = time.perf_counter()
    results: dict[str, dict[int, dict[str, float]]] = {}
    n_evals = len(_VARIANTS) + 2
    for v, demos in enumerate(_VARIANTS):
        progress("evaluating", v, n_evals)
        tests = []
        for k in shots:
            if demos != "same" and k == 0:
                continue  # without demonstrations every variant is the zero-shot prompt
            rng = numpy_rng(seed, 2, v, k)
            tests += make_compositional_tests(graph, tok, cfg, k, config.prompts_per_k, rng, demos=demos)
        results[demos] = evaluate(model, tok, tests, **ev)
    progress("evaluating", len(_VARIANTS), n_evals)
    in_dist = []
    for k in shots:
        in_dist += make_in_distribution_tests(
            graph, tok, cfg, k, config.in_dist_prompts, numpy_rng(seed, 3, k)
        )
    tr = evaluate(model, tok, in_dist, **ev)
    copies: dict[str, dict[int, dict[str, float]]] = {}
    for c, kind in enumerate(COPY_KINDS):
        tests = []
        for k in shots:
            if k >= 1:  # with no demonstration there is no order to copy
                tests += make_copy_tests(
                    graph, tok, cfg, k, config.copy_prompts, numpy_rng(seed, 8, c, k), kind=kind
                )
        copies[kind] = evaluate(model, tok, tests, **ev)
    # zero-shot diagnosis: the claim's zero-shot prompts (question names the last vertex) and
    # the same prompts with the question naming the root, read as walks along graph edges
    zero_items = make_compositional_tests(graph, tok, cfg, 0, config.prompts_per_k, numpy_rng(seed, 9))
    walks = {
        "": _walks(model, tok, graph, zero_items, **ev),
        "first_q_": _walks(model, tok, graph, [_first_step_question(tok, it) for it in zero_items], **ev),
    }
    progress("evaluating", len(_VARIANTS) + 1, n_evals)
    eval_s = time.perf_counter() - t0

    same = results["same"]
    best = _best_k(same)
    few_ks = [k for k in shots if k >= 1]
    metrics: dict[str, dict[str, float]] = {
        "few_shot": {name: same[best][name] for name in _REPORTED},
        "zero_shot": {name: same[0][name] for name in _REPORTED},
    }
    tr_ver = sum(copies["icl"][k]["copy"] for k in few_ks) / len(few_ks)  # official: mean over k >= 1
    metrics["few_shot"].update(best_k=float(best), tr_ver=tr_ver, tr_val=tr[best]["tr_val"])
    metrics["zero_shot"].update(tr_val=tr[0]["tr_val"])
    for arm, k in (("few_shot", best), ("zero_shot", 0)):
        at, given = _order_at(same[k], m)
        metrics[arm].update(order_at_m1=at, order_at_m1_given_m=given)
        for j in range(2, cfg.depth + 1):
            metrics[arm][f"order_depth{j}"] = same[k][f"order_depth{j}"]
    for arm, demos in (("cross_chain", "other_chain"), ("shuffled", "shuffled")):
        kb = _best_k(results[demos])
        metrics[arm] = {name: results[demos][kb][name] for name in _REPORTED}
        metrics[arm]["best_k"] = float(kb)
    for k in shots:
        metrics["few_shot" if k else "zero_shot"][f"whole_k{k}"] = same[k]["whole"]
    for prefix, w in walks.items():
        metrics["zero_shot"].update({f"{prefix}{name}": v for name, v in w.items()})
    metrics["copy_probes"] = {}
    for kind in COPY_KINDS:
        metrics["copy_probes"][kind] = sum(copies[kind][k]["copy"] for k in few_ks) / len(few_ks)
        for k in few_ks:
            metrics["copy_probes"][f"{kind}_k{k}"] = copies[kind][k]["copy"]
    for kind in ("random", "chain"):  # sentences of n letters, like the chain
        metrics["copy_probes"][f"{kind}_order_at_m1"] = _order_at(copies[kind][best], m)[0]
    metrics["training"] = {
        "final_loss": sum(losses[-20:]) / len(losses[-20:]),
        "lambda": cfg.lam,
        "sequences": float(len(corpus)),
        "steps": float(len(losses)),
    }
    if curve["step"]:
        for i, step in enumerate(curve["step"]):
            for k in curve_ks:
                metrics["training"][f"curve_whole_k{k}_step{int(step)}"] = curve[f"whole_k{k}"][i]
    for k in (0, 1):  # the plateau of each gated curve (inf without a curve of >= 2 points)
        gap = read_curve(curve["step"], curve[f"whole_k{k}"]).plateau_gap if curve["step"] else math.inf
        metrics["training"][f"curve_whole_k{k}_plateau_gap"] = gap
    metrics["training"]["loss_plateau_gap"] = plateau_gap(losses)
    # traces of the training data holding more than M vertices of a graph path in order: with
    # graph values (0 by construction) and as letters only (structure sentences of random letters)
    traces = [t for ts in corpus.traces for t in ts]
    over_m = count_long_paths(graph, traces, m + 1)
    whole = count_long_paths(graph, traces, cfg.depth)
    metrics["training"].update(
        traces=float(len(traces)),
        paths_over_m_consistent=float(over_m["consistent"]),
        paths_over_m_letters=float(over_m["letters"]),
        whole_chains_consistent=float(whole["consistent"]),
        whole_chains_letters=float(whole["letters"]),
    )

    notes = [
        f"graph levels {graph.levels}; lambda = M/n = {cfg.lam:.2f}",
        f"training {train_s:.1f} s ({len(losses)} steps), evaluation {eval_s:.1f} s",
        "at k = 0 the control curves reuse the same-chain value (no demonstrations to alter)",
        "scored model: the one after the last training step (fixed in advance)",
    ]
    if config.shallow_control:
        shallow_cfg = dataclasses.replace(config.model, n_layer=1, n_head=1)
        shallow, s_losses, s_train_s = _train(
            config,
            shallow_cfg,
            corpus,
            tok,
            seed=seed,
            device=device,
            progress=progress,
            stage="training 1L1H",
        )
        tests = []
        for k in shots:
            tests += make_compositional_tests(
                graph, tok, cfg, k, config.prompts_per_k, numpy_rng(seed, 2, 0, k)
            )
        sres = evaluate(shallow, tok, tests, **ev)
        sb = _best_k(sres)
        metrics["one_layer_one_head"] = {name: sres[sb][name] for name in _REPORTED}
        metrics["one_layer_one_head"].update(
            best_k=float(sb),
            zero_shot_whole=sres[0]["whole"],
            order_at_m1=_order_at(sres[sb], m)[0],
            final_loss=sum(s_losses[-20:]) / len(s_losses[-20:]),
        )
        notes.append(f"1-layer 1-head control: training {s_train_s:.1f} s on the same corpus and steps")
    progress("evaluating", n_evals, n_evals)

    depths = list(range(2, cfg.depth + 1))
    series = {
        "shots": Series(
            title=f"Whole-chain accuracy vs shots (n={cfg.depth}, M={m})",
            xlabel="shots k",
            ylabel="strict whole-chain accuracy",
            x=[float(k) for k in shots],
            lines={
                "same-chain demos": [same[k]["whole"] for k in shots],
                "other-chain demos (control)": [
                    results["other_chain"].get(k, same[k])["whole"] for k in shots
                ],
                "shuffled demos (control)": [results["shuffled"].get(k, same[k])["whole"] for k in shots],
            },
        ),
        "depth": Series(
            title="Accuracy of the chain prefix vs depth",
            xlabel="vertices along the chain (root given)",
            ylabel="prefix accuracy",
            x=[float(j) for j in depths],
            lines={
                f"steps, k={best} (few-shot)": [same[best][f"depth{j}"] for j in depths],
                f"vertex order, k={best}": [same[best][f"order_depth{j}"] for j in depths],
                "steps, k=0 (zero-shot)": [same[0][f"depth{j}"] for j in depths],
            },
        ),
        "copy": Series(
            title=f"Order copying by depth, k={best} (fragments span at most M={m} vertices)",
            xlabel="position along the copied sentence (first given)",
            ylabel="vertex-order prefix accuracy",
            x=[float(j) for j in depths],
            lines={
                "full chain, graph values (the test)": [same[best][f"order_depth{j}"] for j in depths],
                "chain letters, noise values": [copies["chain"][best][f"order_depth{j}"] for j in depths],
                "random letters, noise values": [copies["random"][best][f"order_depth{j}"] for j in depths],
                "chain among noise letters": [copies["chain_noise"][best][f"order_depth{j}"] for j in depths],
            },
        ),
        "loss": Series(
            title="Training loss",
            xlabel="step",
            ylabel="next-token loss (supervised positions)",
            x=[float(i) for i in range(0, len(losses), max(1, len(losses) // 50))],
            lines={"loss": [losses[i] for i in range(0, len(losses), max(1, len(losses) // 50))]},
        ),
    }
    if curve["step"]:
        series["curve"] = Series(
            title=f"Learning curve (d={config.model.d_model}, {config.curve_prompts} prompts a point)",
            xlabel="training step",
            ylabel="accuracy",
            x=curve["step"],
            lines={
                **{f"whole chain, k={k}": curve[f"whole_k{k}"] for k in curve_ks},
                f"vertex order through depth M+1={m + 1}, k=1": curve["order_m1_k1"],
                "icl copy test, k=1": curve["icl_k1"],
            },
        )
    return RunResult(metrics=metrics, series=series, notes=notes)


SMOKE = ClaimConfig(
    data=FTCTConfig(depth=4, max_child_len=2, addlen=1, n_structure=40, n_fragment=80),
    model=ModelConfig(n_layer=2, n_head=2, d_model=32),
    train=TrainConfig(steps=25, batch_size=8, warmup_steps=5),
    shots=(0, 1, 2),
    prompts_per_k=10,
    in_dist_prompts=6,
    copy_prompts=4,
    curve_points=2,
    curve_prompts=4,
)
FULL = ClaimConfig()
#: The spec's CPU model with the data moved toward the paper (issue: d = 96-120, lr 1e-3;
#: addlen 5, 5 traces per sequence, 52 letters, 30-50 roots). 6k steps, not the spec's 3-4k:
#: at 3k the values are not yet learnt (tr_val 0.14 on seed 0), and the learning curve on seed 3
#: (not a claim seed) shows whole chains appearing between 3k and 4k steps. Batch 12 (paper 8,
#: spec 16-32) keeps the cost of three seeds, each with its 1-layer/1-head control, near 80 min.
LONG = ClaimConfig(
    data=FTCTConfig(
        n_letters=52,
        root_low=60,
        root_count=30,
        addlen=5,
        examples_per_seq=5,
        n_structure=5000,
        n_fragment=20000,
    ),
    model=ModelConfig(n_layer=3, n_head=3, d_model=96, max_positions=512),
    train=TrainConfig(lr=1e-3, batch_size=12, steps=6000, warmup_steps=200),
)

CLAIM = Claim(
    name="ftct",
    paper=PaperRef(
        title="Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?",
        authors="Yutong Yin, Zhaoran Wang",
        arxiv="2501.15857",
        code="roger-yt/Fragmented-at-Training-Chained-at-Testing",
    ),
    statement=(
        "Trained only on fragments of causal chains (never a whole chain), a transformer completes "
        "the unseen full chains when given few-shot chain-of-thought demonstrations, while zero-shot "
        "prompting fails."
    ),
    arms={
        "few_shot": "same-chain demonstrations, best k >= 1 (strict whole-chain accuracy)",
        "zero_shot": "no demonstrations (k = 0), the paper's contrast",
        "cross_chain": "negative control: demonstrations of the other full chain, best k >= 1",
        "shuffled": "negative control: demonstrations with the vertex order shuffled, best k >= 1",
        "one_layer_one_head": "control: a 1-layer, 1-head model of the same width, trained on the same "
        "corpus for the same steps, best k >= 1 (the paper: >= 2 layers and >= 2 heads are needed)",
        "copy_probes": "diagnostics: copying a demonstrated letter order (official icl test; random "
        "letters; chain letters with noise values; a chain among noise letters), mean over k >= 1",
        "training": "training statistics (loss, lambda, corpus size, learning curve)",
    },
    criteria=(
        value(
            "few_shot.tr_ver",
            ">=",
            0.7,
            name="in_dist_order",
            precondition=True,
            convergence=True,
            explain="Precondition of both parts: training fitted the first of the two skills its "
            "text teaches, copying a demonstrated letter order: on training-like sentences (the "
            "official icl test) it copies the order in at least 70% of prompts (mean over k >= 1). "
            "The bar is the few-shot gate's own 0.7, fixed before any run: a model that copies an "
            "order less often than that cannot write 70% of the chains, whose order it must copy, "
            "so the few-shot gate could not be met, nor the zero-shot one read as the paper's.",
        ),
        value(
            "few_shot.tr_val",
            ">=",
            0.7,
            name="in_dist_value",
            precondition=True,
            convergence=True,
            explain="Precondition of both parts: training fitted the second skill, the values along "
            "an edge: on training-like fragments the next value given the gold prefix is right in "
            "at least 70% of prompts (teacher-forced).",
        ),
        value(
            "training.curve_whole_k1_plateau_gap",
            "<=",
            CURVE_EPSILON,
            name="few_shot_converged",
            precondition=True,
            convergence=True,
            part=FEW,
            explain="Precondition: few-shot (k = 1) whole-chain accuracy on the learning curve's own "
            "50 prompts moved at most 0.1 over the last fifth of training, the curve's sampling "
            "noise (sqrt(2 x 0.25 / 50)); a curve still climbing would be read too early.",
        ),
        value(
            "training.curve_whole_k0_plateau_gap",
            "<=",
            CURVE_EPSILON,
            name="zero_shot_converged",
            precondition=True,
            convergence=True,
            part=ZERO,
            explain="Precondition: zero-shot whole-chain accuracy on the learning curve moved at most "
            "0.1 (its sampling noise) over the last fifth of training.",
        ),
        value(
            "few_shot.whole",
            ">=",
            0.7,
            name="few_shot_whole",
            part=FEW,
            paper="~1.0 at k >= 1 (Fig. 3, n = 5)",
            falsifier="shuffled_control",
            explain="With a few demonstrations of the whole chain, the model writes at least 70% of the "
            "never-seen 5-vertex chains exactly right.",
        ),
        value(
            "zero_shot.whole",
            "<=",
            0.2,
            name="zero_shot_whole",
            part=ZERO,
            paper="~0 (Fig. 3)",
            falsifier="tests/methods/ftct/test_ftct_falsifiers.py::test_zero_shot_gate_fails_for_a_model_that_knows_whole_chains",
            explain="Without demonstrations the same model completes at most 20% of the whole chains.",
        ),
        ratio(
            "few_shot.whole",
            "zero_shot.whole",
            ">=",
            3.5,
            name="few_over_zero",
            gating=False,
            explain="Few-shot whole-chain accuracy is at least 3.5 times the zero-shot one (reported: it "
            "follows from the two gates above, 0.7 / 0.2 = 3.5).",
        ),
        fails(
            value(
                "cross_chain.whole",
                ">=",
                0.3,
                name="cross_chain_control",
                part=FEW,
                explain="Demonstrations of the other chain must not let the model complete the asked chain "
                "(below 30%).",
            )
        ),
        fails(
            value(
                "shuffled.whole",
                ">=",
                0.3,
                name="shuffled_control",
                part=FEW,
                explain="Demonstrations with the vertex order shuffled, which break the order the model "
                "is credited with copying, must not let it complete the chain (below 30%).",
            )
        ),
        fails(
            value(
                "one_layer_one_head.whole",
                ">=",
                0.3,
                name="shallow_control",
                part=FEW,
                paper="1-layer and 1-head models fail (Sec. 4, layers x heads in {1, 2}^2)",
                explain="A 1-layer, 1-head transformer, which cannot stack an induction head on a "
                "previous-token head, must not complete the chains (below 30%).",
            )
        ),
        value(
            "few_shot.order_at_m1",
            ">=",
            0.7,
            name="order_beyond_fragments",
            part=FEW,
            gating=False,
            explain="Few-shot, the demonstrated vertex order is followed through depth M + 1, past "
            "the longest training fragment, in at least 70% of prompts.",
        ),
        value(
            "few_shot.whole_lenient",
            ">=",
            0.7,
            name="few_shot_lenient",
            part=FEW,
            gating=False,
            explain="Under the paper's lenient rule (the right steps appear in order, extra steps "
            "allowed), at least 70% of few-shot chains are complete.",
        ),
        value(
            "few_shot.final",
            ">=",
            0.7,
            name="few_shot_final",
            part=FEW,
            gating=False,
            explain="The value of the queried last vertex is right in at least 70% of few-shot prompts.",
        ),
        value(
            "few_shot.te_val",
            ">=",
            0.7,
            name="few_shot_te_val",
            part=FEW,
            gating=False,
            explain="Given the gold chain so far, the next value is right in at least 70% of prompts "
            "(teacher-forced, blind to the vertex order).",
        ),
    ),
    budgets={
        "smoke": Budget("smoke", SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", FULL, seeds=3, seconds=300.0),
        "long": Budget("long", LONG, seeds=3, seconds=1600.0),
    },
    run_fn=run,
    headline="few_shot_whole",
    threads=2,
    deviations=(
        "CPU scale (full): d = 48 (paper 720), 1.5k AdamW steps of 32 sequences at lr 3e-3 with cosine "
        "decay (paper 43,750 steps of 8 at 5e-5); long: d = 96, 6k steps of 12 at lr 1e-3",
        "smaller data (full): 26 letters, roots [60, 70), values mod 200, 4 context tokens per letter and "
        "1-2 per step, 4 traces per sequence, addlen 2, 2k + 8k sequences (paper 52, [100, 150), 1000, 7, "
        "1-6, 5, 5, 5k + 20k); long: 52 letters, roots [60, 90), 5 traces, addlen 5, 5k + 20k",
        "shots k = 0..3 (paper 0..4); 200 prompts per k",
        "gated whole-chain accuracy is strict (exact step list); the paper's lenient subsequence match is "
        "reported as whole_lenient",
        "negative controls: other-chain and shuffled demonstrations, and a 1-layer/1-head model of the "
        "same width; the lambda sweep is an extended check outside the claim",
        "the model scored is the one after the last step (rule fixed in advance); the learning curve is "
        "measured on separate prompts at evenly spaced checkpoints",
    ),
    unchecked=(
        "the plateau is read on a coarse curve: 5 checkpoints of 50 prompts, so the last fifth of "
        "training is the change between the last two checkpoints",
    ),
)
