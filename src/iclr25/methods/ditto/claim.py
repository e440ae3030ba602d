"""Claim check of DITTO: a handful of demonstrations plus online DPO against the model's own
samples (pi_0 fixed as reference) beats SFT and the zero-shot model in the user's style.

World: the synthetic style world (``iclr25.common.data.style_world``). The shipped base LM
(``iclr25 pretrain ditto base``: a 4-layer GPT-2 pretrained on the base mixture, generic style with
each user style about 2 %) is aligned to one user from a few demonstrations on distinct topics, then
judged on held-out prompts by the exact likelihood-ratio judge log p_user(y|x) − log p_base(y|x).
Arms: zero-shot, SFT (pi_0, early-stopped), SFT to convergence, offline DPO, SPIN-like, DITTO, the
negative control DITTO-flipped (samples ≻ demos), the oracle (samples of the true user style, a
ceiling) and other users' oracles (how much a judge rewards any non-generic style).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    fails,
    no_progress,
    value,
)
from iclr25._core.config import param
from iclr25._core.pretrained import read_training
from iclr25._core.seeding import numpy_rng
from iclr25.common.data.style_world import (
    AUDIENCES,
    StyleJudge,
    StyleWorld,
    StyleWorldConfig,
    build_style_tokenizer,
)
from iclr25.methods.ditto import BASE_DIR, Demonstration, DittoConfig, DittoTrainer, load_base, win_rate

__all__ = ["CLAIM", "ClaimConfig", "run"]


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the DITTO claim check."""

    base_dir: str = param(
        "",
        doc="folder of the base LM ('' = the shipped one; another from `iclr25 pretrain ditto base`)",
        source="paper: Sec. 5, an instruction-tuned base (Mistral-7B-Instruct)",
    )
    user: int = param(
        -1,
        doc="user style aligned to; -1: claim seed mod 4 (user 4 is the pilot's)",
        source="deviation: users 0-3 for claim seeds, 4 held out for calibration",
    )
    n_demos: int = param(6, doc="demonstrations, on distinct topics", source="deviation: spec, 4-8 demos")
    n_eval_prompts: int = param(
        20, doc="held-out prompts (topics without a demo)", source="deviation: spec, 20"
    )
    eval_samples: int = param(5, doc="samples per held-out prompt and arm", source="deviation: spec, 5")
    sft_conv_steps: int = param(
        150, doc="SFT-to-convergence steps (no early stop)", source="deviation: reported arm"
    )
    ditto: DittoConfig = param(
        DittoConfig.cpu_default(),
        doc="DITTO hyperparameters",
        source="deviation: cpu_default, calibrated on the pilot",
    )


_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    n_demos=4,
    n_eval_prompts=4,
    eval_samples=3,
    sft_conv_steps=10,
    ditto=dataclasses.replace(DittoConfig.cpu_default(), max_steps=4, resample_every=2, samples_per_prompt=4),
)


def _chat(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


def _base(cfg: ClaimConfig) -> tuple[Any, StyleWorld]:
    """The base LM and the world it was pretrained on (from its ``training.json``)."""
    folder = Path(cfg.base_dir) if cfg.base_dir else BASE_DIR
    model = load_base(folder)
    world = StyleWorld(StyleWorldConfig(**read_training(folder)["config"]["world"]))
    return model, world


def _parsed_win(
    judge: StyleJudge, prompts: list[str], a: list[list[str]], b: list[list[str]]
) -> tuple[float, int]:
    """Win rate of ``a`` over ``b`` over the comparisons where both notes parse (ties ½), and how
    many such comparisons there are; 0.5 when there are none (two unparsed notes tie)."""
    total, n = 0.0, 0
    for p, ya, yb in zip(prompts, a, b, strict=True):
        sb = [s for s in (judge.score(p, y) for y in yb) if math.isfinite(s)]
        for sa in (judge.score(p, y) for y in ya):
            if not math.isfinite(sa):
                continue
            for s in sb:
                total += 1.0 if sa > s else 0.5 if sa == s else 0.0
                n += 1
    return (total / n if n else 0.5), n


# ---------------------------------------------------------------------------------------------
# the check
# ---------------------------------------------------------------------------------------------


class _IterationEval:
    """Callback: win rate of the current DITTO policy against SFT after every iteration."""

    def __init__(
        self, prompts: list[str], sft_outs: list[list[str]], judge: StyleJudge, n: int, seed: int
    ) -> None:
        self.prompts, self.sft_outs, self.judge, self.n, self.seed = prompts, sft_outs, judge, n, seed
        self.wins: list[float] = []

    def on_iteration_end(self, trainer: DittoTrainer, iteration: int, step: int) -> None:
        outs = trainer.generate([_chat(p) for p in self.prompts], self.n, seed=self.seed)
        self.wins.append(win_rate(self.judge, self.prompts, outs, self.sft_outs))


def run(cfg: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress) -> RunResult:
    """One seed of the check: load the shipped base LM, train every arm, judge them.

    Args:
        cfg: sizes and DITTO hyperparameters.
        seed: the claim seed (user, demonstrations, prompts, DITTO's draws).
        device: where every arm's LM is trained and sampled ("cpu", "cuda", ...). The seeded
            draws stay on CPU generators whatever the device, and the judge scores decoded text
            on the CPU; another device changes only the float rounding of the LM's arithmetic.
        progress: called as ``progress("arms", done, total)``.
    """
    base, world = _base(cfg)
    tok = build_style_tokenizer(world)
    user = cfg.user if cfg.user >= 0 else seed % 4
    judge = StyleJudge(world, user)
    style = world.user_style(user)
    rng = numpy_rng(seed, 3)

    topics = list(world.topics)
    order = [topics[i] for i in rng.permutation(len(topics))]
    demo_topics, eval_topics = order[: cfg.n_demos], order[cfg.n_demos :]
    demo_prompts = [world.prompt(t, AUDIENCES[int(rng.integers(len(AUDIENCES)))]) for t in demo_topics]
    demos = [Demonstration(_chat(p), world.sample_response(p, style, rng)) for p in demo_prompts]
    eval_prompts = [
        world.prompt(eval_topics[i % len(eval_topics)], AUDIENCES[int(rng.integers(len(AUDIENCES)))])
        for i in range(cfg.n_eval_prompts)
    ]
    eval_chat = [_chat(p) for p in eval_prompts]
    eval_seed = seed * 1000 + 17
    n = cfg.eval_samples

    dcfg = dataclasses.replace(cfg.ditto, seed=seed)
    arms = {
        "ditto": dcfg,
        "ditto_flipped": dcfg.flipped(),
        "offline_dpo": dcfg.offline_dpo(),
        "spin": dcfg.spin(),
        "sft_conv": dcfg.sft_to_convergence(cfg.sft_conv_steps),
    }
    outs: dict[str, list[list[str]]] = {}
    m: dict[str, dict[str, float]] = {a: {} for a in ("zero_shot", "sft", "oracle", "oracle_other", *arms)}
    curves: dict[str, list[float]] = {}

    # SFT (pi_0) and zero-shot come from the DITTO trainer itself, before its DPO stage.
    progress("arms", 0, len(arms))
    sft_outs: list[list[str]] = []
    for i, (arm, acfg) in enumerate(arms.items()):
        tr = DittoTrainer(copy.deepcopy(base), tok, demos, acfg, device=device)
        tr.train_sft()
        if arm == "ditto":
            outs["zero_shot"] = tr.generate(eval_chat, n, adapter="base", seed=eval_seed)
            sft_outs = outs["sft"] = tr.generate(eval_chat, n, adapter="sft", seed=eval_seed)
            m["sft"]["sft_steps"] = float(tr.sft_steps_)
            m["sft"]["sft_final_loss"] = tr.logs.sft[-1]["loss"]
        if arm == "sft_conv":
            outs[arm] = tr.generate(eval_chat, n, adapter="sft", seed=eval_seed)
            m[arm]["sft_final_loss"] = tr.logs.sft[-1]["loss"]
        else:
            cb = _IterationEval(eval_prompts, sft_outs, judge, n, eval_seed)
            tr.callbacks.append(cb)
            tr.train_ditto()
            outs[arm] = tr.generate(eval_chat, n, adapter="ditto", seed=eval_seed)
            if arm == "ditto":  # in-sample check: the demo prompts themselves
                dp = [d.prompt for d in demos]
                plain = [p[0]["content"] for p in dp]
                d_out = tr.generate(dp, n, adapter="ditto", seed=eval_seed + 1)
                s_out = tr.generate(dp, n, adapter="sft", seed=eval_seed + 1)
                m[arm]["train_prompts_win_vs_sft"] = win_rate(judge, plain, d_out, s_out)
            curves[arm] = cb.wins
            m[arm]["final_dpo_loss"] = float(np.mean([r["loss"] for r in tr.logs.ditto[-5:]]))
            m[arm]["pair_accuracy"] = float(np.mean([r["accuracy"] for r in tr.logs.ditto[-5:]]))
        progress("arms", i + 1, len(arms))
    outs["oracle"] = [[world.sample_response(p, style, rng) for _ in range(n)] for p in eval_prompts]
    others = [u for u in range(len(world.users)) if u != user]
    outs["oracle_other"] = [
        [world.sample_response(p, world.user_style(others[(i * n + k) % len(others)]), rng) for k in range(n)]
        for i, p in enumerate(eval_prompts)
    ]

    for arm, o in outs.items():
        m[arm]["win_vs_sft"] = win_rate(judge, eval_prompts, o, outs["sft"])
        m[arm]["win_vs_zero_shot"] = win_rate(judge, eval_prompts, o, outs["zero_shot"])
        m[arm]["well_formed"] = float(
            np.mean([judge.well_formed(p, ys) for p, ys in zip(eval_prompts, o, strict=True)])
        )
        scores = [judge.score(p, y) for p, ys in zip(eval_prompts, o, strict=True) for y in ys]
        finite = [s for s in scores if np.isfinite(s)]
        m[arm]["mean_score"] = float(np.mean(finite)) if finite else -50.0
        m[arm]["win_vs_sft_parsed"], pairs = _parsed_win(judge, eval_prompts, o, outs["sft"])
        m[arm]["parsed_pairs_vs_sft"] = float(pairs)
    for other in ("offline_dpo", "spin", "sft_conv"):
        m["ditto"][f"win_vs_{other}"] = win_rate(judge, eval_prompts, outs["ditto"], outs[other])
    m["ditto"]["growth_it1_to_last"] = curves["ditto"][-1] - curves["ditto"][0]
    for k, w in enumerate(curves["ditto"]):
        m["ditto"][f"win_vs_sft_it{k + 1}"] = w

    iters = list(range(1, len(curves["ditto"]) + 1))
    series = {
        "win_by_iteration": Series(
            title="Win rate against SFT by DITTO iteration",
            xlabel="iteration",
            ylabel="win rate vs SFT",
            x=[float(i) for i in iters],
            lines={
                **{a: curves[a] for a in ("ditto", "ditto_flipped", "spin") if len(curves[a]) == len(iters)},
                "offline DPO (final)": [m["offline_dpo"]["win_vs_sft"]] * len(iters),
                "oracle (true user style)": [m["oracle"]["win_vs_sft"]] * len(iters),
            },
        ),
        "win_vs_sft": Series(
            title="Win rate against SFT by arm",
            xlabel="arm",
            ylabel="win rate vs SFT",
            x=list(range(len(outs))),
            lines={"win vs SFT": [m[a]["win_vs_sft"] for a in outs]},
            kind="bar",
        ),
    }
    notes = [
        f"user {user}; arms in the bar figure, in order: {', '.join(outs)}",
        f"SFT stopped after {int(m['sft']['sft_steps'])} steps",
    ]
    return RunResult(metrics=m, series=series, notes=notes)


_STATEMENT = (
    "With fewer than ten demonstrations, DITTO (limited SFT, then online DPO that ranks the "
    "demonstrations above the model's own samples and later samples above earlier ones, with the "
    "SFT policy as fixed reference) outperforms few-shot prompting, SFT and self-play by 19 points "
    "of GPT-4-judged win rate on average (Table 1)."
)

CLAIM = Claim(
    name="ditto",
    paper=PaperRef(
        title="Aligning Language Models with Demonstrated Feedback",
        authors=(
            "Omar Shaikh, Michelle S. Lam, Joey Hejna, Yijia Shao, Hyundong Cho, Michael S. Bernstein, "
            "Diyi Yang"
        ),
        arxiv="2406.00888",
        code="SALT-NLP/demonstrated-feedback",
    ),
    statement=_STATEMENT,
    arms={
        "zero_shot": "the shipped base LM (adapters off)",
        "sft": "pi_0: LoRA SFT on the demonstrations, stopped at the first loss below the threshold",
        "sft_conv": "SFT to convergence (no early stop), reported",
        "offline_dpo": "DPO on demos ≻ pi_0 samples drawn once, same steps",
        "spin": "SPIN-like: expert pairs only, reference = policy at the last resample",
        "ditto": "DITTO: expert/replay/inter-model pairs, pi_0 fixed as reference",
        "ditto_flipped": "negative control: DITTO with every preference reversed (samples ≻ demos)",
        "oracle": "samples of the true user style (ceiling)",
        "oracle_other": "samples of the other users' styles (what the judge gives any non-generic style)",
    },
    criteria=[
        value(
            "oracle.win_vs_sft",
            ">=",
            0.65,
            name="oracle_ceiling",
            precondition=True,
            explain="Ceiling: samples of the true user style beat SFT's at least 65 % of the time, the "
            "bar of ditto_vs_sft, so the judge can tell the user's style from SFT's.",
        ),
        value(
            "oracle.win_vs_zero_shot",
            ">=",
            0.77,
            name="oracle_ceiling_zero_shot",
            precondition=True,
            explain="Ceiling: samples of the true user style beat the base model's at least 77 % of the "
            "time, the bar of ditto_vs_zero_shot.",
        ),
        value(
            "zero_shot.well_formed",
            ">=",
            0.80,
            name="base_follows_prompt",
            precondition=True,
            explain="The foundation works: the shipped base LM answers the held-out prompts with at least "
            "80 % well-formed notes on the prompt's topic and audience.",
        ),
        value(
            "sft.well_formed",
            ">=",
            0.80,
            name="sft_keeps_format",
            precondition=True,
            explain="The base keeps to the note format when fine-tuned on the demonstrations: pi_0 (SFT) "
            "writes at least 80 % well-formed notes on held-out topics, the bar DITTO's own samples must "
            "clear; otherwise DPO starts from a policy that cannot write the task.",
        ),
        value(
            "ditto.win_vs_sft",
            ">=",
            0.65,
            name="ditto_vs_sft",
            falsifier="flipped_vs_sft",
            paper="abstract: +19 points over SFT, few-shot and self-play on average (≈ pairwise win 0.6-0.7)",
            explain=(
                "DITTO's samples beat SFT's in the user's style on held-out prompts at least 65 % "
                "of the time."
            ),
        ),
        fails(
            value(
                "ditto_flipped.win_vs_sft",
                ">=",
                0.65,
                name="flipped_vs_sft",
                explain="With preferences reversed (samples over demos) the same training must not beat SFT.",
            )
        ),
        fails(
            value(
                "ditto_flipped.win_vs_sft_parsed",
                ">=",
                0.65,
                name="flipped_vs_sft_parsed",
                explain="The reversed control misses because its style moves away from the user's, not "
                "because its notes stop parsing: where both notes parse it still does not beat SFT.",
            )
        ),
        value(
            "ditto.win_vs_zero_shot",
            ">=",
            0.77,
            name="ditto_vs_zero_shot",
            falsifier="flipped_vs_zero_shot",
            paper="Table 1: DITTO's average GPT-4-judged win rate 77.09 % (CMCC 71.67 %, CCAT50 82.50 %)",
            explain="DITTO's samples beat the untuned base model's at least 77 % of the time, the paper's "
            "own average win rate.",
        ),
        fails(
            value(
                "ditto_flipped.win_vs_zero_shot",
                ">=",
                0.77,
                name="flipped_vs_zero_shot",
                explain="The reversed-preference control must not beat the base model by that margin.",
            )
        ),
        value(
            "ditto.well_formed",
            ">=",
            0.80,
            name="well_formed",
            falsifier="tests/methods/ditto/test_ditto_claim.py::test_well_formed_gate_fails_for_an_untrained_model",
            explain="At least 80 % of DITTO's samples are complete, parseable notes.",
        ),
        value(
            "ditto.win_vs_sft_parsed",
            ">=",
            0.65,
            name="ditto_vs_sft_parsed",
            gating=False,
            explain="Reported: DITTO against SFT over the comparisons where both notes parse (style alone).",
        ),
        *(
            value(
                f"{arm}.well_formed",
                ">=",
                0.80,
                name=f"well_formed_{arm}",
                gating=False,
                explain=f"Reported: fraction of {arm}'s samples that parse.",
            )
            for arm in ("sft_conv", "offline_dpo", "spin", "ditto_flipped")
        ),
        value(
            "oracle_other.win_vs_sft",
            "<",
            0.65,
            name="judge_specificity",
            gating=False,
            explain="Reported: notes in the other users' styles beat SFT's less often than the bar, so "
            "the bar is not met by leaving the generic style in any direction.",
        ),
        value(
            "ditto.win_vs_offline_dpo",
            ">=",
            0.55,
            name="vs_offline_dpo",
            gating=False,
            paper="ablations: online resampling beats one round of DPO",
            explain="Reported: DITTO against DPO on one round of pi_0 samples (online data matters).",
        ),
        value(
            "ditto.win_vs_spin",
            ">=",
            0.5,
            name="vs_spin",
            gating=False,
            paper="Table 1: DITTO beats SPIN",
            explain="Reported: DITTO against SPIN-like self-play (moving reference, expert pairs only).",
        ),
        value(
            "ditto.win_vs_sft_conv",
            ">=",
            0.5,
            name="vs_sft_conv",
            gating=False,
            explain="Reported: DITTO against SFT trained to convergence.",
        ),
        value(
            "ditto.growth_it1_to_last",
            ">",
            0.0,
            name="growth",
            gating=False,
            paper="ablations: win rate grows over iterations (+31.5 %, not re-checked here)",
            explain="Reported: the win rate against SFT grows from the first to the last iteration.",
        ),
    ],
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=30.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=250.0),
    },
    run_fn=run,
    headline="ditto_vs_sft",
    figure="win_by_iteration",
    deviations=(
        "Synthetic style world (102 words, 5 slots, 20 topics) and a tiny GPT-2 (4 x 128, 0.8M parameters), "
        "pretrained once on fresh draws of the world's base mixture and shipped "
        "(`iclr25 pretrain ditto base`), instead of Mistral-7B-Instruct on CMCC / CCAT50 emails and "
        "articles.",
        "Exact likelihood-ratio judge log p_user − log p_base instead of GPT-4.",
        "Tiny-model DPO lr 3e-4 (paper 1e-6), β 0.1 (paper 0.05), SFT lr 3e-3 with loss bar 0.8 (paper 1.0), "
        "LoRA r 8 on c_attn, c_proj and c_fc (paper: attention projections); set once on the pilot "
        "(user 4, seed 100).",
        "Win rate over every pair of 5 samples per prompt (25 comparisons per prompt, 20 prompts).",
        "No few-shot-prompting baseline: a 0.8M-parameter LM has no in-context ability.",
    ),
)
