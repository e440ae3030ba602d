"""Tests of FTCT configs: validation and paper presets."""

import dataclasses

import numpy as np
import pytest

from iclr25.methods.ftct import (
    CausalGraph,
    ClaimConfig,
    FTCTConfig,
    FTCTTokenizer,
    ModelConfig,
    make_compositional_tests,
)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"max_child_len": 5}, "max_child_len"),  # M >= n
        ({"max_child_len": 6}, "max_child_len"),
        ({"max_child_len": 1}, "max_child_len"),  # M < 2
        ({"context_range": (0, 9)}, "context_range"),
        ({"merge_pos": 5}, "merge_pos"),
    ],
)
def test_data_config_errors(kw, field):
    with pytest.raises(ValueError, match=field):
        FTCTConfig(**kw)


def test_heads_must_divide_d():
    with pytest.raises(ValueError, match="divide"):
        ModelConfig(n_head=3, d_model=128)
    assert ModelConfig(n_head=3, d_model=120).d_model == 120


def test_negative_shots_raise():
    with pytest.raises(ValueError, match="shots"):
        ClaimConfig(shots=(0, -1))
    cfg = FTCTConfig()
    g = CausalGraph.random(cfg, np.random.default_rng(0))
    tok = FTCTTokenizer(cfg.n_letters, cfg.modulus, cfg.context_div)
    with pytest.raises(ValueError, match="k_shots"):
        make_compositional_tests(g, tok, cfg, -1, 3, np.random.default_rng(0))


def test_paper_presets():
    normal = ClaimConfig.paper_normal()
    assert (normal.model.n_layer, normal.model.n_head, normal.model.d_model) == (3, 3, 720)
    assert normal.train.lr == 5e-5 and normal.train.batch_size == 8 and normal.train.epochs == 14
    assert normal.data.root_low == 100 and normal.data.root_count == 50 and normal.data.modulus == 1000
    assert normal.data.context_div == 7 and normal.data.context_range == (1, 7)
    assert (normal.data.n_structure, normal.data.n_fragment) == (5000, 20000)
    small = ClaimConfig.paper_gptsmall(depth=8, max_child_len=4)
    assert (small.model.n_layer, small.model.n_head, small.data.depth) == (12, 12, 8)
    assert small.data.context_range == (1, 6) and small.train.batch_size == 4
    large = ClaimConfig.paper_gptlarge()
    assert (large.model.n_layer, large.model.n_head, large.model.d_model) == (36, 20, 1280)
    with pytest.raises(ValueError):
        ClaimConfig.paper_normal(depth=5, max_child_len=5)


def test_every_field_has_a_source():
    for cls in (FTCTConfig, ModelConfig, ClaimConfig):
        for f in dataclasses.fields(cls):
            assert f.metadata["source"].startswith(("paper:", "deviation:")), f.name
