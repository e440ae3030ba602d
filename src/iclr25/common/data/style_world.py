"""A synthetic writing-style world with a known grammar and an exact likelihood-ratio judge.

Prompts read ``write a note about TOPIC to AUDIENCE``. A response is a greeting, the audience, a
comma, one to four sentences ``TOPIC_WORD ADJECTIVE PUNCT`` and a sign-off::

    hey mom , flowers superb ! soil nice ! cheers

A *style* is one categorical distribution per slot (greeting, sentence count, adjective,
punctuation, sign-off); topic words are uniform over the prompt's topic and the audience is
copied, so both are style-free. Slot vocabularies are disjoint, so parsing is deterministic and
``log p_style(y | x)`` is exact. The world has one generic style and ``n_users`` user styles; the
*base* distribution that a base LM is pretrained on is the mixture ``generic_weight`` · generic +
the rest split evenly over the user styles (each user keeps a small prior mass).

The exact judge scores a response by ``log p_user(y | x) − log p_base(y | x)``: the log-likelihood
ratio of the user's style against the base mixture. Text that does not parse is not well-formed
and loses every comparison.

Example:
    >>> from iclr25._core.seeding import numpy_rng
    >>> world = StyleWorld(StyleWorldConfig(seed=0))
    >>> x = world.prompt("garden", "mom")
    >>> x
    'write a note about garden to mom'
    >>> y = world.sample_response(x, world.user_style(0), numpy_rng(0))
    >>> world.parse(x, y) is not None
    True
    >>> judge = StyleJudge(world, user=0)
    >>> judge(x, y, "not a note")
    1.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from iclr25._core.config import param
from iclr25._core.seeding import numpy_rng

__all__ = [
    "ADJECTIVES",
    "AUDIENCES",
    "CHAT_TEMPLATE",
    "GREETINGS",
    "LENGTHS",
    "PUNCTUATION",
    "SIGNOFFS",
    "TOPICS",
    "Parsed",
    "Style",
    "StyleJudge",
    "StyleWorld",
    "StyleWorldConfig",
    "build_style_tokenizer",
]

GREETINGS: tuple[str, ...] = ("hi", "hello", "hey", "dear", "greetings", "yo")
LENGTHS: tuple[int, ...] = (1, 2, 3, 4)
ADJECTIVES: tuple[str, ...] = ("good", "great", "nice", "fine", "superb", "lovely", "solid", "grand")
PUNCTUATION: tuple[str, ...] = (".", "!", "...", "~")
SIGNOFFS: tuple[str, ...] = ("thanks", "cheers", "regards", "bye", "best", "later")
AUDIENCES: tuple[str, ...] = ("mom", "boss", "friend", "neighbor", "teacher", "client", "cousin", "coach")
#: topic -> its three content words (the first is the topic's own name).
TOPICS: dict[str, tuple[str, str, str]] = {
    "garden": ("garden", "flowers", "soil"),
    "cooking": ("cooking", "oven", "spices"),
    "travel": ("travel", "train", "hotel"),
    "music": ("music", "guitar", "drums"),
    "weather": ("weather", "rain", "clouds"),
    "football": ("football", "goal", "match"),
    "books": ("books", "novel", "chapter"),
    "movies": ("movies", "film", "actor"),
    "school": ("school", "exam", "homework"),
    "work": ("work", "meeting", "deadline"),
    "health": ("health", "doctor", "sleep"),
    "money": ("money", "budget", "savings"),
    "pets": ("pets", "dog", "cat"),
    "cars": ("cars", "engine", "tires"),
    "coffee": ("coffee", "espresso", "beans"),
    "birthday": ("birthday", "cake", "party"),
    "moving": ("moving", "boxes", "apartment"),
    "hiking": ("hiking", "trail", "mountain"),
    "painting": ("painting", "canvas", "colors"),
    "science": ("science", "experiment", "lab"),
}
_PROMPT_WORDS: tuple[str, ...] = ("write", "a", "note", "about", "to")
_CHAT_WORDS: tuple[str, ...] = ("user", "assistant", "system", ":", ",")

#: A Jinja chat template over whitespace-separated words, for the word-level tokenizer.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant : {% endif %}"
)


@dataclass(frozen=True)
class StyleWorldConfig:
    """Sizes and sharpness of the style world.

    Example:
        >>> StyleWorldConfig().n_users
        5
    """

    n_topics: int = param(
        20, doc="topics in use (the first n of TOPICS)", source="deviation: spec, 20 topics"
    )
    n_users: int = param(5, doc="user styles beside the generic one", source="deviation: spec, several users")
    main_prob: float = param(
        0.7, doc="probability of a style's preferred option in each slot", source="deviation: world design"
    )
    generic_weight: float = param(
        0.9,
        doc="weight of the generic style in the base mixture (users share the rest)",
        source="deviation: spec, target style about 2 % of the base",
    )
    seed: int = param(0, doc="seed of the styles' preferred options", source="deviation: fixed world")

    def validate(self) -> None:
        """Raise ``ValueError`` on sizes outside the world's vocabularies."""
        if not 1 <= self.n_topics <= len(TOPICS):
            raise ValueError(f"n_topics must be in [1, {len(TOPICS)}], got {self.n_topics}")
        if self.n_users < 1:
            raise ValueError(f"n_users must be at least 1, got {self.n_users}")
        if not 0.0 < self.main_prob < 1.0:
            raise ValueError(f"main_prob must be in (0, 1), got {self.main_prob}")
        if not 0.0 <= self.generic_weight < 1.0:
            raise ValueError(f"generic_weight must be in [0, 1), got {self.generic_weight}")


@dataclass(frozen=True)
class Style:
    """One writing style: a categorical distribution per slot (each row sums to 1).

    Args:
        greeting: over :data:`GREETINGS`.
        length: over :data:`LENGTHS` (number of sentences).
        adjective: over :data:`ADJECTIVES`, drawn once per sentence.
        punct: over :data:`PUNCTUATION`, drawn once per sentence.
        signoff: over :data:`SIGNOFFS`.
    """

    greeting: tuple[float, ...]
    length: tuple[float, ...]
    adjective: tuple[float, ...]
    punct: tuple[float, ...]
    signoff: tuple[float, ...]


@dataclass(frozen=True)
class Parsed:
    """A parsed response: slot indices into the option tuples."""

    greeting: int
    adjectives: tuple[int, ...]
    puncts: tuple[int, ...]
    signoff: int

    @property
    def length_index(self) -> int:
        """Index of the sentence count in :data:`LENGTHS`."""
        return LENGTHS.index(len(self.adjectives))


_SLOTS = (
    ("greeting", GREETINGS),
    ("length", LENGTHS),
    ("adjective", ADJECTIVES),
    ("punct", PUNCTUATION),
    ("signoff", SIGNOFFS),
)


def _peaked(n: int, main: int, main_prob: float) -> tuple[float, ...]:
    rest = (1.0 - main_prob) / (n - 1)
    return tuple(main_prob if i == main else rest for i in range(n))


class StyleWorld:
    """The grammar, its styles, sampling and exact log-likelihoods.

    The generic style prefers the first option of every slot; user ``u`` prefers, in each slot, an
    option drawn (seeded) from the others, so every user differs from the generic style in every
    slot. Users may share preferred options with each other.

    Args:
        config: the world's sizes.

    Raises:
        ValueError: a config outside the vocabularies.
    """

    def __init__(self, config: StyleWorldConfig | None = None) -> None:
        self.config = config or StyleWorldConfig()
        self.config.validate()
        cfg = self.config
        self.topics: tuple[str, ...] = tuple(TOPICS)[: cfg.n_topics]
        self.generic = Style(*(_peaked(len(opts), 0, cfg.main_prob) for _, opts in _SLOTS))
        rng = numpy_rng(cfg.seed, 7)
        users = []
        for _ in range(cfg.n_users):
            mains = [int(rng.integers(1, len(opts))) for _, opts in _SLOTS]
            users.append(
                Style(*(_peaked(len(o), m, cfg.main_prob) for (_, o), m in zip(_SLOTS, mains, strict=True)))
            )
        self.users: tuple[Style, ...] = tuple(users)
        self._topic_of_word = {w: t for t in self.topics for w in TOPICS[t]}

    # -- vocabulary and prompts ---------------------------------------------------------------

    @property
    def vocab(self) -> list[str]:
        """Every word the world uses (prompt, chat template and response words), no specials."""
        words = [*_PROMPT_WORDS, *_CHAT_WORDS, *AUDIENCES, *GREETINGS, *ADJECTIVES, *PUNCTUATION, *SIGNOFFS]
        for t in self.topics:
            words.extend(TOPICS[t])
        return list(dict.fromkeys(words))

    @staticmethod
    def prompt(topic: str, audience: str) -> str:
        """The instruction text ``write a note about TOPIC to AUDIENCE``."""
        if topic not in TOPICS or audience not in AUDIENCES:
            raise ValueError(f"unknown topic {topic!r} or audience {audience!r}")
        return f"write a note about {topic} to {audience}"

    def parse_prompt(self, prompt: str) -> tuple[str, str]:
        """``(topic, audience)`` of a prompt; ``ValueError`` if it is not one of the world's."""
        words = prompt.split()
        if len(words) != 7 or words[:4] != ["write", "a", "note", "about"] or words[5] != "to":
            raise ValueError(f"not a style-world prompt: {prompt!r}")
        if words[4] not in self.topics or words[6] not in AUDIENCES:
            raise ValueError(f"unknown topic or audience in {prompt!r}")
        return words[4], words[6]

    def all_prompts(self) -> list[str]:
        """Every (topic, audience) prompt, topic-major."""
        return [self.prompt(t, a) for t in self.topics for a in AUDIENCES]

    def user_style(self, user: int) -> Style:
        """User ``user``'s style (0-based)."""
        if not 0 <= user < len(self.users):
            raise ValueError(f"user must be in [0, {len(self.users)}), got {user}")
        return self.users[user]

    # -- sampling -----------------------------------------------------------------------------

    def sample_response(self, prompt: str, style: Style, rng: np.random.Generator) -> str:
        """One response to ``prompt`` drawn from ``style``."""
        topic, audience = self.parse_prompt(prompt)
        greet = GREETINGS[rng.choice(len(GREETINGS), p=style.greeting)]
        n = LENGTHS[rng.choice(len(LENGTHS), p=style.length)]
        words = [greet, audience, ","]
        for _ in range(n):
            words.append(TOPICS[topic][rng.integers(3)])
            words.append(ADJECTIVES[rng.choice(len(ADJECTIVES), p=style.adjective)])
            words.append(PUNCTUATION[rng.choice(len(PUNCTUATION), p=style.punct)])
        words.append(SIGNOFFS[rng.choice(len(SIGNOFFS), p=style.signoff)])
        return " ".join(words)

    def sample_base(self, prompt: str, rng: np.random.Generator) -> str:
        """One response from the base mixture (generic with prob ``generic_weight``, else a user)."""
        cfg = self.config
        if rng.random() < cfg.generic_weight:
            return self.sample_response(prompt, self.generic, rng)
        return self.sample_response(prompt, self.users[int(rng.integers(cfg.n_users))], rng)

    def base_corpus(self, n: int, rng: np.random.Generator) -> list[tuple[str, str]]:
        """``n`` (prompt, response) pairs from the base mixture, prompts uniform over the world."""
        prompts = self.all_prompts()
        return [
            (p, self.sample_base(p, rng)) for p in (prompts[i] for i in rng.integers(len(prompts), size=n))
        ]

    # -- parsing and likelihoods --------------------------------------------------------------

    def parse(self, prompt: str, response: str) -> Parsed | None:
        """Parse a response to ``prompt``; ``None`` if it is not well-formed."""
        topic, audience = self.parse_prompt(prompt)
        w = response.split()
        if len(w) < 7 or (len(w) - 4) % 3 or w[1] != audience or w[2] != ",":
            return None
        if w[0] not in GREETINGS or w[-1] not in SIGNOFFS:
            return None
        body = w[3:-1]
        if len(body) // 3 not in LENGTHS:
            return None
        adjs, puncts = [], []
        for i in range(0, len(body), 3):
            word, adj, pun = body[i : i + 3]
            if word not in TOPICS[topic] or adj not in ADJECTIVES or pun not in PUNCTUATION:
                return None
            adjs.append(ADJECTIVES.index(adj))
            puncts.append(PUNCTUATION.index(pun))
        return Parsed(GREETINGS.index(w[0]), tuple(adjs), tuple(puncts), SIGNOFFS.index(w[-1]))

    @staticmethod
    def style_logprob(parsed: Parsed, style: Style) -> float:
        """Exact ``log p_style(y | x)`` of a parsed response (topic words uniform over 3)."""
        lp = math.log(style.greeting[parsed.greeting]) + math.log(style.length[parsed.length_index])
        for a, p in zip(parsed.adjectives, parsed.puncts, strict=True):
            lp += math.log(style.adjective[a]) + math.log(style.punct[p]) + math.log(1.0 / 3.0)
        return lp + math.log(style.signoff[parsed.signoff])

    def base_logprob(self, parsed: Parsed) -> float:
        """Exact ``log p_base(y | x)`` under the base mixture (log-sum-exp over its styles)."""
        cfg = self.config
        terms = (
            [math.log(cfg.generic_weight) + self.style_logprob(parsed, self.generic)]
            if cfg.generic_weight
            else []
        )
        w = math.log((1.0 - cfg.generic_weight) / cfg.n_users)
        terms += [w + self.style_logprob(parsed, u) for u in self.users]
        top = max(terms)
        return top + math.log(sum(math.exp(t - top) for t in terms))

    def score(self, prompt: str, response: str, user: int) -> float | None:
        """Judge score ``log p_user(y|x) − log p_base(y|x)``; ``None`` when ``y`` does not parse."""
        parsed = self.parse(prompt, response)
        if parsed is None:
            return None
        return self.style_logprob(parsed, self.user_style(user)) - self.base_logprob(parsed)


class StyleJudge:
    """The exact pairwise judge of the style world for one user.

    ``judge(prompt, a, b)`` is 1 when ``a`` has the higher score, 0 when ``b`` has, 0.5 on a tie;
    text that does not parse scores below any parsed text (two unparsed texts tie).

    Args:
        world: the style world.
        user: the user whose style is preferred.
    """

    def __init__(self, world: StyleWorld, user: int) -> None:
        world.user_style(user)  # validates the index
        self.world = world
        self.user = user

    def score(self, prompt: str, response: str) -> float:
        """The score of one response (``-inf`` when it does not parse)."""
        s = self.world.score(prompt, response, self.user)
        return -math.inf if s is None else s

    def __call__(self, prompt: str, a: str, b: str) -> float:
        """1.0 if ``a`` wins, 0.0 if ``b`` wins, 0.5 on a tie."""
        sa, sb = self.score(prompt, a), self.score(prompt, b)
        return 1.0 if sa > sb else 0.0 if sa < sb else 0.5

    judge = __call__

    def well_formed(self, prompt: str, responses: Sequence[str]) -> float:
        """Fraction of ``responses`` that parse."""
        if not responses:
            raise ValueError("no responses")
        return sum(self.world.parse(prompt, r) is not None for r in responses) / len(responses)


def build_style_tokenizer(world: StyleWorld):  # -> PreTrainedTokenizerFast
    """A word-level tokenizer over the world's vocabulary, with :data:`CHAT_TEMPLATE` set.

    Example:
        >>> tok = build_style_tokenizer(StyleWorld())
        >>> tok.apply_chat_template([{"role": "user", "content": "write a note"}], tokenize=False,
        ...                         add_generation_prompt=True)
        'user : write a note assistant : '
    """
    from iclr25.common.tiny_lm import build_word_tokenizer

    tok = build_word_tokenizer(world.vocab)
    tok.chat_template = CHAT_TEMPLATE
    return tok
