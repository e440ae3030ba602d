"""The Wicked Oddities claim at smoke budget: plumbing, determinism, isolation, and the CA gate."""

from __future__ import annotations

import dataclasses
import math

import torch

from iclr25._core.claims import RunResult, judge
from iclr25._core.registry import REGISTRY
from iclr25.methods.wicked_oddities import (
    BlendTrigger,
    HardnessSelector,
    PoisonedDataset,
    SurrogateConfig,
    VictimConfig,
    clean_accuracy,
    digits_pools,
    poison_budget,
    shapes_pools,
    train_victim,
)
from iclr25.methods.wicked_oddities import claim as claim_module
from iclr25.methods.wicked_oddities.claim import _SMOKE, CLAIM, run


def test_smoke_covers_every_arm_and_is_finite(smoke_runs) -> None:
    r, _ = smoke_runs("wicked_oddities")
    assert set(r.metrics) == set(CLAIM.arms)
    assert all(math.isfinite(v) for ms in r.metrics.values() for v in ms.values())
    assert {"asr_curves", "asr_by_arm"} <= set(r.series)
    assert len(judge(CLAIM, "smoke", [r]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(smoke_runs) -> None:
    a, b = smoke_runs("wicked_oddities")
    assert a.deterministic_metrics() == b.deterministic_metrics()
    assert a.notes == b.notes  # the same global indices are selected


def test_smoke_invariants(smoke_runs) -> None:
    m = smoke_runs("wicked_oddities")[0].metrics
    train = shapes_pools(0, 1, _SMOKE.shapes_n_train, 1).train
    n_t = int((train.labels == _SMOKE.shapes_target).sum())
    budget = poison_budget(_SMOKE.budget_frac, n_t)
    assert m["knn_hard"]["shapes_poison_of_target"] == budget / n_t
    assert m["knn_hard"]["shapes_poison_of_train"] == budget / len(train)
    # hard and easy pick different images: their clean-victim losses differ, hard above easy
    assert m["knn_hard"]["shapes_clean_loss"] > m["knn_easy"]["shapes_clean_loss"]
    # the oracle picks the images the clean victim fits worst: no selector's mean loss is higher
    assert all(m["oracle"]["shapes_clean_loss"] >= m[a]["shapes_clean_loss"] for a in ("random", "knn_hard"))


def test_budgets_match_registry() -> None:
    entry = REGISTRY["wicked_oddities"]
    assert (entry.smoke_s, entry.full_s, entry.full_seeds) == (
        CLAIM.budgets["smoke"].seconds,
        CLAIM.budgets["full"].seconds,
        CLAIM.budgets["full"].seeds,
    )
    assert CLAIM.budgets["smoke"].report_only


def test_every_gate_has_a_falsifier_and_the_bed_has_its_preconditions() -> None:
    by_name = {c.name: c for c in CLAIM.criteria}
    share = by_name["shapes_knn_share"]
    ctrl = by_name[share.falsifier]
    assert ctrl.control and ctrl.gating and ctrl.a == "knn_easy.shapes_oracle_share"
    assert ctrl.threshold == share.threshold and ctrl.op == share.op
    pre = {c.name for c in CLAIM.criteria if c.precondition}
    assert {
        "shapes_victim_learns",
        "shapes_dirty_implants",
        "shapes_random_in_window_low",
        "shapes_random_in_window_high",
        "shapes_ceiling_room",
        "shapes_victims_converged_ca",
        "shapes_victims_converged_asr",
    } <= pre
    # the digits bed is reported only
    assert not any(c.gating for c in CLAIM.criteria if c.name.startswith(("digits_", "ctrl_digits")))


def _with(r: RunResult, arm: str, metric: str, v: float) -> RunResult:
    m = {a: dict(ms) for a, ms in r.metrics.items()}
    m[arm][metric] = v
    return RunResult(metrics=m)


def test_unmet_window_or_ceiling_gives_inconclusive(smoke_runs) -> None:
    """A bed where random poisoning saturates, or the oracle cannot beat random, is not applicable."""
    base = smoke_runs("wicked_oddities")[0]
    good = base
    for arm, metric, v in [
        ("clean", "shapes_ca", 0.95),
        ("knn_hard", "shapes_ca", 0.95),
        ("dirty", "shapes_asr", 0.99),
        ("random", "shapes_asr", 0.3),
        ("oracle", "shapes_asr", 0.6),
        ("clean", "shapes_max_ca_gap", 0.0),
        ("clean", "shapes_max_asr_gap", 0.0),
        ("knn_hard", "shapes_oracle_share", 0.8),
        ("knn_easy", "shapes_oracle_share", -0.5),
    ]:
        good = _with(good, arm, metric, v)
    assert judge(CLAIM, "full", [good] * 3).verdict.name == "SUPPORTED"
    failing = _with(good, "knn_hard", "shapes_oracle_share", 0.1)
    assert judge(CLAIM, "full", [failing] * 3).verdict.name == "NOT_SUPPORTED"
    for arm, metric, v in [
        ("random", "shapes_asr", 0.9),
        ("dirty", "shapes_asr", 0.2),
        ("oracle", "shapes_asr", 0.32),
    ]:
        j = judge(CLAIM, "full", [_with(good, arm, metric, v)] * 3)
        assert j.verdict.name == "INCONCLUSIVE", (arm, metric)
    j = judge(CLAIM, "full", [_with(good, "clean", "shapes_max_asr_gap", 0.3)] * 3)
    assert j.verdict.name == "INCONCLUSIVE" and j.kind == "not converged"
    j = judge(CLAIM, "full", [_with(good, "knn_easy", "shapes_oracle_share", 0.9)] * 3)
    assert j.verdict.name == "INCONCLUSIVE" and j.kind == "cannot discriminate"


def test_selection_sees_target_class_images_only(monkeypatch, one_thread) -> None:
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    class Spy(HardnessSelector):
        def fit(self, images, indices=None):  # type: ignore[override]
            seen.append((images, torch.as_tensor(indices)))
            return super().fit(images, indices)

    monkeypatch.setattr(claim_module, "HardnessSelector", Spy)
    tiny = dataclasses.replace(
        _SMOKE,
        digits=False,
        shapes_n_train=60,
        shapes_n_val=12,
        shapes_n_test=20,
        shapes_n_public=16,
        n_ood_per_class=2,
        surrogate=SurrogateConfig(epochs=1, ood_epochs=1),
        victim=VictimConfig(epochs=1),
    )
    run(tiny, seed=0)
    train = shapes_pools(0, 1, tiny.shapes_n_train, 1).train
    assert seen
    for images, idx in seen:
        assert bool((train.labels[idx] == tiny.shapes_target).all())
        assert torch.equal(images, train.images[idx])


def test_ca_gate_fails_when_poison_destroys_the_target_class(one_thread) -> None:
    """Falsifier of shapes_ca_kept: a broken "trigger" that replaces every target image with noise
    (Blend with alpha = 1 on the whole class) costs the victim the class; the gate must fail."""
    pools = digits_pools(0, upsample=8)
    cfg = VictimConfig(epochs=6, shift=0)
    clean = train_victim(pools.train, cfg, seed=0)
    idx = torch.where(pools.train.labels == 3)[0]
    broken = BlendTrigger.noise((1, 8, 8), alpha=1.0, seed=0)
    model = train_victim(PoisonedDataset(pools.train, idx, broken), cfg, seed=0)
    metrics = {
        "knn_hard": {"shapes_ca": clean_accuracy(model, pools.test)},
        "clean": {"shapes_ca": clean_accuracy(clean, pools.test)},
    }
    gate = next(c for c in CLAIM.criteria if c.name == "shapes_ca_kept")
    assert not gate.holds(gate.statistic(metrics))
    same = {"knn_hard": metrics["clean"], "clean": metrics["clean"]}
    assert gate.holds(gate.statistic(same))
