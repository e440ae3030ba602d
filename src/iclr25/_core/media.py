"""Pictures, animations, sounds and heatmaps a claim puts in its report.

A claim whose evidence is best seen (sample grids, segmentation overlays, spectrograms, audio)
returns a :class:`MediaResult`: a :class:`~iclr25._core.claims.RunResult` with a ``media``
mapping. Each item is encoded once, when it is made (PNG, GIF or 16-bit WAV, or a list of
values for a heatmap), so the JSON record of a run carries it and ``iclr25 report DIR`` draws
it again without the claim. Media never enter a verdict: criteria read ``metrics`` only.

Example:
    >>> import numpy as np
    >>> tiles = [np.full((4, 4, 3), v, dtype=np.uint8) for v in (0, 128, 255)]
    >>> grid = image_grid(tiles, ncols=2, pad=1)
    >>> grid.shape
    (11, 11, 3)
    >>> Picture("three tiles", grid).to_record()["kind"]
    'picture'
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from iclr25._core.claims import RunResult

__all__ = ["Animation", "Heatmap", "MediaResult", "Picture", "Sound", "decode", "image_grid"]


def _check_image(image: Any, what: str) -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        raise TypeError(f"{what} must be uint8 (0..255), got {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise ValueError(f"{what} must be (H, W) or (H, W, 3), got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{what} is empty: shape {arr.shape}")
    return arr


def image_grid(images: Sequence[np.ndarray], ncols: int, pad: int = 2, fill: int = 255) -> np.ndarray:
    """Tile equally sized uint8 images row by row into one (H, W, 3) image.

    Args:
        images: (h, w) or (h, w, 3) uint8 images, all of one size.
        ncols: images per row.
        pad: pixels of ``fill`` between and around the tiles.
        fill: the padding's grey level.
    """
    if not images:
        raise ValueError("image_grid needs at least one image")
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    tiles = [_check_image(im, f"image {i}") for i, im in enumerate(images)]
    tiles = [np.repeat(t[:, :, None], 3, axis=2) if t.ndim == 2 else t for t in tiles]
    h, w = tiles[0].shape[:2]
    for i, t in enumerate(tiles):
        if t.shape[:2] != (h, w):
            raise ValueError(f"image {i} is {t.shape[:2]}, image 0 is {(h, w)}: tiles must share one size")
    nrows = math.ceil(len(tiles) / ncols)
    cols = min(ncols, len(tiles))
    grid = np.full((pad + nrows * (h + pad), pad + cols * (w + pad), 3), fill, dtype=np.uint8)
    for i, t in enumerate(tiles):
        r, c = divmod(i, ncols)
        y, x = pad + r * (h + pad), pad + c * (w + pad)
        grid[y : y + h, x : x + w] = t
    return grid


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@dataclass
class Picture:
    """One still image, stored as PNG.

    Args:
        title: caption in the report.
        image: (H, W) or (H, W, 3) uint8.
    """

    title: str
    image: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        from PIL import Image

        buf = io.BytesIO()
        Image.fromarray(_check_image(self.image, f"picture {self.title!r}")).save(buf, format="PNG")
        self._data = buf.getvalue()

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready form: kind, title and the PNG in base64."""
        return {"kind": "picture", "title": self.title, "png": _b64(self._data)}


@dataclass
class Animation:
    """A short clip of frames, stored as a looping GIF.

    Args:
        title: caption in the report.
        frames: (H, W) or (H, W, 3) uint8 frames of one size.
        fps: frames per second.
    """

    title: str
    frames: Sequence[np.ndarray] = field(repr=False)
    fps: float = 4.0

    def __post_init__(self) -> None:
        from PIL import Image

        if not self.frames:
            raise ValueError(f"animation {self.title!r} has no frames")
        if not self.fps > 0:
            raise ValueError(f"animation {self.title!r}: fps must be > 0, got {self.fps}")
        arrays = [_check_image(f, f"frame {i} of {self.title!r}") for i, f in enumerate(self.frames)]
        if any(a.shape != arrays[0].shape for a in arrays):
            raise ValueError(f"animation {self.title!r}: frames differ in shape")
        pics = [Image.fromarray(a).convert("RGB") for a in arrays]
        buf = io.BytesIO()
        pics[0].save(
            buf,
            format="GIF",
            save_all=True,
            append_images=pics[1:],
            duration=round(1000 / self.fps),
            loop=0,
        )
        self._data = buf.getvalue()

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready form: kind, title and the GIF in base64."""
        return {"kind": "animation", "title": self.title, "gif": _b64(self._data)}


@dataclass
class Sound:
    """Mono audio, stored as 16-bit PCM WAV.

    Args:
        title: caption in the report.
        samples: 1-D float samples in [-1, 1].
        sample_rate: samples per second.
    """

    title: str
    samples: np.ndarray = field(repr=False)
    sample_rate: int = 16000

    def __post_init__(self) -> None:
        from scipy.io import wavfile

        x = np.asarray(self.samples, dtype=np.float64)
        if x.ndim != 1 or x.size == 0:
            raise ValueError(f"sound {self.title!r} must be 1-D and non-empty, got shape {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError(f"sound {self.title!r} has NaN or infinite samples")
        if np.abs(x).max() > 1.0:
            raise ValueError(
                f"sound {self.title!r} peaks at {np.abs(x).max():.3g}: samples must lie in [-1, 1]"
            )
        if self.sample_rate <= 0:
            raise ValueError(f"sound {self.title!r}: sample_rate must be > 0, got {self.sample_rate}")
        buf = io.BytesIO()
        wavfile.write(buf, int(self.sample_rate), np.round(x * 32767).astype(np.int16))
        self._data = buf.getvalue()

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready form: kind, title and the WAV in base64."""
        return {"kind": "sound", "title": self.title, "wav": _b64(self._data)}


@dataclass
class Heatmap:
    """A matrix drawn as a colour map (e.g. a correlation table or a spectrogram).

    The report draws the elementwise median over seeds when every seed gives the same shape.

    Args:
        title: figure title.
        xlabel: x-axis label.
        ylabel: y-axis label.
        values: rows of the matrix (row i is drawn at y = i).
        xticks: one label per column, or none.
        yticks: one label per row, or none.
        origin: "upper" puts row 0 at the top (tables); "lower" at the bottom (spectrograms).
    """

    title: str
    xlabel: str
    ylabel: str
    values: list[list[float]]
    xticks: list[str] = field(default_factory=list)
    yticks: list[str] = field(default_factory=list)
    origin: Literal["upper", "lower"] = "upper"

    def __post_init__(self) -> None:
        arr = np.asarray(self.values, dtype=np.float64)
        if arr.ndim != 2 or arr.size == 0:
            raise ValueError(
                f"heatmap {self.title!r}: values must be a non-empty matrix, got shape {arr.shape}"
            )
        if self.xticks and len(self.xticks) != arr.shape[1]:
            raise ValueError(f"heatmap {self.title!r}: {len(self.xticks)} xticks for {arr.shape[1]} columns")
        if self.yticks and len(self.yticks) != arr.shape[0]:
            raise ValueError(f"heatmap {self.title!r}: {len(self.yticks)} yticks for {arr.shape[0]} rows")
        if self.origin not in ("upper", "lower"):
            raise ValueError(
                f"heatmap {self.title!r}: origin must be 'upper' or 'lower', got {self.origin!r}"
            )
        self.values = arr.tolist()

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready form: kind and every field."""
        return {
            "kind": "heatmap",
            "title": self.title,
            "xlabel": self.xlabel,
            "ylabel": self.ylabel,
            "values": self.values,
            "xticks": list(self.xticks),
            "yticks": list(self.yticks),
            "origin": self.origin,
        }


Media = Picture | Animation | Sound | Heatmap


@dataclass
class MediaResult(RunResult):
    """A :class:`RunResult` with pictures, animations, sounds or heatmaps for the report.

    Args:
        media: name -> item; the report shows the first seed's pictures, animations and
            sounds, and the median over seeds of each heatmap.
    """

    media: dict[str, Media] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        for key, item in self.media.items():
            if not isinstance(item, (Picture, Animation, Sound, Heatmap)):
                raise TypeError(
                    f"media {key!r} must be a Picture, Animation, Sound or Heatmap, got {type(item).__name__}"
                )


def decode(record: dict[str, Any]) -> bytes:
    """The file bytes (PNG, GIF or WAV) of a picture, animation or sound record."""
    for key in ("png", "gif", "wav"):
        if key in record:
            return base64.b64decode(record[key])
    raise ValueError(f"a {record.get('kind')!r} record holds no file")
