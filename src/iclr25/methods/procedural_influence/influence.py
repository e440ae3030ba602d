"""EK-FAC influence of every document on every query, through kronfluence 1.0.1, cached.

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Ruis et al.,
ICLR 2025, arXiv:2411.12580, Sec. 2: ``I_f(d) = -grad f^T (G + lambda I)^-1 grad L(d)`` with the
EK-FAC approximation of the Fisher ``G`` (Grosse et al. 2023) and ``lambda`` = 0.1 x the mean
eigenvalue; scores are divided by the query's nats ``-log p(c | p)`` to compare queries.

Everything numerical is kronfluence's: covariance fitting, eigendecomposition, the refitted
eigenvalues (``Analyzer.fit_all_factors``) and the pairwise scores
(``Analyzer.compute_pairwise_scores``). This module only wires the data in, passes the damping
explicitly, keeps kronfluence's files in a cache folder keyed by a content hash (never the working
directory) and reads the scores back.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from iclr25.methods.procedural_influence.task import CausalLMInfluenceTask, resolve_tracked_modules

__all__ = ["InfluenceResult", "TensorDictDataset", "cache_root", "compute_influence", "content_hash"]

#: Bumped when the meaning of cached files changes.
_CACHE_VERSION = "1"


class TensorDictDataset(Dataset):
    """Rows of a dict of equally long tensors, as dicts (kronfluence collates them back)."""

    def __init__(self, tensors: dict[str, torch.Tensor]) -> None:
        n = {len(v) for v in tensors.values()}
        if len(n) != 1:
            raise ValueError(f"tensors of different lengths: {n}")
        self.tensors = tensors
        self.n = n.pop()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[i] for k, v in self.tensors.items()}


@dataclass
class InfluenceResult:
    """Scores of queries on documents.

    Args:
        scores: ``I_f(d)`` per query and document (positive = the document raises the query's
            log-probability). Shape [Q, D].
        query_nats: ``-log p(c | p)`` per query. Shape [Q].
        strategy: the kronfluence strategy the scores come from.
        tracked: the module names influence was computed over.
        key: the content hash the result is cached under.
    """

    scores: np.ndarray
    query_nats: np.ndarray
    strategy: str
    tracked: list[str]
    key: str

    def per_nat(self) -> np.ndarray:
        """Scores divided by each query's nats (the paper's normalisation). Shape [Q, D]."""
        from iclr25.methods.procedural_influence.analysis import normalize_per_nat

        return normalize_per_nat(self.scores, self.query_nats)

    def to_rows(self, query: int, top: int = 10) -> list[tuple[int, float]]:
        """The ``top`` documents of one query, as ``(document index, score)``, best first."""
        order = np.argsort(-self.scores[query], kind="stable")[:top]
        return [(int(i), float(self.scores[query, i])) for i in order]


def cache_root(cache_dir: str = "") -> Path:
    """The cache folder: ``cache_dir`` or ``$XDG_CACHE_HOME/iclr25/procedural_influence``."""
    if cache_dir:
        return Path(cache_dir)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "iclr25" / "procedural_influence"


def content_hash(*parts: object) -> str:
    """A short hash of tensors, arrays, state dicts and JSON-able values (the cache key, Trap 7)."""
    h = hashlib.sha256(_CACHE_VERSION.encode())
    for part in parts:
        _feed(h, part)
    return h.hexdigest()[:16]


def _feed(h: hashlib._Hash, part: object) -> None:
    if isinstance(part, torch.Tensor):
        t = part.detach().cpu().contiguous()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else t.float().numpy().tobytes())
    elif isinstance(part, np.ndarray):
        h.update(np.ascontiguousarray(part).tobytes())
    elif isinstance(part, dict):
        for k in sorted(part):
            h.update(str(k).encode())
            _feed(h, part[k])
    elif isinstance(part, (list, tuple)):
        for p in part:
            _feed(h, p)
    else:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())


def _layer_permutation(names: list[str]) -> dict[str, str]:
    """A cyclic map of each tracked module onto the same projection of the next layer (or, with
    one layer, gate <-> up, which have the same shape)."""
    by_role: dict[str, list[str]] = {}
    for n in names:
        by_role.setdefault(re.sub(r"\.\d+\.", ".#.", n), []).append(n)
    mapping = {}
    for group in by_role.values():
        for i, n in enumerate(group):
            mapping[n] = group[(i + 1) % len(group)]
    if all(k == v for k, v in mapping.items()):
        gate = [n for n in names if n.endswith("gate_proj")]
        up = [n for n in names if n.endswith("up_proj")]
        for g, u in zip(gate, up, strict=True):
            mapping[g], mapping[u] = u, g
    return mapping


def _shuffle_factor_files(src: Path, dst: Path, mapping: dict[str, str]) -> None:
    """Copy kronfluence's factor folder, giving each module another module's factors."""
    from safetensors.torch import load_file, save_file

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for path in dst.glob("*.safetensors"):
        tensors = load_file(path)
        save_file({name: tensors[mapping.get(name, name)].contiguous() for name in tensors}, path)


def compute_influence(
    model: torch.nn.Module,
    documents: dict[str, torch.Tensor],
    queries: dict[str, torch.Tensor],
    cfg: object,
    *,
    shuffle_factors: bool = False,
    factor_documents: dict[str, torch.Tensor] | None = None,
    cpu: bool = True,
) -> InfluenceResult:
    """Influence of every document on every query with kronfluence (cached by content).

    Args:
        model: the trained causal LM (left untouched: a deep copy is prepared, Trap 5).
        documents: encoded documents (``input_ids``, ``attention_mask``, ``labels``), each [D, T].
        queries: encoded queries, labels -100 on the prompt, each [Q, T].
        cfg: an :class:`~iclr25.methods.procedural_influence.config.InfluenceConfig`.
        shuffle_factors: negative control: fit the factors, then give every tracked module another
            layer's factors before scoring.
        factor_documents: documents to fit the factors on (default: ``documents``).
        cpu: run kronfluence on the CPU (False: its default device, e.g. a GPU at paper scale).

    Returns:
        The :class:`InfluenceResult` (scores [Q, D], positive = helpful).

    Raises:
        ValueError: no trackable module, or non-finite scores.
    """
    try:
        from kronfluence.analyzer import Analyzer, prepare_model
        from kronfluence.arguments import FactorArguments, ScoreArguments
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "procedural_influence needs kronfluence: pip install 'iclr25[procedural_influence]'"
        ) from err
    from iclr25.methods.procedural_influence.lm import completion_nll

    fit_docs = documents if factor_documents is None else factor_documents
    tracked = resolve_tracked_modules(model, cfg.tracked)
    settings = {k: v for k, v in asdict(cfg).items() if k != "cache_dir"}
    factors_key = content_hash(model.state_dict(), fit_docs, settings, tracked)
    key = content_hash(factors_key, documents, queries, shuffle_factors)
    root = cache_root(cfg.cache_dir)
    cached = root / f"scores_{key}.npz"
    device = next(model.parameters()).device
    nats = completion_nll(model, {k: v.to(device) for k, v in queries.items()}).double().cpu().numpy()
    if cached.exists():
        with np.load(cached) as z:
            return InfluenceResult(z["scores"], nats, cfg.strategy, tracked, key)

    task = CausalLMInfluenceTask(tracked, sample_seed=cfg.sample_seed)
    prepared = prepare_model(copy.deepcopy(model), task)
    logging.getLogger("kronfluence").setLevel(logging.WARNING)
    analyzer = Analyzer(
        analysis_name=f"lm_{factors_key}",
        model=prepared,
        task=task,
        cpu=cpu,
        disable_tqdm=True,
        log_level=logging.WARNING,
        output_dir=str(root / "kronfluence"),
    )
    n_fit = min(cfg.factor_max_examples, len(fit_docs["input_ids"]))
    factor_args = FactorArguments(
        strategy=cfg.strategy,
        use_empirical_fisher=cfg.use_empirical_fisher,
        covariance_max_examples=n_fit,
        lambda_max_examples=n_fit,
    )
    factors_name = f"{cfg.strategy}_{factors_key}"
    analyzer.fit_all_factors(
        factors_name=factors_name,
        dataset=TensorDictDataset(fit_docs),
        per_device_batch_size=cfg.factor_batch_size,  # explicit: no out-of-memory search (Trap 6)
        factor_args=factor_args,
        overwrite_output_dir=False,  # the name carries the content hash, so a hit is a true hit
    )
    if shuffle_factors:
        shuffled = f"{factors_name}_shuffled"
        _shuffle_factor_files(
            analyzer.factors_output_dir(factors_name),
            analyzer.factors_output_dir(shuffled),
            _layer_permutation(tracked),
        )
        factors_name = shuffled
    # damping passed explicitly: None is kronfluence's "0.1 x mean eigenvalue" rule (Trap 4)
    score_args = ScoreArguments(damping_factor=cfg.damping_factor)
    scores_name = f"scores_{key}"
    analyzer.compute_pairwise_scores(
        scores_name=scores_name,
        factors_name=factors_name,
        query_dataset=TensorDictDataset(queries),
        train_dataset=TensorDictDataset(documents),
        per_device_query_batch_size=cfg.query_batch_size,
        per_device_train_batch_size=cfg.train_batch_size,
        score_args=score_args,
        overwrite_output_dir=True,
    )
    scores = analyzer.load_pairwise_scores(scores_name)["all_modules"].double().cpu().numpy()
    if not np.isfinite(scores).all():
        raise ValueError("kronfluence returned non-finite influence scores")
    shutil.rmtree(analyzer.scores_output_dir(scores_name), ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{key}.{os.getpid()}.npz"
    np.savez(tmp, scores=scores)
    os.replace(tmp, cached)
    return InfluenceResult(scores, nats, cfg.strategy, tracked, key)
