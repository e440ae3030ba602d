"""Baselines: gradient dot-product influence (kronfluence's identity preconditioner) and lexical
retrieval scores (BM25 via ``bm25s``, TF-IDF via scikit-learn).

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Ruis et al.,
ICLR 2025, arXiv:2411.12580. The paper compares against no estimator; these are the spec's
diagnostics: the gradient dot product is EK-FAC without the Fisher (TracIn-like), and the retrieval
scores show how much of a ranking is plain word overlap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import torch

from iclr25.methods.procedural_influence.influence import InfluenceResult, compute_influence

__all__ = ["bm25_scores", "gradient_dot_scores", "tfidf_scores"]


def gradient_dot_scores(
    model: torch.nn.Module,
    documents: dict[str, torch.Tensor],
    queries: dict[str, torch.Tensor],
    cfg: object,
    *,
    cpu: bool = True,
) -> InfluenceResult:
    """``grad m^T grad L(d)``: kronfluence's ``identity`` strategy on the same tracked modules.

    ``cpu`` is :func:`~iclr25.methods.procedural_influence.influence.compute_influence`'s: run
    kronfluence on the CPU, or (False) on its default device, e.g. a GPU.
    """
    return compute_influence(
        model, documents, queries, dataclasses.replace(cfg, strategy="identity"), cpu=cpu
    )


def bm25_scores(queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
    """BM25 scores of every document for every query (``bm25s``, whitespace tokens). [Q, D]."""
    try:
        import bm25s
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("bm25_scores needs bm25s: pip install 'iclr25[procedural_influence]'") from err
    if not documents:
        raise ValueError("the corpus is empty")
    retriever = bm25s.BM25()
    retriever.index([d.split() for d in documents], show_progress=False)
    return np.stack([retriever.get_scores(q.split()) for q in queries]).astype(float)


def tfidf_scores(queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
    """Cosine similarity of TF-IDF vectors (scikit-learn, whitespace tokens). [Q, D]."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if not documents:
        raise ValueError("the corpus is empty")
    vec = TfidfVectorizer(tokenizer=str.split, token_pattern=None, lowercase=False)
    d = vec.fit_transform(documents)
    q = vec.transform(queries)
    return (q @ d.T).toarray().astype(float)
