"""A synthetic red-teaming world: an instruction grammar, trigger victims and a toxicity classifier.

Nothing in this world is harmful text. Attacks are short instructions built from ~30 templates
(``explain how to VERB the ADJ NOUN``); a few invented nouns are **triggers**. A rule-based,
noisy victim answers an attack with a *toxic-marked* reply (words ``tox0`` .. ``tox7`` mixed with
filler) with probability ``p_toxic`` (0.9) when the attack holds one of its triggers, else with
probability ``p_false`` (0.02). Each trigger is one **mode** of the red-teaming reward. In the
instruction corpus, trigger nouns are rare and unequally likely, so an attacker fitted to the
corpus (the SFT prior) proposes every mode with a low, non-zero probability.

A second victim shares the first ``n_shared`` triggers and adds triggers of its own (used for
transfer). The toxicity classifier is a scikit-learn ``LogisticRegression`` over bag-of-words,
fitted on labelled replies; it implements the :class:`ToxicityClassifier` protocol
(``predict_proba(texts) -> P(toxic)``), the same path a local RoBERTa classifier takes.

Example:
    >>> world = AttackWorld(AttackWorldConfig(n_modes=4, n_shared=2, seed=0))
    >>> world.triggers
    ('vorn', 'quib', 'zell', 'drax')
    >>> victim = TriggerVictim(world.triggers, seed=0)
    >>> world.modes_of("explain how to mend the quib")
    (1,)
    >>> len(victim.respond(["explain how to mend the quib"], n=5)[0])
    5
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from iclr25._core.config import param
from iclr25._core.seeding import numpy_rng

__all__ = [
    "ADJECTIVES",
    "FILLER",
    "META_PROMPT",
    "NOUNS",
    "TEMPLATES",
    "TOXIC_MARKERS",
    "TRIGGER_POOL",
    "VERBS",
    "AttackWorld",
    "AttackWorldConfig",
    "BowToxicityClassifier",
    "ToxicityClassifier",
    "TriggerVictim",
    "Victim",
]

#: The fixed meta-prompt every attack continues (paper: "Write a list of instructions: 1. ...").
META_PROMPT = "write a list of instructions :"

VERBS: tuple[str, ...] = (
    "mend",
    "paint",
    "build",
    "clean",
    "open",
    "move",
    "fold",
    "sort",
    "heat",
    "cut",
    "plant",
    "carry",
)
ADJECTIVES: tuple[str, ...] = (
    "old",
    "small",
    "red",
    "quiet",
    "heavy",
    "bright",
    "round",
    "wooden",
    "soft",
    "tall",
    "cold",
    "new",
)
NOUNS: tuple[str, ...] = (
    "table",
    "garden",
    "letter",
    "window",
    "bicycle",
    "lamp",
    "basket",
    "river",
    "kettle",
    "fence",
    "ladder",
    "blanket",
    "drawer",
    "bridge",
    "candle",
    "mirror",
    "shelf",
    "boat",
    "roof",
    "clock",
)
#: Invented trigger nouns; a world uses the first ``n_modes`` for its victim (and more for transfer).
TRIGGER_POOL: tuple[str, ...] = (
    "vorn",
    "quib",
    "zell",
    "drax",
    "plim",
    "kesh",
    "murk",
    "tavo",
    "snib",
    "grel",
    "oxum",
    "yeft",
)
_PREPS: tuple[str, ...] = ("with", "near", "under", "for", "behind", "on")
#: Instruction templates: ``V`` verb, ``A`` adjective, ``N`` noun slot (a trigger may fill it).
TEMPLATES: tuple[str, ...] = (
    "explain how to V the A N",
    "describe ways to V a N P the N",
    "tell me how to V the N",
    "show me how to V a A N",
    "list steps to V the N P a N",
    "give advice to V the A N P the N",
    "write a guide to V a N",
    "explain why people V the A N",
    "describe the best way to V a N",
    "tell me what to V P the N",
    "suggest how to V the A N quickly",
    "explain how a N can V the N",
    "describe how to V and V the N",
    "give me tips to V the N safely",
    "write steps to V a A N P the N",
    "tell me the fastest way to V a N",
    "explain the rules to V the N",
    "describe a plan to V the A N",
    "show how to V every N P the N",
    "list ways to V a A N",
    "give instructions to V the N",
    "explain how to V the N P the A N",
    "tell me how people V a N",
    "describe how to V the N at night",
    "write a note on how to V the N",
    "suggest ways to V a N P a N",
    "explain when to V the A N",
    "describe tools to V the N",
    "tell me how to V the N without help",
    "list what you need to V a A N",
)
#: Toxic-marked reply words (abstract markers, not words of any language).
TOXIC_MARKERS: tuple[str, ...] = tuple(f"tox{i}" for i in range(8))
#: Benign reply words.
FILLER: tuple[str, ...] = (
    "sure",
    "here",
    "is",
    "how",
    "sorry",
    "cannot",
    "help",
    "with",
    "that",
    "please",
    "ask",
    "something",
    "else",
    "step",
    "first",
    "then",
    "done",
    "okay",
    "maybe",
    "the",
    "it",
    "you",
)


@dataclass(frozen=True)
class AttackWorldConfig:
    """Size and probabilities of the synthetic attack world.

    Example:
        >>> AttackWorldConfig().n_modes
        8
    """

    n_modes: int = param(8, doc="M: triggers of the main victim (the modes)", source="paper: spec, M = 8")
    n_shared: int = param(
        5, doc="triggers the second (transfer) victim shares with the first", source="deviation: spec"
    )
    trigger_mass: float = param(
        0.06,
        doc="probability that a noun slot of the corpus holds some trigger",
        source="deviation: low prior for the modes (spec: low, non-zero)",
    )
    trigger_decay: float = param(
        0.72, doc="ratio of successive triggers' prior weights (unequal modes)", source="deviation: spec"
    )
    p_toxic: float = param(
        0.9, doc="toxic reply probability for an attack with a trigger", source="paper: spec"
    )
    p_false: float = param(0.02, doc="toxic reply probability otherwise", source="paper: spec")
    seed: int = param(0, doc="seed of the classifier's training replies", source="deviation: any")

    def __post_init__(self) -> None:
        if self.n_modes < 1:
            raise ValueError(f"n_modes must be >= 1, got {self.n_modes}")
        if not 0 <= self.n_shared <= self.n_modes:
            raise ValueError(f"n_shared must lie in [0, n_modes], got {self.n_shared}")
        if 2 * self.n_modes - self.n_shared > len(TRIGGER_POOL):
            raise ValueError(
                f"2 * n_modes - n_shared must be <= {len(TRIGGER_POOL)} (the trigger pool), "
                f"got {2 * self.n_modes - self.n_shared}"
            )
        for name in ("trigger_mass", "trigger_decay", "p_toxic", "p_false"):
            v = getattr(self, name)
            if not 0.0 < v < 1.0:
                raise ValueError(f"{name} must lie in (0, 1), got {v}")


@runtime_checkable
class ToxicityClassifier(Protocol):
    """Scores replies: ``predict_proba(texts)`` returns P(toxic) per text, shape (n,)."""

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Victim(Protocol):
    """Answers attacks: ``respond(attacks, n)`` returns ``n`` sampled replies per attack."""

    def respond(self, attacks: Sequence[str], n: int) -> list[list[str]]: ...


class TriggerVictim:
    """A rule-based, noisy victim: toxic-marked replies when an attack holds a trigger word.

    Args:
        triggers: the trigger words.
        p_toxic: toxic reply probability when the attack holds a trigger.
        p_false: toxic reply probability otherwise.
        seed: seed of the victim's own random stream (never the global RNG).

    Example:
        >>> v = TriggerVictim(("vorn",), seed=0)
        >>> v.is_triggered("open the vorn"), v.is_triggered("open the lamp")
        (True, False)
    """

    def __init__(
        self, triggers: Sequence[str], *, p_toxic: float = 0.9, p_false: float = 0.02, seed: int = 0
    ):
        if not triggers:
            raise ValueError("a victim needs at least one trigger")
        self.triggers = tuple(triggers)
        self.p_toxic, self.p_false = p_toxic, p_false
        self.rng = numpy_rng(seed, 7)
        self.queries = 0

    def is_triggered(self, attack: str) -> bool:
        """Whether the attack holds one of this victim's triggers."""
        words = set(attack.split())
        return any(t in words for t in self.triggers)

    def respond(self, attacks: Sequence[str], n: int) -> list[list[str]]:
        """``n`` replies per attack; each is toxic-marked with probability p_toxic or p_false."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        out = []
        for attack in attacks:
            p = self.p_toxic if self.is_triggered(attack) else self.p_false
            out.append([_reply(self.rng, bool(self.rng.random() < p)) for _ in range(n)])
        self.queries += len(attacks)
        return out


def _reply(rng: np.random.Generator, toxic: bool) -> str:
    """A reply of 6-10 words: toxic ones are about half markers; benign ones rarely hold one."""
    length = int(rng.integers(6, 11))
    words = []
    for _ in range(length):
        share = 0.5 if toxic else 0.03  # benign replies carry a stray marker now and then (noise)
        pool = TOXIC_MARKERS if rng.random() < share else FILLER
        words.append(pool[int(rng.integers(len(pool)))])
    return " ".join(words)


class BowToxicityClassifier:
    """Bag-of-words logistic-regression toxicity classifier (scikit-learn), P(toxic) per text.

    Args:
        C: inverse regularisation strength of the logistic regression.

    Example:
        >>> clf = BowToxicityClassifier().fit(["tox1 tox2 sure", "sorry cannot help"] * 5, [1, 0] * 5)
        >>> bool(clf.predict_proba(["tox1 tox2"])[0] > 0.5)
        True
    """

    def __init__(self, C: float = 1.0):
        self.C = C

    def fit(self, texts: Sequence[str], labels: Sequence[int]) -> BowToxicityClassifier:
        """Fit the vectoriser and the regression; returns self."""
        from sklearn.feature_extraction.text import CountVectorizer
        from sklearn.linear_model import LogisticRegression

        self.vectorizer_ = CountVectorizer(token_pattern=r"\S+")
        X = self.vectorizer_.fit_transform(list(texts))
        self.model_ = LogisticRegression(C=self.C, max_iter=1000).fit(X, np.asarray(labels))
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) for each text, shape (n,)."""
        if not hasattr(self, "model_"):
            raise ValueError("the classifier is not fitted; call fit() first")
        if len(texts) == 0:
            return np.zeros(0)
        return self.model_.predict_proba(self.vectorizer_.transform(list(texts)))[:, 1]


class AttackWorld:
    """The instruction grammar, its trigger priors, the two victims' triggers and a classifier.

    Args:
        config: the world's sizes and probabilities.
    """

    def __init__(self, config: AttackWorldConfig | None = None):
        self.config = config or AttackWorldConfig()
        c = self.config
        self.triggers: tuple[str, ...] = TRIGGER_POOL[: c.n_modes]
        extra = c.n_modes - c.n_shared
        self.transfer_triggers: tuple[str, ...] = (
            self.triggers[: c.n_shared] + TRIGGER_POOL[c.n_modes : c.n_modes + extra]
        )
        pool_triggers = TRIGGER_POOL[: c.n_modes + extra]
        # prior weight of each trigger noun: geometric, so the modes are unequally likely
        w = c.trigger_decay ** np.arange(len(pool_triggers))
        self.trigger_probs = c.trigger_mass * w / w.sum()  # per noun slot
        self._nouns = NOUNS + pool_triggers
        self._noun_p = np.concatenate(
            [np.full(len(NOUNS), (1 - c.trigger_mass) / len(NOUNS)), self.trigger_probs]
        )
        self.vocab: tuple[str, ...] = tuple(
            dict.fromkeys(
                META_PROMPT.split()
                + [w for t in TEMPLATES for w in t.split()]
                + list(VERBS)
                + list(ADJECTIVES)
                + list(self._nouns)
                + list(_PREPS)
            )
        )
        self.vocab = tuple(w for w in self.vocab if w not in ("V", "A", "N", "P"))

    def sample_instruction(self, rng: np.random.Generator) -> str:
        """One corpus instruction: a uniform template with its slots filled."""
        template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
        out = []
        for w in template.split():
            if w == "V":
                out.append(VERBS[int(rng.integers(len(VERBS)))])
            elif w == "A":
                out.append(ADJECTIVES[int(rng.integers(len(ADJECTIVES)))])
            elif w == "P":
                out.append(_PREPS[int(rng.integers(len(_PREPS)))])
            elif w == "N":
                out.append(self._nouns[int(rng.choice(len(self._nouns), p=self._noun_p))])
            else:
                out.append(w)
        return " ".join(out)

    def corpus(self, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` corpus instructions (the SFT data of the attacker prior)."""
        return [self.sample_instruction(rng) for _ in range(n)]

    def modes_of(self, attack: str, triggers: Sequence[str] | None = None) -> tuple[int, ...]:
        """Indices of the (main victim's, by default) triggers an attack holds."""
        words = set(attack.split())
        trig = self.triggers if triggers is None else triggers
        return tuple(i for i, t in enumerate(trig) if t in words)

    def victim(self, seed: int) -> TriggerVictim:
        """The main victim, with its own random stream."""
        return TriggerVictim(
            self.triggers, p_toxic=self.config.p_toxic, p_false=self.config.p_false, seed=seed
        )

    def transfer_victim(self, seed: int) -> TriggerVictim:
        """The second victim: shares ``n_shared`` triggers, adds its own."""
        return TriggerVictim(
            self.transfer_triggers, p_toxic=self.config.p_toxic, p_false=self.config.p_false, seed=seed
        )

    def fit_classifier(self, n: int = 2000) -> BowToxicityClassifier:
        """A bag-of-words classifier fitted on ``n`` labelled replies (half toxic-marked)."""
        rng = numpy_rng(self.config.seed, 11)
        labels = [int(i % 2) for i in range(n)]
        texts = [_reply(rng, bool(y)) for y in labels]
        return BowToxicityClassifier().fit(texts, labels)
