"""Wrapping third-party CLIP models: open_clip and transformers, normalisation, clear errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from iclr25.methods.clip_dfkd import (
    CLIPTeacher,
    DistillConfig,
    InversionConfig,
    TeacherConfig,
    build_tiny_clip,
    customize,
    invert_dataset,
    tokenizer_for,
)


def _tiny_inversion() -> InversionConfig:
    return InversionConfig.tiny().replace(images_per_class=2, steps=1, batch_size=4)


def test_from_open_clip_reads_the_model_normalisation() -> None:
    import open_clip

    model = build_tiny_clip(TeacherConfig())
    t = CLIPTeacher.from_open_clip(model, tokenizer_for(TeacherConfig()))
    assert torch.allclose(t.mean.flatten(), torch.tensor(open_clip.OPENAI_DATASET_MEAN))
    assert torch.allclose(t.std.flatten(), torch.tensor(open_clip.OPENAI_DATASET_STD))
    model.visual.image_mean, model.visual.image_std = (0.1, 0.2, 0.3), (0.4, 0.5, 0.6)
    t = CLIPTeacher.from_open_clip(model, tokenizer_for(TeacherConfig()))
    assert torch.allclose(t.mean.flatten(), torch.tensor([0.1, 0.2, 0.3]))
    assert torch.allclose(t.std.flatten(), torch.tensor([0.4, 0.5, 0.6]))


def test_unwrapped_models_get_a_type_error() -> None:
    raw = build_tiny_clip(TeacherConfig())
    with pytest.raises(TypeError, match="from_open_clip"):
        customize(raw, ["star", "square"], image_size=32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="CLIPTeacher"):
        invert_dataset(raw, ["star", "square"], image_size=32)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="from_transformers"):
        CLIPTeacher(torch.nn.Linear(2, 2), tokenizer_for(TeacherConfig()))


def _tiny_transformers_clip() -> tuple[torch.nn.Module, SimpleNamespace]:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.CLIPConfig(
        text_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 16,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    torch.manual_seed(0)
    model = transformers.CLIPModel(cfg)
    bpe = tokenizer_for(TeacherConfig())  # the CLIP BPE shipped with open_clip (nothing downloads)

    def tokenizer(texts: list[str], **_: object) -> dict[str, torch.Tensor]:
        return {"input_ids": bpe(texts)[:, :16]}

    processor = SimpleNamespace(image_processor=transformers.CLIPImageProcessor(), tokenizer=tokenizer)
    return model, processor


def test_from_transformers_through_customize() -> None:
    model, processor = _tiny_transformers_clip()
    t = CLIPTeacher.from_transformers(model, processor)
    assert torch.allclose(t.mean.flatten(), torch.tensor(processor.image_processor.image_mean))
    assert torch.allclose(t.std.flatten(), torch.tensor(processor.image_processor.image_std))
    assert t.encode_image(torch.rand(2, 3, 32, 32)).shape == (2, 16)
    assert t.encode_text(["a star"]).shape == (1, 16)
    student = customize(
        t,
        ["star", "square"],
        image_size=32,
        inversion=_tiny_inversion(),
        distill=DistillConfig(epochs=1, warmup_epochs=1, batch_size=2),
        generator=torch.Generator().manual_seed(0),
    )
    assert student(torch.rand(3, 3, 32, 32)).shape == (3, 2)
    assert not any(p.requires_grad for p in model.parameters())  # the teacher stayed frozen


def test_from_transformers_rejects_wrong_objects() -> None:
    model, processor = _tiny_transformers_clip()
    with pytest.raises(TypeError, match="CLIPModel"):
        CLIPTeacher.from_transformers(build_tiny_clip(TeacherConfig()), processor)
    with pytest.raises(TypeError, match="processor"):
        CLIPTeacher.from_transformers(model, SimpleNamespace(tokenizer=processor.tokenizer))
    with pytest.raises(TypeError, match="from_transformers"):
        customize(model, ["star", "square"], image_size=32)  # type: ignore[arg-type]
