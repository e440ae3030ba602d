"""Routing with per-sample locality: a tiny Hugging Face Mixtral trained on mixed-domain token streams.

NetMoE (Liu et al., ICLR 2025) gains from the **locality** of routing (Sec. 3, Fig. 2): the
tokens of one training sample prefer a few experts, because a sample comes from one source
(one web page, one code file, one language) whose token statistics differ from the others'.
This module builds such a routing source from scratch, with nothing downloaded:

* :class:`DomainCorpus`: ``D`` synthetic "domains", each a first-order Markov chain over its own
  subset of the vocabulary (subsets drawn at random, so domains overlap a little). A document
  is drawn from one domain; a training batch mixes domains.
* :func:`build_mixtral`: a small ``transformers.MixtralForCausalLM`` built from a
  ``MixtralConfig`` (no weights fetched), top-2 over ``E`` experts.
* :func:`train_domain_lm`: next-token training with Adam and **no balance loss** (the paper
  gives no balance weight; a balance loss pushes each sample's routing toward uniform, the
  opposite of the locality the method relies on). The aux-loss weight is an argument.
* :func:`trace_mixtral`: per MoE layer, the routed experts of every token (from the model's own
  ``output_router_logits=True``) and the **predicted** experts of the next layer (Sec. 3.3:
  layer l's MoE input fed to layer l+1's norm and router).

References:
    Xinyi Liu, Yujie Wang, Fangcheng Fu, Xupeng Miao, Shenhan Zhu, Xiaonan Nie, Bin Cui.
    *NetMoE: Accelerating MoE Training through Dynamic Sample Placement*. ICLR 2025,
    OpenReview ``1qP3lsatCR``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from iclr25.methods.netmoe.text_lm import RoutingTrace

if TYPE_CHECKING:
    from transformers import MixtralForCausalLM

    from iclr25._core.claims import ProgressFn

__all__ = ["DomainCorpus", "build_mixtral", "global_routing_entropy", "trace_mixtral", "train_domain_lm"]


class DomainCorpus:
    """``D`` Markov-chain domains over subsets of a shared vocabulary.

    Domain ``d`` owns ``tokens_per_domain`` token ids (a random subset of ``range(vocab)``) and a
    transition matrix whose rows are ``Dirichlet(concentration)`` over that subset, so domains
    differ both in which tokens occur and in how they follow each other.

    Args:
        domains: D.
        vocab: vocabulary size shared by all domains.
        tokens_per_domain: size of each domain's vocabulary subset.
        concentration: Dirichlet concentration of the transition rows (small = peaked).
        seed: seed of the subsets and transition matrices.

    Raises:
        ValueError: non-positive sizes, or a subset larger than the vocabulary.

    Example:
        >>> c = DomainCorpus(domains=3, vocab=20, tokens_per_domain=5, seed=0)
        >>> toks, dom = c.sample(4, 10, np.random.default_rng(0))
        >>> toks.shape, dom.shape, int(toks.max()) < 20
        ((4, 10), (4,), True)
    """

    def __init__(
        self,
        *,
        domains: int,
        vocab: int,
        tokens_per_domain: int,
        concentration: float = 0.3,
        seed: int | list[int],
    ) -> None:
        if domains < 1 or vocab < 2 or tokens_per_domain < 2 or concentration <= 0:
            raise ValueError(
                "domains >= 1, vocab >= 2, tokens_per_domain >= 2 and concentration > 0 are required"
            )
        if tokens_per_domain > vocab:
            raise ValueError(f"tokens_per_domain={tokens_per_domain} exceeds vocab={vocab}")
        rng = np.random.default_rng(seed)
        self.domains, self.vocab = domains, vocab
        self.subsets = np.stack([rng.choice(vocab, tokens_per_domain, replace=False) for _ in range(domains)])
        # [D, m, m] row-stochastic transitions between positions of the domain's subset
        self.trans = rng.dirichlet(
            np.full(tokens_per_domain, concentration), size=(domains, tokens_per_domain)
        )
        self._cum = np.cumsum(self.trans, axis=-1)

    def entropy_rate(self) -> float:
        """Mean over domains of the chain's entropy rate (nats per token): the loss floor of a model
        that knows the domain (a mixed-domain LM pays a little more at a document's start).

        H = sum_i pi_i H(P_i.), with pi the stationary distribution (the left eigenvector of P for
        eigenvalue 1; Dirichlet rows are strictly positive, so it is unique).
        """
        rates = []
        for p in self.trans:
            w, v = np.linalg.eig(p.T)
            pi = np.abs(np.real(v[:, np.argmin(np.abs(w - 1.0))]))
            pi /= pi.sum()
            with np.errstate(divide="ignore", invalid="ignore"):
                h_rows = -np.where(p > 0, p * np.log(p), 0.0).sum(1)
            rates.append(float(pi @ h_rows))
        return float(np.mean(rates))

    def sample(
        self, n: int, length: int, rng: np.random.Generator, domain: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``n`` documents of ``length`` tokens, each from one domain.

        Args:
            n: documents.
            length: tokens per document.
            rng: randomness of the domains (unless given) and the chains.
            domain: optional ``[n]`` domain of each document; uniform at random otherwise.

        Returns:
            ``(tokens [n, length] int64, domain [n] int64)``.
        """
        if n < 1 or length < 1:
            raise ValueError(f"n and length must be >= 1, got {n}, {length}")
        dom = rng.integers(0, self.domains, size=n) if domain is None else np.asarray(domain, dtype=np.int64)
        if dom.shape != (n,) or dom.min() < 0 or dom.max() >= self.domains:
            raise ValueError(f"domain must be [{n}] ids in [0, {self.domains})")
        m = self.subsets.shape[1]
        state = rng.integers(0, m, size=n)  # position within the domain's subset
        pos = np.empty((n, length), dtype=np.int64)
        u = rng.random((n, length))
        for t in range(length):
            pos[:, t] = state
            # inverse-CDF draw of the next state from row ``state`` of each document's domain
            state = np.minimum((self._cum[dom, state] < u[:, t : t + 1]).sum(-1), m - 1)
        return self.subsets[dom[:, None], pos], dom


def build_mixtral(
    *,
    vocab: int,
    d_model: int,
    d_ff: int,
    layers: int,
    heads: int,
    experts: int,
    top_k: int,
    context: int,
    seed: int,
) -> MixtralForCausalLM:
    """A small ``MixtralForCausalLM`` from a config, initialised from ``seed`` (global RNG left as it was).

    Example:
        >>> m = build_mixtral(vocab=16, d_model=16, d_ff=16, layers=2, heads=2, experts=4, top_k=2,
        ...                   context=8, seed=0)
        >>> type(m).__name__, m.config.num_local_experts
        ('MixtralForCausalLM', 4)
    """
    from transformers import MixtralConfig, MixtralForCausalLM

    cfg = MixtralConfig(
        vocab_size=vocab, hidden_size=d_model, intermediate_size=d_ff, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, num_local_experts=experts,
        num_experts_per_tok=top_k, max_position_embeddings=context, router_aux_loss_coef=0.0,
        output_router_logits=False, use_cache=False, bos_token_id=None, eos_token_id=None,
        tie_word_embeddings=False,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MixtralForCausalLM(cfg)
    return model


def train_domain_lm(
    model: MixtralForCausalLM,
    corpus: DomainCorpus,
    *,
    steps: int,
    batch_size: int,
    context: int,
    lr: float = 3e-3,
    aux_weight: float = 0.0,
    seed: int,
    progress: ProgressFn | None = None,
) -> list[float]:
    """Next-token training on fresh mixed-domain windows (Adam, cosine decay).

    Args:
        model: the Mixtral (trained in place, left in eval mode).
        corpus: the domains; every step draws ``batch_size`` new documents of ``context + 1``
            tokens, each from a uniformly drawn domain.
        steps: optimiser steps.
        batch_size: documents per step.
        context: tokens per training input.
        lr: peak learning rate.
        aux_weight: weight of Mixtral's Switch-style balance loss (transformers'
            ``load_balancing_loss_func``; 0: none, the default).
        seed: seed of the documents.
        progress: optional ``progress(stage, done, total)``.

    Returns:
        The language-model loss (nats per token) of every step.
    """
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    if steps < 1 or batch_size < 1 or context < 1 or aux_weight < 0:
        raise ValueError("steps, batch_size and context must be >= 1 and aux_weight >= 0")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    rng = np.random.default_rng([seed, 71])
    experts, top_k = model.config.num_local_experts, model.config.num_experts_per_tok
    losses: list[float] = []
    every = max(1, steps // 20)
    model.train()
    for step in range(steps):
        if progress is not None and step % every == 0:
            progress("mixed-domain Mixtral training", step, steps)
        toks = torch.as_tensor(corpus.sample(batch_size, context + 1, rng)[0])
        out = model(input_ids=toks[:, :-1], output_router_logits=aux_weight > 0)
        lm = F.cross_entropy(out.logits.reshape(-1, out.logits.shape[-1]), toks[:, 1:].reshape(-1))
        if aux_weight > 0:
            loss = lm + aux_weight * load_balancing_loss_func(out.router_logits, experts, top_k)
        else:
            loss = lm
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(lm.detach()))
    model.eval()
    return losses


@torch.no_grad()
def trace_mixtral(
    model: MixtralForCausalLM, tokens: torch.Tensor, *, context: int, batch: int = 64
) -> RoutingTrace:
    """Routing of ``[I, S]`` samples, routed in consecutive chunks of ``context`` tokens.

    Layer l's routed experts are the top-k of the router logits the model returns with
    ``output_router_logits=True``. The prediction of layer l+1's routing (Sec. 3.3) applies layer
    l+1's ``post_attention_layernorm`` and router to layer l's MoE input (the residual stream after
    layer l's attention), captured by a forward pre-hook.

    Returns:
        A :class:`~iclr25.methods.netmoe.text_lm.RoutingTrace` with ``[I, S, k]`` arrays.
    """
    n, seq = tokens.shape
    chunks = math.ceil(seq / context)
    pad = chunks * context - seq
    flat = (F.pad(tokens, (0, pad)) if pad else tokens).reshape(n * chunks, context)
    layers = model.model.layers
    k = model.config.num_experts_per_tok
    captured: dict[int, torch.Tensor] = {}
    hooks = [
        layer.post_attention_layernorm.register_forward_pre_hook(
            lambda _m, args, li=li: captured.__setitem__(li, args[0])
        )
        for li, layer in enumerate(layers)
    ]
    ids: list[list[torch.Tensor]] = [[] for _ in layers]
    pred: list[list[torch.Tensor]] = [[] for _ in layers[1:]]
    try:
        for start in range(0, flat.shape[0], batch):
            out = model(input_ids=flat[start : start + batch], output_router_logits=True)
            for li, logits in enumerate(out.router_logits):  # [B*T, E]
                ids[li].append(logits.topk(k, -1).indices)
            for li in range(len(layers) - 1):
                nxt = layers[li + 1]
                h = nxt.post_attention_layernorm(captured[li])
                pred[li].append(nxt.mlp.gate(h)[0].topk(k, -1).indices)
    finally:
        for h in hooks:
            h.remove()

    def cat(parts: list[torch.Tensor]) -> np.ndarray:
        x = torch.cat(parts).reshape(n, chunks * context, k)[:, :seq]
        return x.cpu().numpy().astype(np.int64)

    return RoutingTrace(expert_ids=[cat(p) for p in ids], predicted_next=[cat(p) for p in pred])


def global_routing_entropy(expert_ids: np.ndarray, num_experts: int) -> float:
    """Entropy (nats) of the expert distribution pooled over all samples and tokens of a batch."""
    counts = np.bincount(np.asarray(expert_ids).ravel(), minlength=num_experts).astype(np.float64)
    p = counts / counts.sum()
    return float(-(p[p > 0] * np.log(p[p > 0])).sum())
