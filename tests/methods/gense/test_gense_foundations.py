"""The shipped GenSE foundations: the tokenizer and LM recipes (replay, resumption, artefact files),
their loaders, the reload check the claim runs on them, and the shipped pipeline and demo."""

from __future__ import annotations

import copy
import shutil
import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr25._core.pretrained import read_training, require_artefact
from iclr25.methods.gense import (
    LM_ARMS,
    N2S,
    ClaimConfig,
    GenSE,
    LMConfig,
    LMRecipe,
    TokenizerConfig,
    TokenizerRecipe,
    arm_batch,
    build_lm,
    lm_validation,
    load_codec,
    load_lm,
    load_tokenizer,
    pretrain_lm,
    pretrain_tokenizer,
    train_lm,
)
from iclr25.methods.gense.claim import _check_reload

espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng is not installed")
DATA = ClaimConfig.smoke().data
TINY_LM = LMConfig(n_embd=16, n_layer=1, n_head=2, steps=6, batch_size=2)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    """A tokenizer recipe run on a toy size (shared by the LM recipe tests)."""
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tok") / "tokenizer"
    recipe = TokenizerRecipe(
        data=DATA, n_train=12, n_val=2, tokenizer=TokenizerConfig(epochs=2, hidden=8, n_clusters=8)
    )
    pretrain_tokenizer(out, recipe=recipe)
    return out


def _lm_recipe(**kw) -> LMRecipe:
    return LMRecipe(data=DATA, n_train=12, n_clips=6, mixtures_per_clip=1, lm=TINY_LM, eval_every=2, n_val=2,
                    n_eval=2, checkpoint_every=2, **kw)  # fmt: skip


@espeak
def test_tokenizer_recipe_writes_a_folder_that_tokenizes_alike(tokenizer_dir: Path, tmp_path: Path) -> None:
    from iclr25.methods.gense import make_speech_set

    record = read_training(require_artefact(tokenizer_dir))
    assert len(record["val_per"]) == 2 and {"val_per", "same_text", "diff_text"} <= set(record["quality"])
    recipe = TokenizerRecipe(
        data=DATA, n_train=12, n_val=2, tokenizer=TokenizerConfig(epochs=2, hidden=8, n_clusters=8)
    )
    replay = pretrain_tokenizer(tmp_path / "r", recipe=recipe, max_steps=1)
    assert replay == record["loss_curve"][:1] and not (tmp_path / "r").exists()
    tok, vocab = load_tokenizer(tokenizer_dir)
    wavs = torch.from_numpy(make_speech_set(DATA, DATA.test_voices, 2, seed=1).wavs)
    ids = tok.transform_batch(wavs)
    assert ids.shape == (2, DATA.clip_samples // 320) and int(ids.max()) < 8 and vocab
    # the centroids survive the round trip: k-means' nearest-centroid rule on the features by hand
    feats = tok.features.batch(wavs)
    centers = torch.from_numpy(tok.kmeans_.cluster_centers_)
    assert torch.equal(ids, torch.cdist(feats, centers[None].expand(2, -1, -1)).argmin(-1))


def test_train_lm_resumes_bit_for_bit() -> None:
    """An interrupted run resumed from its checkpoint equals the uninterrupted one (dropout included)."""
    cfg = LMConfig(n_embd=16, n_layer=1, n_head=2, n_positions=64)
    data = {"ns": torch.randint(0, 5, (10, 4)), "cs": torch.randint(0, 5, (10, 4))}

    def fresh() -> N2S:
        torch.manual_seed(0)
        return N2S(5, cfg)

    def run(lm, **kw):
        return train_lm(lm, lambda i: arm_batch("n2s", lm, data, i), 10, steps=6, batch_size=3, lr=1e-3,
                        block=2, generator=torch.Generator().manual_seed(1), **kw)  # fmt: skip

    straight, full = fresh(), []
    torch.manual_seed(5)
    run(straight, step_losses=full)
    saved: list[dict] = []
    part, rest = [], []
    first = fresh()
    torch.manual_seed(5)
    run(
        first,
        step_losses=part,
        stop=4,
        checkpoint=lambda st: saved.append(copy.deepcopy(st)),
        checkpoint_every=2,
    )
    torch.manual_seed(99)  # the resumed run restores torch's RNG from the checkpoint
    resumed = fresh()
    run(resumed, step_losses=rest, resume=saved[-1])
    assert [s["step"] for s in saved] == [2, 4] and part + rest == full
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_unknown_lm_arm_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown LM 'nope'"):
        build_lm("nope", 4, 8, TINY_LM)


@espeak
@pytest.mark.parametrize("arm", sorted(LM_ARMS))
def test_lm_recipe_replays_resumes_and_writes_the_artefact(
    arm: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    kw = {"recipe": _lm_recipe(), "tokenizer_dir": tokenizer_dir}
    replay = pretrain_lm(tmp_path / "r", arm=arm, max_steps=3, **kw)
    assert len(replay) == 3 and not (tmp_path / "r").exists()

    class Interrupt(Exception):
        pass

    def interrupt(stage: str, done: int, total: int) -> None:
        if done >= 4:
            raise Interrupt

    with pytest.raises(Interrupt):
        pretrain_lm(tmp_path / "a", arm=arm, progress=interrupt, **kw)
    assert (tmp_path / "a" / "resume.pt").is_file()
    losses = pretrain_lm(tmp_path / "a", arm=arm, **kw)  # resumes from step 4
    assert losses[:3] == replay and len(losses) == 6
    record = read_training(require_artefact(tmp_path / "a"))
    assert record["loss_curve"] == losses and len(record["val_losses"]) == 3
    assert "plateau_gap" in record["bars_met"]
    assert ("oracle_semantic_per_ratio" in record["quality"]) == (arm == "s2s")
    lm, again = load_lm(arm, tmp_path / "a")
    assert again == record
    tok, _ = load_tokenizer(tokenizer_dir)
    val = lm_validation(DATA, 2, tok, load_codec())
    _check_reload(arm, lm, record, val)
    with torch.no_grad():
        for p in lm.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(RuntimeError, match=f"shipped {arm} LM gives held-out loss"):
        _check_reload(arm, lm, record, val)


# --- the shipped artefacts -----------------------------------------------------------------------


@pytest.mark.parametrize("arm", sorted(LM_ARMS))
def test_shipped_lms_reproduce_their_recorded_held_out_loss(arm: str) -> None:
    torch.set_num_threads(1)
    lm, record = load_lm(arm)
    tok, _ = load_tokenizer()
    _check_reload(arm, lm, record, lm_validation(LMRecipe().data, LMRecipe().n_val, tok, load_codec()))


def _write_wav(path: Path, x: np.ndarray, rate: int) -> None:
    pcm = (np.clip(x, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm.tobytes())


def test_demo_on_a_fresh_install_uses_the_shipped_models(tmp_path: Path) -> None:
    """`iclr25 demo gense file.wav` on a generated 2.5 s, 16 kHz wav writes an enhanced wav of the
    same length and rate with the shipped pipeline (nothing trained, no cache)."""
    from typer.testing import CliRunner

    from iclr25.cli import app

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    t = np.arange(40000) / 16000
    x = 0.3 * np.sin(2 * np.pi * 220 * t) * (t % 0.5 < 0.3) + 0.05 * rng.standard_normal(len(t))
    _write_wav(tmp_path / "noisy.wav", x, 16000)
    result = CliRunner().invoke(
        app, ["demo", "gense", str(tmp_path / "noisy.wav"), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    with wave.open(str(tmp_path / "o" / "noisy-enhanced.wav")) as w:
        assert w.getframerate() == 16000 and w.getnframes() == 40000


def test_shipped_pipeline_takes_a_numpy_array_and_a_rate() -> None:
    torch.set_num_threads(1)
    model = GenSE.shipped()
    x = 0.1 * np.random.default_rng(1).standard_normal(22050).astype(np.float32)
    with pytest.warns(UserWarning, match="resampl"):
        y = model.enhance(x, 22050)
    assert y.shape == x.shape and np.isfinite(y).all()
