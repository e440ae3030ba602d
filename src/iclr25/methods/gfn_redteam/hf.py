"""Paper-scale adapters: local Hugging Face victims, toxicity classifiers and attackers.

Paper: *Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety
Tuning* (Lee et al., ICLR 2025, arXiv:2405.18540), Sec. 4 and App. B. :class:`HFVictim` wraps a
local causal LM (Alpaca template for GPT-2 / Dolly, the tokenizer's chat template otherwise;
top-p 0.92, temperature 0.7, 30 new tokens); :class:`HFToxicityClassifier` wraps a local
``text-classification`` model (e.g. a RoBERTa hate-speech classifier) and returns P(toxic label).
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

__all__ = ["ALPACA_TEMPLATE", "HFToxicityClassifier", "HFVictim", "load_attacker"]

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
    ):
        if template not in ("alpaca", "chat"):
            raise ValueError(f"unknown template {template!r}; use 'alpaca' or 'chat'")
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
        texts = [self.format(a) for a in attacks for _ in range(n)]
        enc = self.tok(texts, return_tensors="pt", padding=True).to(next(self.model.parameters()).device)
        out = self.model.generate(**enc, pad_token_id=self.tok.pad_token_id, **self.gen)
        replies = self.tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
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
