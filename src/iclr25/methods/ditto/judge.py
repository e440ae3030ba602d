"""Pairwise judges and win rates for DITTO's evaluation.

The paper judges with GPT-4 (Sec. 4 of Shaikh et al., "Aligning Language Models with
Demonstrated Feedback", ICLR 2025, arXiv:2406.00888). Here a :class:`Judge` is anything with
``judge(prompt, a, b) -> 1 | 0.5 | 0`` (1 when ``a`` is preferred). The synthetic style world
supplies an exact likelihood-ratio judge (``iclr25.common.data.style_world.StyleJudge``);
:class:`LLMJudge` adapts any text-in/text-out model (a local LLM) to the protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Judge", "LLMJudge", "win_rate"]


@runtime_checkable
class Judge(Protocol):
    """A pairwise judge: ``judge(prompt, a, b)`` is 1.0 if ``a`` wins, 0.0 if ``b`` wins, 0.5 on a tie."""

    def judge(self, prompt: str, a: str, b: str) -> float:
        """Compare two responses to ``prompt``."""
        ...


def win_rate(
    judge: Judge,
    prompts: Sequence[str],
    outs_a: Sequence[Sequence[str]],
    outs_b: Sequence[Sequence[str]],
) -> float:
    """Mean win of ``a`` over ``b``: every sample of ``a`` against every sample of ``b`` per prompt.

    Ties count 0.5, so ``win_rate(j, p, a, b) + win_rate(j, p, b, a) == 1`` for an antisymmetric judge.

    Args:
        judge: the judge.
        prompts: the prompts (P).
        outs_a: per prompt, the samples of system A.
        outs_b: per prompt, the samples of system B.

    Returns:
        The win rate in [0, 1].

    Example:
        >>> class Longer:
        ...     def judge(self, prompt, a, b):
        ...         return 1.0 if len(a) > len(b) else 0.0 if len(a) < len(b) else 0.5
        >>> win_rate(Longer(), ["p"], [["aaa", "a"]], [["aa"]])
        0.5
    """
    if len(prompts) != len(outs_a) or len(prompts) != len(outs_b):
        raise ValueError("prompts, outs_a and outs_b must have the same length")
    if not prompts:
        raise ValueError("no prompts")
    total = count = 0.0
    for p, xa, xb in zip(prompts, outs_a, outs_b, strict=True):
        if not xa or not xb:
            raise ValueError(f"no samples for prompt {p!r}")
        for a in xa:
            for b in xb:
                total += judge.judge(p, a, b)
                count += 1
    return total / count


class LLMJudge:
    """Adapter from a text generator (a local LLM) to the :class:`Judge` protocol.

    The generator sees a template asking which of two responses better matches the user's
    demonstrated style and must answer with "A", "B" or "tie". Each comparison is asked in both
    orders and averaged, which cancels position bias.

    Args:
        generate: prompt text -> the model's answer text.
        demonstrations: the user's example responses, shown in the template.
        template: a ``str.format`` template with ``{demos}``, ``{prompt}``, ``{a}`` and ``{b}``.

    Example:
        >>> j = LLMJudge(lambda text: "A", demonstrations=["hey mom , cake superb ! cheers"])
        >>> j.judge("write a note", "x", "y")  # always answers A: position bias cancels to a tie
        0.5
    """

    TEMPLATE = (
        "Here are writing samples from one author:\n{demos}\n\nTask: {prompt}\n\n"
        "Response A:\n{a}\n\nResponse B:\n{b}\n\n"
        "Which response is closer to the author's style? Answer with A, B or tie."
    )

    def __init__(
        self,
        generate: Callable[[str], str],
        demonstrations: Sequence[str],
        template: str | None = None,
    ) -> None:
        self.generate = generate
        self.demonstrations = list(demonstrations)
        self.template = template or self.TEMPLATE

    def _ask(self, prompt: str, a: str, b: str) -> float:
        demos = "\n---\n".join(self.demonstrations)
        answer = self.generate(self.template.format(demos=demos, prompt=prompt, a=a, b=b)).strip().lower()
        if answer.startswith("a"):
            return 1.0
        if answer.startswith("b"):
            return 0.0
        return 0.5

    def judge(self, prompt: str, a: str, b: str) -> float:
        """Both orders, averaged: (ask(a, b) + 1 − ask(b, a)) / 2."""
        return (self._ask(prompt, a, b) + 1.0 - self._ask(prompt, b, a)) / 2.0
