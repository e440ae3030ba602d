"""Attacker trainers: GFlowNet trajectory balance with replay, REINFORCE + KL (+ novelty), MLE.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540). :class:`GFNTrainer` is the paper's Sec. 3
fine-tuning: each step draws ``batch_size`` on-policy attacks (a tempered behaviour policy with
probability ``explore_prob``), scores them with the victim, stores them in the diverse replay
buffer, adds as many replayed attacks (re-scored under the current gamma / T_R schedules, no new
victim queries) and takes one trajectory-balance step on the LoRA adapter and the log Z head.
:class:`ReinforceAttackerTrainer` is the RL baseline: REINFORCE with a leave-one-out baseline on
``r = c(x) - lambda log(pi(x) / p_ref(x))``, optionally with the CRT-lite novelty bonus
(1 - max cosine of bag-of-words to past attacks, plus the share of unseen bigrams).
:func:`mle_finetune` is maximum likelihood on a set of attacks (the SFT stage and smoothing).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from iclr25._core.claims import ProgressFn, no_progress
from iclr25.methods.gfn_redteam.buffer import BufferItem, DiverseReplayBuffer
from iclr25.methods.gfn_redteam.config import GFNRedTeamConfig
from iclr25.methods.gfn_redteam.reward import CompositeLogReward, RewardComponents
from iclr25.methods.gfn_redteam.tb import (
    LogZHead,
    sample_sequences,
    sequence_log_prob,
    trajectory_balance_loss,
    vargrad_loss,
)

__all__ = [
    "AttackPrompt",
    "GFNTrainer",
    "History",
    "ReinforceAttackerTrainer",
    "attach_lora",
    "mle_finetune",
    "model_device",
    "pad_batch",
]


@dataclass(frozen=True)
class AttackPrompt:
    """The meta-prompt and the token conventions every sampler and scorer shares.

    Args:
        prompt_ids: (P,) meta-prompt token ids.
        eos_token_id: end-of-sequence id.
        pad_token_id: padding id.
        banned_token_ids: ids never generated (padding, BOS, unknown).
        decode: token ids (EOS excluded) -> attack text.
    """

    prompt_ids: torch.Tensor
    eos_token_id: int
    pad_token_id: int
    banned_token_ids: tuple[int, ...]
    decode: Callable[[Sequence[int]], str]

    def __post_init__(self) -> None:
        if self.prompt_ids.ndim != 1 or len(self.prompt_ids) == 0:
            raise ValueError("the meta-prompt must be a non-empty 1-d tensor of token ids")

    @classmethod
    def from_tokenizer(cls, tokenizer, meta_prompt: str, *, bos: bool = True) -> AttackPrompt:
        """Build from a Hugging Face tokenizer; bans pad/BOS/unk ids that differ from EOS."""
        if not meta_prompt.strip():
            raise ValueError("the meta-prompt is empty")
        ids = tokenizer(meta_prompt, add_special_tokens=False)["input_ids"]
        if bos and tokenizer.bos_token_id is not None:
            ids = [tokenizer.bos_token_id, *ids]
        eos = tokenizer.eos_token_id
        banned = tuple(
            sorted(
                {
                    i
                    for i in (tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.unk_token_id)
                    if i is not None and i != eos
                }
            )
        )
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        return cls(
            torch.tensor(ids, dtype=torch.long),
            eos,
            pad,
            banned,
            lambda t: tokenizer.decode(list(t), skip_special_tokens=True).strip(),
        )

    def texts(self, tokens: torch.Tensor, mask: torch.Tensor) -> list[str]:
        """Decode a batch of attacks (the EOS and padding dropped)."""
        out = []
        for row, m in zip(tokens.tolist(), mask.tolist(), strict=True):
            out.append(self.decode([t for t, k in zip(row, m, strict=True) if k and t != self.eos_token_id]))
        return out


def pad_batch(
    seqs: Sequence[Sequence[int]], pad_token_id: int, *, device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token sequences into (B, L) tokens and mask, on ``device`` (default CPU)."""
    if not seqs:
        raise ValueError("no sequences to pad")
    L = max(len(s) for s in seqs)
    tokens = torch.full((len(seqs), L), pad_token_id, dtype=torch.long)
    mask = torch.zeros(len(seqs), L)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = 1.0
    return tokens.to(device), mask.to(device)


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter (CPU for a model without parameters)."""
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def _check_generator(generator: torch.Generator, device: torch.device) -> torch.Generator:
    if generator.device.type != device.type:
        raise ValueError(
            f"the generator is on {generator.device} but the model on {device}; "
            "build it as torch.Generator(device=...) on the model's device"
        )
    return generator


def _rows(tokens: torch.Tensor, mask: torch.Tensor) -> list[tuple[int, ...]]:
    return [
        tuple(t for t, k in zip(r, m, strict=True) if k)
        for r, m in zip(tokens.tolist(), mask.tolist(), strict=True)
    ]


def attach_lora(model: nn.Module, *, r: int, alpha: int, dropout: float = 0.0, seed: int = 0) -> nn.Module:
    """Wrap a causal LM with a ``peft`` LoRA adapter on its attention and MLP projections.

    The adapter's random initialisation draws from a local seed (the global RNG is restored), and
    LoRA's zero-initialised B makes the wrapped model start equal to ``model``.
    """
    from peft import LoraConfig, get_peft_model

    kind = getattr(getattr(model, "config", None), "model_type", "")
    if kind == "gpt2":
        targets: list[str] | str = ["c_attn", "c_proj", "c_fc"]
    elif kind in ("llama", "gemma", "gemma2", "mistral", "qwen2"):
        targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    else:
        targets = "all-linear"
    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=targets,
        fan_in_fan_out=kind == "gpt2",
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(model, cfg)


@dataclass
class History:
    """Every training-time attack with its reward components, and the training curves.

    Args:
        tokens: each attack's token ids (EOS included when sampled).
        texts: decoded attacks.
        log_p_ref, log_c, mean_tox: reward components per attack.
        steps: the step each attack was sampled at.
        loss: loss per step.
        log_z: the log Z head's value per step (GFN only).
        queries: victim queries made (attacks sent; each gets ``n_responses`` replies).
    """

    tokens: list[tuple[int, ...]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    log_p_ref: list[float] = field(default_factory=list)
    log_c: list[float] = field(default_factory=list)
    mean_tox: list[float] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    log_z: list[float] = field(default_factory=list)
    queries: int = 0

    def extend(
        self, rows: list[tuple[int, ...]], texts: list[str], comp: RewardComponents, step: int
    ) -> None:
        """Record a scored batch."""
        self.tokens += rows
        self.texts += texts
        self.log_p_ref += comp.log_p_ref.tolist()
        self.log_c += comp.log_c.tolist()
        self.mean_tox += comp.mean_tox.tolist()
        self.steps += [step] * len(rows)
        self.queries += len(rows)


def _optimizer(params: list[dict], cfg: GFNRedTeamConfig, steps: int, warmup: int) -> tuple:
    from transformers import get_linear_schedule_with_warmup

    opt = torch.optim.AdamW(params, weight_decay=cfg.weight_decay)
    sched = get_linear_schedule_with_warmup(opt, warmup, max(steps, 1))
    return opt, sched


class _Base:
    def __init__(
        self,
        policy: nn.Module,
        prompt: AttackPrompt,
        reward: CompositeLogReward,
        config: GFNRedTeamConfig,
        *,
        generator: torch.Generator | None = None,
    ):
        self.policy, self.prompt, self.reward, self.config = policy, prompt, reward, config
        # everything runs on the policy's device: the prompt, the sampler's generator, log Z
        self.device = model_device(policy)
        self.prompt_ids = prompt.prompt_ids.to(self.device)
        self.generator = _check_generator(
            generator or torch.Generator(device=self.device).manual_seed(0), self.device
        )
        self.history = History()
        self._kw = dict(eos_token_id=prompt.eos_token_id, banned_token_ids=prompt.banned_token_ids)

    def _sample(self, n: int, temperature: float):
        self.policy.eval()
        s = sample_sequences(
            self.policy,
            self.prompt_ids,
            n,
            max_len=self.config.max_len,
            temperature=temperature,
            pad_token_id=self.prompt.pad_token_id,
            generator=self.generator,
            **self._kw,
        )
        self.policy.train()
        return s

    def _score(
        self, tokens: torch.Tensor, mask: torch.Tensor, step: int
    ) -> tuple[list[str], RewardComponents]:
        texts = self.prompt.texts(tokens, mask)
        comp = self.reward.components(tokens, mask, texts)
        self.history.extend(_rows(tokens, mask), texts, comp, step)
        return texts, comp

    def train(self, progress: ProgressFn = no_progress, stage: str = "training") -> History:
        """Run ``config.total_steps`` steps; returns the :class:`History`."""
        total = self.config.total_steps
        for step in range(total):
            self.step(step)
            if step % 10 == 0 or step == total - 1:
                progress(stage, step + 1, total)
        self.policy.eval()
        return self.history

    def step(self, step: int) -> float:  # pragma: no cover - overridden
        raise NotImplementedError


class GFNTrainer(_Base):
    """GFlowNet fine-tuning of a LoRA attacker by trajectory balance with a diverse replay buffer.

    Args:
        policy: a ``peft`` causal LM (the SFT attacker with a fresh LoRA adapter); the reference
            prior is the same network with the adapter disabled.
        prompt: the meta-prompt and token conventions.
        reward: the composite log reward.
        config: training values.
        generator: source of all sampling randomness, on the policy's device (default: one seeded
            with 0 there). The policy, the log Z head (moved here) and every batch live on the
            policy's device.
        buffer: the replay buffer (default: one built from the config).
    """

    def __init__(
        self,
        policy: nn.Module,
        prompt: AttackPrompt,
        reward: CompositeLogReward,
        config: GFNRedTeamConfig,
        *,
        generator: torch.Generator | None = None,
        buffer: DiverseReplayBuffer | None = None,
    ):
        super().__init__(policy, prompt, reward, config, generator=generator)
        hidden = int(policy.get_input_embeddings().weight.shape[1])
        self.log_z_head = LogZHead(hidden).to(self.device)
        self.buffer = buffer or DiverseReplayBuffer(
            config.buffer_capacity,
            tol=config.buffer_tol,
            key=config.buffer_key,
            priority=config.buffer_priority,
        )
        params = [p for p in policy.parameters() if p.requires_grad]
        groups = [{"params": params, "lr": config.lr}]
        groups.append({"params": list(self.log_z_head.parameters()), "lr": config.logz_lr or config.lr})
        self.opt, self.sched = _optimizer(groups, config, config.total_steps, config.warmup_steps)
        self._seeded = False

    def _to_buffer(
        self, rows: list[tuple[int, ...]], texts: list[str], comp: RewardComponents, step: int
    ) -> None:
        log_r = self.reward.combine(comp.log_p_ref, comp.log_c, step).tolist()
        for i, row in enumerate(rows):
            self.buffer.add(
                BufferItem(
                    row,
                    texts[i],
                    float(comp.log_p_ref[i]),
                    float(comp.log_c[i]),
                    float(comp.mean_tox[i]),
                    log_r[i],
                )
            )

    def seed_buffer(self) -> None:
        """Seed the buffer with ``seed_batches`` scored batches of the SFT attacker (T = 0.7)."""
        self._seeded = True
        if not self.config.use_buffer:
            return
        for _ in range(self.config.seed_batches):
            off = getattr(self.policy, "disable_adapter", contextlib.nullcontext)
            with off():  # the SFT attacker: the adapter switched off
                s = self._sample(self.config.batch_size, 0.7)
            texts, comp = self._score(s.tokens, s.mask, -1)
            self._to_buffer(_rows(s.tokens, s.mask), texts, comp, 0)

    def step(self, step: int) -> float:
        """One TB step: on-policy half (victim-scored), replayed half (re-scored), one update."""
        if not self._seeded:
            self.seed_buffer()
        cfg, g = self.config, self.generator
        temp = 1.0
        if float(torch.rand((), generator=g, device=g.device)) < cfg.explore_prob:
            lo, hi = cfg.explore_temp
            temp = lo + (hi - lo) * float(torch.rand((), generator=g, device=g.device))
        s = self._sample(cfg.batch_size, temp)
        rows = _rows(s.tokens, s.mask)
        texts, comp = self._score(s.tokens, s.mask, step)
        log_p_ref, log_c = comp.log_p_ref, comp.log_c
        if cfg.use_buffer:
            self._to_buffer(rows, texts, comp, step)
            n_rep = round(cfg.batch_size * cfg.replay_fraction / (1 - cfg.replay_fraction))
            if n_rep > 0:
                items = self.buffer.sample(n_rep, g)
                rows = rows + [it.tokens for it in items]
                dev = log_p_ref.device
                log_p_ref = torch.cat([log_p_ref, torch.tensor([it.log_p_ref for it in items], device=dev)])
                log_c = torch.cat([log_c, torch.tensor([it.log_c for it in items], device=dev)])
        tokens, mask = pad_batch(rows, self.prompt.pad_token_id, device=self.device)
        sum_log_pf, hidden = sequence_log_prob(
            self.policy, self.prompt_ids, tokens, mask, return_hidden=True, **self._kw
        )
        log_r = self.reward.combine(log_p_ref.to(self.device), log_c.to(self.device), step)
        if cfg.loss == "tb":
            log_z = self.log_z_head(hidden, torch.ones(hidden.shape[:2], device=self.device))
            loss = trajectory_balance_loss(log_z, sum_log_pf, log_r)
            self.history.log_z.append(float(log_z.detach().mean()))
        else:
            loss = vargrad_loss(sum_log_pf, log_r)
            self.history.log_z.append(float((log_r - sum_log_pf.detach()).mean()))
        self.opt.zero_grad()
        loss.backward()
        params = [p for grp in self.opt.param_groups for p in grp["params"]]
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        self.opt.step()
        self.sched.step()
        self.history.loss.append(float(loss.detach()))
        return float(loss.detach())


class _Novelty:
    """CRT-lite novelty: 1 - max cosine of bag-of-words to past attacks + share of unseen bigrams."""

    def __init__(self, vocab: int):
        self.vocab = vocab
        self.memory = np.zeros((0, vocab))
        self.bigrams: set[tuple[int, int]] = set()

    def __call__(self, rows: list[tuple[int, ...]]) -> torch.Tensor:
        bows = np.zeros((len(rows), self.vocab))
        for i, r in enumerate(rows):
            np.add.at(bows[i], list(r), 1.0)
        bows /= np.maximum(np.linalg.norm(bows, axis=1, keepdims=True), 1e-12)
        sim = (bows @ self.memory.T).max(1) if len(self.memory) else np.zeros(len(rows))
        fresh = []
        for r in rows:
            grams = set(itertools.pairwise(r))
            fresh.append(len(grams - self.bigrams) / max(len(grams), 1))
        self.memory = np.concatenate([self.memory, bows])[-2000:]
        for r in rows:
            self.bigrams |= set(itertools.pairwise(r))
        return torch.tensor(1.0 - sim + np.array(fresh), dtype=torch.float32)


class ReinforceAttackerTrainer(_Base):
    """REINFORCE with a leave-one-out baseline on r = score(x) - lambda log(pi(x) / p_ref(x)).

    ``score`` is the geometric-mean toxicity c(x) (``"c"``, the red-teaming baseline) or the
    combined log R (``"log_r"``, the exactness control). With ``config.novelty_weight > 0`` the
    CRT-lite novelty bonus is added (Hong et al., 2024, simplified).

    Args:
        policy: a ``peft`` causal LM (reference = adapter disabled).
        prompt: the meta-prompt and token conventions.
        reward: the composite reward (its components; ``combine`` for ``score="log_r"``).
        config: training values (``kl_coef``, ``novelty_weight``, optimiser).
        generator: sampling randomness, on the policy's device (default: one seeded with 0 there).
        score: "c" or "log_r".
    """

    def __init__(
        self,
        policy: nn.Module,
        prompt: AttackPrompt,
        reward: CompositeLogReward,
        config: GFNRedTeamConfig,
        *,
        generator: torch.Generator | None = None,
        score: str = "c",
    ):
        super().__init__(policy, prompt, reward, config, generator=generator)
        if score not in ("c", "log_r"):
            raise ValueError(f"unknown score {score!r}; use 'c' or 'log_r'")
        self.score = score
        params = [p for p in policy.parameters() if p.requires_grad]
        self.opt, self.sched = _optimizer(
            [{"params": params, "lr": config.lr}], config, config.total_steps, config.warmup_steps
        )
        vocab = int(policy.get_input_embeddings().weight.shape[0])
        self.novelty = _Novelty(vocab) if config.novelty_weight > 0 else None

    def step(self, step: int) -> float:
        """One REINFORCE step on ``batch_size`` on-policy attacks (T = 1)."""
        cfg = self.config
        s = self._sample(cfg.batch_size, 1.0)
        _, comp = self._score(s.tokens, s.mask, step)
        sum_log_pf = sequence_log_prob(self.policy, self.prompt_ids, s.tokens, s.mask, **self._kw)
        # the task score: c(x) for red-teaming, or the full log R (the exactness control)
        log_p_ref, log_c = comp.log_p_ref.to(self.device), comp.log_c.to(self.device)
        use_c = self.score == "c"
        r = log_c.exp() if use_c else self.reward.combine(log_p_ref, log_c, step)
        r = r - cfg.kl_coef * (sum_log_pf.detach() - log_p_ref)
        if self.novelty is not None:
            r = r + cfg.novelty_weight * self.novelty(_rows(s.tokens, s.mask)).to(self.device)
        n = len(r)
        adv = r - (r.sum() - r) / max(n - 1, 1)  # leave-one-out baseline
        loss = -(adv.detach() * sum_log_pf).mean()
        self.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(
            [p for p in self.policy.parameters() if p.requires_grad], cfg.grad_clip
        )
        self.opt.step()
        self.sched.step()
        self.history.loss.append(float(loss.detach()))
        return float(loss.detach())


def mle_finetune(
    model: nn.Module,
    prompt: AttackPrompt,
    sequences: Sequence[Sequence[int]],
    *,
    steps: int,
    batch_size: int,
    lr: float,
    warmup_steps: int = 0,
    weight_decay: float = 0.0,
    generator: torch.Generator | None = None,
    copy_model: bool = False,
    progress: ProgressFn = no_progress,
    stage: str = "mle",
) -> tuple[nn.Module, list[float]]:
    """Maximum-likelihood fine-tuning of every parameter on attack sequences (SFT / smoothing).

    The loss is the mean token negative log-likelihood of the attack tokens (EOS included) after
    the meta-prompt, under the same masking as sampling. Weight decay skips biases and norms.

    Args:
        model: the causal LM (trained in place unless ``copy_model``).
        prompt: the meta-prompt and token conventions.
        sequences: token-id sequences (each ending with EOS unless cut at the maximum length).
        steps: optimiser steps.
        batch_size: sequences per step (drawn uniformly with replacement).
        lr: AdamW learning rate (linear warm-up, then linear decay).
        warmup_steps: warm-up steps.
        weight_decay: AdamW weight decay on matrices.
        generator: batch-sampling randomness (any device; batches are built on the model's).
        copy_model: train a deep copy and leave ``model`` untouched.
        progress: progress callback.
        stage: progress stage name.

    Returns:
        The trained model and the loss per step.
    """
    from transformers import get_linear_schedule_with_warmup

    if not sequences:
        raise ValueError("no sequences to fine-tune on")
    if steps < 0 or batch_size < 1:
        raise ValueError("steps must be >= 0 and batch_size >= 1")
    if copy_model:
        model = copy.deepcopy(model)
    device = model_device(model)
    g = generator or torch.Generator().manual_seed(0)  # batch indices only: any device
    prompt_ids = prompt.prompt_ids.to(device)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}], lr=lr
    )
    sched = get_linear_schedule_with_warmup(opt, warmup_steps, max(steps, 1))
    kw = dict(eos_token_id=prompt.eos_token_id, banned_token_ids=prompt.banned_token_ids)
    losses = []
    model.train()
    for step in range(steps):
        idx = torch.randint(0, len(sequences), (batch_size,), generator=g, device=g.device).tolist()
        tokens, mask = pad_batch([sequences[i] for i in idx], prompt.pad_token_id, device=device)
        lp = sequence_log_prob(model, prompt_ids, tokens, mask, **kw)
        loss = -lp.sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if step % 20 == 0 or step == steps - 1:
            progress(stage, step + 1, steps)
    model.eval()
    return model, losses
