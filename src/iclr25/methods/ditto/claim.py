"""Claim check of DITTO: a handful of demonstrations plus online DPO against the model's own
samples (pi_0 fixed as reference) beats SFT and the zero-shot model in the user's style.

World: the synthetic style world (``iclr25.common.data.style_world``): a tiny GPT-2 pretrained on
the base mixture (generic style, each user style about 2 %) is aligned to one user from a few
demonstrations on distinct topics, then judged on held-out prompts by the exact likelihood-ratio
judge log p_user(y|x) − log p_base(y|x). Arms: zero-shot, SFT (pi_0, early-stopped), SFT to
convergence, offline DPO, SPIN-like, DITTO, the negative control DITTO-flipped (samples ≻ demos),
and the oracle (samples of the true user style, a ceiling).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

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
from iclr25._core.seeding import numpy_rng
from iclr25.common.data.style_world import (
    AUDIENCES,
    StyleJudge,
    StyleWorld,
    StyleWorldConfig,
    build_style_tokenizer,
)
from iclr25.common.tiny_lm import build_tiny_lm, load_tiny_lm
from iclr25.methods.ditto import Demonstration, DittoConfig, DittoTrainer, win_rate

__all__ = ["CLAIM", "ClaimConfig", "run"]

#: Bump when the pretraining recipe changes, so old cached base models are not reused.
_PRETRAIN_VERSION = 1


@dataclass(frozen=True)
class ClaimConfig:
    """Sizes of the DITTO claim check."""

    world: StyleWorldConfig = param(
        StyleWorldConfig(), doc="the style world", source="deviation: synthetic world"
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
    n_layer: int = param(2, doc="base GPT-2 blocks", source="deviation: spec, 2-4 layers")
    d_model: int = param(64, doc="base GPT-2 width", source="deviation: spec, 64-128 dims")
    pretrain_pairs: int = param(
        20000, doc="base-mixture (prompt, response) pairs", source="deviation: spec, 20k"
    )
    pretrain_epochs: int = param(4, doc="pretraining epochs", source="deviation: sized to the budget")
    pretrain_batch: int = param(64, doc="pretraining batch", source="deviation: tiny-model choice")
    pretrain_lr: float = param(
        3e-3, doc="pretraining AdamW lr (linear decay)", source="deviation: tiny-model choice"
    )
    sft_conv_steps: int = param(
        150, doc="SFT-to-convergence steps (no early stop)", source="deviation: reported arm"
    )
    ditto: DittoConfig = param(
        DittoConfig.cpu_default(),
        doc="DITTO hyperparameters",
        source="deviation: cpu_default, calibrated on the pilot",
    )
    cache: bool = param(True, doc="cache the pretrained base model on disk", source="deviation: speed")


_FULL = ClaimConfig()
_SMOKE = ClaimConfig(
    n_demos=4,
    n_eval_prompts=4,
    eval_samples=3,
    n_layer=1,
    d_model=32,
    pretrain_pairs=4000,
    pretrain_epochs=2,
    pretrain_lr=1e-2,
    sft_conv_steps=20,
    world=StyleWorldConfig(n_users=5),
    ditto=dataclasses.replace(DittoConfig.cpu_default(), max_steps=4, resample_every=2, samples_per_prompt=4),
)


# ---------------------------------------------------------------------------------------------
# base model (pretrained on the base mixture, cached)
# ---------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/iclr25/ditto`` or ``~/.cache/iclr25/ditto``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "iclr25" / "ditto"


def _chat(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": prompt}]


def _pretrain(cfg: ClaimConfig, world: StyleWorld, tok: Any, seed: int, progress: ProgressFn) -> Any:
    """A tiny GPT-2 trained on base-mixture chat texts (loss on every token after the first),
    so it knows the chat template as an instruction-tuned model does."""
    model = build_tiny_lm(
        "gpt2",
        vocab_size=len(tok),
        n_layer=cfg.n_layer,
        n_head=2,
        d_model=cfg.d_model,
        max_positions=64,
        seed=seed,
    )
    rng = numpy_rng(seed, 11)
    corpus = world.base_corpus(cfg.pretrain_pairs, rng)
    rows = []
    for p, y in corpus:
        pi = tok(
            tok.apply_chat_template(_chat(p), tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )
        ri = tok(y, add_special_tokens=False)
        rows.append((pi["input_ids"], ri["input_ids"] + [tok.eos_token_id]))
    width = max(len(a) + len(b) for a, b in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (a, b) in enumerate(rows):
        ids[i, : len(a) + len(b)] = torch.tensor(a + b)
        labels[i, : len(a) + len(b)] = torch.tensor(a + b)
        mask[i, : len(a) + len(b)] = 1
    steps = cfg.pretrain_epochs * (len(rows) // cfg.pretrain_batch)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.pretrain_lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / max(1, steps))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    done = 0
    for _ in range(cfg.pretrain_epochs):
        perm = torch.randperm(len(rows), generator=gen)
        for j in range(len(rows) // cfg.pretrain_batch):
            idx = perm[j * cfg.pretrain_batch : (j + 1) * cfg.pretrain_batch]
            logits = model(input_ids=ids[idx], attention_mask=mask[idx]).logits[:, :-1]  # (b, T-1, V)
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), labels[idx][:, 1:].reshape(-1), ignore_index=-100
            )
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            done += 1
            if done % 50 == 0:
                progress("pretraining the base LM", done, steps)
    return model.eval()


def _base_model(cfg: ClaimConfig, world: StyleWorld, tok: Any, seed: int, progress: ProgressFn) -> Any:
    """The pretrained base LM, from the on-disk cache when present (keyed by config and seed)."""
    spec = {
        "v": _PRETRAIN_VERSION,
        "world": dataclasses.asdict(cfg.world),
        "n_layer": cfg.n_layer,
        "d_model": cfg.d_model,
        "pairs": cfg.pretrain_pairs,
        "epochs": cfg.pretrain_epochs,
        "batch": cfg.pretrain_batch,
        "lr": cfg.pretrain_lr,
        "seed": seed,
        "torch": torch.__version__.split("+")[0],
    }
    key = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]
    path = default_cache_dir() / f"base-{key}"
    if cfg.cache and (path / "config.json").is_file():
        return load_tiny_lm(path)
    model = _pretrain(cfg, world, tok, seed, progress)
    if cfg.cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=path.parent))
            model.save_pretrained(tmp)
            (tmp / "spec.json").write_text(json.dumps(spec, sort_keys=True))
            try:
                os.replace(tmp, path)
            except OSError:  # another process wrote it first
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass
        if (path / "config.json").is_file():
            return load_tiny_lm(path)  # the same weights as a cache hit, so runs agree
    return model


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
    """One seed of the check: pretrain (or load) the base LM, train every arm, judge them."""
    del device  # CPU-sized; the paper-scale path takes any device through the caller's model
    world = StyleWorld(cfg.world)
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

    base = _base_model(cfg, world, tok, seed, progress)
    dcfg = dataclasses.replace(cfg.ditto, seed=seed)
    arms = {
        "ditto": dcfg,
        "ditto_flipped": dcfg.flipped(),
        "offline_dpo": dcfg.offline_dpo(),
        "spin": dcfg.spin(),
        "sft_conv": dcfg.sft_to_convergence(cfg.sft_conv_steps),
    }
    outs: dict[str, list[list[str]]] = {}
    m: dict[str, dict[str, float]] = {a: {} for a in ("zero_shot", "sft", "oracle", *arms)}
    curves: dict[str, list[float]] = {}

    # SFT (pi_0) and zero-shot come from the DITTO trainer itself, before its DPO stage.
    progress("arms", 0, len(arms))
    sft_outs: list[list[str]] = []
    for i, (arm, acfg) in enumerate(arms.items()):
        tr = DittoTrainer(copy.deepcopy(base), tok, demos, acfg)
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

    for arm, o in outs.items():
        m[arm]["win_vs_sft"] = win_rate(judge, eval_prompts, o, outs["sft"])
        m[arm]["win_vs_zero_shot"] = win_rate(judge, eval_prompts, o, outs["zero_shot"])
        m[arm]["well_formed"] = float(
            np.mean([judge.well_formed(p, ys) for p, ys in zip(eval_prompts, o, strict=True)])
        )
        scores = [judge.score(p, y) for p, ys in zip(eval_prompts, o, strict=True) for y in ys]
        finite = [s for s in scores if np.isfinite(s)]
        m[arm]["mean_score"] = float(np.mean(finite)) if finite else -50.0
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
        "zero_shot": "the pretrained base LM (adapters off)",
        "sft": "pi_0: LoRA SFT on the demonstrations, stopped at the first loss below the threshold",
        "sft_conv": "SFT to convergence (no early stop), reported",
        "offline_dpo": "DPO on demos ≻ pi_0 samples drawn once, same steps",
        "spin": "SPIN-like: expert pairs only, reference = policy at the last resample",
        "ditto": "DITTO: expert/replay/inter-model pairs, pi_0 fixed as reference",
        "ditto_flipped": "negative control: DITTO with every preference reversed (samples ≻ demos)",
        "oracle": "samples of the true user style (ceiling)",
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
            0.80,
            name="oracle_ceiling_zero_shot",
            precondition=True,
            explain="Ceiling: samples of the true user style beat the base model's at least 80 % of the "
            "time, the bar of ditto_vs_zero_shot.",
        ),
        value(
            "sft_conv.well_formed",
            ">=",
            0.80,
            name="base_keeps_format",
            precondition=True,
            explain="The base model keeps to the note format when fine-tuned on the demonstrations: SFT "
            "trained to convergence writes at least 80 % well-formed notes, the bar DITTO's own samples "
            "must clear; otherwise no fine-tuned arm can both move the style and stay parseable.",
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
        value(
            "ditto.win_vs_zero_shot",
            ">=",
            0.80,
            name="ditto_vs_zero_shot",
            falsifier="flipped_vs_zero_shot",
            paper="Table 1: DITTO beats zero-shot (77 % average win, not re-checked here)",
            explain="DITTO's samples beat the untuned base model's at least 80 % of the time.",
        ),
        fails(
            value(
                "ditto_flipped.win_vs_zero_shot",
                ">=",
                0.80,
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
    unchecked=(
        "The base model is pretrained to a plateau and shipped, as the paper's Mistral-7B is: here each "
        "seed pretrains a tiny GPT-2 for a fixed budget.",
    ),
    deviations=(
        "Synthetic style world (102 words, 5 slots, 20 topics) and a tiny GPT-2 (2 x 64) pretrained on "
        "its base mixture instead of Mistral-7B on CMCC / CCAT50 emails and articles.",
        "Exact likelihood-ratio judge log p_user − log p_base instead of GPT-4.",
        "Tiny-model DPO lr 3e-4 (paper 1e-6), β 0.1 (paper 0.05), SFT lr 3e-3 with loss bar 0.8 (paper 1.0), "
        "LoRA r 8 on c_attn, c_proj and c_fc (paper: attention projections); set once on the pilot "
        "(user 4, seed 100).",
        "Win rate over every pair of 5 samples per prompt (25 comparisons per prompt, 20 prompts).",
        "No few-shot-prompting baseline: a 100k-parameter LM has no in-context ability.",
    ),
)
