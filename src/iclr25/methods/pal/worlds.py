"""Synthetic preference worlds with known ground truth for the PAL claim check.

Built to test *PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment*
(Chen, Chen, Rege, Wang, Vinayak; ICLR 2025; arXiv:2406.08469), Sec. 2 (the mixture model of
preferences) and Sec. 4 (Reddit TL;DR "summary length" personas):

- :func:`make_ideal_point_world`: items in R^d, a hidden non-linear map f* to a preference space,
  K* prototypes; user i's ideal point a*_i = sum_k w*_ik p*_k with w*_i ~ Dirichlet(alpha);
  Bradley-Terry labels on the squared-distance difference with slope kappa set for a chosen
  Bayes accuracy. ``n_groups=1`` is the null world (everybody shares one ideal point).
- :func:`make_summary_length_world`: synthetic posts with a short and a long summary each;
  seen users 7 prefer longer, 3 shorter (label noise 5%); unseen users in random groups.
- Ground-truth tools of the numeric world: :meth:`IdealPointWorld.fit_true_weights` (the
  true-model few-shot oracle: true f*, prototypes and slope, only w fitted by maximum likelihood
  on the simplex) and :func:`weight_recovery_error` (learned weights against w* after matching
  prototypes with the Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``).

Both return :class:`~iclr25.methods.pal.Comparisons` in the common schema; the numeric world also
returns a :class:`~iclr25.methods.pal.LookupEncoder`, so both go through the same embedding
interface.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .data import Comparisons
from .encoders import LookupEncoder

__all__ = [
    "IdealPointWorld",
    "SummaryLengthWorld",
    "first_n_per_user",
    "length_probe_accuracy",
    "make_ideal_point_world",
    "make_summary_length_world",
    "simplex_grid",
    "weight_recovery_error",
]


def first_n_per_user(ds: Comparisons, n: int) -> Comparisons:
    """The first ``n`` comparisons of every user (nested few-shot subsets).

    Example:
        >>> ds = Comparisons(["a", "b", "a"], ["p"] * 3, ["x"] * 3, ["y"] * 3, [0, 1, 1])
        >>> first_n_per_user(ds, 1).user_id
        ('a', 'b')
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    seen: dict[str, int] = {}
    keep = []
    for i, u in enumerate(ds.user_id):
        if seen.get(u, 0) < n:
            keep.append(i)
            seen[u] = seen.get(u, 0) + 1
    return ds.select(keep)


def simplex_grid(k: int, resolution: int) -> np.ndarray:
    """Every point of the K-simplex whose coordinates are multiples of 1 / ``resolution``.

    Args:
        k: K, the number of coordinates.
        resolution: the grid step is 1 / resolution.

    Returns:
        The C(resolution + K - 1, K - 1) grid points. Shape: (points, K).

    Example:
        >>> simplex_grid(3, 2).tolist()
        [[0.0, 0.0, 1.0], [0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]
    """
    if k < 1 or resolution < 1:
        raise ValueError(f"k and resolution must be >= 1, got {k}, {resolution}")
    # Stars and bars: K - 1 bar positions among resolution + K - 1 slots give one composition.
    rows = []
    for bars in itertools.combinations(range(resolution + k - 1), k - 1):
        edges = (-1, *bars, resolution + k - 1)
        rows.append([edges[j + 1] - edges[j] - 1 for j in range(k)])
    return np.asarray(rows, dtype=np.float64) / resolution


def weight_recovery_error(w_hat: np.ndarray, w_true: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean absolute error of learned simplex weights against the true ones, up to a permutation.

    Prototypes are only defined up to their order, so learned prototype k is first matched to a
    true prototype by the Hungarian algorithm on the cost C[k, j] = mean_i |w_hat_ik - w*_ij|;
    the error is then the mean over users and prototypes of the matched absolute differences.

    Args:
        w_hat: learned weights of n users (rows on the simplex).
        w_true: true weights w* of the same users, in the same order.

    Returns:
        (mean absolute error, ``perm``) where learned prototype k is matched to true ``perm[k]``.

    Shape:
        w_hat, w_true: (n, K).

    Example:
        >>> w = np.array([[0.9, 0.1], [0.2, 0.8]])
        >>> err, perm = weight_recovery_error(w[:, ::-1], w)
        >>> float(err), perm.tolist()
        (0.0, [1, 0])
    """
    from scipy.optimize import linear_sum_assignment

    w_hat, w_true = np.asarray(w_hat, dtype=np.float64), np.asarray(w_true, dtype=np.float64)
    if w_hat.ndim != 2 or w_hat.shape != w_true.shape:
        raise ValueError(f"weights must share one (n, K) shape, got {w_hat.shape} and {w_true.shape}")
    cost = np.abs(w_hat[:, :, None] - w_true[:, None, :]).mean(0)  # (K, K): learned k vs true j
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean()), cols[np.argsort(rows)]


@dataclass
class IdealPointWorld:
    """A numeric ideal-point world (see :func:`make_ideal_point_world`).

    Attributes:
        encoder: item id -> R^d embedding.
        seen_train, seen_test, unseen_train, unseen_test: comparisons (``unseen_train`` holds
            the largest shot count; take nested subsets with :func:`first_n_per_user`).
        w_seen, w_unseen: true simplex weights w*.
        kappa: Bradley-Terry slope.
        bayes_accuracy: expected accuracy of the true model (the ceiling).
        mean_user_accuracy: expected accuracy of the true model with every user at the mean w*
            (what a homogeneous model can reach at best, roughly).
        pref_points: f*(e) of every item, row j for item ``"i{j}"``. Shape: (n_items, d_true).
        prototypes: the true prototypes p*_k. Shape: (K*, d_true).
        seen_val: a validation split of the seen users (``None`` unless asked for), drawn from
            its own random stream so the other splits do not change with its size.
    """

    encoder: LookupEncoder
    seen_train: Comparisons
    seen_test: Comparisons
    unseen_train: Comparisons
    unseen_test: Comparisons
    w_seen: np.ndarray
    w_unseen: np.ndarray
    kappa: float
    bayes_accuracy: float
    mean_user_accuracy: float
    pref_points: np.ndarray
    prototypes: np.ndarray
    seen_val: Comparisons | None = None

    def true_weights(self, user_id: str) -> np.ndarray:
        """w* of a user id ("s3" for seen user 3, "n7" for unseen user 7). Shape: (K*,)."""
        table = {"s": self.w_seen, "n": self.w_unseen}.get(user_id[:1])
        if table is None or not user_id[1:].isdigit() or int(user_id[1:]) >= len(table):
            raise KeyError(f"unknown user id {user_id!r}")
        return table[int(user_id[1:])]

    def _items(self, ids: Sequence[str]) -> np.ndarray:
        return self.pref_points[[int(t[1:]) for t in ids]]

    def score_difference(self, weights: np.ndarray, ds: Comparisons) -> np.ndarray:
        """Delta = ||z_l - a||^2 - ||z_r - a||^2 with a = w P*, for every comparison of ``ds``.

        Delta > 0 means the right item is closer to the ideal point: P(right) = sigmoid(kappa Delta).

        Args:
            weights: one simplex point per comparison. Shape: (n, K*).
            ds: comparisons of this world.

        Returns:
            Delta. Shape: (n,).
        """
        zl, zr = self._items(ds.left), self._items(ds.right)
        a = np.asarray(weights, dtype=np.float64) @ self.prototypes  # (n, d_true): mixed after f*
        return ((zl - a) ** 2).sum(-1) - ((zr - a) ** 2).sum(-1)

    def true_model_accuracy(self, ds: Comparisons, weights: Mapping[str, np.ndarray] | None = None) -> float:
        """Accuracy of the true model (true f*, P*, kappa) with given weights (default: the true w*).

        Args:
            ds: comparisons of this world.
            weights: user id -> simplex weights; users not in it use their true w*.

        Returns:
            The share of comparisons where sign(Delta) matches the label.
        """
        table = weights or {}
        w = np.stack([np.asarray(table[u]) if u in table else self.true_weights(u) for u in ds.user_id])
        pred = (self.score_difference(w, ds) > 0).astype(int)
        return float((pred == np.asarray(ds.label)).mean())

    def fit_true_weights(self, ds: Comparisons, *, max_points: int = 50_000) -> dict[str, np.ndarray]:
        """The true-model few-shot oracle: fit only each user's w from their comparisons.

        With f*, P* and kappa known, Delta is affine in w, so the Bradley-Terry log-likelihood
        sum_j log sigmoid(kappa (2 y_j - 1) Delta_j(w)) is concave on the simplex. Its maximum is
        found on the finest simplex grid (step 1 / 60 for K* = 3) of at most ``max_points``
        points; ties go to the first grid point. No prior is used (maximum likelihood).

        Args:
            ds: the users' training comparisons.
            max_points: largest grid size.

        Returns:
            user id -> fitted simplex weights (K*,).
        """
        k = self.prototypes.shape[0]
        res = 60
        while res > 1 and math.comb(res + k - 1, k - 1) > max_points:
            res -= 1
        grid = simplex_grid(k, res)  # (g, K*)
        gp = grid @ self.prototypes  # (g, d_true): candidate ideal points
        ids = np.asarray(ds.user_id)
        sign = 2.0 * np.asarray(ds.label, dtype=np.float64) - 1.0
        zl, zr = self._items(ds.left), self._items(ds.right)
        # Delta_j(a) = ||z_l||^2 - ||z_r||^2 - 2 a . (z_l - z_r): one column per comparison.
        base = (zl**2).sum(-1) - (zr**2).sum(-1)
        delta = base[None, :] - 2.0 * gp @ (zl - zr).T  # (g, n)
        loglik = -np.logaddexp(0.0, -self.kappa * sign[None, :] * delta)  # (g, n)
        out = {}
        for u in dict.fromkeys(ds.user_id):
            out[u] = grid[int(np.argmax(loglik[:, ids == u].sum(1)))]
        return out


def _calibrate_kappa(delta: np.ndarray, target: float) -> float:
    """Bisection on kappa so that mean(max(p, 1 - p)) with p = sigmoid(kappa * delta) hits ``target``."""
    lo, hi = 1e-6, 1e6
    a = np.abs(delta)
    for _ in range(200):
        mid = np.sqrt(lo * hi)
        acc = np.mean(1.0 / (1.0 + np.exp(-np.clip(mid * a, -50, 50))))
        lo, hi = (mid, hi) if acc < target else (lo, mid)
    return float(np.sqrt(lo * hi))


def make_ideal_point_world(
    *,
    n_seen: int = 60,
    n_unseen: int = 40,
    n_items: int = 2000,
    d_item: int = 32,
    d_true: int = 8,
    k_true: int = 3,
    alpha: float = 0.3,
    train_per_user: int = 80,
    test_per_user: int = 20,
    unseen_train: int = 20,
    unseen_test: int = 50,
    bayes: float = 0.9,
    n_groups: int | None = None,
    proto_scale: float = 8.0,
    val_per_user: int = 0,
    seed: int = 0,
) -> IdealPointWorld:
    """Generate the numeric ideal-point world.

    Args:
        n_seen, n_unseen: users.
        n_items: item pool; items e ~ N(0, I_d).
        d_item: item dimension d.
        d_true: dimension of the hidden preference space.
        k_true: K* prototypes.
        alpha: Dirichlet concentration of w*.
        train_per_user, test_per_user: seen users' comparisons.
        unseen_train, unseen_test: unseen users' comparisons (train holds the largest shot count).
        bayes: target Bayes accuracy (sets kappa).
        n_groups: ``1`` gives the null world: every user has w* = e_1 (one shared ideal point).
        proto_scale: prototype distance from the item centre, in units of the items' spread.
        val_per_user: validation comparisons per seen user (``seen_val``; 0 = none), from a
            separate random stream.
        seed: seed of everything.

    Returns:
        The :class:`IdealPointWorld`.

    Example:
        >>> w = make_ideal_point_world(n_seen=4, n_unseen=2, n_items=50, train_per_user=5, seed=0)
        >>> len(w.seen_train), w.encoder.dim
        (20, 32)
    """
    if n_groups not in (None, 1):
        raise ValueError("n_groups must be None (Dirichlet mixtures) or 1 (null world)")
    rng = np.random.default_rng([seed, 101])
    x = rng.normal(size=(n_items, d_item))
    w1 = rng.normal(size=(d_item, d_item)) / np.sqrt(d_item)
    b1 = rng.normal(size=d_item) * 0.1
    w2 = rng.normal(size=(d_item, d_true)) / np.sqrt(d_item)
    z = np.tanh(x @ w1 + b1) @ w2  # (n_items, d_true): f*(e)
    q, _ = np.linalg.qr(rng.normal(size=(d_true, d_true)))
    qc = q[:k_true] - q[:k_true].mean(0) if k_true > 1 else q[:1]  # centred: no shared direction
    protos = z.mean(0) + proto_scale * z.std(0).mean() * qc  # (K*, d_true): separated prototypes

    def draw_w(n: int) -> np.ndarray:
        if n_groups == 1:
            return np.tile(np.eye(k_true)[0], (n, 1))
        return rng.dirichlet(np.full(k_true, alpha), size=n)

    w_seen, w_unseen = draw_w(n_seen), draw_w(n_unseen)

    def pairs(n: int, gen: np.random.Generator = rng) -> tuple[np.ndarray, np.ndarray]:
        left = gen.integers(0, n_items, size=n)
        right = (left + gen.integers(1, n_items, size=n)) % n_items  # never the same item
        return left, right

    def delta(w: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        a = w @ protos  # ideal point mixed after f*
        return ((z[left] - a) ** 2).sum(-1) - ((z[right] - a) ** 2).sum(-1)

    # Calibrate kappa on a fixed sample of seen users' pairs.
    cal_u = rng.integers(0, n_seen, size=4000)
    cl, cr = pairs(4000)
    d_cal = np.array([delta(w_seen[u], li, ri) for u, li, ri in zip(cal_u, cl, cr, strict=True)])
    kappa = _calibrate_kappa(d_cal, bayes)
    bayes_acc = float(np.mean(1.0 / (1.0 + np.exp(-np.clip(kappa * np.abs(d_cal), -50, 50)))))
    # Ceiling of a homogeneous model that uses the mean seen ideal point for everybody.
    w_mean = w_seen.mean(0)
    d_mean = np.array([delta(w_mean, li, ri) for li, ri in zip(cl, cr, strict=True)])
    p_cal = 1.0 / (1.0 + np.exp(-np.clip(kappa * d_cal, -50, 50)))
    homog_acc = float(np.mean(np.where(d_mean > 0, p_cal, 1.0 - p_cal)))

    def comparisons(w: np.ndarray, prefix: str, per_user: int, gen: np.random.Generator = rng) -> Comparisons:
        uid, left_ids, right_ids, labels = [], [], [], []
        for i in range(len(w)):
            left, right = pairs(per_user, gen)
            p_right = 1.0 / (1.0 + np.exp(-np.clip(kappa * delta(w[i], left, right), -50, 50)))
            y = (gen.random(per_user) < p_right).astype(int)
            uid += [f"{prefix}{i}"] * per_user
            left_ids += [f"i{j}" for j in left]
            right_ids += [f"i{j}" for j in right]
            labels += y.tolist()
        return Comparisons(uid, [""] * len(uid), left_ids, right_ids, labels)

    encoder = LookupEncoder({f"i{j}": x[j].astype(np.float32) for j in range(n_items)})
    seen_train = comparisons(w_seen, "s", train_per_user)
    seen_test = comparisons(w_seen, "s", test_per_user)
    unseen_train_ds = comparisons(w_unseen, "n", unseen_train)
    unseen_test_ds = comparisons(w_unseen, "n", unseen_test)
    seen_val = None
    if val_per_user > 0:
        seen_val = comparisons(w_seen, "s", val_per_user, np.random.default_rng([seed, 107]))
    return IdealPointWorld(
        encoder=encoder,
        seen_train=seen_train,
        seen_test=seen_test,
        unseen_train=unseen_train_ds,
        unseen_test=unseen_test_ds,
        seen_val=seen_val,
        w_seen=w_seen,
        w_unseen=w_unseen,
        kappa=kappa,
        bayes_accuracy=bayes_acc,
        mean_user_accuracy=homog_acc,
        pref_points=z,
        prototypes=protos,
    )


_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "de", "pu", "ga", "he", "zo", "bi", "fu", "ya")


@dataclass
class SummaryLengthWorld:
    """The semi-synthetic "summary length" world (see :func:`make_summary_length_world`).

    Attributes:
        seen_train, seen_test, unseen_train, unseen_test: comparisons (prompt = post).
        prefers_long: user id -> True if the user prefers the longer summary.
        short, long: the two summaries of every post (for the length probe).
        seen_val: a validation split of the seen users (``None`` unless asked for), drawn from
            its own random stream.
    """

    seen_train: Comparisons
    seen_test: Comparisons
    unseen_train: Comparisons
    unseen_test: Comparisons
    prefers_long: dict[str, bool]
    short: list[str] = field(default_factory=list)
    long: list[str] = field(default_factory=list)
    seen_val: Comparisons | None = None


def make_summary_length_world(
    *,
    n_posts: int = 1500,
    n_seen: int = 10,
    n_minority: int = 3,
    train_per_user: int = 100,
    test_per_user: int = 50,
    n_unseen: int = 20,
    unseen_train: int = 10,
    noise: float = 0.05,
    p_long: float = 0.7,
    val_per_user: int = 0,
    seed: int = 0,
) -> SummaryLengthWorld:
    """Generate posts with a short and a long summary; users prefer one length, with label noise.

    Args:
        n_posts: posts (each has one short and one long summary with different content).
        n_seen: seen users; the last ``n_minority`` prefer shorter summaries, the rest longer.
        n_minority: seen users who prefer shorter summaries.
        train_per_user, test_per_user: comparisons per seen user (test also for unseen users).
        n_unseen: unseen users, each preferring longer with probability ``p_long``.
        unseen_train: training comparisons per unseen user (the largest shot count).
        noise: label-flip probability.
        p_long: share of unseen users who prefer longer summaries.
        val_per_user: validation comparisons per seen user (``seen_val``; 0 = none), from a
            separate random stream.
        seed: seed of everything.

    Returns:
        The :class:`SummaryLengthWorld`.

    Example:
        >>> w = make_summary_length_world(n_posts=20, n_seen=4, n_minority=1, train_per_user=3, seed=0)
        >>> sum(w.prefers_long[f"s{i}"] for i in range(4))
        3
    """
    if not 0 <= n_minority <= n_seen:
        raise ValueError(f"n_minority must be in [0, n_seen], got {n_minority}")
    rng = np.random.default_rng([seed, 202])
    vocab = sorted({a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES})
    rng.shuffle(vocab)
    n_topics = 30
    topics = [vocab[i * 40 : (i + 1) * 40] for i in range(n_topics)]
    filler = vocab[n_topics * 40 : n_topics * 40 + 200]
    posts, short, long = [], [], []
    for _ in range(n_posts):
        t = topics[int(rng.integers(n_topics))]
        words = rng.choice(t, size=int(rng.integers(30, 60))).tolist()
        words += rng.choice(filler, size=int(rng.integers(5, 15))).tolist()
        rng.shuffle(words)
        posts.append("post: " + " ".join(words))
        short.append(" ".join(rng.choice(t, size=int(rng.integers(4, 9))).tolist()))
        lw = rng.choice(t, size=int(rng.integers(16, 30))).tolist() + rng.choice(filler, size=6).tolist()
        rng.shuffle(lw)
        long.append(" ".join(lw))
    prefers_long = {f"s{i}": i < n_seen - n_minority for i in range(n_seen)}
    prefers_long.update({f"n{i}": bool(rng.random() < p_long) for i in range(n_unseen)})

    def comparisons(ids: list[str], per_user: int, gen: np.random.Generator = rng) -> Comparisons:
        uid, prompt, left, right, labels = [], [], [], [], []
        for u in ids:
            for _ in range(per_user):
                p = int(gen.integers(n_posts))
                long_left = bool(gen.random() < 0.5)
                left.append(long[p] if long_left else short[p])
                right.append(short[p] if long_left else long[p])
                y = int(long_left != prefers_long[u])  # 1 when the preferred summary is on the right
                if gen.random() < noise:
                    y = 1 - y
                uid.append(u)
                prompt.append(posts[p])
                labels.append(y)
        return Comparisons(uid, prompt, left, right, labels)

    seen = [f"s{i}" for i in range(n_seen)]
    unseen = [f"n{i}" for i in range(n_unseen)]
    out = SummaryLengthWorld(
        seen_train=comparisons(seen, train_per_user),
        seen_test=comparisons(seen, test_per_user),
        unseen_train=comparisons(unseen, unseen_train),
        unseen_test=comparisons(unseen, test_per_user),
        prefers_long=prefers_long,
        short=short,
        long=long,
    )
    if val_per_user > 0:
        out.seen_val = comparisons(seen, val_per_user, np.random.default_rng([seed, 207]))
    return out


def length_probe_accuracy(encoder: object, world: SummaryLengthWorld, *, seed: int = 0) -> float:
    """Precheck: held-out accuracy of a linear probe telling long from short summaries.

    Args:
        encoder: an object with ``encode(texts)``.
        world: the summary-length world.
        seed: seed of the 50/50 split.

    Returns:
        Test accuracy of scikit-learn ``LogisticRegression`` on the embeddings.
    """
    from sklearn.linear_model import LogisticRegression

    texts = world.short + world.long
    y = np.array([0] * len(world.short) + [1] * len(world.long))
    x = encoder.encode(texts).detach().cpu().numpy()  # type: ignore[attr-defined]
    idx = np.random.default_rng([seed, 303]).permutation(len(y))
    half = len(y) // 2
    tr, te = idx[:half], idx[half:]
    clf = LogisticRegression(max_iter=2000).fit(x[tr], y[tr])
    return float(clf.score(x[te], y[te]))
