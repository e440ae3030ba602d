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
    full: float, best: float, zero: float, deepinv: float, teacher: float = 0.6
) -> dict[str, dict[str, float]]:
    m: dict[str, dict[str, float]] = {arm: {} for arm in CLAIM.arms}
    for c in CLAIM.criteria:
        for ref in (c.a, c.b):
            if ref:
                arm, key = ref.split(".")
                m[arm].setdefault(key, 0.5)
    m["full"]["acc"], m["best_baseline"]["acc"] = full, best
    m["zero_step"]["acc"], m["deepinv"]["acc"], m["teacher_bn"]["acc"] = zero, deepinv, teacher
    return m


def test_gates_fail_for_a_method_no_better_than_its_baseline() -> None:
    ok = [RunResult(metrics=_metrics(0.6, 0.45, 0.2, 0.4)) for _ in range(3)]
    assert judge(CLAIM, "full", ok).verdict is Verdict.SUPPORTED
    flat = [RunResult(metrics=_metrics(0.47, 0.45, 0.2, 0.4)) for _ in range(3)]
    assert judge(CLAIM, "full", flat).verdict is Verdict.NOT_SUPPORTED
    # zero-step inversion reaching the margin breaks the control: the bed cannot tell whether the
    # gain comes from inversion, so the verdict is INCONCLUSIVE, not a pass
    broken = judge(CLAIM, "full", [RunResult(metrics=_metrics(0.6, 0.45, 0.55, 0.4)) for _ in range(3)])
    assert (broken.verdict, broken.kind) == (Verdict.INCONCLUSIVE, "cannot discriminate")
    close_di = [RunResult(metrics=_metrics(0.6, 0.45, 0.2, 0.58)) for _ in range(3)]
    assert judge(CLAIM, "full", close_di).kind == "cannot discriminate"
    weak_teacher = [RunResult(metrics=_metrics(0.6, 0.45, 0.2, 0.4, teacher=0.2)) for _ in range(3)]
    assert judge(CLAIM, "full", weak_teacher).verdict is Verdict.INCONCLUSIVE


def test_every_gate_names_a_falsifier_or_is_a_control() -> None:
    for c in CLAIM.criteria:
        if c.gating and not c.control and not c.precondition:
            assert c.falsifier
