"""Reports: a JSON record per claim, ``env.json``, figures, ``report.md`` and ``report.html``.

The JSON records are the source of truth; ``report.md``, ``report.html``, the figures and the
README tables are all rendered from them (``iclr25 report DIR`` re-renders), so no result
number is ever typed by hand.
"""

from __future__ import annotations

import base64
import dataclasses
import html
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iclr25._core.config import to_dict
from iclr25._core.env import snapshot
from iclr25._core.runner import ClaimRun

__all__ = [
    "RESULTS_MARKERS",
    "STATUS_MARKERS",
    "claim_record",
    "load_records",
    "render_report",
    "update_readmes",
    "write_claim_json",
    "write_env",
]

STATUS_MARKERS = ("<!-- status:start -->", "<!-- status:end -->")
RESULTS_MARKERS = ("<!-- results:start -->", "<!-- results:end -->")


# --------------------------------------------------------------------------- records


def claim_record(run: ClaimRun) -> dict[str, Any]:
    """The JSON-ready record of one judged claim run."""
    claim, judgement = run.claim, run.judgement
    if judgement is None:
        raise ValueError(f"claim {claim.name} has not been judged")
    return {
        "name": claim.name,
        "paper": dataclasses.asdict(claim.paper),
        "statement": claim.statement,
        "arms": dict(claim.arms),
        "criteria": [dataclasses.asdict(c) for c in claim.criteria],
        "headline": claim.headline,
        "deviations": list(claim.deviations),
        "budget": run.budget,
        "config": to_dict(claim.config(run.budget, run.overrides)),
        "overrides": run.overrides,
        "device": run.device,
        "seeds": [
            {
                "seed": s.seed,
                "seconds": s.seconds,
                "metrics": s.result.metrics if s.result else None,
                "series": {k: dataclasses.asdict(v) for k, v in s.result.series.items()} if s.result else {},
                "notes": s.result.notes if s.result else [],
                "error": s.error,
            }
            for s in run.seeds
        ],
        "outcomes": [dict(dataclasses.asdict(o), state=o.state) for o in judgement.outcomes],
        "verdict": judgement.verdict.value,
        "reason": judgement.reason,
        "seconds": run.seconds,
    }


def write_claim_json(out_dir: Path, run: ClaimRun) -> Path:
    """Write ``<out_dir>/<name>.json`` for a finished claim and return its path."""
    path = out_dir / f"{run.claim.name}.json"
    path.write_text(json.dumps(claim_record(run), indent=2, default=str))
    return path


def write_env(out_dir: Path) -> Path:
    """Write ``<out_dir>/env.json``."""
    path = out_dir / "env.json"
    path.write_text(json.dumps(snapshot(), indent=2))
    return path


def load_records(out_dir: Path) -> list[dict[str, Any]]:
    """Every claim record in a report folder, by name."""
    if not out_dir.is_dir():
        raise FileNotFoundError(f"report folder {str(out_dir)!r} does not exist")
    records = []
    for path in sorted(out_dir.glob("*.json")):
        if path.name == "env.json":
            continue
        data = json.loads(path.read_text())
        if isinstance(data, dict) and "verdict" in data and "outcomes" in data:
            records.append(data)
    return records


# --------------------------------------------------------------------------- numbers


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        if x != 0 and (abs(x) >= 1e4 or abs(x) < 1e-3):
            return f"{x:.3g}"
        return f"{x:.3f}".rstrip("0").rstrip(".") if "." in f"{x:.3f}" else f"{x:.3f}"
    return str(x)


def _median_metric(record: dict[str, Any], ref: str | None) -> float | None:
    if not ref:
        return None
    arm, metric = ref.split(".")
    vals = [
        s["metrics"][arm][metric]
        for s in record["seeds"]
        if s["metrics"] and arm in s["metrics"] and metric in s["metrics"][arm]
    ]
    vals = [v for v in vals if not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(vals) if vals else None


def _headline(record: dict[str, Any]) -> dict[str, Any]:
    crit = next(c for c in record["criteria"] if c["name"] == record["headline"])
    outcome = next((o for o in record["outcomes"] if o["name"] == record["headline"]), None)
    return {
        "metric": crit["a"].split(".")[1],
        "baseline": _median_metric(record, crit["b"]),
        "method": _median_metric(record, crit["a"]),
        "stat": outcome["median"] if outcome and crit["kind"] != "value" else None,
        "kind": crit["kind"],
        "paper": crit.get("paper", ""),
        "rule": outcome["rule"] if outcome else "",
    }


# --------------------------------------------------------------------------- figures


def render_figures(record: dict[str, Any], fig_dir: Path) -> list[tuple[str, Path]]:
    """Draw one PNG per series (median over seeds, min–max band); return (title, path) pairs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [s for s in record["seeds"] if s["metrics"] is not None]
    if not ok:
        return []
    fig_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for key, first in ok[0]["series"].items():
        fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=110)
        x = first["x"]
        for label in first["lines"]:
            runs = [s["series"][key]["lines"][label] for s in ok if key in s["series"]]
            ys = [statistics.median(col) for col in zip(*runs, strict=True)]
            if first["kind"] == "scatter":
                ax.scatter(x, ys, s=12, label=label, alpha=0.7)
            elif first["kind"] == "bar":
                width = 0.8 / max(1, len(first["lines"]))
                idx = list(first["lines"]).index(label)
                ax.bar([i + idx * width for i in range(len(x))], ys, width=width, label=label)
                ax.set_xticks([i + 0.4 - width / 2 for i in range(len(x))], [_fmt(v) for v in x])
            else:
                ax.plot(x, ys, marker="o", ms=3, label=label)
                if len(runs) > 1:
                    lo = [min(col) for col in zip(*runs, strict=True)]
                    hi = [max(col) for col in zip(*runs, strict=True)]
                    ax.fill_between(x, lo, hi, alpha=0.2)
        ax.set_title(first["title"], fontsize=10)
        ax.set_xlabel(first["xlabel"])
        ax.set_ylabel(first["ylabel"])
        ax.grid(alpha=0.3)
        if len(first["lines"]) > 1:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = fig_dir / f"{record['name']}-{re.sub(r'[^A-Za-z0-9_-]+', '_', key)}.png"
        fig.savefig(path)
        plt.close(fig)
        out.append((first["title"], path))
    return out


# --------------------------------------------------------------------------- documents
# A report is a list of blocks rendered twice: to Markdown and to self-contained HTML.


@dataclasses.dataclass
class _Block:
    kind: str  # "h1" | "h2" | "h3" | "p" | "table" | "img" | "code" | "list"
    text: str = ""
    rows: Sequence[Sequence[str]] = ()
    path: Path | None = None


def summary_rows(records: Iterable[dict[str, Any]]) -> list[list[str]]:
    """Summary rows: method · claim · metric · baseline · method · Δ or ratio · paper · verdict · time."""
    rows = [["method", "claim", "metric", "baseline", "method", "Δ or ratio", "paper", "verdict", "time"]]
    for r in records:
        h = _headline(r)
        stat = _fmt(h["stat"]) if h["stat"] is not None else "—"
        if h["kind"] != "value" and h["stat"] is not None:
            stat = ("Δ " if h["kind"] == "diff" else "×") + stat
        rows.append(
            [
                r["name"],
                _claim_short(r),
                h["metric"],
                _fmt(h["baseline"]),
                _fmt(h["method"]),
                stat,
                h["paper"] or "—",
                f"**{r['verdict']}**",
                f"{r['seconds']:.0f} s",
            ]
        )
    return rows


def _claim_short(record: dict[str, Any]) -> str:
    from iclr25._core.registry import REGISTRY

    entry = REGISTRY.get(record["name"])
    return entry.claim if entry else record["statement"][:80]


def _claim_blocks(r: dict[str, Any], figures: list[tuple[str, Path]]) -> list[_Block]:
    paper = r["paper"]
    blocks = [
        _Block("h2", r["name"]),
        _Block("p", f"*{paper['title']}* — {paper['authors']} ({paper['venue']}, arXiv {paper['arxiv']})."),
        _Block("p", f"**Claim.** {r['statement']}"),
        _Block(
            "p",
            f"**Verdict: {r['verdict']}** — {r['reason']}. Budget `{r['budget']}`, "
            f"seeds {[s['seed'] for s in r['seeds']]}, {r['seconds']:.1f} s, device {r['device']}.",
        ),
    ]
    if r["outcomes"]:
        rows = [["criterion", "rule", "gates", "per seed", "median", "held", "state", "paper"]]
        for o in r["outcomes"]:
            rows.append(
                [
                    o["name"] + (" (control)" if o["control"] else ""),
                    f"`{o['rule']}`",
                    "yes" if o["gating"] else "report",
                    ", ".join(_fmt(v) for v in o["per_seed"]),
                    _fmt(o["median"]),
                    f"{o['held']}/{len(o['per_seed'])}",
                    o["state"],
                    o.get("paper") or "—",
                ]
            )
        blocks += [_Block("h3", "Criteria"), _Block("table", rows=rows)]
    arms = sorted({a for s in r["seeds"] if s["metrics"] for a in s["metrics"]})
    if arms:
        rows = [["arm", "what", "metric", "median over seeds"]]
        for arm in arms:
            metrics = sorted({m for s in r["seeds"] if s["metrics"] for m in s["metrics"].get(arm, {})})
            for i, m in enumerate(metrics):
                what = r["arms"].get(arm, "") if i == 0 else ""
                rows.append([arm if i == 0 else "", what, m, _fmt(_median_metric(r, f"{arm}.{m}"))])
        blocks += [_Block("h3", "Metrics"), _Block("table", rows=rows)]
    if r["deviations"]:
        blocks += [_Block("h3", "Deviations"), _Block("list", rows=[[d] for d in r["deviations"]])]
    if r["overrides"]:
        blocks.append(_Block("p", "Overrides: " + ", ".join(f"`{k}={v}`" for k, v in r["overrides"].items())))
    for title, path in figures:
        blocks.append(_Block("img", title, path=path))
    notes = [f"seed {s['seed']}: {n}" for s in r["seeds"] for n in s["notes"]]
    if notes:
        blocks += [_Block("h3", "Notes"), _Block("list", rows=[[n] for n in notes])]
    for s in r["seeds"]:
        if s["error"]:
            blocks += [_Block("h3", f"Error (seed {s['seed']})"), _Block("code", s["error"])]
    return blocks


def _to_markdown(blocks: Sequence[_Block], root: Path) -> str:
    out = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + b.text)
        elif b.kind == "p":
            out.append(b.text)
        elif b.kind == "list":
            out.append("\n".join(f"- {row[0]}" for row in b.rows))
        elif b.kind == "code":
            out.append("```\n" + b.text.rstrip() + "\n```")
        elif b.kind == "img" and b.path is not None:
            out.append(f"![{b.text}]({b.path.relative_to(root).as_posix()})")
        elif b.kind == "table":
            head, *body = b.rows
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    text = html.escape(text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"`(.+?)`", r"<code>\1</code>", text)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", text)


def _to_html(blocks: Sequence[_Block], title: str) -> str:
    out = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            anchor = re.sub(r"[^a-z0-9]+", "-", b.text.lower())
            out.append(f"<{b.kind} id='{anchor}'>{_inline(b.text)}</{b.kind}>")
        elif b.kind == "p":
            out.append(f"<p>{_inline(b.text)}</p>")
        elif b.kind == "list":
            out.append("<ul>" + "".join(f"<li>{_inline(row[0])}</li>" for row in b.rows) + "</ul>")
        elif b.kind == "code":
            out.append(f"<pre>{html.escape(b.text)}</pre>")
        elif b.kind == "img" and b.path is not None:
            data = base64.b64encode(b.path.read_bytes()).decode()
            out.append(
                f"<figure><img alt='{html.escape(b.text)}' src='data:image/png;base64,{data}'>"
                f"<figcaption>{html.escape(b.text)}</figcaption></figure>"
            )
        elif b.kind == "table":
            head, *body = b.rows
            cells = "".join(f"<th>{_inline(c)}</th>" for c in head)
            rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body)
            out.append(f"<table><thead><tr>{cells}</tr></thead><tbody>{rows}</tbody></table>")
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:0.9em}"
        "td,th{border:1px solid #ccc;padding:0.3em 0.6em;text-align:left}th{background:#f3f3f3}"
        "pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:0.8em}"
        "figure{display:inline-block;margin:0.5em}img{max-width:520px}"
        "code{background:#f3f3f3;padding:0 0.2em}"
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n"
    )


def render_report(out_dir: Path) -> tuple[Path, Path]:
    """Render ``report.md``, ``report.html`` and ``figures/`` from the JSON in ``out_dir``.

    Returns:
        The paths of ``report.md`` and ``report.html``.
    """
    records = load_records(out_dir)
    env_path = out_dir / "env.json"
    env = json.loads(env_path.read_text()) if env_path.exists() else {}
    blocks = [_Block("h1", f"iclr25 report — {out_dir.name}")]
    git = env.get("git") or {}
    if env:
        sha = (git.get("sha") or "unknown")[:10] + (" (dirty)" if git.get("dirty") else "")
        blocks.append(
            _Block(
                "p",
                f"Made {env.get('time', '?')} · Python {env.get('python')} · torch "
                f"{(env.get('packages') or {}).get('torch')} · {env.get('cpu_count')} CPUs · "
                f"CUDA {env.get('cuda')} · commit {sha}.",
            )
        )
    if not records:
        blocks.append(_Block("p", "No claim finished."))
    else:
        blocks += [_Block("h2", "Summary"), _Block("table", rows=summary_rows(records))]
    for r in records:
        blocks += _claim_blocks(r, render_figures(r, out_dir / "figures"))
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    md_path.write_text(_to_markdown(blocks, out_dir))
    html_path.write_text(_to_html(blocks, f"iclr25 report {out_dir.name}"))
    return md_path, html_path


# --------------------------------------------------------------------------- README tables


def _replace_between(text: str, markers: tuple[str, str], body: str, where: str) -> str:
    start, end = markers
    if start not in text or end not in text:
        raise ValueError(f"{where} lacks the markers {start} … {end}")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.rstrip()}\n{end}{tail}"


def _status_row(r: dict[str, Any], date: str) -> list[str]:
    h = _headline(r)
    numbers = f"{h['metric']}: {_fmt(h['method'])}"
    if h["baseline"] is not None:
        numbers += f" vs {_fmt(h['baseline'])}"
    return [
        f"[`{r['name']}`](src/iclr25/methods/{r['name']}/README.md)",
        _claim_short(r),
        f"{r['verdict']} ({r['budget']}, {len(r['seeds'])} seed{'s' * (len(r['seeds']) != 1)})",
        numbers,
        h["paper"] or "—",
        date,
    ]


def update_readmes(out_dir: Path, repo_root: Path) -> list[Path]:
    """Regenerate the top README's status table and each method README's Results table.

    Rows of methods absent from this report are kept as they were.

    Returns:
        The files written.
    """
    records = load_records(out_dir)
    env_path = out_dir / "env.json"
    date = json.loads(env_path.read_text()).get("time", "")[:10] if env_path.exists() else ""
    written = []
    readme = repo_root / "README.md"
    text = readme.read_text()
    start, end = STATUS_MARKERS
    if start not in text or end not in text:
        raise ValueError(f"{readme} lacks the markers {start} … {end}")
    old_rows: dict[str, str] = {}
    for line in text.split(start, 1)[1].split(end, 1)[0].splitlines():
        m = re.match(r"\| \[`([a-z0-9_]+)`\]", line)
        if m:
            old_rows[m.group(1)] = line
    from iclr25._core.registry import REGISTRY

    new_rows = {r["name"]: "| " + " | ".join(_status_row(r, date)) + " |" for r in records}
    names = sorted(set(REGISTRY) | set(old_rows) | set(new_rows))
    lines = [
        "| method | claim | verdict | headline numbers (ours) | paper | date |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        if name in new_rows:
            lines.append(new_rows[name])
        elif name in old_rows:
            lines.append(old_rows[name])
        else:
            entry = REGISTRY[name]
            link = f"[`{name}`](src/iclr25/methods/{name}/README.md)"
            lines.append(f"| {link} | {entry.claim} | not run | — | — | — |")
    readme.write_text(_replace_between(text, STATUS_MARKERS, "\n".join(lines), str(readme)))
    written.append(readme)
    for r in records:
        path = repo_root / "src" / "iclr25" / "methods" / r["name"] / "README.md"
        if not path.exists():
            continue
        rows = [["criterion", "rule", "paper", "ours (median)", "state"]]
        for o in r["outcomes"]:
            rows.append(
                [
                    o["name"] + (" (control)" if o["control"] else ""),
                    f"`{o['rule']}`",
                    o.get("paper") or "—",
                    _fmt(o["median"]),
                    o["state"] if o["gating"] else f"{o['state']} (report only)",
                ]
            )
        body = (
            f"**{r['verdict']}** — {r['reason']}. Budget `{r['budget']}`, seeds "
            f"{[s['seed'] for s in r['seeds']]}, {r['seconds']:.0f} s, {date}; "
            f"`iclr25 check {r['name']} --budget {r['budget']}`.\n\n"
            + _to_markdown([_Block("table", rows=rows)], path)
        )
        path.write_text(_replace_between(path.read_text(), RESULTS_MARKERS, body, str(path)))
        written.append(path)
    return written
