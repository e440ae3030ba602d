"""scikit-learn contract of COMETClassifier / COMETRegressor."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks

from iclr25.methods.comet import COMETClassifier, COMETRegressor


def _data(n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + X[:, 1] > 0).astype(int)


def test_get_params_and_clone() -> None:
    clf = COMETClassifier(hidden=(8,), p_keep=0.25, random_state=3)
    params = clf.get_params()
    assert params["hidden"] == (8,) and params["p_keep"] == 0.25 and params["random_state"] == 3
    c2 = clone(clf)
    assert c2.get_params() == params and c2 is not clf
    assert clf.set_params(epochs=2).epochs == 2


def test_fit_reproducible_and_api() -> None:
    X, y = _data()
    a = COMETClassifier(hidden=(16, 16), epochs=5, random_state=0).fit(X, y)
    b = COMETClassifier(hidden=(16, 16), epochs=5, random_state=0).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    assert a.predict_proba(X).shape == (60, 2)
    np.testing.assert_allclose(a.predict_proba(X).sum(1), 1.0, rtol=1e-5)
    assert set(a.predict(X)) <= {0, 1}
    assert 0.0 <= a.score(X, y) <= 1.0
    assert a.n_features_in_ == 4
    labels = np.where(y == 1, "yes", "no")
    assert set(COMETClassifier(hidden=(8,), epochs=1, random_state=0).fit(X, labels).predict(X)) <= {
        "yes",
        "no",
    }


def test_regressor_single_and_multi_output() -> None:
    X, _ = _data()
    y = X @ np.array([1.0, -1.0, 0.5, 0.0])
    reg = COMETRegressor(hidden=(32,), epochs=20, lr=1e-2, batch_size=60, random_state=0).fit(X, y)
    assert reg.predict(X).shape == (60,)
    assert reg.score(X, y) > 0.3
    Y = np.stack([y, 2 * y], 1)
    assert COMETRegressor(hidden=(8,), epochs=1, random_state=0).fit(X, Y).predict(X).shape == (60, 2)


def test_bad_input_raises() -> None:
    X, y = _data()
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        COMETClassifier(hidden=(8,), epochs=1).fit(bad, y)
    clf = COMETClassifier(hidden=(8,), epochs=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])
    with pytest.raises(ValueError, match="p_keep"):
        COMETClassifier(p_keep=1.5, epochs=1).fit(X, y)


def test_estimators_take_the_cosine_schedule() -> None:
    X, y = _data()  # 60 rows, batch 20: 3 steps an epoch
    kw = {"hidden": (8,), "epochs": 2, "batch_size": 20, "lr": 0.01, "random_state": 0}
    assert COMETClassifier(**kw).fit(X, y).log_.step_lr == [0.01] * 6  # constant by default
    lrs = COMETRegressor(lr_schedule="cosine", **kw).fit(X, y.astype(float)).log_.step_lr
    assert lrs[0] == 0.01 and lrs == sorted(lrs, reverse=True) and lrs[-1] < 0.001
    with pytest.raises(ValueError, match="lr_schedule"):
        COMETClassifier(lr_schedule="warmup", **kw).fit(X, y)


@pytest.mark.parametrize(
    ("cls", "method"),
    [
        (COMETClassifier, "predict"),
        (COMETClassifier, "predict_proba"),
        (COMETClassifier, "score"),
        (COMETRegressor, "predict"),
        (COMETRegressor, "score"),
    ],
)
def test_use_before_fit_raises_not_fitted(cls, method) -> None:
    X, y = _data()
    call = getattr(cls(hidden=(8,)), method)
    with pytest.raises(NotFittedError, match="not fitted"):
        call(X, y) if method == "score" else call(X)


# scikit-learn's own contract checks, one test each, on small nets: (32,) wide, 10 epochs at lr 0.02
# and batch 64 train fast and still pass the checks with quality bars (check_classifiers_train,
# check_regressors_train). Checks that need pandas or SCIPY_ARRAY_API skip where those are absent.
@parametrize_with_checks(
    [
        COMETClassifier(hidden=(32,), epochs=10, lr=0.02, batch_size=64, random_state=0),
        COMETRegressor(hidden=(32,), epochs=10, lr=0.02, batch_size=64, random_state=0),
    ]
)
def test_sklearn_check_estimator(estimator, check) -> None:
    check(estimator)
