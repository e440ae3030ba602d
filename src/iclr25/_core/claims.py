"""The claim contract: what a claim check is, what it returns, and the one rule that judges it.

A :class:`Claim` re-measures a paper's headline claim: it runs its arms (method, baselines,
negative controls) under one :class:`Budget` and returns a :class:`RunResult` of per-arm
metrics. :class:`Criterion` objects are plain data (``value``, ``diff`` or ``ratio`` of arm
metrics against a threshold); :func:`judge` is the only place a :class:`Verdict` is made.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from iclr25._core.config import apply_overrides

__all__ = [
    "Budget",
    "Claim",
    "Criterion",
    "CriterionOutcome",
    "Judgement",
    "PaperRef",
    "ProgressFn",
    "RunResult",
    "Series",
    "Verdict",
    "diff",
    "fails",
    "is_test_id",
    "judge",
    "no_progress",
    "ratio",
    "value",
]

Op = Literal[">=", "<=", ">", "<"]
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
}


@dataclass(frozen=True)
class PaperRef:
    """Where a claim comes from.

    Args:
        title: the paper's title.
        authors: author list as printed, e.g. "Yutong Yin, Zhaoran Wang".
        arxiv: arXiv id, e.g. "2501.15857".
        code: the official code repository ("owner/name"), or "" if none was released.
        venue: publication venue.
    """

    title: str
    authors: str
    arxiv: str
    code: str = ""
    venue: str = "ICLR 2025"


@dataclass(frozen=True)
class Budget:
    """One compute budget of a claim.

    Args:
        name: "smoke" (runs in the test suite, <= 30 s a seed), "full" (>= 3 seeds, <= 15 min for
            all of them; verdicts count) or "long" (optional, <= 60 min in all, for effects that
            need more compute than ``full``; its verdict is reported beside the full one).
        config: the claim's config dataclass at this budget.
        seeds: how many seeds a check runs by default (seeds ``seed .. seed + seeds - 1``).
        seconds: expected wall time of one seed on one core (or the claim's ``threads``), shown
            by ``iclr25 list``.
        report_only: if True, no criterion gates: the verdict is INCONCLUSIVE with the reason
            "<name>: report-only" (used where the effect does not show at this scale).
        thresholds: per-criterion thresholds that replace the criterion's own at this budget.
    """

    name: Literal["smoke", "full", "long"]
    config: Any
    seeds: int = 1
    seconds: float = 30.0
    report_only: bool = False
    thresholds: Mapping[str, float] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        """Expected wall time of all default seeds."""
        return self.seconds * self.seeds


@dataclass(frozen=True)
class Criterion:
    """A pass rule over arm metrics, as data. Build with :func:`value`, :func:`diff`, :func:`ratio`.

    The statistic is ``a`` (value), ``a - b`` (diff) or ``a / b`` (ratio), where ``a`` and ``b``
    name metrics as ``"arm.metric"``. The criterion *holds* when ``statistic op threshold`` —
    or, for a negative control (``control=True``), when it does **not**: the broken variant
    must miss the bar.

    Args:
        name: short identifier, unique within the claim.
        kind: "value", "diff" or "ratio".
        a: the metric compared, "arm.metric".
        b: the reference metric for diff/ratio, "arm.metric".
        op: comparison operator.
        threshold: the bar.
        gating: whether it decides the verdict (wall-clock is usually report-only).
        control: True for a negative control, which must fail the bar.
        paper: what the paper reports for this quantity (shown beside our numbers).
        falsifier: how this gate is shown to fail, required of every gating criterion that is
            not itself a control: the name of a control criterion of the same claim (a broken
            variant measured in the same run that misses the bar), or a pytest node id
            (``tests/methods/<name>/test_x.py::test_y``) of a test that feeds a broken variant
            and sees the gate fail.
        explain: one plain-language sentence saying what the rule means, for the report.
        precondition: True for a check that the test applies at all (e.g. the base model solves
            the task uncompressed). It does not count towards SUPPORTED; when it fails, the
            verdict is INCONCLUSIVE ("test not applicable"), never a pass or a fail.
        part: the sub-claim this criterion belongs to ("" for none). A claim whose criteria
            name parts gets one verdict per part beside the overall verdict, which still
            covers every gate.
        convergence: True for a precondition that a trained arm converged (see
            :mod:`iclr25._core.convergence`); when only such preconditions fail, the verdict's
            reason class is "not converged" rather than "not applicable".
    """

    name: str
    kind: Literal["value", "diff", "ratio"]
    a: str
    op: Op
    threshold: float
    b: str | None = None
    gating: bool = True
    control: bool = False
    paper: str = ""
    falsifier: str = ""
    explain: str = ""
    precondition: bool = False
    part: str = ""
    convergence: bool = False

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"criterion {self.name}: unknown op {self.op!r}")
        if self.precondition and (self.control or not self.gating):
            raise ValueError(f"criterion {self.name}: a precondition is gating and not a control")
        if self.convergence and not self.precondition:
            raise ValueError(f"criterion {self.name}: convergence=True needs precondition=True")
        if (self.kind == "value") != (self.b is None):
            raise ValueError(f"criterion {self.name}: kind {self.kind!r} with b={self.b!r}")
        for ref in (self.a, self.b):
            if ref is not None and ref.count(".") != 1:
                raise ValueError(f"criterion {self.name}: metric {ref!r} must be 'arm.metric'")

    @property
    def arms(self) -> tuple[str, ...]:
        """The arms this criterion reads."""
        refs = (self.a,) if self.b is None else (self.a, self.b)
        return tuple(r.split(".")[0] for r in refs)

    def statistic(self, metrics: Mapping[str, Mapping[str, float]]) -> float:
        """The criterion's statistic on one seed's metrics (NaN when undefined)."""
        a = _lookup(metrics, self.a)
        if self.kind == "value":
            return a
        b = _lookup(metrics, self.b or "")
        if self.kind == "diff":
            return a - b
        return a / b if b != 0 else (math.inf if a > 0 else math.nan)

    def holds(self, stat: float, threshold: float | None = None) -> bool:
        """Whether the criterion holds for a statistic.

        An undefined (NaN) statistic never holds, for a negative control neither: a control that
        could not be measured is no evidence.
        """
        if math.isnan(stat):
            return False
        bar = self.threshold if threshold is None else threshold
        meets = _OPS[self.op](stat, bar)
        return not meets if self.control else meets

    def describe(self, threshold: float | None = None) -> str:
        """Human-readable rule, e.g. ``diff(method.acc, baseline.acc) >= 0.02``."""
        bar = self.threshold if threshold is None else threshold
        expr = self.a if self.kind == "value" else f"{self.kind}({self.a}, {self.b})"
        rule = f"{expr} {self.op} {bar:g}"
        return f"fails: {rule}" if self.control else rule


def _lookup(metrics: Mapping[str, Mapping[str, float]], ref: str) -> float:
    arm, metric = ref.split(".")
    if arm not in metrics or metric not in metrics[arm]:
        raise KeyError(f"metric {ref!r} missing from the run's results")
    return float(metrics[arm][metric])


def value(a: str, op: Op, threshold: float, *, name: str = "", **kw: Any) -> Criterion:
    """``a op threshold``, e.g. ``value("method.coverage", ">=", 0.67)``."""
    return Criterion(name=name or a, kind="value", a=a, op=op, threshold=threshold, **kw)


def diff(a: str, b: str, op: Op, threshold: float, *, name: str = "", **kw: Any) -> Criterion:
    """``a - b op threshold``, e.g. ``diff("method.acc", "baseline.acc", ">=", 0.02)``."""
    return Criterion(name=name or f"{a}-{b}", kind="diff", a=a, b=b, op=op, threshold=threshold, **kw)


def ratio(a: str, b: str, op: Op, threshold: float, *, name: str = "", **kw: Any) -> Criterion:
    """``a / b op threshold``, e.g. ``ratio("method.time", "baseline.time", "<=", 0.5)``."""
    return Criterion(name=name or f"{a}/{b}", kind="ratio", a=a, b=b, op=op, threshold=threshold, **kw)


def fails(criterion: Criterion) -> Criterion:
    """Turn a bar into a negative control: it holds only when the bar is *missed*."""
    return dataclasses.replace(criterion, control=True)


@dataclass
class Series:
    """Data for one figure: lines of y over a shared x.

    Args:
        title: figure title.
        xlabel: x-axis label.
        ylabel: y-axis label.
        x: x values shared by every line.
        lines: label -> y values (same length as ``x``).
        kind: "line", "scatter" or "bar".
    """

    title: str
    xlabel: str
    ylabel: str
    x: list[float]
    lines: dict[str, list[float]]
    kind: Literal["line", "scatter", "bar"] = "line"

    def __post_init__(self) -> None:
        for label, ys in self.lines.items():
            if len(ys) != len(self.x):
                raise ValueError(
                    f"series {self.title!r}: line {label!r} has {len(ys)} points, x has {len(self.x)}"
                )


#: ``progress(stage, done, total)``: what a long claim reports from its loops, e.g.
#: ``progress("training", 300, 1500)``. The runner shows it on the progress display (or as log
#: lines when there is no terminal).
ProgressFn = Callable[[str, int, int], None]


def no_progress(stage: str, done: int, total: int) -> None:
    """The :data:`ProgressFn` used when nobody listens."""


def is_test_id(falsifier: str) -> bool:
    """Whether a falsifier names a test node (``tests/...py::name``) rather than a control."""
    return falsifier.startswith("tests/") and ".py::" in falsifier


#: Metrics whose names end with this suffix are wall-clock seconds: reported, never gating, and
#: exempt from the same-seed-same-numbers rule that every other metric obeys.
WALL_CLOCK_SUFFIX = "_s"


@dataclass
class RunResult:
    """What one seed of a claim returns.

    Args:
        metrics: arm -> metric -> value (floats). Name wall-clock metrics ``*_s``.
        series: figure name -> :class:`Series` (figures of the report).
        notes: free-form remarks recorded in the report.
    """

    metrics: dict[str, dict[str, float]]
    series: dict[str, Series] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for arm, ms in self.metrics.items():
            for name, v in ms.items():
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise TypeError(f"metric {arm}.{name} must be a float, got {type(v).__name__}")
                ms[name] = float(v)

    def deterministic_metrics(self) -> dict[str, dict[str, float]]:
        """The metrics without wall-clock ones: identical for the same seed."""
        return {
            arm: {k: v for k, v in ms.items() if not k.endswith(WALL_CLOCK_SUFFIX)}
            for arm, ms in self.metrics.items()
        }


@dataclass(frozen=True)
class Claim:
    """A paper's headline claim and how to re-measure it.

    Args:
        name: the method's registry name, e.g. "ftct".
        paper: the citation.
        statement: the claim, quoted or closely paraphrased.
        arms: arm name -> what it is (method, baselines, negative controls).
        criteria: the pass rules; at least one is a negative control.
        budgets: "smoke" and "full" budgets.
        run_fn: ``run_fn(config, *, seed, device) -> RunResult``; it may also take a keyword
            ``progress``, a :data:`ProgressFn` it calls from long loops.
        headline: name of the criterion shown in the report's summary table.
        deviations: where the check departs from the paper's setting, one line each.
        threads: torch/BLAS/numba threads the claim runs on, fixed whatever ``--jobs`` is, so the
            same seed gives the same numbers in every run mode.
        figure: the series key of the headline figure that opens the claim's report section
            (default: the first series).
        unchecked: preconditions the paper's setting implies but this check does not measure
            yet (a ceiling arm, the foundation's quality, an arm's convergence), one line each.
            The report states them beside the verdict, so a reader knows what it does not rest on.
    """

    name: str
    paper: PaperRef
    statement: str
    arms: Mapping[str, str]
    criteria: Sequence[Criterion]
    budgets: Mapping[str, Budget]
    run_fn: Callable[..., RunResult]
    headline: str
    deviations: Sequence[str] = ()
    threads: int = 1
    figure: str = ""
    unchecked: Sequence[str] = ()

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"claim {self.name}: threads must be at least 1, got {self.threads}")
        names = [c.name for c in self.criteria]
        if len(set(names)) != len(names):
            raise ValueError(f"claim {self.name}: duplicate criterion names")
        if self.headline not in names:
            raise ValueError(f"claim {self.name}: headline {self.headline!r} is not a criterion")
        for c in self.criteria:
            unknown = set(c.arms) - set(self.arms)
            if unknown:
                raise ValueError(f"claim {self.name}: criterion {c.name} reads unknown arms {unknown}")
            if c.falsifier and not is_test_id(c.falsifier):
                target = next((d for d in self.criteria if d.name == c.falsifier), None)
                if target is None or not target.control:
                    raise ValueError(
                        f"claim {self.name}: criterion {c.name} names falsifier {c.falsifier!r}, "
                        "which is neither a control criterion of this claim nor a test id"
                    )
        missing = {"smoke", "full"} - set(self.budgets)
        if missing:
            raise ValueError(f"claim {self.name}: lacks the budget(s) {sorted(missing)}")
        for key, budget in self.budgets.items():
            if key != budget.name:
                raise ValueError(f"claim {self.name}: budget key {key!r} != name {budget.name!r}")
            bad = set(budget.thresholds) - set(names)
            if bad:
                raise ValueError(f"claim {self.name}: budget {key} sets thresholds of {bad}")

    def config(self, budget: str, overrides: Mapping[str, str] | None = None) -> Any:
        """The effective config at a budget, with ``--set`` overrides applied and type-checked."""
        if budget not in self.budgets:
            raise ValueError(f"claim {self.name} has no budget {budget!r} (has {sorted(self.budgets)})")
        return apply_overrides(self.budgets[budget].config, overrides or {})

    def run(
        self,
        budget: str,
        seed: int,
        overrides: Mapping[str, str] | None = None,
        *,
        device: str = "cpu",
        progress: ProgressFn | None = None,
    ) -> RunResult:
        """Run one seed of the check at a budget and return its metrics.

        The run happens inside :func:`~iclr25._core.seeding.claim_scope`: a fixed thread count,
        freshly seeded global RNGs, deterministic kernels and full float32 matmul precision, all
        restored afterwards. So the same seed gives the same numbers alone, after another claim
        in the same process, or beside another claim under ``--jobs 2``.
        """
        from iclr25._core.seeding import claim_scope

        config = self.config(budget, overrides)
        kwargs: dict[str, Any] = {"seed": seed, "device": device}
        if "progress" in inspect.signature(self.run_fn).parameters:
            kwargs["progress"] = progress or no_progress
        with claim_scope(seed, threads=self.threads):
            result = self.run_fn(config, **kwargs)
        if not isinstance(result, RunResult):
            raise TypeError(f"claim {self.name}: run_fn returned {type(result).__name__}, not RunResult")
        return result


class Verdict(enum.StrEnum):
    """The outcome of a claim check."""

    SUPPORTED = "SUPPORTED"
    NOT_SUPPORTED = "NOT_SUPPORTED"
    INCONCLUSIVE = "INCONCLUSIVE"
    ERROR = "ERROR"


@dataclass
class CriterionOutcome:
    """One criterion judged over seeds."""

    name: str
    rule: str
    gating: bool
    control: bool
    threshold: float
    per_seed: list[float]
    median: float
    held: int
    needed: int
    passed: bool
    paper: str = ""
    falsifier: str = ""
    explain: str = ""
    measured: int | None = None
    precondition: bool = False
    part: str = ""
    convergence: bool = False

    @property
    def state(self) -> Literal["pass", "fail", "mixed", "not measured"]:
        """pass: held in enough seeds; fail: failed in enough seeds; mixed: neither.

        Out of ``measured`` seeds where given (report-only rows count only the seeds that
        measured them), else out of all seeds.
        """
        if self.passed:
            return "pass"
        n = len(self.per_seed) if self.measured is None else self.measured
        if n == 0:
            return "not measured"
        return "fail" if n - self.held >= self.needed else "mixed"


#: The reason class of a verdict: what it rests on, for the report and the status table.
VerdictClass = Literal[
    "supported",
    "not supported",
    "cannot discriminate",
    "not applicable",
    "not converged",
    "mixed",
    "report-only",
    "error",
]


@dataclass
class Judgement:
    """A verdict with its reason class, its one-line reason and the per-criterion outcomes.

    ``kind`` says what the verdict rests on: "supported" and "not supported" (the bed
    discriminates: preconditions met, controls miss their bars); "cannot discriminate" (a
    control reaches its bar); "not applicable" or "not converged" (a precondition is unmet);
    "mixed" (the seeds disagree); "report-only"; "error". ``parts`` maps each part to
    ``(verdict, reason)``, ``part_kinds`` to its reason class.
    """

    verdict: Verdict
    reason: str
    outcomes: list[CriterionOutcome]
    parts: dict[str, tuple[Verdict, str]] = field(default_factory=dict)
    kind: VerdictClass = "error"
    part_kinds: dict[str, VerdictClass] = field(default_factory=dict)


def _listed(outcomes: Sequence[CriterionOutcome]) -> str:
    return ", ".join(f"{o.name} (median {o.median:.3g}; {o.rule})" for o in outcomes)


def _verdict_of(
    outcomes: Sequence[CriterionOutcome], n: int, needed: int
) -> tuple[Verdict, VerdictClass, str]:
    """The verdict over some judged criteria, in order: preconditions, controls, then the gates.

    1. A precondition that does not pass: the test does not apply (INCONCLUSIVE).
    2. A control that does not clearly miss its bar (the broken variant reaches it, in enough
       seeds or in some): the bed cannot tell the arms apart (INCONCLUSIVE), whatever the
       method did.
    3. Then the method's gates: all pass -> SUPPORTED; any clearly fails -> NOT_SUPPORTED;
       otherwise the seeds disagree (INCONCLUSIVE).
    """
    unmet = [o for o in outcomes if o.precondition and o.state != "pass"]
    if unmet:
        if all(o.convergence for o in unmet):
            return Verdict.INCONCLUSIVE, "not converged", f"not converged: {_listed(unmet)}"
        return (
            Verdict.INCONCLUSIVE,
            "not applicable",
            f"test not applicable: precondition not met: {_listed(unmet)}",
        )
    controls = [o for o in outcomes if o.gating and o.control]
    reached = [o for o in controls if o.state != "pass"]
    if reached:
        names = ", ".join(
            f"{o.name} (median {o.median:.3g}; misses its bar in only {o.held}/{n} seeds)" for o in reached
        )
        return Verdict.INCONCLUSIVE, "cannot discriminate", f"cannot discriminate: control {names}"
    gating = [o for o in outcomes if o.gating and not o.precondition and not o.control]
    if not gating:
        return Verdict.INCONCLUSIVE, "mixed", "no gating criterion"
    failed = [o for o in gating if o.state == "fail"]
    mixed = [o for o in gating if o.state == "mixed"]
    if failed:
        return Verdict.NOT_SUPPORTED, "not supported", f"failed: {_listed(failed)}"
    if mixed:
        names = ", ".join(f"{o.name} held in {o.held}/{n} seeds" for o in mixed)
        return Verdict.INCONCLUSIVE, "mixed", f"mixed over seeds: {names}"
    checks = f"{len(gating)} gating criteria held in >= {needed}/{n} seeds"
    if controls:
        checks += f"; {len(controls)} control(s) missed their bars"
    return Verdict.SUPPORTED, "supported", f"all {checks}"


def judge(
    claim: Claim,
    budget: str,
    results: Sequence[RunResult | None],
    errors: Sequence[str | None] = (),
) -> Judgement:
    """Judge a claim from its per-seed results. The one place verdicts are made.

    Each criterion's statistic is computed per seed; it passes when it holds in at least
    ``ceil(2n/3)`` of ``n`` seeds (its median is reported). A precondition that does not pass
    -> INCONCLUSIVE (the test does not apply, or an arm did not converge). A negative control
    that does not miss its bar in ``ceil(2n/3)`` seeds -> INCONCLUSIVE (the bed cannot
    discriminate), whether the method passed or not. Otherwise all of the method's gates pass
    -> SUPPORTED; any clearly fails (fails in ``ceil(2n/3)`` seeds) -> NOT_SUPPORTED, a
    finding, since the bed could tell; otherwise INCONCLUSIVE. Any seed that raised -> ERROR.
    A report-only budget -> INCONCLUSIVE. Criteria that name a ``part`` are also judged by the
    same rule per part, with the preconditions of that part and of no part, and the controls the
    part's gates name.

    Args:
        claim: the claim.
        budget: the budget name the results were run at.
        results: one RunResult per seed (None where that seed raised).
        errors: one error string per seed (None where it succeeded).

    Returns:
        The :class:`Judgement`.
    """
    errs = [e for e in errors if e]
    if errs or not results or any(r is None for r in results):
        first = errs[0].strip().splitlines()[-1] if errs else "no results"
        return Judgement(Verdict.ERROR, f"{len(errs)} seed(s) raised: {first}", [], kind="error")
    spec = claim.budgets[budget]
    n = len(results)
    needed = math.ceil(2 * n / 3)
    outcomes: list[CriterionOutcome] = []
    try:
        for c in claim.criteria:
            bar = spec.thresholds.get(c.name, c.threshold)
            gating = c.gating and not spec.report_only
            stats = [c.statistic(r.metrics) for r in results if r is not None]
            held = sum(c.holds(s, bar) for s in stats)
            finite = [s for s in stats if not math.isnan(s)]
            med = statistics.median(finite) if finite else math.nan
            # A gate counts every seed (an unmeasured seed is no evidence); a report-only row
            # counts only the seeds that measured it, e.g. an arm run on one seed to save time.
            measured = n if gating else len(finite)
            need = needed if gating else math.ceil(2 * measured / 3)
            outcomes.append(
                CriterionOutcome(
                    name=c.name,
                    rule=c.describe(bar),
                    gating=gating,
                    control=c.control,
                    threshold=bar,
                    per_seed=stats,
                    median=med,
                    held=held,
                    needed=need,
                    passed=measured > 0 and held >= need,
                    paper=c.paper,
                    falsifier=c.falsifier,
                    explain=c.explain,
                    measured=measured,
                    precondition=c.precondition and gating,
                    part=c.part,
                    convergence=c.convergence and gating,
                )
            )
    except KeyError as err:
        return Judgement(Verdict.ERROR, str(err.args[0]), outcomes, kind="error")
    if spec.report_only:
        return Judgement(Verdict.INCONCLUSIVE, f"{budget}: report-only", outcomes, kind="report-only")
    # A precondition that names no part covers every part, one that names a part covers that part
    # (the overall verdict has them all); a part's controls are its own and those its gates name
    # as their falsifier.
    pre = [o for o in outcomes if o.precondition and not o.part]
    parts: dict[str, tuple[Verdict, str]] = {}
    part_kinds: dict[str, VerdictClass] = {}
    for part in dict.fromkeys(o.part for o in outcomes if o.part):
        own = [o for o in outcomes if o.part == part]
        named = {o.falsifier for o in own}
        borrowed = [o for o in outcomes if o.control and o.part != part and o.name in named]
        verdict, kind, reason = _verdict_of([*pre, *own, *borrowed], n, needed)
        parts[part], part_kinds[part] = (verdict, reason), kind
    verdict, kind, reason = _verdict_of(outcomes, n, needed)
    return Judgement(verdict, reason, outcomes, parts, kind, part_kinds)
