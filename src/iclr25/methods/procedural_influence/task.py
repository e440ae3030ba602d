"""The kronfluence task of a causal LM: document loss, query measurement, tracked modules.

Paper: *Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models*, Ruis et al.,
ICLR 2025, arXiv:2411.12580, Sec. 2 (influence of a document on ``log p(c | p)``, Grosse et al.
2023, arXiv:2308.03296).

Sign convention. The measurement is ``m = sum_{t in c} CE_t = -log p(c | p)`` over completion
tokens only, and the document loss is ``L(d) = sum_t CE_t`` over all its tokens. kronfluence returns
``grad m^T (G + lambda I)^-1 grad L(d)``, which equals the paper's
``I_f(d) = -grad f^T (G + lambda I)^-1 grad L(d)`` with ``f = log p(c | p) = -m``: a **positive
score means training on d raises log p(c | p)** (the document helps the completion). The unit tests
pin this with a gradient step on the top and bottom documents.
"""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common import rng

__all__ = ["CausalLMInfluenceTask", "resolve_tracked_modules"]

_MLP_NAMES = re.compile(
    r"(^|\.)mlp\.(gate_proj|up_proj|down_proj|c_fc|c_proj|fc1|fc2|dense_h_to_4h|dense_4h_to_h)$"
)
_NEVER = re.compile(r"(embed|wte|wpe|lm_head)")


def resolve_tracked_modules(model: nn.Module, tracked: str = "mlp") -> list[str]:
    """Names of the ``nn.Linear`` modules influence is computed over (Trap 5).

    Args:
        model: the causal LM (before :func:`kronfluence.prepare_model`).
        tracked: "mlp" (MLP projections of every block, as Grosse et al. 2023), "linear" (every
            linear of the blocks: attention and MLP) or a regular expression over module names.

    Returns:
        The module names, in model order; embeddings and the (tied) ``lm_head`` are never included.

    Raises:
        ValueError: no ``nn.Linear`` matches (e.g. GPT-2's ``Conv1D`` layers, which kronfluence
            cannot track).

    Example:
        >>> from iclr25.common.tiny_lm import build_tiny_lm
        >>> m = build_tiny_lm("llama", vocab_size=10, n_layer=1, n_head=2, d_model=8)
        >>> resolve_tracked_modules(m)
        ['model.layers.0.mlp.gate_proj', 'model.layers.0.mlp.up_proj', 'model.layers.0.mlp.down_proj']
    """
    if tracked == "mlp":
        pattern = _MLP_NAMES
    elif tracked == "linear":
        pattern = re.compile(r".")
    else:
        pattern = re.compile(tracked)
    names = [
        name
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and not _NEVER.search(name) and pattern.search(name)
    ]
    if not names:
        raise ValueError(
            f"no nn.Linear module matches tracked={tracked!r} (embeddings and lm_head are excluded; "
            "kronfluence tracks nn.Linear and nn.Conv2d only)"
        )
    return names


def _shifted_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy; labels -100 are ignored. Shapes [B, T, V], [B, T]."""
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]),  # [B*(T-1), V]
        labels[:, 1:].reshape(-1),  # [B*(T-1)]
        ignore_index=-100,
        reduction="sum",
    )


def _task_base() -> type:
    try:
        from kronfluence.task import Task
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "procedural_influence needs kronfluence: pip install 'iclr25[procedural_influence]'"
        ) from err
    return Task


class CausalLMInfluenceTask(_task_base()):
    """kronfluence ``Task`` for a Hugging Face causal LM on batches of ``input_ids``,
    ``attention_mask`` and ``labels`` (-100 where a token is not scored).

    Args:
        tracked_modules: module names from :func:`resolve_tracked_modules`.
        sample_seed: seed of the labels sampled for the true Fisher (``sample=True``), so factors
            are reproducible (Trap 12).

    Example:
        >>> task = CausalLMInfluenceTask(["model.layers.0.mlp.up_proj"])
        >>> task.get_influence_tracked_modules()
        ['model.layers.0.mlp.up_proj']
    """

    def __init__(self, tracked_modules: list[str], sample_seed: int = 0) -> None:
        if not tracked_modules:
            raise ValueError("tracked_modules is empty")
        self.tracked_modules = list(tracked_modules)
        self.generator = torch.Generator().manual_seed(sample_seed)

    def compute_train_loss(
        self, batch: dict[str, torch.Tensor], model: nn.Module, sample: bool = False
    ) -> torch.Tensor:
        """``L(d) = sum_t CE_t`` summed over the batch (Trap 1).

        With ``sample=True`` the targets are drawn from the model's own (detached) predictive
        distribution, which gives the true Fisher; padding keeps its -100.
        """
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
        labels = batch["labels"]
        if sample:
            labels = self.sample_labels(logits, labels)
        return _shifted_ce(logits, labels)

    def sample_labels(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Targets drawn from the model's detached predictive distribution; -100 stays -100.

        The draw comes from the task's CPU generator wherever the logits live (the
        probabilities are copied to the CPU for it and the draw is moved back to the logits'
        device), so kronfluence may run on a GPU with the same seeded stream.

        Shape:
            logits [B, T, V], labels [B, T] -> [B, T] (position t+1 holds the draw at position t).
        """
        with torch.no_grad():
            probs = torch.softmax(logits.detach().float(), dim=-1)  # [B, T, V]
            flat = probs.reshape(-1, probs.shape[-1])  # [B*T, V]
            drawn = rng.multinomial(flat, 1, generator=self.generator)  # [B*T, 1]
            drawn = drawn.reshape(labels.shape)  # [B, T]
            sampled = torch.full_like(labels, -100)
            sampled[:, 1:] = drawn[:, :-1]  # the label of position t+1 is predicted at position t
            return torch.where(labels == -100, labels, sampled)

    def compute_measurement(self, batch: dict[str, torch.Tensor], model: nn.Module) -> torch.Tensor:
        """``m = -log p(c | p)``: the summed CE of the completion tokens (prompt labels are -100)."""
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.float()
        return _shifted_ce(logits, batch["labels"])

    def get_influence_tracked_modules(self) -> list[str]:
        """The tracked ``nn.Linear`` names."""
        return self.tracked_modules

    def get_attention_mask(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The batch's attention mask (1 on real tokens)."""
        return batch["attention_mask"]
