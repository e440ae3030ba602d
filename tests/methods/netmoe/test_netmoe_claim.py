"""The claim at smoke budget (plumbing and exactness, never a verdict), the tiny MoE LM and the config."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25._core.claims import judge
from iclr25.methods.netmoe.claim import CLAIM
from iclr25.methods.netmoe.config import ClaimConfig
from iclr25.methods.netmoe.text_lm import TextMoELM, package_text_corpus, train_text_moe_lm


def test_smoke_runs_every_arm_and_is_exact(smoke_runs) -> None:
    a, b = smoke_runs("netmoe")
    assert a.deterministic_metrics() == b.deterministic_metrics()
    m = a.metrics
    for prefix in ("", "text_"):
        for arm in ("identity", "random", "current", "netmoe", "oracle", "shuffled", "broken_predictor"):
            assert 0.0 < m[prefix + arm]["eq1_ratio"] < 2.0 and 0.0 < m[prefix + arm]["inter_ratio"] < 2.0
        assert m[prefix + "identity"]["eq1_ratio"] == 1.0
    assert m["optimality"]["stage1_match"] == 1.0 and m["optimality"]["stage2_match"] == 1.0
    assert m["optimality"]["joint_match"] == 1.0 and m["optimality"]["never_worse"] == 1.0
    assert m["distributed"]["bytes_exact"] == 1.0 and m["distributed"]["placement_agree"] == 1.0
    assert m["distributed"]["out_err_vs_identity"] <= 1e-6
    assert 0.0 < m["distributed"]["inter_bytes_ratio"] <= 2.0 and m["distributed"]["a2a_ratio_s"] > 0.0
    for key in ("routing", "text_routing"):
        assert 0.0 < m[key]["entropy"] <= m[key]["global_entropy"] + 1e-9 <= m[key]["entropy_max"] + 1e-9
    assert {"gain_vs_locality", "lm_loss", "domain_lm_loss"} <= set(a.series)
    j = judge(CLAIM, "smoke", [a])
    assert j.reason == "smoke: report-only" and len(j.outcomes) == len(CLAIM.criteria)


def test_text_lm_trains_and_traces_long_samples_with_next_layer_prediction() -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small only loses from more threads
    try:
        _train_and_trace()
    finally:
        torch.set_num_threads(threads)


def _train_and_trace() -> None:
    corpus = package_text_corpus(context=16, sample_len=40, max_files_per_kind=4)
    assert corpus.train.shape[1] == 17 and corpus.heldout.shape[1] == 40
    assert (
        len(set(corpus.heldout_kind.tolist())) >= len(corpus.kinds) - 1
    )  # held-out files of (nearly) every kind
    again = package_text_corpus(context=16, sample_len=40, max_files_per_kind=4)
    assert np.array_equal(corpus.train, again.train) and np.array_equal(corpus.heldout, again.heldout)
    lm = TextMoELM(d_model=16, n_layers=3, d_ff=16, num_experts=4, context=16,
                   generator=torch.Generator().manual_seed(0))  # fmt: skip
    torch.manual_seed(123)  # the global RNG must not matter: every weight comes from the generator
    twin = TextMoELM(d_model=16, n_layers=3, d_ff=16, num_experts=4, context=16,
                     generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert all(
        torch.equal(a, b) for a, b in zip(lm.state_dict().values(), twin.state_dict().values(), strict=True)
    )
    calls: list[tuple[str, int, int]] = []
    losses = train_text_moe_lm(
        lm, corpus.train, steps=20, batch_size=8, seed=0, progress=lambda *c: calls.append(c)
    )
    assert np.mean(losses[-5:]) < losses[0]
    assert calls[0] == ("text MoE LM training", 0, 20)
    tr = lm.trace(torch.as_tensor(corpus.heldout[:3]))  # 40 tokens routed in 16-token chunks
    assert len(tr.expert_ids) == 3 and len(tr.predicted_next) == 2
    assert tr.expert_ids[0].shape == (3, 40, 2) and tr.predicted_next[0].shape == (3, 40, 2)
    # The first chunk routes exactly as a direct forward of those tokens.
    direct = lm(torch.as_tensor(corpus.heldout[:3, :16]))[2]
    assert np.array_equal(tr.expert_ids[1][:, :16], direct[1].numpy())
    with pytest.raises(ValueError, match="exceeds the context"):
        lm(torch.zeros(1, 17, dtype=torch.long))


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="samples"):
        ClaimConfig(samples=60)
    with pytest.raises(ValueError, match="trace_seeds"):
        ClaimConfig(trace_seeds=0)
    with pytest.raises(ValueError, match="eval_samples"):
        ClaimConfig(eval_samples=12)
    with pytest.raises(ValueError, match="lm_layers"):
        ClaimConfig(lm_layers=1)
    with pytest.raises(ValueError, match="g3_samples"):
        ClaimConfig(g3_samples=6)
    with pytest.raises(ValueError, match="dom_aux_weight"):
        ClaimConfig(dom_aux_weight=-0.1)
    with pytest.raises(ValueError, match="dom_tokens_per_domain"):
        ClaimConfig(dom_tokens_per_domain=300)
    with pytest.raises(ValueError, match="dom_layers"):
        ClaimConfig(dom_layers=1)


def test_negative_controls_gate() -> None:
    controls = {c.name: c for c in CLAIM.criteria if c.control}
    assert set(controls) == {
        "ctrl_shuffled_vs_random",
        "ctrl_broken_predictor",
        "ctrl_shuffled_inter",
        "text_ctrl_shuffled_vs_random",
        "text_ctrl_broken_predictor",
        "ctrl_labels_left_behind",
    }
    # The labels control belongs to the report-only exactness rows of G3.
    assert {n for n, c in controls.items() if not c.gating} == {"ctrl_labels_left_behind"}


def test_every_gate_names_a_control_falsifier_and_every_row_explains_itself() -> None:
    by_name = {c.name: c for c in CLAIM.criteria}
    gates = [c for c in CLAIM.criteria if c.gating and not c.control and not c.precondition]
    assert {c.name for c in gates} == {
        "real_vs_random",
        "next_layer_aware",
        "paper_inter_volume",
        "text_real_vs_random",
        "text_next_layer_aware",
    }
    for c in gates:
        target = by_name[c.falsifier]
        assert target.control and target.gating, c.name
        # the control measures the same statistic on the broken arm, against the same bar
        assert (target.kind, target.op, target.threshold, target.b) == (c.kind, c.op, c.threshold, c.b), (
            c.name
        )
    assert by_name["paper_inter_volume"].threshold == 0.66  # the paper's Table 5 bar, not ours
    # Every gated part carries the oracle's ceiling as its own precondition, at the gate's bar.
    for gate, ceiling in (
        ("paper_inter_volume", "ceiling_paper_inter"),
        ("real_vs_random", "ceiling_vs_random"),
        ("next_layer_aware", "ceiling_next_layer"),
        ("text_real_vs_random", "text_ceiling_vs_random"),
        ("text_next_layer_aware", "text_ceiling_next_layer"),
    ):
        g, c = by_name[gate], by_name[ceiling]
        assert c.precondition and c.part == g.part and c.threshold == g.threshold
        assert c.a.split(".")[0].endswith("oracle")
    assert all(c.explain for c in CLAIM.criteria)
    exact = [c for c in CLAIM.criteria if c.name.startswith(("g2_", "g3_", "synthetic_"))]
    assert exact and not any(c.gating for c in exact)


def test_memmap_corpus_reads_any_sample_by_global_id(tmp_path) -> None:
    from iclr25.methods.netmoe.routing_data import MemmapCorpus

    path = tmp_path / "tokens.bin"
    np.arange(1000, dtype=np.uint16).tofile(path)
    corpus = MemmapCorpus(str(path), seq_len=8)
    whole = corpus.rows(step=3, sample_ids=np.arange(16), global_batch=16, seed=1)  # [I, S+1]
    assert whole.shape == (16, 9) and (np.diff(whole, axis=1) == 1).all()
    moved = np.array([11, 2, 7])  # a rank's samples after re-placement read their own windows
    assert np.array_equal(corpus.rows(step=3, sample_ids=moved, global_batch=16, seed=1), whole[moved])
    assert not np.array_equal(corpus.rows(step=4, sample_ids=moved, global_batch=16, seed=1), whole[moved])
    with pytest.raises(FileNotFoundError):
        MemmapCorpus(str(tmp_path / "missing.bin"), seq_len=8)
    with pytest.raises(ValueError, match="fewer than one window"):
        MemmapCorpus(str(path), seq_len=5000)


def test_domain_corpus_is_reproducible_and_keeps_each_document_in_its_domain() -> None:
    from iclr25.methods.netmoe.domain_lm import DomainCorpus

    c = DomainCorpus(domains=3, vocab=40, tokens_per_domain=6, concentration=0.3, seed=[1, 2])
    toks, dom = c.sample(5, 50, np.random.default_rng(0))
    again = DomainCorpus(domains=3, vocab=40, tokens_per_domain=6, concentration=0.3, seed=[1, 2])
    assert np.array_equal(again.sample(5, 50, np.random.default_rng(0))[0], toks)
    for row, d in zip(toks, dom, strict=True):
        assert set(row.tolist()) <= set(c.subsets[d].tolist())
    assert 0.0 < c.entropy_rate() < np.log(6)
    fixed, d2 = c.sample(2, 4, np.random.default_rng(0), domain=np.array([2, 2]))
    assert (d2 == 2).all() and set(fixed.ravel().tolist()) <= set(c.subsets[2].tolist())
    with pytest.raises(ValueError, match="exceeds vocab"):
        DomainCorpus(domains=2, vocab=4, tokens_per_domain=5, seed=0)
    with pytest.raises(ValueError, match="domain must be"):
        c.sample(2, 4, np.random.default_rng(0), domain=np.array([0, 3]))


def test_mixtral_trains_without_balance_loss_and_traces_with_next_layer_prediction() -> None:
    from iclr25.methods.netmoe.domain_lm import (
        DomainCorpus,
        build_mixtral,
        global_routing_entropy,
        trace_mixtral,
        train_domain_lm,
    )
    from iclr25.methods.netmoe.routing_data import routing_entropy

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        c = DomainCorpus(domains=2, vocab=24, tokens_per_domain=8, seed=0)
        kw = dict(vocab=24, d_model=16, d_ff=16, layers=3, heads=2, experts=4, top_k=2, context=8)
        lm = build_mixtral(**kw, seed=3)
        state = torch.get_rng_state()
        assert all(
            torch.equal(p, q)
            for p, q in zip(lm.parameters(), build_mixtral(**kw, seed=3).parameters(), strict=True)
        )
        assert torch.equal(state, torch.get_rng_state())  # the global RNG is left alone
        losses = train_domain_lm(lm, c, steps=12, batch_size=4, context=8, seed=0)
        assert np.mean(losses[-3:]) < losses[0] and not lm.training
        aux = train_domain_lm(lm, c, steps=2, batch_size=4, context=8, aux_weight=0.1, seed=1)
        assert len(aux) == 2
        toks = torch.as_tensor(c.sample(3, 20, np.random.default_rng(1))[0])  # 20 tokens in 8-token chunks
        tr = trace_mixtral(lm, toks, context=8)
        assert len(tr.expert_ids) == 3 and len(tr.predicted_next) == 2
        assert tr.expert_ids[0].shape == (3, 20, 2) and tr.predicted_next[1].shape == (3, 20, 2)
        # the first chunk routes as the model's own router logits of a direct forward
        direct = lm(input_ids=toks[:, :8], output_router_logits=True).router_logits[2].topk(2, -1).indices
        assert np.array_equal(tr.expert_ids[2][:, :8].reshape(-1, 2), direct.numpy())
        ids = tr.expert_ids[1]
        assert 0.0 < routing_entropy(ids, 4) <= global_routing_entropy(ids, 4) + 1e-12 <= np.log(4) + 1e-12
        with pytest.raises(ValueError, match="aux_weight"):
            train_domain_lm(lm, c, steps=1, batch_size=1, context=8, aux_weight=-1.0, seed=0)
    finally:
        torch.set_num_threads(threads)
