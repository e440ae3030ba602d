"""Config fields and --set overrides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pytest

from fake_claim import CLAIM, FakeConfig
from iclr25._core.config import ConfigError, apply_overrides, config_rows, param


@dataclass(frozen=True)
class Inner:
    k: int = param(3, doc="k", source="paper: Sec. 1")
    kind: Literal["x", "y"] = param("x", doc="kind", source="paper: Sec. 1")
    sizes: tuple[int, ...] = param((1, 2), doc="sizes", source="paper: Sec. 1")
    lr: float | None = param(None, doc="lr", source="deviation: test")


@dataclass(frozen=True)
class Outer:
    inner: Inner = param(Inner(), doc="nested", source="paper: Sec. 2")
    flag: bool = param(False, doc="flag", source="paper: Sec. 2")


def test_overrides_parse_each_type() -> None:
    cfg = apply_overrides(
        Outer(),
        {"inner.k": "5", "inner.kind": "y", "inner.sizes": "4,5,6", "inner.lr": "0.1", "flag": "true"},
    )
    assert cfg == Outer(inner=Inner(k=5, kind="y", sizes=(4, 5, 6), lr=0.1), flag=True)
    assert apply_overrides(Outer(), {"inner.lr": "none"}).inner.lr is None


@pytest.mark.parametrize(
    ("key", "val", "match"),
    [
        ("inner.k", "five", "integer"),
        ("inner.kind", "z", "one of"),
        ("nope", "1", "unknown field"),
        ("inner.nope", "1", "unknown field"),
        ("flag", "maybe", "true or false"),
        ("inner", "1", "nested config"),
    ],
)
def test_bad_overrides_raise(key: str, val: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        apply_overrides(Outer(), {key: val})


def test_post_init_validation_surfaces_as_config_error() -> None:
    with pytest.raises(ConfigError, match="at least 10"):
        apply_overrides(FakeConfig(), {"n": "3"})


def test_param_requires_source_tag_and_immutable_default() -> None:
    with pytest.raises(ValueError, match="paper"):
        param(1, doc="d", source="because")
    with pytest.raises(TypeError, match="immutable"):
        param([1], doc="d", source="paper: x")


def test_config_rows_flatten_nested() -> None:
    rows = config_rows(Outer())
    assert [r[0] for r in rows] == ["inner.k", "inner.kind", "inner.sizes", "inner.lr", "flag"]
    assert rows[0][3] == "paper: Sec. 1"


def test_claim_config_applies_overrides() -> None:
    assert CLAIM.config("full", {"effect": "0.5"}).effect == 0.5
    with pytest.raises(ValueError, match="no budget"):
        CLAIM.config("medium")
