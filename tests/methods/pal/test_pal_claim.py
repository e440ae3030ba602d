"""The claim's report-only rows that hold by construction, and its falsifiers."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.methods.pal import (
    MLPRewardModel,
    PALConfig,
    PALEstimator,
    PerUserLogistic,
    comparison_matrix,
    make_summary_length_world,
)
from iclr25.methods.pal.claim import CLAIM


def _mlp2(d_in: int, d: int) -> int:
    """Parameters of an ``mlp2`` projector: Linear(d_in, d), Linear(d, d), Linear(d, d)."""
    return d_in * d + d + 2 * (d * d + d)


def test_parameter_counts_follow_from_the_architecture() -> None:
    """params_vs_large and params_per_user are arithmetic of the architectures, so they are
    report-only rows of the claim; this pins the arithmetic at the claim's full sizes."""
    cfg = CLAIM.budgets["full"].config
    k, d_in, d, users, hidden = 2, cfg.txt_dim, cfg.txt_d_pref, cfg.txt_n_seen, cfg.mlp_hidden
    rng = np.random.default_rng(0)
    n = 4 * users
    x, y, p = (rng.random((n, d_in)) for _ in range(3))
    lab = rng.integers(0, 2, n)
    ids = [f"s{i % users}" for i in range(n)]
    pal_cfg = PALConfig.cpu_default().replace(k=k, d_in=d_in, d_pref=d, epochs=1, new_user_steps=1)
    pal = PALEstimator.from_config(pal_cfg).fit(comparison_matrix(ids, x, y, p), lab)
    # f and the K prototype maps g_k, the reward scale t, and K logits per seen user.
    assert pal.trainable_parameter_count() == (k + 1) * _mlp2(d_in, d) + 1 + users * k
    mlp = MLPRewardModel(d_in, hidden=hidden, epochs=1).fit(p, x, y, lab, ids)
    assert (
        mlp.trainable_parameter_count()
        == (2 * d_in + users) * hidden + hidden + hidden**2 + hidden + hidden + 1
    )
    assert mlp.trainable_parameter_count() / pal.trainable_parameter_count() >= 10
    # params_vs_encoder: PAL-B-Tiny on MiniLM (384-d) against the encoder's 22,713,216 weights.
    on_minilm = PALEstimator.from_config(pal_cfg).fit(
        comparison_matrix(ids, *(rng.random((n, 384)) for _ in range(3))), lab
    )
    assert on_minilm.trainable_parameter_count() == (k + 1) * _mlp2(384, d) + 1 + users * k
    assert 22_713_216 / on_minilm.trainable_parameter_count() >= 10
    pal.partial_fit_new_users(comparison_matrix(["n0", "n1", "n2"] * 2, x[:6], y[:6], p[:6]), lab[:6])
    assert pal.new_user_trainable_ == 3 * k  # K numbers per new user
    lr = PerUserLogistic().fit(x, y, lab, ids)
    assert lr.parameters_per_user() == d_in + 1


@pytest.mark.parametrize("seed", [0, 1])
def test_text_world_bounds_a_shared_model(seed: int) -> None:
    """txt_heterogeneous is a world property: texts do not depend on the user, so a model that
    ignores the user can do no better than the majority length rule, 0.7 * 0.95 + 0.3 * 0.05."""
    w = make_summary_length_world(n_seen=10, n_minority=3, test_per_user=200, seed=seed)
    long = set(w.long)
    rule = np.array([r in long for r in w.seen_test.right], dtype=int)  # prefer the longer one
    acc = float((rule == np.asarray(w.seen_test.label)).mean())
    assert acc == pytest.approx(0.7 * 0.95 + 0.3 * 0.05, abs=0.04)
    assert max(acc, 1 - acc) <= 0.75


def test_every_gate_names_a_falsifier_and_explains_itself() -> None:
    names = {c.name: c for c in CLAIM.criteria}
    for c in CLAIM.criteria:
        assert c.explain, c.name
        if c.gating and not c.control and not c.precondition:
            assert names[c.falsifier].control, c.name
    report_only = {c.name for c in CLAIM.criteria if not c.gating}
    assert report_only == {
        "ip_unseen_vs_oracle",
        "ip_unseen_vs_unconstrained",
        "ip_unseen_near_seen",
        "oracle_unseen_near_seen",
        "oracle_vs_unconstrained",
        "ip_seen_vs_oracle",
        "ip_new_user_ce",
        "fpw_seen_margin",
        "fpw_unseen_vs_oracle",
        "fpw_drop_n5",
        "default_map_w_recovery",
        "txt_precheck",
        "txt_heterogeneous",
        "params_vs_large",
        "params_per_user",
        "txt_unseen_vs_per_user_lr",
        "txt_unseen_vs_oracle",
        "minilm_precheck",
        "minilm_seen",
        "minilm_unseen_vs_homogeneous",
        "params_vs_encoder",
    }


def test_ideal_point_gates_are_stated_against_oracles() -> None:
    """The few-shot gates of the ideal-point world: PAL's drop from seen users to n = 5 at most
    0.03 beyond the true model's drop, PAL at n = 20 within 0.05 of its seen accuracy, and w*
    recovered within 0.15 (map matching the world) after Hungarian matching; each with a control
    that must miss it, and each with a ceiling or convergence precondition."""
    names = {c.name: c for c in CLAIM.criteria}
    rules = {
        "ip_drop_n5": ("pal.ip_drop_n5", "oracle.ip_drop_n5", 0.03, "ctrl_uniform_w_drop"),
        "ip_unseen_n20_near_seen": ("pal.ip_unseen_n20", "pal.ip_seen", -0.05, "ctrl_uniform_w"),
        "ip_w_recovery": ("pal_fpw.ip_w_mae", None, 0.15, "ctrl_shuffled_users"),
    }
    for name, (a, b, bar, control) in rules.items():
        gate = names[name]
        assert (gate.a, gate.b, gate.threshold, gate.falsifier) == (a, b, bar, control)
        assert gate.gating and not gate.control
        ctrl = names[control]
        assert ctrl.control and ctrl.gating and ctrl.threshold == bar and ctrl.op == gate.op
    # The earlier n = 5 rules stay as report-only rows beside the true model's own numbers, and
    # the absolute n = 5 gap sits next to the seen-user deficit.
    for name in ("ip_unseen_vs_unconstrained", "ip_unseen_near_seen", "ip_unseen_vs_oracle"):
        assert not names[name].gating
    order = [c.name for c in CLAIM.criteria]
    assert order.index("ip_seen_vs_oracle") == order.index("ip_unseen_vs_oracle") + 1
    # Preconditions: the oracle reaches each bar; every gated trained arm plateaued.
    pre = {c.name: c for c in CLAIM.criteria if c.precondition}
    assert (
        pre["ip_ceiling_w_recovery"].a == "oracle.ip_w_mae" and pre["ip_ceiling_w_recovery"].threshold == 0.15
    )
    assert pre["ip_ceiling_few_shot_signal"].threshold == names["ip_drop_n5"].threshold
    converged = {c.a for c in pre.values() if c.convergence}
    assert converged == {
        "pal.ip_val_plateau_gap",
        "pal_fpw.ip_val_plateau_gap",
        "homogeneous.ip_val_plateau_gap",
        "pal.txt_val_plateau_gap",
        "homogeneous.txt_val_plateau_gap",
    }
    assert 20 in CLAIM.budgets["smoke"].config.ip_shots
    with pytest.raises(ValueError, match="20"):
        type(CLAIM.budgets["full"].config)(ip_shots=(2, 5, 10))


def test_unseen_ratio_is_gated_against_the_shared_model() -> None:
    """The unseen-user ratio compares PAL-B with K = 1 (which cannot personalise); its falsifier
    runs the same rule on new users left at uniform weights, and it is the headline."""
    names = {c.name: c for c in CLAIM.criteria}
    gate = names["txt_unseen_vs_homogeneous"]
    assert gate.gating and not gate.control
    assert names[gate.falsifier].control
    assert CLAIM.headline == "txt_unseen_vs_homogeneous"
    assert "txt_unseen_ratio" not in names


def test_text_world_arms_share_one_training_setup() -> None:
    """PAL-B, K = 1, the shuffled control and the unconstrained arm all train with the text-world
    settings (batch 64, lrs 1e-3 / 5e-2, 4 epochs of 400 comparisons per seen user)."""
    cfg = CLAIM.budgets["full"].config
    assert (cfg.txt_train_per_user, cfg.txt_epochs, cfg.txt_batch_size) == (400, 4, 64)
    assert (cfg.txt_lr_projector, cfg.txt_lr_user) == (1e-3, 5e-2)
    with pytest.raises(ValueError, match="txt_lr_user"):
        type(cfg)(txt_lr_user=0.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_group_oracle_scores_one_minus_noise(seed: int) -> None:
    """The group oracle predicts each user's true group, so it is right unless the label flipped."""
    from iclr25.methods.pal.claim import _group_oracle_acc

    w = make_summary_length_world(n_seen=10, n_minority=3, test_per_user=200, noise=0.05, seed=seed)
    assert _group_oracle_acc(w, w.seen_test) == pytest.approx(0.95, abs=0.03)
    assert _group_oracle_acc(w, w.unseen_test) == pytest.approx(0.95, abs=0.03)
    clean = make_summary_length_world(n_seen=4, n_minority=1, test_per_user=20, noise=0.0, seed=seed)
    assert _group_oracle_acc(clean, clean.seen_test) == 1.0


def test_drop_gate_falsifier_misses_on_the_uniform_control() -> None:
    """The drop gate reads the same rule for PAL and for new users left at uniform weights: with
    the control's numbers the rule fails, with a PAL whose drop matches the oracle's it holds."""
    names = {c.name: c for c in CLAIM.criteria}
    gate, ctrl = names["ip_drop_n5"], names["ctrl_uniform_w_drop"]
    m = {
        "pal": {"ip_drop_n5": 0.08},
        "oracle": {"ip_drop_n5": 0.06},
        "uniform_w": {"ip_drop": 0.25},
    }
    assert gate.holds(gate.statistic(m))  # 0.08 - 0.06 <= 0.03
    assert ctrl.statistic(m) > ctrl.threshold  # 0.25 - 0.06 > 0.03: the control misses the bar ...
    assert ctrl.holds(ctrl.statistic(m))  # ... which is what a negative control must do
    m["pal"]["ip_drop_n5"] = 0.25  # a PAL that fits new users no better than uniform weights
    assert not gate.holds(gate.statistic(m))


def test_validation_splits_come_from_their_own_stream() -> None:
    """Asking the worlds for a validation split leaves every other split unchanged."""
    from iclr25.methods.pal import make_ideal_point_world

    kw = {"n_seen": 3, "n_unseen": 2, "n_items": 40, "train_per_user": 4, "seed": 3}
    a, b = make_ideal_point_world(**kw), make_ideal_point_world(**kw, val_per_user=5)
    assert a.seen_val is None and b.seen_val is not None and len(b.seen_val) == 15
    assert a.seen_train == b.seen_train and a.unseen_test == b.unseen_test
    kw = {"n_posts": 20, "n_seen": 3, "n_minority": 1, "train_per_user": 3, "seed": 3}
    c, d = make_summary_length_world(**kw), make_summary_length_world(**kw, val_per_user=4)
    assert c.seen_val is None and d.seen_val is not None and len(d.seen_val) == 12
    assert c.seen_train == d.seen_train and c.unseen_test == d.unseen_test
