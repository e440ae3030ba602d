"""The two GenSE language models (N2S and S2S): GPT-2 decoders, training and KV-cached decoding.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3.3-3.4. N2S maps noisy semantic tokens to clean
semantic tokens; S2S maps (noisy semantic, clean semantic, noisy acoustic prompt) to clean acoustic
tokens. Both are ``transformers.GPT2LMHeadModel`` trained with teacher-forced cross-entropy on the
target segment only (the training recipe is not released; this is the natural reading). Decoding
always uses a KV cache and passes explicit position ids on every step (spec trap 7); the official
code reruns the whole sequence per step, which :func:`decode` also offers for testing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import nn
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
)

from iclr25.common import rng
from iclr25.methods.gense.config import LMConfig
from iclr25.methods.gense.tokens import BOS, EOS, N_SPECIAL, PAD, RangeMask, build_pair, build_s2s

__all__ = ["N2S", "S2S", "decode", "gpt2_config", "train_lm"]

Strategy = Literal["sample", "greedy", "top_k"]


def gpt2_config(vocab_size: int, cfg: LMConfig) -> GPT2Config:
    """A GPT-2 config of the given vocabulary and sizes (``gelu_new``, dropout everywhere)."""
    return GPT2Config(
        vocab_size=vocab_size,
        n_positions=cfg.n_positions,
        n_embd=cfg.n_embd,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        activation_function="gelu_new",
        resid_pdrop=cfg.dropout,
        embd_pdrop=cfg.dropout,
        attn_pdrop=cfg.dropout,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=PAD,
    )


@torch.no_grad()
def decode(
    model: GPT2LMHeadModel,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    n_new: int,
    pos_start: int,
    lo: int,
    hi: int,
    strategy: Strategy = "sample",
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int = 0,
    use_cache: bool = True,
) -> torch.Tensor:
    """Generate ``n_new`` tokens after a prompt; generated token j is fed at position
    ``pos_start + j``; ids outside ``[lo, hi)`` are masked with -inf.

    Args:
        model: the GPT-2 (put in eval mode by the caller).
        input_ids, position_ids: the prompt [B, L].
        n_new: tokens to generate (no EOS; lengths come from frame alignment).
        pos_start: position id of the first generated token.
        lo, hi: the valid id range of the target vocabulary.
        strategy: "sample" (multinomial), "greedy" or "top_k" (sampling among the top_k).
        temperature: softmax temperature for the sampling strategies.
        top_k: k for "top_k".
        seed: seed of the sampling generator (same seed, same tokens).
        use_cache: reuse keys and values (default); ``False`` reruns the full sequence per step.

    Returns:
        [B, n_new] ids in ``[lo, hi)`` (vocabulary ids, not yet shifted back), on the device of
        ``input_ids`` (the model may live on another).
    """
    if strategy not in ("sample", "greedy", "top_k"):
        raise ValueError(f"unknown strategy {strategy!r}")
    procs = LogitsProcessorList([RangeMask(lo, hi)])
    if strategy != "greedy":
        procs.append(TemperatureLogitsWarper(temperature))
    if strategy == "top_k":
        if not top_k:
            raise ValueError("strategy 'top_k' needs top_k")
        procs.append(TopKLogitsWarper(top_k))
    # the CPU generator keeps the draws the same on every device; ids run on the model's device
    gen = torch.Generator().manual_seed(seed)
    B = input_ids.shape[0]
    device = next(model.parameters()).device
    ids, pos = input_ids.to(device), position_ids.to(device)
    out = model(input_ids=ids, position_ids=pos, use_cache=use_cache)
    cache = out.cache if use_cache else None  # a DynamicCache, extended in place by each call
    new: list[torch.Tensor] = []
    for j in range(n_new):
        scores = procs(ids, out.logits[:, -1].float())
        if strategy == "greedy":
            tok = scores.argmax(-1)
        else:
            tok = rng.multinomial(torch.softmax(scores, -1), 1, generator=gen)[:, 0]
        new.append(tok)
        if j == n_new - 1:
            break
        step_pos = torch.full((B, 1), pos_start + j, device=device)
        ids = torch.cat([ids, tok[:, None]], 1)
        if use_cache:
            out = model(input_ids=tok[:, None], position_ids=step_pos, cache=cache, use_cache=True)
        else:
            pos = torch.cat([pos, step_pos], 1)
            out = model(input_ids=ids, position_ids=pos, use_cache=False)
    return torch.stack(new, 1).to(input_ids.device)


class N2S(nn.Module):
    """Noisy -> clean token LM over one vocabulary of ``n_tokens`` ids, in the :func:`build_pair`
    layout: the N2S model (semantic tokens) and, with acoustic tokens, the single-stage baseline.

    Example:
        >>> lm = N2S(8, LMConfig(n_embd=16, n_layer=1, n_head=2, n_positions=64)).eval()
        >>> lm.generate(torch.tensor([[1, 2, 3]]), strategy="greedy").shape
        torch.Size([1, 3])
    """

    def __init__(self, n_tokens: int, cfg: LMConfig) -> None:
        super().__init__()
        self.n_tokens, self.cfg = n_tokens, cfg
        self.model = GPT2LMHeadModel(gpt2_config(N_SPECIAL + n_tokens, cfg))

    def batch(self, noisy: torch.Tensor, clean: torch.Tensor) -> dict[str, torch.Tensor]:
        """Training sequences (the same builder as inference)."""
        return build_pair(noisy, clean)

    def generate(
        self,
        noisy: torch.Tensor,
        *,
        strategy: Strategy = "sample",
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """Clean token ids [B, T] in [0, n_tokens) for noisy ids [B, T]: exactly T tokens."""
        p = build_pair(noisy)
        T = p["input_ids"].shape[1] - 1
        out = decode(
            self.model,
            p["input_ids"],
            p["position_ids"],
            n_new=T,
            pos_start=0,
            lo=N_SPECIAL,
            hi=N_SPECIAL + self.n_tokens,
            strategy=strategy,
            temperature=temperature,
            top_k=top_k,
            seed=seed,
            use_cache=use_cache,
        )
        return out - N_SPECIAL


class S2S(nn.Module):
    """Semantic -> acoustic LM with token-chain prompting (``chain=False``: no noisy acoustic prompt).

    Example:
        >>> lm = S2S(4, 8, LMConfig(n_embd=16, n_layer=1, n_head=2, n_positions=64, gen_offset=20)).eval()
        >>> lm.generate(torch.tensor([[0, 1]]), torch.tensor([[1, 2]]), torch.tensor([[0, 1, 2, 3]])).shape
        torch.Size([1, 4])
    """

    def __init__(self, n_semantic: int, n_acoustic: int, cfg: LMConfig, *, chain: bool = True) -> None:
        super().__init__()
        self.n_semantic, self.n_acoustic, self.cfg, self.chain = n_semantic, n_acoustic, cfg, chain
        self.model = GPT2LMHeadModel(gpt2_config(N_SPECIAL + n_semantic + n_acoustic, cfg))

    def batch(self, noisy_sem, clean_sem, noisy_ac, clean_ac) -> dict[str, torch.Tensor]:
        """Training sequences (the same builder as inference)."""
        return build_s2s(
            noisy_sem,
            clean_sem,
            noisy_ac if self.chain else None,
            clean_ac,
            n_semantic=self.n_semantic,
            gen_offset=self.cfg.gen_offset,
        )

    def generate(
        self,
        noisy_sem: torch.Tensor,
        clean_sem: torch.Tensor,
        noisy_ac: torch.Tensor | None,
        *,
        strategy: Strategy = "sample",
        temperature: float = 1.0,
        top_k: int | None = None,
        seed: int = 0,
        use_cache: bool = True,
    ) -> torch.Tensor:
        """Clean acoustic ids [B, 2 T_s] in [0, n_acoustic)."""
        T_a = 2 * clean_sem.shape[-1]
        if self.cfg.gen_offset + T_a > self.cfg.n_positions:
            raise ValueError(
                f"gen_offset + T_a = {self.cfg.gen_offset + T_a} exceeds n_positions {self.cfg.n_positions}; "
                "chunk the input"
            )
        p = build_s2s(
            noisy_sem,
            clean_sem,
            noisy_ac if self.chain else None,
            n_semantic=self.n_semantic,
            gen_offset=self.cfg.gen_offset,
        )
        lo = N_SPECIAL + self.n_semantic
        out = decode(
            self.model,
            p["input_ids"],
            p["position_ids"],
            n_new=T_a,
            pos_start=self.cfg.gen_offset,
            lo=lo,
            hi=lo + self.n_acoustic,
            strategy=strategy,
            temperature=temperature,
            top_k=top_k,
            seed=seed,
            use_cache=use_cache,
        )
        return out - lo


def train_lm(
    lm: N2S | S2S,
    make_batch: Callable[[torch.Tensor], dict[str, torch.Tensor]],
    n: int,
    *,
    steps: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    progress: Callable[[int, int], None] = lambda d, t: None,
    validate: Callable[[], dict[str, torch.Tensor]] | None = None,
    val_losses: list[float] | None = None,
    block: int = 25,
    resume: dict | None = None,
    checkpoint: Callable[[dict], None] | None = None,
    checkpoint_every: int = 500,
    stop: int | None = None,
    step_losses: list[float] | None = None,
    device: str | torch.device | None = None,
) -> list[float]:
    """Teacher-forced cross-entropy on the target segment (labels -100 elsewhere), AdamW with a
    one-cycle schedule. ``make_batch(idx)`` builds the sequences of training rows ``idx``.

    With ``validate`` (a function returning held-out sequences) and ``val_losses`` (a list),
    the held-out loss (eval mode, no gradient) is appended to ``val_losses`` after every block.

    Args:
        resume: a state written through ``checkpoint`` (model, optimiser, schedule, batch
            generator, torch's RNG for dropout, step, curves): training continues from there, bit
            for bit as if never interrupted.
        checkpoint: called with such a state every ``checkpoint_every`` steps.
        stop: stop after this many steps (of ``steps``) without finishing.
        step_losses: when given, every step's loss is appended to it.
        device: where to train (default: where ``lm`` already is); every batch follows it. The
            batch rows are drawn on ``generator``'s device, so a CPU generator gives the same
            rows anywhere.

    Returns:
        The mean training loss of every block of ``block`` steps.
    """
    if device is not None:
        lm.to(device)
    dev = next(lm.parameters()).device

    def on_device(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(dev) for k, v in batch.items()}

    opt = torch.optim.AdamW(lm.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    curve: list[float] = []
    acc: list[float] = []
    first = 0
    if resume is not None:
        lm.load_state_dict(resume["model"])
        opt.load_state_dict(resume["optimizer"])
        sched.load_state_dict(resume["scheduler"])
        generator.set_state(resume["generator"])
        torch.set_rng_state(resume["torch_rng"])
        curve, acc, first = list(resume["curve"]), list(resume["acc"]), int(resume["step"])
        if val_losses is not None:
            val_losses[:] = resume["val_losses"]
    last = steps if stop is None else min(steps, stop)
    lm.train()
    for step in range(first, last):
        idx = torch.randint(n, (batch_size,), generator=generator)
        loss = lm.model(**on_device(make_batch(idx))).loss
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        sched.step()
        acc.append(float(loss.detach()))
        if step_losses is not None:
            step_losses.append(acc[-1])
        if len(acc) == block or step == steps - 1:
            curve.append(sum(acc) / len(acc))
            acc = []
            if validate is not None and val_losses is not None:
                lm.eval()
                with torch.no_grad():
                    val_losses.append(float(lm.model(**on_device(validate())).loss))
                lm.train()
            progress(step + 1, steps)
        if checkpoint is not None and (step + 1) % checkpoint_every == 0 and step + 1 < steps:
            checkpoint(
                {
                    "model": lm.state_dict(),
                    "optimizer": opt.state_dict(),
                    "scheduler": sched.state_dict(),
                    "generator": generator.get_state(),
                    "torch_rng": torch.get_rng_state(),
                    "curve": list(curve),
                    "acc": list(acc),
                    "val_losses": list(val_losses or []),
                    "step": step + 1,
                }
            )
    lm.eval()
    return curve
