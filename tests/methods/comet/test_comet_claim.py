"""The COMET claim at smoke budget: plumbing, determinism and the mechanism checks."""

from __future__ import annotations

import math

import torch

from iclr25._core.claims import judge
from iclr25._core.registry import REGISTRY
from iclr25.methods.comet.claim import (
    _SMOKE,
    CLAIM,
    _best_so_far,
    _clusters,
    _distort,
    _Fit,
    _hard_digits,
    _split_val,
)


def test_smoke_covers_every_arm_and_is_finite(smoke_runs) -> None:
    run, _ = smoke_runs("comet")
    assert set(run.metrics) == set(CLAIM.arms)
    assert all(math.isfinite(v) for ms in run.metrics.values() for v in ms.values())
    assert {"mask_overlap", "learning_digits", "learning_clusters"} <= set(run.series)
    assert {"epoch1_loss_digits", "epoch1_loss_clusters"} <= set(run.series)
    assert {"width_sweep", "width_sweep_acc", "learning_hard", "sgd_digits"} <= set(run.series)
    assert len(run.series["sgd_digits"].x) == _SMOKE.sgd_epochs
    assert len(run.series["learning_clusters"].x) == _SMOKE.cluster_epochs
    assert [2**x for x in run.series["width_sweep"].x] == [float(w) for w in _SMOKE.sweep_widths]
    for key in ("digits_acc", "digits_acc_last", "digits_acc_ep5", "digits_best_epoch", "clusters_auc1",
                "clusters_acc", "clusters_plateau_gap", "sgd_acc", "sgd_acc_mean"):  # fmt: skip
        assert key in run.metrics["comet"] and key in run.metrics["dense"] and key in run.metrics["resampled"]
    assert run.metrics["comet"]["sgd_steps"] == _SMOKE.sgd_epochs * 36  # 1,149 digits rows, batch 32
    assert 0.0 <= run.metrics["comet"]["clusters_val_se"] <= 0.5
    for w in _SMOKE.sweep_widths:
        assert f"hard_acc_w{w}" in run.metrics["comet"] and f"hard_acc_w{w}" in run.metrics["dense"]
    widest = f"hard_acc_w{_SMOKE.sweep_widths[-1]}"
    assert run.metrics["resampled"]["hard_acc"] == run.metrics["resampled"][widest]
    assert len(judge(CLAIM, "smoke", [run]).outcomes) == len(CLAIM.criteria)


def test_smoke_deterministic(smoke_runs) -> None:
    a, b = smoke_runs("comet")
    assert a.deterministic_metrics() == b.deterministic_metrics()


def test_smoke_mechanism_already_shows(smoke_runs) -> None:
    """Deterministic structure that holds by construction even at smoke size."""
    m, _ = smoke_runs("comet")
    m = m.metrics
    assert m["comet"]["g3_same"] == 1.0 and m["comet"]["gpt2_same"] == 1.0
    assert m["topk"]["g3_same"] < 1.0 and m["layerwise"]["gpt2_same"] < 1.0
    assert m["comet"]["g1_rho"] > m["bernoulli"]["g1_rho"]
    assert m["rank1"]["g2_dead_frac"] > m["comet"]["g2_dead_frac"]
    assert 1.0 < m["comet"]["step_gflops"] / m["dense"]["step_gflops"] < 1.5


def test_budgets_match_registry() -> None:
    entry = REGISTRY["comet"]
    assert (entry.smoke_s, entry.full_s) == (CLAIM.budgets["smoke"].seconds, CLAIM.budgets["full"].seconds)
    assert CLAIM.budgets["smoke"].report_only
    assert any(c.control and c.gating for c in CLAIM.criteria)
    assert all(not c.gating for c in CLAIM.criteria if c.a.endswith("_s") or (c.b or "").endswith("_s"))


def test_accuracy_is_read_at_the_best_validation_epoch_not_the_best_test_epoch() -> None:
    fit = _Fit(val=[0.5, 0.9, 0.9, 0.7], test=[0.99, 0.6, 0.7, 0.95], epoch1_loss=[2.0, 1.0])
    assert fit.best == 1  # the earliest epoch with the highest validation accuracy
    assert fit.test[fit.best] == 0.6 and fit.auc1 == 1.5


def test_validation_split_comes_from_training_rows_only() -> None:
    gen = torch.Generator().manual_seed(0)
    Xtr, ytr = torch.arange(100.0).reshape(50, 2), torch.arange(50) % 5
    Xte, yte = torch.randn(20, 2, generator=gen), torch.randint(0, 5, (20,), generator=gen)
    Xa, ya, Xv, yv, Xt, yt = _split_val((Xtr, ytr, Xte, yte), 0.2, seed=3)
    assert (len(Xa), len(Xv)) == (40, 10) and Xt is Xte and yt is yte
    assert torch.equal(ya, (Xa[:, 0] / 2).long() % 5) and torch.equal(yv, (Xv[:, 0] / 2).long() % 5)
    rows = {tuple(r.tolist()) for r in Xa} | {tuple(r.tolist()) for r in Xv}
    assert len(rows) == 50 and rows == {tuple(r.tolist()) for r in Xtr}  # disjoint, and all from train
    assert torch.bincount(yv).tolist() == [2] * 5  # stratified
    assert torch.equal(_split_val((Xtr, ytr, Xte, yte), 0.2, seed=3)[2], Xv)  # deterministic


def test_learning_claim_parts_are_separate_gates_each_with_a_control() -> None:
    """The claim's two learning parts gate on their own rows: learns faster (the paper's SGD regime
    at matched steps, and Adam's first epoch) and generalises better at convergence (the cluster
    set), each naming a redrawn-routing control; by-construction, analytic and unresolvable rows
    never gate."""
    by_name = {c.name: c for c in CLAIM.criteria}
    faster = [c for c in CLAIM.criteria if c.part == "learns faster" and c.gating and not c.control]
    better = [
        c
        for c in CLAIM.criteria
        if c.part == "generalises better at convergence" and c.gating and not c.control and not c.precondition
    ]
    assert {c.name for c in faster} == {"sgd_digits", "speed_digits", "speed_clusters", "speed_vs_smaller"}
    assert {c.name for c in better} == {"general_clusters"}
    for c in faster + better:
        ctrl = by_name[c.falsifier]
        assert ctrl.control and ctrl.gating and ctrl.a.startswith("resampled.") and ctrl.b == c.b
        assert ctrl.part == c.part  # each part carries its own controls
    not_gating = (
        "g3_fixed_experts", "g3_gpt2_frozen_fixed", "step_flops_ratio", "width_trend_hard", "general_digits",
        "general_hard_wide", "vs_topk_digits", "vs_moe_digits", "vs_dropout_digits", "val_se_digits",
        "val_se_hard", "sgd_digits_mean",
    )  # fmt: skip
    for name in not_gating:
        assert not by_name[name].gating
    assert CLAIM.headline == "general_clusters" and CLAIM.figure == "learning_clusters"
    assert all(c.part for c in CLAIM.criteria if c.gating)


def test_generalisation_preconditions_read_the_cluster_split_and_every_arm() -> None:
    by_name = {c.name: c for c in CLAIM.criteria}
    se = by_name["val_se_clusters"]
    assert se.precondition and se.a == "comet.clusters_val_se" and se.threshold == 0.005 / 4
    for arm in ("comet", "dense", "resampled"):
        c = by_name[f"converged_{arm}_clusters"]
        assert c.precondition and c.convergence and c.a == f"{arm}.clusters_plateau_gap"
    pre = [c for c in CLAIM.criteria if c.precondition]
    assert {c.part for c in pre} == {"generalises better at convergence"}  # they block no other part


def _passing_metrics() -> dict[str, dict[str, float]]:
    """Metrics where every gate holds, every control misses and every precondition is met."""
    metrics: dict[str, dict[str, float]] = {arm: {} for arm in CLAIM.arms}
    for c in CLAIM.criteria:  # every metric a criterion reads
        for ref in (c.a, c.b):
            if ref:
                arm, key = ref.split(".")
                metrics[arm].setdefault(key, 1.0)
    for key in ("digits_auc1", "clusters_auc1", "hard_auc1"):
        metrics["comet"][key] = 0.5  # learns faster under Adam; the redrawn routing does not
    for key in ("sgd_acc", "sgd_acc_mean", "clusters_acc", "digits_acc", "hard_acc"):
        metrics["comet"][key] = 1.0
        metrics["dense"][key] = metrics["resampled"][key] = 0.8
    for arm, key in (("comet", "g1_rho"), ("comet", "g3_same"), ("comet", "gpt2_same")):
        metrics[arm][key] = 1.0
    for arm, key in (("bernoulli", "g1_rho"), ("resampled", "g1_rho")):
        metrics[arm][key] = 0.0
    metrics["comet"]["g2_dead_frac"], metrics["rank1"]["g2_dead_frac"] = 0.0, 0.3
    for arm in ("comet", "dense", "resampled"):
        metrics[arm]["clusters_plateau_gap"] = 0.0
    metrics["comet"]["clusters_val_se"] = 0.001
    return metrics


def _parts(metrics: dict[str, dict[str, float]]) -> dict:
    from iclr25._core.claims import RunResult

    return judge(CLAIM, "full", [RunResult(metrics={a: dict(m) for a, m in metrics.items()})] * 3).parts


def test_each_part_gets_its_own_verdict() -> None:
    """A run where COMET learns faster but does not generalise better is judged per part."""
    from iclr25._core.claims import Verdict

    metrics = _passing_metrics()
    assert all(v is Verdict.SUPPORTED for v, _ in _parts(metrics).values())
    metrics["comet"]["clusters_acc"] = 0.7  # below dense: does not generalise better
    parts = _parts(metrics)
    assert parts["learns faster"][0] is Verdict.SUPPORTED
    assert parts["experts overlap and never die"][0] is Verdict.SUPPORTED
    assert parts["generalises better at convergence"][0] is Verdict.NOT_SUPPORTED


def test_unconverged_arm_or_noisy_split_makes_only_generalisation_inconclusive() -> None:
    from iclr25._core.claims import Verdict

    for arm, key, bad in (("dense", "clusters_plateau_gap", 0.01), ("comet", "clusters_val_se", 0.01)):
        metrics = _passing_metrics()
        metrics["comet"]["clusters_acc"] = 0.7  # would fail, but the bed cannot tell
        metrics[arm][key] = bad
        parts = _parts(metrics)
        assert parts["generalises better at convergence"][0] is Verdict.INCONCLUSIVE
        assert parts["learns faster"][0] is Verdict.SUPPORTED


def test_redrawn_routing_that_also_learns_faster_makes_the_speed_part_inconclusive() -> None:
    from iclr25._core.claims import Verdict

    metrics = _passing_metrics()
    metrics["resampled"]["sgd_acc"] = 1.0  # the control beats dense at matched steps too
    parts = _parts(metrics)
    assert parts["learns faster"][0] is Verdict.INCONCLUSIVE
    assert "ctrl_sgd_resampled" in parts["learns faster"][1]


def test_adam_runs_share_the_cosine_schedule_and_the_paper_regime_keeps_a_constant_rate(monkeypatch) -> None:
    """Every arm of the cluster set (G6) and of digits (G4) decays on the same schedule; the SGD
    regime (G7) is the official script's, constant at lr 1e-4."""
    from dataclasses import replace

    import iclr25.methods.comet.claim as claim

    calls: list[tuple[str, str, str]] = []
    real = claim.train_mlp

    def spy(model: torch.nn.Module, *args, **kw):  # type: ignore[no-untyped-def]
        calls.append((type(model).__name__, kw.get("optimizer", "adam"), kw.get("lr_schedule", "constant")))
        return real(model, *args, **kw)

    monkeypatch.setattr(claim, "train_mlp", spy)
    cfg = replace(_SMOKE, cluster_n_train=64, cluster_n_val=64, cluster_n_test=64, cluster_epochs=2,
                  g4_width=16, sgd_epochs=1)  # fmt: skip
    assert cfg.lr_schedule == "cosine"
    m: dict[str, dict[str, float]] = {a: {} for a in CLAIM.arms}
    claim._g6(cfg, 0, _clusters(cfg, 0), m, {})
    assert [c[2] for c in calls] == ["cosine"] * 3 and len({c[0] for c in calls}) == 3
    calls.clear()
    digits = _split_val(claim._digits(0), 0.2, 0)
    claim._g7(cfg, 0, digits, m, {})
    assert [c[1:] for c in calls] == [("sgd", "constant")] * 3
    calls.clear()
    claim._fit(claim._build("dense", 64, 10, (8,), 0.5, 0), digits, replace(cfg, g4_epochs=1), 0)
    assert calls == [("DenseMLP", "adam", "cosine")]


def test_best_so_far_is_the_running_maximum() -> None:
    assert _best_so_far([0.5, 0.7, 0.6, 0.8, 0.75]) == [0.5, 0.7, 0.7, 0.8, 0.8]


def test_cluster_set_splits_are_disjoint_draws_standardised_on_training_rows() -> None:
    from dataclasses import replace

    cfg = replace(_SMOKE, cluster_n_train=300, cluster_n_val=200, cluster_n_test=100)
    Xtr, ytr, Xva, yva, Xte, yte = _clusters(cfg, seed=0)
    assert (len(Xtr), len(Xva), len(Xte)) == (300, 200, 100) and Xtr.shape[1] == 20
    assert len(ytr) == 300 and len(yva) == 200 and len(yte) == 100 and int(ytr.max()) < 10
    torch.testing.assert_close(Xtr.mean(0), torch.zeros(20), atol=1e-5, rtol=0)
    torch.testing.assert_close(Xtr.std(0, unbiased=False), torch.ones(20), atol=1e-4, rtol=0)
    assert torch.equal(_clusters(cfg, seed=0)[2], Xva) and not torch.equal(_clusters(cfg, seed=1)[0], Xtr)


def test_distort_without_distortion_is_the_upsampled_image() -> None:
    from dataclasses import replace

    import torch.nn.functional as F

    cfg = replace(_SMOKE, hard_rotation=0.0, hard_shift=0.0, hard_scale=0.0, hard_noise=0.0)
    img = torch.arange(64.0).reshape(1, 64) % 17  # values in [0, 16]
    out = _distort(img.numpy(), 2, cfg, torch.Generator().manual_seed(0))
    up = F.interpolate(img.reshape(1, 1, 8, 8) / 16.0, size=(16, 16), mode="bilinear", align_corners=False)
    assert out.shape == (2, 256)
    torch.testing.assert_close(out, up.reshape(1, 256).expand(2, 256), atol=1e-6, rtol=0)


def test_distort_moves_and_noises_each_copy_differently() -> None:
    img = (torch.arange(64.0).reshape(1, 64) % 17).numpy()
    out = _distort(img, 3, _SMOKE, torch.Generator().manual_seed(0))
    assert not torch.allclose(out[0], out[1]) and not torch.allclose(out[1], out[2])
    again = _distort(img, 3, _SMOKE, torch.Generator().manual_seed(0))
    assert torch.equal(out, again)


def test_hard_digits_shapes_standardisation_and_determinism() -> None:
    Xtr, ytr, Xte, yte = _hard_digits(_SMOKE, seed=0)
    n_te = 360 * _SMOKE.hard_test_copies
    assert Xtr.shape == (1437, 256) and Xte.shape == (n_te, 256) and yte.shape == (n_te,)
    assert Xtr.dtype == torch.float32 and set(ytr.tolist()) == set(range(10))
    torch.testing.assert_close(Xtr.mean(0), torch.zeros(256), atol=1e-4, rtol=0)
    torch.testing.assert_close(Xtr.std(0), torch.ones(256), atol=1e-4, rtol=0)
    assert torch.equal(_hard_digits(_SMOKE, seed=0)[0], Xtr)
    assert not torch.equal(_hard_digits(_SMOKE, seed=1)[0], Xtr)
