"""Unit tests of PAL: simplex weights, closed forms, projector parser, new-user fitting, API."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.base import clone

from iclr25.methods.pal import (
    Comparisons,
    HashedNgramEncoder,
    LookupEncoder,
    PALConfig,
    PALEstimator,
    PALHead,
    PALRewardModel,
    UserRegistry,
    comparison_accuracy_scorer,
    comparison_matrix,
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
    est = PALEstimator(variant=variant, k=3, d_pref=4, epochs=2, batch_size=16, new_user_steps=5)
    prompt = x if variant == "B" else None
    return est.fit(comparison_matrix(["s0", "s1"] * (n // 2), x, y, prompt), lab), x, y, lab


@pytest.mark.parametrize("variant", ["A", "B"])
def test_new_user_fit_trains_only_new_w(variant: str) -> None:
    est, x, y, lab = _fitted_on_two_users(variant)
    before = {k: v.clone() for k, v in est.head_.state_dict().items()}
    prompt = x[:10] if variant == "B" else None
    est.partial_fit_new_users(comparison_matrix(["n0", "n1"] * 5, x[:10], y[:10], prompt), lab[:10])
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
    X, Xa = comparison_matrix(["a", "b"] * 20, x, y, x), comparison_matrix(["a"] * 40, x, y, x)
    kw = {"variant": "B", "k": 2, "d_pref": 4, "epochs": 2, "batch_size": 8, "random_state": 3}
    p1 = PALEstimator(**kw).fit(X, lab).predict_proba(Xa)
    p2 = PALEstimator(**kw).fit(X, lab).predict_proba(Xa)
    assert np.array_equal(p1, p2)


def test_estimator_learns_two_groups() -> None:
    rng = np.random.default_rng(0)
    n = 400
    x, y = rng.normal(size=(n, 4)), rng.normal(size=(n, 4))
    users = np.array(["a", "b"] * (n // 2))
    lab = np.where(users == "a", x[:, 0] < y[:, 0], x[:, 0] > y[:, 0]).astype(int)
    est = PALEstimator(variant="A", k=2, d_pref=4, epochs=80, batch_size=400, lr_projector=1e-2, lr_user=0.2)
    X = comparison_matrix(users, x, y)
    k2 = est.fit(X, lab).score(X, lab)
    k1 = clone(est).set_params(k=1).fit(X, lab).score(X, lab)
    assert k2 > k1 + 0.2
    assert comparison_accuracy_scorer(est, X, lab) == k2
    # As the README's Usage comment says: user a picks the larger first coordinate, b the smaller.
    small, large = [[-1.0, 0.0, 0.0, 0.0]], [[1.0, 0.0, 0.0, 0.0]]
    assert est.predict(comparison_matrix(["a"], small, large)).tolist() == [1]  # 1 = the right item
    assert est.predict(comparison_matrix(["b"], small, large)).tolist() == [0]


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
    est = PALEstimator(variant="B", k=2, d_pref=4, epochs=1)
    x = np.zeros((3, 4))
    X = comparison_matrix(["u"] * 3, x, x, x)
    with pytest.raises(ValueError, match="labels"):
        est.fit(X, [0, 1, 3])
    with pytest.raises(ValueError, match="shape"):
        comparison_matrix(["u"] * 3, x, np.zeros((3, 5)), x)
    with pytest.raises(ValueError, match="user ids"):
        comparison_matrix(["u"] * 2, x, x, x)
    with pytest.raises(ValueError, match="columns"):
        est.fit(X[:, :-1], [0, 1, 1])  # 1 + 3 d columns for PAL-B
    with pytest.raises(ValueError, match="numbers"):
        est.fit(np.array([["u", "a", "b", "c"]], dtype=object), [0])
    with pytest.raises(ValueError, match="0 comparisons"):
        est.fit(X[:0], [])
    with pytest.raises(ValueError, match="k must be"):
        PALEstimator(k=0).fit(X, [0, 1, 1])  # checked at fit, as scikit-learn expects
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
    from sklearn.exceptions import NotFittedError

    default = PALEstimator()  # default-constructible: the paper's PAL-B hyper-parameters
    assert default.get_params()["variant"] == "B" and default.get_params()["k"] == 2
    twin3 = clone(PALEstimator()).set_params(k=3)
    assert twin3.k == 3 and twin3.get_params()["d_pref"] == 512
    est = PALEstimator(variant="B", k=2, d_pref=4, epochs=1, random_state=3)
    assert est.set_params(random_state=5) is est and est.random_state == 5
    X0 = comparison_matrix(["u", "u"], *(np.zeros((2, 4)),) * 3)
    with pytest.raises(NotFittedError, match="fit"):
        est.predict(X0)
    rng = np.random.default_rng(0)
    p, a, b = (rng.normal(size=(8, 4)) for _ in range(3))
    X = comparison_matrix(["u"] * 8, a, b, p)
    est.fit(X, [0, 1] * 4)
    assert est.config_.d_in == 4 and est.n_features_in_ == 13 and est.classes_.tolist() == [0, 1]
    twin = clone(est)
    assert twin.get_params() == est.get_params() and not hasattr(twin, "head_")
    assert np.array_equal(twin.fit(X, [0, 1] * 4).predict_proba(X), est.predict_proba(X))
    # from_config carries every hyper-parameter of a PALConfig (d_in comes from X at fit).
    cfg = PALConfig(variant="A", k=3, d_in=4, d_pref=6, user_map="f(P)w", epochs=7, lr_user=0.3)
    got = PALEstimator.from_config(cfg, random_state=2).fit(comparison_matrix(["u"] * 8, a, b), [0, 1] * 4)
    assert got.config_ == cfg.replace(seed=2)
    with pytest.raises(ValueError, match="columns"):
        est.predict(comparison_matrix(["u"] * 8, a[:, :3], b[:, :3], p[:, :3]))


def test_grid_search_over_k_runs() -> None:
    """GridSearchCV clones the estimator, sets k, and scores comparison accuracy on held-out rows."""
    from sklearn.model_selection import GridSearchCV

    rng = np.random.default_rng(0)
    n = 80
    x, y = rng.normal(size=(n, 2)), rng.normal(size=(n, 2))
    users = np.array(["a", "b"] * (n // 2))
    lab = np.where(users == "a", x[:, 0] < y[:, 0], x[:, 0] > y[:, 0]).astype(int)
    est = PALEstimator(variant="A", d_pref=2, projector="mlp1-gelu-dropout0", epochs=15, batch_size=40)
    est.set_params(lr_projector=2e-2, lr_user=0.3, new_user_steps=1)
    search = GridSearchCV(est, {"k": [1, 2]}, cv=2, scoring=comparison_accuracy_scorer)
    search.fit(comparison_matrix(users, x, y), lab)
    scores = search.cv_results_["mean_test_score"]
    assert len(scores) == 2 and np.all((scores >= 0) & (scores <= 1))
    assert search.best_estimator_.k in (1, 2) and hasattr(search.best_estimator_, "head_")


# scikit-learn's estimator checks that apply to a classifier of comparisons. The others feed
# random numeric X of any width (no user-id column, widths that are not 1 + 2 d) and multi-class
# or continuous y, which PAL rejects by design: labels are 0 (left) or 1 (right).
_SKLEARN_CHECKS = (
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_estimators_unfitted",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_mixin_order",
    "check_estimators_pickle",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    "check_fit1d",
    "check_supervised_y_no_nan",
)


def test_sklearn_estimator_checks_that_apply() -> None:
    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(PALEstimator(variant="A", d_pref=2, epochs=1), on_fail=None)
    status = {}
    for r in results:
        status.setdefault(r["check_name"], set()).add(r["status"])
    for name in _SKLEARN_CHECKS:
        assert status.get(name) == {"passed"}, (name, status.get(name))


def test_nan_embeddings_raise_a_clear_error() -> None:
    est = PALEstimator(variant="B", k=2, d_pref=4, epochs=1)
    x = np.zeros((3, 4))
    bad = x.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"left_emb has 1 NaN or infinite value.*row 1"):
        est.fit(comparison_matrix(["u"] * 3, bad, x, x), [0, 1, 1])
    with pytest.raises(ValueError, match=r"prompt_emb .*NaN"):
        est.fit(comparison_matrix(["u"] * 3, x, x, np.full((3, 4), np.inf)), [0, 1, 1])

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
    prompt = x[:10] if variant == "B" else None
    new_x = comparison_matrix(["n0", "n1"] * 5, x[:10], y[:10], prompt)
    fits = {}
    for loss in ("hinge", "ce"):
        e = copy.deepcopy(est).partial_fit_new_users(new_x, lab[:10], loss=loss)
        assert e.new_user_trainable_ == 3 * 2
        for k, v in before.items():
            assert torch.equal(v, e.head_.state_dict()[k]), f"{k} changed"
        fits[loss] = e.head_.users.blocks[1].detach().clone()
    assert not torch.equal(fits["hinge"], fits["ce"])
    with pytest.raises(ValueError, match="loss must be"):
        est.partial_fit_new_users(new_x[:2], lab[:2], loss="mse")
    with pytest.raises(ValueError, match="new_user_loss"):
        PALConfig(new_user_loss="mse")
    # new_user_loss="ce" in the config is what loss="auto" picks.
    e = copy.deepcopy(est).set_params(new_user_loss="ce")  # read at partial_fit, no refit needed
    e.partial_fit_new_users(new_x, lab[:10])
    assert torch.equal(e.head_.users.blocks[1], fits["ce"])
