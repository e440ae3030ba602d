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

Devices: kronfluence runs on the CPU (``cpu=True``) or on its default accelerator (``cpu=False``,
e.g. the first GPU); it moves the model there itself, and :func:`compute_influence` moves the
model back to where it was on return. The documents and queries may stay on the CPU: kronfluence
sends every batch to its device.
"""

from __future__ import annotations

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
from torch.utils.data import DataLoader, Dataset

from iclr25.methods.procedural_influence.task import CausalLMInfluenceTask, resolve_tracked_modules

__all__ = ["InfluenceResult", "TensorDictDataset", "cache_root", "compute_influence", "content_hash"]

#: Bumped when the meaning of cached files changes.
_CACHE_VERSION = "2"


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


Documents = dict[str, torch.Tensor] | Dataset | DataLoader


def _as_dataset(docs: object, what: str) -> Dataset:
    """A map-style dataset of row dicts from a tensor dict, a ``datasets.Dataset`` (put in torch
    format) or a ``DataLoader`` (its dataset; kronfluence batches by the config's batch sizes)."""
    if isinstance(docs, DataLoader):
        docs = docs.dataset
    if isinstance(docs, dict):
        return TensorDictDataset(docs)
    try:
        import datasets as hf_datasets
    except ImportError:  # pragma: no cover - datasets ships with transformers' stack
        hf_datasets = None
    if hf_datasets is not None and isinstance(docs, hf_datasets.Dataset):
        missing = {"input_ids", "attention_mask", "labels"} - set(docs.column_names)
        if missing:
            raise ValueError(f"{what}: the dataset lacks the columns {sorted(missing)}")
        return docs.with_format("torch", columns=["input_ids", "attention_mask", "labels"])
    if isinstance(docs, Dataset):
        return docs
    raise TypeError(
        f"{what} must be a dict of tensors, a torch Dataset, a datasets.Dataset or a DataLoader, "
        f"got {type(docs).__name__}"
    )


def _dataset_key(ds: Dataset) -> object:
    """What the cache key hashes for a dataset: its tensors, its fingerprint, or every row."""
    if isinstance(ds, TensorDictDataset):
        return ds.tensors
    fingerprint = getattr(ds, "_fingerprint", None)
    if fingerprint is not None:  # a datasets.Dataset: the library's content fingerprint
        return ["hf", fingerprint, len(ds)]
    return [ds[i] for i in range(len(ds))]


def _as_tensors(batch: object, what: str) -> dict[str, torch.Tensor]:
    """Queries as one tensor dict (they are few; the nats need them in one batch)."""
    ds = _as_dataset(batch, what)
    if isinstance(ds, TensorDictDataset):
        return ds.tensors
    rows = [ds[i] for i in range(len(ds))]
    if not rows:
        raise ValueError(f"{what} is empty")
    return {k: torch.stack([torch.as_tensor(r[k]) for r in rows]) for k in rows[0]}


def _unwrap(
    model: torch.nn.Module, requires_grad: dict[str, bool], training: bool, device: torch.device
) -> None:
    """Undo ``prepare_model`` in place: put every wrapped module back, restore the flags and move
    the model back to ``device`` (kronfluence moves it to its own device).

    kronfluence wraps each tracked ``nn.Linear`` in a ``TrackedModule`` that holds the original
    module (same parameters, no copy) and carries all of kronfluence's hooks, so swapping the
    original back removes them.
    """
    from kronfluence.module.tracked_module import TrackedModule

    for name, module in list(model.named_modules()):
        if isinstance(module, TrackedModule):
            parent_name, _, attr = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, attr, module.original_module)
    for name, param in model.named_parameters():
        param.requires_grad_(requires_grad.get(name, True))
    model.train(training)
    model.to(device)


def _use_kronfluence_device(cpu: bool) -> None:
    """Make kronfluence's process-wide device state follow ``cpu``.

    kronfluence keeps its device in a singleton (``kronfluence.utils.state.State``) that the first
    ``Analyzer`` of the process fixes; a later ``Analyzer(cpu=...)`` with the other value would
    silently keep the first device. Outside a distributed launch the state is reset when it
    disagrees.
    """
    from kronfluence.utils.state import State

    state = State(cpu=cpu)
    if state.cpu != cpu and not state.use_distributed:
        State._reset_state()
        State(cpu=cpu)


def _damp_factor_files(src: Path, dst: Path, scale: float) -> None:
    """Copy an EK-FAC factor folder so that kronfluence's default damping gives ``scale`` x the
    mean eigenvalue.

    kronfluence divides the accumulated eigenvalues by their count ``N`` (``Λ = Λ_sum / N``) and,
    with ``damping_factor=None``, adds ``0.1 · mean(Λ)``. Adding ``a · mean(Λ)`` to every
    eigenvalue first makes that ``Λ + (a + 0.1 (1 + a)) mean(Λ)``, which is ``Λ + scale · mean(Λ)``
    for ``a = (scale − 0.1) / 1.1``. Per module, like kronfluence's own rule.
    """
    from safetensors.torch import load_file, save_file

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    lam_path, n_path = dst / "lambda_matrix.safetensors", dst / "num_lambda_processed.safetensors"
    if not lam_path.exists() or not n_path.exists():
        raise ValueError("a damping scale needs EK-FAC factors (eigenvalue files not found)")
    lam, counts = load_file(lam_path), load_file(n_path)
    shift = (scale - 0.1) / 1.1
    out = {}
    for name, total in lam.items():
        n = counts[name].to(total.dtype)
        out[name] = (total + shift * torch.mean(total / n) * n).contiguous()
    save_file(out, lam_path)


def compute_influence(
    model: torch.nn.Module,
    documents: Documents,
    queries: Documents,
    cfg: object,
    *,
    shuffle_factors: bool = False,
    factors_from: torch.nn.Module | None = None,
    damping_scale: float | None = None,
    factor_documents: Documents | None = None,
    cpu: bool = True,
) -> InfluenceResult:
    """Influence of every document on every query with kronfluence (cached by content).

    The model is prepared by kronfluence in place (its tracked ``nn.Linear`` layers are wrapped and
    every parameter frozen) and restored when this returns, also on an error: nothing is copied.
    kronfluence moves it to its device (see ``cpu``) while it runs; it is moved back to its own
    device on return, as is ``factors_from``. Do not use the model from another thread meanwhile.

    Args:
        model: the trained causal LM.
        documents: encoded documents with ``input_ids``, ``attention_mask`` and ``labels`` (-100
            on padding): a dict of [D, T] tensors, a torch ``Dataset`` of row dicts, a
            ``datasets.Dataset`` with those columns, or a ``DataLoader`` over one of them (its
            dataset is used; ``cfg`` sets the batch sizes).
        queries: encoded queries in the same forms, labels -100 on the prompt, Q rows.
        cfg: an :class:`~iclr25.methods.procedural_influence.config.InfluenceConfig`.
        shuffle_factors: diagnostic: fit the factors, then give every tracked module another
            layer's factors before scoring.
        factors_from: negative control: precondition with the EK-FAC factors fitted on this other
            model (same architecture, e.g. another seed) instead of ``model``'s own.
        damping_scale: damping as this multiple of each module's mean eigenvalue (EK-FAC only;
            None = ``cfg.damping_factor``, whose None is kronfluence's 0.1 x mean eigenvalue).
        factor_documents: documents to fit the factors on (default: ``documents``).
        cpu: run kronfluence on the CPU (False: its default device, the first GPU when one is
            visible). The model, documents and queries may live on any device either way.

    Returns:
        The :class:`InfluenceResult` (scores [Q, D], positive = helpful).

    Raises:
        ValueError: no trackable module, non-finite scores, or a damping scale that is not
            applicable.
        TypeError: documents or queries of an unsupported type.
    """
    try:
        from kronfluence.analyzer import Analyzer, prepare_model
        from kronfluence.arguments import FactorArguments, ScoreArguments
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "procedural_influence needs kronfluence: pip install 'iclr25[procedural_influence]'"
        ) from err
    from iclr25.methods.procedural_influence.lm import completion_nll

    if damping_scale is not None:
        if cfg.strategy != "ekfac" or cfg.damping_factor is not None:
            raise ValueError("damping_scale needs strategy='ekfac' and damping_factor=None")
        if damping_scale < 0.1:
            raise ValueError(f"damping_scale must be >= 0.1 (kronfluence's own rule), got {damping_scale}")
    doc_ds = _as_dataset(documents, "documents")
    fit_ds = doc_ds if factor_documents is None else _as_dataset(factor_documents, "factor_documents")
    query_tensors = _as_tensors(queries, "queries")
    tracked = resolve_tracked_modules(model, cfg.tracked)
    # the factors depend on the model, the fitting documents and the factor settings only
    score_only = {"cache_dir", "damping_factor", "train_batch_size", "query_batch_size"}
    settings = {k: v for k, v in asdict(cfg).items() if k not in score_only}
    source_model = model if factors_from is None else factors_from
    if factors_from is not None and resolve_tracked_modules(factors_from, cfg.tracked) != tracked:
        raise ValueError("factors_from must track the same modules as the model")
    fit_key = _dataset_key(fit_ds)
    factors_key = content_hash(source_model.state_dict(), fit_key, settings, tracked)
    key = content_hash(
        factors_key, _dataset_key(doc_ds), query_tensors, shuffle_factors, damping_scale,
        cfg.damping_factor, factors_from is not None,
    )  # fmt: skip
    root = cache_root(cfg.cache_dir)
    cached = root / f"scores_{key}.npz"
    device = next(model.parameters()).device
    source_device = next(source_model.parameters()).device
    nats = completion_nll(model, {k: v.to(device) for k, v in query_tensors.items()}).double().cpu().numpy()
    if cached.exists():
        with np.load(cached) as z:
            return InfluenceResult(z["scores"], nats, cfg.strategy, tracked, key)

    task = CausalLMInfluenceTask(tracked, sample_seed=cfg.sample_seed)
    logging.getLogger("kronfluence").setLevel(logging.WARNING)
    _use_kronfluence_device(cpu)
    n_fit = min(cfg.factor_max_examples, len(fit_ds))
    factor_args = FactorArguments(
        strategy=cfg.strategy,
        use_empirical_fisher=cfg.use_empirical_fisher,
        covariance_max_examples=n_fit,
        lambda_max_examples=n_fit,
    )
    factors_name = f"{cfg.strategy}_{factors_key}"
    out_dir = str(root / "kronfluence")

    def analyzer_for(net: torch.nn.Module) -> Analyzer:
        return Analyzer(
            analysis_name="lm",
            model=net,
            task=task,
            cpu=cpu,
            disable_tqdm=True,
            log_level=logging.WARNING,
            output_dir=out_dir,
        )

    def prepared(net: torch.nn.Module):
        """``prepare_model`` in place, undone on exit (no deep copy, Trap 5)."""
        flags = {n: p.requires_grad for n, p in net.named_parameters()}
        training = net.training
        prepare_model(net, task)
        return flags, training

    flags, training = prepared(source_model)
    try:
        analyzer = analyzer_for(source_model)
        # every analysis shares one folder: factor and score names carry the content hashes
        analyzer.fit_all_factors(
            factors_name=factors_name,
            dataset=fit_ds,
            per_device_batch_size=cfg.factor_batch_size,  # explicit: no out-of-memory search (Trap 6)
            factor_args=factor_args,
            overwrite_output_dir=False,  # the name carries the content hash, so a hit is a true hit
        )
    finally:
        _unwrap(source_model, flags, training, source_device)
    if shuffle_factors:
        shuffled = f"{factors_name}_shuffled"
        _shuffle_factor_files(
            analyzer.factors_output_dir(factors_name),
            analyzer.factors_output_dir(shuffled),
            _layer_permutation(tracked),
        )
        factors_name = shuffled
    if damping_scale is not None and damping_scale != 0.1:
        damped = f"{factors_name}_damp{damping_scale:g}"
        _damp_factor_files(
            analyzer.factors_output_dir(factors_name), analyzer.factors_output_dir(damped), damping_scale
        )
        factors_name = damped
    flags, training = prepared(model)
    try:
        analyzer = analyzer_for(model)
        # damping passed explicitly: None is kronfluence's "0.1 x mean eigenvalue" rule (Trap 4)
        score_args = ScoreArguments(damping_factor=cfg.damping_factor)
        scores_name = f"scores_{key}"
        analyzer.compute_pairwise_scores(
            scores_name=scores_name,
            factors_name=factors_name,
            query_dataset=TensorDictDataset(query_tensors),
            train_dataset=doc_ds,
            per_device_query_batch_size=cfg.query_batch_size,
            per_device_train_batch_size=cfg.train_batch_size,
            score_args=score_args,
            overwrite_output_dir=True,
        )
        scores = analyzer.load_pairwise_scores(scores_name)["all_modules"].double().cpu().numpy()
    finally:
        _unwrap(model, flags, training, device)
    if not np.isfinite(scores).all():
        raise ValueError("kronfluence returned non-finite influence scores")
    shutil.rmtree(analyzer.scores_output_dir(scores_name), ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{key}.{os.getpid()}.npz"
    np.savez(tmp, scores=scores)
    os.replace(tmp, cached)
    return InfluenceResult(scores, nats, cfg.strategy, tracked, key)
