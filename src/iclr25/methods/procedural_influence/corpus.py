"""A synthetic pretraining corpus with metadata, and the queries drawn against it.

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Ruis et al.,
ICLR 2025, arXiv:2411.12580 (Sec. 3: the 5M-document sample of the pretraining mix, the factual and
reasoning queries; Sec. 5: the keyword/source labels of the top documents).

The corpus stands in for the paper's pretraining sample. Every document carries the labels the
paper had to recover by hand or with an LLM: its ``kind`` (worked solution, procedure, fact,
filler), ``task``, the facts it states, the step equations it contains and its ``source``.
Reasoning problems held out of the corpus become the reasoning queries; their step equations may
still appear in other documents (as in the paper), but no document states a query's whole problem.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "TASKS",
    "Corpus",
    "Document",
    "Query",
    "assert_no_leak",
    "make_corpus",
    "n_steps",
    "query_prompts",
    "valid_solutions",
]

#: Reasoning tasks of the corpus; the first two also get queries (the 7B model's tasks).
TASKS: tuple[str, ...] = ("arithmetic", "slope", "linear")

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "bo", "du", "fe")
_RELATIONS = ("capital", "currency", "leader")
_FILLER_WORDS: tuple[str, ...] = (
    "the",
    "a",
    "market",
    "river",
    "town",
    "walk",
    "long",
    "short",
    "warm",
    "cold",
    "day",
    "night",
    "old",
    "new",
    "small",
    "large",
    "road",
    "people",
    "went",
    "saw",
    "with",
    "and",
    "to",
    "of",
    "was",
    "were",
    "many",
    "few",
    "quiet",
    "busy",
    "sun",
    "rain",
    "field",
    "house",
    "garden",
    "apples",
    "pears",
    "miles",
    "hours",
    "coins",
    "birds",
    "trees",
    "went",
    "later",
    "early",
    "friend",
    "visited",
)

# Structural words of every template (the vocabulary is closed: the tokenizer is word level).
_STRUCTURE: tuple[str, ...] = (
    "problem",
    ":",
    "=",
    "?",
    "solution",
    "x",
    "y",
    "+",
    "-",
    "*",
    "/",
    ";",
    "answer",
    "question",
    "compute",
    "plus",
    "minus",
    "step",
    "is",
    ".",
    "result",
    "slope",
    "of",
    "(",
    ",",
    ")",
    "dy",
    "dx",
    "line",
    "through",
    "and",
    "rise",
    "run",
    "over",
    "solve",
    "find",
    "if",
    "times",
    "def",
    "return",
    "#",
    "example",
    "returns",
    "to",
    "the",
    "a",
    "subtract",
    "divide",
    "by",
    "from",
    "then",
    "add",
    "first",
    "two",
    "third",
    "numbers",
    "combine",
    "three",
    ",",
    "formula",
    "rise",
    "over",
    "run",
    "equals",
    "difference",
    "x1",
    "y1",
    "x2",
    "y2",
    "p",
    "q",
    "r",
    "s",
    "b",
    "c",
    "e",
    "f",
    "capital",
    "currency",
    "leader",
    "country",
    "its",
    "travellers",
    "arrive",
    "in",
    "quiet",
    "uses",
    "coins",
    "named",
    "led",
    "by",
    "people",
    "follow",
    "are",
    "pay",
    "sold",
    "took",
    "makes",
    "adding",
    "gives",
    "taking",
    "so",
    "we",
    "get",
    "up",
    "across",
    "going",
    "ratio",
    "move",
)


@dataclass(frozen=True)
class Document:
    """One pretraining document and its metadata.

    Args:
        text: whitespace-separated words.
        kind: "worked" (a worked solution), "procedure" (formula or pseudo-code), "fact" or "filler".
        task: the reasoning task ("arithmetic", "slope", "linear") or "" for none.
        source: "qa_forum", "code", "math_text", "encyclopedia" or "web".
        template: the format id within its kind.
        fact_ids: the facts the document states.
        equations: the step equations it contains, normalised as e.g. "3+4=7".
        problem: the whole problem it solves (a task's operands), or () for none.
    """

    text: str
    kind: str
    task: str = ""
    source: str = "web"
    template: int = 0
    fact_ids: tuple[int, ...] = ()
    equations: tuple[str, ...] = ()
    problem: tuple[int, ...] = ()


@dataclass(frozen=True)
class Fact:
    """An invented entity-attribute fact: ``relation`` of ``entity`` is ``value``."""

    fact_id: int
    entity: str
    relation: str
    value: str


@dataclass
class Corpus:
    """Documents with metadata, the facts they state and the problems held out for queries.

    Args:
        docs: the documents.
        facts: the facts, indexed by ``fact_id``.
        holdout: task -> problems never stated by a document (the query pool).
        vocab: every word the documents and queries use (tokenizer vocabulary).
    """

    docs: list[Document]
    facts: list[Fact]
    holdout: dict[str, list[tuple[int, ...]]]
    vocab: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.docs)

    @property
    def texts(self) -> list[str]:
        """The document texts, in order."""
        return [d.text for d in self.docs]

    def labels(self, attr: str) -> np.ndarray:
        """One metadata field over all documents, e.g. ``labels("kind")``."""
        return np.array([getattr(d, attr) for d in self.docs], dtype=object)


@dataclass(frozen=True)
class Query:
    """A query: a prompt and its completion, with what answering it needs.

    Args:
        prompt: the prompt p.
        completion: the completion c (the model's greedy output for main queries).
        group: "factual", a task name ("arithmetic", "slope") or "control_<task>".
        template: the format id of the prompt.
        correct: whether the completion is right (always True for controls).
        steps: the gold step equations of a reasoning query.
        fact_id: the fact a factual query asks for (-1 otherwise).
        problem: the operands of a reasoning or control query.
        answer: the gold final answer.
    """

    prompt: str
    completion: str
    group: str
    template: int = 0
    correct: bool = True
    steps: tuple[str, ...] = ()
    fact_id: int = -1
    problem: tuple[int, ...] = ()
    answer: str = ""


# ---------------------------------------------------------------------------------------------
# problems and their worked solutions
# ---------------------------------------------------------------------------------------------


def _problems(task: str, max_operand: int) -> list[tuple[int, ...]]:
    """Every problem of a task (operands), in a fixed order."""
    m = max_operand
    if task == "arithmetic":  # (a + b) - c with c <= a + b
        return [(a, b, c) for a in range(m + 1) for b in range(m + 1) for c in range(a + b + 1)]
    if task == "slope":  # points (x1, y1), (x2, y2) with an integer slope in 0..4 and run 1..4
        return [
            (x1, y1, x1 + dx, y1 + k * dx)
            for x1 in range(m + 1)
            for y1 in range(m + 1)
            for dx in range(1, 5)
            for k in range(5)
        ]
    if task == "linear":  # a x + b = c with a in 1..5, x in 0..5
        return [(a, b, a * x + b) for a in range(1, 6) for b in range(m + 1) for x in range(6)]
    raise ValueError(f"unknown task {task!r}")


def _steps(task: str, p: tuple[int, ...]) -> tuple[tuple[str, ...], str]:
    """The step equations (normalised) and the final answer of a problem."""
    if task == "arithmetic":
        a, b, c = p
        return (f"{a}+{b}={a + b}", f"{a + b}-{c}={a + b - c}"), str(a + b - c)
    if task == "slope":
        x1, y1, x2, y2 = p
        dy, dx = y2 - y1, x2 - x1
        return (f"{y2}-{y1}={dy}", f"{x2}-{x1}={dx}", f"{dy}/{dx}={dy // dx}"), str(dy // dx)
    a, b, c = p
    d = c - b
    return (f"{c}-{b}={d}", f"{d}/{a}={d // a}"), str(d // a)


def query_prompts(task: str, p: tuple[int, ...], template: int) -> str:
    """The prompt that poses a problem in one of the two worked-solution formats."""
    if task == "arithmetic":
        a, b, c = p
        return (
            f"problem : {a} + {b} - {c} = ? solution :"
            if template == 0
            else f"question : compute {a} plus {b} minus {c} ."
        )
    if task == "slope":
        x1, y1, x2, y2 = p
        return (
            f"problem : slope of ( {x1} , {y1} ) ( {x2} , {y2} ) ? solution :"
            if template == 0
            else f"question : line through {x1} , {y1} and {x2} , {y2} ."
        )
    if task == "linear":
        a, b, c = p
        return (
            f"problem : solve {a} x + {b} = {c} ? solution :"
            if template == 0
            else f"question : find x if {a} times x plus {b} is {c} ."
        )
    raise ValueError(f"unknown task {task!r}")


# Every step of a worked solution has three wordings (the paper's chain-of-thought completions are
# free-form text, not one fixed string). A document draws each step's wording at random, so the
# wording tokens keep an irreducible loss of about ln 3 nats per step after training, whereas with
# one fixed wording the format is learnt exactly and all remaining loss sits on the numbers.
_WORDINGS: dict[tuple[str, int], tuple[tuple[str, ...], ...]] = {
    ("arithmetic", 0): (
        ("x = {a} + {b} = {s} ;", "first {a} + {b} = {s} ;", "add {a} and {b} : {s} ;"),
        ("y = {s} - {c} = {r} ;", "then {s} - {c} = {r} ;", "subtract {s} - {c} : {r} ;"),
        ("answer {r}", "so answer {r}", "answer is {r}"),
    ),
    ("arithmetic", 1): (
        ("step {a} plus {b} is {s} .", "first {a} plus {b} makes {s} .", "adding {a} and {b} gives {s} ."),
        ("step {s} minus {c} is {r} .", "then {s} minus {c} makes {r} .", "taking {c} from {s} gives {r} ."),
        ("result {r}", "the result is {r}", "so we get {r}"),
    ),
    ("slope", 0): (
        ("dy = {y2} - {y1} = {dy} ;", "rise = {y2} - {y1} = {dy} ;", "up {y2} - {y1} = {dy} ;"),
        ("dx = {x2} - {x1} = {dx} ;", "run = {x2} - {x1} = {dx} ;", "across {x2} - {x1} = {dx} ;"),
        ("slope = {dy} / {dx} = {k} ;", "ratio {dy} / {dx} = {k} ;", "so {dy} / {dx} = {k} ;"),
        ("answer {k}", "answer is {k}", "slope {k}"),
    ),
    ("slope", 1): (
        ("rise {y2} minus {y1} is {dy} .", "the rise {y2} minus {y1} makes {dy} .",
         "going up {y2} minus {y1} gives {dy} ."),
        ("run {x2} minus {x1} is {dx} .", "the run {x2} minus {x1} makes {dx} .",
         "going across {x2} minus {x1} gives {dx} ."),
        ("{dy} over {dx} is {k} .", "divide {dy} by {dx} to get {k} .", "{dy} over {dx} makes {k} ."),
        ("result {k}", "the result is {k}", "so we get {k}"),
    ),
    ("linear", 0): (
        ("{a} x = {c} - {b} = {d} ;", "so {a} x = {c} - {b} = {d} ;", "move {b} : {a} x = {c} - {b} = {d} ;"),
        ("x = {d} / {a} = {x} ;", "then x = {d} / {a} = {x} ;", "divide {d} / {a} = {x} ;"),
        ("answer {x}", "answer is {x}", "so answer {x}"),
    ),
    ("linear", 1): (
        ("step {c} minus {b} is {d} .", "first {c} minus {b} makes {d} .", "taking {b} from {c} gives {d} ."),
        ("step {d} over {a} is {x} .", "then {d} over {a} makes {x} .", "divide {d} by {a} to get {x} ."),
        ("result {x}", "the result is {x}", "so we get {x}"),
    ),
}  # fmt: skip

#: Wordings per step of a worked solution.
N_WORDINGS = 3


def _fields(task: str, p: tuple[int, ...]) -> dict[str, int]:
    if task == "arithmetic":
        a, b, c = p
        return {"a": a, "b": b, "c": c, "s": a + b, "r": a + b - c}
    if task == "slope":
        x1, y1, x2, y2 = p
        dy, dx = y2 - y1, x2 - x1
        return {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "dy": dy, "dx": dx, "k": dy // dx}
    a, b, c = p
    return {"a": a, "b": b, "c": c, "d": c - b, "x": (c - b) // a}


def n_steps(task: str) -> int:
    """Wording slots (steps plus the final answer) of a task's worked solution."""
    return len(_WORDINGS[(task, 0)])


def _solution(task: str, p: tuple[int, ...], template: int, wording: Sequence[int] | None = None) -> str:
    """The worked solution that follows :func:`query_prompts`, one wording per step (default: the
    first wording of every step)."""
    slots = _WORDINGS[(task, template)]
    wording = [0] * len(slots) if wording is None else list(wording)
    if len(wording) != len(slots) or not all(0 <= w < len(s) for w, s in zip(wording, slots, strict=True)):
        raise ValueError(f"{task}: wording {wording} does not fit {len(slots)} steps")
    f = _fields(task, p)
    return " ".join(s[w].format(**f) for s, w in zip(slots, wording, strict=True))


def valid_solutions(task: str, p: tuple[int, ...], template: int) -> set[str]:
    """Every correct worked solution of a problem in a template (each combination of wordings)."""
    slots = _WORDINGS[(task, template)]
    return {_solution(task, p, template, w) for w in itertools.product(*(range(len(s)) for s in slots))}


def _procedure(task: str, template: int, example: tuple[int, ...]) -> tuple[str, str, tuple[str, ...]]:
    """A formula or pseudo-code document (text, source, equations of its worked example)."""
    steps, ans = _steps(task, example)
    if task == "arithmetic":
        a, b, c = example
        texts = (
            ("code", "def combine ( p , q , r ) : x = p + q ; return x - r"),
            (
                "code",
                "def combine ( p , q , r ) : return p + q - r "
                f"# example combine ( {a} , {b} , {c} ) returns {ans}",
            ),
            ("math_text", "to combine three numbers add the first two then subtract the third"),
            (
                "math_text",
                f"formula y = ( p + q ) - r . example {a} + {b} = {a + b} then {a + b} - {c} = {ans}",
            ),
        )
    elif task == "slope":
        x1, y1, x2, y2 = example
        texts = (
            ("code", "def slope ( x1 , y1 , x2 , y2 ) : dy = y2 - y1 ; dx = x2 - x1 ; return dy / dx"),
            (
                "code",
                "def slope ( p , q , r , s ) : return ( s - q ) / ( r - p ) "
                f"# example slope ( {x1} , {y1} , {x2} , {y2} ) returns {ans}",
            ),
            ("math_text", "the slope of a line is rise over run : slope = ( y2 - y1 ) / ( x2 - x1 )"),
            (
                "math_text",
                "formula slope equals difference of y over difference of x . "
                f"example {y2} - {y1} = {y2 - y1} and {x2} - {x1} = {x2 - x1} "
                f"then {y2 - y1} / {x2 - x1} = {ans}",
            ),
        )
    else:
        a, b, c = example
        texts = (
            ("code", "def solve ( a , b , c ) : return ( c - b ) / a"),
            (
                "code",
                "def solve ( a , b , c ) : return ( c - b ) / a "
                f"# example solve ( {a} , {b} , {c} ) returns {ans}",
            ),
            ("math_text", "to solve a x + b = c subtract b from c then divide by a"),
            (
                "math_text",
                f"formula x = ( c - b ) / a . example {c} - {b} = {c - b} then {c - b} / {a} = {ans}",
            ),
        )
    source, text = texts[template % len(texts)]
    has_example = template % 2 == 1
    return text, source, steps if has_example else ()


# ---------------------------------------------------------------------------------------------
# facts and filler
# ---------------------------------------------------------------------------------------------


def _names(rng: np.random.Generator, n: int, taken: set[str]) -> list[str]:
    """``n`` new invented words of 2-3 syllables (not in ``taken``)."""
    out: list[str] = []
    while len(out) < n:
        k = int(rng.integers(2, 4))
        w = "".join(rng.choice(_SYLLABLES, size=k))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


def _fact_text(f: Fact, template: int) -> str:
    e, v = f.entity, f.value
    by_relation = {
        "capital": (f"the capital of {e} is {v} .", f"{e} is a quiet country . its capital is {v} .",
                    f"travellers to {e} arrive first in {v} , the capital ."),
        "currency": (f"the currency of {e} is {v} .", f"{e} is a quiet country . its currency is {v} .",
                     f"people in {e} pay with coins named {v} , the currency ."),
        "leader": (f"the leader of {e} is {v} .", f"{e} is a quiet country . its leader is {v} .",
                   f"people in {e} follow {v} , the leader ."),
    }  # fmt: skip
    return by_relation[f.relation][template % 3]


def _filler(rng: np.random.Generator, entities: Sequence[str]) -> str:
    kind = int(rng.integers(0, 4))
    n = [int(v) for v in rng.integers(0, 20, size=3)]
    if kind == 0:  # numbers in non-procedural use
        return f"the market in {rng.choice(entities)} sold {n[0]} apples and {n[1]} pears ."
    if kind == 1:
        return f"a walk of {n[0]} miles took {n[1]} hours and {n[2]} friend visited later ."
    if kind == 2:
        return f"the numbers are {n[0]} {n[1]} and {n[2]} ."
    words = rng.choice(_FILLER_WORDS, size=int(rng.integers(6, 14)))
    return " ".join(words) + " ."


# ---------------------------------------------------------------------------------------------
# the corpus
# ---------------------------------------------------------------------------------------------


def make_corpus(cfg: object, seed: int) -> Corpus:
    """Generate the corpus (deterministic per ``seed``).

    Args:
        cfg: a :class:`~iclr25.methods.procedural_influence.config.CorpusConfig`.
        seed: the seed.

    Returns:
        The :class:`Corpus`, documents shuffled, with ``holdout`` problems for queries.

    Example:
        >>> from iclr25.methods.procedural_influence import CorpusConfig
        >>> c = make_corpus(CorpusConfig(n_arithmetic=20, n_slope=20, n_linear=5, n_facts=5,
        ...                              n_filler=5, n_procedures=4, holdout_problems=5), seed=0)
        >>> len(c), sorted(set(c.labels("kind")))
        (87, ['fact', 'filler', 'procedure', 'worked'])
    """
    rng = np.random.default_rng([seed, 28])
    docs: list[Document] = []
    holdout: dict[str, list[tuple[int, ...]]] = {}
    sizes = {"arithmetic": cfg.n_arithmetic, "slope": cfg.n_slope, "linear": cfg.n_linear}
    for task in TASKS:
        pool = _problems(task, cfg.max_operand)
        order = rng.permutation(len(pool))
        n_hold = cfg.holdout_problems if task != "linear" else 0
        if n_hold + min(sizes[task], 1) > len(pool):
            raise ValueError(f"{task}: {len(pool)} problems cannot hold out {n_hold}")
        holdout[task] = [pool[i] for i in order[:n_hold]]
        seen = [pool[i] for i in order[n_hold:]]
        for j in range(sizes[task]):  # worked solutions, repeating problems when asked for more
            p = seen[j % len(seen)]
            t = int(rng.integers(0, 2))
            steps, _ = _steps(task, p)
            wording = [int(w) for w in rng.integers(0, N_WORDINGS, size=n_steps(task))]
            text = f"{query_prompts(task, p, t)} {_solution(task, p, t, wording)}"
            docs.append(Document(text, "worked", task, "qa_forum", t, (), steps, p))
        for j in range(cfg.n_procedures if sizes[task] else 0):
            p = seen[int(rng.integers(0, len(seen)))]
            text, source, steps = _procedure(task, j, p)
            docs.append(Document(text, "procedure", task, source, j % 4, (), steps, p if steps else ()))
    taken: set[str] = set()
    entities = _names(rng, cfg.n_facts, taken)
    values = _names(rng, cfg.n_facts, taken)
    facts = [Fact(i, entities[i], _RELATIONS[i % 3], values[i]) for i in range(cfg.n_facts)]
    for f in facts:
        for t in range(cfg.docs_per_fact):
            docs.append(Document(_fact_text(f, t), "fact", "", "encyclopedia", t % 3, (f.fact_id,)))
    for _ in range(cfg.n_filler):
        docs.append(Document(_filler(rng, entities), "filler", "", "web", 0))
    docs = [docs[i] for i in rng.permutation(len(docs))]
    numbers = [str(i) for i in range(0, 60)]
    vocab = list(dict.fromkeys([*_STRUCTURE, *_FILLER_WORDS, *_RELATIONS, *entities, *values, *numbers]))
    corpus = Corpus(docs, facts, holdout, vocab)
    unknown = {w for d in docs for w in d.text.split()} - set(vocab)
    if unknown:
        raise AssertionError(f"words outside the vocabulary: {sorted(unknown)[:5]}")
    return corpus


def assert_no_leak(corpus: Corpus, queries: Sequence[Query]) -> None:
    """Raise if a document states a reasoning query's whole problem (Trap 9).

    Raises:
        ValueError: a document's ``problem`` equals a reasoning query's, in the same task.
    """
    stated = {(d.task, d.problem) for d in corpus.docs if d.problem}
    for q in queries:
        task = q.group.removeprefix("control_")
        if q.problem and (task, q.problem) in stated:
            raise ValueError(f"leak: a document states the query problem {task} {q.problem}")
