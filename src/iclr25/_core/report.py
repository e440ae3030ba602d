"""Reports: a JSON record per claim, ``env.json``, figures, ``report.md`` and ``report.html``.

The JSON records are the source of truth; ``report.md``, ``report.html``, the figures and the
README tables are all rendered from them (``iclr25 report DIR`` re-renders), so no result
number is ever typed by hand.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import html
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from iclr25._core.config import to_dict
from iclr25._core.env import changed_since, git_state, snapshot
from iclr25._core.runner import ClaimRun

__all__ = [
    "MAKE_CHECK_MARKERS",
    "MANIFEST",
    "RESULTS_MARKERS",
    "STATUS_MARKERS",
    "RunManifestError",
    "check_resumable",
    "claim_record",
    "common_dependencies",
    "complete_records",
    "diagnosis_run",
    "find_unfinished",
    "load_records",
    "make_check_sentence",
    "render_report",
    "stale_files",
    "update_readmes",
    "verdict_kind",
    "verdict_label",
    "write_claim_json",
    "write_env",
    "write_manifest",
]

STATUS_MARKERS = ("<!-- status:start -->", "<!-- status:end -->")
MAKE_CHECK_MARKERS = ("<!-- make-check-time:start -->", "<!-- make-check-time:end -->")
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
                "media": {k: v.to_record() for k, v in getattr(s.result, "media", {}).items()},
                "notes": s.result.notes if s.result else [],
                "error": s.error,
            }
            for s in run.seeds
        ],
        "outcomes": [dict(dataclasses.asdict(o), state=o.state) for o in judgement.outcomes],
        "verdict": judgement.verdict.value,
        "kind": judgement.kind,
        "reason": judgement.reason,
        "parts": {
            k: {"verdict": v.value, "kind": judgement.part_kinds.get(k, ""), "reason": why}
            for k, (v, why) in judgement.parts.items()
        },
        "default_seeds": claim.budgets[run.budget].seeds,
        "unchecked": list(claim.unchecked),
        "commit": git_state()["sha"],
        "seconds": run.seconds,
        "figure": claim.figure,
        "diagnosis": readme_diagnosis(claim.name),
    }


def readme_diagnosis(name: str) -> str:
    """The ``### Diagnosis`` text of a method's README ("" when it has none).

    The report shows it under a verdict other than SUPPORTED, so a reader sees what is known
    about why the claim did not reproduce.
    """
    path = Path(__file__).resolve().parents[1] / "methods" / name / "README.md"
    if not path.is_file():
        return ""
    text = path.read_text()
    match = re.search(r"^### +Diagnosis\s*$(.*?)(?=^#{1,3} |\Z)", text, flags=re.M | re.S)
    return match.group(1).strip() if match else ""


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


# --------------------------------------------------------------------------- run manifest
# ``run.json`` says what a run folder was asked for (budget, seeds, overrides) and from which
# commit, and whether it finished; ``iclr25 check --resume`` reads it.

MANIFEST = "run.json"


class RunManifestError(ValueError):
    """A run folder that cannot be resumed with the arguments given."""


def write_manifest(
    out_dir: Path,
    *,
    budget: str,
    plan: dict[str, list[int]],
    overrides: dict[str, str],
    device: str,
    complete: bool,
) -> Path:
    """Write ``run.json``, keeping the claims an earlier call planned in the same folder."""
    path = out_dir / MANIFEST
    old = json.loads(path.read_text()) if path.exists() else {}
    git = git_state()
    data = {
        "budget": budget,
        "plan": {**old.get("plan", {}), **plan},
        "overrides": overrides,
        "device": device,
        "commit": git["sha"],
        "dirty": git["dirty"],
        "started": old.get("started") or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "complete": complete,
    }
    path.write_text(json.dumps(data, indent=2))
    return path


def check_resumable(out_dir: Path, budget: str, overrides: dict[str, str]) -> dict[str, Any]:
    """The manifest of a run folder that can be resumed at ``budget`` with ``overrides``.

    Raises:
        RunManifestError: no manifest, or another budget, commit or set of overrides.
    """
    path = out_dir / MANIFEST
    if not path.is_file():
        raise RunManifestError(f"{str(out_dir)!r} is not a folder written by `iclr25 check` (no {MANIFEST})")
    manifest = json.loads(path.read_text())
    if manifest.get("budget") != budget:
        raise RunManifestError(f"that run used the {manifest.get('budget')!r} budget, not {budget!r}")
    if manifest.get("dirty"):
        raise RunManifestError("that run was made from uncommitted code, so its numbers trace to no commit")
    sha = git_state()["sha"]
    if manifest.get("commit") != sha:
        was, now = (manifest.get("commit") or "unknown")[:10], (sha or "unknown")[:10]
        raise RunManifestError(f"that run was made at commit {was}, the code is at {now}")
    if manifest.get("overrides", {}) != overrides:
        raise RunManifestError(f"that run used --set {manifest.get('overrides')}, not {overrides}")
    return manifest


def find_unfinished(reports: Path, budget: str) -> Path | None:
    """The newest run folder under ``reports`` at ``budget`` whose manifest is not complete."""
    if not reports.is_dir():
        return None
    for folder in sorted((p for p in reports.iterdir() if (p / MANIFEST).is_file()), reverse=True):
        manifest = json.loads((folder / MANIFEST).read_text())
        if manifest.get("budget") == budget:
            return None if manifest.get("complete") else folder
    return None


def complete_records(out_dir: Path, plan: dict[str, list[int]]) -> dict[str, dict[str, Any]]:
    """Records in ``out_dir`` that already hold every planned seed of their claim, by name."""
    done = {}
    for record in load_records(out_dir):
        seeds = [s["seed"] for s in record["seeds"]]
        if record["name"] in plan and seeds == plan[record["name"]]:
            done[record["name"]] = record
    return done


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


def render_figures(record: dict[str, Any], fig_dir: Path) -> list[tuple[str, Path, str]]:
    """Draw one PNG per series (median over seeds, min–max band); return (title, path, key)."""
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
            # a line some seeds lack (e.g. one named after a seed's best k) is drawn from the others
            runs = [
                s["series"][key]["lines"][label]
                for s in ok
                if label in s["series"].get(key, {}).get("lines", {})
            ]
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
        out.append((first["title"], path, key))
    return out


def render_media(record: dict[str, Any], fig_dir: Path) -> list[tuple[str, Path, str]]:
    """Write a claim's media (:mod:`iclr25._core.media`); return (title, path, key) per file.

    Pictures, animations and sounds come from the first seed that has them; a heatmap is the
    elementwise median over the seeds whose matrix has the first one's shape.
    """
    from iclr25._core.media import decode

    seeds = [s for s in record["seeds"] if s.get("media")]
    if not seeds:
        return []
    fig_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for key, first in seeds[0]["media"].items():
        stem = fig_dir / f"{record['name']}-{re.sub(r'[^A-Za-z0-9_-]+', '_', key)}"
        if first["kind"] == "heatmap":
            runs = [s["media"][key]["values"] for s in seeds if key in s["media"]]
            path = _draw_heatmap(first, [r for r in runs if _shape(r) == _shape(first["values"])], stem)
        else:
            path = stem.with_suffix({"picture": ".png", "animation": ".gif", "sound": ".wav"}[first["kind"]])
            path.write_bytes(decode(first))
        out.append((first["title"], path, key))
    return out


def _shape(matrix: list[list[float]]) -> tuple[int, int]:
    return len(matrix), len(matrix[0]) if matrix else 0


def _draw_heatmap(item: dict[str, Any], runs: list[list[list[float]]], stem: Path) -> Path:
    import textwrap
    import warnings

    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, cols = _shape(item["values"])
    with warnings.catch_warnings():  # a cell that is NaN in every seed stays NaN (drawn blank)
        warnings.simplefilter("ignore", RuntimeWarning)
        values = np.nanmedian(np.asarray(runs, dtype=float), axis=0).tolist()
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=110)
    image = ax.imshow(values, origin=item["origin"], aspect="auto", cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=ax)
    if item["xticks"]:
        ax.set_xticks(range(cols), item["xticks"], rotation=45, ha="right", fontsize=8)
    if item["yticks"]:
        ax.set_yticks(range(rows), item["yticks"], fontsize=8)
    if rows * cols <= 64:  # a small table: two decimals in the cells, dark on light colours
        for i in range(rows):
            for j in range(cols):
                colour = "k" if image.norm(values[i][j]) > 0.6 else "w"
                ax.text(j, i, f"{values[i][j]:.2f}", ha="center", va="center", fontsize=7, color=colour)
    title = item["title"] + (f" (median of {len(runs)} seeds)" if len(runs) > 1 else "")
    ax.set_title(textwrap.fill(title, 70), fontsize=9)
    ax.set_xlabel(item["xlabel"])
    ax.set_ylabel(item["ylabel"])
    fig.tight_layout()
    path = stem.with_suffix(".png")
    fig.savefig(path)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------- documents
# A report is a list of blocks rendered twice: to Markdown and to self-contained HTML.


@dataclasses.dataclass
class _Block:
    kind: str  # "h1" | "h2" | "h3" | "p" | "table" | "img" | "audio" | "code" | "list"
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
                _verdict_cell(r["verdict"])
                + (f": {_KIND_LABELS.get(verdict_kind(r))}" if _KIND_LABELS.get(verdict_kind(r)) else "")
                + (f" ({_seed_banner(r)})" if _seed_banner(r) else ""),
                f"{r['seconds']:.0f} s",
            ]
        )
    return rows


#: Colour marks for verdicts: a coloured disc in Markdown, a coloured label in HTML.
_MARKS = {"SUPPORTED": "🟢", "NOT_SUPPORTED": "🔴", "INCONCLUSIVE": "🟡", "ERROR": "🟣"}
_HTML_COLOURS = {
    "SUPPORTED": "#1a7f37",
    "NOT_SUPPORTED": "#cf222e",
    "INCONCLUSIVE": "#9a6700",
    "ERROR": "#8250df",
}


def _verdict_cell(verdict: str) -> str:
    return f"{_MARKS.get(verdict, '')} **{verdict}**"


#: What each reason class adds to the verdict's name (see :class:`~iclr25._core.claims.Judgement`).
_KIND_LABELS = {
    "supported": "",
    "not supported": "bed discriminates",
    "cannot discriminate": "cannot discriminate",
    "not applicable": "not applicable",
    "not converged": "not converged",
    "mixed": "mixed over seeds",
    "report-only": "report-only",
    "error": "",
}


def verdict_kind(record: dict[str, Any]) -> str:
    """A record's reason class; records written before it was stored get it from their reason."""
    if record.get("kind"):
        return record["kind"]
    reason, verdict = record.get("reason", ""), record.get("verdict", "")
    prefixes = (
        ("test not applicable", "not applicable"),
        ("not converged", "not converged"),
        ("cannot discriminate", "cannot discriminate"),
        ("mixed", "mixed"),
        ("failed", "not supported"),
    )
    for prefix, kind in prefixes:
        if reason.startswith(prefix):
            return kind
    if reason.endswith("report-only"):
        return "report-only"
    return {"SUPPORTED": "supported", "ERROR": "error"}.get(verdict, "mixed")


def verdict_label(verdict: str, kind: str) -> str:
    """``NOT_SUPPORTED (bed discriminates)``, ``INCONCLUSIVE: cannot discriminate``, ``SUPPORTED``."""
    label = _KIND_LABELS.get(kind, kind)
    if not label:
        return verdict
    return f"{verdict} ({label})" if verdict == "NOT_SUPPORTED" else f"{verdict}: {label}"


def _verdict_of_record(record: dict[str, Any]) -> str:
    return verdict_label(record["verdict"], verdict_kind(record))


def _seed_banner(record: dict[str, Any]) -> str:
    """ "N of M seeds: not a verdict" when a run used fewer seeds than its budget's default."""
    n, default = len(record["seeds"]), record.get("default_seeds")
    if default and n < default:
        return f"{n} of {default} seeds: not a verdict"
    return ""


def _claim_short(record: dict[str, Any]) -> str:
    from iclr25._core.registry import REGISTRY

    entry = REGISTRY.get(record["name"])
    return entry.claim if entry else record["statement"][:80]


def _prose_blocks(text: str) -> list[_Block]:
    """Paragraphs and bullet lists of a README excerpt as report blocks."""
    blocks: list[_Block] = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = [line.strip() for line in para.splitlines() if line.strip()]
        if not lines:
            continue
        if not lines[0].startswith(("- ", "* ")):
            blocks.append(_Block("p", " ".join(lines)))
            continue
        items: list[str] = []
        for line in lines:  # a bullet's wrapped lines join the bullet
            if line.startswith(("- ", "* ")):
                items.append(line[2:])
            else:
                items[-1] += " " + line
        if blocks and blocks[-1].kind == "list":  # bullets separated by blank lines: one list
            blocks[-1] = _Block("list", rows=[*blocks[-1].rows, *([i] for i in items)])
        else:
            blocks.append(_Block("list", rows=[[i] for i in items]))
    return blocks


def _criteria_rows(r: dict[str, Any]) -> list[list[str]]:
    specs = {c["name"]: c for c in r["criteria"]}
    rows = [
        ["criterion", "what it means", "rule", "gates", "falsifier", "per seed", "median", "held", "state"]
    ]
    for o in r["outcomes"]:
        spec = specs.get(o["name"], {})
        measured = o.get("measured")
        n = len(o["per_seed"]) if measured is None else measured
        if o["control"]:
            falsifier = "(is a control)"
        else:
            falsifier = spec.get("falsifier") or (
                "—" if not o["gating"] or o.get("precondition") else "none named"
            )
        rows.append(
            [
                o["name"] + (" (control)" if o["control"] else ""),
                spec.get("explain") or "—",
                f"`{o['rule']}`",
                ("precondition" if o.get("precondition") else "yes") if o["gating"] else "report",
                f"`{_breakable(falsifier)}`" if spec.get("falsifier") else falsifier,
                ", ".join(_fmt(v) for v in o["per_seed"]),
                _fmt(o["median"]),
                f"{o['held']}/{n}",
                _state(o),
            ]
        )
    return rows


#: A zero-width space: where a long test id may wrap in a table cell (after ``::`` and ``/``).
_WRAP = "\u200b"


def _breakable(test_id: str) -> str:
    return test_id.replace("::", "::" + _WRAP).replace("/", "/" + _WRAP)


def _state(outcome: dict[str, Any]) -> str:
    """A gate's state; a report-only row reads "info", never "fail"."""
    if not outcome["gating"]:
        return "info"
    return outcome["state"]


def _claim_blocks(r: dict[str, Any], figures: list[tuple[str, Path, str]]) -> list[_Block]:
    paper = r["paper"]
    blocks = [
        _Block("h2", r["name"]),
        _Block("p", f"*{paper['title']}* — {paper['authors']} ({paper['venue']}, arXiv {paper['arxiv']})."),
        _Block("p", f"**Claim.** {r['statement']}"),
    ]
    banner = _seed_banner(r)
    if banner:
        blocks.append(
            _Block(
                "p",
                f"**{banner}.** The budget's default is {r['default_seeds']} seeds; "
                "the judge's 2-of-3 rule means little on fewer.",
            )
        )
    label = _KIND_LABELS.get(verdict_kind(r))
    blocks.append(
        _Block(
            "p",
            f"Verdict: {_verdict_cell(r['verdict'])}{f' ({label})' if label else ''} — {r['reason']}. "
            f"Budget `{r['budget']}`, seeds {[s['seed'] for s in r['seeds']]}, {r['seconds']:.1f} s, "
            f"device {r['device']}.",
        )
    )
    if r.get("unchecked"):
        blocks.append(_Block("p", "**Not checked by this run** (preconditions the paper's setting implies):"))
        blocks.append(_Block("list", rows=[[u] for u in r["unchecked"]]))
    if r.get("parts"):
        rows = [["part", "verdict", "reason"]]
        for k, v in r["parts"].items():
            part_label = _KIND_LABELS.get(v.get("kind") or verdict_kind(v))
            rows.append(
                [k, _verdict_cell(v["verdict"]) + (f" ({part_label})" if part_label else ""), v["reason"]]
            )
        blocks.append(_Block("table", rows=rows))
    # The headline figure opens the section; the others follow the tables.
    key = r.get("figure") or (figures[0][2] if figures else "")
    headline = [f for f in figures if f[2] == key][:1]
    rest = [f for f in figures if f not in headline]
    for title, path, _ in headline:
        blocks.append(_Block("audio" if path.suffix == ".wav" else "img", title, path=path))
    if r["outcomes"]:
        blocks += [_Block("h3", "Criteria"), _Block("table", rows=_criteria_rows(r))]
        papers = [[o["name"], o["paper"]] for o in r["outcomes"] if o.get("paper")]
        if papers:
            blocks.append(_Block("table", rows=[["criterion", "the paper reports"], *papers]))
    if r["verdict"] != "SUPPORTED":
        blocks.append(_Block("h3", "Diagnosis"))
        blocks += _diagnosis_blocks(r)
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
    for title, path, _ in rest:
        blocks.append(_Block("audio" if path.suffix == ".wav" else "img", title, path=path))
    notes = [f"seed {s['seed']}: {n}" for s in r["seeds"] for n in s["notes"]]
    if notes:
        blocks += [_Block("h3", "Notes"), _Block("list", rows=[[n] for n in notes])]
    for s in r["seeds"]:
        if s["error"]:
            blocks += [_Block("h3", f"Error (seed {s['seed']})"), _Block("code", s["error"])]
    return blocks


_DIAGNOSIS_BUDGET = re.compile(r"(?:--budget[ =]|budget[ :]+`?)(smoke|full|long)\b")
_DIAGNOSIS_COMMIT = re.compile(r"commit[ :]+`?([0-9a-f]{7,40})\b")


def diagnosis_run(text: str) -> tuple[str | None, str | None]:
    """The budget and the commit a README Diagnosis says it was measured at (``None`` if unnamed).

    A Diagnosis names its run in words like "measured at commit `0a40441`, `--budget full`".
    """
    budget, commit = _DIAGNOSIS_BUDGET.search(text), _DIAGNOSIS_COMMIT.search(text)
    return (budget.group(1) if budget else None), (commit.group(1) if commit else None)


def _diagnosis_blocks(r: dict[str, Any]) -> list[_Block]:
    """The method README's Diagnosis, when it describes this very run (its budget, at this commit);
    otherwise a link to it that says it describes another run."""
    text = r.get("diagnosis") or ""
    if not text:
        return [_Block("p", "No diagnosis written yet.")]
    budget, commit = diagnosis_run(text)
    sha = r.get("commit") or ""
    if budget == r["budget"] and commit and sha.startswith(commit):
        return _prose_blocks(text)
    named = ", ".join(
        x for x in (f"budget `{budget}`" if budget else "", f"commit `{commit}`" if commit else "") if x
    )
    return [
        _Block(
            "p",
            f"The method README's Diagnosis (`src/iclr25/methods/{r['name']}/README.md`) describes "
            f"another run ({named or 'it names no budget and commit'}), not this one "
            f"(budget `{r['budget']}`, commit `{sha[:10] or 'unknown'}`); read it there.",
        )
    ]


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
        elif b.kind == "audio" and b.path is not None:
            out.append(f"Audio: [{b.text}]({b.path.relative_to(root).as_posix()})")
        elif b.kind == "table":
            head, *body = b.rows
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
            out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    text = html.escape(text)
    for verdict, colour in _HTML_COLOURS.items():
        text = text.replace(
            f"{_MARKS[verdict]} **{verdict}**",
            f"<b style='color:#fff;background:{colour};padding:0 0.4em;border-radius:3px'>{verdict}</b>",
        )
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"`(.+?)`", r"<code>\1</code>", text)
    text = text.replace(_WRAP, "<wbr>")
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
            mime = "image/gif" if b.path.suffix == ".gif" else "image/png"
            # the title is drawn in the figure itself: no caption repeats it
            out.append(f"<figure><img alt='{html.escape(b.text)}' src='data:{mime};base64,{data}'></figure>")
        elif b.kind == "audio" and b.path is not None:
            data = base64.b64encode(b.path.read_bytes()).decode()
            out.append(
                f"<figure><audio controls src='data:audio/wav;base64,{data}'></audio>"
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
        fig_dir = out_dir / "figures"
        blocks += _claim_blocks(r, render_figures(r, fig_dir) + render_media(r, fig_dir))
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


def _status_row(r: dict[str, Any], date: str, sha: str) -> list[str]:
    h = _headline(r)
    numbers = f"{h['metric']}: {_fmt(h['method'])}"
    if h["baseline"] is not None:
        numbers += f" vs {_fmt(h['baseline'])}"
    return [
        f"[`{r['name']}`](src/iclr25/methods/{r['name']}/README.md)",
        _claim_short(r),
        f"{_verdict_of_record(r)} ({r['budget']}, {len(r['seeds'])} seed{'s' * (len(r['seeds']) != 1)}"
        + (f"; {_seed_banner(r)}" if _seed_banner(r) else "")
        + ")",
        numbers,
        h["paper"] or "—",
        date,
        f"`{sha[:10]}`" if sha else "unknown",
    ]


STALE = "**stale**"
_STATUS_HEAD = [
    "| method | claim | verdict | headline numbers (ours) | paper | date | commit |",
    "|---|---|---|---|---|---|---|",
]


_COMMON_NAME = re.compile(r"iclr25\.common(?:\.\w+)*")
_COMMON_FROM = re.compile(r"from\s+(iclr25\.common(?:\.\w+)*)\s+import\s+\(?([\w\s,]+)\)?")
_RELATIVE_FROM = re.compile(r"^\s*from\s+\.(\w+)", re.MULTILINE)


def common_dependencies(repo_root: Path, name: str) -> list[str]:
    """The ``common/`` files a method's code uses, found by the names it imports (transitively).

    Every ``iclr25.common...`` name in the method folder's Python files counts (imports,
    ``require`` strings, doctests), resolved to the module file or package folder it names, with
    the ``__init__.py`` of each package on the way; the common files found are scanned the same
    way. Without the method folder, the whole of ``common/`` is returned.
    """
    base = Path(repo_root) / "src"
    folder = base / "iclr25" / "methods" / name
    if not folder.is_dir():
        return ["src/iclr25/common"]
    found: set[Path] = set()
    todo = sorted(folder.rglob("*.py"))
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = path.read_text(errors="replace")
        names = set(_COMMON_NAME.findall(text))
        if folder not in path.parents:  # a common module: its sibling modules too
            names.update(
                ".".join([*path.parent.relative_to(base).parts, m]) for m in _RELATIVE_FROM.findall(text)
            )
        for module, imported in _COMMON_FROM.findall(text):
            names.update(f"{module}.{n.strip()}" for n in imported.split(",") if n.strip())
        for dotted in names:
            parts = dotted.split(".")
            for depth in range(2, len(parts) + 1):  # the packages on the way, then the module
                stem = base.joinpath(*parts[:depth])
                if stem.is_dir() and (stem / "__init__.py").exists():
                    init = stem / "__init__.py"
                    if depth == len(parts):
                        found.add(stem)
                        todo.extend(stem.rglob("*.py"))
                    else:
                        found.add(init)
                        todo.append(init)
                elif stem.with_suffix(".py").exists():
                    found.add(stem.with_suffix(".py"))
                    todo.append(stem.with_suffix(".py"))
                    break
                else:
                    break  # an imported name inside a module, not a file
    return sorted(str(p.relative_to(repo_root)) for p in found)


def stale_files(repo_root: Path, name: str, sha: str | None) -> list[str] | None:
    """Files of a method's code, ``_core/`` or the ``common/`` modules it uses changed since ``sha``.

    Left out: the method's README (its Results table is what gets regenerated), the registry
    (names and expected times), the report renderer and the media it encodes, none of which
    changes a claim's numbers, and ``common/`` modules the method does not import
    (:func:`common_dependencies`). ``None`` when that cannot be told (no commit recorded, or no
    git).
    """
    if not sha:
        return None
    base = "src/iclr25"
    return changed_since(
        sha,
        [f"{base}/methods/{name}", f"{base}/_core", *common_dependencies(repo_root, name)],
        repo_root,
        exclude=[
            f"{base}/methods/{name}/README.md",
            f"{base}/_core/registry.py",
            f"{base}/_core/report.py",
            f"{base}/_core/media.py",
        ],
    )


def _stale_note(repo_root: Path, name: str, sha: str | None) -> str:
    changed = stale_files(repo_root, name, sha)
    if changed is None:
        return "no commit recorded" if not sha else "commit not found"
    if not changed:
        return ""
    return f"{len(changed)} file(s) changed since, e.g. {changed[0]}"


def _mark_status_line(line: str, repo_root: Path) -> str:
    """A status row with the stale mark set from its recorded commit (added or removed)."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    m = re.match(r"\[`([a-z0-9_]+)`\]", cells[0])
    if not m or len(cells) < 6 or cells[2] == "not run":
        return line
    if len(cells) == 6:  # a row written before commits were recorded
        cells.append("unknown")
    sha = re.sub(r"[`\s]", "", cells[6]) if cells[6] != "unknown" else None
    verdict = cells[2].replace(f" · {STALE}", "")
    note = _stale_note(repo_root, m.group(1), sha)
    cells[2] = f"{verdict} · {STALE}" if note else verdict
    return "| " + " | ".join(cells) + " |"


def _results_body(r: dict[str, Any], date: str, sha: str, path: Path) -> str:
    rows = [["criterion", "rule", "paper", "ours (median)", "state"]]
    for o in r["outcomes"]:
        rows.append(
            [
                o["name"] + (" (control)" if o["control"] else ""),
                f"`{o['rule']}`",
                o.get("paper") or "—",
                _fmt(o["median"]),
                (f"{o['state']} (precondition)" if o.get("precondition") else o["state"])
                if o["gating"]
                else "info",
            ]
        )
    parts = "".join(
        f"- {k}: **{verdict_label(v['verdict'], v.get('kind') or verdict_kind(v))}** — {v['reason']}.\n"
        for k, v in r.get("parts", {}).items()
    )
    banner = f"**{_seed_banner(r)}.** " if _seed_banner(r) else ""
    unchecked = "".join(f"- {u}\n" for u in r.get("unchecked", []))
    return (
        banner + f"**{_verdict_of_record(r)}** — {r['reason']}. Budget `{r['budget']}`, seeds "
        f"{[s['seed'] for s in r['seeds']]}, {r['seconds']:.0f} s, {date}, commit "
        f"`{(sha or 'unknown')[:10]}`; `iclr25 check {r['name']} --budget {r['budget']}`.\n\n"
        + (f"Verdict by part:\n\n{parts}\n" if parts else "")
        + (f"Not checked by this run:\n\n{unchecked}\n" if unchecked else "")
        + _to_markdown([_Block("table", rows=rows)], path)
    )


def _mark_results(body: str, repo_root: Path, name: str) -> str:
    """A Results block with its stale line set from the commit it names (added or removed).

    A block that holds no result yet (the method was never run) stays empty.
    """
    body = re.sub(r"^> \*\*Stale:\*\*.*(\n+|$)", "", body.lstrip("\n"), flags=re.M)
    if not body.strip():
        return body
    m = re.search(r"commit `([0-9a-f]+)`", body)
    note = _stale_note(repo_root, name, m.group(1) if m else None)
    if not note:
        return body
    return (
        f"> **Stale:** these numbers may not match the code ({note}); "
        f"re-run `iclr25 check {name}` and `iclr25 report DIR --update-readme`.\n\n" + body
    )


def make_check_sentence() -> str:
    """The README's expected ``make check`` time, computed from the registry's per-seed times."""
    from iclr25._core.registry import make_check_seconds

    one, two = make_check_seconds(1) / 60, make_check_seconds(2) / 60
    return f"**about {one:.0f} min with `JOBS=1`, about {two:.0f} min with `make check JOBS=2`**"


def update_readmes(out_dir: Path, repo_root: Path) -> list[Path]:
    """Regenerate the top README's status table and each method README's Results table.

    Rows of methods absent from this report are kept as they were. Every row and Results table
    records the commit it was generated from; one whose method folder, ``_core/`` or the
    ``common/`` modules the method imports changed since that commit is marked stale (and the mark
    goes once it is regenerated); see :func:`stale_files`.

    Returns:
        The files written.
    """
    records = load_records(out_dir)
    env_path = out_dir / "env.json"
    env = json.loads(env_path.read_text()) if env_path.exists() else {}
    date = env.get("time", "")[:10]
    sha = (env.get("git") or {}).get("sha") or ""
    if (env.get("git") or {}).get("dirty"):
        sha = ""  # numbers from uncommitted code trace to no commit
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

    new_rows = {r["name"]: "| " + " | ".join(_status_row(r, date, sha)) + " |" for r in records}
    names = sorted(set(REGISTRY) | set(old_rows) | set(new_rows))
    lines = list(_STATUS_HEAD)
    for name in names:
        if name in new_rows:
            lines.append(_mark_status_line(new_rows[name], repo_root))
        elif name in old_rows:
            lines.append(_mark_status_line(old_rows[name], repo_root))
        else:
            entry = REGISTRY[name]
            link = f"[`{name}`](src/iclr25/methods/{name}/README.md)"
            lines.append(f"| {link} | {entry.claim} | not run | — | — | — | — |")
    text = _replace_between(text, STATUS_MARKERS, "\n".join(lines), str(readme))
    if MAKE_CHECK_MARKERS[0] in text:
        start, end = MAKE_CHECK_MARKERS
        head, rest = text.split(start, 1)
        text = f"{head}{start}{make_check_sentence()}{end}{rest.split(end, 1)[1]}"
    readme.write_text(text)
    written.append(readme)
    by_name = {r["name"]: r for r in records}
    for name in sorted(set(REGISTRY) | set(by_name)):
        path = repo_root / "src" / "iclr25" / "methods" / name / "README.md"
        if not path.exists():
            continue
        text = path.read_text()
        if name in by_name:
            body = _results_body(by_name[name], date, sha, path)
        elif RESULTS_MARKERS[0] in text and RESULTS_MARKERS[1] in text:
            body = text.split(RESULTS_MARKERS[0], 1)[1].split(RESULTS_MARKERS[1], 1)[0]
        else:
            continue
        new = _replace_between(text, RESULTS_MARKERS, _mark_results(body, repo_root, name), str(path))
        if new != text:
            path.write_text(new)
            written.append(path)
    return written
