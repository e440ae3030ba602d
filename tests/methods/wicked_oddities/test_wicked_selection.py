"""Selection: typicality against brute force, select_poison sets and sizes, index mapping, errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from iclr25.methods.wicked_oddities import (
    HardnessSelector,
    SklearnEncoder,
    mean_similarity_scores,
    ood_loss_scores,
    poison_budget,
    select_poison,
    typicality_scores,
)


def _brute_typicality(f: torch.Tensor, k: int) -> torch.Tensor:
    f = F.normalize(f.double(), dim=1)
    out = []
    for i in range(len(f)):
        sims = [float(f[i] @ f[j]) for j in range(len(f)) if j != i]
        out.append(sum(sorted(sims, reverse=True)[:k]) / k)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("k", [1, 11])
def test_typicality_matches_brute_force(k: int) -> None:
    f = torch.randn(12, 5, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(typicality_scores(f, k).double(), _brute_typicality(f, k), atol=1e-6, rtol=0)


def test_a_point_never_counts_itself_but_duplicates_count() -> None:
    f = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.1]])
    s = typicality_scores(f, 1)
    assert s[0] < 0.5  # without the mask the self-similarity 1 would win
    dup = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert typicality_scores(dup, 1)[:2].tolist() == pytest.approx([1.0, 1.0])


def test_mean_and_ood_scores() -> None:
    f = torch.tensor([[1.0, 0.0], [1.0, 0.05], [0.0, 1.0]])
    assert int(mean_similarity_scores(f).argmin()) == 2
    logits = torch.tensor([[0.0, 0.0, 3.0], [3.0, 0.0, 0.0]])
    h = ood_loss_scores(logits, 2)
    assert h[1] > h[0]
    assert h[0].item() == pytest.approx(-math.log(math.exp(3) / (math.exp(3) + 2)), abs=1e-6)


def test_select_hard_easy_random_window() -> None:
    h = torch.tensor([0.3, 0.9, 0.1, 0.7, 0.5, 0.2])
    assert select_poison(h, 2, "hard").tolist() == [1, 3]
    assert select_poison(h, 2, "easy").tolist() == [2, 5]
    assert select_poison(h, 2, "window", percentile=0).tolist() == [2, 5]  # p = 0: most typical
    assert select_poison(h, 2, "window", percentile=50).tolist() == [3, 4]
    a = select_poison(h, 3, "random", generator=torch.Generator().manual_seed(1))
    b = select_poison(h, 3, "random", generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b) and len(a.unique()) == 3


def test_budget_is_a_floor_share_of_the_target_class() -> None:
    assert poison_budget(0.1, 95) == 9 and poison_budget(0.15, 90) == 13 and poison_budget(1.0, 7) == 7
    with pytest.raises(ValueError):
        poison_budget(0.0, 10)


def test_selector_maps_to_global_indices_in_the_target_class() -> None:
    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 3, (60,), generator=gen)
    images = torch.rand(60, 1, 4, 4, generator=gen)
    idx = torch.where(labels == 2)[0]
    images[idx[4]] = 1.0 - images[idx[4]]  # an obvious oddity inside the class
    enc = SklearnEncoder(__import__("sklearn.preprocessing", fromlist=["x"]).FunctionTransformer())
    sel = HardnessSelector(enc, k=3, budget_frac=0.2).fit(images[idx], idx)
    assert len(sel.poison_indices_) == math.floor(0.2 * len(idx))
    assert bool((labels[sel.poison_indices_] == 2).all())
    assert torch.equal(sel.poison_indices_, idx[sel.positions_])
    brute = -_brute_typicality(images[idx].reshape(len(idx), -1), 3)
    expected = idx[torch.sort(torch.argsort(brute, descending=True)[: sel.budget_]).values]
    assert torch.equal(sel.poison_indices_, expected)
    easy = HardnessSelector(enc, k=3, budget_frac=0.2, mode="easy").fit(images[idx], idx)
    assert not set(easy.poison_indices_.tolist()) & set(sel.poison_indices_.tolist())


def test_errors() -> None:
    f = torch.randn(5, 3)
    with pytest.raises(ValueError, match="k must"):
        typicality_scores(f, 5)
    with pytest.raises(ValueError, match="k must"):
        typicality_scores(f, 0)
    with pytest.raises(ValueError, match="shape"):
        typicality_scores(f[0], 1)
    with pytest.raises(ValueError, match="empty"):
        typicality_scores(torch.zeros(0, 3), 1)
    with pytest.raises(ValueError, match="non-finite"):
        typicality_scores(torch.tensor([[1.0, float("nan")], [1.0, 0.0]]), 1)
    with pytest.raises(ValueError, match="budget"):
        select_poison(torch.rand(4), 5)
    with pytest.raises(ValueError, match="non-finite"):
        select_poison(torch.tensor([0.0, float("inf")]), 1)
    with pytest.raises(ValueError, match="empty"):
        select_poison(torch.zeros(0), 0)
    with pytest.raises(ValueError, match="percentile"):
        select_poison(torch.rand(4), 1, "window")
    with pytest.raises(ValueError, match="target-class"):
        HardnessSelector(None, strategy="random").fit(torch.zeros(0, 1, 2, 2))
