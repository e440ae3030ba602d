"""The shipped foundations of BiGR (the perceptual loss's feature net and the B-AE): their files,
their recorded quality, a replay of each recipe's first steps, and exact resumption."""

from __future__ import annotations

import copy

import pytest
import torch

from iclr25._core.pretrained import ARTEFACT_FILES, TRAINING_KEYS, ArtefactMissingError, read_training
from iclr25._core.registry import REGISTRY
from iclr25._core.seeding import claim_scope
from iclr25.methods.bigr import (
    FEATURE_NET,
    SHAPES_TOKENIZER,
    BinaryAEConfig,
    BinaryAutoencoder,
    FeatureNet,
    FeatureNetRecipe,
    TokenizerRecipe,
    load_feature_net,
    load_tokenizer,
    pretrain_feature_net,
    pretrain_tokenizer,
    save_feature_net,
)
from iclr25.methods.bigr.probe import _fit_classifier
from iclr25.methods.bigr.tokenizer import _train_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

ARTEFACTS = {a.name: a for a in REGISTRY["bigr"].artefacts}
RECIPES = {
    "feature_net": (pretrain_feature_net, FEATURE_NET),
    "bae_shapes16": (pretrain_tokenizer, SHAPES_TOKENIZER),
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_shipped_artefact_has_its_files_and_record(name: str) -> None:
    folder = RECIPES[name][1]
    assert folder == ARTEFACTS[name].path
    assert sorted(p.name for p in folder.iterdir()) == sorted(ARTEFACT_FILES)
    assert (folder / "model.safetensors").stat().st_size < 5_000_000
    rec = read_training(folder)
    assert set(TRAINING_KEYS) <= set(rec)
    assert rec["command"].startswith(f"iclr25 pretrain bigr {name} --out ")
    assert rec["steps"] == len(rec["loss_curve"]) == rec["config"]["steps"]


def test_shipped_feature_net_names_the_classes() -> None:
    rec = read_training(FEATURE_NET)
    assert rec["config"]["steps"] == FeatureNetRecipe().steps
    assert rec["quality"]["heldout_accuracy"] >= 0.95
    net = load_feature_net()
    assert not net.training and net.widths == FeatureNetRecipe().widths


def test_shipped_tokenizer_record_and_weights() -> None:
    """The B-AE was trained over the shipped feature net; its reconstructions keep their class."""
    rec = read_training(SHAPES_TOKENIZER)
    assert rec["config"]["steps"] == TokenizerRecipe().steps
    assert rec["feature_net"]["commit"] == read_training(FEATURE_NET)["commit"]
    assert rec["quality"]["recon_cond_acc"] >= 0.9 and rec["quality"]["eval_acc_natural"] >= 0.98
    ema, model = load_tokenizer(), load_tokenizer(key="model")
    assert ema.cfg == TokenizerRecipe().ae
    assert all(
        torch.equal(a, b) for a, b in zip(ema.state_dict().values(), model.state_dict().values(), strict=True)
    )


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipe_replays_its_first_steps(name: str, tmp_path) -> None:
    """The first steps of the recipe, run as ``iclr25 pretrain`` runs it, give the recorded losses
    and write nothing."""
    recipe, folder = RECIPES[name]
    n = ARTEFACTS[name].replay_steps
    with claim_scope(0, threads=1):
        losses = recipe(tmp_path, max_steps=n, progress=lambda *a: None)
    assert losses == pytest.approx(read_training(folder)["loss_curve"][:n], abs=1e-4)
    assert not any(tmp_path.iterdir())


def test_missing_artefacts_name_the_command(tmp_path) -> None:
    with pytest.raises(ArtefactMissingError, match="iclr25 pretrain bigr feature_net"):
        load_feature_net(tmp_path)
    with pytest.raises(ArtefactMissingError, match="iclr25 pretrain bigr bae_shapes16"):
        load_tokenizer(tmp_path)


def test_feature_net_round_trip(tmp_path) -> None:
    torch.manual_seed(0)
    net = FeatureNet(3, widths=(4, 8, 8)).eval()
    save_feature_net(net, tmp_path)
    (tmp_path / "training.json").write_text("{}")
    back = load_feature_net(tmp_path)
    x = torch.rand(2, 3, 8, 8)
    assert back.widths == (4, 8, 8) and torch.equal(back(x), net(x))


def _checkpoints() -> tuple[list[dict], object]:
    """A list and a ``checkpoint`` callback that appends a copy of each state (as a file would)."""
    saved: list[dict] = []
    return saved, lambda st: saved.append(copy.deepcopy(st))


def test_classifier_loop_resumes_exactly() -> None:
    """Stopped at a checkpoint and resumed from it, the loop gives the same losses and weights."""
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 3, 8, 8, generator=gen), torch.randint(0, 3, (64,), generator=gen)

    def run(state=None, checkpoint=None, stop=None):
        torch.manual_seed(0)
        net = FeatureNet(3, widths=(4, 8, 8))
        g = torch.Generator().manual_seed(1)
        losses = _fit_classifier(net, x, y, steps=12, batch_size=8, lr=1e-2, generator=g, stop=stop,
                                 state=state, checkpoint=checkpoint, every=5)  # fmt: skip
        return net, losses

    saved, keep = _checkpoints()
    net, losses = run(checkpoint=keep)
    assert [st["step"] for st in saved] == [5, 10] and len(losses) == 12
    again, resumed = run(state=saved[0])
    assert resumed == losses
    assert all(
        torch.equal(a, b) for a, b in zip(net.state_dict().values(), again.state_dict().values(), strict=True)
    )
    assert run(stop=3)[1] == losses[:3]


def test_tokenizer_loop_resumes_exactly() -> None:
    """The same for the B-AE's loop, whose cosine schedule spans every step even when it stops."""
    cfg = BinaryAEConfig(nf=8, ch_mult=(1, 2), num_res_blocks=1, attn_resolutions=(), emb_dim=8, code_dim=4,
                         resolution=8)  # fmt: skip
    x = torch.rand(32, 3, 8, 8, generator=torch.Generator().manual_seed(0)) * 2 - 1

    def run(state=None, checkpoint=None, stop=None):
        torch.manual_seed(0)
        ae = BinaryAutoencoder(cfg)
        g = torch.Generator().manual_seed(1)
        losses = _train_tokenizer(ae, x, steps=12, batch_size=4, lr=2e-3, generator=g, progress=None,
                                  perceptual=None, perceptual_weight=0.0, stop=stop, state=state,
                                  checkpoint=checkpoint, every=5)  # fmt: skip
        return ae, losses

    saved, keep = _checkpoints()
    ae, losses = run(checkpoint=keep)
    again, resumed = run(state=saved[0])
    assert resumed == losses
    assert all(
        torch.equal(a, b) for a, b in zip(ae.state_dict().values(), again.state_dict().values(), strict=True)
    )
    assert run(stop=7)[1] == losses[:7]
