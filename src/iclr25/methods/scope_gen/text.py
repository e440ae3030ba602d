"""Long-form text for SCOPE-Gen: ROUGE similarity and oracle, a human oracle, a report task.

Supports the text experiments of *Conformal Generative Modeling with Improved Sample Efficiency
through Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael
Muehlebach; ICLR 2025; arXiv 2410.01660), Sec. 5 (CNN/DailyMail summaries and MIMIC-CXR
radiology reports, where a generated text is admissible if its ROUGE-L score against the
reference clears a threshold, and sets are pruned with a ROUGE similarity):

- :class:`RougeScore`, :func:`rouge_similarity` and :func:`rouge_oracle`: ROUGE F-measures from
  ``rouge-score`` (extra ``scope_gen``), memoised per text pair; the similarity matrix of a set
  of samples and the admissibility oracle "ROUGE against the reference ≥ threshold";
- :func:`human_oracle`: a person answers yes/no for each unique (prompt, sample) pair, behind
  the same lazy, memoised, counting interface (Sec. 1: checks by domain experts are the cost);
- :class:`ReportTask`: a templated radiology-style report task for a tiny Hugging Face LM
  trained on the spot: the prompt lists some findings (the rest hidden or wrong), the generator
  writes a six-sentence report, admissibility is ROUGE-L against the reference report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from iclr25._core.registry import require
from iclr25.methods.scope_gen.adapters import HFGenerator
from iclr25.methods.scope_gen.oracle import AdmissibilityOracle, canonical_key
from iclr25.methods.scope_gen.tasks import TaskArrays

if TYPE_CHECKING:
    import torch

__all__ = ["ReportTask", "RougeScore", "human_oracle", "rouge_oracle", "rouge_similarity"]


class RougeScore:
    """ROUGE F-measure between two texts (``rouge_score.rouge_scorer``), memoised per pair.

    The F-measure is symmetric in its arguments, so each unordered pair is scored once.

    Args:
        rouge_type: a ``rouge-score`` type, e.g. "rougeL", "rouge1", "rouge2".

    Example:
        >>> score = RougeScore()
        >>> round(score("heart is normal", "heart is enlarged"), 3)
        0.667
    """

    def __init__(self, rouge_type: str = "rougeL") -> None:
        scorer = require("rouge_score.rouge_scorer", "scope_gen")
        self.rouge_type = rouge_type
        self._scorer = scorer.RougeScorer([rouge_type])
        self._memo: dict[tuple[str, str], float] = {}

    def __call__(self, reference: str, candidate: str) -> float:
        """The F-measure of ``candidate`` against ``reference``, in [0, 1]."""
        key = (reference, candidate) if reference <= candidate else (candidate, reference)
        if key not in self._memo:
            self._memo[key] = float(self._scorer.score(reference, candidate)[self.rouge_type].fmeasure)
        return self._memo[key]

    def matrix(self, items: Sequence[str]) -> np.ndarray:
        """Pairwise similarities of ``items``: the F-measure, 1 for equal normalised texts.

        Shape:
            -> (len(items), len(items)), symmetric, unit diagonal.
        """
        keys = [canonical_key(y) for y in items]
        k = len(items)
        out = np.eye(k)
        for i in range(k):
            for j in range(i + 1, k):
                out[i, j] = out[j, i] = 1.0 if keys[i] == keys[j] else self(items[i], items[j])
        return out


def rouge_similarity(items: Sequence[str], rouge_type: str = "rougeL") -> np.ndarray:
    """ROUGE similarity matrix of a set of generated texts (a :data:`Similarity`).

    Example:
        >>> rouge_similarity(["a b c", "a b d", "a b c"]).round(3).tolist()
        [[1.0, 0.667, 1.0], [0.667, 1.0, 0.667], [1.0, 0.667, 1.0]]
    """
    return RougeScore(rouge_type).matrix(items)


def rouge_oracle(
    references: Mapping[Any, str] | Sequence[str],
    threshold: float,
    *,
    rouge_type: str = "rougeL",
    budget: int | None = None,
) -> AdmissibilityOracle:
    """Admissible iff the ROUGE F-measure against the prompt's reference is at least ``threshold``.

    Args:
        references: the reference text of each prompt, looked up as ``references[prompt]``.
        threshold: the ROUGE bar in [0, 1].
        rouge_type: the ``rouge-score`` type.
        budget: the oracle's evaluation budget (see :class:`AdmissibilityOracle`).

    Returns:
        A lazy, memoised, counting oracle.

    Example:
        >>> oracle = rouge_oracle({"q": "heart is normal . lungs are clear ."}, 0.9)
        >>> oracle("q", "heart is normal . lungs are clear ."), oracle("q", "heart is enlarged .")
        (True, False)
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
    score = RougeScore(rouge_type)
    return AdmissibilityOracle(
        lambda prompt, y: score(references[prompt], str(y)) >= threshold, budget=budget
    )


def human_oracle(
    ask: Callable[[str], str] = input, *, budget: int | None = None, retries: int = 3
) -> AdmissibilityOracle:
    """An admissibility oracle that asks a person, once per unique (prompt, sample) pair.

    The question shows the prompt and the sample and takes "y"/"yes" or "n"/"no" (any case).
    The oracle is lazy and memoised, so calibration asks only what a stage needs and never asks
    twice about the same normalised text.

    Args:
        ask: shows a question and returns the answer (``input`` for a terminal; a callback for a
            web form or a script).
        budget: the most questions allowed (see :class:`AdmissibilityOracle`).
        retries: how many unreadable answers to re-ask before raising ``ValueError``.

    Example:
        >>> answers = iter(["yes", "no"])
        >>> oracle = human_oracle(lambda question: next(answers))
        >>> oracle("2 + 2 =", "4"), oracle("2 + 2 =", " 4"), oracle("2 + 2 =", "5")
        (True, True, False)
        >>> oracle.unique_calls
        2
    """
    if retries < 1:
        raise ValueError(f"retries must be positive, got {retries}")

    def fn(prompt: Any, item: Any) -> bool:
        question = f"prompt: {prompt}\nsample: {item}\nadmissible? [y/n] "
        for _ in range(retries):
            answer = str(ask(question)).strip().lower()
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
        raise ValueError(f"no yes/no answer after {retries} questions about {item!r}")

    return AdmissibilityOracle(fn, budget=budget)


class ReportTask:
    """Radiology-style reports from partial findings: a long-form text task for a tiny LM.

    Each case has a latent state (healthy or sick, probability 1/2) and six findings, each a
    value of its organ ("heart is normal", "lungs are hazy", ...): a healthy case has the normal
    value with probability 0.85, a sick one with probability 0.3, else a uniformly drawn abnormal
    value. The prompt ``"exam v1 ... v6 :"`` shows each finding with probability ``reveal``
    (``"unk"`` otherwise), and a shown finding is a wrong value with probability ``noise``. The
    reference is the true six-sentence report. A generated report is admissible iff its ROUGE-L
    F-measure against the reference is at least ``threshold`` (0.9: at most one of the six
    findings wrong in an otherwise well-formed report); similarity is ROUGE-L between samples.
    The generator is a tiny GPT-2 trained on fresh cases of the same world
    (:meth:`train_generator`), sampled through :class:`HFGenerator`; quality is its
    geometric-mean token probability.

    Args:
        n_prompts: number of cases.
        reveal: probability that a finding is shown in the prompt.
        noise: probability that a shown finding is wrong.
        threshold: the ROUGE-L admissibility bar.
        seed: seed of the cases.

    Attributes:
        prompts: prompt text per case (cases can share a prompt); references: true reports.
        vocab: every word of prompts and reports.

    Example:
        >>> task = ReportTask(n_prompts=2, seed=0)
        >>> task.references[0].count(" . ")
        5
    """

    FINDINGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
        ("heart", "is", ("normal", "enlarged")),
        ("lungs", "are", ("clear", "hazy", "congested")),
        ("pleura", "shows", ("nothing", "effusion")),
        ("mediastinum", "is", ("central", "widened")),
        ("bones", "are", ("intact", "fractured")),
        ("tubes", "are", ("absent", "present")),
    )

    def __init__(
        self,
        n_prompts: int = 1200,
        reveal: float = 0.4,
        noise: float = 0.1,
        threshold: float = 0.9,
        seed: int = 0,
    ) -> None:
        if n_prompts < 1:
            raise ValueError(f"n_prompts must be positive, got {n_prompts}")
        for name, v in (("reveal", reveal), ("noise", noise), ("threshold", threshold)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {v}")
        self.n_prompts, self.reveal, self.noise, self.threshold = n_prompts, reveal, noise, threshold
        self.seed = seed
        words = ["exam", "unk", ":", "."]
        for organ, verb, values in self.FINDINGS:
            words += [organ, verb, *values]
        self.vocab = list(dict.fromkeys(words))
        self.prompts, self.references = self.cases(n_prompts, np.random.default_rng([seed, 505]))
        self._score = RougeScore("rougeL")

    def cases(self, n: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
        """``n`` fresh (prompt, reference report) pairs of the task's world.

        Returns:
            ``(prompts, references)``.
        """
        sick = rng.random(n) < 0.5
        prompt_words: list[list[str]] = [["exam"] for _ in range(n)]
        sentences: list[list[str]] = [[] for _ in range(n)]
        for organ, verb, values in self.FINDINGS:
            v = len(values)
            p_normal = np.where(sick, 0.3, 0.85)
            abnormal = 1 + rng.integers(0, v - 1, size=n)
            value = np.where(rng.random(n) < p_normal, 0, abnormal)  # (n,)
            shown = rng.random(n) < self.reveal
            wrong = rng.random(n) < self.noise
            other = (value + rng.integers(1, v, size=n)) % v  # a different value, uniformly
            evidence = np.where(wrong, other, value)
            for i in range(n):
                prompt_words[i].append(values[evidence[i]] if shown[i] else "unk")
                sentences[i].append(f"{organ} {verb} {values[value[i]]} .")
        return [" ".join([*w, ":"]) for w in prompt_words], [" ".join(s) for s in sentences]

    def train_generator(
        self,
        *,
        steps: int = 150,
        batch_size: int = 64,
        n_train: int = 4000,
        lr: float = 3e-3,
        n_layer: int = 2,
        d_model: int = 64,
        seed: int = 0,
        device: str | torch.device = "cpu",
    ) -> HFGenerator:
        """Train a tiny GPT-2 (word-level tokenizer) on fresh cases; return it as a generator.

        The loss is next-token cross-entropy on the report tokens (and the end-of-sequence
        token) given the prompt. The model and its batches live on ``device``; the minibatch
        indices are drawn from a seeded CPU generator and moved there, so the CPU numbers do not
        depend on the device. Torch's global RNG is restored.

        Args:
            steps: optimiser steps.
            batch_size: cases per step.
            n_train: fresh training cases.
            lr: AdamW learning rate.
            n_layer: transformer blocks.
            d_model: hidden size.
            seed: seed of the training cases, the initialisation and the minibatch order.
            device: where the model trains and the returned generator runs ("cpu", "cuda",
                a ``torch.device``); the CPU by default.

        Returns:
            An :class:`HFGenerator` over the trained model (eval mode, on ``device``).
        """
        torch = require("torch", "scope_gen")
        from iclr25.common import rng  # torch, like the require above

        tiny_lm = require("iclr25.common.tiny_lm", "scope_gen")
        dev = torch.device(device)
        tok = tiny_lm.build_word_tokenizer(self.vocab)
        prompts, reports = self.cases(n_train, np.random.default_rng([self.seed, 506, seed]))
        p_ids = torch.tensor([tok(p)["input_ids"] for p in prompts])  # (N, Lp): fixed-length prompts
        r_ids = torch.tensor([tok(r)["input_ids"] + [tok.eos_token_id] for r in reports])  # (N, Lr)
        ids = torch.cat([p_ids, r_ids], dim=1).to(dev)  # (N, Lp + Lr)
        labels = ids.clone()
        labels[:, : p_ids.shape[1]] = -100  # no loss on the prompt
        model = tiny_lm.build_tiny_lm(
            "gpt2",
            vocab_size=len(tok),
            n_layer=n_layer,
            n_head=2,
            d_model=d_model,
            max_positions=64,
            seed=seed,
        ).to(dev)  # built on the CPU from its seed, then moved
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(seed)  # CPU stream: the same batches on every device
        forked = [dev.index or 0] if dev.type == "cuda" else []
        with torch.random.fork_rng(devices=forked):
            for _ in range(steps):
                b = rng.randint(0, ids.shape[0], (batch_size,), generator=gen, device=dev)
                loss = model(input_ids=ids[b], attention_mask=torch.ones_like(ids[b]), labels=labels[b]).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
        model.eval()
        return HFGenerator(model, tok, max_new_tokens=r_ids.shape[1] + 1, device=str(dev))

    def similarity(self, items: Sequence[str]) -> np.ndarray:
        """ROUGE-L similarity of generated reports (memoised across calls)."""
        return self._score.matrix(items)

    def oracle(self, budget: int | None = None) -> AdmissibilityOracle:
        """ROUGE-L against the case's reference ≥ ``threshold``; prompts are case ids."""
        return rouge_oracle(self.references, self.threshold, budget=budget)

    def to_arrays(self, generator: HFGenerator, m: int, rng: np.random.Generator) -> TaskArrays:
        """Sample ``m`` reports per case and store qualities, similarities, labels and keys.

        Keys number the distinct normalised texts of each case, so duplicates share a label.
        """
        items, q = generator.sample_batch(self.prompts, m, rng, with_quality=True)  # q: (n, m)
        s = np.stack([self._score.matrix(ys) for ys in items])  # (n, m, m)
        lab = np.array(
            [
                [self._score(ref, y) >= self.threshold for y in ys]
                for ref, ys in zip(self.references, items, strict=True)
            ]
        )
        keys = np.empty((len(items), m), dtype=int)
        for i, ys in enumerate(items):
            seen: dict[Any, int] = {}
            keys[i] = [seen.setdefault(canonical_key(y), len(seen)) for y in ys]
        return TaskArrays(q, s, lab, keys)
