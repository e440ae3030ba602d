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

import math
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
from iclr25._core.convergence import converged, read_curve
from iclr25.common.tiny_lm import build_tiny_lm
from iclr25.methods.activation_beacon import (
    BASE_DIR,
    KVPRESS_PRESSES,
    BeaconConfig,
    ClaimConfig,
    KVPressEviction,
    MeanPoolKV,
    PairTask,
    SnapKV,
    StreamingLLM,
    beacon_kv_peak,
    beacon_kv_resident,
    beacon_score_entries,
    full_score_entries,
    knockout_accuracy,
    kvpress_available,
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
#: Convergence: recall at α = 8, L = 512 moved at most this much over the last fifth of training
#: (two recall points; fixed before any run of the mixed-length schedule).
PLATEAU_EPS = 0.02
#: Loss of a predictor that ignores the memory: the answer is one of the task's 32 values, each
#: equally likely, so ln 32 nats. Beacons that carry the values must end below half of it (fixed
#: from this derivation, before any run of the length ramp; the stuck seeds sat at 3.45-3.49).
MEMORY_FREE_LOSS = math.log(PairTask().values[1] - PairTask().values[0])
#: Expected seconds of one seed: full (600 steps) and long (3,500 steps), from ~0.29 s a
#: mixed-length step plus ~95 s of evaluation.
FULL_S = 270.0
LONG_S = 1120.0


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


def train_lengths(cfg: ClaimConfig, seed: int) -> list[int]:
    """Row length of every training step, uniform over the multiples of w up to a growing cap.

    The cap starts at ``train_len_min`` and grows linearly to ``train_len`` over the first
    ``length_ramp`` share of the steps, then every length in [train_len_min, train_len] is drawn
    alike. One length per step (all rows of a batch alike), as the paper's training groups its
    mixed-length data by chunk count.
    """
    choices = list(range(cfg.train_len_min, cfg.train_len + 1, cfg.window))
    ramp = cfg.length_ramp * cfg.beacon_steps
    g = torch.Generator().manual_seed(seed * 100003 + 7)
    u = torch.rand(cfg.beacon_steps, generator=g).tolist()
    lengths = []
    span = cfg.train_len - cfg.train_len_min
    for step, r in enumerate(u):
        cap = cfg.train_len if step >= ramp else cfg.train_len_min + span * step / ramp
        allowed = [n for n in choices if n <= cap]
        lengths.append(allowed[min(int(r * len(allowed)), len(allowed) - 1)])
    return lengths


def beacon_lr_factor(step: int, cfg: ClaimConfig) -> float:
    """Learning-rate multiplier at ``step``: the HF Trainer's linear schedule.

    Linear warm-up over ``warmup_steps``, then linear decay to 0 at ``beacon_steps``
    (``transformers.get_linear_schedule_with_warmup``).
    """
    w, total = cfg.warmup_steps, cfg.beacon_steps
    if step < w:
        return step / max(1, w)
    return max(0.0, (total - step) / max(1, total - w))


def _train_beacon(
    bm,
    cfg: ClaimConfig,
    seed: int,
    progress: ProgressFn,
    curve_fn=None,
) -> tuple[list[float], list[float], list[float]]:
    """Compression-based AR on mixed-length rows; returns (losses, curve steps, curve values).

    ``curve_fn()`` (recall at α = eval_ratio, L = seq_len) is read every ``curve_every`` steps
    and after the last step.
    """
    from transformers import get_linear_schedule_with_warmup

    params = list(bm.beacon_parameters().values())
    opt = torch.optim.AdamW(params, lr=cfg.lr_beacon, weight_decay=0.0)
    sched = get_linear_schedule_with_warmup(opt, cfg.warmup_steps, max(1, cfg.beacon_steps))
    task = PairTask(n_pairs=cfg.train_pairs)
    query_len = max(cfg.window, 2 * cfg.train_pairs)
    lengths = train_lengths(cfg, seed)
    losses: list[float] = []
    c_steps: list[float] = []
    c_vals: list[float] = []
    steps = cfg.beacon_steps
    every = _report_every(steps)
    for step in range(steps):
        if step % every == 0:
            progress("training beacons", step, steps)
        if curve_fn is not None and step > 0 and step % cfg.curve_every == 0:
            c_steps.append(float(step))
            c_vals.append(curve_fn())
        ids, labels = make_pair_recall(
            cfg.batch_size, lengths[step], query_len, seed=seed * 100003 + 50000 + step, task=task
        )
        loss = bm(ids, labels=labels).loss  # step-random α from cfg.ratios
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
        opt.step()
        sched.step()
        losses.append(loss.detach().item())
    if curve_fn is not None:
        c_steps.append(float(steps))
        c_vals.append(curve_fn())
    progress("training beacons", steps, steps)
    return losses, c_steps, c_vals


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


def _predictions(fn, data: tuple[torch.Tensor, torch.Tensor], batch: int = 128) -> torch.Tensor:
    """Predicted answer tokens (flattened over the answer positions of every row)."""
    ids, labels = data
    out = []
    with torch.no_grad():
        for i in range(0, ids.shape[0], batch):
            lab = labels[i : i + batch, 1:]
            out.append(fn(ids[i : i + batch])[:, :-1].argmax(-1)[lab != -100])
    return torch.cat(out)


def _kvpress_rows(
    cfg: ClaimConfig, stock, ev, snap, budget: int, m: dict[str, dict[str, float]]
) -> list[str]:
    """kvpress SnapKV, StreamingLLM and Expected Attention at ``budget`` context entries (reported only)."""
    if not cfg.kvpress:
        return []
    if not kvpress_available():
        return ["kvpress rows skipped: kvpress is not installed (pip install --no-deps kvpress==0.5.5)."]
    answers = ev[1][:, 1:][ev[1][:, 1:] != -100]
    ours = _predictions(snap, ev)
    for name in KVPRESS_PRESSES:
        ev_fn = KVPressEviction(stock, name, budget=budget, window=cfg.window, sink=cfg.sink_size)
        pred = _predictions(ev_fn, ev)
        m[f"kvpress_{name}"] = {
            "acc": float((pred == answers).float().mean()),
            "kv_peak": float(ev_fn.peak_entries),
            "agree_with_our_snapkv": float((pred == ours).float().mean()),
        }
    return [
        f"kvpress 0.5.5 at {budget} context entries + the {cfg.window}-token query span: "
        + ", ".join(f"{n} {m[f'kvpress_{n}']['acc']:.3f}" for n in KVPRESS_PRESSES)
        + f"; our SnapKV {m['snapkv']['acc']:.3f} (its observation window is the query span, kvpress "
        f"SnapKV's the last {cfg.window} context tokens; answer agreement with ours "
        f"{m['kvpress_snapkv']['agree_with_our_snapkv']:.3f})."
    ]


def _alpha_length_table(cfg: ClaimConfig, stock, bm, seed: int) -> dict[str, float]:
    """Recall of the trained beacons at every (α, L) of the table, and full attention at each L."""
    task = PairTask(n_pairs=cfg.n_pairs)
    out: dict[str, float] = {}
    for n in cfg.table_lens:
        data = make_pair_recall(cfg.n_table, n, cfg.window, seed=2 * 10**6 + 1000 * seed + n, task=task)
        out[f"full_L{n}"] = _eval(lambda x: stock(input_ids=x).logits, data)
        for r in cfg.table_ratios:
            out[f"a{r}_L{n}"] = _eval(lambda x, r=r: bm(x, beacon_ratio=r).logits, data)
    return out


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

    bcfg = BeaconConfig(
        window=cfg.window, ratios=cfg.ratios, sink_size=cfg.sink_size, params=cfg.params, seed=seed
    )
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

    # kvpress presses at the same budget (report-only), beside our SnapKV on the same rows
    kv_notes = _kvpress_rows(cfg, stock, ev, snap, memory, m)

    # beacons, step-random α, mixed-length rows, trained on the frozen base to the schedule's end
    curve_data = (ev[0][: cfg.n_curve], ev[1][: cfg.n_curve])
    t0 = time.perf_counter()
    losses, c_steps, c_vals = _train_beacon(
        bm, cfg, seed, progress, curve_fn=lambda: _eval(lambda x: bm(x, beacon_ratio=a).logits, curve_data)
    )
    m["beacon"] = {"final_train_loss": statistics.fmean(losses[-50:]) if losses else float("nan")}
    m["beacon"]["train_s"] = time.perf_counter() - t0
    reading = read_curve(c_steps, c_vals, mode="max") if c_steps else None
    m["beacon_curve"] = reading.metrics() if reading else {"plateau_gap": float("inf")}
    for r in cfg.ratios:
        m["beacon"][f"acc_a{r}"] = _eval(lambda x, r=r: bm(x, beacon_ratio=r).logits, ev)
    if f"acc_a{a}" not in m["beacon"]:
        m["beacon"][f"acc_a{a}"] = _eval(lambda x: bm(x, beacon_ratio=a).logits, ev)
    table = _alpha_length_table(cfg, stock, bm, seed)
    m["table"] = table
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
        "learning_curve": Series(
            title=f"Beacon recall during training (α={a}, L={cfg.seq_len}, {cfg.n_curve} held-out rows)",
            xlabel="step",
            ylabel="answer-token accuracy",
            x=list(c_steps),
            lines={"beacon (random α)": list(c_vals)},
        ),
        "alpha_by_length": Series(
            title="Beacon recall by α and evaluation length L (after training)",
            xlabel="L (tokens)",
            ylabel="answer-token accuracy",
            x=[float(n) for n in cfg.table_lens],
            lines={
                **{f"α={r}": [table[f"a{r}_L{n}"] for n in cfg.table_lens] for r in cfg.table_ratios},
                "full attention": [table[f"full_L{n}"] for n in cfg.table_lens],
            },
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
    notes += kv_notes
    notes.append(
        "Recall by α × L (rows: α; columns: L="
        + ", ".join(str(n) for n in cfg.table_lens)
        + "): "
        + "; ".join(
            f"α={r}: " + ", ".join(f"{table[f'a{r}_L{n}']:.3f}" for n in cfg.table_lens)
            for r in cfg.table_ratios
        )
        + "; full attention: "
        + ", ".join(f"{table[f'full_L{n}']:.3f}" for n in cfg.table_lens)
        + "."
    )
    return RunResult(metrics=m, series=series, notes=notes)


_SMOKE = ClaimConfig(
    seq_len=128, train_len=96, train_len_min=64, beacon_steps=4, batch_size=4, n_eval=32,
    n_attention_rows=8, count_len=1024, timing_repeats=1, curve_every=2, n_curve=8,
    table_lens=(64, 128), n_table=8,
)  # fmt: skip

_FULL = ClaimConfig()

_LONG = ClaimConfig(beacon_steps=3500, curve_every=500)

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
        "beacon_curve": "the beacons' recall at α=8, L=512 during training (fixed held-out rows), "
        "read for its plateau",
        "table": "trained beacons' recall at α in {2, 4, 8, 16} × L in {256, 512, 1024}, and full "
        "attention at each L (reported only)",
        "kvpress_snapkv": "kvpress 0.5.5 SnapKVPress at the beacon's context budget (reported; "
        "needs kvpress)",
        "kvpress_streaming": "kvpress 0.5.5 StreamingLLMPress, same budget (reported; needs kvpress)",
        "kvpress_expected_attention": "kvpress 0.5.5 ExpectedAttentionPress, same budget (reported; "
        "needs kvpress)",
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
        converged(
            "beacon_curve",
            PLATEAU_EPS,
            name="beacon_converged",
            explain="Precondition: the beacons' recall at α = 8, L = 512 (scored every "
            "curve_every steps on fixed held-out rows) moved at most 0.02 over the last fifth of "
            "training, so the gates read a plateau.",
        ),
        value(
            "beacon.final_train_loss",
            "<=",
            MEMORY_FREE_LOSS / 2,
            name="beacon_left_plateau",
            precondition=True,
            convergence=True,
            falsifier="tests/methods/activation_beacon/test_activation_beacon_schedule.py::"
            "test_plateau_escape_precondition_fails_on_a_stuck_run",
            explain="Precondition: the beacons left the ignore-the-memory plateau: the training "
            "loss on the answers (mean of the last 50 steps) ends at most half of ln 32, the loss "
            "of guessing among the 32 values. A run stuck there is as flat as a finished one.",
        ),
        diff(
            "beacon.acc_a2",
            "beacon.acc_a8",
            ">=",
            0.0,
            name="alpha2_vs_alpha8",
            gating=False,
            explain="With training rows as long as the scored ones, the lighter compression α = 2 "
            "recalls at least as much as α = 8 at L = 512 (reported only).",
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
        "full": Budget("full", _FULL, seeds=3, seconds=FULL_S),
        "long": Budget("long", _LONG, seeds=3, seconds=LONG_S),
    },
    run_fn=run,
    headline="g4_recall_vs_full",
    deviations=(
        "Frozen base: a 2-layer Llama (hidden 64, GQA 4/2 heads, 82K parameters) pretrained on "
        "repeated random segments, then synthetic key→value recall at L=128..512, and shipped as "
        "package data, instead of a 7B model; evaluation on that task, not LongBench/NIAH.",
        "L=512, w=16 (32 chunks; the spec asks w=64) so that the peak KV ratio at α=8 is 6.5.",
        "Beacons are trained on mixed-length rows (each step draws one length from the multiples "
        "of 16 in 128..512, 8-32 chunks) holding 12 pairs, and scored on 512-token rows holding 4. "
        "The longest row drawn grows from 128 to 512 tokens over the first 40% of the steps (a "
        "length ramp): drawing every length from the first step left two seeds of three on the "
        "ignore-the-memory plateau.",
        "Training follows the official recipe's trained set (beacon q, k, v; no o copy) and the HF "
        "Trainer's linear schedule with gradient-norm clip 1.0, but with a 100-step warm-up, a peak "
        "rate of 3e-3 (tiny model) and 600 steps in full (3,500 in long), not the paper's ~2B tokens.",
        "α is drawn uniformly per chunk from the paper's pre-training list {2,4,8,16,32} filtered to "
        "divisors of w=16, i.e. {2,4,8,16}.",
        "Training loss on the answer tokens only (filler is random); the paper's loss covers all raw tokens.",
        "KV and compute counts use a separate 1-layer model at L=4096 (counting needs no training).",
        "No fixed-α ablation (CPU budget).",
        "The full budget (600 steps) is read through the same plateau precondition as long; where "
        "the recall curve still moves it is INCONCLUSIVE (not converged).",
        "SnapKV-style eviction is our own short module; its prefill is full attention, its budget "
        "applies while the last chunk is read. kvpress 0.5.5 presses (SnapKV, StreamingLLM, "
        "Expected Attention) are reported beside it when kvpress is installed; their SnapKV observes "
        "the last 16 context tokens, ours the query span.",
    ),
)
