"""Mechanism checks of FTCT: induction heads, parent-value attention and a linear parent-value probe.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements the empirical mechanism
analysis of Section 5: (i) induction heads copy the vertex order from the demonstrations
(a position attends to the token right after an earlier occurrence of its own token);
(ii) at the position predicting a value (right after ``v =``) attention concentrates on the
parent's value; (iii) a linear probe on the hidden state there decodes the parent's value but
not the grandparent's (probe prompts "knock" the parent value so the two are independent).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from iclr25.methods.ftct.data import TestItem

__all__ = ["forward_internals", "induction_scores", "parent_attention", "probe_parent_value"]


@torch.no_grad()
def forward_internals(
    model: torch.nn.Module,
    tests: Sequence[TestItem],
    *,
    pad_id: int,
    device: str | torch.device = "cpu",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention maps and hidden states on the teacher-forced sequences ``prompt + gold``.

    Sequences are right-padded, so positions in :class:`TestItem` index them directly. The model
    must use eager attention (SDPA returns no maps).

    Args:
        model: a Hugging Face causal LM.
        tests: the items.
        pad_id: padding id.
        device: where the model lives.

    Returns:
        ``(attn, hidden)`` on the CPU.

    Shape:
        attn: ``(L, B, H, T, T)``; hidden: ``(L + 1, B, T, d)``.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 5.
    """
    width = max(len(it.full_ids) for it in tests)
    ids = torch.full((len(tests), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, it in enumerate(tests):
        ids[i, : len(it.full_ids)] = torch.tensor(it.full_ids)
        mask[i, : len(it.full_ids)] = 1
    out = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        output_attentions=True,
        output_hidden_states=True,
    )
    if out.attentions is None or any(a is None for a in out.attentions):
        raise ValueError("the model returned no attention maps; build it with eager attention")
    attn = torch.stack([a.float().cpu() for a in out.attentions])  # (L, B, H, T, T)
    hidden = torch.stack([h.float().cpu() for h in out.hidden_states])  # (L+1, B, T, d)
    return attn, hidden


def induction_scores(attn: torch.Tensor, tests: Sequence[TestItem]) -> np.ndarray:
    """Mean attention from each query-trace vertex to the token after that vertex in earlier shots.

    For every item with k >= 1 and every query step after the root, the position of its letter
    ``p`` attends to ``{s + 1 : s < query_start, token[s] == token[p]}``; the score is that
    attention mass averaged over positions and items.

    Args:
        attn: attention maps. Shape: ``(L, B, H, T, T)``.
        tests: the items, row ``b`` of ``attn`` holding ``tests[b].full_ids``.

    Returns:
        Scores in [0, 1]. Shape: ``(L, H)``.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 5.

    Example:
        >>> # scores = induction_scores(*forward_internals(model, items, pad_id=0)[:1], items)
    """
    total = torch.zeros(attn.shape[0], attn.shape[2])
    count = 0
    for b, it in enumerate(tests):
        if it.k < 1:
            continue
        ids = it.full_ids
        for letter_pos, _ in it.pair_pos[1:]:
            if letter_pos >= len(ids):
                continue
            src = [s + 1 for s in range(it.query_start) if ids[s] == ids[letter_pos]]
            if not src:
                continue
            total += attn[:, b, :, letter_pos, src].sum(-1)  # (L, H)
            count += 1
    if count == 0:
        raise ValueError("no query vertex with an earlier occurrence (need items with k >= 1)")
    return (total / count).numpy()


def parent_attention(attn: torch.Tensor, tests: Sequence[TestItem]) -> np.ndarray:
    """Mean attention from the position predicting a value (``v =``) to the parent's value token.

    Args:
        attn: attention maps. Shape: ``(L, B, H, T, T)``.
        tests: the items (query steps after the root; the parent is the previous step).

    Returns:
        Scores in [0, 1]. Shape: ``(L, H)``.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 5.
    """
    total = torch.zeros(attn.shape[0], attn.shape[2])
    count = 0
    for b, it in enumerate(tests):
        n = len(it.full_ids)
        for j in range(1, len(it.pair_pos)):
            q = it.pair_pos[j][1] - 1  # the '=' token that predicts the value
            parent_val = it.pair_pos[j - 1][1]
            if it.pair_pos[j][1] >= n:
                continue
            total += attn[:, b, :, q, parent_val]
            count += 1
    if count == 0:
        raise ValueError("no scorable value positions")
    return (total / count).numpy()


def probe_parent_value(
    hidden: torch.Tensor,
    tests: Sequence[TestItem],
    *,
    layer: int = -1,
    train_frac: float = 0.5,
    seed: int = 0,
) -> dict[str, float]:
    """Linear probes (logistic regression) for the parent's and grandparent's value.

    Features are the hidden state at the ``=`` that predicts the value of step ``knock_pos + 1``;
    targets are the value tokens of steps ``knock_pos`` (parent, knocked at random) and
    ``knock_pos - 1`` (grandparent). Fit on the first ``train_frac`` of the items, scored on the
    rest.

    Args:
        hidden: hidden states. Shape: ``(L + 1, B, T, d)``.
        tests: probe items (from ``make_probe_tests``), ``knock_pos >= 1``.
        layer: which hidden state to probe.
        train_frac: fraction of items used for fitting.
        seed: ``random_state`` of the probe.

    Returns:
        ``{"parent": accuracy, "grandparent": accuracy}`` on the held-out items.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 5.
    """
    from sklearn.linear_model import LogisticRegression

    feats, parent, grand = [], [], []
    for b, it in enumerate(tests):
        j = it.knock_pos
        if j < 1 or j + 1 >= len(it.pair_pos):
            continue
        q = it.pair_pos[j + 1][1] - 1
        feats.append(hidden[layer, b, q].numpy())
        parent.append(it.full_ids[it.pair_pos[j][1]])
        grand.append(it.full_ids[it.pair_pos[j - 1][1]])
    if len(feats) < 4:
        raise ValueError("need at least 4 probe items with knock_pos >= 1")
    x = np.stack(feats)  # (N, d)
    n_train = max(2, round(train_frac * len(x)))
    out = {}
    for name, y in (("parent", np.array(parent)), ("grandparent", np.array(grand))):
        if len(set(y[:n_train].tolist())) < 2:
            out[name] = float(np.mean(y[n_train:] == y[0]))
            continue
        clf = LogisticRegression(max_iter=2000, random_state=seed).fit(x[:n_train], y[:n_train])
        out[name] = float(clf.score(x[n_train:], y[n_train:]))
    return out
