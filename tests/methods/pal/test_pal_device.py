"""Device handling of PAL's trainers and claim, checked on the CPU (and the ``meta`` device).

``device="cpu"`` and ``device=torch.device("cpu")`` must give the numbers of the default, the
seeded draws must stay on the CPU generator and be moved to where the tensors live, and the
claim must hand its ``device`` to every trainer and to the MiniLM encoder.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from iclr25.methods.pal import (
    MLPRewardModel,
    PALConfig,
    PALEstimator,
    PerUserLogistic,
    UnconstrainedIdealPoint,
    UserRegistry,
    comparison_matrix,
)
from iclr25.methods.pal import claim as pal_claim

pytestmark = pytest.mark.usefixtures("one_thread")

_DEVICES = ("cpu", torch.device("cpu"))


def _data(n: int = 48, d: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]:
    rng = np.random.default_rng(0)
    p, x, y = (rng.normal(size=(n, d)) for _ in range(3))
    ids = [f"u{i % 3}" for i in range(n)]
    label = (x[:, 0] < y[:, 0]).astype(int)
    return p, x, y, ids, label


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("variant", ["A", "B"])
def test_estimator_device_cpu_matches_default(device: str | torch.device, variant: str) -> None:
    p, x, y, ids, label = _data()
    X = comparison_matrix(ids, x, y, p if variant == "B" else None)
    kw = dict(variant=variant, k=2, d_pref=4, epochs=2, batch_size=8, new_user_steps=3, mixing="gumbel")
    ref = PALEstimator(**kw).fit(X, label)
    est = PALEstimator(**kw, device=device).fit(X, label)
    assert {q.device.type for q in est.head_.parameters()} == {"cpu"}
    assert est.loss_curve_ == ref.loss_curve_
    np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))
    new = comparison_matrix(["v"] * 6, x[:6], y[:6], p[:6] if variant == "B" else None)
    ref.partial_fit_new_users(new, label[:6])
    est.partial_fit_new_users(new, label[:6])
    np.testing.assert_array_equal(est.user_weights(["v"]), ref.user_weights(["v"]))


def test_from_config_passes_device() -> None:
    est = PALEstimator.from_config(PALConfig(variant="A", k=2, d_in=4, d_pref=4), device=torch.device("cpu"))
    assert est.device == torch.device("cpu") and est.get_params()["device"] == torch.device("cpu")


@pytest.mark.parametrize("device", _DEVICES)
def test_baselines_device_cpu_match_default(device: str | torch.device) -> None:
    p, x, y, ids, label = _data()
    kw = dict(epochs=2, batch_size=8, new_user_steps=3)
    ref = UnconstrainedIdealPoint(4, 4, **kw).fit(x, y, label, ids)
    unc = UnconstrainedIdealPoint(4, 4, **kw, device=device).fit(x, y, label, ids)
    assert {q.device.type for q in [*unc.f_.parameters(), unc.t_, *unc.points_]} == {"cpu"}
    np.testing.assert_array_equal(unc.predict(x, y, ids), ref.predict(x, y, ids))
    ref.partial_fit_new_users(x[:6], y[:6], label[:6], ["v"] * 6)
    unc.partial_fit_new_users(x[:6], y[:6], label[:6], ["v"] * 6)
    assert torch.equal(unc.points_[-1], ref.points_[-1])

    ref_mlp = MLPRewardModel(4, hidden=8, epochs=2, batch_size=8).fit(p, x, y, label, ids)
    mlp = MLPRewardModel(4, hidden=8, epochs=2, batch_size=8, device=device).fit(p, x, y, label, ids)
    assert {q.device.type for q in mlp.net_.parameters()} == {"cpu"}
    for a, b in zip(mlp.net_.parameters(), ref_mlp.net_.parameters(), strict=True):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(mlp.predict(p, x, y, ids), ref_mlp.predict(p, x, y, ids))


def test_tensor_inputs_are_accepted_like_arrays() -> None:
    """Tensors (on any device: they are copied to the CPU) give the same fit as numpy arrays."""
    _, x, y, ids, label = _data()
    tx, ty, tl = torch.from_numpy(x).float(), torch.from_numpy(y).float(), torch.from_numpy(label)
    a = PerUserLogistic().fit(x.astype(np.float32), y.astype(np.float32), label, ids)
    b = PerUserLogistic().fit(tx, ty, tl, ids)
    np.testing.assert_array_equal(a.predict(x, y, ids), b.predict(tx, ty, ids))
    ref = UnconstrainedIdealPoint(4, 4, epochs=1, batch_size=8).fit(x, y, label, ids)
    got = UnconstrainedIdealPoint(4, 4, epochs=1, batch_size=8).fit(tx, ty, tl, ids)
    np.testing.assert_array_equal(got.predict(tx, ty, ids), ref.predict(x, y, ids))


def test_registry_draws_on_the_generator_and_moves_to_the_blocks() -> None:
    """New users and Gumbel noise are drawn on the CPU generator and land on the blocks' device
    (``meta`` here stands in for a GPU: a CPU generator cannot draw there)."""
    reg = UserRegistry(3, mixing="gumbel")
    reg.add_users(["a"], init=torch.zeros(1, 3, device="meta"))
    gen = torch.Generator().manual_seed(0)
    reg.add_users(["b", "c"], generator=gen)
    assert [b.device.type for b in reg.blocks] == ["meta", "meta"]
    reg.generator = gen
    reg.train()
    assert reg.mix(torch.zeros(2, 3, device="meta")).device.type == "meta"
    # The CPU stream is the one a CPU registry gets.
    cpu = UserRegistry(3)
    cpu.add_users(["a"], init=torch.zeros(1, 3))
    cpu.add_users(["b", "c"], generator=torch.Generator().manual_seed(0))
    assert torch.equal(cpu.blocks[1], torch.randn(2, 3, generator=torch.Generator().manual_seed(0)))


class _Stop(Exception):
    pass


def test_claim_passes_device_to_trainers_and_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run(..., device=...)`` reaches the PAL estimators and the MiniLM encoder (stopped at the
    first call, so no model is trained)."""
    seen: list[object] = []

    def from_config(config: PALConfig, *, random_state: int = 0, device: object = "cpu") -> PALEstimator:
        seen.append(device)
        raise _Stop

    def minilm(device: object = "cpu") -> None:
        seen.append(device)
        raise _Stop

    monkeypatch.setattr(pal_claim.PALEstimator, "from_config", staticmethod(from_config))
    monkeypatch.setattr(pal_claim, "_minilm_encoder", minilm)
    cfg = pal_claim.CLAIM.budgets["smoke"].config
    with pytest.raises(_Stop):
        pal_claim.run(cfg, seed=0, device="meta")
    with pytest.raises(_Stop):
        pal_claim._check_minilm(cfg, 0, {"minilm": {}}, [], device="meta")
    assert seen == ["meta", "meta"]
