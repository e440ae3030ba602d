"""Long-form text: ROUGE similarity and oracle, the human oracle, the report task with a tiny LM."""

import re
from pathlib import Path

import numpy as np
import pytest

from iclr25.methods.scope_gen import (
    OracleBudgetError,
    ReportTask,
    RougeScore,
    human_oracle,
    rouge_oracle,
    rouge_similarity,
)

pytest.importorskip("rouge_score")

REF = "heart is normal . lungs are clear . pleura shows nothing ."


def test_rouge_score_matches_the_library_and_is_symmetric():
    from rouge_score import rouge_scorer

    lib = rouge_scorer.RougeScorer(["rougeL"])
    score = RougeScore()
    a, b = REF, "heart is enlarged . lungs are clear ."
    assert score(a, b) == pytest.approx(lib.score(a, b)["rougeL"].fmeasure)
    assert score(a, b) == score(b, a)
    # By hand: 9 and 6 tokens ("." is dropped), LCS 5 -> P = 5/6, R = 5/9, F = 2/3.
    assert score(a, b) == pytest.approx(2 / 3)


def test_rouge_similarity_matrix():
    s = rouge_similarity(["a b c", "a  B c", "a b d", ""])
    assert s.shape == (4, 4) and np.allclose(s, s.T) and np.allclose(np.diag(s), 1.0)
    assert s[0, 1] == 1.0  # equal after normalisation
    assert s[0, 2] == pytest.approx(2 / 3) and s[0, 3] == 0.0
    assert ((s >= 0) & (s <= 1)).all()


def test_rouge_oracle_threshold_and_memo():
    oracle = rouge_oracle({"x": REF}, 0.9)
    one_wrong = REF.replace("clear", "hazy")  # LCS 8 of 9 tokens: F = 8/9 < 0.9
    assert oracle("x", REF) and not oracle("x", one_wrong)
    assert rouge_oracle({"x": REF}, 0.85)("x", one_wrong)
    assert oracle("x", "  " + REF.upper()) is True  # same normalised text: a memo hit
    assert (oracle.calls, oracle.unique_calls) == (3, 2)
    with pytest.raises(ValueError):
        rouge_oracle({"x": REF}, 1.5)


def test_human_oracle_asks_once_per_unique_sample():
    questions = []
    answers = iter(["maybe", "Y", "no"])

    def ask(q):
        questions.append(q)
        return next(answers)

    oracle = human_oracle(ask, budget=2)
    assert oracle("2 + 2 =", "4") is True  # "maybe" is re-asked
    assert oracle("2 + 2 =", " 4 ") is True  # memo hit, nobody asked
    assert oracle("2 + 2 =", "5") is False
    assert len(questions) == 3 and "sample: 4" in questions[0] and "2 + 2 =" in questions[0]
    with pytest.raises(OracleBudgetError):
        oracle("2 + 2 =", "6")
    stubborn = human_oracle(lambda q: "?", retries=2)
    with pytest.raises(ValueError, match="no yes/no answer"):
        stubborn("q", "a")


def test_report_cases_follow_the_template():
    task = ReportTask(n_prompts=50, reveal=1.0, noise=0.0, seed=3)
    for p, ref in zip(task.prompts, task.references, strict=True):
        words = p.split()
        assert words[0] == "exam" and words[-1] == ":" and len(words) == 8
        tokens = ref.split()  # six sentences "organ verb value ."
        assert len(tokens) == 24 and tokens[3::4] == ["."] * 6
        assert words[1:-1] == tokens[2::4]  # every finding shown and correct
    again = ReportTask(n_prompts=50, reveal=1.0, noise=0.0, seed=3)
    assert again.prompts == task.prompts and again.references == task.references
    hidden = ReportTask(n_prompts=200, reveal=0.0, seed=3)
    assert all(p == "exam " + "unk " * 6 + ":" for p in hidden.prompts)
    with pytest.raises(ValueError):
        ReportTask(reveal=1.5)


def test_report_task_arrays_from_a_tiny_lm():
    torch = pytest.importorskip("torch")
    task = ReportTask(n_prompts=12, seed=0)
    state = torch.get_rng_state()
    gen = task.train_generator(steps=15, seed=0)
    arr = task.to_arrays(gen, 6, np.random.default_rng(0))
    assert torch.equal(state, torch.get_rng_state())  # training and sampling restore the global RNG
    assert arr.qualities.shape == (12, 6) and arr.similarities.shape == (12, 6, 6)
    assert ((arr.qualities >= 0) & (arr.qualities <= 1)).all()
    assert np.allclose(arr.similarities, arr.similarities.transpose(0, 2, 1))
    # Samples with one key are one normalised text: one label, similarity 1.
    for i in range(12):
        for a in range(6):
            for b in range(6):
                if arr.keys[i, a] == arr.keys[i, b]:
                    assert arr.labels[i, a] == arr.labels[i, b] and arr.similarities[i, a, b] == 1.0
    again = task.to_arrays(task.train_generator(steps=15, seed=0), 6, np.random.default_rng(0))
    assert np.array_equal(again.labels, arr.labels) and np.allclose(again.qualities, arr.qualities)
    # The qualities read off generate's logits equal a separate forward pass.
    items, q = gen.sample_batch(task.prompts[:4], 5, np.random.default_rng(1), with_quality=True)
    assert np.allclose(q, gen.quality_batch(task.prompts[:4], items), atol=1e-5)
    assert np.allclose(gen.quality(task.prompts[0], items[0]), q[0], atol=1e-5)
    oracle = task.oracle()
    assert oracle(0, task.references[0]) and not oracle(1, "")


def test_readme_human_in_the_loop_example_runs():
    readme = Path(__file__).resolve().parents[3] / "src" / "iclr25" / "methods" / "scope_gen" / "README.md"
    usage = readme.read_text().split("## Usage", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", usage, flags=re.S)
    assert len(blocks) >= 2 and "human_oracle" in blocks[1]
    exec(compile(blocks[1], "README-usage-2", "exec"), {})
