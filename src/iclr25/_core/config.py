"""Typed, traceable configuration fields and ``--set`` overrides.

Every method config is a frozen dataclass whose fields are declared with :func:`param`, so
each default carries a one-line doc and its source (``paper: <where>`` or
``deviation: <why>``). :func:`apply_overrides` turns ``key=value`` strings into a new config,
checking each value against the field's type.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

__all__ = ["ConfigError", "apply_overrides", "config_rows", "param", "to_dict"]

T = TypeVar("T")
_SOURCES = ("paper:", "deviation:")


class ConfigError(ValueError):
    """A config override or value that does not fit the config's fields or types."""


def param(default: Any, *, doc: str, source: str) -> Any:
    """Declare a config field with its default, a one-line doc and where the default comes from.

    Args:
        default: the default value (use tuples, never lists, so configs stay immutable).
        doc: one line saying what the field means (keep the paper's symbol, e.g. "β in Eq. 3").
        source: ``"paper: <where>"`` or ``"deviation: <why>"``.

    Returns:
        A ``dataclasses.field`` carrying the doc and source as metadata.
    """
    if not source.startswith(_SOURCES):
        raise ValueError(f"source must start with 'paper:' or 'deviation:', got {source!r}")
    if isinstance(default, (list, dict, set)):
        raise TypeError("config defaults must be immutable (use a tuple)")
    meta = {"doc": doc, "source": source}
    if dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: default, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (possibly nested) config dataclass."""
    return dataclasses.asdict(config)


def config_rows(config: Any, prefix: str = "") -> list[tuple[str, Any, str, str]]:
    """Flatten a config into ``(dotted_name, value, doc, source)`` rows, nested configs included."""
    rows: list[tuple[str, Any, str, str]] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        name = prefix + f.name
        if dataclasses.is_dataclass(value):
            rows.extend(config_rows(value, prefix=name + "."))
        else:
            rows.append((name, value, f.metadata.get("doc", ""), f.metadata.get("source", "")))
    return rows


def _parse(text: str, tp: Any, key: str) -> Any:
    """Parse one override string into a value of type ``tp``, or raise ``ConfigError``."""
    origin = get_origin(tp)
    if origin is Literal:
        for choice in get_args(tp):
            if str(choice) == text:
                return choice
        raise ConfigError(f"--set {key}={text}: expected one of {list(get_args(tp))}")
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if type(None) in get_args(tp) and text.lower() in ("none", "null"):
            return None
        for a in args:
            try:
                return _parse(text, a, key)
            except ConfigError:
                continue
        raise ConfigError(f"--set {key}={text}: expected {tp}")
    if origin is tuple:
        args = get_args(tp)
        parts = [p.strip() for p in text.strip("()[] ").split(",") if p.strip()]
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_parse(p, args[0], key) for p in parts)
        if len(parts) != len(args):
            raise ConfigError(f"--set {key}={text}: expected {len(args)} comma-separated values")
        return tuple(_parse(p, a, key) for p, a in zip(parts, args, strict=True))
    if tp is bool:
        low = text.lower()
        if low in ("true", "1", "yes"):
            return True
        if low in ("false", "0", "no"):
            return False
        raise ConfigError(f"--set {key}={text}: expected true or false")
    if tp is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"--set {key}={text}: expected an integer") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"--set {key}={text}: expected a number") from None
    if tp is str:
        return text
    raise ConfigError(f"--set {key}: fields of type {tp} cannot be set from the command line")


def _set(config: Any, path: list[str], text: str, key: str) -> Any:
    names = {f.name for f in dataclasses.fields(config)}
    head = path[0]
    if head not in names:
        raise ConfigError(
            f"--set {key}: unknown field {head!r} of {type(config).__name__}; "
            f"known: {', '.join(sorted(names))}"
        )
    current = getattr(config, head)
    if len(path) > 1:
        if not dataclasses.is_dataclass(current):
            raise ConfigError(f"--set {key}: {head!r} is not a nested config")
        return dataclasses.replace(config, **{head: _set(current, path[1:], text, key)})
    if dataclasses.is_dataclass(current):
        raise ConfigError(f"--set {key}: {head!r} is a nested config; set one of its fields")
    hints = get_type_hints(type(config))
    return dataclasses.replace(config, **{head: _parse(text, hints[head], key)})


def apply_overrides(config: T, overrides: typing.Mapping[str, str]) -> T:
    """Return a copy of ``config`` with dotted ``key -> string value`` overrides applied.

    Args:
        config: a (nested) frozen dataclass.
        overrides: e.g. ``{"train.steps": "200", "model.n_layer": "1"}``.

    Returns:
        A new config; ``config`` itself is unchanged.

    Raises:
        ConfigError: an unknown field, or a value that does not parse as the field's type.
            Validation in the config's ``__post_init__`` surfaces as ``ConfigError`` too.
    """
    for key, text in overrides.items():
        try:
            config = _set(config, key.split("."), text, key)
        except ConfigError:
            raise
        except (ValueError, TypeError) as err:
            raise ConfigError(f"--set {key}={text}: {err}") from None
    return config
