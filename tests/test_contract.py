"""The same checks over every registered method (DESIGN.md's contract)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from iclr25._core.claims import WALL_CLOCK_SUFFIX, Claim, Verdict, is_test_id, judge
from iclr25._core.config import config_rows
from iclr25._core.registry import REGISTRY, load_claim
from iclr25._core.report import readme_diagnosis

ROOT = Path(__file__).resolve().parents[1]
METHODS = sorted(REGISTRY)
HEADINGS = ("Paper", "What is implemented", "Deviations", "Usage", "Claim check", "Results")


def _dir(name: str) -> Path:
    return ROOT / "src" / "iclr25" / "methods" / name


@pytest.mark.parametrize("name", METHODS)
def test_required_files(name: str) -> None:
    for f in ("__init__.py", "config.py", "claim.py", "README.md"):
        assert (_dir(name) / f).is_file(), f"methods/{name}/{f} is missing"
    assert (ROOT / "tests" / "methods" / name).is_dir(), f"tests/methods/{name} is missing"


@pytest.mark.parametrize("name", METHODS)
def test_public_api_declared_and_documented(name: str) -> None:
    package = importlib.import_module(f"iclr25.methods.{name}")
    assert isinstance(getattr(package, "__all__", None), list | tuple), "__init__ lacks __all__"
    for symbol in package.__all__:
        obj = getattr(package, symbol)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name}.{symbol} has no docstring"


@pytest.mark.parametrize("name", METHODS)
def test_modules_cite_the_paper(name: str) -> None:
    arxiv = load_claim(name).paper.arxiv
    for path in sorted(_dir(name).glob("*.py")):
        module = importlib.import_module(f"iclr25.methods.{name}.{path.stem}")
        doc = inspect.getdoc(module) or ""
        assert doc, f"{path.name} has no module docstring"
        if path.stem not in ("__init__", "config", "claim"):
            assert arxiv in doc or "References" in doc, f"{path.name} does not cite arXiv {arxiv}"


@pytest.mark.parametrize("name", METHODS)
def test_config_defaults_are_traced(name: str) -> None:
    claim = load_claim(name)
    for budget in claim.budgets.values():
        assert dataclasses.is_dataclass(budget.config)
        assert type(budget.config).__dataclass_params__.frozen, "configs must be frozen"
        for key, _, doc, source in config_rows(budget.config):
            assert doc, f"{key} has no doc line"
            assert re.match(r"(paper|deviation): \S", source), (
                f"{key} source {source!r} is not paper:/deviation:"
            )


@pytest.mark.parametrize("name", METHODS)
def test_registry_entry_matches_claim(name: str) -> None:
    claim, entry = load_claim(name), REGISTRY[name]
    assert isinstance(claim, Claim) and claim.name == name
    assert entry.paper.rstrip("?.") in claim.paper.title or claim.paper.title.startswith(
        entry.paper.rstrip("…")
    )
    assert set(claim.budgets) in ({"smoke", "full"}, {"smoke", "full", "long"})
    smoke, full = claim.budgets["smoke"], claim.budgets["full"]
    assert smoke.seconds <= 30, "a smoke seed must take at most 30 s"
    assert full.seeds >= 3, "the full budget runs at least 3 seeds"
    assert full.total_seconds <= 15 * 60, "the full budget's seeds must take at most 15 min together"
    assert (entry.smoke_s, entry.full_s, entry.full_seeds) == (smoke.seconds, full.seconds, full.seeds)
    assert entry.threads == claim.threads, "the registry's threads must be the claim's (JOBS counts cores)"
    long = claim.budgets.get("long")
    assert entry.long_s == (long.total_seconds if long else 0.0)
    if long:
        limit = _LONG_PAST_THE_HOUR.get(name, (60 * 60, ""))[0]
        assert long.total_seconds <= limit and long.seeds >= 3


#: Long budgets allowed past DESIGN's hour, each with its limit and the reason (also in its README).
_LONG_PAST_THE_HOUR = {
    "ftct": (90 * 60, "the learning curve puts the effect past 3k steps; 6k steps take 71 min on 2 cores"),
    "hessian_distill": (
        90 * 60,
        "distilled students still improved at 300 epochs; 600 (undistilled 1,800) take about 45 min, 2 cores",
    ),
}


def _test_exists(node_id: str) -> bool:
    """Whether ``tests/...py::[Class::]name[params]`` names a test function defined in that file."""
    path, _, rest = node_id.partition("::")
    file = ROOT / path
    if not file.is_file():
        return False
    *classes, func = rest.split("[", 1)[0].split("::")
    tree = ast.parse(file.read_text())
    scope: list[ast.stmt] = tree.body
    for cls in classes:
        found = [n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls]
        if not found:
            return False
        scope = found[0].body
    return any(isinstance(n, ast.FunctionDef) and n.name == func for n in scope)


@pytest.mark.parametrize("name", METHODS)
def test_every_gate_names_a_falsifier_that_exists(name: str) -> None:
    claim = load_claim(name)
    by_name = {c.name: c for c in claim.criteria}
    for c in claim.criteria:
        if not c.gating or c.control or c.precondition:
            continue
        assert c.falsifier, f"gate {c.name} names no falsifier (a control criterion or a test id)"
        if is_test_id(c.falsifier):
            assert _test_exists(c.falsifier), f"gate {c.name}: no test {c.falsifier}"
        else:
            target = by_name.get(c.falsifier)
            assert target is not None and target.control and target.gating, (
                f"gate {c.name}: falsifier {c.falsifier!r} is not a gating control of the claim"
            )


@pytest.mark.parametrize("name", METHODS)
def test_every_criterion_says_what_it_means(name: str) -> None:
    for c in load_claim(name).criteria:
        assert c.explain.strip(), f"criterion {c.name} has no plain-language explain sentence"


def test_falsifier_check_catches_a_missing_test() -> None:
    assert _test_exists("tests/test_contract.py::test_falsifier_check_catches_a_missing_test")
    assert not _test_exists("tests/test_contract.py::test_that_does_not_exist")
    assert not _test_exists("tests/nowhere.py::test_x")


@pytest.mark.parametrize("name", METHODS)
def test_non_supported_verdicts_have_a_diagnosis(name: str) -> None:
    text = (_dir(name) / "README.md").read_text()
    claim_check = text.split("## Claim check", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^### +Diagnosis", claim_check, flags=re.M), "README lacks '### Diagnosis'"
    assert readme_diagnosis(name), "the Diagnosis section is empty"


@pytest.mark.parametrize("name", METHODS)
def test_every_claim_has_a_gating_negative_control(name: str) -> None:
    claim = load_claim(name)
    assert any(c.control and c.gating for c in claim.criteria), "no gating negative-control criterion"


@pytest.mark.parametrize("name", METHODS)
def test_every_claim_checks_a_precondition_first(name: str) -> None:
    """DESIGN rule 8: before any gate, the claim shows the bed can discriminate."""
    pre = [c for c in load_claim(name).criteria if c.precondition and c.gating]
    assert pre, "no gating precondition (a ceiling, the foundation's quality, or convergence)"
    for c in pre:
        assert c.explain.strip(), f"precondition {c.name} does not say what it checks"


@pytest.mark.parametrize("name", METHODS)
def test_readme_headings_and_markers(name: str) -> None:
    text = (_dir(name) / "README.md").read_text()
    found = re.findall(r"^## +(.+?)\s*$", text, flags=re.M)
    assert [h for h in found if h in HEADINGS] == list(HEADINGS), f"headings {found}"
    assert "<!-- results:start -->" in text and "<!-- results:end -->" in text


def _usage_blocks(name: str) -> list[str]:
    """The ```python blocks of a method README's Usage section (``python paper-scale`` ones, which
    need local weights, are left out: tests of their own run their loading code on tiny models)."""
    text = (_dir(name) / "README.md").read_text()
    usage = text.split("## Usage", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", usage, flags=re.S)


@pytest.mark.parametrize("name", METHODS)
def test_readme_usage_snippets_run(name: str, tmp_path: Path) -> None:
    """Every ```python block of a method's Usage section runs, in order, in one process."""
    blocks = _usage_blocks(name)
    assert blocks, "the Usage section has no ```python block"
    code = "\n".join(f"# --- Usage block {i + 1} of {len(blocks)}\n{b}" for i, b in enumerate(blocks))
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("name", METHODS)
def test_smoke_claim_runs_finite_and_covers_every_arm(name: str, smoke_runs) -> None:
    claim = load_claim(name)
    result, _ = smoke_runs(name)
    assert set(result.metrics) <= set(claim.arms), "metrics of undeclared arms"
    read = {arm for c in claim.criteria for arm in c.arms}
    assert read <= set(result.metrics), f"arms without metrics: {read - set(result.metrics)}"
    for arm, metrics in result.metrics.items():
        for metric, v in metrics.items():
            assert math.isfinite(v), f"{arm}.{metric} = {v}"
    judgement = judge(claim, "smoke", [result])
    assert judgement.verdict is not Verdict.ERROR, judgement.reason
    assert len(judgement.outcomes) == len(claim.criteria)


@pytest.mark.parametrize("name", METHODS)
def test_smoke_claim_is_deterministic(name: str, smoke_runs) -> None:
    a, b = smoke_runs(name)
    assert a.deterministic_metrics() == b.deterministic_metrics()


@pytest.mark.parametrize("name", METHODS)
def test_wall_clock_never_gates(name: str) -> None:
    for c in load_claim(name).criteria:
        refs = [r for r in (c.a, c.b) if r]
        if any(r.endswith(WALL_CLOCK_SUFFIX) for r in refs):
            assert not c.gating, f"{c.name} gates on wall-clock"


def test_readme_states_the_generated_make_check_time_and_the_smoke_gates() -> None:
    from iclr25._core.report import MAKE_CHECK_MARKERS, make_check_sentence

    text = (ROOT / "README.md").read_text()
    start, end = MAKE_CHECK_MARKERS
    assert text.split(start, 1)[1].split(end, 1)[0] == make_check_sentence(), "run `make report`"
    gating = sorted(n for n in METHODS if not load_claim(n).budgets["smoke"].report_only)
    named = text.split("<!-- smoke-gates:start -->", 1)[1].split("<!-- smoke-gates:end -->", 1)[0]
    assert sorted(x.strip() for x in named.split(",")) == gating, (
        "the README names the claims gating at smoke"
    )
