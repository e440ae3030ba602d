"""Claim check of *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*.

A tiny Llama is trained on a synthetic corpus whose documents carry metadata (worked arithmetic,
slope and linear-equation solutions whose every step comes in one of three wordings, formula and
pseudo-code procedures, invented facts, filler). The model completes held-out reasoning problems
and factual questions itself; kronfluence's EK-FAC scores every document for every query.

Preconditions: each main query group is answered correctly often enough; the model's validation
curve (number-token accuracy on held-out problems) has plateaued; and, as a positive control, the
pipeline finds the correlation gap at initialisation, where the completions' shared wording carries
the loss (an untrained model's own EK-FAC influence on the same queries). Gates, each with a part of
its own:

- correlation: same-task, same-template reasoning queries have far more correlated influence than
  factual queries (Pearson r gap >= 0.2; falsifiers: scores permuted per query, and EK-FAC with the
  factors of another model);
- answers: the fact document is in a factual query's top 10 far more often than all of a reasoning
  query's step equations are in its top 10 (rate gap >= 0.4; falsifiers: permuted and sign-flipped
  scores);
- procedural: same-task procedural documents make up >= 2x their base rate of a reasoning query's
  top 10, and rank high beyond what BM25 word overlap explains (partial correlation, paired test;
  falsifiers: permuted scores, scores paired with the wrong documents);
- oracle: replaying the last epochs without the oracle queries' top-k documents raises their loss
  more than without k random documents, and more than without the gradient dot product's top-k,
  query by query (one-sided Wilcoxon; falsifier: the sign-flipped ranking's top-k).

BM25, TF-IDF, the gradient dot product and EK-FAC at 1x and 10x the damping are reported through
the same analyses.
"""

from __future__ import annotations

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
from iclr25._core.convergence import converged, read_curve
from iclr25._core.media import Heatmap, MediaResult
from iclr25.methods.procedural_influence import (
    TASKS,
    ClaimConfig,
    CorpusConfig,
    InfluenceConfig,
    LMConfig,
    answer_in_topk,
    assert_no_leak,
    bm25_scores,
    build_lm,
    completion_nll,
    completion_token_nll,
    compute_influence,
    encode_documents,
    encode_queries,
    gradient_dot_scores,
    group_correlations,
    kind_share_topk,
    make_corpus,
    make_queries,
    paired_greater_p,
    partial_spearman,
    permute_per_query,
    powerlaw_slope,
    query_correlation_matrix,
    query_prompts,
    shuffle_pairing,
    source_overrepresentation,
    tfidf_scores,
    topk_coverage,
    topk_indices,
    train_lm,
)

__all__ = ["CLAIM", "run"]

_MAIN_TASKS = TASKS[:2]
_PAIRS = ("same_template", "diff_template", "factual", "cross_task", "reasoning_control")


def _pair_key(groups: list[str], templates: list[int]):
    def key(i: int, j: int) -> str | None:
        gi, gj = groups[i], groups[j]
        if gi == gj == "factual":
            return "factual"
        if gi == gj and gi in _MAIN_TASKS:
            return "same_template" if templates[i] == templates[j] else "diff_template"
        if {gi, gj} == set(_MAIN_TASKS):
            return "cross_task"
        if (gi in _MAIN_TASKS and gj == f"control_{gi}") or (gj in _MAIN_TASKS and gi == f"control_{gj}"):
            return "reasoning_control"
        return None

    return key


def _analyse(scores: np.ndarray, ctx: dict, *, with_corr: bool = True) -> dict[str, float]:
    """The paper's analyses of one score matrix [Q, D] (any estimator)."""
    k = ctx["k"]
    groups, correct = ctx["groups"], ctx["correct"]
    fact = np.array([g == "factual" for g in groups])
    reas = np.array([g in _MAIN_TASKS for g in groups])
    m: dict[str, float] = {}
    if with_corr:
        corr = query_correlation_matrix(scores)
        gc = group_correlations(corr, _pair_key(groups, ctx["templates"]))
        for name in _PAIRS:
            m[f"r_{name}"] = gc.get(name, 0.0)
        m["corr_gap"] = m["r_same_template"] - m["r_factual"]
        m["task_gap"] = m["r_same_template"] - m["r_cross_task"]
        gcc = group_correlations(corr, _pair_key(groups, ctx["templates"]), correct)
        m["r_same_template_correct"] = gcc.get("same_template", 0.0)
        m["r_factual_correct"] = gcc.get("factual", 0.0)
    hit = answer_in_topk(scores, ctx["doc_items"], ctx["query_items"], k)
    single = answer_in_topk(scores, ctx["doc_items"], ctx["query_items"], k, rule="single")
    m["factual_answer_rate"] = float(hit[fact & correct].mean()) if (fact & correct).any() else 0.0
    m["reasoning_answer_rate"] = float(hit[reas].mean())
    m["reasoning_single_doc_rate"] = float(single[reas].mean())
    m["answer_gap"] = m["factual_answer_rate"] - m["reasoning_answer_rate"]
    shares, ratios, proc_only = [], [], []
    for task in _MAIN_TASKS:
        rows = np.array([g == task for g in groups])
        procedural = (ctx["task"] == task) & np.isin(ctx["kind"], ["worked", "procedure"])
        share = float(kind_share_topk(scores[rows], procedural, k).mean())
        shares.append(share)
        ratios.append(share / float(procedural.mean()))
        only = (ctx["task"] == task) & (ctx["kind"] == "procedure")
        proc_only.append(float(kind_share_topk(scores[rows], only, k).mean()) / float(only.mean()))
    m["procedural_share"] = float(np.mean(shares))
    # the part of "procedural documents rank high" that word overlap does not explain: per
    # reasoning query, the Spearman partial r of its scores with the same-task procedural
    # indicator given its BM25 scores, and a one-sided Wilcoxon test that these r exceed 0
    partial = []
    for task in _MAIN_TASKS:
        rows = np.array([g == task for g in groups])
        procedural = ((ctx["task"] == task) & np.isin(ctx["kind"], ["worked", "procedure"])).astype(float)
        partial.append(partial_spearman(scores[rows], procedural, ctx["bm25"][rows]))
    partial_r = np.concatenate(partial)
    m["procedural_partial_r"] = float(partial_r.mean())
    m["procedural_partial_p"] = paired_greater_p(partial_r, np.zeros_like(partial_r))
    m["procedural_ratio"] = float(np.mean(ratios))
    m["procedure_doc_ratio"] = float(np.mean(proc_only))
    over = source_overrepresentation(scores[reas], ctx["source"], k)
    for s in ("qa_forum", "code", "math_text", "encyclopedia", "web"):
        m[f"source_{s}"] = over.get(s, 0.0)
    return m


def _per_nat_metrics(per_nat: np.ndarray, ctx: dict) -> dict[str, float]:
    """Reliance (top 1 % of positive per-nat influence), its spread, and power-law slopes."""
    groups = ctx["groups"]
    fact = np.array([g == "factual" for g in groups])
    reas = np.array([g in _MAIN_TASKS for g in groups])
    cov = topk_coverage(per_nat, [1.0])[:, 0]
    share = topk_coverage(per_nat, [1.0], relative=True)[:, 0]
    m = {
        "reliance_ratio": float(cov[reas].mean() / cov[fact].mean()),
        "cv_reasoning": float(cov[reas].std() / cov[reas].mean()),
        "cv_factual": float(cov[fact].std() / cov[fact].mean()),
        "top1pct_share_reasoning": float(share[reas].mean()),
        "top1pct_share_factual": float(share[fact].mean()),
    }
    top = min(50, per_nat.shape[1] // 4)
    m["slope_reasoning"] = float(np.mean([powerlaw_slope(r, top) for r in per_nat[reas]]))
    m["slope_factual"] = float(np.mean([powerlaw_slope(r, top) for r in per_nat[fact]]))
    return m


def _spearman_rows(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    vals = [spearmanr(x, y).statistic for x, y in zip(a, b, strict=True)]
    return float(np.nanmean(vals))


def _replay_nats(
    cfg: ClaimConfig,
    vocab_size: int,
    ckpt,
    data: dict,
    qbatch: dict,
    removed: set[int],
    seed: int,
    device: torch.device,
) -> np.ndarray:
    """Every query's nats after replaying the last epochs from ``ckpt`` without ``removed``, on
    ``device``. [Q]."""
    replay = build_lm(vocab_size, cfg.lm, seed=seed, device=device)
    train_lm(replay, data, cfg.lm, seed=seed, start=ckpt, exclude=removed, device=device)
    return completion_nll(replay, qbatch).double().cpu().numpy()


def _oracle(
    cfg: ClaimConfig,
    model: torch.nn.Module,
    ckpt,
    data: dict,
    qbatch: dict,
    rankings: dict[str, np.ndarray],
    oracle_rows: np.ndarray,
    seed: int,
    progress: ProgressFn,
    device: torch.device,
) -> dict[str, np.ndarray]:
    """Leave-k-out replays: the last epochs again without the union of the oracle queries' top-k
    documents of each ranking, or without as many random documents (each replay on ``device``).

    Returns:
        Per removal: the change of nats of the oracle queries, and ``<name>_removed`` (how many
        documents).
    """
    k = cfg.top_k
    before = completion_nll(model, qbatch).double().cpu().numpy()
    rng = np.random.default_rng([seed, 31])
    n_docs = len(data["input_ids"])
    removal = {name: set(topk_indices(s[oracle_rows], k).ravel().tolist()) for name, s in rankings.items()}
    size = max(len(v) for v in removal.values())
    removal["random"] = set(rng.choice(n_docs, size=size, replace=False).tolist())
    out: dict[str, np.ndarray] = {}
    for i, (name, docs) in enumerate(removal.items()):
        after = _replay_nats(cfg, model.config.vocab_size, ckpt, data, qbatch, docs, seed, device)
        out[name] = (after - before)[oracle_rows]
        out[f"{name}_removed"] = np.array([float(len(docs))])
        progress("leave-k-out replays", i + 1, len(removal))
    return out


def _validation_batch(corpus, tok, cfg: ClaimConfig, seed: int) -> dict:
    """Gold worked solutions (random wordings) of every held-out problem: the validation set whose
    per-token nats trace the learning curve. No document states these problems."""
    from iclr25.methods.procedural_influence.corpus import _solution, n_steps

    rng = np.random.default_rng([seed, 47])
    prompts, completions = [], []
    for task in _MAIN_TASKS:
        for p in corpus.holdout[task]:
            t = int(rng.integers(0, 2))
            prompts.append(query_prompts(task, p, t))
            completions.append(
                _solution(task, p, t, [int(w) for w in rng.integers(0, 3, size=n_steps(task))])
            )
    return encode_queries(prompts, completions, tok, cfg.lm.context)


def run(cfg: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress) -> RunResult:
    """One seed: corpus, model, queries, influence (EK-FAC, gradient dot product, controls),
    lexical baselines, analyses and the leave-k-out oracle.

    Args:
        cfg: the claim's configuration.
        seed: the seed of the corpus, the models, the batch orders and the queries.
        device: where every network is trained and evaluated ("cpu", "cuda", or "auto" for
            "cuda" when one is visible); kronfluence runs there too (``cpu=False`` off the CPU).
            Corpus, tokenisation, retrieval baselines and analyses stay on the CPU (numpy), and
            every seeded draw comes from CPU generators, so a CPU run is bit for bit what it was.
        progress: progress callback.
    """
    from iclr25.common.tiny_lm import build_word_tokenizer

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    on_cpu = dev.type == "cpu"  # kronfluence's switch: the CPU, or its default accelerator
    t0 = time.perf_counter()
    corpus = make_corpus(cfg.corpus, seed)
    tok = build_word_tokenizer(corpus.vocab)
    data = encode_documents(corpus.texts, tok, cfg.lm.context)
    model = build_lm(len(tok), cfg.lm, seed=seed, device=dev)
    ckpt_epoch = cfg.lm.epochs - cfg.oracle_epochs
    valid = _validation_batch(corpus, tok, cfg, seed)
    valid_tokens = float((valid["labels"] != -100).sum())
    # number tokens of the held-out solutions: the part a correct procedure determines (the
    # wording is a free choice between paraphrases and keeps its entropy); read on the CPU
    v_targets = valid["labels"][:, 1:]
    v_numbers = torch.tensor(
        [[t >= 0 and tok.convert_ids_to_tokens(int(t)).isdigit() for t in row] for row in v_targets]
    ).to(dev)
    valid = {k: v.to(dev) for k, v in valid.items()}
    v_targets = valid["labels"][:, 1:]
    valid_nats: list[float] = []
    valid_acc: list[float] = []

    def on_epoch(epoch: int, net: torch.nn.Module) -> None:
        with torch.no_grad():
            logits = net(input_ids=valid["input_ids"], attention_mask=valid["attention_mask"]).logits
        pred = logits[:, :-1].argmax(-1)
        valid_acc.append(float((pred == v_targets)[v_numbers].float().mean()))
        valid_nats.append(float(completion_nll(net, valid).sum()) / valid_tokens)

    losses, ckpt = train_lm(
        model,
        data,
        cfg.lm,
        seed=seed,
        checkpoint_epoch=ckpt_epoch,
        on_epoch=on_epoch,
        progress=progress,
        device=dev,
    )
    t_train = time.perf_counter() - t0
    curve = read_curve([float(e + 1) for e in range(len(valid_acc))], valid_acc, mode="max")

    queries = make_queries(
        corpus, model, tok, n_factual=cfg.n_factual, n_reasoning=cfg.n_reasoning, n_control=cfg.n_control,
        context=cfg.lm.context, seed=seed,
    )  # fmt: skip
    assert_no_leak(corpus, queries)
    qbatch = encode_queries([q.prompt for q in queries], [q.completion for q in queries], tok, cfg.lm.context)
    groups = [q.group for q in queries]
    correct = np.array([q.correct for q in queries])
    ctx = {
        "k": cfg.top_k,
        "groups": groups,
        "templates": [q.template for q in queries],
        "correct": correct,
        "doc_items": [
            {("fact", f) for f in d.fact_ids} | {("eq", e) for e in d.equations} for d in corpus.docs
        ],
        "query_items": [
            {("fact", q.fact_id)} if q.group == "factual" else {("eq", e) for e in q.steps} for q in queries
        ],
        "task": corpus.labels("task"),
        "kind": corpus.labels("kind"),
        "source": corpus.labels("source"),
    }
    texts = [f"{q.prompt} {q.completion}" for q in queries]
    bm25 = bm25_scores(texts, corpus.texts)
    ctx["bm25"] = bm25

    icfg = cfg.influence
    t1 = time.perf_counter()
    n_inf = 4 + len(cfg.damping_sweep)
    progress("influence", 0, n_inf)
    ekfac = compute_influence(model, data, qbatch, icfg, cpu=on_cpu)
    t_ekfac = time.perf_counter() - t1
    progress("influence", 1, n_inf)
    t2 = time.perf_counter()
    graddot = gradient_dot_scores(model, data, qbatch, icfg, cpu=on_cpu)
    t_graddot = time.perf_counter() - t2
    progress("influence", 2, n_inf)
    # control: the EK-FAC factors of another model (same architecture, another seed, untrained)
    other = build_lm(len(tok), cfg.lm, seed=seed + 1000, device=dev)
    foreign = compute_influence(model, data, qbatch, icfg, factors_from=other, cpu=on_cpu)
    # positive control (epoch 0): the same untrained model's own EK-FAC influence on the same
    # queries, where the completions' shared wording still carries most of the loss
    init = compute_influence(other, data, qbatch, icfg, cpu=on_cpu)
    progress("influence", 4, n_inf)
    damped = {}
    for i, scale in enumerate(cfg.damping_sweep):  # report only: lambda = scale x mean eigenvalue
        damped[f"ekfac_damp{scale:g}"] = compute_influence(
            model, data, qbatch, icfg, damping_scale=scale, cpu=on_cpu
        )
        progress("influence", 5 + i, n_inf)
    tfidf = tfidf_scores(texts, corpus.texts)
    permuted = permute_per_query(ekfac.scores, seed)
    pair_shuffled = shuffle_pairing(ekfac.scores, seed)
    flipped = -ekfac.scores

    metrics: dict[str, dict[str, float]] = {
        "ekfac": _analyse(ekfac.scores, ctx),
        "graddot": _analyse(graddot.scores, ctx),
        # a 1e-12 ramp keeps rows with no word overlap from being constant (undefined r); it is
        # ~1e-9 of the scores' spread elsewhere
        "bm25": _analyse(bm25 + 1e-12 * np.arange(bm25.shape[1]), ctx),
        "tfidf": _analyse(tfidf + 1e-12 * np.arange(tfidf.shape[1]), ctx),
        "permuted": _analyse(permuted, ctx),
        "flipped": _analyse(flipped, ctx, with_corr=False),
        "foreign_factors": _analyse(foreign.scores, ctx),
        "init": _analyse(init.scores, ctx),
        "pair_shuffled": _analyse(pair_shuffled, ctx),
        **{name: _analyse(r.scores, ctx) for name, r in damped.items()},
    }
    metrics["training"] = curve.metrics()
    metrics["training"]["valid_nats_final"] = valid_nats[-1]
    metrics["training"]["valid_nats_best"] = min(valid_nats)
    metrics["training"]["valid_nats_plateau_gap"] = read_curve(
        [float(e + 1) for e in range(len(valid_nats))], valid_nats, mode="min"
    ).plateau_gap
    metrics["ekfac"].update(_per_nat_metrics(ekfac.per_nat(), ctx))
    metrics["graddot"].update(_per_nat_metrics(graddot.per_nat(), ctx))
    metrics["ekfac"]["spearman_vs_bm25"] = _spearman_rows(ekfac.scores, bm25)
    metrics["ekfac"]["spearman_vs_graddot"] = _spearman_rows(ekfac.scores, graddot.scores)
    metrics["ekfac"]["time_s"] = t_ekfac
    metrics["graddot"]["time_s"] = t_graddot

    counts = {g: int(correct[np.array(groups) == g].sum()) for g in ("factual", *_MAIN_TASKS)}
    world = {
        "min_correct": float(min(counts.values())),
        "factual_correct": float(counts["factual"]),
        **{f"{t}_correct": float(counts[t]) for t in _MAIN_TASKS},
        "final_train_loss": float(losses[-1]),
        "train_s": t_train,
    }
    # Where the reasoning completions' loss sits: on number tokens or on the (shared) format words.
    reas_rows = np.flatnonzero(np.isin(groups, _MAIN_TASKS))
    tok_nll = (
        completion_token_nll(model, {k: v[reas_rows] for k, v in qbatch.items()}).double().cpu()
    )  # [R, T-1]
    targets = qbatch["input_ids"][reas_rows, 1:]
    numeric = torch.tensor([[tok.convert_ids_to_tokens(int(t)).isdigit() for t in row] for row in targets])
    world["reasoning_number_nats_share"] = float(tok_nll[numeric].sum() / tok_nll.sum().clamp_min(1e-12))
    world["reasoning_nats"] = float(tok_nll.sum(1).mean())
    world["factual_nats"] = float(ekfac.query_nats[np.array(groups) == "factual"].mean())
    metrics["world"] = world

    if cfg.run_oracle:
        garr = np.array(groups)
        rows = np.concatenate(
            [np.flatnonzero(garr == g)[: cfg.oracle_queries] for g in ("factual", *_MAIN_TASKS)]
        )
        rankings = {"ekfac": ekfac.scores, "graddot": graddot.scores, "flipped": flipped}
        deltas = _oracle(cfg, model, ckpt, data, qbatch, rankings, rows, seed, progress, dev)
        for arm in ("ekfac", "graddot", "flipped", "random"):
            d = deltas[arm]
            metrics.setdefault(arm, {})["oracle_delta"] = float(d.mean())
            metrics[arm]["oracle_removed"] = float(deltas[f"{arm}_removed"][0])
            metrics[arm]["oracle_delta_factual"] = float(d[: cfg.oracle_queries].mean())
            metrics[arm]["oracle_delta_reasoning"] = float(d[cfg.oracle_queries :].mean())
        for arm in ("ekfac", "flipped"):  # paired one-sided tests over the oracle queries
            metrics[arm]["oracle_p_vs_random"] = paired_greater_p(deltas[arm], deltas["random"])
            metrics[arm]["oracle_p_vs_graddot"] = paired_greater_p(deltas[arm], deltas["graddot"])
    world["total_s"] = time.perf_counter() - t0

    arms = ("ekfac", "graddot", "bm25", "tfidf", "permuted", "foreign_factors", "pair_shuffled")
    series = {
        "correlations": Series(
            title="Mean Pearson r of influence between query pairs",
            xlabel="pair type (0 same-template reasoning, 1 other template, 2 factual, 3 cross-task, "
            "4 reasoning-control)",
            ylabel="mean r",
            x=[float(i) for i in range(len(_PAIRS))],
            lines={a: [metrics[a][f"r_{p}"] for p in _PAIRS] for a in arms},
            kind="bar",
        ),
        "topk_shares": Series(
            title=f"Top-{cfg.top_k} documents: answers and procedural share",
            xlabel="0 factual answer found, 1 reasoning steps found, 2 procedural share, "
            "3 code/formula ratio / 10",
            ylabel="rate or share",
            x=[0.0, 1.0, 2.0, 3.0],
            lines={
                a: [
                    metrics[a]["factual_answer_rate"],
                    metrics[a]["reasoning_answer_rate"],
                    metrics[a]["procedural_share"],
                    metrics[a]["procedure_doc_ratio"] / 10,
                ]
                for a in (*arms, "flipped")
            },
            kind="bar",
        ),
        "training": Series(
            title="Training loss and validation curves of the tiny LM",
            xlabel="epoch",
            ylabel="mean token NLL",
            x=[float(i + 1) for i in range(len(losses))],
            lines={
                "train (nats per token)": [float(v) for v in losses],
                "validation nats per token (held-out problems)": valid_nats,
                "validation number-token accuracy": valid_acc,
            },
        ),
    }
    notes = [
        f"{len(corpus)} documents, {len(queries)} queries; correct: {counts}",
        "top EK-FAC documents of the first reasoning query: "
        + " | ".join(
            corpus.docs[i].text for i in topk_indices(ekfac.scores, 3)[groups.index(_MAIN_TASKS[0])]
        ),
    ]
    return MediaResult(
        metrics=metrics,
        series=series,
        notes=notes,
        media=_correlation_heatmaps(ekfac.scores, groups, ctx["templates"]),
    )


def _correlation_heatmaps(scores: np.ndarray, groups: list[str], templates: list[int]) -> dict[str, Heatmap]:
    """EK-FAC query-query influence correlations: every pair, and the mean per block of queries.

    Queries are ordered factual, then each reasoning task by template, then the controls.
    """

    def block(i: int) -> str:
        g = groups[i]
        return f"{g} t{templates[i]}" if g in _MAIN_TASKS else g

    labels = ["factual"]
    labels += [
        f"{t} t{v}"
        for t in _MAIN_TASKS
        for v in sorted({templates[i] for i in range(len(groups)) if groups[i] == t})
    ]
    labels += [f"control_{t}" for t in _MAIN_TASKS]
    labels = [b for b in labels if any(block(i) == b for i in range(len(groups)))]
    order = [i for b in labels for i in range(len(groups)) if block(i) == b]
    corr = query_correlation_matrix(scores)[np.ix_(order, order)]
    members = [np.array([block(i) == b for i in order]) for b in labels]
    means = []
    for a in members:
        row = []
        for b in members:
            sub = corr[np.ix_(a, b)]
            if a is b:  # a query's r with itself is 1 by definition: leave the diagonal out
                sub = sub[~np.eye(len(sub), dtype=bool)]
            row.append(float(sub.mean()) if sub.size else float("nan"))  # NaN: a one-query block
        means.append(row)
    return {
        "correlation_blocks": Heatmap(
            title="Mean Pearson r of EK-FAC influence between query groups",
            xlabel="query group",
            ylabel="query group",
            values=means,
            xticks=labels,
            yticks=labels,
        ),
        "correlation_matrix": Heatmap(
            title="Pearson r of EK-FAC influence, every query pair (groups: " + ", ".join(labels) + ")",
            xlabel="query",
            ylabel="query",
            values=corr.tolist(),
        ),
    }


# ---------------------------------------------------------------------------------------------
# budgets and criteria
# ---------------------------------------------------------------------------------------------

#: Significance level of every paired test (fixed before any run).
_ALPHA = 0.05
#: Largest change of the validation number-token accuracy (teacher-forced, held-out problems)
#: over the last fifth of training that counts as a plateau: 2 points of accuracy.
_PLATEAU_EPS = 0.02

_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    corpus=CorpusConfig(
        n_arithmetic=60, n_slope=60, n_linear=20, n_procedures=4, n_facts=10, docs_per_fact=3, n_filler=30,
        holdout_problems=6,
    ),
    lm=LMConfig(n_layer=1, d_model=32, n_head=2, epochs=3, batch_size=32),
    influence=InfluenceConfig(factor_max_examples=200),
    n_factual=4,
    n_reasoning=4,
    n_control=1,
    oracle_queries=1,
    oracle_epochs=1,
)  # fmt: skip

_CRITERIA = (
    value(
        "world.min_correct",
        ">=",
        8.0,
        name="world_learned",
        precondition=True,
        paper="tasks restricted until zero-shot CoT >= 80 % (Sec. 3)",
        explain="The test applies only if the model answers at least 8 queries correctly in each main "
        "group (factual, arithmetic, slope): the world must be learned before its influences mean anything.",
    ),
    converged(
        "training",
        _PLATEAU_EPS,
        name="training_converged",
        explain="The model is read at a plateau: its teacher-forced accuracy on the number tokens of "
        f"held-out problems' worked solutions moved at most {_PLATEAU_EPS} over the last fifth of "
        "training (the wording tokens are a free choice between paraphrases and stay uncertain).",
    ),
    diff(
        "init.r_same_template",
        "init.r_factual",
        ">=",
        0.2,
        name="positive_control_epoch0",
        precondition=True,
        paper="r ~ 0.9 same-template reasoning vs ~0.06 factual (7B)",
        explain="Positive control: the pipeline finds the correlation gap where one exists. At "
        "initialisation (an untrained model of the same architecture, its own EK-FAC factors, the same "
        "queries) the completions' shared wording carries most of the loss, and same-template reasoning "
        "queries' influence must correlate at least 0.2 more than factual queries' (the gate's own bar).",
    ),
    value(
        "world.reasoning_number_nats_share",
        "<=",
        0.5,
        name="reasoning_loss_on_wording",
        gating=False,
        explain="Reported only: at most half of the reasoning completions' nats sit on number tokens "
        "(the rest on the worked solutions' wording, which procedures teach).",
    ),
    # -- correlation (Sec. 5.1) --------------------------------------------------------------
    diff(
        "ekfac.r_same_template",
        "ekfac.r_factual",
        ">=",
        0.2,
        name="corr_gap",
        part="correlation",
        paper="r ~ 0.9 same-template reasoning vs ~0.06 factual (7B)",
        falsifier="ctrl_corr_gap_permuted",
        explain="Reasoning queries of the same task and template share influential documents: their "
        "mean Pearson r of EK-FAC influence exceeds that of factual query pairs by at least 0.2.",
    ),
    fails(
        diff(
            "permuted.r_same_template",
            "permuted.r_factual",
            ">=",
            0.2,
            name="ctrl_corr_gap_permuted",
            part="correlation",
            explain="With each query's scores shuffled over documents the gap vanishes.",
        )
    ),
    fails(
        diff(
            "foreign_factors.r_same_template",
            "foreign_factors.r_factual",
            ">=",
            0.2,
            name="ctrl_corr_gap_foreign_factors",
            part="correlation",
            explain="With the EK-FAC factors of another model (same architecture, another seed, "
            "untrained) the gap does not show either.",
        )
    ),
    diff(
        "ekfac.r_same_template",
        "ekfac.r_cross_task",
        ">=",
        0.1,
        name="task_specific",
        gating=False,
        paper="no cross-task transfer; reasoning-control r ~ 0.2",
        explain="Reported only: same-task same-template r exceeds arithmetic-slope r by at least 0.1.",
    ),
    value(
        "ekfac.r_same_template",
        ">=",
        0.3,
        name="r_same_template",
        gating=False,
        paper="~0.9 (7B, same template)",
        explain="Reported only: spec's bar for same-template r.",
    ),
    value(
        "ekfac.r_factual",
        "<=",
        0.1,
        name="r_factual",
        gating=False,
        paper="0.06 (7B) / 0.03 (35B)",
        explain="Reported only: spec's bar for factual r.",
    ),
    # -- answers in the top documents (Sec. 5.3) --------------------------------------------
    diff(
        "ekfac.factual_answer_rate",
        "ekfac.reasoning_answer_rate",
        ">=",
        0.4,
        name="answer_gap",
        part="answers",
        paper="answer in top 500: 55 % factual vs 7 % reasoning (7B)",
        falsifier="ctrl_answer_gap_permuted",
        explain="The fact document is among a correct factual query's top 10 far more often than all "
        "step equations of a reasoning query are among its top 10: a rate gap of at least 0.4 (spec: "
        ">= 60 % vs <= 20 %).",
    ),
    fails(
        diff(
            "permuted.factual_answer_rate",
            "permuted.reasoning_answer_rate",
            ">=",
            0.4,
            name="ctrl_answer_gap_permuted",
            part="answers",
            explain="Permuted scores find neither.",
        )
    ),
    fails(
        diff(
            "flipped.factual_answer_rate",
            "flipped.reasoning_answer_rate",
            ">=",
            0.4,
            name="ctrl_answer_gap_flipped",
            part="answers",
            explain="Sign-flipped scores (the most harmful documents first) miss the fact documents.",
        )
    ),
    value(
        "ekfac.factual_answer_rate",
        ">=",
        0.6,
        name="factual_answer_rate",
        gating=False,
        paper="55 % (7B) / 30 % (35B)",
        explain="Reported only: the spec's factual bar.",
    ),
    value(
        "ekfac.reasoning_answer_rate",
        "<=",
        0.2,
        name="reasoning_answer_rate",
        gating=False,
        paper="7 % (7B) / 0 % (35B)",
        explain="Reported only: the spec's reasoning bar.",
    ),
    # -- procedural share (Sec. 5.4) ----------------------------------------------------------
    value(
        "ekfac.procedural_ratio",
        ">=",
        2.0,
        name="procedural_share",
        part="procedural",
        paper="procedures in the top 100 for 16/20 slope queries; code and math sources >= 2x",
        falsifier="ctrl_procedural_permuted",
        explain="Same-task procedural documents (worked solutions, formulas, code) make up at least "
        "twice their corpus share of a reasoning query's top 10.",
    ),
    fails(
        value(
            "permuted.procedural_ratio",
            ">=",
            2.0,
            name="ctrl_procedural_permuted",
            part="procedural",
            explain="Permuted scores draw procedural documents at their base rate.",
        )
    ),
    fails(
        value(
            "pair_shuffled.procedural_ratio",
            ">=",
            2.0,
            name="ctrl_procedural_pair_shuffled",
            part="procedural",
            explain="Scores paired with the wrong documents (one permutation for every query) draw "
            "procedural documents at their base rate.",
        )
    ),
    value(
        "ekfac.procedural_partial_p",
        "<",
        _ALPHA,
        name="procedural_beyond_bm25",
        part="procedural",
        paper="procedural documents drive reasoning; the paper checks keyword overlap by hand",
        falsifier="ctrl_procedural_beyond_bm25_pair_shuffled",
        explain="Beyond word overlap: per reasoning query, the Spearman partial correlation of EK-FAC "
        "influence with being a same-task procedural document, given the document's BM25 score, is "
        f"positive across queries (one-sided Wilcoxon, p < {_ALPHA}).",
    ),
    fails(
        value(
            "pair_shuffled.procedural_partial_p",
            "<",
            _ALPHA,
            name="ctrl_procedural_beyond_bm25_pair_shuffled",
            part="procedural",
            explain="With the scores paired with the wrong documents the partial correlation is not "
            "positive across queries.",
        )
    ),
    value(
        "ekfac.procedural_partial_r",
        ">",
        0.0,
        name="procedural_partial_r",
        gating=False,
        explain="Reported only: the mean partial correlation itself.",
    ),
    value(
        "ekfac.procedural_share",
        ">=",
        0.5,
        name="procedural_share_abs",
        gating=False,
        explain="Reported only: the spec's bar of half the reasoning top 10 being same-task procedural.",
    ),
    ratio(
        "ekfac.procedural_ratio",
        "bm25.procedural_ratio",
        ">=",
        1.0,
        name="vs_bm25_procedural",
        gating=False,
        explain="Reported only: EK-FAC's procedural ratio against BM25's (lexical overlap alone).",
    ),
    # -- reliance (Sec. 5.2), reported ----------------------------------------------------------
    value(
        "ekfac.reliance_ratio",
        "<=",
        0.7,
        name="reliance_ratio",
        gating=False,
        paper="reasoning relies less on each document than factual recall",
        explain="Reported only: the top-1 % positive per-nat influence of reasoning over factual queries.",
    ),
    diff(
        "ekfac.cv_reasoning",
        "ekfac.cv_factual",
        "<",
        0.0,
        name="reliance_volatility",
        gating=False,
        paper="reasoning influence is less volatile across queries",
        explain="Reported only: the across-query coefficient of variation is lower for reasoning.",
    ),
    # -- leave-k-out oracle -------------------------------------------------------------------
    value(
        "ekfac.oracle_p_vs_random",
        "<",
        _ALPHA,
        name="oracle_vs_random",
        part="oracle",
        falsifier="ctrl_oracle_flipped",
        explain="Replaying the last epochs without the oracle queries' EK-FAC top-10 documents raises "
        "their nats more than replaying without as many random documents, query by query (one-sided "
        f"Wilcoxon over the oracle queries, p < {_ALPHA}).",
    ),
    fails(
        value(
            "flipped.oracle_p_vs_random",
            "<",
            _ALPHA,
            name="ctrl_oracle_flipped",
            part="oracle",
            explain="Removing the sign-flipped ranking's top documents (the most harmful ones) does not "
            "raise the nats more than random removal.",
        )
    ),
    value(
        "ekfac.oracle_p_vs_graddot",
        "<",
        _ALPHA,
        name="oracle_vs_graddot",
        part="oracle",
        falsifier="ctrl_oracle_flipped_vs_graddot",
        explain="EK-FAC's top documents matter more to the retrained model than the gradient dot "
        f"product's, query by query (one-sided Wilcoxon over the oracle queries, p < {_ALPHA}).",
    ),
    fails(
        value(
            "flipped.oracle_p_vs_graddot",
            "<",
            _ALPHA,
            name="ctrl_oracle_flipped_vs_graddot",
            part="oracle",
            explain="The sign-flipped ranking does not beat the gradient dot product in the oracle.",
        )
    ),
    diff(
        "ekfac.oracle_delta",
        "random.oracle_delta",
        ">",
        0.0,
        name="oracle_delta_vs_random",
        gating=False,
        explain="Reported only: mean change of nats, EK-FAC top-10 removed minus random removal.",
    ),
    diff(
        "ekfac.oracle_delta",
        "graddot.oracle_delta",
        ">",
        0.0,
        name="oracle_delta_vs_graddot",
        gating=False,
        explain="Reported only: mean change of nats, EK-FAC top-10 removed minus dot-product top-10 removed.",
    ),
    # -- damping sweep, reported -----------------------------------------------------------------
    *(
        diff(
            f"ekfac_damp{scale:g}.r_same_template",
            f"ekfac_damp{scale:g}.r_factual",
            ">=",
            0.2,
            name=f"corr_gap_damp{scale:g}",
            gating=False,
            explain=f"Reported only: the correlation gap with damping {scale:g} x the mean eigenvalue.",
        )
        for scale in _FULL.damping_sweep
    ),
    *(
        value(
            f"ekfac_damp{scale:g}.procedural_ratio",
            ">=",
            2.0,
            name=f"procedural_share_damp{scale:g}",
            gating=False,
            explain=f"Reported only: the procedural ratio with damping {scale:g} x the mean eigenvalue.",
        )
        for scale in _FULL.damping_sweep
    ),
    ratio(
        "ekfac.time_s",
        "graddot.time_s",
        "<=",
        10.0,
        name="ekfac_cost",
        gating=False,
        explain="Reported only: EK-FAC (factors + scores) wall-clock over the gradient dot product's.",
    ),
)

CLAIM = Claim(
    name="procedural_influence",
    paper=PaperRef(
        title="Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models",
        authors="Laura Ruis, Maximilian Mozes, Juhan Bae, Siddhartha Rao Kamalakara, Dwarak Talupuru, "
        "Acyr Locatelli, Robert Kirk, Tim Rocktäschel, Edward Grefenstette, Max Bartolo",
        arxiv="2411.12580",
        code="",
    ),
    statement=(
        "EK-FAC influence shows that for reasoning the model draws on procedural knowledge shared across "
        "queries of the same task (highly correlated influence, procedural documents over-represented, "
        "answers rarely in the top documents), whereas factual questions rely on the few documents that "
        "state the answer (weakly correlated influence, answers often in the top documents)."
    ),
    arms={
        "ekfac": "kronfluence EK-FAC, true Fisher, MLP linears, damping 0.1 x mean eigenvalue",
        "graddot": "gradient dot product (kronfluence identity preconditioner)",
        "bm25": "BM25 retrieval scores of prompt + completion (bm25s)",
        "tfidf": "TF-IDF cosine of prompt + completion (scikit-learn)",
        "permuted": "control: EK-FAC scores permuted over documents per query",
        "flipped": "control: EK-FAC scores with the sign flipped",
        "foreign_factors": "control: EK-FAC preconditioned with the factors of another (untrained, "
        "differently seeded) model",
        "pair_shuffled": "control: EK-FAC scores paired with the wrong documents (one permutation)",
        "ekfac_damp1": "report only: EK-FAC with damping 1 x the mean eigenvalue",
        "ekfac_damp10": "report only: EK-FAC with damping 10 x the mean eigenvalue",
        "training": "the validation curve (number-token accuracy on held-out problems' worked solutions)",
        "random": "oracle floor: k random documents removed",
        "world": "the trained model: correct queries per group, loss, timings",
        "init": "positive control: EK-FAC of the untrained model (another seed) with its own factors, same "
        "queries",
    },
    criteria=_CRITERIA,
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=240.0),
    },
    run_fn=run,
    headline="corr_gap",
    figure="correlation_blocks",
    deviations=(
        "A 150k-parameter 2-layer Llama (d = 64) trained 26 epochs on ~2,100 synthetic documents replaces "
        "Command R 7B/35B and 5M pretraining documents; answers and procedures are found through document "
        "metadata.",
        "Each step of a worked solution has three wordings drawn at random per document (the paper's "
        "completions are free-form chains of thought); a greedy completion in any valid wording counts "
        "as correct.",
        "10 queries per reasoning task (arithmetic, slope), 20 factual, 5 controls per task "
        "(paper: 20/40/20); top 10 of ~2,000 documents stands in for the top 500 of 5M.",
        "Factors are fitted on the first 1,000 (shuffled) documents, as the paper fits on a subset.",
        "The leave-k-out oracle replays only the last 2 of 26 epochs (same batches, removed documents weigh "
        "zero) for 4 queries per group, and is read by a one-sided Wilcoxon test over those queries; the "
        "paper has no such oracle.",
        "The other model whose EK-FAC factors make the foreign-factors control is untrained (another seed, "
        "same architecture and documents); training a second model would double the budget.",
        "A main group with fewer than 8 correct queries makes the test not applicable (INCONCLUSIVE), "
        "not NOT_SUPPORTED as the spec says.",
        "The correlation heatmap is shown as mean r per pair type (the report draws line, scatter and bar "
        "figures only).",
    ),
)
