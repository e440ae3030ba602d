"""Claim check of Wicked Oddities: at an equal low budget inside the target class, poisoning the
least typical target images (kNN typicality in a self-supervised feature space) gives a clearly
higher attack success rate than poisoning random target images, at similar clean accuracy.

Per seed: stratified digits pools (public / victim-train / test), a SimCLR-style encoder trained
on the public pool only, and for each target class in {0, 3, 8} and each trigger (BadNets, Blend)
one victim per selection strategy (random, kNN-hard, kNN-easy, mean-hard, OOD-hard and a
full-knowledge oracle) plus one clean victim; all victims of one (target, seed) share their
initialisation and data order. ASR and CA are averaged over the targets within a seed; the judge
then asks for 2 of 3 seeds. kNN-easy is the negative control (it must not beat random). OOD-hard
is its own part. SIG, the shapes world, the rate sweep and the oracle are reported only.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch
import torch.nn.functional as F

from iclr25._core.claims import (
    Budget,
    Claim,
    Criterion,
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
from iclr25.methods.wicked_oddities import (
    BadNetsTrigger,
    BlendTrigger,
    ClaimConfig,
    HardnessSelector,
    ImagePools,
    PoisonedDataset,
    SIGTrigger,
    SurrogateConfig,
    Trigger,
    VictimConfig,
    attack_success_rate,
    clean_accuracy,
    digits_pools,
    ood_letters,
    poison_budget,
    select_poison,
    shapes_pools,
    train_ood_surrogate,
    train_simclr_encoder,
    train_victim,
)

__all__ = ["CLAIM", "STRATEGIES", "run"]

#: arm -> (selector strategy, mode)
STRATEGIES: dict[str, tuple[str, str]] = {
    "random": ("random", "hard"),
    "knn_hard": ("knn", "hard"),
    "knn_easy": ("knn", "easy"),
    "mean_hard": ("mean", "hard"),
    "ood_hard": ("ood_loss", "hard"),
}


def _trigger(name: str, cfg: ClaimConfig, channels: int, size: int, seed: int) -> Trigger:
    t = cfg.trigger
    if name == "badnets":
        return BadNetsTrigger(t.patch_size, t.patch_offset)
    if name == "blend":
        # the pattern is the attacker's, fixed per seed
        return BlendTrigger.noise((channels, size, size), t.blend_alpha, seed=10_000 + seed)
    if name == "sig":
        return SIGTrigger(t.sig_delta, t.sig_freq)
    raise ValueError(f"unknown trigger {name!r}")


def _budget_frac(cfg: ClaimConfig, trig: str) -> float:
    return cfg.budget_frac_blend if trig == "blend" else cfg.budget_frac_badnets


def _oracle_positions(model: torch.nn.Module, images: torch.Tensor, target: int, budget: int) -> torch.Tensor:
    """Full-knowledge oracle: the target images the clean victim fits worst (highest loss)."""
    with torch.no_grad():
        loss = F.cross_entropy(model(images), torch.full((len(images),), target), reduction="none")
    return select_poison(loss, budget, "hard")


def _attack(
    pools: ImagePools, trig: Trigger, target: int, global_idx: torch.Tensor, vcfg: VictimConfig, vseed: int
) -> tuple[float, float]:
    model = train_victim(
        PoisonedDataset(pools.train, global_idx, trig), vcfg, vseed, num_classes=pools.num_classes
    )
    return attack_success_rate(model, pools.test, trig, target), clean_accuracy(model, pools.test)


def _jaccard(a: torch.Tensor, b: torch.Tensor) -> float:
    sa, sb = set(a.tolist()), set(b.tolist())
    return len(sa & sb) / max(len(sa | sb), 1)


def run(cfg: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress) -> RunResult:
    """One seed of the check (see the module docstring)."""
    del device  # CPU-scale check
    t0 = time.perf_counter()
    arms = ["clean", *STRATEGIES, "oracle"]
    m: dict[str, dict[str, float]] = {a: {} for a in arms}
    notes: list[str] = []
    pools = digits_pools(seed)
    size = pools.public.shape[-1]
    encoder = train_simclr_encoder(pools.public, cfg.surrogate, seed)
    letters = ood_letters(cfg.n_ood_per_class, size, seed=seed)
    x, y = pools.train.images, pools.train.labels
    n_sig = 2 if cfg.sig else 0
    n_sweep = 3 * sum(1 for r in cfg.rate_multipliers if r != 1.0)
    total = len(cfg.targets) * (1 + len(cfg.triggers) * (len(STRATEGIES) + 1) + n_sig) + n_sweep
    done = 0

    def tick(stage: str) -> None:
        nonlocal done
        done += 1
        progress(stage, done, total)

    per: dict[tuple[str, str, str], list[float]] = {}  # (arm, trigger, metric) -> per-target values

    def add(arm: str, trig: str, metric: str, v: float) -> None:
        per.setdefault((arm, trig, metric), []).append(v)

    for target in cfg.targets:
        vseed = 1000 * seed + target  # one init and data order per (target, seed): paired runs
        idx = torch.where(y == target)[0]
        n_t = len(idx)
        k = min(cfg.k, n_t - 1)  # trap 4, explicit
        x_t = x[idx]  # selection sees target-class images only (trap 11)
        ood = train_ood_surrogate(x_t, letters.images, letters.labels, cfg.surrogate, seed=vseed)
        clean = train_victim(pools.train, cfg.victim, vseed, num_classes=pools.num_classes)
        tick("clean victims")
        clean_ca = clean_accuracy(clean, pools.test)
        triggers = list(cfg.triggers) + (["sig"] if cfg.sig else [])
        for trig_name in triggers:
            trig = _trigger(trig_name, cfg, x.shape[1], size, seed)
            frac = _budget_frac(cfg, trig_name)
            add("clean", trig_name, "ca", clean_ca)
            add("clean", trig_name, "asr", attack_success_rate(clean, pools.test, trig, target))
            chosen: dict[str, torch.Tensor] = {}
            hardness: dict[str, torch.Tensor] = {}
            gated = trig_name != "sig"
            for arm, (strategy, mode) in STRATEGIES.items():
                if not gated and arm not in ("random", "knn_hard"):
                    continue
                sel = HardnessSelector(
                    ood if strategy == "ood_loss" else encoder,
                    strategy=strategy,
                    k=k,
                    budget_frac=frac,
                    mode=mode,
                    random_state=vseed,
                ).fit(x_t, idx)
                chosen[arm], hardness[arm] = sel.poison_indices_, sel.hardness_
                asr, ca = _attack(pools, trig, target, sel.poison_indices_, cfg.victim, vseed)
                add(arm, trig_name, "asr", asr)
                add(arm, trig_name, "ca", ca)
                tick(f"victims ({trig_name})")
            if not gated:
                continue
            budget = poison_budget(frac, n_t)
            pos = _oracle_positions(clean, x_t, target, budget)
            asr, ca = _attack(pools, trig, target, idx[pos], cfg.victim, vseed)
            add("oracle", trig_name, "asr", asr)
            add("oracle", trig_name, "ca", ca)
            tick(f"victims ({trig_name})")
            # defence-relevant: who gets selected
            with torch.no_grad():
                loss_t = F.cross_entropy(clean(x_t), torch.full((n_t,), target), reduction="none")
            pos_of = {int(g): i for i, g in enumerate(idx.tolist())}
            for arm in ("random", "knn_hard", "knn_easy", "ood_hard"):
                sel_pos = torch.tensor([pos_of[int(g)] for g in chosen[arm]])
                add(arm, trig_name, "clean_loss", float(loss_t[sel_pos].mean()))
            add("knn_hard", trig_name, "jaccard_ood", _jaccard(chosen["knn_hard"], chosen["ood_hard"]))
            add("knn_hard", trig_name, "jaccard_oracle", _jaccard(chosen["knn_hard"], idx[pos]))
            add("knn_hard", trig_name, "poison_of_target", budget / n_t)
            add("knn_hard", trig_name, "poison_of_train", budget / len(y))
            if trig_name == cfg.triggers[0]:
                notes.append(
                    f"target {target}: n_t={n_t}, k={k}, budget={budget} ({budget / n_t:.3f} of the class, "
                    f"{budget / len(y):.4f} of the training set); kNN-hard global indices "
                    f"{chosen['knn_hard'].tolist()}"
                )
            # ASR against poison rate (figure), one trigger and target
            if trig_name == cfg.sweep_trigger and target == cfg.sweep_target:
                for mult in cfg.rate_multipliers:
                    f_m = min(1.0, frac * mult)
                    for arm in ("random", "knn_hard", "knn_easy"):
                        if mult == 1.0:
                            asr = per[(arm, trig_name, "asr")][-1]
                        else:
                            strategy, mode = STRATEGIES[arm]
                            sel = HardnessSelector(
                                encoder,
                                strategy=strategy,
                                k=k,
                                budget_frac=f_m,
                                mode=mode,
                                random_state=vseed,
                            ).fit(x_t, idx)
                            asr, _ = _attack(pools, trig, target, sel.poison_indices_, cfg.victim, vseed)
                            tick("rate sweep")
                        add(arm, "sweep", f"{mult:g}", asr)

    for (arm, trig_name, metric), vals in per.items():
        if trig_name == "sweep":
            continue
        m[arm][f"{trig_name}_{metric}"] = float(np.mean(vals))
        if metric == "asr":
            for target, v in zip(cfg.targets, vals, strict=True):
                m[arm][f"{trig_name}_asr_t{target}"] = v
    series: dict[str, Series] = {}
    rates = [min(1.0, _budget_frac(cfg, cfg.sweep_trigger) * r) for r in cfg.rate_multipliers]
    series["asr_vs_rate"] = Series(
        title=f"ASR vs poison rate ({cfg.sweep_trigger}, target {cfg.sweep_target})",
        xlabel="poisoned share of the target class",
        ylabel="attack success rate",
        x=rates,
        lines={
            arm: [per[(arm, "sweep", f"{r:g}")][0] for r in cfg.rate_multipliers]
            for arm in ("random", "knn_hard", "knn_easy")
        },
    )
    for trig_name in cfg.triggers:
        series[f"asr_by_target_{trig_name}"] = Series(
            title=f"ASR per target ({trig_name})",
            xlabel="target class",
            ylabel="attack success rate",
            x=[float(t) for t in cfg.targets],
            lines={arm: per[(arm, trig_name, "asr")] for arm in (*STRATEGIES, "oracle")},
            kind="bar",
        )
    if cfg.shapes:
        _shapes(cfg, seed, m)
    m["knn_hard"]["wall_s"] = time.perf_counter() - t0
    return RunResult(metrics=m, series=series, notes=notes)


def _shapes(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]]) -> None:
    """Reported only: BadNets on the shapes world (4 shape classes), target 0, one victim per arm."""
    pools = shapes_pools(seed, cfg.shapes_n_public, cfg.shapes_n_train, cfg.shapes_n_test)
    encoder = train_simclr_encoder(pools.public, cfg.surrogate, seed)
    x, y = pools.train.images, pools.train.labels
    target, vseed = 0, 1000 * seed + 99
    idx = torch.where(y == target)[0]
    k = min(cfg.k, len(idx) - 1)
    trig = _trigger("badnets", cfg, x.shape[1], x.shape[-1], seed)
    clean = train_victim(pools.train, cfg.victim, vseed, num_classes=pools.num_classes)
    m["clean"]["shapes_ca"] = clean_accuracy(clean, pools.test)
    m["clean"]["shapes_asr"] = attack_success_rate(clean, pools.test, trig, target)
    for arm in ("random", "knn_hard", "knn_easy"):
        strategy, mode = STRATEGIES[arm]
        sel = HardnessSelector(
            encoder,
            strategy=strategy,
            k=k,
            budget_frac=cfg.shapes_budget_frac,
            mode=mode,
            random_state=vseed,
        ).fit(x[idx], idx)
        m[arm]["shapes_asr"], m[arm]["shapes_ca"] = _attack(
            pools, trig, target, sel.poison_indices_, cfg.victim, vseed
        )


_FULL = ClaimConfig()
_SMOKE = dataclasses.replace(
    ClaimConfig(),
    targets=(0,),
    rate_multipliers=(1.0, 2.0),
    shapes_n_public=64,
    shapes_n_train=120,
    shapes_n_test=80,
    n_ood_per_class=10,
    surrogate=SurrogateConfig(epochs=2, ood_epochs=5),
    victim=VictimConfig(epochs=4),
)

_MAIN, _OOD = "kNN selection beats random", "OOD selection beats random"


def _criteria() -> tuple[Criterion, ...]:
    out: list[Criterion] = [
        value(
            "clean.badnets_ca",
            ">=",
            0.85,
            name="victim_learns_digits",
            precondition=True,
            explain="Precondition: the clean victim reaches 85 % test accuracy on 16 x 16 digits (it can "
            "learn the world at all).",
        )
    ]
    for t in ("badnets", "blend"):
        label = {"badnets": "BadNets", "blend": "Blend"}[t]
        out += [
            diff(
                f"knn_hard.{t}_asr",
                f"random.{t}_asr",
                ">=",
                0.10,
                name=f"asr_gain_{t}",
                part=_MAIN,
                paper="Tables 2-3: kNN-hard well above random at rate 0.1",
                falsifier=f"ctrl_easy_gain_{t}",
                explain=f"{label}: kNN-hard selection's ASR (mean over targets 0, 3, 8) is at least 10 "
                "points above random selection's at the same budget.",
            ),
            ratio(
                f"knn_hard.{t}_asr",
                f"random.{t}_asr",
                ">=",
                1.25,
                name=f"asr_ratio_{t}",
                part=_MAIN,
                paper="Tables 2-3",
                falsifier=f"ctrl_easy_ratio_{t}",
                explain=f"{label}: kNN-hard's ASR is at least 1.25 times random's.",
            ),
            diff(
                f"knn_hard.{t}_ca",
                f"clean.{t}_ca",
                ">=",
                -0.02,
                name=f"ca_kept_{t}",
                part=_MAIN,
                paper="Tables 2-3: CA within about 1 point of clean",
                falsifier="tests/methods/wicked_oddities/test_wicked_claim.py::test_ca_gate_fails_when_poison_destroys_the_target_class",
                explain=f"{label}: clean accuracy of the kNN-hard victim is at most 2 points below the clean "
                "victim's.",
            ),
            fails(
                diff(
                    f"knn_easy.{t}_asr",
                    f"random.{t}_asr",
                    ">=",
                    0.10,
                    name=f"ctrl_easy_gain_{t}",
                    part=_MAIN,
                    explain=f"{label}: poisoning the most typical images (kNN-easy) does not gain 10 points "
                    "of ASR over random.",
                )
            ),
            fails(
                ratio(
                    f"knn_easy.{t}_asr",
                    f"random.{t}_asr",
                    ">=",
                    1.25,
                    name=f"ctrl_easy_ratio_{t}",
                    part=_MAIN,
                    explain=f"{label}: kNN-easy's ASR is not 1.25 times random's.",
                )
            ),
            fails(
                diff(
                    f"knn_easy.{t}_asr",
                    f"random.{t}_asr",
                    ">",
                    0.02,
                    name=f"ctrl_easy_not_above_{t}",
                    part=_MAIN,
                    explain=f"{label}: kNN-easy's ASR is at most 2 points above random's (else a sign or "
                    "index bug).",
                )
            ),
            diff(
                f"ood_hard.{t}_asr",
                f"random.{t}_asr",
                ">=",
                0.05,
                name=f"ood_gain_{t}",
                part=_OOD,
                paper="Sec. 4: OOD surrogate above random",
                falsifier=f"ctrl_easy_gain_{t}",
                explain=f"{label}: selection by the OOD surrogate's loss gives at least 5 points more ASR "
                "than random.",
            ),
            diff(
                f"knn_hard.{t}_asr",
                f"ood_hard.{t}_asr",
                ">=",
                0.0,
                name=f"knn_vs_ood_{t}",
                gating=False,
                explain=f"Reported only ({label}): kNN-hard's ASR is at least OOD-hard's.",
            ),
            diff(
                f"mean_hard.{t}_asr",
                f"random.{t}_asr",
                ">=",
                0.10,
                name=f"mean_gain_{t}",
                gating=False,
                explain=f"Reported only ({label}): the mean-similarity variant's gain over random.",
            ),
            diff(
                f"oracle.{t}_asr",
                f"random.{t}_asr",
                ">=",
                0.10,
                name=f"oracle_gain_{t}",
                gating=False,
                explain=f"Reported only ({label}): the full-knowledge oracle (highest clean-victim loss) "
                "over random, a ceiling the threat model does not allow.",
            ),
            value(
                f"clean.{t}_asr",
                "<=",
                0.05,
                name=f"clean_flip_{t}",
                gating=False,
                explain=f"Reported only ({label}): the clean victim's trigger flip rate, the ASR floor.",
            ),
            diff(
                f"knn_hard.{t}_clean_loss",
                f"random.{t}_clean_loss",
                ">",
                0.0,
                name=f"selected_are_hard_{t}",
                gating=False,
                explain=f"Reported only ({label}, defence-relevant): the images kNN-hard picks have a higher "
                "loss under the clean victim than random picks.",
            ),
        ]
    out += [
        diff(
            "knn_hard.sig_asr",
            "random.sig_asr",
            ">=",
            0.10,
            name="asr_gain_sig",
            gating=False,
            explain="Reported only: the gain rule with the SIG trigger.",
        ),
        diff(
            "knn_hard.shapes_asr",
            "random.shapes_asr",
            ">=",
            0.10,
            name="asr_gain_shapes",
            gating=False,
            explain="Reported only: the gain rule on the shapes world (BadNets, target 0, 4 shape classes).",
        ),
        diff(
            "knn_easy.shapes_asr",
            "random.shapes_asr",
            "<=",
            0.02,
            name="easy_not_above_shapes",
            gating=False,
            explain="Reported only: kNN-easy is not above random on the shapes world.",
        ),
    ]
    return tuple(out)


CLAIM = Claim(
    name="wicked_oddities",
    paper=PaperRef(
        title="Wicked Oddities: Selectively Poisoning for Effective Clean-Label Backdoor Attacks",
        authors="Quang H. Nguyen, Ngoc-Hieu Nguyen, The-Anh Ta, Thanh Nguyen-Tang, Kok-Seng Wong, "
        "Hoang Thanh-Tung, Khoa D. Doan",
        arxiv="2407.10825",
        code="mail-research/wicked-oddities-backdoor",
    ),
    statement=(
        "With access to target-class data only, poisoning the least typical target images (lowest kNN "
        "similarity in a pretrained self-supervised feature space) gives a clean-label backdoor a much "
        "higher attack success rate than poisoning random target images at the same budget, with "
        "similar clean accuracy; an OOD-surrogate loss also beats random."
    ),
    arms={
        "clean": "victim trained without poison (CA reference, trigger flip-rate floor)",
        "random": "random target images (the paper's baseline)",
        "knn_hard": "least typical target images, kNN on the SimCLR encoder (the method)",
        "knn_easy": "control: most typical target images (the score's sign reversed)",
        "mean_hard": "least similar to the mean feature (variant, reported only)",
        "ood_hard": "highest loss of the target class under a (K+1)-way OOD surrogate",
        "oracle": "full knowledge: highest loss under the clean victim (reported only)",
    },
    criteria=_criteria(),
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=200.0),
    },
    run_fn=run,
    headline="asr_gain_badnets",
    figure="asr_vs_rate",
    deviations=(
        "CPU scale: scikit-learn digits upsampled to 16 x 16 (public 449 / train 898 / test 450, stratified) "
        "instead of CIFAR-10; about 90 images per class, so the budget is a handful of images.",
        "Surrogate: a 3-layer CNN trained with NT-Xent on the public pool (not VICReg ResNet-50 on "
        "ImageNet); k = min(10, n_t - 1) (paper: 50).",
        "OOD surrogate: an MLP on letters A-J from Pillow's built-in font (paper: ResNet-18 on 100 "
        "TinyImageNet classes).",
        "Victim: a 2-conv CNN (8/16 channels), Adam lr 1e-3, wd 5e-4, 30 epochs, batch 64, random 1-px "
        "shift (paper: ResNet-18, SGD, 300 epochs, crop/rotation/flip).",
        "Triggers: BadNets 3 x 3 {0, 1} checkerboard 1 px from the bottom-right corner (official: +-1, "
        "unclipped, 5 px in at 32 px); Blend alpha 0.2 with a seeded noise pattern; SIG delta 0.1, f = 2.",
        "ASR and CA are means over targets 0, 3, 8 inside each seed; the judge then needs 2 of 3 seeds "
        "(the spec pools targets x 5 seeds).",
        "The poison budget was calibrated once with random selection only on seed 100 (README): no budget "
        "of {10, 15, 20, 30} % reached a random ASR of 0.15, so both triggers use 30 % (paper: 10 %).",
    ),
)
