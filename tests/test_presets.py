"""Paper presets: discovery on nested configs, and their expression as --set overrides."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from iclr25._core.config import ConfigError, apply_overrides, param
from iclr25.presets import apply_preset, preset_overrides, presets


@dataclass(frozen=True)
class Tuned:
    steps: int = param(10, doc="steps", source="deviation: test")
    widths: tuple[int, ...] = param((4,), doc="widths", source="deviation: test")
    lr: float | None = param(None, doc="lr", source="deviation: test")

    @classmethod
    def paper(cls) -> Tuned:
        return cls(steps=1000, widths=(512, 256), lr=3e-4)

    @classmethod
    def paper_wide(cls, width: int = 2048) -> Tuned:
        return cls(steps=1000, widths=(width,))

    @classmethod
    def paper_needs(cls, width: int) -> Tuned:  # takes an argument: not a preset
        return cls(widths=(width,))


@dataclass(frozen=True)
class Holder:
    model: Tuned = param(Tuned(), doc="model", source="deviation: test")
    seeds: int = param(1, doc="seeds", source="deviation: test")


def test_presets_are_found_on_nested_configs() -> None:
    assert presets(Holder()) == {"paper": ["model"], "paper_wide": ["model"]}
    assert presets(Tuned()) == {"paper": [""], "paper_wide": [""]}
    assert apply_preset(Holder(), "paper") == Holder(model=Tuned.paper())


def test_preset_overrides_round_trip_through_set() -> None:
    out = preset_overrides(Holder(), "paper")
    assert out == {"model.steps": "1000", "model.widths": "512,256", "model.lr": "0.0003"}
    assert apply_overrides(Holder(), out) == Holder(model=Tuned.paper())


def test_unknown_preset_names_the_offered_ones() -> None:
    with pytest.raises(ConfigError, match="no preset 'paper_needs'; this config offers: paper, paper_wide"):
        preset_overrides(Holder(), "paper_needs")


def test_preset_that_fails_validation_is_refused() -> None:
    @dataclass(frozen=True)
    class Strict:
        model: Tuned = param(Tuned(), doc="model", source="deviation: test")

        def __post_init__(self) -> None:
            if self.model.steps > 100:
                raise ValueError("model.steps must be at most 100 here")

    with pytest.raises(ConfigError, match=r"does not fit this config: model\.steps must be at most 100"):
        preset_overrides(Strict(), "paper")


@pytest.mark.parametrize("name", ["ftct", "ditto", "hessian_distill", "invmsafold", "gense", "clip_dfkd"])
def test_method_presets_are_expressible_or_refused(name: str) -> None:
    """A shipped claim's paper preset is written as --set overrides, or refused with the reason."""
    import importlib

    cfg = importlib.import_module(f"iclr25.methods.{name}.claim").CLAIM.budgets["full"].config
    assert presets(cfg)
    for preset in presets(cfg):
        try:
            overrides = preset_overrides(cfg, preset)
        except ConfigError as err:
            assert "does not fit this config" in str(err) or "no order of --set" in str(err)
            continue
        assert apply_overrides(cfg, overrides) == apply_preset(cfg, preset)
    if name == "ftct":  # the whole-config presets of the paper's GPT-2 runs
        assert preset_overrides(cfg, "paper_gptsmall")["model.n_layer"] == "12"
