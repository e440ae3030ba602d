"""The ``iclr25`` command line: list · describe · check · report · compare · pretrain · demo.

Bad input (unknown method, bad ``--set``, bad budget, unwritable ``--out``, missing extra)
gets one ``error:`` line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import datetime as dt
import inspect
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from iclr25._core.registry import (
    REGISTRY,
    MissingExtraError,
    UnknownMethodError,
    get_entry,
    load_claim,
    load_demo,
)

__all__ = ["app", "main"]

app = typer.Typer(
    help="Faithful, offline implementations of ICLR 2025 methods, each with a re-measured claim.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
_out = Console()
_err = Console(stderr=True)


def _fail(message: str) -> typer.Exit:
    _err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(code=2)


def _load(name: str):
    try:
        return load_claim(name)
    except (UnknownMethodError, MissingExtraError) as err:
        raise _fail(str(err)) from None


def _seconds(s: float) -> str:
    return f"~{s:.0f} s" if s < 90 else f"~{s / 60:.0f} min"


def _budgets_cell(e) -> str:
    text = (
        f"smoke {_seconds(e.smoke_s)} · full {e.full_seeds}×{_seconds(e.full_s)} = {_seconds(e.full_total_s)}"
    )
    if e.long_s:
        text += f" · long {_seconds(e.long_s)}"
    return text


@app.command("list")
def list_methods() -> None:
    """List the methods: name, paper, claim, budgets (seeds × time per seed) and extra."""
    from iclr25._core.registry import make_check_seconds

    table = Table(title="iclr25 methods", show_lines=False)
    for col in ("name", "paper", "claim", "budgets (seeds × time per seed)", "extra", "pretrained"):
        table.add_column(col, overflow="fold")
    for e in REGISTRY.values():
        shipped = ", ".join(a.name for a in e.artefacts) or "—"
        table.add_row(e.name, e.paper, e.claim, _budgets_cell(e), e.extra or "—", shipped)
    _out.print(table)
    _out.print(
        f"make check (full budget, every claim): {_seconds(make_check_seconds(1))} at JOBS=1, "
        f"{_seconds(make_check_seconds(2))} at JOBS=2 (expected, from the times above)",
        highlight=False,
    )


@app.command()
def describe(name: Annotated[str, typer.Argument(help="method name (see `iclr25 list`)")]) -> None:
    """Show a method's claim, criteria, config defaults with their sources, presets and deviations."""
    from iclr25._core.config import config_rows
    from iclr25.presets import presets

    try:
        get_entry(name)
    except UnknownMethodError as err:
        raise _fail(str(err)) from None
    claim = _load(name)
    p = claim.paper
    _out.print(f"[bold]{claim.name}[/bold] — {p.title}", highlight=False)
    _out.print(f"{p.authors} · {p.venue} · arXiv {p.arxiv}" + (f" · code {p.code}" if p.code else ""))
    _out.print(f"\n[bold]Claim.[/bold] {claim.statement}\n", highlight=False)
    arms = Table(title="arms")
    arms.add_column("arm")
    arms.add_column("what")
    for arm, what in claim.arms.items():
        arms.add_row(arm, what)
    _out.print(arms)
    _out.print(
        "[bold]Criteria[/bold] (preconditions first, then controls, then gates; report rows are shown only)"
    )
    for c in claim.criteria:
        kind = "control" if c.control else ("gate" if c.gating else "report")
        if c.control and not c.gating:
            kind = "report control"
        if c.precondition:
            kind = "precondition: convergence" if c.convergence else "precondition"
        line = f"- {c.name} [{kind}]: {c.describe()}"
        if c.gating and not c.control and not c.precondition:
            line += f"; falsifier: {c.falsifier or 'none named'}"
        if c.paper:
            line += f"; paper: {c.paper}"
        _out.print(line, markup=False, highlight=False, soft_wrap=True)
        if c.explain:
            _out.print(f"    {c.explain}", markup=False, highlight=False, soft_wrap=True)
    full = claim.budgets.get("full") or next(iter(claim.budgets.values()))
    smoke = (
        dict((r[0], r[1]) for r in config_rows(claim.budgets["smoke"].config))
        if "smoke" in claim.budgets
        else {}
    )
    cfg = Table(title=f"config ({full.name} budget; smoke value where it differs)")
    for col in ("field", full.name, "smoke", "meaning", "source"):
        cfg.add_column(col, overflow="fold")
    for key, val, doc, src in config_rows(full.config):
        sm = smoke.get(key, val)
        cfg.add_row(key, repr(val), "" if sm == val else repr(sm), doc, src)
    _out.print(cfg)
    offered = presets(full.config)
    if offered:
        _out.print("[bold]Paper presets[/bold] (`iclr25 check NAME --preset P`; the fields each replaces):")
        for p_name, fields in offered.items():
            _out.print(f"  - {p_name}: {', '.join(f or 'the whole config' for f in fields)}", highlight=False)
    budgets = ", ".join(
        f"{b.name}: {b.seeds} seed(s), ~{b.seconds:.0f} s/seed" + (" (report-only)" if b.report_only else "")
        for b in claim.budgets.values()
    )
    budgets += f"; runs on {claim.threads} thread{'s' * (claim.threads > 1)}"
    _out.print(f"[bold]Budgets.[/bold] {budgets}", highlight=False)
    if claim.unchecked:
        _out.print("[bold]Not checked yet[/bold] (preconditions the paper's setting implies):")
        for u in claim.unchecked:
            _out.print(f"  - {u}", highlight=False, markup=False)
    entry = get_entry(name)
    if entry.artefacts:
        _out.print("[bold]Pretrained[/bold] (shipped; `iclr25 pretrain` trains them again):")
        for a in entry.artefacts:
            _out.print(f"  - {a.name}: {a.about}", highlight=False, markup=False)
    if claim.deviations:
        _out.print("[bold]Deviations.[/bold]")
        for d in claim.deviations:
            _out.print(f"  - {d}", highlight=False, markup=False)


def _parse_sets(sets: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in sets:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise _fail(f"--set expects key=value, got {item!r}")
        out[key.strip()] = val.strip()
    return out


def _with_preset(claims, budget: str, preset: str, overrides: dict[str, str]) -> dict[str, str]:
    """The ``--set`` overrides of a paper preset, with the user's own ``--set`` on top."""
    from iclr25._core.config import ConfigError
    from iclr25.presets import preset_overrides

    if len(claims) != 1:
        raise _fail("--preset applies to one method's config; name exactly one method")
    try:
        return {**preset_overrides(claims[0].config(budget), preset), **overrides}
    except ConfigError as err:
        raise _fail(f"{claims[0].name}: --preset {preset}: {err}") from None


def _prepare_out(out: Path | None, budget: str) -> Path:
    if out is None:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = Path("reports") / f"{stamp}-{budget}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise _fail(f"--out {str(out)!r} is not writable: {err.strerror or err}") from None
    return out


def _budget_claims(chosen: list[str], budget: str, all_: bool) -> list[str]:
    """The claims to run at ``budget``; ``long`` exists only for some claims."""
    if budget not in ("smoke", "full", "long"):
        raise _fail(f"--budget must be smoke, full or long, got {budget!r}")
    if budget != "long":
        return chosen
    having = [n for n in REGISTRY if REGISTRY[n].long_s]
    have = ", ".join(having) if having else "none yet"
    if all_:
        if not having:
            raise _fail("--budget long: no claim defines a long budget")
        return having
    lacking = [n for n in chosen if n not in having]
    if lacking:
        raise _fail(f"--budget long: {', '.join(lacking)} has no long budget; claims with one: {have}")
    return chosen


def _resume_dir(resume: str, budget: str, overrides: dict[str, str]) -> tuple[Path | None, str]:
    """The run folder to resume (or None for a fresh run) and a line saying what was chosen.

    ``resume`` is a folder, or ``latest``: the newest unfinished run under ``reports/`` at this
    budget; a fresh run starts when there is none, or when it was made from another commit.
    """
    from iclr25._core.report import RunManifestError, check_resumable, find_unfinished

    if resume == "latest":
        found = find_unfinished(Path("reports"), budget)
        if found is None:
            return None, ""
        try:
            check_resumable(found, budget, overrides)
        except RunManifestError as err:
            return None, f"not resuming {found}: {err}; starting a fresh run"
        return found, f"resuming {found} (make check FRESH=1 starts a fresh run)"
    path = Path(resume)
    try:
        check_resumable(path, budget, overrides)
    except RunManifestError as err:
        raise _fail(f"--resume {resume}: {err}") from None
    return path, f"resuming {path}"


@app.command()
def check(
    names: Annotated[
        list[str] | None, typer.Argument(help="methods to check (default: none; see --all)")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="check every registered method")] = False,
    budget: Annotated[
        str, typer.Option(help="smoke (seconds), full (minutes; verdicts count) or long (where defined)")
    ] = "full",
    seeds: Annotated[int | None, typer.Option(help="number of seeds (default: the budget's)")] = None,
    seed: Annotated[int, typer.Option(help="first seed")] = 0,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="override a config field: key=value")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(
            help="a paper preset of the config (see `iclr25 describe NAME`), applied as --set overrides"
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="report folder (default: reports/<time>-<budget>)")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    jobs: Annotated[int, typer.Option(help="parallel worker processes")] = 1,
    resume: Annotated[
        str | None,
        typer.Option(
            help="a report folder to finish (claims whose record is complete are skipped), or "
            "'latest': the newest unfinished run at this budget, else a fresh one"
        ),
    ] = None,
) -> None:
    """Run claim checks and write a report; exit 0 only if every claim is SUPPORTED."""
    from iclr25._core.config import ConfigError
    from iclr25._core.report import MANIFEST

    if seeds is not None and seeds < 1:
        raise _fail(f"--seeds must be at least 1, got {seeds}")
    if seed < 0:
        raise _fail(f"--seed must be non-negative, got {seed}")
    if jobs < 1:
        raise _fail(f"--jobs must be at least 1, got {jobs}")
    if resume is not None and out is not None:
        raise _fail("--resume and --out both name the report folder; give one")
    chosen = list(REGISTRY) if all_ else list(names or [])
    if not chosen:
        raise _fail("name at least one method, or pass --all (see `iclr25 list`)")
    for name in chosen:
        if name not in REGISTRY:
            raise _fail(str(UnknownMethodError(name)))
    chosen = _budget_claims(chosen, budget, all_)
    overrides = _parse_sets(set_ or [])
    claims = [_load(name) for name in chosen]
    if preset is not None:
        overrides = _with_preset(claims, budget, preset, overrides)
    for claim in claims:
        try:
            claim.config(budget, overrides)
        except ConfigError as err:
            raise _fail(f"{claim.name}: {err}") from None
    from iclr25._core.runner import resolve_device

    try:
        dev = resolve_device(device)
    except ValueError as err:
        raise _fail(str(err)) from None
    resumed, line = _resume_dir(resume, budget, overrides) if resume is not None else (None, "")
    if line:
        _err.print(line, markup=False, highlight=False)
    out_dir = _prepare_out(resumed or out, budget)
    plan = {c.name: list(range(seed, seed + (seeds or c.budgets[budget].seeds))) for c in claims}
    if resumed is None:  # a fresh run into a used folder replaces what is there, never keeps it
        (out_dir / MANIFEST).unlink(missing_ok=True)
    _run_and_report(claims, budget, plan, overrides, dev, jobs, out_dir, resuming=resumed is not None)


_COLOURS = {"SUPPORTED": "green", "NOT_SUPPORTED": "red", "INCONCLUSIVE": "yellow", "ERROR": "magenta"}


class _Display:
    """Progress for a person: a live bar on a terminal, timestamped log lines otherwise.

    Inside long claims the runner relays ``progress(stage, done, total)``; on a terminal it
    becomes the bar's description, in a log one line per stage and at most one every 30 s.
    """

    def __init__(self, budget: str, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.live = _err.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("claims × seeds ·"),
            TimeElapsedColumn(),
            TextColumn("elapsed · ETA"),
            TimeRemainingColumn(),
            console=_err,
            disable=not self.live,
        )
        self.task = self.progress.add_task(f"{budget} budget", total=total)
        self.total, self.finished = total, 0
        self._last: dict[tuple[str, int], tuple[str, float]] = {}

    def log(self, text: str) -> None:
        stamp = dt.datetime.now().strftime("%H:%M:%S")
        self.progress.console.print(f"[{stamp}] {text}", highlight=False, markup=False, soft_wrap=True)

    def inner(self, claim: str, seed: int, stage: str, done: int, total: int) -> None:
        text = f"{claim} seed {seed}: {stage} {done}/{total}"
        if self.live:
            self.progress.update(self.task, description=text)
            return
        now = dt.datetime.now().timestamp()
        last_stage, last_time = self._last.get((claim, seed), ("", 0.0))
        if stage != last_stage or now - last_time >= 30 or done == total:
            self._last[(claim, seed)] = (stage, now)
            self.log(text)

    def seed_done(self, run, seed_run) -> None:
        self.finished += 1
        self.progress.advance(self.task)
        state = "raised" if seed_run.error else "done"
        text = f"{run.claim.name} seed {seed_run.seed} {state} ({seed_run.seconds:.0f} s)"
        self.progress.update(self.task, description=text)
        if not self.live:
            self.log(f"{text} · {self.finished}/{self.total} claims × seeds")

    def claim_done(self, run, path: Path) -> None:
        verdict = run.judgement.verdict.value
        self.progress.console.print(
            f"[{_COLOURS[verdict]}]{verdict}[/] {run.claim.name} ({run.seconds:.1f} s): "
            f"{run.judgement.reason} → {path}",
            highlight=False,
        )


def _run_and_report(claims, budget, plan, overrides, device, jobs, out_dir, *, resuming: bool) -> None:
    from iclr25._core.report import (
        complete_records,
        render_report,
        write_claim_json,
        write_env,
        write_manifest,
    )
    from iclr25._core.runner import run_checks

    write_env(out_dir)
    write_manifest(out_dir, budget=budget, plan=plan, overrides=overrides, device=device, complete=False)
    done = complete_records(out_dir, plan) if resuming else {}
    verdicts: dict[str, str] = {name: record["verdict"] for name, record in done.items()}
    todo = [c for c in claims if c.name not in done]
    for name in done:
        _err.print(f"kept {name}: {verdicts[name]} (already complete in {out_dir})", highlight=False)
    display = _Display(budget, sum(len(plan[c.name]) for c in todo))

    def claim_done(run) -> None:
        path = write_claim_json(out_dir, run)
        verdicts[run.claim.name] = run.judgement.verdict.value
        display.claim_done(run, path)

    interrupted = False
    with display.progress:
        try:
            run_checks(
                todo,
                budget=budget,
                seeds=plan,
                overrides=overrides,
                device=device,
                jobs=jobs,
                on_claim_done=claim_done,
                on_seed_done=display.seed_done,
                on_progress=display.inner,
            )
        except KeyboardInterrupt:
            interrupted = True
    if not interrupted:
        write_manifest(out_dir, budget=budget, plan=plan, overrides=overrides, device=device, complete=True)
    md, html_path = render_report(out_dir)
    _out.print(f"report: {md} · {html_path}", highlight=False)
    if interrupted:
        _err.print(
            f"interrupted: {len(verdicts)} of {len(claims)} claims finished and were kept; "
            f"`iclr25 check --resume {out_dir}` (or `make check`) goes on from there"
        )
        raise typer.Exit(code=130)
    if not all(verdicts.get(c.name) == "SUPPORTED" for c in claims):
        raise typer.Exit(code=1)


@app.command()
def report(
    directory: Annotated[Path, typer.Argument(help="a report folder written by `iclr25 check`")],
    update_readme: Annotated[
        bool, typer.Option("--update-readme", help="regenerate the README status and Results tables")
    ] = False,
) -> None:
    """Re-render a report (markdown, HTML, figures) from its JSON records."""
    from iclr25._core.report import load_records, render_report, update_readmes

    if not directory.is_dir():
        raise _fail(f"report folder {str(directory)!r} does not exist")
    if not load_records(directory):
        raise _fail(f"{str(directory)!r} holds no claim records")
    md, html_path = render_report(directory)
    _out.print(f"report: {md} · {html_path}", highlight=False)
    if update_readme:
        root = Path(__file__).resolve().parents[2]
        if not (root / "pyproject.toml").exists() or not (root / "README.md").exists():
            raise _fail("--update-readme needs a source checkout (pip install -e .)")
        try:
            for path in update_readmes(directory, root):
                _out.print(f"updated {path.relative_to(root)}", highlight=False)
        except ValueError as err:
            raise _fail(str(err)) from None


@app.command()
def compare(
    dir_a: Annotated[Path, typer.Argument(help="a report folder (e.g. yours)")],
    dir_b: Annotated[Path, typer.Argument(help="another report folder (e.g. the one the README quotes)")],
    show: Annotated[int, typer.Option(help="differing per-seed metrics listed per claim")] = 8,
) -> None:
    """Print per-claim, per-seed differences of two report folders, and of their env.json.

    Exit code 0 when every shared claim has the same verdict, 1 otherwise.
    """
    from iclr25._core.compare import compare_runs
    from iclr25._core.report import _fmt

    for d in (dir_a, dir_b):
        if not d.is_dir():
            raise _fail(f"report folder {str(d)!r} does not exist")
    result = compare_runs(dir_a, dir_b)
    if not result.claims:
        raise _fail(f"{str(dir_a)!r} and {str(dir_b)!r} share no claim record")
    table = Table(title=f"A = {dir_a} · B = {dir_b}")
    for col in ("claim", "verdict A", "verdict B", "seeds", "metrics equal", "largest relative difference"):
        table.add_column(col, overflow="fold")
    for c in result.claims:
        worst = max(c.differing, key=lambda d: d.relative, default=None)
        table.add_row(
            c.name,
            c.verdict_a,
            c.verdict_b + ("" if c.verdict_a == c.verdict_b else " ≠"),
            f"{c.seeds_a}" + ("" if c.seeds_a == c.seeds_b else f" / {c.seeds_b}"),
            f"{c.compared - len(c.differing)}/{c.compared}",
            "—" if worst is None else f"{worst.relative:.2%} ({worst.metric}, seed {worst.seed})",
        )
    _out.print(table)
    for c in result.claims:
        if not c.differing:
            continue
        _out.print(f"\n[bold]{c.name}[/bold]: criterion medians A → B", highlight=False)
        for name, a, b in c.medians:
            mark = "" if a == b or (a != a and b != b) else "  ≠"
            _out.print(f"  {name}: {_fmt(a)} → {_fmt(b)}{mark}", markup=False, highlight=False)
        _out.print(
            f"  per-seed metrics that differ: {len(c.differing)}; the largest {min(show, len(c.differing))}:",
            highlight=False,
        )
        for d in sorted(c.differing, key=lambda d: -d.relative)[:show]:
            _out.print(
                f"    seed {d.seed} {d.metric}: {d.a!r} → {d.b!r} ({d.relative:.2%})",
                markup=False,
                highlight=False,
            )
    if result.only_a or result.only_b:
        _out.print(
            f"\nonly in A: {', '.join(result.only_a) or '—'}; only in B: {', '.join(result.only_b) or '—'}"
        )
    _out.print("\n[bold]Environment[/bold] (A → B)" + ("" if result.env else ": the same"), highlight=False)
    for key, (a, b) in result.env.items():
        _out.print(f"  {key}: {a} → {b}", markup=False, highlight=False, soft_wrap=True)
    if any(c.verdict_a != c.verdict_b for c in result.claims):
        raise typer.Exit(code=1)


@app.command()
def pretrain(
    name: Annotated[str, typer.Argument(help="method name (see `iclr25 list`, column 'pretrained')")],
    artefact: Annotated[str, typer.Argument(help="which artefact (default: all the method ships)")] = "",
    out: Annotated[
        Path | None,
        typer.Option(
            help="folder to write to (default: pretrained/<method>/<artefact>); resumes an "
            "unfinished run there. Pass the shipped folder to replace what the package ships."
        ),
    ] = None,
) -> None:
    """Train what a method ships as pretrained (its foundation), from scratch, with progress.

    Writes config.json, model.safetensors and training.json (command, commit, steps, wall
    time, loss curve, final quality). An interrupted run resumes when started again on the
    same --out.
    """
    import time

    from iclr25._core.registry import get_artefact
    from iclr25._core.seeding import claim_scope

    try:
        artefacts = get_artefact(name, artefact)
    except (UnknownMethodError, ValueError) as err:
        raise _fail(str(err)) from None
    if out is not None and len(artefacts) > 1:
        raise _fail(f"--out names one folder, but {name} ships {len(artefacts)} artefacts; name one")
    display = _Display("pretrain", len(artefacts))
    with display.progress:
        for a in artefacts:
            folder = out or Path("pretrained") / a.method / a.name
            try:
                recipe = a.load_recipe()
            except MissingExtraError as err:
                raise _fail(str(err)) from None
            display.log(f"{a.method}/{a.name}: {a.about}; expected {_seconds(a.expected_s)} → {folder}")
            start = time.perf_counter()

            def progress(stage: str, done: int, total: int, _a=a) -> None:
                display.inner(f"{_a.method}/{_a.name}", 0, stage, done, total)

            with claim_scope(0, threads=1):
                recipe(folder, progress=progress)
            display.finished += 1
            display.progress.advance(display.task)
            display.log(f"{a.method}/{a.name} done in {time.perf_counter() - start:.0f} s → {folder}")


@app.command()
def demo(
    name: Annotated[str, typer.Argument(help="method name (see `iclr25 list`; the extra column)")],
    input: Annotated[
        Path | None,
        typer.Argument(help="an input file of your own (e.g. a WAV file), where the demo takes one"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="folder for the demo's files")] = Path("demo"),
    seed: Annotated[int, typer.Option("--seed", help="seed of the generated data and tiny models")] = 0,
    model_dir: Annotated[
        Path | None,
        typer.Option("--model-dir", help="a folder of trained models to use instead of the shipped ones"),
    ] = None,
) -> None:
    """Run a method's demo on generated data (or on your INPUT file) and write its files to --out."""
    try:
        fn = load_demo(name)
    except (UnknownMethodError, MissingExtraError, ValueError) as err:
        raise _fail(str(err)) from None
    if input is not None and not input.is_file():
        raise _fail(f"input file {str(input)!r} does not exist")
    options = {}
    if model_dir is not None:
        if not model_dir.is_dir():
            raise _fail(f"--model-dir {str(model_dir)!r} is not a folder")
        if "model_dir" not in inspect.signature(fn).parameters:
            raise _fail(f"demo {name} takes no --model-dir")
        options["model_dir"] = model_dir
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _fail(f"cannot write to --out {str(out)!r}: {err.strerror}") from None
    try:
        written = fn(out, input=input, seed=seed, **options)
    except (ValueError, FileNotFoundError) as err:  # bad input or a missing program, named by the demo
        raise _fail(f"demo {name}: {err}") from None
    for path in written:
        _out.print(f"wrote {path}", highlight=False)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        _err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
