"""The style world: grammar, parsing, exact likelihoods and the judge."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from iclr25._core.seeding import numpy_rng
from iclr25.common.data.style_world import (
    ADJECTIVES,
    GREETINGS,
    LENGTHS,
    PUNCTUATION,
    SIGNOFFS,
    TOPICS,
    StyleJudge,
    StyleWorld,
    StyleWorldConfig,
    build_style_tokenizer,
)


def test_samples_parse_and_styles_are_distributions() -> None:
    w = StyleWorld()
    for style in (w.generic, *w.users):
        for row in (style.greeting, style.length, style.adjective, style.punct, style.signoff):
            assert math.isclose(sum(row), 1.0)
    rng = numpy_rng(0)
    x = w.prompt("garden", "mom")
    for _ in range(50):
        assert w.parse(x, w.sample_base(x, rng)) is not None


def test_users_differ_from_generic_in_every_slot() -> None:
    w = StyleWorld()
    for u in w.users:
        for a, b in zip(
            (u.greeting, u.length, u.adjective, u.punct, u.signoff),
            (w.generic.greeting, w.generic.length, w.generic.adjective, w.generic.punct, w.generic.signoff),
            strict=True,
        ):
            assert int(np.argmax(a)) != int(np.argmax(b))


def test_likelihood_is_exact_on_enumerable_one_sentence_responses() -> None:
    """Summing p_style over every one-sentence response gives exactly P(length = 1)."""
    w = StyleWorld()
    x = w.prompt("garden", "mom")
    style = w.user_style(1)
    total = 0.0
    for g, word, a, p, s in itertools.product(GREETINGS, TOPICS["garden"], ADJECTIVES, PUNCTUATION, SIGNOFFS):
        parsed = w.parse(x, f"{g} mom , {word} {a} {p} {s}")
        assert parsed is not None
        total += math.exp(w.style_logprob(parsed, style))
    assert math.isclose(total, style.length[LENGTHS.index(1)], rel_tol=1e-9)


def test_judge_score_is_the_brute_force_likelihood_ratio() -> None:
    w = StyleWorld(StyleWorldConfig(n_users=2, generic_weight=0.5))
    x = w.prompt("pets", "boss")
    y = "yo boss , dog nice ~ cat grand . later"
    parsed = w.parse(x, y)

    def prod(st):
        return (
            st.greeting[GREETINGS.index("yo")]
            * st.length[1]
            * st.adjective[ADJECTIVES.index("nice")]
            * st.punct[PUNCTUATION.index("~")]
            / 3
            * st.adjective[ADJECTIVES.index("grand")]
            * st.punct[PUNCTUATION.index(".")]
            / 3
            * st.signoff[SIGNOFFS.index("later")]
        )

    base = 0.5 * prod(w.generic) + 0.25 * prod(w.users[0]) + 0.25 * prod(w.users[1])
    assert parsed is not None
    assert math.isclose(w.score(x, y, 1), math.log(prod(w.users[1]) / base), rel_tol=1e-9)


def test_judge_is_antisymmetric_and_unparsed_text_loses() -> None:
    w = StyleWorld()
    j = StyleJudge(w, 0)
    x = w.prompt("music", "coach")
    rng = numpy_rng(3)
    ys = [w.sample_base(x, rng) for _ in range(10)] + ["hello coach , guitar", "coach"]
    for a, b in itertools.product(ys, ys):
        assert j(x, a, b) + j(x, b, a) == 1.0
    assert j(x, ys[0], "coach") == 1.0 and j(x, "coach", "x y") == 0.5
    assert j.well_formed(x, ys) == 10 / 12


def test_parse_rejects_wrong_topic_audience_and_shape() -> None:
    w = StyleWorld()
    x = w.prompt("garden", "mom")
    assert w.parse(x, "hi mom , flowers good . thanks") is not None
    assert w.parse(x, "hi boss , flowers good . thanks") is None
    assert w.parse(x, "hi mom , oven good . thanks") is None
    assert w.parse(x, "hi mom , flowers good thanks") is None
    assert w.parse(x, "hi mom , " + "flowers good . " * 5 + "thanks") is None


def test_bad_input_raises() -> None:
    with pytest.raises(ValueError):
        StyleWorld(StyleWorldConfig(n_topics=0))
    with pytest.raises(ValueError):
        StyleWorld(StyleWorldConfig(main_prob=1.0))
    w = StyleWorld()
    with pytest.raises(ValueError):
        w.prompt("nothing", "mom")
    with pytest.raises(ValueError):
        w.parse_prompt("write a poem")
    with pytest.raises(ValueError):
        StyleJudge(w, 99)


def test_tokenizer_covers_the_world_and_has_a_chat_template() -> None:
    w = StyleWorld()
    tok = build_style_tokenizer(w)
    rng = numpy_rng(1)
    x = w.prompt("coffee", "client")
    y = w.sample_base(x, rng)
    text = tok.apply_chat_template(
        [{"role": "user", "content": x}], tokenize=False, add_generation_prompt=True
    )
    ids = tok(text + y, add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == (text + y).strip()


def test_base_mixture_puts_about_two_percent_on_each_user() -> None:
    w = StyleWorld()
    assert math.isclose((1 - w.config.generic_weight) / w.config.n_users, 0.02)
    corpus = w.base_corpus(50, numpy_rng(0))
    assert len(corpus) == 50 and all(w.parse(p, y) for p, y in corpus)
