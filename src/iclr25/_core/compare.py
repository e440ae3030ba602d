"""Compare two report folders: verdicts, criterion medians, per-seed metrics, and environments.

``iclr25 compare DIR_A DIR_B`` answers "does my run reproduce that one?": for every claim in
both folders it lists the verdicts, each criterion's median in both runs, and every per-seed
metric that differs; then what differs between the two ``env.json`` files (packages, CPU,
kernels). Wall-clock metrics (``*_s``) are left out: they never reproduce.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iclr25._core.claims import WALL_CLOCK_SUFFIX

__all__ = ["ClaimDiff", "Comparison", "MetricDiff", "compare_runs", "env_differences"]


@dataclass(frozen=True)
class MetricDiff:
    """One metric of one seed that differs between the runs."""

    seed: int
    metric: str  # "arm.metric"
    a: float
    b: float

    @property
    def relative(self) -> float:
        """``|a - b| / max(|a|, |b|)`` (0 when both are 0; NaN against a number counts as 1)."""
        if math.isnan(self.a) or math.isnan(self.b):
            return 0.0 if math.isnan(self.a) and math.isnan(self.b) else 1.0
        scale = max(abs(self.a), abs(self.b))
        return abs(self.a - self.b) / scale if scale else 0.0


@dataclass
class ClaimDiff:
    """How one claim's records differ between run A and run B."""

    name: str
    verdict_a: str
    verdict_b: str
    seeds_a: list[int]
    seeds_b: list[int]
    compared: int = 0  # per-seed metrics present in both runs
    differing: list[MetricDiff] = field(default_factory=list)
    medians: list[tuple[str, float, float]] = field(default_factory=list)  # criterion, a, b

    @property
    def identical(self) -> bool:
        """Same verdict, and every shared per-seed metric equal to the last bit."""
        return self.verdict_a == self.verdict_b and not self.differing


@dataclass
class Comparison:
    """The comparison of two report folders."""

    claims: list[ClaimDiff]
    only_a: list[str]
    only_b: list[str]
    env: dict[str, tuple[Any, Any]]


def _records(folder: Path) -> dict[str, dict[str, Any]]:
    from iclr25._core.report import load_records

    return {r["name"]: r for r in load_records(folder)}


def _seed_metrics(record: dict[str, Any]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for s in record["seeds"]:
        flat = {
            f"{arm}.{m}": float(v)
            for arm, ms in (s.get("metrics") or {}).items()
            for m, v in ms.items()
            if not m.endswith(WALL_CLOCK_SUFFIX)
        }
        out[s["seed"]] = flat
    return out


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _claim_diff(a: dict[str, Any], b: dict[str, Any]) -> ClaimDiff:
    diff = ClaimDiff(
        name=a["name"],
        verdict_a=a["verdict"],
        verdict_b=b["verdict"],
        seeds_a=[s["seed"] for s in a["seeds"]],
        seeds_b=[s["seed"] for s in b["seeds"]],
    )
    ma, mb = _seed_metrics(a), _seed_metrics(b)
    for seed in sorted(set(ma) & set(mb)):
        for key in sorted(set(ma[seed]) & set(mb[seed])):
            diff.compared += 1
            if not _same(ma[seed][key], mb[seed][key]):
                diff.differing.append(MetricDiff(seed, key, ma[seed][key], mb[seed][key]))
    med_b = {o["name"]: o["median"] for o in b["outcomes"]}
    for o in a["outcomes"]:
        if o["name"] in med_b:
            diff.medians.append((o["name"], float(o["median"]), float(med_b[o["name"]])))
    return diff


def env_differences(env_a: dict[str, Any], env_b: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """What differs between two ``env.json`` snapshots, as ``key -> (a, b)``.

    Packages are compared one by one (``installed`` where both have it, else the short
    ``packages`` list); the CPU by model and flags; the kernels by the libraries loaded and torch's
    CPU capability. A key only one snapshot records is reported with ``None`` on the other side.
    """
    out: dict[str, tuple[Any, Any]] = {}
    key = "installed" if "installed" in env_a and "installed" in env_b else "packages"
    pa, pb = env_a.get(key) or {}, env_b.get(key) or {}
    for name in sorted(set(pa) | set(pb)):
        if pa.get(name) != pb.get(name):
            out[f"package {name}"] = (pa.get(name), pb.get(name))
    for k in ("python", "machine", "cpu_count"):
        if env_a.get(k) != env_b.get(k):
            out[k] = (env_a.get(k), env_b.get(k))
    ca, cb = env_a.get("cpu") or {}, env_b.get("cpu") or {}
    if ca.get("model") != cb.get("model"):
        out["cpu model"] = (ca.get("model"), cb.get("model"))
    fa, fb = set(ca.get("flags") or ()), set(cb.get("flags") or ())
    if fa != fb and fa and fb:
        out["cpu flags"] = (sorted(fa - fb), sorted(fb - fa))
    ka, kb = env_a.get("kernels") or {}, env_b.get("kernels") or {}
    if (ka.get("torch") or {}).get("cpu_capability") != (kb.get("torch") or {}).get("cpu_capability"):
        out["torch cpu capability"] = (
            (ka.get("torch") or {}).get("cpu_capability"),
            (kb.get("torch") or {}).get("cpu_capability"),
        )

    def libs(k: dict[str, Any]) -> list[str]:
        return sorted(
            f"{t['prefix']} {t['version']} {t.get('architecture') or ''}".strip()
            for t in k.get("threadpools") or []
        )

    if libs(ka) != libs(kb):
        out["numerical libraries"] = (libs(ka), libs(kb))
    if ka.get("variables") != kb.get("variables"):
        out["kernel variables"] = (ka.get("variables"), kb.get("variables"))
    for side, env in (("A", env_a), ("B", env_b)):
        if "installed" not in env or "cpu" not in env:
            out[f"env.json {side}"] = ("older format: no full package list or CPU record", "")
    return out


def compare_runs(dir_a: Path, dir_b: Path) -> Comparison:
    """Compare the claim records and ``env.json`` of two report folders.

    Raises:
        FileNotFoundError: a folder does not exist.
    """
    ra, rb = _records(dir_a), _records(dir_b)
    claims = [_claim_diff(ra[n], rb[n]) for n in sorted(set(ra) & set(rb))]

    def env(folder: Path) -> dict[str, Any]:
        path = folder / "env.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    return Comparison(
        claims=claims,
        only_a=sorted(set(ra) - set(rb)),
        only_b=sorted(set(rb) - set(ra)),
        env=env_differences(env(dir_a), env(dir_b)),
    )
