"""Unit tests of PAL: simplex weights, closed forms, projector parser, new-user fitting, API."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from iclr25.methods.pal import (
    Comparisons,
    HashedNgramEncoder,
    LookupEncoder,
    PALConfig,
    PALEstimator,
    PALHead,
    PALRewardModel,
    UserRegistry,
    cumulative_weights,
    embed_comparisons,
    from_chosen_rejected,
    from_signed,
    hinge_loss,
    parse_projector,
    pool_last,
    pool_mean,
    preference_loss,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _gen(s: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(s)


def _head(variant: str = "B", k: int = 2, d: int = 6, dp: int = 4, **kw) -> PALHead:
    head = PALHead(PALConfig(variant=variant, k=k, d_in=d, d_pref=dp, **kw), generator=_gen(0))
    head.users.add_users(["a", "b", "c"], generator=_gen(1))
    return head.eval()


def test_weights_on_simplex_and_partition_one_hot() -> None:
    reg = UserRegistry(4)
    reg.add_users([f"u{i}" for i in range(5)], generator=_gen(0))
    w = reg(reg.ids)
    assert (w >= 0).all() and torch.allclose(w.sum(-1), torch.ones(5))
    part = UserRegistry(4, partition=True)
    part.add_users(["x", "y"], init=torch.tensor([[0.1, 2.0, 0.3, 0.0], [1.0, 0.0, 0.0, 0.5]]))
    part.eval()
    assert part(["x", "y"]).tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]
    part.train()
    assert (part(["x"]) < 1).all()  # soft in training


def test_k1_is_user_independent_plain_bt() -> None:
    head = _head(k=1)
    x, y = torch.randn(5, 6, generator=_gen(2)), torch.randn(5, 6, generator=_gen(3))
    r_a = head.rewards(["a"] * 5, x, y)
    r_b = head.rewards(["c"] * 5, x, y)
    assert torch.equal(r_a, r_b)
    plain = head.scale() * F.cosine_similarity(head.f(y), head.g[0](x), dim=-1)
    assert torch.allclose(r_a, plain, atol=1e-6)


def test_pal_a_distance_and_hinge_closed_form() -> None:
    head = _head(variant="A", k=2, d=3, dp=3, projector="identity", user_map="Pw")
    with torch.no_grad():
        head.prototypes.copy_(torch.tensor([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]]))
    w = torch.tensor([0.5, 0.5])  # ideal point (1, 0, 0)
    left, right = torch.tensor([[1.0, 3.0, 0.0]]), torch.tensor([[1.0, 0.0, 1.0]])
    s = head(w, None, left, right)
    assert s.item() == pytest.approx(3.0 - 1.0)  # ||z_l - a|| - ||z_r - a||
    assert hinge_loss(s, torch.tensor([1])).item() == 0.0  # 1 - 1*2 < 0
    assert hinge_loss(s, torch.tensor([0])).item() == pytest.approx(3.0)  # 1 + 2


def test_scale_clamps_exp_at_100() -> None:
    head = _head()
    with torch.no_grad():
        head.logit_scale.fill_(10.0)
    assert head.scale().item() == 100.0
    with torch.no_grad():
        head.logit_scale.fill_(math.log(7.0))
    assert head.scale().item() == pytest.approx(7.0, rel=1e-6)


def test_ce_is_bt_and_antisymmetric() -> None:
    head = _head()
    p, l_, r = (torch.randn(4, 6, generator=_gen(i)) for i in (4, 5, 6))
    users = ["a", "b", "c", "a"]
    lg = head.logits(users, p, l_, r)
    label = torch.tensor([0, 1, 1, 0])
    pref = lg.gather(1, label[:, None])[:, 0]
    other = lg.gather(1, 1 - label[:, None])[:, 0]
    expected = -torch.log(torch.sigmoid(pref - other)).mean()
    assert preference_loss(lg, label, "ce").item() == pytest.approx(expected.item(), rel=1e-5)
    p_lr = head.prob_right(users, p, l_, r)
    p_rl = head.prob_right(users, p, r, l_)
    assert torch.allclose(p_lr, 1 - p_rl, atol=1e-6)


def test_projector_parser() -> None:
    d = 5
    f = parse_projector("mlp2", d, d)
    assert sum(q.numel() for q in f.parameters()) == 3 * (d * d + d)
    assert sum(q.numel() for q in parse_projector("mlp2", 512, 512).parameters()) == 787_968
    res = parse_projector("mlp2-relu-dropout0-residual", d, d)
    x = torch.randn(2, d)
    assert res(x).shape == (2, d)
    with pytest.raises(ValueError, match="residual"):
        parse_projector("mlp2-relu-dropout0-residual", 4, 5)
    with pytest.raises(ValueError, match="unknown projector"):
        parse_projector("transformer3", 4, 4)


def _fitted_on_two_users(variant: str) -> tuple:
    """A small PAL fitted on two seen users: ``(estimator, x, y, labels)``."""
    rng = np.random.default_rng(0)
    n, d = 60, 6
    x, y = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    lab = (x[:, 0] < y[:, 0]).astype(int)
    cfg = PALConfig(variant=variant, k=3, d_in=d, d_pref=4, epochs=2, batch_size=16, new_user_steps=5)
    return PALEstimator(cfg).fit(x, x, y, lab, ["s0", "s1"] * (n // 2)), x, y, lab


@pytest.mark.parametrize("variant", ["A", "B"])
def test_new_user_fit_trains_only_new_w(variant: str) -> None:
    est, x, y, lab = _fitted_on_two_users(variant)
    before = {k: v.clone() for k, v in est.head_.state_dict().items()}
    est.partial_fit_new_users(x[:10], x[:10], y[:10], lab[:10], ["n0", "n1"] * 5)
    after = est.head_.state_dict()
    assert est.new_user_trainable_ == 3 * 2
    for k, v in before.items():
        assert torch.equal(v, after[k]), f"{k} changed"
    new_block = est.head_.users.blocks[1]
    assert new_block.shape == (2, 3)
    # all flags restored after fitting
    assert all(p.requires_grad for p in est.head_.parameters())


def test_pooling_last_both_sides_and_mean_masks_pads() -> None:
    h = torch.arange(24.0).view(2, 4, 3)
    right_pad = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left_pad = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]])
    assert torch.equal(pool_last(h, right_pad), torch.stack([h[0, 1], h[1, 3]]))
    assert torch.equal(pool_last(h, left_pad), torch.stack([h[0, 3], h[1, 3]]))
    assert torch.allclose(pool_mean(h, right_pad)[0], h[0, :2].mean(0))
    assert torch.allclose(pool_mean(h, left_pad)[1], h[1, 1:].mean(0))


def test_cumulative_weights_sum_to_one() -> None:
    for n in (1, 2, 7, 512):
        w = cumulative_weights(n)
        assert w.sum().item() == pytest.approx(1.0, abs=1e-5)
        assert w[-1] / w[0] == pytest.approx(n)


def _text_model(variant: str = "B") -> PALRewardModel:
    enc = HashedNgramEncoder(dim=16)
    kw = {"projector": "mlp1-gelu-dropout0"}
    head = PALHead(PALConfig(variant=variant, k=2, d_in=16, d_pref=8, **kw), generator=_gen(0))
    head.users.add_users(["u", "v"], generator=_gen(1))
    return PALRewardModel(enc, head.eval())


@pytest.mark.parametrize("variant", ["A", "B"])
def test_reward_api_matches_head_and_reward_model(variant: str) -> None:
    m = _text_model(variant)
    prompts, resp = ["p one", "p two", "p three"], ["short", "a longer answer here", "x y"]
    r = m.reward(prompts, resp, user_id="v")
    pe, ye = m.embed(prompts, resp)
    assert torch.allclose(r, m.head.rewards(["v"] * 3, pe, ye))
    out = m.as_reward_model(user_id="v")(prompts, resp)
    assert out.logits.shape == (3, 1) and torch.allclose(out.logits[:, 0], r)
    w = m.head.users.weights("v").detach()
    assert torch.allclose(m.reward(prompts, resp, weights=w), r)


def test_save_load_round_trip(tmp_path) -> None:
    m = _text_model()
    m.head.users.add_users(["w"], generator=_gen(5))
    m.save_pretrained(tmp_path / "pal")
    m2 = PALRewardModel.from_pretrained(tmp_path / "pal", HashedNgramEncoder(dim=16))
    assert m2.head.users.ids == ["u", "v", "w"]
    args = (["p"], ["resp"])
    for uid in ("u", "w"):
        assert torch.allclose(m.reward(*args, user_id=uid), m2.reward(*args, user_id=uid))


def test_estimator_is_deterministic() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(40, 4)), rng.normal(size=(40, 4))
    lab = (x[:, 1] > y[:, 1]).astype(int)
    cfg = PALConfig(variant="B", k=2, d_in=4, d_pref=4, epochs=2, batch_size=8)
    p1 = (
        PALEstimator(cfg, random_state=3)
        .fit(x, x, y, lab, ["a", "b"] * 20)
        .predict_proba(x, x, y, ["a"] * 40)
    )
    p2 = (
        PALEstimator(cfg, random_state=3)
        .fit(x, x, y, lab, ["a", "b"] * 20)
        .predict_proba(x, x, y, ["a"] * 40)
    )
    assert np.array_equal(p1, p2)


def test_estimator_learns_two_groups() -> None:
    rng = np.random.default_rng(0)
    n = 400
    x, y = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    users = np.array(["a", "b"] * (n // 2))
    lab = np.where(users == "a", x[:, 0] < y[:, 0], x[:, 0] > y[:, 0]).astype(int)
    cfg = PALConfig(
        variant="A", k=2, d_in=4, d_pref=4, epochs=80, batch_size=400, lr_projector=1e-2, lr_user=0.2
    )
    est = PALEstimator(cfg).fit(None, x, y, lab, users)
    k2 = est.score(None, x, y, lab, users)
    k1 = PALEstimator(cfg.replace(k=1)).fit(None, x, y, lab, users).score(None, x, y, lab, users)
    assert k2 > k1 + 0.2
    # As the README's Usage comment says: user a picks the larger first coordinate, b the smaller.
    small, large = [[-1.0, 0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0, 0.0]]
    assert est.predict(None, small, large, ["a"]).tolist() == [1]  # 1 = the right item
    assert est.predict(None, small, large, ["b"]).tolist() == [0]


def test_converters() -> None:
    ds = from_signed(["u"] * 2, ["p"] * 2, ["l1", "l2"], ["r1", "r2"], [-1, 1])
    assert ds.label == (0, 1)
    cr = from_chosen_rejected(["u"] * 50, ["p"] * 50, ["c"] * 50, ["r"] * 50, rng=np.random.default_rng(0))
    assert 0 < sum(cr.label) < 50
    for left, right, y in zip(cr.left, cr.right, cr.label, strict=True):
        assert (left, right)[y] == "c"


def test_bad_input_errors() -> None:
    head = _head()
    e = torch.randn(2, 6)
    with pytest.raises(KeyError, match="unknown user"):
        head(["a", "zzz"], e, e, e)
    with pytest.raises(ValueError, match="shape"):
        head(["a", "b"], e, torch.randn(2, 5), e)
    with pytest.raises(ValueError, match="k must be"):
        PALConfig(k=0)
    with pytest.raises(ValueError, match="labels"):
        Comparisons(["u"], ["p"], ["l"], ["r"], [2])
    with pytest.raises(ValueError, match="mismatched lengths"):
        Comparisons(["u", "v"], ["p"], ["l"], ["r"], [1])
    with pytest.raises(ValueError, match="already registered"):
        head.users.add_users(["a"], generator=_gen(0))
    before = head.users.weights("a").clone()
    assert head.users.add_users(["a", "new"], generator=_gen(0), exist_ok=True)[0] == 0
    assert torch.equal(head.users.weights("a"), before)
    with pytest.raises(KeyError, match="unknown item"):
        embed_comparisons(
            Comparisons(["u"], [""], ["i0"], ["nope"], [0]), LookupEncoder({"i0": [1.0]}), joint=True
        )
    est = PALEstimator(PALConfig(variant="B", k=2, d_in=4, d_pref=4, epochs=1))
    x = np.zeros((3, 4))
    with pytest.raises(ValueError, match="labels"):
        est.fit(x, x, x, [0, 1, 3], ["u"] * 3)
    with pytest.raises(ValueError, match="shape"):
        est.fit(x, np.zeros((3, 5)), x, [0, 1, 1], ["u"] * 3)
    with pytest.raises(ValueError, match="user ids"):
        est.fit(x, x, x, [0, 1, 1], ["u"] * 2)
    with pytest.raises(ValueError, match="score"):
        PALConfig(variant="A", score="cosine")


@pytest.mark.parametrize(("variant", "user_map"), [("A", "f(Pw)"), ("A", "f(P)w"), ("B", "f(Pw)")])
def test_cached_features_give_the_same_logits(variant: str, user_map: str) -> None:
    head = _head(variant, k=3, user_map=user_map)
    g = _gen(5)
    p, left, right = (torch.randn(5, 6, generator=g) for _ in range(3))
    ids = ["a", "b", "c", "a", "b"]
    feats = head.user_free_features(p, left, right)
    assert torch.equal(head.logits(ids, p, left, right), head.logits_from_features(head.users(ids), feats))


def test_estimator_follows_the_get_params_contract() -> None:
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    cfg = PALConfig(variant="B", k=2, d_in=4, d_pref=4, epochs=1)
    est = PALEstimator(cfg, random_state=3)
    assert est.get_params() == {"config": cfg, "device": "cpu", "random_state": 3}
    assert est.set_params(random_state=5) is est and est.random_state == 5
    x = np.zeros((2, 4))
    with pytest.raises(NotFittedError, match="fit"):
        est.predict(x, x, x, ["u", "u"])
    rng = np.random.default_rng(0)
    p, a, b = (rng.normal(size=(8, 4)) for _ in range(3))
    est.fit(p, a, b, [0, 1] * 4, ["u"] * 8)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "head_")
    assert np.array_equal(
        twin.fit(p, a, b, [0, 1] * 4, ["u"] * 8).predict_proba(p, a, b, ["u"] * 8),
        est.predict_proba(p, a, b, ["u"] * 8),
    )


def test_nan_embeddings_raise_a_clear_error() -> None:
    est = PALEstimator(PALConfig(variant="B", k=2, d_in=4, d_pref=4, epochs=1))
    x = np.zeros((3, 4))
    bad = x.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"left_emb has 1 NaN or infinite value.*row 1"):
        est.fit(x, bad, x, [0, 1, 1], ["u"] * 3)
    with pytest.raises(ValueError, match=r"prompt_emb .*NaN"):
        est.fit(np.full((3, 4), np.inf), x, x, [0, 1, 1], ["u"] * 3)

    class NanEncoder:
        dim = 2

        def encode(self, texts):
            return torch.full((len(texts), 2), float("nan"))

    with pytest.raises(ValueError, match="encoder's embeddings"):
        embed_comparisons(Comparisons(["u"], ["p"], ["a"], ["b"], [0]), NanEncoder(), joint=False)


class _Columns:
    """A column mapping like a pandas DataFrame or a datasets.Dataset: ``data[name]`` is a column."""

    def __init__(self, cols: dict) -> None:
        self.cols = cols

    def __getitem__(self, name: str) -> list:
        return self.cols[name]


def _rows(n: int = 12) -> list[dict]:
    return [
        {"user_id": f"u{i % 3}", "prompt": f"post {i}", "chosen": f"good {i}", "rejected": f"bad {i}", "x": 1}
        for i in range(n)
    ]


def test_records_from_rows_and_columns_agree() -> None:
    from iclr25.methods.pal import from_records

    rows = _rows()
    ds = from_records(rows, rng=np.random.default_rng(0))
    cols = {k: [r[k] for r in rows] for k in rows[0]}
    assert from_records(cols, rng=np.random.default_rng(0)) == ds
    assert from_records(_Columns(cols), rng=np.random.default_rng(0)) == ds
    assert 0 < sum(ds.label) < len(ds)  # sides are randomised
    for i, (left, right, y) in enumerate(zip(ds.left, ds.right, ds.label, strict=True)):
        assert (left, right)[y] == f"good {i}" and ds.user_id[i] == f"u{i % 3}"
    with pytest.raises(ValueError, match=r"lack the column.*rejected"):
        from_records([{"user_id": "u", "prompt": "p", "chosen": "c"}], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="no column 'user_id'"):
        from_records({"prompt": ["p"], "chosen": ["c"], "rejected": ["r"]}, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="mismatched lengths"):
        from_records({**cols, "prompt": cols["prompt"][:-1]}, rng=np.random.default_rng(0))
    chat = [{**rows[0], "chosen": [{"role": "assistant", "content": "hi"}]}]
    with pytest.raises(TypeError, match="chat template"):
        from_records(chat, rng=np.random.default_rng(0))


def test_records_from_pandas_and_datasets() -> None:
    from iclr25.methods.pal import from_records

    pd = pytest.importorskip("pandas")
    rows = _rows()
    ref = from_records(rows, rng=np.random.default_rng(1))
    assert from_records(pd.DataFrame(rows), rng=np.random.default_rng(1)) == ref
    hf = pytest.importorskip("datasets")
    assert from_records(hf.Dataset.from_list(rows), rng=np.random.default_rng(1)) == ref


def test_trainer_fits_trl_style_records() -> None:
    from iclr25.methods.pal import PALTrainer, from_records

    def trainer() -> PALTrainer:
        cfg = PALConfig(variant="B", k=2, d_in=16, d_pref=8, epochs=2, batch_size=4)
        return PALTrainer(PALRewardModel(HashedNgramEncoder(dim=16), PALHead(cfg)), random_state=4)

    rows = _rows()
    by_records = trainer().fit_seen(rows)
    # The same records as Comparisons, with the chosen side drawn by the trainer's own coin.
    ref = trainer()
    ref.fit_seen(from_records(rows, rng=np.random.default_rng([4, 505])))
    for a, b in zip(by_records.model.head.parameters(), ref.model.head.parameters(), strict=True):
        assert torch.equal(a, b)
    new_user = [{**r, "user_id": "new"} for r in _rows(6)]
    acc = by_records.fit_new_users(new_user).evaluate(rows)
    assert set(acc) == {"u0", "u1", "u2"}
    assert "new" in by_records.model.head.users


@pytest.mark.parametrize("variant", ["A", "B"])
def test_new_users_by_cross_entropy_train_only_w(variant: str) -> None:
    est, x, y, lab = _fitted_on_two_users(variant)
    before = {k: v.clone() for k, v in est.head_.state_dict().items()}
    fits = {}
    for loss in ("hinge", "ce"):
        e = copy.deepcopy(est).partial_fit_new_users(
            x[:10], x[:10], y[:10], lab[:10], ["n0", "n1"] * 5, loss=loss
        )
        assert e.new_user_trainable_ == 3 * 2
        for k, v in before.items():
            assert torch.equal(v, e.head_.state_dict()[k]), f"{k} changed"
        fits[loss] = e.head_.users.blocks[1].detach().clone()
    assert not torch.equal(fits["hinge"], fits["ce"])
    with pytest.raises(ValueError, match="loss must be"):
        est.partial_fit_new_users(x[:2], x[:2], y[:2], lab[:2], ["n9", "n9"], loss="mse")
    with pytest.raises(ValueError, match="new_user_loss"):
        PALConfig(new_user_loss="mse")
    # new_user_loss="ce" in the config is what loss="auto" picks.
    e = copy.deepcopy(est)
    e.config = est.config.replace(new_user_loss="ce")
    e.head_.config = e.config
    e.partial_fit_new_users(x[:10], x[:10], y[:10], lab[:10], ["n0", "n1"] * 5)
    assert torch.equal(e.head_.users.blocks[1], fits["ce"])
