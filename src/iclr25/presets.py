"""Paper presets of the claim configs, written out as ``--set`` overrides.

A config class (or a nested config's class) may offer the paper's setting as a classmethod named
``paper`` or ``paper_<what>`` that takes no argument. ``iclr25 check NAME --preset P`` turns the
chosen preset into one ``--set`` override per field that differs from the budget's config, so the
report records exactly which fields the preset changed.

Example:
    >>> from iclr25.methods.ftct.claim import CLAIM
    >>> cfg = CLAIM.budgets["full"].config
    >>> sorted(presets(cfg))
    ['paper_gptlarge', 'paper_gptsmall', 'paper_normal']
    >>> preset_overrides(cfg, "paper_gptsmall")["model.n_layer"]
    '12'
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, TypeVar

from iclr25._core.config import ConfigError, apply_overrides, config_rows

__all__ = ["apply_preset", "preset_overrides", "presets"]

T = TypeVar("T")


def _class_presets(cls: type) -> list[str]:
    """The no-argument ``paper``/``paper_*`` classmethods of a config class."""
    names = []
    for name in sorted(vars(cls)):
        if name != "paper" and not name.startswith("paper_"):
            continue
        if not isinstance(inspect.getattr_static(cls, name), classmethod):
            continue
        params = inspect.signature(getattr(cls, name)).parameters.values()
        if all(p.default is not inspect.Parameter.empty for p in params):
            names.append(name)
    return names


def presets(config: Any) -> dict[str, list[str]]:
    """The paper presets reachable from a config, and the fields each replaces.

    Args:
        config: a (nested) frozen config dataclass.

    Returns:
        ``{preset name: [dotted field, ...]}``, ``""`` standing for the whole config. A preset of
        the top-level class replaces the whole config; one of a nested config's class replaces
        each nested field whose class offers it.
    """
    found: dict[str, list[str]] = {name: [""] for name in _class_presets(type(config))}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if not dataclasses.is_dataclass(value):
            continue
        for name, fields in presets(value).items():
            if found.get(name) != [""]:
                found.setdefault(name, []).extend(f.name + ("." + sub if sub else "") for sub in fields)
    return found


def apply_preset(config: T, name: str) -> T:
    """Return ``config`` with the paper preset ``name`` applied where :func:`presets` places it.

    Raises:
        ConfigError: no class in the config offers a preset of that name.
    """
    where = presets(config).get(name)
    if where is None:
        known = ", ".join(sorted(presets(config))) or "none"
        raise ConfigError(f"no preset {name!r}; this config offers: {known}")
    try:
        for dotted in where:
            config = _replace_at(config, dotted.split(".") if dotted else [], name)
    except ValueError as err:  # the preset's values fail the enclosing config's validation
        raise ConfigError(f"preset {name!r} does not fit this config: {err}") from None
    return config


def _replace_at(config: Any, path: list[str], name: str) -> Any:
    if not path:
        return getattr(type(config), name)()
    head = path[0]
    return dataclasses.replace(config, **{head: _replace_at(getattr(config, head), path[1:], name)})


def _text(value: Any) -> str:
    """A field value as ``--set`` parses it back."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(_text(v) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def preset_overrides(config: Any, name: str) -> dict[str, str]:
    """The ``--set`` overrides that turn ``config`` into ``apply_preset(config, name)``.

    Raises:
        ConfigError: no such preset, or a changed field that ``--set`` cannot express.
    """
    target = apply_preset(config, name)
    before = {key: value for key, value, _, _ in config_rows(config)}
    todo = {key: _text(value) for key, value, _, _ in config_rows(target) if before.get(key) != value}
    # --set applies one field at a time and validates each step, so order the fields such that
    # every intermediate config is valid (e.g. d_model before an n_head that must divide it)
    out: dict[str, str] = {}
    current = config
    while todo:
        for key, text in todo.items():
            try:
                current = apply_overrides(current, {key: text})
            except ConfigError:
                continue
            out[key] = todo.pop(key)
            break
        else:
            raise ConfigError(f"preset {name!r}: no order of --set reaches it (stuck at {sorted(todo)})")
    if current != target:
        raise ConfigError(f"preset {name!r} changes fields that --set cannot express")
    return out
