"""Claim check of Activation Beacon: an 8x smaller KV cache and less attention compute at α = 8,
with recall close to the uncompressed model at an equal KV budget.

As in the paper, the base LLM is pretrained and frozen: a tiny Llama shipped in the package
(trained by ``iclr25 pretrain activation_beacon base`` on key→value pair recall, whose values are
read in layer 1 by an induction circuit; blocking layer 1's reads of the context removes the
recall). Only beacon parameters are trained here
(compression-based auto-regression, step-random α, rows of ``train_len`` tokens); recall at
L = ``seq_len`` and α = 8 gates the verdict, against full attention and StreamingLLM at the same
peak KV budget. Untrained beacons and mean-pooled K/V are the negative controls; SnapKV-style
attention-score eviction at the same budget is reported. Preconditions on the base (full
attention accuracy, and the value read beyond layer 0) gate too, so the check never passes on a
base where it does not apply. Exactness, KV-entry and attention-score counts are measured on the
library's own passes and compared with the analytic formulas; they are reported only
(by-construction properties, also unit-tested).
"""

from __future__ import annotations

import statistics
import time

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
from iclr25.common.tiny_lm import build_tiny_lm
from iclr25.methods.activation_beacon import (
    BASE_DIR,
    BeaconConfig,
    ClaimConfig,
    MeanPoolKV,
    PairTask,
    SnapKV,
    StreamingLLM,
    beacon_kv_peak,
    beacon_kv_resident,
    beacon_score_entries,
    full_score_entries,
    knockout_accuracy,
    load_base,
    make_pair_recall,
    retrieval_mass,
    wrap_with_beacon,
)

__all__ = ["CLAIM", "run"]

VOCAB = 128
FILLER = (8, 64)  # filler token ids [8, 64)

#: Preconditions on the base, fixed before any beacon was trained on it (see the README):
#: full attention must recall at least this share of the held-out values ...
MIN_FULL_ACC = 0.9
#: ... and blocking every layer >= 1 from reading the context (from the query positions) must take
#: away at least this much of that recall: the value is read beyond layer 0.
MIN_DEEP_READ_DROP = 0.5


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    mask = labels[:, 1:] != -100
    pred = logits[:, :-1].argmax(-1)
    return float((pred[mask] == labels[:, 1:][mask]).float().mean())


def _eval(fn, data: tuple[torch.Tensor, torch.Tensor], batch: int = 128) -> float:
    ids, labels = data
    accs = []
    with torch.no_grad():
        for i in range(0, ids.shape[0], batch):
            chunk = ids[i : i + batch]
            accs.append(_accuracy(fn(chunk), labels[i : i + batch]) * chunk.shape[0])
    return sum(accs) / ids.shape[0]


def _report_every(total: int) -> int:
    return max(1, total // 50)


def _train_beacon(bm, cfg: ClaimConfig, seed: int, progress: ProgressFn) -> list[float]:
    params = list(bm.beacon_parameters().values())
    opt = torch.optim.AdamW(params, lr=cfg.lr_beacon, weight_decay=0.0)
    task = PairTask(n_pairs=cfg.train_pairs)
    query_len = max(cfg.window, 2 * cfg.train_pairs)
    losses = []
    steps = cfg.beacon_steps
    every = _report_every(steps)
    for step in range(steps):
        if step % every == 0:
            progress("training beacons", step, steps)
        ids, labels = make_pair_recall(
            cfg.batch_size, cfg.train_len, query_len, seed=seed * 100003 + 50000 + step, task=task
        )
        for group in opt.param_groups:
            group["lr"] = cfg.lr_beacon * min(1.0, (step + 1) / max(1, cfg.warmup_steps))
        loss = bm(ids, labels=labels).loss  # step-random α from cfg.ratios
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().item())
    progress("training beacons", steps, steps)
    return losses


def _counts(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]]) -> None:
    """G2/G3 on a counting model: measured entries vs the formulas, prefill wall-clock."""
    L, w, a, s = cfg.count_len, cfg.count_window, cfg.count_ratio, cfg.sink_size
    lm = build_tiny_lm(
        "llama", vocab_size=VOCAB, n_layer=1, n_head=2, d_model=32, max_positions=1024, seed=seed
    )
    bm = wrap_with_beacon(lm, BeaconConfig(window=w, ratios=(a,), sink_size=s, seed=seed))
    ids = torch.randint(*FILLER, (1, L), generator=torch.Generator().manual_seed(seed))
    bm.prefill(ids, beacon_ratio=a)
    resident, peak, scores = bm.memory.num_entries(), bm.memory.peak_entries, bm.memory.stats.score_entries
    ana = (beacon_kv_resident(L, w, a, s), beacon_kv_peak(L, w, a, s), beacon_score_entries(L, w, a, s))
    full_scores = full_score_entries(L)
    times_full, times_beacon = [], []
    with torch.no_grad():
        for _ in range(cfg.timing_repeats):
            t0 = time.perf_counter()
            lm(input_ids=ids)
            times_full.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            bm.prefill(ids, beacon_ratio=a)
            times_beacon.append(time.perf_counter() - t0)
    bm.prefill(ids, beacon_ratio=0)  # negative control: a cache keeping raw K/V
    m["counts"] = {
        "kv_full": float(L),
        "kv_resident": float(resident),
        "kv_peak": float(peak),
        "kv_ratio_resident": L / resident,
        "kv_ratio_peak": L / peak,
        "formula_match": float((resident, peak, scores) == ana),
        "scores_full": float(full_scores),
        "scores_beacon": float(scores),
        "score_ratio": full_scores / scores,
        "prefill_full_s": statistics.median(times_full),
        "prefill_beacon_s": statistics.median(times_beacon),
    }
    m["raw_cache"] = {
        "kv_ratio_peak": L / bm.memory.peak_entries,
        "kv_resident": float(bm.memory.num_entries()),
    }


def _knockout(lm, data: tuple[torch.Tensor, torch.Tensor], query_len: int, layers: list[int]) -> float:
    """Accuracy with ``layers`` blocked from the context (see ``knockout_accuracy``), 64 rows a batch."""
    ids, labels = data
    total = 0.0
    for i in range(0, ids.shape[0], 64):
        rows = slice(i, i + 64)
        total += knockout_accuracy(lm, ids[rows], labels[rows], query_len, layers) * ids[rows].shape[0]
    return total / ids.shape[0]


def _attention_mass(lm, data: tuple[torch.Tensor, torch.Tensor], rows: int) -> list[float]:
    """Retrieval attention mass per layer (see ``retrieval_mass``), in batches of 8 rows."""
    ids, labels = data[0][:rows], data[1][:rows]
    parts = [retrieval_mass(lm, ids[i : i + 8], labels[i : i + 8]) for i in range(0, ids.shape[0], 8)]
    sizes = [min(8, ids.shape[0] - i) for i in range(0, ids.shape[0], 8)]
    total = sum(sizes)
    return [sum(p[k] * n for p, n in zip(parts, sizes, strict=True)) / total for k in range(len(parts[0]))]


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """One seed of the check: train beacons on the frozen base, then measure every arm.

    Args:
        config: the claim's sizes.
        seed: seeds the data, the α schedule and the counting model (the base is fixed).
        device: torch device of the recall models.
        progress: called as ``progress(stage, done, total)`` from the training loop.

    Returns:
        The per-arm metrics, figures and notes of this seed.
    """
    cfg = config
    m: dict[str, dict[str, float]] = {}
    _counts(cfg, seed, m)

    stock = load_base(cfg.base_dir or BASE_DIR).to(device)
    task = PairTask(n_pairs=cfg.n_pairs)
    ev = make_pair_recall(cfg.n_eval, cfg.seq_len, cfg.window, seed=10**6 + seed, task=task)
    ev = (ev[0].to(device), ev[1].to(device))
    ev_ids = ev[0]

    # preconditions: the base solves the task with full attention and reads the value beyond layer 0
    full_acc = _eval(lambda x: stock(input_ids=x).logits, ev)
    mass = _attention_mass(stock, ev, cfg.n_attention_rows)
    n_layer = stock.config.num_hidden_layers
    deep_blocked = _knockout(stock, ev, cfg.window, list(range(1, n_layer)))
    m["base"] = {"acc": full_acc, "acc_deep_blocked": deep_blocked}
    m["base"].update({f"acc_l{i}_blocked": _knockout(stock, ev, cfg.window, [i]) for i in range(n_layer)})
    m["base"].update({f"value_attn_l{i}": v for i, v in enumerate(mass)})
    m["full"] = {"acc": full_acc, "kv_peak": float(cfg.seq_len)}

    bcfg = BeaconConfig(window=cfg.window, ratios=cfg.ratios, sink_size=cfg.sink_size, seed=seed)
    bm = wrap_with_beacon(load_base(cfg.base_dir or BASE_DIR).to(device), bcfg)

    # G1: exactness against the stock model (fresh beacon copies)
    probe = ev_ids[:8]
    with torch.no_grad():
        ref = stock(input_ids=probe).logits
        win = bm(probe[:, : cfg.window]).logits
        chunked = bm(probe, beacon_ratio=0).logits
    m["exact"] = {
        "window_maxdiff": float((win - ref[:, : cfg.window]).abs().max()),
        "alpha0_maxdiff": float((chunked - ref).abs().max()),
    }

    a = cfg.eval_ratio
    m["untrained"] = {"acc": _eval(lambda x: bm(x, beacon_ratio=a).logits, ev)}
    # peak of the scored pass: memory of the compressed chunks plus the raw last chunk
    n_comp = cfg.seq_len // cfg.window - 1
    memory = cfg.sink_size + n_comp * (cfg.window // a)
    stream = StreamingLLM(stock, sink=cfg.sink_size, window=memory - cfg.sink_size, chunk=cfg.window)
    m["streaming"] = {"acc": _eval(stream, ev), "kv_peak": 0.0}
    m["streaming"]["kv_peak"] = float(stream.peak_entries)
    pool = MeanPoolKV(stock, window=cfg.window, ratio=a, sink=cfg.sink_size)
    m["meanpool"] = {"acc": _eval(pool, ev)}
    m["meanpool"]["kv_peak"] = float(pool.peak_entries)
    snap = SnapKV(stock, budget=memory, window=cfg.window, sink=cfg.sink_size)
    m["snapkv"] = {"acc": _eval(snap, ev)}
    m["snapkv"]["kv_peak"] = float(snap.peak_entries)

    # beacons, step-random α, trained on the frozen base
    t0 = time.perf_counter()
    losses = _train_beacon(bm, cfg, seed, progress)
    m["beacon"] = {"final_train_loss": statistics.fmean(losses[-50:]) if losses else float("nan")}
    m["beacon"]["train_s"] = time.perf_counter() - t0
    for r in cfg.ratios:
        m["beacon"][f"acc_a{r}"] = _eval(lambda x, r=r: bm(x, beacon_ratio=r).logits, ev)
    if f"acc_a{a}" not in m["beacon"]:
        m["beacon"][f"acc_a{a}"] = _eval(lambda x: bm(x, beacon_ratio=a).logits, ev)
    bm(ev_ids[:1], beacon_ratio=a)
    m["beacon"]["acc"] = m["beacon"][f"acc_a{a}"]
    m["beacon"]["kv_peak"] = float(bm.memory.peak_entries)
    m["beacon"]["kv_ratio_peak"] = cfg.seq_len / bm.memory.peak_entries

    ratios = sorted(cfg.ratios)
    kv = {r: float(cfg.sink_size + n_comp * (cfg.window // r) + cfg.window) for r in ratios}
    arms = ("full", "beacon", "streaming", "snapkv", "meanpool", "untrained")
    series = {
        "arms_at_budget": Series(
            title=f"Recall at the α={a} peak KV budget (L={cfg.seq_len})",
            xlabel="arm (" + ", ".join(f"{i} {n}" for i, n in enumerate(arms)) + ")",
            ylabel="answer-token accuracy",
            x=[float(i) for i in range(len(arms))],
            lines={"accuracy": [m[n]["acc"] for n in arms]},
            kind="bar",
        ),
        "recall_vs_kv": Series(
            title="Recall against peak KV entries per layer",
            xlabel="peak KV entries",
            ylabel="answer-token accuracy",
            x=[kv[r] for r in ratios],
            lines={
                "beacon (random α)": [m["beacon"][f"acc_a{r}"] for r in ratios],
                "full attention (L entries)": [full_acc] * len(ratios),
            },
            kind="line",
        ),
        "knockout": Series(
            title="Base: recall with one layer's reads of the context blocked (query positions)",
            xlabel="blocked layer (-1 = none)",
            ylabel="answer-token accuracy",
            x=[-1.0] + [float(i) for i in range(n_layer)],
            lines={"accuracy": [full_acc] + [m["base"][f"acc_l{i}_blocked"] for i in range(n_layer)]},
            kind="bar",
        ),
        "retrieval_mass": Series(
            title="Base: attention from the query key to the fact's value, per layer",
            xlabel="layer",
            ylabel="max-over-heads attention weight",
            x=[float(i) for i in range(len(mass))],
            lines={"value attention": mass},
            kind="bar",
        ),
        "training": Series(
            title="Beacon training loss (answer tokens)",
            xlabel="step",
            ylabel="loss",
            x=[float(i) for i in range(len(losses))],
            lines={"random α": losses},
        ),
    }
    notes = [
        f"KV counts at L={cfg.count_len}, w={cfg.count_window}, α={cfg.count_ratio}: resident "
        f"{m['counts']['kv_resident']:.0f}, peak {m['counts']['kv_peak']:.0f} (analytic formulas matched: "
        f"{bool(m['counts']['formula_match'])}).",
        f"Equal peak KV budget at L={cfg.seq_len}, α={a}: beacon {m['beacon']['kv_peak']:.0f}, StreamingLLM "
        f"{m['streaming']['kv_peak']:.0f} (sink {cfg.sink_size} + {memory - cfg.sink_size} recent), "
        f"mean-pool {m['meanpool']['kv_peak']:.0f}, SnapKV {m['snapkv']['kv_peak']:.0f} while the last "
        f"chunk is read (its full-attention prefill holds {cfg.seq_len - cfg.window}).",
        "Base recall with layer i's context reads blocked: "
        + ", ".join(f"{m['base'][f'acc_l{i}_blocked']:.3f}" for i in range(n_layer))
        + f" (none blocked {full_acc:.3f}).",
        "Base attention from the query key to the fact's value token, per layer: "
        + ", ".join(f"{v:.3f}" for v in mass)
        + ".",
    ]
    return RunResult(metrics=m, series=series, notes=notes)


_SMOKE = ClaimConfig(
    seq_len=128, train_len=64, beacon_steps=4, batch_size=4, n_eval=32, n_attention_rows=8,
    count_len=1024, timing_repeats=1,
)  # fmt: skip

_FULL = ClaimConfig()

_PRE_TEST = "tests/methods/activation_beacon/test_activation_beacon_claim.py::test_preconditions_fail"

CLAIM = Claim(
    name="activation_beacon",
    paper=PaperRef(
        title="Long Context Compression with Activation Beacon",
        authors="Peitian Zhang, Zheng Liu, Shitao Xiao, Ninglu Shao, Qiwei Ye, Zhicheng Dou",
        arxiv="2401.03462",
        code="FlagOpen/FlagEmbedding",
    ),
    statement=(
        "At compression ratio 8, Activation Beacon keeps quality comparable to the uncompressed model "
        "while making inference about 2x faster and the KV cache 8x smaller; it is a plug-in module "
        "that leaves the base LLM's behaviour on short contexts unchanged."
    ),
    arms={
        "exact": "beacon model vs stock model: input within one window, and chunked with α=0",
        "counts": "KV entries and attention-score entries measured at L=4096, α=8, vs analytic formulas",
        "raw_cache": "control: the same chunked pass keeping raw K/V (α=0)",
        "base": "preconditions: the frozen base's full-attention recall, and its recall with each "
        "layer's reads of the context blocked",
        "full": "stock base, full attention (ceiling)",
        "beacon": "trained beacons on the frozen base, step-random α, scored at α=eval_ratio",
        "streaming": "StreamingLLM, sink + recent window at the beacon's peak KV budget",
        "snapkv": "SnapKV-style attention-score eviction, same budget while the last chunk is read",
        "meanpool": "control: mean-pooled K/V per unit of α tokens (training-free)",
        "untrained": "control: fresh beacon copies (no training)",
    },
    criteria=(
        value(
            "base.acc",
            ">=",
            MIN_FULL_ACC,
            name="pre_full_acc",
            precondition=True,
            falsifier=_PRE_TEST,
            explain="Precondition: the frozen base recalls at least 90% of the values with full "
            "attention, so the ceiling means something.",
        ),
        diff(
            "base.acc",
            "base.acc_deep_blocked",
            ">=",
            MIN_DEEP_READ_DROP,
            name="pre_value_read_beyond_layer0",
            precondition=True,
            falsifier=_PRE_TEST,
            explain="Precondition: the base reads the value in a layer >= 1, where beacon key/values "
            "carry content: blocking layers >= 1 from reading the context takes away at least 50 "
            "points of its recall.",
        ),
        value(
            "exact.window_maxdiff",
            "<=",
            1e-5,
            name="g1_window_exact",
            gating=False,
            paper="plug-in: identical",
            explain="With the input inside one window, the wrapped model's logits equal the stock "
            "model's (an exactness property, unit-tested).",
        ),
        value(
            "exact.alpha0_maxdiff",
            "<=",
            1e-4,
            name="g1_chunked_exact",
            gating=False,
            explain="Reading the input chunk by chunk while keeping raw keys and values (α = 0) "
            "gives the same logits as one full forward pass (an exactness property, unit-tested).",
        ),
        value(
            "counts.kv_ratio_peak",
            ">=",
            6.5,
            name="g2_kv_ratio",
            gating=False,
            paper="8x smaller KV cache",
            explain="At α = 8 the beacon cache holds at least 6.5 times fewer key/value entries "
            "than full attention at its peak (fixed by the cache layout, unit-tested).",
        ),
        value(
            "counts.formula_match",
            ">=",
            1.0,
            name="g2_formula_match",
            gating=False,
            explain="The cache's measured resident, peak and attention-score entries equal the "
            "analytic formulas (a counting property, unit-tested).",
        ),
        fails(
            value(
                "raw_cache.kv_ratio_peak",
                ">=",
                6.5,
                name="g2_control_raw_cache",
                gating=False,
                explain="A chunked pass that keeps every raw key/value does not shrink the cache "
                "(the counting control of g2_kv_ratio).",
            )
        ),
        value(
            "beacon.kv_ratio_peak",
            ">=",
            6.0,
            name="g4_budget_kv_ratio",
            gating=False,
            explain="At the gated length and α, full attention holds at least 6 times more "
            "key/values than the beacon model at its peak (the quality gate is at a real 8x setting).",
        ),
        value(
            "counts.score_ratio",
            ">=",
            3.0,
            name="g3_score_ratio",
            gating=False,
            paper="2x faster inference",
            explain="Beacon prefill computes at least 3 times fewer attention scores than full "
            "attention (fixed by the mask layout, unit-tested).",
        ),
        ratio(
            "counts.prefill_full_s",
            "counts.prefill_beacon_s",
            ">=",
            1.0,
            name="g3_prefill_speedup",
            gating=False,
            paper="2x",
            explain="Beacon prefill is no slower than full-attention prefill on this CPU "
            "(wall-clock, reported only).",
        ),
        ratio(
            "beacon.acc",
            "full.acc",
            ">=",
            0.8,
            name="g4_recall_vs_full",
            paper="comparable quality",
            falsifier="g4_control_untrained",
            explain="At α = 8, trained beacons recall at least 80% as many values as the "
            "uncompressed model reading the whole context.",
        ),
        diff(
            "beacon.acc",
            "streaming.acc",
            ">=",
            0.3,
            name="g4_recall_vs_streaming",
            falsifier="g4_control_untrained_vs_streaming",
            explain="At α = 8, trained beacons recall at least 30 points more values than "
            "StreamingLLM keeping the same number of key/value entries.",
        ),
        fails(
            ratio(
                "untrained.acc",
                "full.acc",
                ">=",
                0.8,
                name="g4_control_untrained",
                explain="Untrained beacon copies must not reach 80% of the uncompressed model's "
                "recall: the gain has to come from training the beacons.",
            )
        ),
        fails(
            diff(
                "untrained.acc",
                "streaming.acc",
                ">=",
                0.3,
                name="g4_control_untrained_vs_streaming",
                explain="Untrained beacon copies must not beat StreamingLLM by 30 points at the "
                "same KV budget: the margin has to come from training the beacons.",
            )
        ),
        fails(
            ratio(
                "meanpool.acc",
                "full.acc",
                ">=",
                0.8,
                name="g4_control_meanpool",
                explain="Mean-pooling each unit's keys and values (compression without learned "
                "beacons) must not reach 80% of the uncompressed model's recall.",
            )
        ),
        diff(
            "beacon.acc",
            "snapkv.acc",
            ">=",
            0.0,
            name="beacon_vs_snapkv",
            gating=False,
            explain="Trained beacons recall at least as many values as SnapKV-style eviction "
            "keeping the same number of key/values while the last chunk is read (reported only; "
            "SnapKV sees the queries before it evicts, beacons do not).",
        ),
    ),
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=240.0),
    },
    run_fn=run,
    headline="g4_recall_vs_full",
    deviations=(
        "Frozen base: a 2-layer Llama (hidden 64, GQA 4/2 heads, 82K parameters) pretrained on "
        "repeated random segments, then synthetic key→value recall at L=128..512, and shipped as "
        "package data, instead of a 7B model; evaluation on that task, not LongBench/NIAH.",
        "L=512, w=16 (32 chunks; the spec asks w=64) so that the peak KV ratio at α=8 is 6.5.",
        "Beacons are trained on 128-token rows (8 chunks) holding 12 pairs, and scored on "
        "512-token rows holding 4.",
        "Training loss on the answer tokens only (filler is random); the paper's loss covers all raw tokens.",
        "KV and compute counts use a separate 1-layer model at L=4096 (counting needs no training).",
        "No fixed-α ablation (CPU budget).",
        "SnapKV-style eviction is our own short module (kvpress is not a dependency); its prefill "
        "is full attention, its budget applies while the last chunk is read.",
    ),
)
