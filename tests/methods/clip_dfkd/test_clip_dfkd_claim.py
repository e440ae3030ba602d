"""The CLIP-DFKD claim at smoke budget (plumbing, determinism) and its judging rules."""

from __future__ import annotations

import math

from iclr25._core.claims import RunResult, Verdict, judge
from iclr25._core.registry import REGISTRY
from iclr25.methods.clip_dfkd.claim import CLAIM


def test_smoke_covers_every_arm_and_is_finite(smoke_runs) -> None:
    run, _ = smoke_runs("clip_dfkd")
    assert set(run.metrics) == set(CLAIM.arms)
    assert all(math.isfinite(v) for ms in run.metrics.values() for v in ms.values())
    assert {"accuracy_by_arm", "learning_curves"} <= set(run.series)
    assert any("inapplicable" in n for n in run.notes)  # DeepInversion on the ViT teacher
    assert len(judge(CLAIM, "smoke", [run]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(smoke_runs) -> None:
    a, b = smoke_runs("clip_dfkd")
    assert a.deterministic_metrics() == b.deterministic_metrics()


def test_budgets_match_registry() -> None:
    entry = REGISTRY["clip_dfkd"]
    assert (entry.smoke_s, entry.full_s) == (CLAIM.budgets["smoke"].seconds, CLAIM.budgets["full"].seconds)
    assert CLAIM.budgets["smoke"].report_only and CLAIM.budgets["full"].seeds >= 3
    assert CLAIM.paper.title == entry.paper


def _metrics(
    full: float,
    best: float,
    no_sdd: float,
    *,
    teacher: float = 0.95,
    oracle: float = 0.9,
    gap: float = 0.01,
    detector: float = 0.99,
) -> dict[str, dict[str, float]]:
    m: dict[str, dict[str, float]] = {arm: {} for arm in CLAIM.arms}
    for c in CLAIM.criteria:
        for ref in (c.a, c.b):
            if ref:
                arm, key = ref.split(".")
                m[arm].setdefault(key, 0.5)
    for arm in m:
        if "plateau_gap" in m[arm]:
            m[arm]["plateau_gap"] = gap
    m["full"]["acc"], m["best_baseline"]["acc"], m["ctrl_no_sdd"]["acc"] = full, best, no_sdd
    m["teacher_bn"]["acc"], m["real_kd"]["acc"], m["detector"]["acc"] = teacher, oracle, detector
    return m


def _judge(*args: float, **kw: float):
    return judge(CLAIM, "full", [RunResult(metrics=_metrics(*args, **kw)) for _ in range(3)])


def test_gates_fail_for_a_method_no_better_than_its_baseline() -> None:
    assert _judge(0.8, 0.6, 0.6).verdict is Verdict.SUPPORTED
    assert _judge(0.62, 0.6, 0.6).verdict is Verdict.NOT_SUPPORTED
    # style diversification off clearing the margin too breaks the control: the bed cannot credit
    # SDD with the gain, so the verdict is INCONCLUSIVE, not a pass
    broken = _judge(0.8, 0.6, 0.7)
    assert (broken.verdict, broken.kind) == (Verdict.INCONCLUSIVE, "cannot discriminate")


def test_preconditions_stop_the_verdict() -> None:
    weak_teacher = _judge(0.8, 0.6, 0.6, teacher=0.7)
    assert weak_teacher.verdict is Verdict.INCONCLUSIVE
    weak_oracle = _judge(0.8, 0.6, 0.6, oracle=0.8)  # 0.15 below the teacher
    assert weak_oracle.verdict is Verdict.INCONCLUSIVE
    moving = _judge(0.8, 0.6, 0.6, gap=0.2)
    assert (moving.verdict, moving.kind) == (Verdict.INCONCLUSIVE, "not converged")


def test_distractor_part_is_reported_and_never_blocks_the_headline() -> None:
    blind = _judge(0.8, 0.6, 0.6, detector=0.6)
    assert blind.verdict is Verdict.SUPPORTED
    outcome = {o.name: o for o in blind.outcomes}["distractor_measurable"]
    assert not outcome.passed and outcome.part == "distractor"


def test_best_baseline_is_picked_on_validation(smoke_runs) -> None:
    run, _ = smoke_runs("clip_dfkd")
    baselines = ("match", "ce_only", "deepinv")
    best = baselines[int(run.metrics["best_baseline"]["which"])]
    assert run.metrics[best]["val_acc"] == max(run.metrics[a]["val_acc"] for a in baselines)
    assert run.metrics["best_baseline"]["acc"] == run.metrics[best]["acc"]


def test_every_gate_names_a_falsifier_or_is_a_control() -> None:
    for c in CLAIM.criteria:
        if c.gating and not c.control and not c.precondition:
            assert c.falsifier


def test_teacher_curve_reads_training_json(tmp_path, monkeypatch) -> None:
    import json

    import iclr25._core.pretrained as pretrained
    from iclr25.methods.clip_dfkd import claim

    record = {k: 0 for k in pretrained.TRAINING_KEYS} | {
        "zero_shot_curve": [
            {"step": 500, "zero_shot_accuracy": 0.7},
            {"step": 1000, "zero_shot_accuracy": 0.9},
        ]
    }
    (tmp_path / "training.json").write_text(json.dumps(record))
    monkeypatch.setattr(pretrained, "artefact_dir", lambda method, name: tmp_path)
    series = claim._teacher_curve()
    assert series.x == [500.0, 1000.0] and series.lines["teacher_bn"] == [0.7, 0.9]
