"""Claim plumbing of Activation Beacon at the smoke budget (numbers, not verdicts)."""

from __future__ import annotations

import pytest
import torch

from iclr25._core.claims import judge
from iclr25._core.pretrained import ARTEFACT_FILES, ArtefactMissingError, read_training
from iclr25._core.registry import REGISTRY
from iclr25._core.seeding import claim_scope
from iclr25.methods.activation_beacon import (
    BASE_DIR,
    BaseTrainConfig,
    PairTask,
    beacon_kv_peak,
    beacon_kv_resident,
    beacon_score_entries,
    build_base,
    knockout_accuracy,
    load_base,
    make_pair_recall,
    make_repeat_segments,
    pretrain_base,
)
from iclr25.methods.activation_beacon.claim import CLAIM, MIN_DEEP_READ_DROP, MIN_FULL_ACC


def test_smoke_counts_equal_the_formulas(smoke_runs):
    run, _ = smoke_runs("activation_beacon")
    cfg = CLAIM.budgets["smoke"].config
    c = run.metrics["counts"]
    args = (cfg.count_len, cfg.count_window, cfg.count_ratio, cfg.sink_size)
    assert c["kv_resident"] == beacon_kv_resident(*args)
    assert c["kv_peak"] == beacon_kv_peak(*args)
    assert c["scores_beacon"] == beacon_score_entries(*args)
    assert c["formula_match"] == 1.0
    assert run.metrics["raw_cache"]["kv_ratio_peak"] == 1.0  # the control keeps every raw K/V


def test_smoke_exactness_and_budget_match(smoke_runs):
    run, _ = smoke_runs("activation_beacon")
    assert run.metrics["exact"]["window_maxdiff"] <= 1e-5
    assert run.metrics["exact"]["alpha0_maxdiff"] <= 1e-4
    m = run.metrics
    assert m["streaming"]["kv_peak"] == m["beacon"]["kv_peak"]  # equal KV budget
    assert m["meanpool"]["kv_peak"] == m["beacon"]["kv_peak"]
    assert m["snapkv"]["kv_peak"] == m["beacon"]["kv_peak"]
    assert m["full"]["kv_peak"] > m["beacon"]["kv_peak"]


def test_smoke_judged_report_only(smoke_runs):
    run, _ = smoke_runs("activation_beacon")
    j = judge(CLAIM, "smoke", [run])
    assert j.reason == "smoke: report-only"
    assert {"recall_vs_kv", "arms_at_budget", "retrieval_mass", "training"} <= set(run.series)
    assert {"learning_curve", "alpha_by_length"} <= set(run.series)


def test_gates_and_their_falsifiers():
    """Exactness and counts are report-only; recall gates name a control, preconditions a test."""
    by_name = {c.name: c for c in CLAIM.criteria}
    gates = {c.name for c in CLAIM.criteria if c.gating and not c.control}
    assert gates == {
        "g4_recall_vs_full",
        "g4_recall_vs_streaming",
        "pre_full_acc",
        "pre_value_read_beyond_layer0",
        "beacon_converged",
        "beacon_left_plateau",
    }
    for name in ("g4_recall_vs_full", "g4_recall_vs_streaming"):
        control = by_name[by_name[name].falsifier]
        assert control.control and control.gating and control.threshold == by_name[name].threshold
    for name in ("pre_full_acc", "pre_value_read_beyond_layer0"):
        assert by_name[name].falsifier.endswith("::test_preconditions_fail")
    assert all(c.explain for c in CLAIM.criteria)
    assert CLAIM.budgets["full"].seeds == 3
    cfg = CLAIM.budgets["full"].config
    assert cfg.eval_ratio == 8
    peak = cfg.sink_size + (cfg.seq_len // cfg.window - 1) * (cfg.window // 8) + cfg.window  # scored pass
    assert cfg.seq_len / peak >= 6


def test_preconditions_fail():
    """A base that never learned the task misses both preconditions (their falsifier)."""
    broken = build_base(BaseTrainConfig(seed=5)).eval()
    ids, labels = make_pair_recall(8, 128, 16, seed=3)
    with torch.no_grad():
        logits = broken(input_ids=ids).logits
    mask = labels[:, 1:] != -100
    acc = float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())
    blocked = knockout_accuracy(broken, ids, labels, 16, [1])
    metrics = {"base": {"acc": acc, "acc_deep_blocked": blocked}}
    by_name = {c.name: c for c in CLAIM.criteria}
    for name in ("pre_full_acc", "pre_value_read_beyond_layer0"):
        c = by_name[name]
        assert not c.holds(c.statistic(metrics)), (name, metrics)
    assert acc < MIN_FULL_ACC and acc - blocked < MIN_DEEP_READ_DROP


def test_pair_recall_layout():
    ids, labels = make_pair_recall(3, 64, 16, seed=0)
    assert ids.shape == labels.shape == (3, 64)
    assert int((labels != -100).sum()) == 12  # 4 answers per row, at the end
    assert bool((labels[:, :57] == -100).all())
    task = PairTask()
    for i in range(3):
        row = ids[i]
        ctx = row[:48]
        for q in (labels[i] != -100).nonzero().flatten().tolist():
            key, val = int(row[q - 1]), int(row[q])
            assert task.keys[0] <= key < task.keys[1] and task.values[0] <= val < task.values[1]
            hits = ((ctx[:-1] == key) & (ctx[1:] == val)).nonzero().flatten()
            assert len(hits) == 1  # the pair occurs once in the context, as "k v"
        assert int(((ctx >= task.keys[0]) & (ctx < task.keys[1])).sum()) == 4
    again, _ = make_pair_recall(3, 64, 16, seed=0)
    assert (again == ids).all()
    with pytest.raises(ValueError, match="query_len"):
        make_pair_recall(1, 64, 6, seed=0)


def test_repeat_segments_layout():
    ids, labels = make_repeat_segments(16, 65, seed=0)
    assert ids.shape == labels.shape == (16, 65) and bool((ids[:, 0] == 2).all())
    for i in range(16):
        pos = (labels[i] != -100).nonzero().flatten()
        h = len(pos) + 1  # the second copy, after its first token
        assert h >= 8 and bool((pos.diff() == 1).all())
        start = int(pos[0]) - 1
        copy = ids[i, start : start + h]
        earlier = [j for j in range(1, start - h + 1) if torch.equal(ids[i, j : j + h], copy)]
        assert earlier, "the predicted segment occurs earlier in the row"
    assert torch.equal(make_repeat_segments(16, 65, seed=0)[0], ids)
    with pytest.raises(ValueError, match="min_len"):
        make_repeat_segments(1, 15, seed=0)


def test_knockout_blocks_only_the_listed_layers():
    """Blocking no layer is the plain forward; the shipped base loses its recall without layer 1."""
    lm = load_base()
    ids, labels = make_pair_recall(32, 128, 16, seed=7)
    with torch.no_grad():
        logits = lm(input_ids=ids).logits
    mask = labels[:, 1:] != -100
    acc = float((logits[:, :-1].argmax(-1)[mask] == labels[:, 1:][mask]).float().mean())
    assert knockout_accuracy(lm, ids, labels, 16, []) == acc
    assert acc >= 0.9
    assert knockout_accuracy(lm, ids, labels, 16, [1]) <= acc - MIN_DEEP_READ_DROP
    assert knockout_accuracy(lm, ids, labels, 16, [0]) >= acc - 0.2
    with pytest.raises(ValueError, match="layers"):
        knockout_accuracy(lm, ids, labels, 16, [2])


def test_shipped_base_is_small_and_documented(tmp_path):
    files = {p.name: p.stat().st_size for p in BASE_DIR.iterdir()}
    assert set(files) == set(ARTEFACT_FILES)
    assert files["model.safetensors"] < 1_000_000
    rec = read_training(BASE_DIR)
    assert rec["command"].startswith("iclr25 pretrain activation_beacon base --out ")
    cfg = BaseTrainConfig.from_dict(rec["config"])
    assert cfg == BaseTrainConfig(), "the shipped base was trained with the recipe's config"
    assert rec["steps"] == len(rec["loss_curve"]) == cfg.steps
    assert rec["quality"]["heldout_accuracy"] >= MIN_FULL_ACC
    lm = load_base()
    assert not lm.training and lm.config.num_hidden_layers == cfg.n_layer
    with pytest.raises(ArtefactMissingError, match="iclr25 pretrain activation_beacon base"):
        load_base(tmp_path)


def test_shipped_base_reproduces_first_steps(tmp_path):
    """Re-running the recipe for its first steps, as ``iclr25 pretrain`` runs it, gives the
    recorded losses and writes nothing."""
    rec = read_training(BASE_DIR)
    n = REGISTRY["activation_beacon"].artefacts[0].replay_steps
    calls = []
    with claim_scope(0, threads=1):
        losses = pretrain_base(tmp_path, max_steps=n, progress=lambda *a: calls.append(a))
    assert losses == pytest.approx(rec["loss_curve"][:n], abs=1e-4)
    assert all(stage == "base" and total == rec["steps"] for stage, _, total in calls)
    assert not any(tmp_path.iterdir())


@pytest.mark.full
def test_full_budget_runs():
    run = CLAIM.run("full", seed=0)
    assert judge(CLAIM, "full", [run]).verdict.value in ("SUPPORTED", "NOT_SUPPORTED", "INCONCLUSIVE")
