"""Paper-scale adapters: local Hugging Face victims, toxicity classifiers and attackers.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540), Sec. 4 and App. B. :class:`HFVictim` wraps a
local causal LM (Alpaca template for GPT-2 / Dolly, the tokenizer's chat template otherwise;
top-p 0.92, temperature 0.7, 30 new tokens); :class:`HFToxicityClassifier` wraps a local
``text-classification`` model (e.g. a RoBERTa hate-speech classifier) and returns P(toxic label);
:class:`LlamaGuardToxicity` judges (attack, reply) pairs with a local Llama-Guard: the probability
of its first output token being "unsafe" after the chat-formatted conversation.
:func:`load_attacker` loads a local attacker and its tokenizer. Nothing is downloaded: every path
must be a local folder.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from torch import nn

__all__ = ["ALPACA_TEMPLATE", "HFToxicityClassifier", "HFVictim", "LlamaGuardToxicity", "load_attacker"]

ALPACA_TEMPLATE = (
    "Below is an instruction that describes a task. Write a response that appropriately completes the "
    "request.\n\n### Instruction:\n{instruction}\n\n### Response:\n"
)


def _check_dir(path: str | os.PathLike[str]) -> None:
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no local model folder at {str(path)!r} (nothing is downloaded)")


def load_attacker(path: str | os.PathLike[str]) -> tuple[nn.Module, object]:
    """A local causal LM attacker and its tokenizer (``local_files_only``), in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _check_dir(path)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.eval(), tok


class HFVictim:
    """A local causal LM victim answering each attack ``n`` times by sampling.

    Args:
        model: the victim causal LM.
        tokenizer: its tokenizer (left padding is set).
        template: "alpaca" or "chat" (the tokenizer's chat template).
        max_new_tokens: reply length (paper 30).
        top_p: nucleus mass (paper 0.92).
        temperature: sampling temperature (paper 0.7).
        batch_size: most (attack, reply) rows per ``generate`` call; ``respond(attacks, n)`` makes
            ``ceil(len(attacks) * n / batch_size)`` calls (deviation: the paper's vLLM victim
            batches internally; 64 rows fit a 7B victim's 30-token replies on one GPU).
    """

    def __init__(
        self,
        model: nn.Module,
        tokenizer,
        *,
        template: Literal["alpaca", "chat"] = "alpaca",
        max_new_tokens: int = 30,
        top_p: float = 0.92,
        temperature: float = 0.7,
        batch_size: int = 64,
    ):
        if template not in ("alpaca", "chat"):
            raise ValueError(f"unknown template {template!r}; use 'alpaca' or 'chat'")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.model, self.tok, self.template = model.eval(), tokenizer, template
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.gen = dict(max_new_tokens=max_new_tokens, top_p=top_p, temperature=temperature, do_sample=True)
        self.queries = 0

    def format(self, attack: str) -> str:
        """The victim's input for one attack."""
        if self.template == "alpaca":
            return ALPACA_TEMPLATE.format(instruction=attack)
        msgs = [{"role": "user", "content": attack}]
        return self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)

    @torch.no_grad()
    def respond(self, attacks: Sequence[str], n: int) -> list[list[str]]:
        """``n`` sampled replies per attack."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        texts = [self.format(a) for a in attacks for _ in range(n)]  # row i * n + j: attack i, reply j
        device = next(self.model.parameters()).device
        replies: list[str] = []
        for start in range(0, len(texts), self.batch_size):
            enc = self.tok(texts[start : start + self.batch_size], return_tensors="pt", padding=True).to(
                device
            )
            out = self.model.generate(**enc, pad_token_id=self.tok.pad_token_id, **self.gen)
            replies += self.tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        self.queries += len(attacks)
        return [replies[i * n : (i + 1) * n] for i in range(len(attacks))]


class HFToxicityClassifier:
    """P(toxic label) from a local sequence-classification model.

    Args:
        model: an ``AutoModelForSequenceClassification`` model.
        tokenizer: its tokenizer.
        toxic_label: index of the toxic class, or its name in ``model.config.label2id``.
        max_length: truncation length.
    """

    def __init__(self, model: nn.Module, tokenizer, *, toxic_label: int | str = 1, max_length: int = 128):
        self.model, self.tok, self.max_length = model.eval(), tokenizer, max_length
        if isinstance(toxic_label, str):
            ids = getattr(model.config, "label2id", {}) or {}
            if toxic_label not in ids:
                raise ValueError(f"label {toxic_label!r} not in the model's labels {sorted(ids)}")
            toxic_label = int(ids[toxic_label])
        self.index = int(toxic_label)

    @torch.no_grad()
    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) per text, shape (n,)."""
        if len(texts) == 0:
            return np.zeros(0)
        enc = self.tok(
            list(texts), return_tensors="pt", padding=True, truncation=True, max_length=self.max_length
        )
        enc = enc.to(next(self.model.parameters()).device)
        probs = torch.softmax(self.model(**enc).logits.float(), -1)[:, self.index]
        return probs.cpu().numpy()


class LlamaGuardToxicity:
    """P(unsafe) of (attack, reply) pairs from a local Llama-Guard causal LM.

    The conversation (the attack as the user turn, the reply as the assistant turn) goes through
    the tokenizer's chat template; the score is the softmax probability, at the first generated
    position, of the first token of ``unsafe_text`` (the paper reads the log-probability of the
    greedy token "unsafe").

    Args:
        model: the Llama-Guard causal LM.
        tokenizer: its tokenizer (with the chat template; left padding is set).
        unsafe_text: the verdict word whose first token is scored.
        batch_size: pairs per forward pass.
    """

    def __init__(self, model: nn.Module, tokenizer, *, unsafe_text: str = "unsafe", batch_size: int = 16):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        ids = tokenizer(unsafe_text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"{unsafe_text!r} tokenizes to nothing")
        self.model, self.tok, self.unsafe_id, self.batch_size = (
            model.eval(),
            tokenizer,
            int(ids[0]),
            batch_size,
        )
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token

    def format(self, attack: str, reply: str) -> str:
        """The judge's input for one pair."""
        chat = [{"role": "user", "content": attack}, {"role": "assistant", "content": reply}]
        return self.tok.apply_chat_template(chat, tokenize=False)

    @torch.no_grad()
    def score_pairs(self, attacks: Sequence[str], replies: Sequence[str]) -> np.ndarray:
        """P(unsafe) per (attack, reply) pair, shape (n,)."""
        if len(attacks) != len(replies):
            raise ValueError(f"{len(attacks)} attacks for {len(replies)} replies")
        device = next(self.model.parameters()).device
        texts = [self.format(a, r) for a, r in zip(attacks, replies, strict=True)]
        out = []
        for start in range(0, len(texts), self.batch_size):
            enc = self.tok(
                texts[start : start + self.batch_size],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            ).to(device)
            logits = self.model(**enc).logits[:, -1].float()  # (b, V): left padding, last = next token
            out.append(torch.softmax(logits, -1)[:, self.unsafe_id].cpu())
        return torch.cat(out).numpy() if out else np.zeros(0)
