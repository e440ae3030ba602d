"""DittoTrainer: limited SFT, then online DPO against the model's own samples with pi_0 fixed.

Implements Algorithm 1 of Shaikh et al., "Aligning Language Models with Demonstrated Feedback"
(ICLR 2025, arXiv:2406.00888): (1) a LoRA adapter ``sft`` is trained on the demonstrations and
stopped early (pi_0); (2) an adapter ``ditto`` starts as a copy of it; (3) every
``resample_every`` steps (and at step 0) ``samples_per_prompt`` samples per demonstration prompt
are drawn from the current policy at temperature 1 and cached; (4) each step draws expert, replay
and inter-model pairs (:func:`~.pairs.build_ditto_pairs`) and takes one DPO step (Eq. 5) with the
frozen ``sft`` adapter as reference. Works with any Hugging Face causal LM and its tokenizer;
chat-format prompts go through the tokenizer's own chat template.

The trainer runs on any device (``device=``); its random draws do not depend on it. LoRA's
initial A matrices are drawn on the CPU, and every sampled token is drawn from a seeded CPU
``torch.Generator`` (the probabilities are computed on the model's device and moved), so the
same seed gives the same draws on a CPU and on a GPU.
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from iclr25.common import rng as trng

from .config import DittoConfig
from .losses import IGNORE_INDEX, dpo_sigmoid_loss, sequence_logprobs, token_logprobs
from .pairs import PreferencePair, SampleCache, build_ditto_pairs, to_trl_rows

__all__ = ["Demonstration", "DittoCallback", "DittoTrainer"]

Prompt = str | list[dict[str, str]]


@dataclass(frozen=True)
class Demonstration:
    """One user demonstration: a prompt (plain text or chat messages) and the user's response."""

    prompt: Prompt
    response: str


class DittoCallback(Protocol):
    """Hooks a trainer calls; implement any subset (missing methods are skipped).

    ``on_resample(trainer, step)`` after each resample; ``on_step_end(trainer, step, logs)`` after
    each DPO step; ``on_iteration_end(trainer, iteration, step)`` after the last step of an
    iteration (before the next resample).
    """


@dataclass
class _Encoded:
    prompt_ids: list[int]
    response_ids: list[int]  # ends with EOS


class _SeededDraw:
    """Logits processor that samples the next token itself, on a CPU generator.

    It applies the sampling warpers transformers would (temperature, then top-k, then top-p,
    each only when it is on, keeping at least one token), draws one token per row from the
    softmax with ``generator`` on the generator's device, and returns scores that are 0 at the
    drawn token and −inf elsewhere. Run under greedy decoding, the argmax then takes the drawn
    token, so no draw touches the global RNG of the model's device. On the CPU this is the same
    draw as ``torch.manual_seed(seed)`` followed by ``generate(do_sample=True)``.
    """

    def __init__(self, generator: torch.Generator, *, temperature: float, top_k: int, top_p: float) -> None:
        from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

        self.generator = generator
        self.warpers: list[Any] = []
        if temperature != 1.0:
            self.warpers.append(TemperatureLogitsWarper(temperature))
        if top_k != 0:
            self.warpers.append(TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
        if top_p < 1.0:
            self.warpers.append(TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        probs = torch.softmax(scores, dim=-1)  # (B, V)
        token = trng.multinomial(probs, 1, generator=self.generator)  # (B, 1), on probs' device
        return torch.full_like(scores, -math.inf).scatter_(-1, token, 0.0)  # (B, V)


@torch.no_grad()
def _seeded_generate(
    model: Any,
    prompt_ids: Sequence[int],
    n: int,
    *,
    seed: int,
    temperature: float,
    top_k: int,
    top_p: float,
    max_new_tokens: int,
    eos_token_id: int,
    pad_token_id: int,
) -> torch.Tensor:
    """``n`` samples of one prompt from ``model.generate``, every token drawn from a CPU
    generator seeded with ``seed`` (see :class:`_SeededDraw`). Shape: (n, prompt + new tokens),
    on the model's device."""
    from transformers import LogitsProcessorList

    device = next(model.parameters()).device
    inp = torch.tensor([list(prompt_ids)] * n, device=device)  # (n, L): one row per sample
    draw = _SeededDraw(torch.Generator().manual_seed(seed), temperature=temperature, top_k=top_k, top_p=top_p)
    return model.generate(
        input_ids=inp,
        attention_mask=torch.ones_like(inp),
        do_sample=False,  # the draw happens in the processor; greedy decoding takes it
        logits_processor=LogitsProcessorList([draw]),
        max_new_tokens=max_new_tokens,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
    )


@dataclass
class _Log:
    sft: list[dict[str, float]] = field(default_factory=list)
    ditto: list[dict[str, float]] = field(default_factory=list)


class DittoTrainer:
    """DITTO on a Hugging Face causal LM with ``peft`` LoRA adapters ``sft`` and ``ditto``.

    Args:
        model: a causal LM (``transformers.PreTrainedModel``); LoRA adapters are injected in place.
        tokenizer: its tokenizer (needs an EOS token; a chat template when prompts are chat messages).
        demonstrations: fewer than about 10 :class:`Demonstration` s (or ``(prompt, response)`` tuples).
        config: hyperparameters (default :meth:`DittoConfig.paper`).
        callbacks: objects with any of the :class:`DittoCallback` hooks.
        device: where the model is trained and sampled (moved there after the LoRA adapters are
            added); ``None`` (default) leaves it where it is. Batches follow the model; the seeded
            draws (LoRA initialisation, pair choices, sampling) stay on the CPU, so a seed gives
            the same draws on every device.

    Raises:
        ValueError: no demonstrations, a non-string or empty prompt, chat prompts without a chat
            template, a demonstration longer than ``max_length`` (or a prompt longer than
            ``max_prompt_length``), or an invalid config.

    Attributes:
        model: the ``peft.PeftModel`` (after construction).
        cache: the :class:`~.pairs.SampleCache` of this trainer.
        sft_steps_: SFT steps taken (after :meth:`train_sft`).
        logs: per-step SFT and DPO logs.

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm, build_word_tokenizer
        >>> tok = build_word_tokenizer(["hi", "there", "note"])
        >>> lm = build_tiny_lm("gpt2", vocab_size=len(tok), n_layer=1, d_model=16, seed=0)
        >>> import dataclasses
        >>> cfg = dataclasses.replace(DittoConfig.cpu_default(), max_steps=2, sft_max_steps=2,
        ...                           samples_per_prompt=2, max_new_tokens=4)
        >>> tr = DittoTrainer(lm, tok, [("note", "hi there")], cfg).train()
        >>> len(tr.logs.ditto)
        2
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        demonstrations: Sequence[Demonstration | tuple[Prompt, str]],
        config: DittoConfig | None = None,
        callbacks: Sequence[Any] = (),
        *,
        device: str | torch.device | None = None,
    ) -> None:
        cfg = config or DittoConfig.paper()
        cfg.validate()
        demos = [d if isinstance(d, Demonstration) else Demonstration(*d) for d in demonstrations]
        if not demos:
            raise ValueError("no demonstrations: DITTO needs at least one (prompt, response) pair")
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no EOS token")
        self.config = cfg
        self.tokenizer = tokenizer
        self.demonstrations = demos
        self.callbacks = list(callbacks)
        self._encoded = [self._encode_demo(i, d) for i, d in enumerate(demos)]
        self.keys: list[int] = list(range(len(demos)))
        self.cache = SampleCache()
        self.logs = _Log()
        self.sft_steps_ = 0
        self._rng = np.random.default_rng([cfg.seed, 1])
        self._gen = torch.Generator().manual_seed(cfg.seed)
        self._ditto_ready = False
        self.model = self._wrap(model)
        if device is not None:
            self.model.to(device)

    # ------------------------------------------------------------------------------------------
    # encoding
    # ------------------------------------------------------------------------------------------

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt: the chat template (with the generation prompt) for messages,
        the plain tokenisation for text. No special tokens are added beyond the template's."""
        tok = self.tokenizer
        if isinstance(prompt, list):
            if not prompt or not all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt):
                raise ValueError("a chat prompt must be a non-empty list of {'role', 'content'} dicts")
            if not getattr(tok, "chat_template", None):
                raise ValueError(
                    "chat-format prompts need a tokenizer with a chat template (tokenizer.chat_template is "
                    "unset); pass plain-text prompts or set a template"
                )
            text = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        elif isinstance(prompt, str):
            if not prompt.strip():
                raise ValueError("empty prompt")
            text = prompt
        else:
            raise ValueError(
                f"a prompt must be a string or a list of chat messages, got {type(prompt).__name__}"
            )
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def _encode_demo(self, i: int, demo: Demonstration) -> _Encoded:
        if not isinstance(demo.response, str) or not demo.response.strip():
            raise ValueError(f"demonstration {i}: the response must be a non-empty string")
        p = self.encode_prompt(demo.prompt)
        r = [
            *self.tokenizer(demo.response, add_special_tokens=False)["input_ids"],
            self.tokenizer.eos_token_id,
        ]
        cfg = self.config
        if len(p) > cfg.max_prompt_length:
            raise ValueError(
                f"demonstration {i}: prompt has {len(p)} tokens > max_prompt_length={cfg.max_prompt_length}"
            )
        if len(p) + len(r) > cfg.max_length:
            raise ValueError(f"demonstration {i}: {len(p) + len(r)} tokens > max_length={cfg.max_length}")
        return _Encoded(p, r)

    # ------------------------------------------------------------------------------------------
    # adapters
    # ------------------------------------------------------------------------------------------

    def _lora_config(self) -> Any:
        from peft import LoraConfig

        c = self.config
        # GPT-2 stores its projections as Conv1D (weight transposed): peft needs fan_in_fan_out.
        fan = getattr(getattr(self, "_base_config", None), "model_type", "") == "gpt2"
        return LoraConfig(
            r=c.lora_r,
            lora_alpha=c.lora_alpha,
            lora_dropout=c.lora_dropout,
            target_modules=list(c.target_modules),
            task_type="CAUSAL_LM",
            fan_in_fan_out=fan,
        )

    def _wrap(self, model: Any) -> Any:
        try:
            from peft import get_peft_model
        except ImportError as err:  # pragma: no cover - the extra is installed in tests
            raise ImportError("DITTO needs peft: pip install 'iclr25[ditto]'") from err
        self._base_config = getattr(model, "config", None)
        # LoRA's A matrices are drawn from the global CPU RNG (peft builds adapters on the CPU and
        # then moves them to the layer's device): draw them from the config seed instead. Only
        # the CPU generator is seeded, so no accelerator's RNG state changes.
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(self.config.seed)
            return get_peft_model(model, self._lora_config(), adapter_name="sft")

    def _copy_adapter(self, src: str, dst: str) -> None:
        """Copy adapter ``src``'s LoRA weights into adapter ``dst`` (created if missing)."""
        if dst not in self.model.peft_config:
            self.model.add_adapter(dst, self._lora_config())
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                if f".{src}." in name:
                    params[name.replace(f".{src}.", f".{dst}.")].copy_(p)

    def adapter_state(self, name: str) -> dict[str, torch.Tensor]:
        """A detached copy of adapter ``name``'s LoRA weights (keys without the adapter name)."""
        return {
            k.replace(f".{name}.", "."): v.detach().clone()
            for k, v in self.model.named_parameters()
            if f".{name}." in k
        }

    def _trainable(self, name: str) -> list[torch.nn.Parameter]:
        self.model.set_adapter(name)
        params = [p for n, p in self.model.named_parameters() if p.requires_grad]
        bad = [n for n, p in self.model.named_parameters() if p.requires_grad and f".{name}." not in n]
        if bad or not params:
            raise RuntimeError(f"adapter {name!r}: unexpected trainable parameters {bad[:3]}")
        return params

    # ------------------------------------------------------------------------------------------
    # batches
    # ------------------------------------------------------------------------------------------

    def _batch(
        self, prompts: Sequence[list[int]], responses: Sequence[Sequence[int]], full_text: bool
    ) -> dict[str, torch.Tensor]:
        """Right-padded batch of prompt + response; labels on the response (or the whole text)."""
        pad = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id
        )
        seqs = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        labels = torch.full((len(seqs), width), IGNORE_INDEX, dtype=torch.long)
        for i, (p, s) in enumerate(zip(prompts, seqs, strict=True)):
            ids[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
            start = 0 if full_text else len(p)
            labels[i, start : len(s)] = ids[i, start : len(s)]
        dev = self.device
        return {"input_ids": ids.to(dev), "attention_mask": mask.to(dev), "labels": labels.to(dev)}

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters (inputs are moved there)."""
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------------------------------
    # stage 1: limited SFT
    # ------------------------------------------------------------------------------------------

    def train_sft(self) -> DittoTrainer:
        """Train adapter ``sft`` on the demonstrations (loss on the full chat text); stop at the
        first logged loss below ``sft_loss_threshold`` or after ``sft_max_steps`` steps."""
        from transformers import get_scheduler

        cfg = self.config
        params = self._trainable("sft")
        opt = torch.optim.AdamW(params, lr=cfg.sft_lr, weight_decay=0.0)
        sched = get_scheduler(
            cfg.sft_scheduler,
            opt,
            num_warmup_steps=math.ceil(cfg.sft_warmup_ratio * cfg.sft_max_steps),
            num_training_steps=max(1, cfg.sft_max_steps),
        )
        bs = min(cfg.sft_batch_size, len(self.keys))
        order: list[int] = []
        self.model.train()
        for step in range(cfg.sft_max_steps):
            if len(order) < bs:
                order += [int(i) for i in self._rng.permutation(len(self.keys))]
            idx, order = order[:bs], order[bs:]
            enc = [self._encoded[i] for i in idx]
            b = self._batch([e.prompt_ids for e in enc], [e.response_ids for e in enc], full_text=True)
            pos = (b["attention_mask"].cumsum(-1) - 1).clamp(min=0)
            logits = self.model(
                input_ids=b["input_ids"], attention_mask=b["attention_mask"], position_ids=pos
            ).logits
            logp, m = token_logprobs(logits, b["labels"])
            loss = -logp.sum() / m.sum()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            opt.step()
            sched.step()
            self.sft_steps_ = step + 1
            self.logs.sft.append({"step": float(step + 1), "loss": float(loss.detach())})
            if float(loss.detach()) < cfg.sft_loss_threshold:
                break
        self.model.eval()
        return self

    # ------------------------------------------------------------------------------------------
    # sampling
    # ------------------------------------------------------------------------------------------

    def _next_seed(self) -> int:
        return int(torch.randint(0, 2**62, (1,), generator=self._gen))

    @torch.no_grad()
    def sample_ids(
        self, prompt_ids: Sequence[int], n: int, *, seed: int, adapter: str | None = None
    ) -> list[tuple[list[int], bool]]:
        """``n`` samples (response ids, truncated) for one prompt, in eval mode, at the config's
        temperature / top-k / top-p. ``adapter=None`` uses the active adapter, ``"base"`` none.

        Every token is drawn from a CPU generator seeded with ``seed``, whatever the model's
        device; the global RNGs are neither read nor changed.

        A finished sample ends with exactly one EOS; a sample that hit ``max_new_tokens`` has none.
        """
        cfg = self.config
        was_training = self.model.training
        active = self.model.active_adapter
        self.model.eval()  # dropout off while sampling
        kw = dict(
            seed=seed,
            temperature=cfg.temperature,
            top_k=cfg.top_k,
            top_p=cfg.top_p,
            max_new_tokens=cfg.max_new_tokens,
            eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id,
        )
        try:
            if adapter == "base":
                with self.model.disable_adapter():
                    out = _seeded_generate(self.model, prompt_ids, n, **kw)
            else:
                if adapter is not None:
                    self.model.set_adapter(adapter)
                out = _seeded_generate(self.model, prompt_ids, n, **kw)
        finally:
            if adapter not in (None, "base"):
                self.model.set_adapter(active)
            self.model.train(was_training)
        eos = self.tokenizer.eos_token_id
        result = []
        for row in out[:, len(prompt_ids) :].cpu().tolist():
            if eos in row:
                result.append((row[: row.index(eos) + 1], False))
            else:
                result.append((row, True))
        return result

    def generate(
        self, prompts: Sequence[Prompt], n: int = 1, *, adapter: str | None = None, seed: int | None = None
    ) -> list[list[str]]:
        """``n`` decoded samples per prompt (special tokens dropped).

        Args:
            prompts: plain-text or chat prompts.
            n: samples per prompt.
            adapter: "sft", "ditto", "base" (adapters off: the zero-shot model) or None (active).
            seed: sampling seed; default: the next draw of the trainer's torch generator.
        """
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        base = self._next_seed() if seed is None else seed
        outs = []
        for i, p in enumerate(prompts):
            ids = self.encode_prompt(p)
            samples = self.sample_ids(ids, n, seed=base + i, adapter=adapter)
            outs.append([self.tokenizer.decode(s, skip_special_tokens=True).strip() for s, _ in samples])
        return outs

    def resample(self, step: int) -> None:
        """Draw ``samples_per_prompt`` samples per demo prompt from the current policy into the cache."""
        for key in self.keys:
            for ids, truncated in self.sample_ids(
                self._encoded[key].prompt_ids, self.config.samples_per_prompt, seed=self._next_seed()
            ):
                self.cache.add(step, key, ids, truncated)
        self._call("on_resample", step)

    # ------------------------------------------------------------------------------------------
    # stage 2: DITTO
    # ------------------------------------------------------------------------------------------

    def pair_logprobs(self, pairs: Sequence[PreferencePair]) -> tuple[torch.Tensor, torch.Tensor]:
        """Summed response log-probs of (chosen, rejected) under the active adapter."""
        prompts = [self._encoded[p.prompt_key].prompt_ids for p in pairs]
        b = self._batch(
            prompts + prompts,
            [p.chosen_ids for p in pairs] + [p.rejected_ids for p in pairs],
            full_text=False,
        )
        lp = sequence_logprobs(self.model, b["input_ids"], b["attention_mask"], b["labels"])
        return lp[: len(pairs)], lp[len(pairs) :]

    def dpo_loss(
        self, pairs: Sequence[PreferencePair], reference: str
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The DPO loss of ``pairs`` for the active (policy) adapter against adapter ``reference``.

        Reference log-probs come under ``no_grad`` in eval mode; the policy adapter is restored.
        """
        policy = self.model.active_adapter
        was_training = self.model.training
        with torch.no_grad():
            self.model.set_adapter(reference)
            self.model.eval()
            ref_c, ref_r = self.pair_logprobs(pairs)
        self.model.set_adapter(policy)
        self.model.train(was_training)
        pi_c, pi_r = self.pair_logprobs(pairs)
        return dpo_sigmoid_loss(pi_c, pi_r, ref_c, ref_r, self.config.beta, self.config.label_smoothing)

    def init_ditto(self) -> None:
        """Create adapter ``ditto`` as a copy of ``sft`` (and ``ref`` for a moving reference)."""
        self._copy_adapter("sft", "ditto")
        if self.config.reference == "previous_iteration":
            self._copy_adapter("sft", "ref")
        self.model.set_adapter("ditto")
        self._ditto_ready = True

    @property
    def reference_adapter(self) -> str:
        """The DPO reference: ``sft`` (pi_0, fixed) or ``ref`` (the policy at the last resample)."""
        return "sft" if self.config.reference == "sft_fixed" else "ref"

    def train_ditto(self) -> DittoTrainer:
        """The DPO stage: ``max_steps`` steps, resampling at step 0 and every ``resample_every``."""
        from transformers import get_scheduler

        cfg = self.config
        if not self._ditto_ready:
            self.init_ditto()
        if cfg.max_steps == 0:
            return self
        params = self._trainable("ditto")
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
        sched = get_scheduler(
            cfg.lr_scheduler,
            opt,
            num_warmup_steps=math.ceil(cfg.warmup_ratio * cfg.max_steps),
            num_training_steps=cfg.max_steps,
        )
        demos = {k: self._encoded[k].response_ids for k in self.keys}
        bp = min(cfg.batch_prompts, len(self.keys))
        iteration = 0
        for step in range(cfg.max_steps):
            if step % cfg.resample_every == 0:
                if cfg.reference == "previous_iteration" and step > 0:
                    self._copy_adapter("ditto", "ref")
                    self.model.set_adapter("ditto")
                self.resample(step)
                iteration += 1
            # The official trainer scores the policy with dropout off, as the reference is, so
            # ditto = sft gives equal log-ratios and the first loss is exactly log 2.
            self.model.train(not cfg.disable_dropout)
            batch = [self.keys[int(i)] for i in self._rng.choice(len(self.keys), size=bp, replace=False)]
            pairs = build_ditto_pairs(batch, demos, self.cache, cfg, self._rng)
            if cfg.flip_preferences:
                pairs = [p.flipped() for p in pairs]
            loss, rc, rr = self.dpo_loss(pairs, self.reference_adapter)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
            opt.step()
            sched.step()
            logs = {
                "step": float(step + 1),
                "loss": float(loss.detach()),
                "margin": float((rc - rr).mean()),
                "chosen_reward": float(rc.mean()),
                "rejected_reward": float(rr.mean()),
                "accuracy": float((rc > rr).float().mean()),
                "iteration": float(iteration),
                **{
                    f"n_{k}": float(sum(p.kind == k for p in pairs))
                    for k in ("expert", "replay", "intermodel")
                },
            }
            self.logs.ditto.append(logs)
            self._call("on_step_end", step + 1, logs)
            if (step + 1) % cfg.resample_every == 0 or step + 1 == cfg.max_steps:
                self.model.eval()
                self._call("on_iteration_end", iteration, step + 1)
        self.model.eval()
        return self

    def train(self) -> DittoTrainer:
        """:meth:`train_sft`, then :meth:`train_ditto`."""
        return self.train_sft().train_ditto()

    def _call(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                fn(self, *args)

    # ------------------------------------------------------------------------------------------
    # export
    # ------------------------------------------------------------------------------------------

    def trl_rows(self, pairs: Sequence[PreferencePair]) -> list[dict[str, str]]:
        """Pairs in TRL's ``{"prompt", "chosen", "rejected"}`` schema (prompt with chat template).

        This is the bridge to ``trl``: the trainer runs its own DPO loop (the loss is a few lines
        and the loop needs named adapters, a frozen pi_0 and resampling inside training), and
        these rows feed ``trl.DPOTrainer`` for one offline round on DITTO's pairs, e.g.
        ``datasets.Dataset.from_list(trainer.trl_rows(pairs))``.
        """
        prompts: dict[Hashable, str] = {
            k: self.tokenizer.decode(self._encoded[k].prompt_ids) for k in self.keys
        }
        return to_trl_rows(pairs, prompts, lambda ids: self.tokenizer.decode(ids))

    def save_pretrained(
        self, path: str | os.PathLike[str], adapters: Sequence[str] = ("sft", "ditto")
    ) -> None:
        """Save the named adapters (``peft`` format, safetensors) under ``path``.

        ``sft`` goes to ``path`` itself, any other adapter to ``path/<name>`` (peft's layout);
        reload with ``PeftModel.from_pretrained(base, path, adapter_name=...)``.
        """
        names = [a for a in adapters if a in self.model.peft_config]
        self.model.save_pretrained(str(path), selected_adapters=names, safe_serialization=True)
