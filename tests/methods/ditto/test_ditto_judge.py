"""Win rates and the judge adapters."""

from __future__ import annotations

import pytest

from iclr25._core.seeding import numpy_rng
from iclr25.common.data.style_world import StyleJudge, StyleWorld
from iclr25.methods.ditto import Judge, LLMJudge, win_rate


def test_win_rate_is_antisymmetric_with_the_exact_judge() -> None:
    world = StyleWorld()
    judge = StyleJudge(world, 2)
    assert isinstance(judge, Judge)
    rng = numpy_rng(4)
    prompts = [world.prompt(t, "friend") for t in world.topics[:4]]
    a = [[world.sample_base(p, rng) for _ in range(3)] for p in prompts]
    b = [[world.sample_response(p, world.user_style(2), rng) for _ in range(2)] for p in prompts]
    assert win_rate(judge, prompts, a, b) + win_rate(judge, prompts, b, a) == pytest.approx(1.0)
    assert win_rate(judge, prompts, a, a) == pytest.approx(0.5)
    assert win_rate(judge, prompts, b, a) > 0.5  # the user's own style wins


def test_llm_judge_cancels_position_bias_and_reads_answers() -> None:
    seen: list[str] = []

    def prefers_longer(text: str) -> str:
        seen.append(text)
        a = text.split("Response A:\n")[1].split("\n\nResponse B:")[0]
        b = text.split("Response B:\n")[1].split("\n\nWhich")[0]
        return "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"

    j = LLMJudge(prefers_longer, ["demo one"])
    assert j.judge("p", "long answer", "short") == 1.0
    assert j.judge("p", "short", "long answer") == 0.0
    assert j.judge("p", "same", "same") == 0.5
    assert "demo one" in seen[0]


def test_win_rate_bad_input() -> None:
    j = StyleJudge(StyleWorld(), 0)
    with pytest.raises(ValueError):
        win_rate(j, [], [], [])
    with pytest.raises(ValueError):
        win_rate(j, ["p"], [["a"]], [])
    with pytest.raises(ValueError):
        win_rate(j, ["p"], [[]], [["b"]])
