"""The paper-scale teacher loader on a tiny open_clip model the test registers and saves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from iclr25.methods.clip_dfkd import load_open_clip_teacher

open_clip = pytest.importorskip("open_clip")

#: A two-tower open_clip config small enough to build in a second (the real ones are ViT-B-32, RN50, …).
_TINY = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 16, "head_width": 16},
    "text_cfg": {"context_length": 12, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, dict[str, torch.Tensor]]:
    folder = tmp_path_factory.mktemp("open_clip")
    name = "iclr25-test-tiny-clip"
    (folder / f"{name}.json").write_text(json.dumps(_TINY))
    open_clip.add_model_config(folder / f"{name}.json")
    torch.manual_seed(0)
    model = open_clip.create_model(name, pretrained=None)
    path = folder / "tiny.pt"
    torch.save(model.state_dict(), path)  # the layout open_clip's own training writes
    return name, path, model.state_dict()


def test_the_checkpoint_loads_into_a_frozen_teacher(tiny_checkpoint) -> None:  # type: ignore[no-untyped-def]
    name, path, state = tiny_checkpoint
    teacher = load_open_clip_teacher(name, path)
    got = teacher.model.state_dict()
    assert got.keys() == state.keys() and all(torch.equal(got[k], state[k]) for k in state)
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())
    # OpenAI CLIP normalisation, read from the model
    assert torch.allclose(teacher.mean.flatten(), torch.tensor(open_clip.OPENAI_DATASET_MEAN))
    assert teacher.encode_image(torch.rand(2, 3, 32, 32)).shape == (2, 16)
    text = teacher.encode_text(["a photo of a cat", "a photo of a dog"])
    assert text.shape == (2, 16) and torch.allclose(text.norm(dim=-1), torch.ones(2))


def test_a_missing_checkpoint_is_named(tmp_path: Path, tiny_checkpoint) -> None:  # type: ignore[no-untyped-def]
    name, _, _ = tiny_checkpoint
    with pytest.raises(FileNotFoundError, match=r"no open_clip checkpoint at .*missing\.pt"):
        load_open_clip_teacher(name, tmp_path / "missing.pt")
