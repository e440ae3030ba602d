"""Evaluation of FTCT: greedy chain-of-thought decoding, parsing by token id, and metrics per k.

Paper: *Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?*,
Yutong Yin and Zhaoran Wang, ICLR 2025, arXiv:2501.15857. Implements the test metrics of
Section 4: whole-chain accuracy (here strict: the exact list of steps; the paper's lenient
subsequence match is reported as ``whole_lenient``), final-value accuracy, vertex order,
value accuracy given the gold prefix (``te_val``), vertex-order accuracy by depth, the
official order-copying test (``icl``, reported as ``tr_ver``) and the in-distribution value
check (``tr_val``), each reported per shot count k.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from iclr25.methods.ftct.data import TestItem
from iclr25.methods.ftct.vocab import FTCTTokenizer

__all__ = [
    "LeafStop",
    "evaluate",
    "greedy_generate",
    "parse_pairs",
    "query_leaf_id",
    "score_copy",
    "score_output",
    "teacher_forced_correct",
]


def parse_pairs(tok: FTCTTokenizer, ids: Sequence[int]) -> list[tuple[str, int]]:
    """Read ``(letter, value)`` steps from generated ids, up to the first newline/EOS/pad.

    A step is the id pattern ``letter = value``; context tokens and commas between steps are
    skipped, anything else breaks no step but is not read as one (Trap 6: ids, not a regex).

    Args:
        tok: the vocabulary.
        ids: generated token ids.

    Returns:
        The steps in order.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> tok = FTCTTokenizer(n_letters=3, modulus=10, context_div=1)
        >>> parse_pairs(tok, tok.encode(["A~0", "B", "=", 4, ",", "C", "=", 7, "<nl>", "A", "=", 1]))
        [('B', 4), ('C', 7)]
    """
    stop = {tok.newline_id, tok.eos_id, tok.pad_id}
    ids = [int(i) for i in ids]
    end = next((i for i, t in enumerate(ids) if t in stop), len(ids))
    ids = ids[:end]
    pairs = []
    i = 0
    while i < len(ids):
        if (
            i + 2 < len(ids)
            and tok.is_letter(ids[i])
            and ids[i + 1] == tok.eq_id
            and tok.is_value(ids[i + 2])
        ):
            pairs.append((tok.letter_of(ids[i]), tok.value_of(ids[i + 2])))
            i += 3
        else:
            i += 1
    return pairs


def _is_subsequence(needle: Sequence[object], hay: Sequence[object]) -> bool:
    it = iter(hay)
    return all(any(x == y for y in it) for x in needle)


def score_output(tok: FTCTTokenizer, item: TestItem, generated: Sequence[int]) -> dict[str, float]:
    """Score one generated continuation against a compositional item's gold steps.

    The answer is the parsed steps up to and including the first step at the queried (last)
    vertex. ``whole``: answer equals the gold steps exactly; ``whole_lenient``: the gold steps
    are a subsequence of all parsed steps (the paper's rule); ``final``: the queried vertex's
    value is right; ``vertex_order``: the answer's vertices equal the gold vertices;
    ``depth<j>``: the first ``j - 1`` steps after the root are right (``j`` counts vertices);
    ``order_depth<j>``: the first ``j - 1`` vertices after the root are right, values ignored.

    Args:
        tok: the vocabulary.
        item: the test item.
        generated: generated ids (the prompt excluded).

    Returns:
        Metric -> 0.0 or 1.0.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.
    """
    gold = list(item.gold_pairs)
    pairs = parse_pairs(tok, generated)
    leaf = gold[-1][0]
    cut = next((i for i, (v, _) in enumerate(pairs) if v == leaf), len(pairs) - 1)
    answer = pairs[: cut + 1]
    out = {
        "whole": float(answer == gold),
        "whole_lenient": float(_is_subsequence(gold, pairs)),
        "final": float(bool(answer) and answer[-1] == gold[-1]),
        "vertex_order": float([v for v, _ in answer] == [v for v, _ in gold]),
    }
    for j in range(1, len(gold) + 1):
        out[f"depth{j + 1}"] = float(answer[:j] == gold[:j])
    for j in range(1, len(gold) + 1):
        out[f"order_depth{j + 1}"] = float([v for v, _ in answer[:j]] == [v for v, _ in gold[:j]])
    return out


def score_copy(tok: FTCTTokenizer, item: TestItem, generated: Sequence[int]) -> dict[str, float]:
    """Score one order-copying probe: are the generated letters the sentence's letters, in order?

    ``copy`` is the official ``icl`` rule: the letters of the first ``len(gold)`` parsed steps
    (up to the first newline) equal the gold letters; values are ignored and steps after them
    are tolerated. ``order_depth<j>``: the first ``j - 1`` letters after the first are right.

    Args:
        tok: the vocabulary.
        item: a copy probe (:func:`~iclr25.methods.ftct.data.make_copy_tests`).
        generated: generated ids (the prompt excluded).

    Returns:
        Metric -> 0.0 or 1.0.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> tok = FTCTTokenizer(n_letters=4, modulus=10, context_div=1)
        >>> item = TestItem((), (), (("B", 1), ("C", 2)), (), 1, "copy", "random", 0, (), 0, 8)
        >>> score_copy(tok, item, tok.encode(["B", "=", 7, ",", "C", "=", 0, ",", "D", "=", 3]))
        {'copy': 1.0, 'order_depth2': 1.0, 'order_depth3': 1.0}
    """
    gold = [v for v, _ in item.gold_pairs]
    got = [v for v, _ in parse_pairs(tok, generated)]
    out = {"copy": float(got[: len(gold)] == gold)}
    for j in range(1, len(gold) + 1):
        out[f"order_depth{j + 1}"] = float(got[:j] == gold[:j])
    return out


def query_leaf_id(tok: FTCTTokenizer, prompt_ids: Sequence[int]) -> int:
    """The letter id of the vertex a prompt's query asks for: ``v`` in its last ``v = ?:``.

    A trace ends at its leaf step ``v = x`` (then a newline); this is the vertex at which
    generation of the query's chain stops.

    Args:
        tok: the vocabulary.
        prompt_ids: a test prompt (demonstrations, then the query's head).

    Returns:
        The token id of the queried letter.

    Raises:
        ValueError: the prompt holds no question ``letter = ?:``.

    Example:
        >>> tok = FTCTTokenizer(n_letters=4, modulus=10, context_div=1)
        >>> tok.letter_of(query_leaf_id(tok, tok.encode(["D", "=", "?:", "A", "=", 3, ","])))
        'D'
    """
    ids = [int(i) for i in prompt_ids]
    for i in range(len(ids) - 1, 1, -1):
        if ids[i] == tok.question_id and ids[i - 1] == tok.eq_id and tok.is_letter(ids[i - 2]):
            return ids[i - 2]
    raise ValueError("prompt has no query question 'letter = ?:'; cannot tell at which leaf to stop")


class LeafStop(StoppingCriteria):
    """Stop each row right after it generates the step ``leaf = value`` of its queried leaf.

    A Hugging Face stopping criterion (per row); :func:`greedy_generate` applies the same rule
    to plain modules. Without it an undertrained model can keep emitting steps past the leaf
    until the token budget runs out.

    Args:
        tok: the vocabulary.
        leaf_ids: per row, the letter id of its queried leaf (:func:`query_leaf_id`).
        prompt_len: length of the (left-padded) prompt batch; only generated values count.

    Shape:
        leaf_ids: (B,).

    Example:
        >>> tok = FTCTTokenizer(n_letters=4, modulus=10, context_div=1)
        >>> stop = LeafStop(tok, [tok.letter_id("D")], prompt_len=1)
        >>> stop(torch.tensor([tok.encode(["A", "D", "=", 4])]), None).tolist()
        [True]
    """

    def __init__(self, tok: FTCTTokenizer, leaf_ids: Sequence[int], prompt_len: int) -> None:
        self.leaf = torch.as_tensor([int(i) for i in leaf_ids], dtype=torch.long)
        self.eq_id = tok.eq_id
        self.values = torch.tensor(sorted(tok.value_id(v) for v in range(tok.modulus)), dtype=torch.long)
        self.prompt_len = int(prompt_len)

    def __call__(
        self, input_ids: torch.Tensor, scores: torch.Tensor | None, **kwargs: object
    ) -> torch.Tensor:
        """Per row, whether the last three ids are ``leaf = value`` with the value generated."""
        del scores, kwargs
        b = input_ids.shape[0]
        if input_ids.shape[1] < 3 or input_ids.shape[1] <= self.prompt_len:
            return torch.zeros(b, dtype=torch.bool, device=input_ids.device)
        last = input_ids[:, -3:]
        leaf = self.leaf.to(input_ids.device)
        return (
            (last[:, 0] == leaf)
            & (last[:, 1] == self.eq_id)
            & torch.isin(last[:, 2], self.values.to(input_ids.device))
        )


def _logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    return out if isinstance(out, torch.Tensor) else out.logits


@torch.no_grad()
def greedy_generate(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    pad_id: int,
    stop_ids: Sequence[int],
    batch_size: int = 100,
    device: str | torch.device = "cpu",
    stop_at_leaf: FTCTTokenizer | None = None,
) -> list[list[int]]:
    """Greedy decoding of left-padded batches (Trap 9).

    Hugging Face models use ``generate(do_sample=False)`` with the attention mask (positions
    follow the mask); any other module mapping ``(input_ids, attention_mask)`` to logits is
    decoded by a plain greedy loop. With ``stop_at_leaf`` a row also stops right after the step
    ``leaf = value`` of the vertex its query asks for (:class:`LeafStop`), the end of a trace.

    Args:
        model: the language model (in eval mode).
        prompts: token-id prompts.
        max_new_tokens: decoding budget.
        pad_id: padding id.
        stop_ids: ids that end a sequence.
        batch_size: prompts per batch.
        device: where the model lives.
        stop_at_leaf: the vocabulary to read each prompt's queried leaf with
            (:func:`query_leaf_id`); ``None`` stops only at ``stop_ids`` or the budget.

    Returns:
        The new ids of each prompt (stop token or leaf step included, padding removed).

    Raises:
        TypeError: ``stop_at_leaf`` is not a vocabulary.
        ValueError: ``stop_at_leaf`` is given and a prompt has no query question.

    Shape:
        Each batch is ``(B, max prompt length)``, padded on the left.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.
    """
    outs: list[list[int]] = []
    stops = set(int(s) for s in stop_ids)
    if stop_at_leaf is not None and not isinstance(stop_at_leaf, FTCTTokenizer):
        raise TypeError(f"stop_at_leaf must be an FTCTTokenizer or None, got {type(stop_at_leaf).__name__}")
    leaves = None if stop_at_leaf is None else [query_leaf_id(stop_at_leaf, p) for p in prompts]
    for b in range(0, len(prompts), batch_size):
        chunk = prompts[b : b + batch_size]
        width = max(len(p) for p in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, p in enumerate(chunk):
            ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        leaf_stop = None
        if leaves is not None and stop_at_leaf is not None:
            leaf_stop = LeafStop(stop_at_leaf, leaves[b : b + batch_size], prompt_len=width)
        if hasattr(model, "generate") and hasattr(model, "generation_config"):
            gen = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=list(stops),
                pad_token_id=pad_id,
                stopping_criteria=StoppingCriteriaList([leaf_stop] if leaf_stop is not None else []),
            )[:, width:]
        else:
            gen = torch.empty((len(chunk), 0), dtype=torch.long, device=ids.device)
            done = torch.zeros(len(chunk), dtype=torch.bool, device=ids.device)
            for _ in range(max_new_tokens):
                nxt = _logits(model, ids, mask)[:, -1].argmax(-1)
                nxt = torch.where(done, torch.full_like(nxt, pad_id), nxt)
                gen = torch.cat([gen, nxt[:, None]], dim=1)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                mask = torch.cat([mask, (~done).long()[:, None]], dim=1)
                done |= torch.isin(nxt, torch.tensor(sorted(stops), device=ids.device))
                if leaf_stop is not None:
                    done |= leaf_stop(ids, None)
                if bool(done.all()):
                    break
        for row in gen.tolist():  # rows stopped at their leaf are padded after it
            seq = []
            for t in row:
                if t == pad_id and t not in stops:
                    break
                seq.append(int(t))
                if t in stops:
                    break
            outs.append(seq)
    return outs


@torch.no_grad()
def teacher_forced_correct(
    model: torch.nn.Module,
    items: Sequence[TestItem],
    *,
    pad_id: int,
    batch_size: int = 100,
    device: str | torch.device = "cpu",
) -> list[float]:
    """Whether the argmax prediction of the value at ``item.te_pos`` is right, given the gold prefix.

    Args:
        model: the language model.
        items: test items.
        pad_id: padding id.
        batch_size: items per forward pass.
        device: where the model lives.

    Returns:
        One 0.0/1.0 per item.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.
    """
    out: list[float] = []
    for b in range(0, len(items), batch_size):
        chunk = items[b : b + batch_size]
        width = max(it.te_pos for it in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, it in enumerate(chunk):
            seq = it.full_ids[: it.te_pos]
            ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[i, : len(seq)] = 1
        logits = _logits(model, ids.to(device), mask.to(device))  # (B, width, V)
        for i, it in enumerate(chunk):
            pred = int(logits[i, it.te_pos - 1].argmax())
            out.append(float(pred == it.full_ids[it.te_pos]))
    return out


def evaluate(
    model: torch.nn.Module,
    tok: FTCTTokenizer,
    tests: Sequence[TestItem],
    *,
    batch_size: int = 100,
    device: str | torch.device = "cpu",
) -> dict[int, dict[str, float]]:
    """Metrics per shot count k, averaged over the items of each k.

    Compositional items give ``whole``, ``whole_lenient``, ``final``, ``vertex_order``,
    ``te_val``, ``depth<j>`` and ``order_depth<j>`` (:func:`score_output`); copy probes give
    ``copy`` and ``order_depth<j>`` (:func:`score_copy`); in-distribution items give ``tr_val``
    (the next fragment value given the gold prefix).

    Args:
        model: the language model (switched to eval mode).
        tok: the vocabulary.
        tests: items of one demonstration variant or copy kind (any mix of k), possibly with
            in-distribution items.
        batch_size: prompts decoded together.
        device: where the model lives.

    Returns:
        ``{k: {metric: mean}}``.

    References:
        Yin and Wang, ICLR 2025, arXiv:2501.15857, Sec. 4.

    Example:
        >>> # metrics = evaluate(model, tok, make_compositional_tests(graph, tok, cfg, 1, 10, rng))
    """
    if len({(it.kind, it.demos) for it in tests if it.kind != "in_distribution"}) > 1:
        raise ValueError("evaluate one demonstration variant (or one copy kind) at a time")
    model.eval()
    stops = (tok.newline_id, tok.eos_id)
    sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    # one decoding pass with the largest budget, each output then cut to its item's own budget:
    # greedy rows are independent, so this equals decoding each item with its budget
    decoded = [it for it in tests if it.kind != "in_distribution"]  # scored on generated text
    budget = max((it.max_new_tokens for it in decoded), default=0)
    gens = greedy_generate(
        model,
        [it.prompt_ids for it in decoded],
        max_new_tokens=budget,
        pad_id=tok.pad_id,
        stop_ids=stops,
        batch_size=batch_size,
        device=device,
    )
    for it, gen in zip(decoded, gens, strict=True):
        score = score_output if it.kind == "compositional" else score_copy
        for name, v in score(tok, it, gen[: it.max_new_tokens]).items():
            sums[it.k][name].append(v)
    forced = [it for it in tests if it.kind != "copy"]  # copy probes hold noise values
    tf = teacher_forced_correct(model, forced, pad_id=tok.pad_id, batch_size=batch_size, device=device)
    for it, ok in zip(forced, tf, strict=True):
        sums[it.k]["te_val" if it.kind == "compositional" else "tr_val"].append(ok)
    return {k: {m: sum(v) / len(v) for m, v in sorted(ms.items())} for k, ms in sorted(sums.items())}
