"""Media in reports: pictures, animations, sounds and heatmaps survive the JSON round trip."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.io import wavfile

from fake_claim import CLAIM
from iclr25._core.claims import judge
from iclr25._core.media import Animation, Heatmap, MediaResult, Picture, Sound, decode, image_grid
from iclr25._core.report import render_report, write_claim_json
from iclr25._core.runner import ClaimRun, SeedRun


def test_picture_png_decodes_to_the_same_pixels() -> None:
    image = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    back = np.asarray(Image.open(io.BytesIO(decode(Picture("p", image).to_record()))))
    np.testing.assert_array_equal(back, image)


def test_animation_keeps_every_frame() -> None:
    frames = [np.full((4, 6, 3), v, dtype=np.uint8) for v in (0, 100, 200)]
    gif = Image.open(io.BytesIO(decode(Animation("a", frames, fps=5).to_record())))
    assert gif.n_frames == 3 and gif.size == (6, 4)


def test_sound_is_16_bit_wav_at_its_rate() -> None:
    x = 0.5 * np.sin(np.linspace(0, 20, 800))
    rate, data = wavfile.read(io.BytesIO(decode(Sound("s", x, sample_rate=8000).to_record())))
    assert rate == 8000 and data.dtype == np.int16
    np.testing.assert_allclose(data / 32767, x, atol=1e-4)


def test_image_grid_places_tiles_row_by_row() -> None:
    tiles = [np.full((2, 3), v, dtype=np.uint8) for v in (10, 20, 30)]
    grid = image_grid(tiles, ncols=2, pad=1, fill=0)
    assert grid.shape == (7, 9, 3)
    assert grid[1, 1, 0] == 10 and grid[1, 5, 0] == 20 and grid[4, 1, 0] == 30 and grid[4, 5, 0] == 0


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Picture("p", np.zeros((4, 4, 3))), "uint8"),
        (lambda: Picture("p", np.zeros((4, 4, 4), dtype=np.uint8)), r"\(H, W\) or \(H, W, 3\)"),
        (lambda: Animation("a", []), "no frames"),
        (lambda: Sound("s", np.array([0.0, 2.0])), r"\[-1, 1\]"),
        (lambda: Sound("s", np.array([0.0, np.nan])), "NaN"),
        (lambda: Heatmap("h", "x", "y", [[1.0, 2.0]], xticks=["a"]), "xticks"),
        (lambda: image_grid([np.zeros((2, 2), np.uint8), np.zeros((3, 2), np.uint8)], 2), "one size"),
        (lambda: MediaResult(metrics={}, media={"x": np.zeros(3)}), "Picture, Animation"),
    ],
)
def test_bad_media_raise_clear_errors(make, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def _run_with_media(seed: int) -> MediaResult:
    base = CLAIM.run("full", seed)
    return MediaResult(
        metrics=base.metrics,
        series=base.series,
        media={
            "grid": Picture("a grid", np.full((4, 4, 3), 50 * seed, dtype=np.uint8)),
            "clip": Animation("a clip", [np.zeros((4, 4, 3), np.uint8)] * 2),
            "voice": Sound("a voice", np.zeros(160)),
            "corr": Heatmap("corr", "col", "row", [[float(seed), 1.0], [2.0, 3.0]], ["a", "b"], ["c", "d"]),
        },
    )


def test_report_writes_media_files_and_embeds_them(tmp_path: Path) -> None:
    run = ClaimRun(CLAIM, "full", {}, "cpu")
    run.seeds = [SeedRun(s, _run_with_media(s), None, 0.5) for s in (0, 1, 2)]
    run.judgement = judge(CLAIM, "full", [s.result for s in run.seeds])
    write_claim_json(tmp_path, run)
    record = json.loads((tmp_path / "fake.json").read_text())
    assert record["seeds"][1]["media"]["corr"]["values"][0] == [1.0, 1.0]
    md, html_path = render_report(tmp_path)
    figures = tmp_path / "figures"
    for name in ("fake-grid.png", "fake-clip.gif", "fake-voice.wav", "fake-corr.png"):
        assert (figures / name).is_file(), name
    text = md.read_text()
    assert "![a grid](figures/fake-grid.png)" in text and "Audio: [a voice](figures/fake-voice.wav)" in text
    page = html_path.read_text()
    assert "data:image/gif;base64," in page and "<audio controls src='data:audio/wav;base64," in page
    # the first seed's picture, not a later one's
    np.testing.assert_array_equal(np.asarray(Image.open(figures / "fake-grid.png"))[0, 0], [0, 0, 0])
