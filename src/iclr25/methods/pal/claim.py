"""Claim check of PAL: personalised reward models beat a homogeneous one and adapt to new users
from a handful of comparisons with far fewer parameters.

Check 1 (numeric ideal-point world, PAL-A, stated against the true-model oracle: the drop from
seen users to new users fitted from 5 comparisons against the oracle's own drop, and w* recovery
by Hungarian matching with the map whose structure the world has) and Check 2 (summary-length
text world, PAL-B over a frozen hashed n-gram encoder) run in every seed, plus a small
summary-length world embedded by the packaged MiniLM (cached on disk, reported only). Ceilings and
convergence (a validation curve per trained arm) come first; negative controls: a null world with
one group, new users left at uniform weights (their K weights not fitted), learned weights scored
against other users' w*, and shuffled user ids.
"""

from __future__ import annotations

import copy
import time

import numpy as np

# Loaded at import, before the claim's thread limits apply, so its OpenMP pool is limited too.
import sklearn.linear_model  # noqa: F401

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
from iclr25.methods.pal import (
    CachedEncoder,
    ClaimConfig,
    Comparisons,
    EmbeddedComparisons,
    HashedNgramEncoder,
    LookupEncoder,
    MiniLMEncoder,
    MLPRewardModel,
    PALConfig,
    PALEstimator,
    PerUserLogistic,
    SummaryLengthWorld,
    UnconstrainedIdealPoint,
    comparison_matrix,
    default_cache_dir,
    embed_comparisons,
    first_n_per_user,
    length_probe_accuracy,
    make_ideal_point_world,
    make_summary_length_world,
    weight_recovery_error,
)

__all__ = ["CLAIM", "run"]


def _acc(pred: np.ndarray, d: EmbeddedComparisons) -> float:
    return float((np.asarray(pred) == d.label.cpu().numpy()).mean())


def _X(d: EmbeddedComparisons) -> np.ndarray:
    """The estimator's ``X``: user id, then [prompt |] left | right embeddings per row."""
    prompt = None if d.prompt is None else d.prompt.cpu().numpy()
    return comparison_matrix(d.user_id, d.left.cpu().numpy(), d.right.cpu().numpy(), prompt)


def _y(d: EmbeddedComparisons) -> np.ndarray:
    """The estimator's ``y``: 0 = left preferred, 1 = right preferred."""
    return d.label.cpu().numpy()


def _pal_acc(est: PALEstimator, d: EmbeddedComparisons) -> float:
    return est.score(_X(d), _y(d))


def _named(progress: ProgressFn, stage: str) -> ProgressFn:
    """A progress callback that reports a training loop's epochs under ``stage``."""

    def report(_: str, done: int, total: int) -> None:
        progress(stage, done, total)

    return report


def _fit_unconstrained(
    cfg: ClaimConfig,
    seed: int,
    tr: EmbeddedComparisons,
    variant: str,
    d_in: int,
    d_pref: int,
    epochs: int,
    train: tuple[int, float, float],
    progress: ProgressFn = no_progress,
    device: str = "cpu",
) -> UnconstrainedIdealPoint:
    """The unconstrained ideal-point baseline, trained like PAL on the seen users (on ``device``).

    ``train`` is (batch size, projector lr, user lr), the same as the PAL arms of that world.
    """
    batch_size, lr_projector, lr_user = train
    return UnconstrainedIdealPoint(
        d_in,
        d_pref,
        variant=variant,
        epochs=epochs,
        batch_size=batch_size,
        lr_projector=lr_projector,
        lr_user=lr_user,
        new_user_steps=cfg.new_user_steps,
        random_state=seed,
        device=device,
    ).fit(tr.left, tr.right, tr.label, tr.user_id, progress=progress)


def _check1(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    series: dict[str, Series],
    progress: ProgressFn = no_progress,
    device: str = "cpu",
) -> None:
    """Numeric ideal-point world: PAL-A vs homogeneous, unconstrained, per-user LR, the true-model
    oracle and the f(P)w map; drops from seen to new users; w* recovery; controls."""
    shots = sorted(cfg.ip_shots)

    def world(groups: int | None):
        return make_ideal_point_world(
            n_seen=cfg.ip_n_seen, n_unseen=cfg.ip_n_unseen, n_items=cfg.ip_n_items, d_item=cfg.ip_d_item,
            d_true=cfg.ip_d_true, k_true=cfg.ip_k_true, alpha=cfg.ip_alpha,
            train_per_user=cfg.ip_train_per_user,
            test_per_user=cfg.ip_test_per_user, unseen_train=max(shots), unseen_test=cfg.ip_unseen_test,
            bayes=cfg.ip_bayes, n_groups=groups, proto_scale=cfg.ip_proto_scale,
            val_per_user=cfg.ip_test_per_user if groups is None else 0, seed=seed,
        )  # fmt: skip

    pal_cfg = PALConfig(
        variant="A", k=cfg.ip_k, d_in=cfg.ip_d_item, d_pref=cfg.ip_d_pref, projector="mlp2-gelu-dropout0",
        user_map="f(Pw)", lr_projector=cfg.lr_projector, lr_user=cfg.lr_user, epochs=cfg.ip_epochs,
        batch_size=cfg.batch_size,
        new_user_lr=0.05, new_user_steps=cfg.new_user_steps, seed=seed,
    )  # fmt: skip
    w = world(None)
    assert w.seen_val is not None
    emb = {
        k: embed_comparisons(getattr(w, k), w.encoder, joint=True)
        for k in ("seen_train", "seen_val", "seen_test", "unseen_test")
    }
    tr, val, te, ute = emb["seen_train"], emb["seen_val"], emb["seen_test"], emb["unseen_test"]
    few = {n: first_n_per_user(w.unseen_train, n) for n in shots}
    shot = {n: embed_comparisons(few[n], w.encoder, joint=True) for n in shots}
    m["world"]["ip_bayes"] = w.bayes_accuracy
    m["world"]["ip_mean_user"] = w.mean_user_accuracy
    seen_ids = [f"s{i}" for i in range(cfg.ip_n_seen)]
    unseen_ids = [f"n{i}" for i in range(cfg.ip_n_unseen)]

    # Oracle: the true f*, P* and slope; with the true w*, and with w fitted from the same n
    # comparisons PAL gets (maximum likelihood on the simplex), the ceiling of few-shot fitting.
    curves: dict[str, list[float]] = {"oracle": []}
    m["oracle"]["ip_seen"] = w.true_model_accuracy(w.seen_test)
    m["oracle"]["ip_unseen_true_w"] = w.true_model_accuracy(w.unseen_test)
    for n in shots:
        m["oracle"][f"ip_unseen_n{n}"] = w.true_model_accuracy(w.unseen_test, w.fit_true_weights(few[n]))
        curves["oracle"].append(m["oracle"][f"ip_unseen_n{n}"])
    k_true = w.prototypes.shape[0]
    uniform = {u: np.full(k_true, 1.0 / k_true) for u in unseen_ids}
    m["oracle"]["ip_unseen_uniform"] = w.true_model_accuracy(w.unseen_test, uniform)
    # The true model's own w* recovery from the seen users' training comparisons (the ceiling
    # of the recovery gate: how well 80 comparisons pin w down when everything else is known).
    fitted_seen = w.fit_true_weights(w.seen_train)
    m["oracle"]["ip_w_mae"] = weight_recovery_error(np.stack([fitted_seen[u] for u in seen_ids]), w.w_seen)[0]

    val_curves: dict[str, list[float]] = {}

    def fit_pal(
        k: int, data: EmbeddedComparisons, stage: str, user_map: str = "f(Pw)", eval_on: bool = True
    ) -> PALEstimator:
        est = PALEstimator.from_config(
            pal_cfg.replace(k=k, user_map=user_map), random_state=seed, device=device
        )
        return est.fit(
            _X(data), _y(data), eval_set=(_X(val), _y(val)) if eval_on else None,
            progress=_named(progress, stage),
        )  # fmt: skip

    arms = (("pal", cfg.ip_k, "f(Pw)"), ("homogeneous", 1, "f(Pw)"), ("pal_fpw", cfg.ip_k, "f(P)w"))
    for arm, k, user_map in arms:
        est = fit_pal(k, tr, f"ideal-point world: {arm} (K={k}, {user_map})", user_map)
        m[arm]["ip_seen"] = _pal_acc(est, te)
        # Convergence of the seen-user fit: validation accuracy after every epoch (read only).
        reading = read_curve(range(1, len(est.validation_curve_) + 1), est.validation_curve_)
        m[arm].update(reading.metrics("ip_val_"))
        val_curves[arm] = list(est.validation_curve_)
        losses = ("hinge", "ce") if arm == "pal" else ("hinge",)
        for loss in losses:
            name = arm if loss == "hinge" else "pal_ce"
            curves[name] = []
            for n in shots:
                d = shot[n]
                fitted = copy.deepcopy(est).partial_fit_new_users(_X(d), _y(d), loss=loss)
                m[name][f"ip_unseen_n{n}"] = _pal_acc(fitted, ute)
                curves[name].append(m[name][f"ip_unseen_n{n}"])
                if loss == "hinge" and k > 1 and n == max(shots):
                    m[arm][f"ip_w_mae_unseen_n{n}"] = weight_recovery_error(
                        fitted.user_weights(unseen_ids), w.w_unseen
                    )[0]
        # The drop from seen users to new users fitted from 5 comparisons (the oracle's below).
        m[arm]["ip_drop_n5"] = m[arm]["ip_seen"] - m[arm]["ip_unseen_n5"]
        if k > 1:
            # w* recovery on the seen users, prototypes matched by the Hungarian algorithm.
            learned = est.user_weights(seen_ids)
            m[arm]["ip_w_mae"] = weight_recovery_error(learned, w.w_seen)[0]
            if arm == "pal_fpw":
                # Control: the same learned weights scored against the w* of other users.
                perm = np.random.default_rng([seed, 606]).permutation(cfg.ip_n_seen)
                m["shuffled_users"]["ip_w_mae"] = weight_recovery_error(learned, w.w_seen[perm])[0]
        if arm == "pal":
            d = shot[shots[0]]
            uni = copy.deepcopy(est).partial_fit_new_users(_X(d), _y(d), steps=0, init="uniform")
            m["uniform_w"]["ip_unseen"] = _pal_acc(uni, ute)  # no comparisons used: one value for all n
            m["uniform_w"]["ip_drop"] = m["pal"]["ip_seen"] - m["uniform_w"]["ip_unseen"]
            curves["uniform_w"] = [m["uniform_w"]["ip_unseen"]] * len(shots)
    m["oracle"]["ip_drop_n5"] = m["oracle"]["ip_seen"] - m["oracle"]["ip_unseen_n5"]

    unc = _fit_unconstrained(
        cfg, seed, tr, "A", cfg.ip_d_item, cfg.ip_d_pref, cfg.ip_epochs,
        (cfg.batch_size, cfg.lr_projector, cfg.lr_user), _named(progress, "ideal-point world: unconstrained"),
        device,
    )  # fmt: skip
    m["unconstrained"]["ip_seen"] = _acc(unc.predict(te.left, te.right, te.user_id), te)
    lr = PerUserLogistic().fit(tr.left, tr.right, tr.label, tr.user_id)
    m["per_user_lr"]["ip_seen"] = _acc(lr.predict(te.left, te.right, te.user_id), te)
    curves["unconstrained"], curves["per_user_lr"] = [], []
    for n in shots:
        d = shot[n]
        u = copy.deepcopy(unc).partial_fit_new_users(d.left, d.right, d.label, d.user_id)
        m["unconstrained"][f"ip_unseen_n{n}"] = _acc(u.predict(ute.left, ute.right, ute.user_id), ute)
        p = PerUserLogistic().fit(d.left, d.right, d.label, d.user_id)
        m["per_user_lr"][f"ip_unseen_n{n}"] = _acc(p.predict(ute.left, ute.right, ute.user_id), ute)
        curves["unconstrained"].append(m["unconstrained"][f"ip_unseen_n{n}"])
        curves["per_user_lr"].append(m["per_user_lr"][f"ip_unseen_n{n}"])

    # Negative control: a null world with one group (no heterogeneity to exploit).
    nw = world(1)
    ntr = embed_comparisons(nw.seen_train, nw.encoder, joint=True)
    nte = embed_comparisons(nw.seen_test, nw.encoder, joint=True)
    m["null_world"]["pal_seen"] = _pal_acc(fit_pal(cfg.ip_k, ntr, "null world: pal", eval_on=False), nte)
    m["null_world"]["homogeneous_seen"] = _pal_acc(
        fit_pal(1, ntr, "null world: homogeneous", eval_on=False), nte
    )
    series["unseen_ideal_point"] = Series(
        title="Ideal-point world: unseen users vs training comparisons",
        xlabel="comparisons per unseen user", ylabel="test accuracy", x=[float(n) for n in shots],
        lines={"true-model oracle (w fitted)": curves["oracle"], "PAL-A (K=3, f(Pw))": curves["pal"],
               "PAL-A, new users by CE": curves["pal_ce"], "PAL-A (K=3, f(P)w)": curves["pal_fpw"],
               "homogeneous (K=1)": curves["homogeneous"], "unconstrained a_i": curves["unconstrained"],
               "per-user LR": curves["per_user_lr"], "uniform w (control)": curves["uniform_w"]},
    )  # fmt: skip
    series["seen_fit_ideal_point"] = Series(
        title="Ideal-point world: seen-user validation accuracy per epoch",
        xlabel="epoch", ylabel="validation accuracy", x=[float(e + 1) for e in range(len(val_curves["pal"]))],
        lines={"PAL-A (K=3, f(Pw))": val_curves["pal"], "homogeneous (K=1)": val_curves["homogeneous"],
               "PAL-A (K=3, f(P)w)": val_curves["pal_fpw"]},
    )  # fmt: skip


def _group_oracle_acc(w: SummaryLengthWorld, data: Comparisons) -> float:
    """Accuracy of predicting each user's true group preference (longer or shorter summary)."""
    long = set(w.long)
    right_long = np.array([r in long for r in data.right])
    wants_long = np.array([w.prefers_long[u] for u in data.user_id])
    pred = (right_long == wants_long).astype(int)  # 1 when the preferred summary is on the right
    return float((pred == np.asarray(data.label)).mean())


def _check2(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    series: dict[str, Series],
    progress: ProgressFn = no_progress,
    device: str = "cpu",
) -> None:
    """Summary-length text world: PAL-B vs homogeneous, per-user LR, unconstrained, large MLP."""
    shots = sorted(cfg.txt_shots)
    w = make_summary_length_world(
        n_posts=cfg.txt_n_posts, n_seen=cfg.txt_n_seen, n_minority=round(0.3 * cfg.txt_n_seen),
        train_per_user=cfg.txt_train_per_user, test_per_user=cfg.txt_test_per_user, n_unseen=cfg.txt_n_unseen,
        unseen_train=max(shots), noise=cfg.txt_noise, val_per_user=cfg.txt_test_per_user, seed=seed,
    )  # fmt: skip
    assert w.seen_val is not None
    enc = HashedNgramEncoder(dim=cfg.txt_dim)
    m["world"]["txt_length_probe"] = length_probe_accuracy(enc, w, seed=seed)
    tr = embed_comparisons(w.seen_train, enc, joint=False)
    te = embed_comparisons(w.seen_test, enc, joint=False)
    val = embed_comparisons(w.seen_val, enc, joint=False)
    ute = embed_comparisons(w.unseen_test, enc, joint=False)
    shot = {n: embed_comparisons(first_n_per_user(w.unseen_train, n), enc, joint=False) for n in shots}
    base = PALConfig.cpu_default().replace(
        d_in=cfg.txt_dim,
        d_pref=cfg.txt_d_pref,
        epochs=cfg.txt_epochs,
        batch_size=cfg.txt_batch_size,
        lr_projector=cfg.txt_lr_projector,
        lr_user=cfg.txt_lr_user,
        new_user_steps=cfg.new_user_steps,
        seed=seed,
    )

    def fit(k: int, data: EmbeddedComparisons, stage: str, eval_on: bool = True) -> PALEstimator:
        return PALEstimator.from_config(base.replace(k=k), random_state=seed, device=device).fit(
            _X(data), _y(data), eval_set=(_X(val), _y(val)) if eval_on else None,
            progress=_named(progress, stage),
        )  # fmt: skip

    curves: dict[str, list[float]] = {}
    val_curves: dict[str, list[float]] = {}
    for arm, k in (("pal", 2), ("homogeneous", 1)):
        est = fit(k, tr, f"text world: {arm} (K={k})")
        m[arm]["txt_seen"] = _pal_acc(est, te)
        reading = read_curve(range(1, len(est.validation_curve_) + 1), est.validation_curve_)
        m[arm].update(reading.metrics("txt_val_"))
        val_curves[arm] = list(est.validation_curve_)
        curves[arm] = []
        for n in shots:
            d = shot[n]
            f = copy.deepcopy(est).partial_fit_new_users(_X(d), _y(d))
            m[arm][f"txt_unseen_n{n}"] = _pal_acc(f, ute)
            curves[arm].append(m[arm][f"txt_unseen_n{n}"])
            if arm == "pal":
                m["pal"]["txt_params_per_user"] = float(f.new_user_trainable_ / cfg.txt_n_unseen)
        if arm == "pal":
            m["pal"]["txt_params"] = float(est.trainable_parameter_count())
            d = shot[max(shots)]
            uni = copy.deepcopy(est).partial_fit_new_users(_X(d), _y(d), steps=0, init="uniform")
            m["uniform_w"]["txt_unseen_n10"] = _pal_acc(uni, ute)

    lr = PerUserLogistic().fit(tr.left, tr.right, tr.label, tr.user_id)
    m["per_user_lr"]["txt_seen"] = _acc(lr.predict(te.left, te.right, te.user_id), te)
    curves["per_user_lr"] = []
    for n in shots:
        d = shot[n]
        p = PerUserLogistic().fit(d.left, d.right, d.label, d.user_id)
        m["per_user_lr"][f"txt_unseen_n{n}"] = _acc(p.predict(ute.left, ute.right, ute.user_id), ute)
        curves["per_user_lr"].append(m["per_user_lr"][f"txt_unseen_n{n}"])
    m["per_user_lr"]["txt_params_per_user"] = float(lr.parameters_per_user())

    # Group oracle: every user's true group preference (the world's ceiling up to label noise).
    m["group_oracle"]["txt_seen"] = _group_oracle_acc(w, w.seen_test)
    m["group_oracle"]["txt_unseen"] = _group_oracle_acc(w, w.unseen_test)

    unc = _fit_unconstrained(
        cfg, seed, tr, "B", cfg.txt_dim, cfg.txt_d_pref, cfg.txt_epochs,
        (cfg.txt_batch_size, cfg.txt_lr_projector, cfg.txt_lr_user),
        _named(progress, "text world: unconstrained"), device,
    )  # fmt: skip
    m["unconstrained"]["txt_seen"] = _acc(unc.predict(te.left, te.right, te.user_id), te)
    d = shot[max(shots)]
    u = copy.deepcopy(unc).partial_fit_new_users(d.left, d.right, d.label, d.user_id)
    m["unconstrained"]["txt_unseen_n10"] = _acc(u.predict(ute.left, ute.right, ute.user_id), ute)

    mlp = MLPRewardModel(
        cfg.txt_dim,
        hidden=cfg.mlp_hidden,
        epochs=cfg.mlp_epochs,
        batch_size=cfg.mlp_batch_size,
        random_state=seed,
        device=device,
    )
    mlp.fit(
        tr.prompt, tr.left, tr.right, tr.label, tr.user_id, progress=_named(progress, "text world: large MLP")
    )
    m["mlp_large"]["txt_seen"] = _acc(mlp.predict(te.prompt, te.left, te.right, te.user_id), te)
    m["mlp_large"]["txt_params"] = float(mlp.trainable_parameter_count())

    # Negative control 3: shuffled user ids (the per-user signal is destroyed).
    perm = np.random.default_rng([seed, 404]).permutation(len(tr))
    shuffled = EmbeddedComparisons([tr.user_id[i] for i in perm], tr.prompt, tr.left, tr.right, tr.label)
    m["shuffled_ids"]["txt_seen"] = _pal_acc(fit(2, shuffled, "text world: shuffled ids", eval_on=False), te)
    series["unseen_summary_length"] = Series(
        title="Summary-length world: unseen users vs training comparisons",
        xlabel="comparisons per unseen user", ylabel="test accuracy", x=[float(n) for n in shots],
        lines={"PAL-B (K=2)": curves["pal"], "homogeneous (K=1)": curves["homogeneous"],
               "per-user LR": curves["per_user_lr"]},
    )  # fmt: skip
    series["seen_fit_summary_length"] = Series(
        title="Summary-length world: seen-user validation accuracy per epoch",
        xlabel="epoch", ylabel="validation accuracy", x=[float(e + 1) for e in range(len(val_curves["pal"]))],
        lines={"PAL-B (K=2)": val_curves["pal"], "homogeneous (K=1)": val_curves["homogeneous"]},
    )  # fmt: skip


def _minilm_encoder(device: str = "cpu") -> MiniLMEncoder:
    """The packaged all-MiniLM-L6-v2 on ``device``, loaded without the weight-loading progress bar."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return MiniLMEncoder(device=device)
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def _check_minilm(
    cfg: ClaimConfig,
    seed: int,
    m: dict[str, dict[str, float]],
    notes: list[str],
    progress: ProgressFn = no_progress,
    device: str = "cpu",
) -> None:
    """A small summary-length world embedded with the packaged MiniLM (cached on disk): PAL-B and
    K = 1, reported only. The encoder and the heads run on ``device``."""
    w = make_summary_length_world(
        n_posts=cfg.txt_minilm_posts, n_seen=cfg.txt_n_seen, n_minority=round(0.3 * cfg.txt_n_seen),
        train_per_user=cfg.txt_minilm_train_per_user, test_per_user=cfg.txt_minilm_test_per_user,
        n_unseen=cfg.txt_n_unseen, unseen_train=10, noise=cfg.txt_noise, seed=seed,
    )  # fmt: skip
    progress("text world on MiniLM: encoding", 0, 1)
    start = time.perf_counter()
    base = _minilm_encoder(device)
    m["minilm"]["encoder_params"] = float(sum(p.numel() for p in base.model.parameters()))
    if cfg.txt_minilm_cache == "off":
        enc, where = base, "no disk cache"
    else:
        enc = CachedEncoder(base, cfg.txt_minilm_cache or default_cache_dir())
        where = "the user cache folder" if not cfg.txt_minilm_cache else "the folder txt_minilm_cache"
    # Every text of the world once, in batches (posts of any comparison, both summaries of every post).
    parts = (w.seen_train, w.seen_test, w.unseen_train, w.unseen_test)
    texts = list(dict.fromkeys([t for ds in parts for t in ds.prompt] + w.short + w.long))
    table = LookupEncoder(dict(zip(texts, enc.encode(texts).cpu().numpy(), strict=True)))
    m["minilm"]["encode_s"] = time.perf_counter() - start
    progress("text world on MiniLM: encoding", 1, 1)
    if isinstance(enc, CachedEncoder):
        kept = "" if enc.writable else " (folder not writable: not stored)"
        notes.append(
            f"MiniLM subset: {len(texts)} texts, {enc.hits} read from {where}, {enc.misses} encoded{kept}"
        )
    else:
        notes.append(f"MiniLM subset: {len(texts)} texts encoded, {where}")
    m["minilm"]["txt_length_probe"] = length_probe_accuracy(table, w, seed=seed)
    tr, te, d, ute = (embed_comparisons(ds, table, joint=False) for ds in parts)
    base_cfg = PALConfig.cpu_default().replace(
        d_in=table.dim, d_pref=cfg.txt_d_pref, epochs=cfg.txt_epochs, batch_size=cfg.txt_batch_size,
        lr_projector=cfg.txt_lr_projector, lr_user=cfg.txt_lr_user, new_user_steps=cfg.new_user_steps,
        seed=seed,
    )  # fmt: skip
    for name, k in (("pal", 2), ("homogeneous", 1)):
        est = PALEstimator.from_config(base_cfg.replace(k=k), random_state=seed, device=device).fit(
            _X(tr), _y(tr), progress=_named(progress, f"text world on MiniLM: {name} (K={k})")
        )
        m["minilm"][f"{name}_seen"] = _pal_acc(est, te)
        est.partial_fit_new_users(_X(d), _y(d))
        m["minilm"][f"{name}_unseen_n10"] = _pal_acc(est, ute)
        if name == "pal":
            m["minilm"]["pal_params"] = float(est.trainable_parameter_count())


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """Run both checks for one seed.

    Args:
        config: sizes of both worlds and of the training.
        seed: seeds the worlds, the models and the data order.
        device: where every torch network runs ("cpu", "cuda", ...): the PAL heads, the
            unconstrained and large-MLP baselines and the MiniLM encoder. The worlds, the
            oracle, per-user logistic regression and the metrics stay on the CPU (numpy and
            scikit-learn), and every seeded draw stays on a CPU generator, so a CPU run gives
            the same numbers as before; on a GPU the numbers differ by floating-point rounding.
        progress: called after every training epoch of every model, one stage per model.

    Returns:
        Per-arm accuracies, recovery errors and parameter counts, the two few-shot figures and notes.
    """
    m: dict[str, dict[str, float]] = {a: {} for a in CLAIM.arms}
    series: dict[str, Series] = {}
    _check1(config, seed, m, series, progress, device)
    _check2(config, seed, m, series, progress, device)
    notes = [
        f"ideal-point world: Bayes accuracy {m['world']['ip_bayes']:.3f}, "
        f"shared mean-user ceiling {m['world']['ip_mean_user']:.3f}"
    ]
    _check_minilm(config, seed, m, notes, progress, device)
    return RunResult(metrics=m, series=series, notes=notes)


_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    ip_n_seen=12, ip_n_unseen=6, ip_n_items=300, ip_train_per_user=30, ip_test_per_user=10, ip_unseen_test=10,
    ip_shots=(5, 20), ip_epochs=6, txt_n_posts=80, txt_n_seen=10, txt_train_per_user=15, txt_test_per_user=10,
    txt_n_unseen=4, txt_shots=(10,), txt_dim=64, txt_d_pref=16, txt_epochs=4, mlp_hidden=64,
    txt_minilm_posts=8, txt_minilm_train_per_user=5, txt_minilm_test_per_user=5, txt_minilm_cache="off",
    new_user_steps=20,
)  # fmt: skip

_PAPER_UNSEEN = (
    "abstract: 36% more accurate for unseen users than the previous best (TL;DR); "
    "relative or points not stated"
)
_PAPER_SEEN = "abstract: 1.7% more accurate for seen users than the previous best (TL;DR)"

CLAIM = Claim(
    name="pal",
    paper=PaperRef(
        title="PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment",
        authors="Daiwei Chen, Yi Chen, Aniket Rege, Zhi Wang, Ramya Korlakai Vinayak",
        arxiv="2406.08469",
        code="RamyaLab/pluralistic-alignment",
    ),
    statement=(
        "A mixture of K shared preference prototypes with per-user simplex weights models heterogeneous "
        "preferences: on Reddit TL;DR it is 1.7% more accurate for seen users and 36% for unseen users than "
        "the previous best, with 100x fewer parameters, and new users are fitted from a few comparisons."
    ),
    arms={
        "pal": "PAL-A (K=3, f(Pw)) in the ideal-point world; PAL-B-Tiny (K=2) in the text world",
        "homogeneous": "one Bradley-Terry reward model for everybody (PAL with K=1)",
        "unconstrained": "free per-user ideal point a_i in R^d_pref with shared f (P-RM-style)",
        "per_user_lr": "independent scikit-learn LogisticRegression per user on e(right) - e(left)",
        "mlp_large": "a larger user-conditioned MLP reward model (2 x 1024 hidden) trained with BT",
        "oracle": (
            "ideal-point world: the true model (true f*, prototypes and slope), with the true w* or with "
            "only w fitted by maximum likelihood on the simplex from the same n comparisons"
        ),
        "pal_fpw": "PAL-A (K=3) with the f(P)w map: prototypes projected, then mixed (as the world mixes)",
        "pal_ce": "PAL-A (K=3, f(Pw)) with new users fitted by cross-entropy instead of the hinge loss",
        "group_oracle": "text world: each user's true group preference (longer or shorter), no training",
        "minilm": "a small summary-length world embedded with the packaged MiniLM: PAL-B and K=1",
        "uniform_w": "control: PAL with new users left at uniform weights w = 1/K (not fitted)",
        "shuffled_users": "control: PAL-A's learned seen-user weights scored against other users' w*",
        "null_world": "control: PAL-A and homogeneous in a world with a single preference group",
        "shuffled_ids": "control: PAL-B trained with shuffled user ids",
        "world": "world prechecks: Bayes ceiling of the numeric world, length probe of the text world",
    },
    criteria=(
        # Preconditions: the world's ceilings reach each gate's own bar, so a miss is PAL's.
        diff(
            "oracle.ip_seen",
            "world.ip_mean_user",
            ">=",
            0.15,
            name="ip_ceiling_seen_margin",
            precondition=True,
            explain=(
                "Precondition (ceiling): in the ideal-point world the true model beats the best single "
                "reward model for everybody (the mean user) by ip_seen_margin's 0.15 on seen users."
            ),
        ),
        diff(
            "oracle.ip_unseen_n20",
            "oracle.ip_seen",
            ">=",
            -0.05,
            name="ip_ceiling_n20_near_seen",
            precondition=True,
            explain=(
                "Precondition (ceiling): the true model with w fitted from 20 comparisons per new user "
                "comes within ip_unseen_n20_near_seen's 0.05 of its seen-user accuracy."
            ),
        ),
        diff(
            "oracle.ip_unseen_n5",
            "oracle.ip_unseen_uniform",
            ">=",
            0.03,
            name="ip_ceiling_few_shot_signal",
            precondition=True,
            explain=(
                "Precondition (ceiling of ip_drop_n5): the true model with w fitted from 5 comparisons "
                "beats the true model with uniform w by at least the drop gate's 0.03 tolerance, so 5 "
                "comparisons carry more information than that tolerance can hide."
            ),
        ),
        value(
            "oracle.ip_w_mae",
            "<=",
            0.15,
            name="ip_ceiling_w_recovery",
            precondition=True,
            explain=(
                "Precondition (ceiling of ip_w_recovery): the true model, fitting only each seen user's w "
                "from the same training comparisons, recovers w* within 0.15."
            ),
        ),
        converged(
            "pal",
            0.02,
            metric="ip_val_plateau_gap",
            name="ip_pal_converged",
            explain=(
                "Precondition (convergence): PAL-A's seen-user validation accuracy moved at most 0.02 over "
                "the last fifth of its epochs (validation split of the seen users, read only)."
            ),
        ),
        converged(
            "pal_fpw",
            0.02,
            metric="ip_val_plateau_gap",
            name="ip_pal_fpw_converged",
            explain=(
                "Precondition (convergence): PAL-A with the f(P)w map moved at most 0.02 in seen-user "
                "validation accuracy over the last fifth of its epochs."
            ),
        ),
        converged(
            "homogeneous",
            0.02,
            metric="ip_val_plateau_gap",
            name="ip_homogeneous_converged",
            explain=(
                "Precondition (convergence): the shared model (K = 1) moved at most 0.02 in seen-user "
                "validation accuracy over the last fifth of its epochs in the ideal-point world."
            ),
        ),
        converged(
            "pal",
            0.02,
            metric="txt_val_plateau_gap",
            name="txt_pal_converged",
            explain=(
                "Precondition (convergence): PAL-B's seen-user validation accuracy in the text world moved "
                "at most 0.02 between its last epochs."
            ),
        ),
        converged(
            "homogeneous",
            0.02,
            metric="txt_val_plateau_gap",
            name="txt_homogeneous_converged",
            explain=(
                "Precondition (convergence): the shared model's seen-user validation accuracy in the text "
                "world moved at most 0.02 between its last epochs."
            ),
        ),
        value(
            "group_oracle.txt_seen",
            ">=",
            0.90,
            name="txt_ceiling_seen",
            precondition=True,
            explain=(
                "Precondition (ceiling): in the text world, knowing each seen user's true group predicts "
                "at least txt_seen's 90% of their choices (label noise leaves room)."
            ),
        ),
        value(
            "group_oracle.txt_unseen",
            ">=",
            0.85,
            name="txt_ceiling_unseen",
            precondition=True,
            explain=(
                "Precondition (ceiling): knowing each new user's true group predicts at least "
                "txt_unseen's 85% of their choices."
            ),
        ),
        ratio(
            "group_oracle.txt_unseen",
            "homogeneous.txt_unseen_n10",
            ">=",
            1.2,
            name="txt_ceiling_vs_homogeneous",
            precondition=True,
            explain=(
                "Precondition (ceiling): the group oracle is at least txt_unseen_vs_homogeneous's 1.2 "
                "times as accurate on new users as the shared reward model."
            ),
        ),
        diff(
            "pal.ip_seen",
            "homogeneous.ip_seen",
            ">=",
            0.15,
            name="ip_seen_margin",
            paper=_PAPER_SEEN,
            falsifier="ctrl_null_world",
            explain=(
                "In the ideal-point world, PAL-A predicts seen users' choices at least 0.15 more "
                "accurately than one reward model shared by everybody."
            ),
        ),
        diff(
            "pal.ip_drop_n5",
            "oracle.ip_drop_n5",
            "<=",
            0.03,
            name="ip_drop_n5",
            falsifier="ctrl_uniform_w_drop",
            explain=(
                "PAL-A loses at most 0.03 more accuracy from seen users to new users fitted from 5 "
                "comparisons each than the true model loses from its true w* to w fitted from the same 5 "
                "comparisons (sample efficiency for new users, measured against the world's own drop)."
            ),
        ),
        diff(
            "pal.ip_unseen_n20",
            "pal.ip_seen",
            ">=",
            -0.05,
            name="ip_unseen_n20_near_seen",
            falsifier="ctrl_uniform_w",
            explain=(
                "Fitted from 20 comparisons each, new users are predicted within 0.05 of the accuracy "
                "PAL-A reaches on the users it was trained on."
            ),
        ),
        value(
            "pal_fpw.ip_w_mae",
            "<=",
            0.15,
            name="ip_w_recovery",
            falsifier="ctrl_shuffled_users",
            explain=(
                "With the map that matches the world (f(P)w: prototypes projected, then mixed, as the "
                "world mixes after f*), PAL-A's learned seen-user weights are within 0.15 of the true w* "
                "on average once its prototypes are matched to the true ones (Hungarian matching); random "
                "pairs of Dirichlet(0.3) users are 0.34 apart."
            ),
        ),
        fails(
            diff(
                "null_world.pal_seen",
                "null_world.homogeneous_seen",
                ">=",
                0.15,
                name="ctrl_null_world",
                explain=(
                    "In a world where every user shares one preference, PAL-A must not beat the "
                    "shared model by 0.15: the margin has to come from real heterogeneity."
                ),
            )
        ),
        fails(
            diff(
                "uniform_w.ip_drop",
                "oracle.ip_drop_n5",
                "<=",
                0.03,
                name="ctrl_uniform_w_drop",
                explain=(
                    "New users left at uniform prototype weights (their K weights never fitted) must lose "
                    "more than 0.03 beyond the true model's drop from seen users to 5 comparisons."
                ),
            )
        ),
        fails(
            diff(
                "uniform_w.ip_unseen",
                "pal.ip_seen",
                ">=",
                -0.05,
                name="ctrl_uniform_w",
                explain=(
                    "New users left at uniform prototype weights must fall more than 0.05 below the "
                    "seen-user accuracy."
                ),
            )
        ),
        fails(
            value(
                "shuffled_users.ip_w_mae",
                "<=",
                0.15,
                name="ctrl_shuffled_users",
                explain=(
                    "The same learned weights (f(P)w map) scored against the w* of randomly permuted "
                    "users must miss the 0.15 recovery bar."
                ),
            )
        ),
        diff(
            "pal.ip_unseen_n5",
            "oracle.ip_unseen_n5",
            ">=",
            -0.07,
            name="ip_unseen_vs_oracle",
            gating=False,
            explain=(
                "Fitted from 5 comparisons each, new users are predicted within 0.07 of the true model "
                "with w fitted from the same 5 comparisons (reported only, an earlier gate: most of this "
                "gap is already there on seen users, next row; ip_drop_n5 gates the part due to new users)."
            ),
        ),
        diff(
            "pal.ip_seen",
            "oracle.ip_seen",
            ">=",
            -0.05,
            name="ip_seen_vs_oracle",
            gating=False,
            explain=(
                "PAL-A's seen-user deficit: its seen accuracy against the true model with the true w* "
                "(reported only, beside the n = 5 gap above)."
            ),
        ),
        diff(
            "pal.ip_unseen_n5",
            "unconstrained.ip_unseen_n5",
            ">=",
            0.10,
            name="ip_unseen_vs_unconstrained",
            gating=False,
            paper=_PAPER_UNSEEN,
            explain=(
                "Fitted from 5 comparisons each, new users are predicted at least 0.10 more accurately by "
                "PAL-A than by a free ideal point per user (reported only: an earlier gate, replaced by "
                "the oracle-relative rule; row oracle_vs_unconstrained shows what the true model reaches)."
            ),
        ),
        diff(
            "pal.ip_unseen_n5",
            "pal.ip_seen",
            ">=",
            -0.05,
            name="ip_unseen_near_seen",
            gating=False,
            explain=(
                "Fitted from 5 comparisons each, new users are predicted within 0.05 of PAL-A's seen "
                "accuracy (reported only: an earlier gate; row oracle_unseen_near_seen shows the true "
                "model itself loses about that much from 5 comparisons)."
            ),
        ),
        diff(
            "oracle.ip_unseen_n5",
            "oracle.ip_seen",
            ">=",
            -0.05,
            name="oracle_unseen_near_seen",
            gating=False,
            explain=(
                "The earlier n = 5 rule applied to the true model: with w fitted from 5 comparisons, "
                "within 0.05 of its seen-user accuracy (a world check, reported only)."
            ),
        ),
        diff(
            "oracle.ip_unseen_n5",
            "unconstrained.ip_unseen_n5",
            ">=",
            0.10,
            name="oracle_vs_unconstrained",
            gating=False,
            explain=(
                "The earlier +0.10 rule applied to the true model with w fitted from 5 comparisons "
                "against the free-ideal-point model (a world check, reported only)."
            ),
        ),
        diff(
            "pal_ce.ip_unseen_n5",
            "pal.ip_unseen_n5",
            ">=",
            0.0,
            name="ip_new_user_ce",
            gating=False,
            explain=(
                "Fitting new users' weights by cross-entropy instead of the hinge loss, from the same 5 "
                "comparisons (an option, reported only)."
            ),
        ),
        diff(
            "pal_fpw.ip_seen",
            "homogeneous.ip_seen",
            ">=",
            0.15,
            name="fpw_seen_margin",
            gating=False,
            explain="The f(P)w map on the seen-user margin over the shared model (reported only).",
        ),
        diff(
            "pal_fpw.ip_unseen_n5",
            "oracle.ip_unseen_n5",
            ">=",
            -0.07,
            name="fpw_unseen_vs_oracle",
            gating=False,
            explain=(
                "The f(P)w map on new users from 5 comparisons against the true-model oracle (reported only)."
            ),
        ),
        diff(
            "pal_fpw.ip_drop_n5",
            "oracle.ip_drop_n5",
            "<=",
            0.03,
            name="fpw_drop_n5",
            gating=False,
            explain="The drop rule of ip_drop_n5 for the f(P)w map (reported only).",
        ),
        value(
            "pal.ip_w_mae",
            "<=",
            0.15,
            name="default_map_w_recovery",
            gating=False,
            explain=(
                "w* recovery of the default f(Pw) map, which mixes before the projector while the world "
                "mixes after f*, so its weights are a warped w* (reported only)."
            ),
        ),
        value(
            "world.txt_length_probe",
            ">=",
            0.95,
            name="txt_precheck",
            gating=False,
            explain=(
                "A linear probe tells long from short summaries in the hashed n-gram embedding, "
                "so the text world's preference is visible to the models (a world check, reported only)."
            ),
        ),
        value(
            "pal.txt_seen",
            ">=",
            0.90,
            name="txt_seen",
            falsifier="ctrl_shuffled_ids",
            paper=_PAPER_SEEN,
            explain="In the text world, PAL-B predicts at least 90% of seen users' choices.",
        ),
        value(
            "homogeneous.txt_seen",
            "<=",
            0.75,
            name="txt_heterogeneous",
            gating=False,
            explain=(
                "One reward model for everybody predicts at most 75% of seen users' choices: the "
                "world's users disagree (a world check, reported only; the 70/30 split bounds it "
                "near 0.68)."
            ),
        ),
        value(
            "pal.txt_unseen_n10",
            ">=",
            0.85,
            name="txt_unseen",
            falsifier="ctrl_uniform_w_txt",
            explain=(
                "Fitted from 10 comparisons each, new users' choices are predicted at least 85% of the time."
            ),
        ),
        ratio(
            "pal.txt_unseen_n10",
            "homogeneous.txt_unseen_n10",
            ">=",
            1.2,
            name="txt_unseen_vs_homogeneous",
            paper=_PAPER_UNSEEN,
            falsifier="ctrl_uniform_w_vs_homogeneous",
            explain=(
                "Fitted from 10 comparisons each, new users are predicted at least 1.2 times as "
                "accurately by PAL-B as by one reward model shared by everybody, which cannot personalise."
            ),
        ),
        ratio(
            "pal.txt_unseen_n10",
            "per_user_lr.txt_unseen_n10",
            ">=",
            1.2,
            name="txt_unseen_vs_per_user_lr",
            gating=False,
            explain=(
                "Against per-user logistic regression from the same 10 comparisons (reported only: hashed "
                "n-gram counts make length one linear direction, so that baseline already scores near "
                "0.85-0.90 and even the group oracle is only about 1.1 times it)."
            ),
        ),
        diff(
            "pal.txt_unseen_n10",
            "group_oracle.txt_unseen",
            ">=",
            -0.07,
            name="txt_unseen_vs_oracle",
            gating=False,
            explain=(
                "Fitted from 10 comparisons each, new users are predicted within 0.07 of an oracle that "
                "knows every user's true group (reported only: the oracle bounds the world, not PAL)."
            ),
        ),
        fails(
            value(
                "uniform_w.txt_unseen_n10",
                ">=",
                0.85,
                name="ctrl_uniform_w_txt",
                explain="New users left at uniform prototype weights must predict fewer than 85% of choices.",
            )
        ),
        fails(
            ratio(
                "uniform_w.txt_unseen_n10",
                "homogeneous.txt_unseen_n10",
                ">=",
                1.2,
                name="ctrl_uniform_w_vs_homogeneous",
                explain=(
                    "New users left at uniform prototype weights must not be 1.2 times as accurate "
                    "as the shared reward model."
                ),
            )
        ),
        fails(
            value(
                "shuffled_ids.txt_seen",
                ">=",
                0.90,
                name="ctrl_shuffled_ids",
                explain=(
                    "PAL-B trained with shuffled user ids, so that no user's weights match their "
                    "choices, must predict fewer than 90% of seen users' choices."
                ),
            )
        ),
        ratio(
            "mlp_large.txt_params",
            "pal.txt_params",
            ">=",
            10.0,
            name="params_vs_large",
            paper="abstract: 100x fewer parameters (TL;DR); official README: 20x",
            gating=False,
            explain=(
                "PAL-B trains at least 10 times fewer parameters than the large MLP reward model "
                "(arithmetic of the two architectures, reported only)."
            ),
        ),
        ratio(
            "per_user_lr.txt_params_per_user",
            "pal.txt_params_per_user",
            ">=",
            10.0,
            name="params_per_user",
            gating=False,
            explain=(
                "A new user costs PAL K numbers against d + 1 for per-user logistic regression "
                "(arithmetic, reported only)."
            ),
        ),
        diff(
            "pal.txt_seen",
            "mlp_large.txt_seen",
            ">=",
            -0.05,
            name="similar_accuracy_to_large",
            falsifier="ctrl_shuffled_ids_vs_large",
            explain="On seen users, PAL-B is at most 0.05 less accurate than the large MLP reward model.",
        ),
        fails(
            diff(
                "shuffled_ids.txt_seen",
                "mlp_large.txt_seen",
                ">=",
                -0.05,
                name="ctrl_shuffled_ids_vs_large",
                explain=(
                    "PAL-B trained with shuffled user ids must fall more than 0.05 below the large "
                    "MLP on seen users."
                ),
            )
        ),
        value(
            "minilm.txt_length_probe",
            ">=",
            0.95,
            name="minilm_precheck",
            gating=False,
            explain=(
                "On the packaged MiniLM (unit-norm sentence embeddings), a linear probe tells long from "
                "short summaries (a world check on a small subset, reported only)."
            ),
        ),
        value(
            "minilm.pal_seen",
            ">=",
            0.90,
            name="minilm_seen",
            gating=False,
            explain="On MiniLM embeddings of a small world, PAL-B's seen-user accuracy (reported only).",
        ),
        ratio(
            "minilm.pal_unseen_n10",
            "minilm.homogeneous_unseen_n10",
            ">=",
            1.2,
            name="minilm_unseen_vs_homogeneous",
            gating=False,
            explain=(
                "On MiniLM embeddings of a small world, new users from 10 comparisons: PAL-B against the "
                "shared model (reported only)."
            ),
        ),
        ratio(
            "minilm.encoder_params",
            "minilm.pal_params",
            ">=",
            10.0,
            name="params_vs_encoder",
            paper="abstract: 100x fewer parameters (TL;DR)",
            gating=False,
            explain=(
                "PAL-B-Tiny on MiniLM trains at least 10 times fewer parameters than fine-tuning the "
                "22.7M-parameter encoder would (arithmetic, reported only)."
            ),
        ),
    ),
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=5.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=85.0),
    },
    run_fn=run,
    headline="txt_unseen_vs_homogeneous",
    deviations=(
        "Synthetic worlds replace Reddit TL;DR and Pick-a-Pic: a numeric ideal-point world and a template "
        "'summary length' world with a hashed n-gram encoder; the packaged MiniLM embeds only a small "
        "summary-length world whose rows are reported, not gated.",
        "New users are fitted with full-batch AdamW for a fixed step count (200) at lr 0.05 instead of "
        "20 epochs at 5e-3, because n <= 20 comparisons give too few steps; no test-set model selection.",
        "CPU-sized PAL-A (numeric world): d_pref 16, 40 epochs at batch 256 with lrs 2e-3 / 0.1 (set for "
        "speed from training losses, before any full-budget result); one thread.",
        "Text world: 400 comparisons per seen user, 4 epochs at batch 64 with lrs 1e-3 / 5e-2 for PAL-B, "
        "K = 1, the shuffled-ids control and the unconstrained arm alike (paper: 1 epoch, batch 4, "
        "1e-4 / 5e-3); the earlier 100 comparisons, 30 epochs at batch 256 let PAL-B memorise posts.",
        "The ideal-point few-shot gates are stated against the true-model oracle: PAL-A's drop from seen "
        "users to new users fitted from 5 comparisons is at most 0.03 more than the oracle's drop from its "
        "true w* to w fitted from the same comparisons, and PAL at n = 20 is within 0.05 of its seen "
        "accuracy; the absolute n = 5 gap to the oracle (with the seen-user deficit beside it), the "
        "+0.10-over-unconstrained and n = 5-near-seen rules are reported only.",
        "w* recovery is gated with the f(P)w map, the one whose structure the world has (it mixes the "
        "prototypes after the hidden map f*, as the spec builds it); the default f(Pw) map's recovery, "
        "against a world it does not match, is reported.",
        "The unseen-user ratio is gated against the shared model (K = 1), which cannot personalise; per-user "
        "logistic regression at n = 10 is reported only, since length is one linear direction of hashed "
        "n-gram counts and even a group oracle is only about 1.1 times it.",
        "The parameter-count ratios and the world prechecks are reported, not gated: the counts are "
        "arithmetic of the architectures (unit-tested) and the prechecks test the world.",
        "Both checks run in each of 3 seeds (the spec asks 5 for Check 1).",
        "Not implemented: the unfrozen no-simplex variant, persona/TL;DR adapters, Pick-a-Pic, a trl "
        "RewardTrainer baseline.",
    ),
    unchecked=(
        "the large MLP reward model's seen-user fit has plateaued (similar_accuracy_to_large reads it): "
        "it trains a fixed 15 epochs and keeps no validation curve",
    ),
)
