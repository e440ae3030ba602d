"""The kronfluence task, the influence scores against brute force, the sign, caching and errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from iclr25.methods.procedural_influence import (
    CausalLMInfluenceTask,
    completion_nll,
    compute_influence,
    content_hash,
    encode_documents,
    encode_queries,
    gradient_dot_scores,
    resolve_tracked_modules,
)


def _queries(corpus, tok, context):
    prompts = [f"the {f.relation} of {f.entity} is" for f in corpus.facts[:2]]
    completions = [f"{f.value} ." for f in corpus.facts[:2]]
    from iclr25.methods.procedural_influence import query_prompts

    p = corpus.holdout["arithmetic"][0]
    a, b, c = p
    prompts.append(query_prompts("arithmetic", p, 0))
    completions.append(f"x = {a} + {b} = {a + b} ; y = {a + b} - {c} = {a + b - c} ; answer {a + b - c}")
    return encode_queries(prompts, completions, tok, context)


def _per_example_grads(model, batch, names, measurement: bool):
    """Brute force: one backward per row, gradients of the tracked weights flattened."""
    task = CausalLMInfluenceTask(names)
    params = dict(model.named_parameters())
    out = []
    for i in range(len(batch["input_ids"])):
        row = {k: v[i : i + 1] for k, v in batch.items()}
        model.zero_grad()
        loss = task.compute_measurement(row, model) if measurement else task.compute_train_loss(row, model)
        grads = torch.autograd.grad(loss, [params[n + ".weight"] for n in names])
        out.append(torch.cat([g.flatten() for g in grads]))
    return torch.stack(out).double()


def test_resolver_tracks_mlp_linears_only(tiny_world) -> None:
    _, _, model, _, _, _ = tiny_world
    names = resolve_tracked_modules(model)
    assert names == [f"model.layers.0.mlp.{p}" for p in ("gate_proj", "up_proj", "down_proj")]
    every = resolve_tracked_modules(model, "linear")
    assert set(names) < set(every) and not any("embed" in n or "lm_head" in n for n in every)
    assert resolve_tracked_modules(model, r"down_proj$") == ["model.layers.0.mlp.down_proj"]
    with pytest.raises(ValueError, match=r"no nn\.Linear"):
        resolve_tracked_modules(model, r"lm_head")
    from iclr25.common.tiny_lm import build_tiny_lm

    gpt2 = build_tiny_lm("gpt2", vocab_size=10, n_layer=1, n_head=2, d_model=8)
    with pytest.raises(ValueError, match=r"no nn\.Linear"):
        resolve_tracked_modules(gpt2)  # GPT-2's Conv1D layers are invisible to kronfluence


def test_train_loss_is_a_sum_and_sampling_is_seeded(tiny_world) -> None:
    _, _, model, data, _, _ = tiny_world
    task = CausalLMInfluenceTask(resolve_tracked_modules(model))
    two = {k: v[:2] for k, v in data.items()}
    singles = sum(
        task.compute_train_loss({k: v[i : i + 1] for k, v in data.items()}, model) for i in range(2)
    )
    assert torch.allclose(task.compute_train_loss(two, model), singles, rtol=1e-5)
    assert torch.allclose(
        task.compute_train_loss(two, model), completion_nll(model, two).sum().float(), rtol=1e-5
    )
    a = CausalLMInfluenceTask(["x"], sample_seed=1).compute_train_loss(two, model, sample=True)
    b = CausalLMInfluenceTask(["x"], sample_seed=1).compute_train_loss(two, model, sample=True)
    c = CausalLMInfluenceTask(["x"], sample_seed=2).compute_train_loss(two, model, sample=True)
    assert torch.equal(a, b) and not torch.equal(a, c)
    # padding keeps -100; every other position gets a drawn token id
    with torch.no_grad():
        logits = model(input_ids=two["input_ids"], attention_mask=two["attention_mask"]).logits
    drawn = CausalLMInfluenceTask(["x"], sample_seed=1).sample_labels(logits, two["labels"])
    drawn, pad = drawn[:, 1:], two["labels"][:, 1:] == -100  # position 0 is never a target
    assert (drawn[pad] == -100).all() and ((drawn[~pad] >= 0) & (drawn[~pad] < logits.shape[-1])).all()


def test_measurement_is_completion_nll_only(tiny_world) -> None:
    corpus, tok, model, _, _, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    task = CausalLMInfluenceTask(["x"])
    row = {k: v[2:3] for k, v in q.items()}
    ids = row["input_ids"][0][row["attention_mask"][0] == 1]
    start = int((row["labels"][0] != -100).nonzero()[0])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids[None]).logits[0], -1)
        brute = -sum(float(logp[t - 1, ids[t]]) for t in range(start, len(ids)))
    assert float(task.compute_measurement(row, model)) == pytest.approx(brute, rel=1e-5)
    changed = dict(row, input_ids=row["input_ids"].clone())
    changed["labels"] = row["labels"].clone()
    assert (changed["labels"][0, :start] == -100).all()  # the prompt is never scored


def test_identity_strategy_equals_brute_force_gradient_dot_products(tiny_world) -> None:
    corpus, tok, model, data, icfg, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    docs = {k: v[:12] for k, v in data.items()}
    res = gradient_dot_scores(model, docs, q, icfg)
    names = resolve_tracked_modules(model)
    gq = _per_example_grads(model, q, names, measurement=True)
    gd = _per_example_grads(model, docs, names, measurement=False)
    brute = (gq @ gd.T).numpy()
    assert res.scores.shape == (3, 12)
    np.testing.assert_allclose(res.scores, brute, rtol=1e-4, atol=1e-4 * np.abs(brute).max())


def test_ekfac_ranks_like_the_exact_damped_fisher_inverse(tmp_path) -> None:
    """kronfluence EK-FAC (empirical Fisher) on a ~500-parameter MLP against the exact block-diagonal
    ``(G_m + lambda_m I)^-1`` with the same damping rule (0.1 x the mean eigenvalue of each block).

    Pearson r, not Spearman: most training points are fit well and score near zero, and the ranks of
    that bulk are noise for every estimator (Spearman ~0.37 for EK-FAC here). The gradient dot
    product (identity) is the broken variant that must agree less."""
    from kronfluence.analyzer import Analyzer, prepare_model
    from kronfluence.arguments import FactorArguments, ScoreArguments
    from kronfluence.task import Task
    from scipy.stats import pearsonr

    class _Classify(Task):
        def compute_train_loss(self, batch, model, sample=False):
            x, y = batch
            return torch.nn.functional.cross_entropy(model(x), y, reduction="sum")

        def compute_measurement(self, batch, model):
            return self.compute_train_loss(batch, model)

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(600, 10, generator=gen)
    y = (x[:, :4] @ torch.randn(4, 4, generator=gen)).argmax(1)
    net = torch.nn.Sequential(
        torch.nn.Linear(10, 40, bias=False), torch.nn.Tanh(), torch.nn.Linear(40, 4, bias=False)
    )
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(100):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    train = torch.utils.data.TensorDataset(x, y)
    query = torch.utils.data.TensorDataset(x[:8] + 0.1, y[:8])
    import copy

    prepared = prepare_model(copy.deepcopy(net), _Classify())
    analyzer = Analyzer("mlp", prepared, _Classify(), cpu=True, disable_tqdm=True, output_dir=str(tmp_path))
    analyzer.fit_all_factors("f", train, per_device_batch_size=100,
                             factor_args=FactorArguments(use_empirical_fisher=True))  # fmt: skip
    analyzer.compute_pairwise_scores("s", "f", query, train, per_device_query_batch_size=8,
                                     per_device_train_batch_size=100,
                                     score_args=ScoreArguments(damping_factor=None))  # fmt: skip
    ekfac = analyzer.load_pairwise_scores("s")["all_modules"].double()

    def grads(data):
        out = []
        for xi, yi in data:
            g = torch.autograd.grad(
                torch.nn.functional.cross_entropy(net(xi[None]), yi[None], reduction="sum"),
                list(net.parameters()),
            )
            out.append([t.flatten().double() for t in g])
        return out

    gq, gd = grads(query), grads(train)
    exact = torch.zeros(len(gq), len(gd), dtype=torch.float64)
    for m in range(2):  # one block per linear layer
        a = torch.stack([g[m] for g in gq])
        b = torch.stack([g[m] for g in gd])
        fisher = b.T @ b / len(b)  # [P, P]
        damp = 0.1 * torch.trace(fisher) / len(fisher)
        exact += a @ torch.linalg.solve(fisher + damp * torch.eye(len(fisher), dtype=torch.float64), b.T)
    r = pearsonr(ekfac.ravel().numpy(), exact.ravel().numpy()).statistic
    assert r >= 0.9, r
    analyzer.fit_all_factors(
        "id", train, per_device_batch_size=100, factor_args=FactorArguments(strategy="identity")
    )
    analyzer.compute_pairwise_scores(
        "dot", "id", query, train, per_device_query_batch_size=8, per_device_train_batch_size=100,
        score_args=ScoreArguments(damping_factor=None), overwrite_output_dir=True,
    )  # fmt: skip
    dot = analyzer.load_pairwise_scores("dot")["all_modules"].double()
    assert pearsonr(dot.ravel().numpy(), exact.ravel().numpy()).statistic < r - 0.1


def test_sign_positive_means_helpful(tiny_world) -> None:
    """Positive = helpful. With the gradient dot product, one SGD step on the tracked weights along a
    document's loss changes the query nats by about -lr x score, so a step on the top document lowers
    them and a step on the bottom one raises them. EK-FAC shares the convention (its preconditioner
    is positive definite): its scores correlate positively with the dot product, and a document
    equal to the query's text scores positive and ranks in its top 5."""
    corpus, tok, model, data, icfg, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    row = {k: v[2:3] for k, v in q.items()}
    ids = row["input_ids"][0][row["attention_mask"][0] == 1].tolist()
    exact_doc = encode_documents([tok.decode(ids[1:])], tok, lm_cfg.context)
    docs = {k: torch.cat([data[k], exact_doc[k]]) for k in data}
    ekfac = compute_influence(model, docs, row, icfg).scores[0]
    assert ekfac[-1] > 0 and len(ekfac) - 1 in np.argsort(-ekfac)[:5]  # the doc also scores its prompt
    dot = gradient_dot_scores(model, docs, row, icfg).scores[0]
    assert np.corrcoef(ekfac, dot)[0, 1] > 0.3
    names = resolve_tracked_modules(model)
    task = CausalLMInfluenceTask(names)
    before = float(completion_nll(model, row)[0])
    change = {}
    for name, i in (("top", int(np.argmax(dot))), ("bottom", int(np.argmin(dot)))):
        m = _copy(model)
        weights = [dict(m.named_parameters())[n + ".weight"] for n in names]
        loss = task.compute_train_loss({k: v[i : i + 1] for k, v in docs.items()}, m)
        grads = torch.autograd.grad(loss, weights)
        with torch.no_grad():
            for p, g in zip(weights, grads, strict=True):
                p -= 1e-4 * g
        change[name] = float(completion_nll(m, row)[0]) - before
    assert change["top"] < 0 < change["bottom"]
    assert change["top"] == pytest.approx(-1e-4 * dot.max(), rel=0.2)


def _copy(model):
    import copy

    return copy.deepcopy(model)


def test_cache_key_changes_with_weights_corpus_and_config(tiny_world) -> None:
    _, _, model, data, icfg, _ = tiny_world
    sd = model.state_dict()
    base = content_hash(sd, data, dataclasses.asdict(icfg))
    other_sd = {k: v.clone() for k, v in sd.items()}
    next(iter(other_sd.values()))[0] += 1.0
    assert content_hash(other_sd, data, dataclasses.asdict(icfg)) != base
    assert content_hash(sd, {k: v[1:] for k, v in data.items()}, dataclasses.asdict(icfg)) != base
    other_cfg = dataclasses.asdict(dataclasses.replace(icfg, damping_factor=1e-3))
    assert content_hash(sd, data, other_cfg) != base
    assert content_hash(sd, data, dataclasses.asdict(icfg)) == base


def test_scores_are_cached_and_reloaded(tiny_world) -> None:
    corpus, tok, model, data, icfg, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    docs = {k: v[:10] for k, v in data.items()}
    a = compute_influence(model, docs, q, icfg)
    from iclr25.methods.procedural_influence import cache_root

    assert (cache_root(icfg.cache_dir) / f"scores_{a.key}.npz").exists()
    b = compute_influence(model, docs, q, icfg)
    assert np.array_equal(a.scores, b.scores) and a.key == b.key
    assert a.to_rows(0, top=2)[0][1] == a.scores[0].max()
    shuffled = compute_influence(model, docs, q, icfg, shuffle_factors=True)
    assert shuffled.key != a.key and not np.allclose(shuffled.scores, a.scores)


def test_bad_input_errors(tiny_world) -> None:
    _, tok, _, _, _, lm_cfg = tiny_world
    with pytest.raises(ValueError, match="empty completion"):
        encode_queries(["the capital of"], ["  "], tok, lm_cfg.context)
    with pytest.raises(ValueError, match="exceeds the context"):
        encode_queries(["the " * 30], ["capital " * 30], tok, lm_cfg.context)
    with pytest.raises(ValueError, match="corpus is empty"):
        encode_documents([], tok, lm_cfg.context)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        encode_documents(["zzzz unknownword"], tok, lm_cfg.context)
    with pytest.raises(ValueError, match="tracked_modules is empty"):
        CausalLMInfluenceTask([])


def test_kronfluence_imports() -> None:
    import kronfluence
    from kronfluence.analyzer import Analyzer, prepare_model  # noqa: F401

    assert kronfluence.__version__ == "1.0.1"


def test_non_finite_scores_raise(tiny_world, tmp_path, monkeypatch) -> None:
    from kronfluence.analyzer import Analyzer

    corpus, tok, model, data, icfg, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    docs = {k: v[:6] for k, v in data.items()}
    monkeypatch.setattr(
        Analyzer, "load_pairwise_scores", lambda self, name: {"all_modules": torch.full((3, 6), float("nan"))}
    )
    cfg = dataclasses.replace(icfg, cache_dir=str(tmp_path), strategy="identity")
    with pytest.raises(ValueError, match="non-finite"):
        compute_influence(model, docs, q, cfg)


def test_datasets_and_dataloaders_give_the_same_scores_without_copying_the_model(tiny_world) -> None:
    """Documents as a tensor dict, a datasets.Dataset or a DataLoader score alike; the model comes
    back unwrapped (plain nn.Linear layers), trainable and with unchanged weights."""
    from torch.utils.data import DataLoader

    datasets = pytest.importorskip("datasets")

    from iclr25.methods.procedural_influence import TensorDictDataset

    corpus, tok, model, data, icfg, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    docs = {k: v[:8] for k, v in data.items()}
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    types = {n: type(m) for n, m in model.named_modules()}
    a = compute_influence(model, docs, q, icfg)
    assert {n: type(m) for n, m in model.named_modules()} == types
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    hf = datasets.Dataset.from_dict({k: v.tolist() for k, v in docs.items()})
    b = compute_influence(model, hf, q, icfg)
    c = compute_influence(model, DataLoader(TensorDictDataset(docs), batch_size=3), q, icfg)
    np.testing.assert_allclose(b.scores, a.scores, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(c.scores, a.scores, rtol=1e-5, atol=1e-8)
    with pytest.raises(ValueError, match="lacks the columns"):
        compute_influence(model, hf.remove_columns("labels"), q, icfg)
    with pytest.raises(TypeError, match="documents must be"):
        compute_influence(model, [1, 2, 3], q, icfg)


def test_foreign_factors_and_damping_scale_change_the_scores(tiny_world) -> None:
    from iclr25.methods.procedural_influence import build_lm

    corpus, tok, model, data, icfg, lm_cfg = tiny_world
    q = _queries(corpus, tok, lm_cfg.context)
    docs = {k: v[:10] for k, v in data.items()}
    a = compute_influence(model, docs, q, icfg)
    other = build_lm(len(tok), lm_cfg, seed=7)
    f = compute_influence(model, docs, q, icfg, factors_from=other)
    assert f.key != a.key and not np.allclose(f.scores, a.scores)
    same = compute_influence(model, docs, q, icfg, damping_scale=0.1)  # kronfluence's own rule
    np.testing.assert_allclose(same.scores, a.scores, rtol=1e-6)
    heavy = compute_influence(model, docs, q, icfg, damping_scale=10.0)
    assert heavy.key != a.key and np.abs(heavy.scores).max() < np.abs(a.scores).max()
    with pytest.raises(ValueError, match="damping_scale"):
        compute_influence(model, docs, q, dataclasses.replace(icfg, strategy="kfac"), damping_scale=1.0)


def test_damping_scale_file_edit_is_exact(tmp_path) -> None:
    """After the edit, kronfluence's rule (divide by N, add 0.1 x mean) gives Lambda + c x mean."""
    from safetensors.torch import load_file, save_file

    from iclr25.methods.procedural_influence.influence import _damp_factor_files

    src, dst = tmp_path / "f", tmp_path / "g"
    src.mkdir()
    lam = torch.rand(4, 6, dtype=torch.float64) * 50
    n = torch.tensor(25, dtype=torch.int64)
    save_file({"m": lam}, src / "lambda_matrix.safetensors")
    save_file({"m": n}, src / "num_lambda_processed.safetensors")
    for c in (1.0, 10.0):
        _damp_factor_files(src, dst, c)
        edited = load_file(dst / "lambda_matrix.safetensors")["m"] / n
        damped = edited + 0.1 * edited.mean()
        expect = lam / n + c * (lam / n).mean()
        torch.testing.assert_close(damped, expect)
