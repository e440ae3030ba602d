"""The ``iclr25`` command line: list · describe · check · report.

Bad input (unknown method, bad ``--set``, bad budget, unwritable ``--out``, missing extra)
gets one ``error:`` line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from iclr25._core.registry import REGISTRY, MissingExtraError, UnknownMethodError, get_entry, load_claim

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


@app.command("list")
def list_methods() -> None:
    """List the methods: name, paper, claim, budgets and expected time per seed."""
    table = Table(title="iclr25 methods", show_lines=False)
    for col in ("name", "paper", "claim", "budgets (time per seed)", "extra"):
        table.add_column(col, overflow="fold")
    for e in REGISTRY.values():
        table.add_row(
            e.name,
            e.paper,
            e.claim,
            f"smoke {_seconds(e.smoke_s)} · full {_seconds(e.full_s)}",
            e.extra or "—",
        )
    _out.print(table)


@app.command()
def describe(name: Annotated[str, typer.Argument(help="method name (see `iclr25 list`)")]) -> None:
    """Show a method's claim, criteria, config defaults with their sources, and deviations."""
    from iclr25._core.config import config_rows

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
    crit = Table(title="criteria")
    for col in ("name", "rule", "gates", "paper"):
        crit.add_column(col, overflow="fold")
    for c in claim.criteria:
        crit.add_row(c.name, c.describe(), "yes" if c.gating else "report", c.paper or "—")
    _out.print(crit)
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
    budgets = ", ".join(
        f"{b.name}: {b.seeds} seed(s), ~{b.seconds:.0f} s/seed" + (" (report-only)" if b.report_only else "")
        for b in claim.budgets.values()
    )
    _out.print(f"[bold]Budgets.[/bold] {budgets}", highlight=False)
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


@app.command()
def check(
    names: Annotated[
        list[str] | None, typer.Argument(help="methods to check (default: none; see --all)")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="check every registered method")] = False,
    budget: Annotated[str, typer.Option(help="smoke (seconds) or full (minutes; verdicts count)")] = "full",
    seeds: Annotated[int | None, typer.Option(help="number of seeds (default: the budget's)")] = None,
    seed: Annotated[int, typer.Option(help="first seed")] = 0,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="override a config field: key=value")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="report folder (default: reports/<time>-<budget>)")] = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto")] = "cpu",
    jobs: Annotated[int, typer.Option(help="parallel worker processes")] = 1,
) -> None:
    """Run claim checks and write a report; exit 0 only if every claim is SUPPORTED."""
    from iclr25._core.config import ConfigError

    if budget not in ("smoke", "full"):
        raise _fail(f"--budget must be smoke or full, got {budget!r}")
    if seeds is not None and seeds < 1:
        raise _fail(f"--seeds must be at least 1, got {seeds}")
    if seed < 0:
        raise _fail(f"--seed must be non-negative, got {seed}")
    if jobs < 1:
        raise _fail(f"--jobs must be at least 1, got {jobs}")
    chosen = list(REGISTRY) if all_ else list(names or [])
    if not chosen:
        raise _fail("name at least one method, or pass --all (see `iclr25 list`)")
    for name in chosen:
        if name not in REGISTRY:
            raise _fail(str(UnknownMethodError(name)))
    overrides = _parse_sets(set_ or [])
    claims = [_load(name) for name in chosen]
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
    out_dir = _prepare_out(out, budget)
    _run_and_report(claims, budget, seeds, seed, overrides, dev, jobs, out_dir)


def _run_and_report(claims, budget, seeds, seed, overrides, device, jobs, out_dir) -> None:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from iclr25._core.report import render_report, write_claim_json, write_env
    from iclr25._core.runner import run_checks

    write_env(out_dir)
    plan = {c.name: list(range(seed, seed + (seeds or c.budgets[budget].seeds))) for c in claims}
    total = sum(len(v) for v in plan.values())
    colours = {"SUPPORTED": "green", "NOT_SUPPORTED": "red", "INCONCLUSIVE": "yellow", "ERROR": "magenta"}
    verdicts: dict[str, str] = {}
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("claims × seeds ·"),
        TimeElapsedColumn(),
        TextColumn("elapsed · ETA"),
        TimeRemainingColumn(),
        console=_err,
    )

    def seed_done(run, seed_run) -> None:
        progress.advance(task)
        progress.update(task, description=f"{run.claim.name} seed {seed_run.seed} done")

    def claim_done(run) -> None:
        path = write_claim_json(out_dir, run)
        verdict = run.judgement.verdict.value
        verdicts[run.claim.name] = verdict
        progress.console.print(
            f"[{colours[verdict]}]{verdict}[/] {run.claim.name} ({run.seconds:.1f} s): "
            f"{run.judgement.reason} → {path}",
            highlight=False,
        )

    interrupted = False
    with progress:
        task = progress.add_task(f"{budget} budget", total=total)
        try:
            run_checks(
                claims,
                budget=budget,
                seeds=plan,
                overrides=overrides,
                device=device,
                jobs=jobs,
                on_claim_done=claim_done,
                on_seed_done=seed_done,
            )
        except KeyboardInterrupt:
            interrupted = True
    md, html_path = render_report(out_dir)
    _out.print(f"report: {md} · {html_path}", highlight=False)
    if interrupted:
        _err.print(f"interrupted: {len(verdicts)} of {len(claims)} claims finished and were kept")
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


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        _err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
