"""Claim check of COMET: fixed random routing gives input-dependent overlapping experts that never
die, never move, and (with enough capacity) learn faster and generalise better than a dense net.

Three parts, each with its own verdict:

- experts overlap and never die: G1 mask geometry (Spearman of mask overlap against input
  similarity) and G2 utilisation (dead units over random nets on digits) gate; G3 (fixed experts,
  MLP and a tiny GPT-2) holds by construction and is reported only;
- learns faster: G7, the paper's own regime (plain SGD at lr 1e-4, batch 32, 100 epochs of
  digits), gates test accuracy at matched steps, and under Adam the first-epoch training-loss area
  gates on digits (G4) and on the cluster set (G6);
- generalises better at convergence: G6 trains COMET, dense and the control on a large synthetic
  cluster set whose validation split resolves the 0.005 bar, all under Adam with the same cosine
  learning-rate decay to zero, each run read at its best validation epoch, with the split's
  standard error and every arm's convergence as preconditions.

The negative control of every learning gate is COMET with its routing redrawn at every forward
pass; G1 also has Bernoulli masks and G2 a rank-1 V_1. Digits (G4: the sparse and MoE baselines,
dropout, Bernoulli masks) and distorted digits (G5: the width sweep 64-1024) are reported only:
their 288-row validation splits cannot resolve the bar. The FLOP and wall-clock ratios of one
training step at width 1000 are reported only.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import TypeVar, cast

import numpy as np
import torch

from iclr25._core.claims import (
    Budget,
    Claim,
    PaperRef,
    ProgressFn,
    RunResult,
    Series,
    diff,
    fails,
    no_progress,
    ratio,
    value,
)
from iclr25._core.convergence import CurveReading, converged, curve_series, read_curve
from iclr25._core.seeding import numpy_rng
from iclr25.methods.comet import (
    COMETMLP,
    BernoulliMaskMLP,
    ClaimConfig,
    COMETRouter,
    DenseMLP,
    MoEMLP,
    ResampledRoutingMLP,
    TopKMLP,
    comet_ffn_,
    evaluate,
    mask_cosine,
    smaller_widths,
    train_mlp,
)

__all__ = ["CLAIM", "run"]

_Data = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
#: train, validation (carved from the training rows) and test: X, y each
_Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------


def _digits(seed: int) -> _Data:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X / 16.0, y, test_size=0.2, random_state=seed, stratify=y)
    # per-pixel standardisation from the training split (the usual analogue of CIFAR normalisation)
    mean, std = Xtr.mean(0), Xtr.std(0)
    std[std == 0] = 1.0
    Xtr, Xte = (Xtr - mean) / std, (Xte - mean) / std
    f = torch.float32
    return (torch.tensor(Xtr, dtype=f), torch.tensor(ytr), torch.tensor(Xte, dtype=f), torch.tensor(yte))


def _clusters(cfg: ClaimConfig, seed: int) -> _Split:
    """About 40 Gaussian clusters in 20-d, labelled (10 classes) by a random tanh teacher.

    The label is the argmax of the teacher's 10 outputs; a draw whose two largest outputs differ
    by less than ``cluster_margin`` is rejected (redrawn), so every kept row has a label margin and
    the set can be learned to an accuracy at which a validation split of ``cluster_n_val`` rows
    resolves the 0.005 bar. Training, validation and test rows are independent draws from one
    generator; inputs are standardised with the training rows' mean and std.
    """
    rng = numpy_rng(seed, 2)
    d = 20
    n = cfg.cluster_n_train + cfg.cluster_n_val + cfg.cluster_n_test
    centers = rng.normal(0.0, 2.0, (cfg.cluster_k, d))
    # the teacher: a random one-hidden-layer tanh net (no label noise)
    w1 = rng.normal(0.0, cfg.cluster_teacher_scale / np.sqrt(d), (d, 64))
    w2 = rng.normal(0.0, 1.0 / 8.0, (64, 10))
    xs, ys, have = [], [], 0
    while have < n:  # rejection sampling in blocks of n draws (deterministic for a seed)
        X = centers[rng.integers(0, cfg.cluster_k, n)] + rng.normal(0.0, 1.0, (n, d))
        out = np.tanh(X @ w1) @ w2  # (n, 10)
        top2 = np.sort(out, axis=1)[:, -2:]  # (n, 2)
        keep = top2[:, 1] - top2[:, 0] >= cfg.cluster_margin
        xs.append(X[keep])
        ys.append(out[keep].argmax(1))
        have += int(keep.sum())
    X, y = np.concatenate(xs)[:n], np.concatenate(ys)[:n]
    a, b = cfg.cluster_n_train, cfg.cluster_n_train + cfg.cluster_n_val
    X = (X - X[:a].mean(0)) / X[:a].std(0)
    Xt, yt = torch.tensor(X, dtype=torch.float32), torch.tensor(y)
    return Xt[:a], yt[:a], Xt[a:b], yt[a:b], Xt[b:], yt[b:]


def _distort(images: np.ndarray, copies: int, cfg: ClaimConfig, gen: torch.Generator) -> torch.Tensor:
    """Distorted copies of 8 x 8 digit images: upsampled to ``hard_size`` squared, then a random
    rotation, zoom and shift each, then Gaussian pixel noise.

    Args:
        images: raw digit rows, shape (n, 64), values in [0, 16].
        copies: distorted copies of each image (consecutive rows).
        cfg: the distortion sizes (``hard_*`` fields).
        gen: the generator every random draw comes from.

    Returns:
        Shape (n * copies, hard_size ** 2), float32.
    """
    import math

    import torch.nn.functional as F

    s = cfg.hard_size
    x = torch.tensor(images, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0
    x = F.interpolate(x, size=(s, s), mode="bilinear", align_corners=False)  # (n, 1, s, s)
    x = x.repeat_interleave(copies, 0)  # (n * copies, 1, s, s)
    n = len(x)
    angle = (2 * torch.rand(n, generator=gen) - 1) * math.radians(cfg.hard_rotation)
    zoom = 1 + (2 * torch.rand(n, generator=gen) - 1) * cfg.hard_scale
    shift = (2 * torch.rand(n, 2, generator=gen) - 1) * cfg.hard_shift
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    # inverse map from output to input coordinates (affine_grid convention): rotate, zoom, shift
    theta = torch.stack(
        [torch.stack([cos, -sin, shift[:, 0]], 1), torch.stack([sin, cos, shift[:, 1]], 1)], 1
    )  # (n, 2, 3)
    grid = F.affine_grid(theta, [n, 1, s, s], align_corners=False)
    x = F.grid_sample(x, grid, align_corners=False, padding_mode="zeros")
    x = x + cfg.hard_noise * torch.randn(x.shape, generator=gen)
    return x.reshape(n, s * s)  # (n * copies, s * s)


def _hard_digits(cfg: ClaimConfig, seed: int) -> _Data:
    """A harder image set built from the packaged digits: every image distorted (rotation, zoom,
    shift, noise) at 16 x 16; train and test images come from disjoint original digits.

    No harder labelled image set ships with the installed packages (see the README), so this one
    is derived from ``load_digits``: one distorted copy of each training image and
    ``hard_test_copies`` of each test image, standardised per pixel on the training rows.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
    gen = torch.Generator().manual_seed(seed * 7919 + 5)
    a, b = _distort(Xtr, 1, cfg, gen), _distort(Xte, cfg.hard_test_copies, cfg, gen)
    mean, std = a.mean(0), a.std(0).clamp_min(1e-6)
    ya = torch.tensor(ytr)
    yb = torch.tensor(yte).repeat_interleave(cfg.hard_test_copies)
    return (a - mean) / std, ya, (b - mean) / std, yb


def _pairs(cfg: ClaimConfig, seed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Pairs of length-100 vectors with N(mu, 25) components, mu integer in [0, 100]; the second
    vector shares a random fraction of the first one's means, so similarity spans a range."""
    rng = numpy_rng(seed, 1)
    n, d = cfg.g1_pairs, cfg.g1_dim
    mu_a = rng.integers(0, 101, (n, d)).astype(float)
    share = rng.uniform(0.0, 1.0, (n, 1))
    mu_b = np.where(rng.uniform(size=(n, d)) < share, mu_a, rng.integers(0, 101, (n, d)))
    a = mu_a + 5.0 * rng.normal(size=(n, d))
    b = mu_b + 5.0 * rng.normal(size=(n, d))
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    return torch.tensor(a, dtype=torch.float32), torch.tensor(b, dtype=torch.float32), cos


_Tensors = TypeVar("_Tensors", _Data, _Split)


def _to(tensors: _Tensors, device: str) -> _Tensors:
    """The tensors of a data tuple moved to ``device`` (the same objects where they are already)."""
    return cast(_Tensors, tuple(t.to(device) for t in tensors))


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    r = spearmanr(x, y).statistic
    return float(r) if np.isfinite(r) else 0.0


# ---------------------------------------------------------------------------------------------
# G1 - G3
# ---------------------------------------------------------------------------------------------


def _g1(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]], series: dict[str, Series],
        device: str = "cpu") -> None:  # fmt: skip
    a, b, in_cos = _pairs(cfg, seed)
    a, b = a.to(device), b.to(device)
    widths = (cfg.g1_width,) * cfg.g1_layers
    comet = np.zeros(len(in_cos))
    for r in range(cfg.g1_routers):
        router = COMETRouter(cfg.g1_dim, widths, cfg.g1_p_keep, seed=seed * 1000 + r).to(device)
        comet += mask_cosine(router(a), router(b)).cpu().numpy() / cfg.g1_routers
    gen = torch.Generator().manual_seed(seed)  # input-free masks: drawn and scored on the CPU
    bern = np.zeros(len(in_cos))
    for _ in range(cfg.g1_routers):
        ma = [torch.rand(len(a), w, generator=gen) < cfg.g1_p_keep for w in widths]
        mb = [torch.rand(len(a), w, generator=gen) < cfg.g1_p_keep for w in widths]
        bern += mask_cosine(ma, mb).numpy() / cfg.g1_routers
    fresh = np.zeros(len(in_cos))
    for r in range(cfg.g1_routers):
        net = ResampledRoutingMLP(cfg.g1_dim, widths, 2, p_keep=cfg.g1_p_keep, seed=seed * 1000 + r)
        net = net.to(device)
        fresh += (
            mask_cosine(net(a, return_masks=True)[1], net(b, return_masks=True)[1]).cpu().numpy()
            / cfg.g1_routers
        )
    m["comet"]["g1_rho"] = _spearman(in_cos, comet)
    m["bernoulli"]["g1_rho"] = _spearman(in_cos, bern)
    m["bernoulli"]["g1_abs_rho"] = abs(m["bernoulli"]["g1_rho"])
    m["resampled"]["g1_rho"] = _spearman(in_cos, fresh)
    # Fig. 2b: similarity of backbone activations (last hidden layer) at p_k vs p_k = 1.
    acts = {}
    for arm, p in (("comet", cfg.g1_p_keep), ("dense", 1.0)):
        net = COMETMLP(cfg.g1_dim, widths, 2, p_keep=p, seed=seed).to(device)
        with torch.no_grad():
            ha, hb = net.forward_all(a / 100.0)[2][-1], net.forward_all(b / 100.0)[2][-1]
        acts[arm] = torch.nn.functional.cosine_similarity(ha, hb, dim=-1).cpu().numpy()
        m[arm]["g1_act_cos"] = float(acts[arm].mean())
    order = np.argsort(in_cos)
    series["mask_overlap"] = Series(
        title="Mask cosine vs input cosine (G1)", xlabel="input cosine similarity",
        ylabel="cosine of masks (or of last hidden activations)",
        x=[float(v) for v in in_cos[order]],
        lines={"COMET": [float(v) for v in comet[order]], "Bernoulli": [float(v) for v in bern[order]],
               "fresh V per call": [float(v) for v in fresh[order]],
               "backbone act. (p_k)": [float(v) for v in acts["comet"][order]],
               "backbone act. (p_k=1)": [float(v) for v in acts["dense"][order]]},
        kind="scatter",
    )  # fmt: skip


def _g2(cfg: ClaimConfig, seed: int, X: torch.Tensor, m: dict[str, dict[str, float]]) -> None:
    rng = numpy_rng(seed, 3)
    lo, hi = cfg.g2_width_range
    plo, phi = cfg.g2_p_range
    dead = total = dead_r1 = total_r1 = 0
    nets_with_dead = 0
    for t in range(cfg.g2_nets):
        w, p = int(rng.integers(lo, hi + 1)), float(rng.uniform(plo, phi))
        router = COMETRouter(X.shape[1], (w, w, w), p, seed=seed * 1000 + t).to(X.device)
        fired = [mk.any(0) for mk in router(X)]
        n_dead = sum(int((~f).sum()) for f in fired)
        dead, total, nets_with_dead = dead + n_dead, total + 3 * w, nets_with_dead + (n_dead > 0)
        # control: a rank-1 V_1 = u v^T sends every input along one direction
        v0 = router.weight_0
        u, v = v0[:, :1].clone(), v0[:1, :].clone()
        with torch.no_grad():
            router.weight_0.copy_(u @ v)
        fired = [mk.any(0) for mk in router(X)]
        dead_r1 += sum(int((~f).sum()) for f in fired)
        total_r1 += 3 * w
    m["comet"]["g2_dead_frac"] = dead / total
    m["comet"]["g2_nets_with_dead"] = nets_with_dead / cfg.g2_nets
    m["rank1"]["g2_dead_frac"] = dead_r1 / total_r1


def _same_rows(before: list[torch.Tensor], after: list[torch.Tensor]) -> float:
    """Fraction of probe rows whose masks are identical in every layer."""
    same = torch.ones(before[0].shape[:-1], dtype=torch.bool, device=before[0].device)
    for x, y in zip(before, after, strict=True):
        same &= (x == y).all(-1)
    return float(same.double().mean())


def _g3(
    cfg: ClaimConfig, seed: int, data: _Data, m: dict[str, dict[str, float]], device: str = "cpu"
) -> None:
    Xtr, ytr, Xte, _ = data
    probe = Xte[: cfg.g3_probe]
    hidden = (cfg.g3_width,) * 3
    nets = {
        "comet": COMETMLP(Xtr.shape[1], hidden, 10, p_keep=cfg.p_keep, seed=seed),
        "topk": TopKMLP(Xtr.shape[1], hidden, 10, p_keep=cfg.p_keep, seed=seed),
        "layerwise": COMETMLP(Xtr.shape[1], hidden, 10, p_keep=cfg.p_keep, seed=seed, routing="layerwise"),
    }
    n = cfg.g3_steps * 32 if cfg.g3_steps else len(Xtr)
    for arm, net in nets.items():
        net.to(device)
        with torch.no_grad():
            before = net(probe, return_masks=True)[1]
        train_mlp(net, Xtr[:n], ytr[:n], epochs=1, batch_size=32, lr=cfg.g4_lr, seed=seed, device=device)
        with torch.no_grad():
            after = net(probe, return_masks=True)[1]
        m[arm]["g3_same"] = _same_rows(before, after)
    _g3_lm(cfg, seed, m, device)


def _g3_lm(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]], device: str = "cpu") -> None:
    """Tiny GPT-2 on a synthetic Markov corpus: frozen-embedding masks stay, layer-input ones move."""
    from iclr25.common.tiny_lm import build_tiny_lm

    rng = numpy_rng(seed, 4)
    vocab = 40
    trans = rng.dirichlet(np.full(vocab - 4, 0.2), size=vocab - 4)
    seqs = np.zeros((64, 16), dtype=np.int64)
    seqs[:, 0] = rng.integers(0, vocab - 4, 64)
    for t in range(1, 16):
        seqs[:, t] = [rng.choice(vocab - 4, p=trans[s]) for s in seqs[:, t - 1]]
    ids = torch.tensor(seqs + 4).to(device)
    probe = ids[:8]
    for arm, kw in (
        ("comet", {}),
        ("layerwise", {"source": "layer_input"}),
        ("live", {"embedding_mode": "live"}),
    ):
        lm = build_tiny_lm("gpt2", vocab_size=vocab, n_layer=2, n_head=2, d_model=32, seed=seed).to(device)
        handle = comet_ffn_(lm, cfg.p_keep, seed=seed, **kw)
        with torch.no_grad():
            lm(probe)
        before = [x.clone() for x in handle.last_masks]
        opt = torch.optim.Adam(lm.parameters(), lr=1e-2)
        gen = torch.Generator().manual_seed(seed)
        lm.train()
        for _ in range(cfg.g3_lm_steps):
            pick = torch.randint(0, len(ids), (16,), generator=gen).to(ids.device)  # drawn on the CPU
            batch = ids[pick]
            # next-token cross-entropy, computed here rather than through ``labels=`` (the stock
            # GPT2LMHeadModel has no registered loss type and logs a warning when asked for one)
            logits = lm(batch).logits[:, :-1]  # (16, 15, vocab)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        lm.eval()
        with torch.no_grad():
            lm(probe)
        arm_name = "live_emb" if arm == "live" else arm
        m[arm_name]["gpt2_same"] = _same_rows(before, handle.last_masks)


# ---------------------------------------------------------------------------------------------
# G4 and step cost
# ---------------------------------------------------------------------------------------------


@dataclass
class _Fit:
    """One training run of G4: per-epoch validation and test accuracy and the epoch-1 losses."""

    val: list[float]
    test: list[float]
    epoch1_loss: list[float]

    @property
    def best(self) -> int:
        """Index of the epoch with the highest validation accuracy (the earliest on ties)."""
        return int(np.argmax(self.val))

    @property
    def auc1(self) -> float:
        """Mean training loss over epoch 1: the area under the first-epoch loss curve."""
        return float(np.mean(self.epoch1_loss))


def _split_val(data: _Data, frac: float, seed: int) -> _Split:
    """Carve a stratified validation split out of the training rows (the test rows are untouched)."""
    from sklearn.model_selection import train_test_split

    Xtr, ytr, Xte, yte = data
    idx = np.arange(len(Xtr))
    labels = ytr.cpu().numpy()
    counts = np.bincount(labels)
    strata = labels if counts[counts > 0].min() >= 2 else None  # stratify where every class can split
    tr, va = train_test_split(idx, test_size=frac, random_state=seed, stratify=strata)
    tr, va = torch.as_tensor(np.sort(tr)).to(Xtr.device), torch.as_tensor(np.sort(va)).to(Xtr.device)
    return Xtr[tr], ytr[tr], Xtr[va], ytr[va], Xte, yte


def _fit(net: torch.nn.Module, data: _Split, cfg: ClaimConfig, seed: int, device: str = "cpu") -> _Fit:
    Xtr, ytr, Xva, yva, Xte, yte = data
    log = train_mlp(net, Xtr, ytr, epochs=cfg.g4_epochs, batch_size=cfg.g4_batch, lr=cfg.g4_lr,
                    lr_schedule=cfg.lr_schedule, seed=seed, device=device,
                    eval_sets={"val": (Xva, yva), "test": (Xte, yte)})  # fmt: skip
    return _Fit(log.eval_metrics["val"], log.eval_metrics["test"], log.step_loss[: log.steps_per_epoch])


def _build(arm: str, d_in: int, n_tr: int, hidden: tuple[int, ...], p: float, s: int) -> torch.nn.Module:
    """One G4 arm with backbone seed ``s`` (10 classes)."""
    if arm == "comet":
        return COMETMLP(d_in, hidden, 10, p_keep=p, seed=s)
    if arm == "dense":
        return DenseMLP(d_in, hidden, 10, seed=s)
    if arm == "bernoulli":
        return BernoulliMaskMLP(d_in, hidden, 10, n_examples=n_tr, p_bernoulli=p, seed=s, mask_seed=s)
    if arm == "smaller":
        return DenseMLP(d_in, smaller_widths(hidden, p), 10, seed=s)
    if arm == "dropout":
        return DenseMLP(d_in, hidden, 10, seed=s, dropout=1.0 - p)
    if arm == "topk":
        return TopKMLP(d_in, hidden, 10, p_keep=p, seed=s)
    if arm == "moe":
        return MoEMLP(d_in, hidden, 10, p_keep=p, seed=s)
    if arm == "resampled":
        return ResampledRoutingMLP(d_in, hidden, 10, p_keep=p, seed=s)
    return COMETMLP(d_in, hidden, 10, p_keep=p, seed=s, routing="layerwise")


#: arms trained on ``g4_seeds`` paired backbones on digits
_G4_ARMS = ("comet", "dense", "resampled", "bernoulli", "smaller", "topk", "dropout", "moe")
#: arms of G6 (the cluster set, at convergence) and of G7 (the paper's SGD regime on digits)
_G6_ARMS = ("comet", "dense", "resampled")
_G7_ARMS = ("comet", "dense", "resampled")
_EARLY_EPOCH = 5  # the epoch the earlier check gated at, kept as a report-only row


def _val_se(fits: dict[str, list[_Fit]], n_val: int) -> float:
    """The larger binomial standard error, ``sqrt(p (1 - p) / n_val)``, of the validation accuracy
    that picks each run's best epoch, over the arms given (``p``: their mean best-epoch value)."""
    ps = [float(np.mean([f.val[f.best] for f in arm_fits])) for arm_fits in fits.values()]
    return max(float(np.sqrt(p * (1.0 - p) / n_val)) for p in ps)


def _n_fits(cfg: ClaimConfig) -> int:
    """Training runs of G4-G7 (for the progress display)."""
    n = (len(_G4_ARMS) + 2) * cfg.g4_seeds + (2 * len(cfg.sweep_widths) + 1) * cfg.sweep_seeds
    return n + len(_G6_ARMS) * cfg.cluster_seeds + len(_G7_ARMS) * cfg.sgd_seeds


def _summarise(fits: list[_Fit]) -> dict[str, float]:
    """Mean over paired backbones: best-epoch test accuracy, epoch-1 loss area and best epoch."""
    return {
        "acc": float(np.mean([f.test[f.best] for f in fits])),
        "auc1": float(np.mean([f.auc1 for f in fits])),
        "best_epoch": float(np.mean([f.best + 1 for f in fits])),
    }


def _g4(cfg: ClaimConfig, seed: int, data: _Split, m: dict[str, dict[str, float]],
        series: dict[str, Series], progress: ProgressFn = no_progress, done: int = 0,
        device: str = "cpu") -> int:  # fmt: skip
    """G4 on digits: every arm trains ``g4_epochs`` epochs of Adam (peak rate ``g4_lr`` on the
    ``lr_schedule``) on the same backbones and batches; accuracy is read at each run's best
    validation epoch, learning speed from the epoch-1 training losses.

    Returns:
        The number of training runs done so far (for the progress display).
    """
    p, w = cfg.p_keep, cfg.g4_width
    total = _n_fits(cfg)
    early = min(_EARLY_EPOCH, cfg.g4_epochs) - 1
    progress("G4 learning fits", done, total)
    for name in ("digits",):
        d_in, n_tr = data[0].shape[1], len(data[0])
        curves: dict[str, list[float]] = {}
        losses: dict[str, list[float]] = {}
        gated: dict[str, list[_Fit]] = {}
        runs = [(arm, w, cfg.g4_seeds) for arm in _G4_ARMS]
        runs += [(arm, cfg.g4_narrow, cfg.g4_seeds) for arm in ("comet", "dense")]
        for arm, width, n_seeds in runs:
            # paired: backbone seed 1000 * seed + i gives the same init and batch order to every arm
            fits = []
            for i in range(n_seeds):
                s = seed * 1000 + i
                fits.append(_fit(_build(arm, d_in, n_tr, (width,) * 3, p, s), data, cfg, s, device))
                done += 1
                progress("G4 learning fits", done, total)
            if not fits:
                continue
            summary = _summarise(fits)
            if width != w:
                m[arm][f"{name}_acc_narrow"] = summary["acc"]
                continue
            if arm in ("comet", "dense"):
                gated[arm] = fits
            m[arm][f"{name}_acc"] = summary["acc"]
            m[arm][f"{name}_auc1"] = summary["auc1"]
            m[arm][f"{name}_best_epoch"] = summary["best_epoch"]
            m[arm][f"{name}_acc_last"] = float(np.mean([f.test[-1] for f in fits]))
            # at epoch 5, or the last epoch of a shorter (smoke) run
            m[arm][f"{name}_acc_ep{_EARLY_EPOCH}"] = float(np.mean([f.test[early] for f in fits]))
            curves[arm] = [float(v) for v in np.mean([f.test for f in fits], axis=0)]
            if arm in ("comet", "dense", "resampled", "bernoulli", "smaller"):
                losses[arm] = [float(v) for v in np.mean([f.epoch1_loss for f in fits], axis=0)]
        wide = m["comet"][f"{name}_acc"] - m["dense"][f"{name}_acc"]
        narrow = m["comet"][f"{name}_acc_narrow"] - m["dense"][f"{name}_acc_narrow"]
        m["comet"][f"{name}_capacity_flip"] = wide - narrow
        m["comet"][f"{name}_val_se"] = _val_se(gated, len(data[3]))
        series[f"learning_{name}"] = Series(
            title=f"Test accuracy per epoch, {name} (width {w}, p_k = {p})", xlabel="epoch",
            ylabel="test accuracy (gated at each run's best validation epoch)",
            x=[float(e + 1) for e in range(cfg.g4_epochs)], lines=curves,
        )  # fmt: skip
        series[f"epoch1_loss_{name}"] = Series(
            title=f"Training loss in epoch 1, {name} (width {w}, p_k = {p})", xlabel="optimiser step",
            ylabel="training loss (mean of backbones)",
            x=[float(t + 1) for t in range(len(losses["comet"]))], lines=losses,
        )  # fmt: skip
    return done


def _g5(cfg: ClaimConfig, seed: int, raw: _Data, m: dict[str, dict[str, float]], series: dict[str, Series],
        progress: ProgressFn = no_progress, done: int = 0, device: str = "cpu") -> int:  # fmt: skip
    """G5: the width sweep (the paper's main figure) on distorted digits. COMET and dense train at
    every width of ``sweep_widths`` on the same backbones; the redrawn-routing control trains at
    the widest. Accuracy is read at each run's best validation epoch, as in G4."""
    p, total = cfg.p_keep, _n_fits(cfg)
    data = _to(_split_val(raw, cfg.g4_val_frac, seed), device)
    d_in, n_tr = data[0].shape[1], len(data[0])
    widest = cfg.sweep_widths[-1]
    acc: dict[str, list[float]] = {"comet": [], "dense": []}
    curves: dict[str, list[float]] = {}
    gated: dict[str, list[_Fit]] = {}
    runs = [(arm, width) for width in cfg.sweep_widths for arm in ("comet", "dense")]
    for arm, width in [*runs, ("resampled", widest)]:
        fits = []
        for i in range(cfg.sweep_seeds):
            s = seed * 1000 + 500 + i  # backbones of their own, paired across arms and widths
            fits.append(_fit(_build(arm, d_in, n_tr, (width,) * 3, p, s), data, cfg, s, device))
            done += 1
            progress("G5 width sweep fits", done, total)
        summary = _summarise(fits)
        m[arm][f"hard_acc_w{width}"] = summary["acc"]
        if arm in acc:
            acc[arm].append(summary["acc"])
        if width == widest:
            if arm in acc:
                gated[arm] = fits
            m[arm]["hard_acc"] = summary["acc"]
            m[arm]["hard_auc1"] = summary["auc1"]
            m[arm]["hard_best_epoch"] = summary["best_epoch"]
            curves[arm] = [float(v) for v in np.mean([f.test for f in fits], axis=0)]
    delta = [c - d for c, d in zip(acc["comet"], acc["dense"], strict=True)]
    m["comet"]["hard_width_trend"] = delta[-1] - delta[0]
    m["comet"]["hard_val_se"] = _val_se(gated, len(data[3]))
    log_widths = [float(np.log2(v)) for v in cfg.sweep_widths]  # 6 = 64, 8 = 256, 10 = 1024
    series["width_sweep"] = Series(
        title=f"COMET - dense vs width, distorted digits (p_k = {p})",
        xlabel="log2 of hidden width N (3 layers)", ylabel="test acc. difference (best val. epochs)",
        x=log_widths, lines={"COMET - dense": delta, "no difference": [0.0] * len(delta)},
    )  # fmt: skip
    series["width_sweep_acc"] = Series(
        title=f"Test accuracy vs width, distorted digits (p_k = {p})",
        xlabel="log2 of hidden width N (3 layers)", ylabel="test accuracy (best val. epoch)",
        x=log_widths, lines={"COMET": acc["comet"], "dense": acc["dense"]},
    )  # fmt: skip
    series["learning_hard"] = Series(
        title=f"Test accuracy per epoch, distorted digits (N = {widest})", xlabel="epoch",
        ylabel="test accuracy (gated at each run's best validation epoch)",
        x=[float(e + 1) for e in range(cfg.g4_epochs)], lines=curves,
    )  # fmt: skip
    return done


def _best_so_far(values: list[float]) -> list[float]:
    """The running maximum of a validation curve: the accuracy a best-epoch reading would give
    if training stopped at each epoch."""
    return [float(v) for v in np.maximum.accumulate(np.asarray(values, dtype=float))]


def _g6(cfg: ClaimConfig, seed: int, data: _Split, m: dict[str, dict[str, float]], series: dict[str, Series],
        progress: ProgressFn = no_progress, done: int = 0, device: str = "cpu") -> int:  # fmt: skip
    """G6, generalisation at convergence: COMET, dense and the redrawn-routing control train
    ``cluster_epochs`` epochs of Adam on the large cluster set (same backbones, same batches),
    every arm on the same ``lr_schedule`` (by default a cosine decay from ``g4_lr`` to zero over
    the run, so that the validation curves settle instead of swinging at a constant rate). Each
    run is read at its best epoch on the validation split; its test accuracy is scored at every
    new best validation epoch and at the last epoch only. Convergence: the best-so-far
    validation accuracy has stopped rising (its plateau gap over the last fifth of epochs).

    Returns:
        The number of training runs done so far (for the progress display).
    """
    Xtr, ytr, Xva, yva, Xte, yte = data
    p, w, total = cfg.p_keep, cfg.g4_width, _n_fits(cfg)
    epochs = [float(e + 1) for e in range(cfg.cluster_epochs)]
    readings: dict[str, CurveReading] = {}
    losses: dict[str, list[float]] = {}
    best_val: dict[str, float] = {}
    for arm in _G6_ARMS:
        keys = ("acc", "acc_last", "auc1", "best", "epoch", "gap", "raw")
        rows: dict[str, list[float]] = {k: [] for k in keys}
        val_mean = np.zeros(cfg.cluster_epochs)
        loss_mean = np.zeros(math.ceil(len(Xtr) / cfg.g4_batch))
        for i in range(cfg.cluster_seeds):
            s = seed * 1000 + 300 + i  # backbones of their own, paired across the arms
            net = _build(arm, Xtr.shape[1], len(Xtr), (w,) * 3, p, s)
            val: list[float] = []
            at_best = {"val": -1.0, "test": math.nan, "last": math.nan}

            def epoch_end(epoch: int, model: torch.nn.Module, val: list[float] = val,
                          at_best: dict[str, float] = at_best) -> None:  # fmt: skip
                acc = evaluate(model, Xva, yva, "classification")
                val.append(acc)
                if acc > at_best["val"]:  # a new best validation epoch: score the test set there
                    at_best["val"], at_best["test"] = acc, evaluate(model, Xte, yte, "classification")
                if epoch == cfg.cluster_epochs - 1:
                    at_best["last"] = evaluate(model, Xte, yte, "classification")

            log = train_mlp(net, Xtr, ytr, epochs=cfg.cluster_epochs, batch_size=cfg.g4_batch, lr=cfg.g4_lr,
                            lr_schedule=cfg.lr_schedule, seed=s, epoch_end=epoch_end,
                            device=device)  # fmt: skip
            reading = read_curve(epochs, _best_so_far(val))
            rows["acc"].append(at_best["test"])
            rows["acc_last"].append(at_best["last"])
            rows["auc1"].append(float(np.mean(log.step_loss[: log.steps_per_epoch])))
            rows["best"].append(reading.best)
            rows["epoch"].append(reading.best_step)
            rows["gap"].append(reading.plateau_gap)
            rows["raw"].append(read_curve(epochs, val).plateau_gap)
            val_mean += np.asarray(val) / cfg.cluster_seeds
            loss_mean += np.asarray(log.step_loss[: log.steps_per_epoch]) / cfg.cluster_seeds
            done += 1
            progress("G6 cluster-set fits", done, total)
        mean = {k: float(np.mean(v)) for k, v in rows.items()}
        m[arm]["clusters_acc"] = mean["acc"]
        m[arm]["clusters_acc_last"] = mean["acc_last"]
        m[arm]["clusters_auc1"] = mean["auc1"]
        m[arm]["clusters_best_epoch"] = mean["epoch"]
        m[arm]["clusters_val_best"] = mean["best"]
        # the largest gap over the paired backbones: every run must have converged
        m[arm]["clusters_plateau_gap"] = float(np.max(rows["gap"]))
        m[arm]["clusters_val_gap"] = float(np.max(rows["raw"]))
        best_val[arm] = mean["best"]
        readings[arm] = read_curve(epochs, [float(v) for v in val_mean])
        losses[arm] = [float(v) for v in loss_mean]
    # binomial standard error of the validation accuracy that picks the best epoch (the larger of
    # COMET's and dense's): the selection noise the 0.005 bar must exceed
    m["comet"]["clusters_val_se"] = max(
        float(np.sqrt(best_val[a] * (1.0 - best_val[a]) / len(yva))) for a in ("comet", "dense")
    )
    series["learning_clusters"] = curve_series(
        f"Validation accuracy per epoch, cluster set ({len(Xtr):,} training rows, width {w}, p_k = {p})",
        readings, xlabel="epoch", ylabel="validation accuracy (gated: test at each run's best epoch)",
    )  # fmt: skip
    series["epoch1_loss_clusters"] = Series(
        title=f"Training loss in epoch 1, cluster set (width {w}, p_k = {p}, Adam)", xlabel="optimiser step",
        ylabel="training loss", x=[float(t + 1) for t in range(len(losses["comet"]))], lines=losses,
    )  # fmt: skip
    return done


def _g7(cfg: ClaimConfig, seed: int, data: _Split, m: dict[str, dict[str, float]], series: dict[str, Series],
        progress: ProgressFn = no_progress, done: int = 0, device: str = "cpu") -> int:  # fmt: skip
    """G7, learning speed in the paper's regime: plain SGD at ``sgd_lr``, batch ``g4_batch``,
    ``sgd_epochs`` epochs on digits (the official script's optimiser, rate, batch and epochs), for
    COMET, dense and the redrawn-routing control on the same backbones and batches as G4. Every
    arm is read at the same step (equal compute): test accuracy after the last step.

    Returns:
        The number of training runs done so far (for the progress display).
    """
    Xtr, ytr, _, _, Xte, yte = data
    p, w, total = cfg.p_keep, cfg.g4_width, _n_fits(cfg)
    curves: dict[str, list[float]] = {}
    steps = 0
    for arm in _G7_ARMS:
        tests, losses = [], []
        for i in range(cfg.sgd_seeds):
            s = seed * 1000 + i  # G4's backbones
            net = _build(arm, Xtr.shape[1], len(Xtr), (w,) * 3, p, s)
            # the official script's regime exactly: plain SGD at a constant rate (no schedule)
            log = train_mlp(net, Xtr, ytr, epochs=cfg.sgd_epochs, batch_size=cfg.g4_batch, lr=cfg.sgd_lr,
                            optimizer="sgd", lr_schedule="constant", seed=s, device=device,
                            eval_sets={"test": (Xte, yte)})  # fmt: skip
            tests.append(log.eval_metrics["test"])
            losses.append(float(np.mean(log.step_loss[-log.steps_per_epoch :])))
            steps = log.steps_per_epoch
            done += 1
            progress("G7 paper-regime fits", done, total)
        curve = np.mean(tests, axis=0)  # (sgd_epochs,)
        m[arm]["sgd_acc"] = float(curve[-1])
        m[arm]["sgd_acc_mean"] = float(curve.mean())
        m[arm]["sgd_acc_half"] = float(curve[len(curve) // 2 - 1]) if len(curve) > 1 else float(curve[-1])
        m[arm]["sgd_loss_last"] = float(np.mean(losses))
        curves[arm] = [float(v) for v in curve]
    m["comet"]["sgd_steps"] = float(steps * cfg.sgd_epochs)
    series["sgd_digits"] = Series(
        title=f"The paper's regime: SGD lr {cfg.sgd_lr:g}, batch {cfg.g4_batch}, digits (N = {w}, p_k = {p})",
        xlabel="optimiser step", ylabel="test accuracy (gated after the last step)",
        x=[float(steps * (e + 1)) for e in range(cfg.sgd_epochs)], lines=curves,
    )  # fmt: skip
    return done


def _step_cost(cfg: ClaimConfig, seed: int, m: dict[str, dict[str, float]], device: str = "cpu") -> None:
    """One training step at width N = cost_width on a batch of 32 digits-sized inputs: matmul FLOPs
    (deterministic, torch's FlopCounterMode) and wall-clock seconds (alternating, median).

    Seconds are taken twice: with ``torch.optim.Adam``'s default (foreach) kernels, ``step_s``,
    and with its fused kernel, ``fused_step_s``. COMET's masked units get exactly zero
    gradients, and the foreach kernel's ``sqrt`` is slower on zeros on CPU, which adds optimiser
    time unrelated to routing; the fused kernel avoids that. The nets and the batch live on
    ``device``. A GPU runs kernels asynchronously, so there each timed step starts and ends with
    ``torch.cuda.synchronize`` and counts the kernels it queued; on the CPU the timed region is
    the step alone, as before.
    """
    from torch.utils.flop_counter import FlopCounterMode

    gen = torch.Generator().manual_seed(seed)
    X, y = torch.rand(32, 64, generator=gen), torch.randint(0, 10, (32,), generator=gen)
    X, y = X.to(device), y.to(device)  # drawn on the CPU, then moved
    hidden = (cfg.cost_width,) * 3
    runs = {}
    for prefix, fused in (("", False), ("fused_", True)):
        for arm, net in (
            ("comet", COMETMLP(64, hidden, 10, p_keep=cfg.p_keep, seed=seed).to(device)),
            ("dense", DenseMLP(64, hidden, 10, seed=seed).to(device)),
        ):
            runs[prefix, arm] = (net, torch.optim.Adam(net.parameters(), lr=1e-3, fused=fused))

    def step(key: tuple[str, str]) -> None:
        net, opt = runs[key]
        loss = torch.nn.functional.cross_entropy(net(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for arm in ("comet", "dense"):
        counter = FlopCounterMode(display=False)
        with counter:
            step(("", arm))
        m[arm]["step_gflops"] = counter.get_total_flops() / 1e9
    times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
    cuda = torch.device(device).type == "cuda"
    for _ in range(cfg.cost_steps):
        for key in runs:
            if cuda:
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            step(key)
            if cuda:
                torch.cuda.synchronize(device)
            times[key].append(time.perf_counter() - t0)
    for (prefix, arm), ts in times.items():
        m[arm][f"{prefix}step_s"] = float(np.median(ts))


def run(
    config: ClaimConfig, *, seed: int, device: str = "cpu", progress: ProgressFn = no_progress
) -> RunResult:
    """Run G1-G7 and the step-cost comparison for one seed.

    The harness runs it inside :func:`~iclr25._core.seeding.claim_scope` (one thread, seeded global
    RNGs, which the dropout arm and the tiny GPT-2's dropout draw from). Every network (the
    routers, the MLPs of every arm, the tiny GPT-2) trains and is evaluated on ``device``, with
    its data moved there. The data sets, the batch orders, the redrawn routing matrices and every
    other seeded draw come from CPU generators and are moved after the draw, so the draws are the
    same on every device; the statistics (Spearman, best epochs, standard errors) are computed
    on the CPU.

    Args:
        config: the sizes of the check.
        seed: the claim seed; G4's and G7's paired backbone seeds are ``1000 * seed + i``, G5's
            ``1000 * seed + 500 + i`` and G6's ``1000 * seed + 300 + i``.
        device: where the networks run ("cpu", "cuda", ...). On a GPU the dropout masks (of the
            dropout arm, from the device's global RNG) and floating-point sums differ from a CPU
            run, so the numbers are close to, not equal to, the CPU's; the step-cost timings are
            then the GPU's (each step synchronised before the clock is read).
        progress: called with the stage and its fits done, from the long loops.

    Returns:
        The per-arm metrics, the mask-overlap, learning-curve, epoch-1 loss, width-sweep and
        paper-regime series, and notes that give the two parts of the learning claim ("learns
        faster", "generalises better at convergence") separately for this seed.
    """
    arms = ("comet", "dense", "smaller", "dropout", "topk", "moe", "bernoulli", "layerwise", "resampled",
            "rank1", "live_emb")  # fmt: skip
    m: dict[str, dict[str, float]] = {a: {} for a in arms}
    series: dict[str, Series] = {}
    t0 = time.perf_counter()
    digits = _digits(seed)
    stamps = [time.perf_counter()]
    progress("G1 mask geometry", 0, 1)
    _g1(config, seed, m, series, device)
    stamps.append(time.perf_counter())
    progress("G2 utilisation", 0, 1)
    _g2(config, seed, torch.cat([digits[0], digits[2]]).to(device), m)
    stamps.append(time.perf_counter())
    progress("G3 fixed experts", 0, 1)
    _g3(config, seed, _to(digits, device), m, device)
    stamps.append(time.perf_counter())
    digits_split = _to(_split_val(digits, config.g4_val_frac, seed), device)
    done = _g4(config, seed, digits_split, m, series, progress, device=device)
    stamps.append(time.perf_counter())
    done = _g5(config, seed, _hard_digits(config, seed), m, series, progress, done, device)
    stamps.append(time.perf_counter())
    done = _g6(config, seed, _to(_clusters(config, seed), device), m, series, progress, done, device)
    stamps.append(time.perf_counter())
    _g7(config, seed, digits_split, m, series, progress, done, device)
    stamps.append(time.perf_counter())
    progress("step cost", 0, 1)
    _step_cost(config, seed, m, device)
    stamps.append(time.perf_counter())
    stages = ("g1", "g2", "g3", "g4", "g5", "g6", "g7", "cost")
    for name, t_a, t_b in zip(stages, stamps[:-1], stamps[1:], strict=True):
        m["comet"][f"{name}_s"] = t_b - t_a
    m["comet"]["total_s"] = time.perf_counter() - t0
    notes = [
        f"G2: {100 * m['comet']['g2_dead_frac']:.4f}% of units never fired over {config.g2_nets} random nets "
        f"({100 * m['comet']['g2_nets_with_dead']:.0f}% of nets had a dead unit)",
        f"capacity effect (digits, best epochs): Delta_wide - Delta_narrow = "
        f"{m['comet']['digits_capacity_flip']:+.4f}",
        "width sweep (distorted digits, best epochs): COMET - dense = "
        + ", ".join(
            f"{w}: {m['comet'][f'hard_acc_w{w}'] - m['dense'][f'hard_acc_w{w}']:+.4f}"
            for w in config.sweep_widths
        )
        + f"; redrawn routing - dense at {config.sweep_widths[-1]}: "
        f"{m['resampled']['hard_acc'] - m['dense']['hard_acc']:+.4f}",
    ]
    c, d, r = m["comet"], m["dense"], m["resampled"]
    notes.append(
        f"digits (width {config.g4_width}, Adam): learns faster? epoch-1 loss COMET/dense = "
        f"{c['digits_auc1'] / d['digits_auc1']:.3f}; best-epoch test acc COMET - dense = "
        f"{c['digits_acc'] - d['digits_acc']:+.4f} (epoch {_EARLY_EPOCH}: "
        f"{c[f'digits_acc_ep{_EARLY_EPOCH}'] - d[f'digits_acc_ep{_EARLY_EPOCH}']:+.4f}; best epochs COMET "
        f"{c['digits_best_epoch']:.1f}, dense {d['digits_best_epoch']:.1f})"
    )
    notes.append(
        f"hard (width {config.sweep_widths[-1]}): epoch-1 loss COMET/dense = "
        f"{c['hard_auc1'] / d['hard_auc1']:.3f}; "
        f"best-epoch test acc COMET - dense = {c['hard_acc'] - d['hard_acc']:+.4f} (best epochs COMET "
        f"{c['hard_best_epoch']:.1f}, dense {d['hard_best_epoch']:.1f})"
    )
    notes.append(
        f"paper's regime (SGD lr {config.sgd_lr:g}, {c['sgd_steps']:.0f} steps on digits): test acc COMET "
        f"{c['sgd_acc']:.4f}, dense {d['sgd_acc']:.4f}, redrawn routing {r['sgd_acc']:.4f}"
    )
    notes.append(
        f"cluster set at convergence ({config.cluster_n_train:,} training rows, Adam, {config.lr_schedule} "
        f"lr): best-epoch test acc COMET "
        f"{c['clusters_acc']:.4f}, dense {d['clusters_acc']:.4f}, redrawn routing {r['clusters_acc']:.4f}; "
        f"best epochs {c['clusters_best_epoch']:.1f} / {d['clusters_best_epoch']:.1f} / "
        f"{r['clusters_best_epoch']:.1f}; best-so-far plateau gaps {c['clusters_plateau_gap']:.4f} / "
        f"{d['clusters_plateau_gap']:.4f} / {r['clusters_plateau_gap']:.4f}; validation SE "
        f"{c['clusters_val_se']:.5f}"
    )
    return RunResult(metrics=m, series=series, notes=notes)


_FULL = ClaimConfig()
#: expected wall time of one full seed on one thread of an otherwise idle core
_FULL_S = 300.0
_SMOKE = ClaimConfig(
    g1_pairs=50, g1_routers=2, g2_nets=3, g3_width=64, g3_steps=20, g3_probe=64, g3_lm_steps=5,
    g4_width=128, g4_narrow=32, g4_epochs=2, g4_seeds=1, cluster_n_train=400, cluster_n_val=400,
    cluster_n_test=400, cluster_epochs=3, sgd_epochs=2, cost_steps=3, sweep_widths=(16, 32, 64),
    hard_test_copies=1,
)  # fmt: skip

#: the claim's sub-claims, each judged on its own rows beside the overall verdict
_PARTS = {
    "experts overlap and never die": ("g1_", "ctrl_g1_", "g2_", "ctrl_g2_", "g3_", "ctrl_g3_"),
    "learns faster": ("sgd_", "ctrl_sgd_", "speed_", "ctrl_speed_"),
    "generalises better at convergence": (
        "val_se_", "converged_", "general_", "ctrl_general_", "vs_", "early_", "last_", "capacity_",
        "width_",
    ),
}  # fmt: skip


def _part_of(name: str) -> str:
    """The sub-claim a criterion belongs to, from its name ("" for the step-cost rows)."""
    return next((part for part, prefixes in _PARTS.items() if name.startswith(prefixes)), "")


#: the largest rise of a run's best-so-far validation accuracy over its last fifth of epochs that
#: counts as converged: half the 0.005 accuracy bar, fixed before any run
_CONVERGE_EPS = 0.0025

_CRITERIA = (
    value(
        "comet.g1_rho",
        ">=",
        0.7,
        name="g1_overlap_rho",
        paper="Fig. 2: overlap rises with similarity",
        falsifier="ctrl_g1_fresh_v",
        explain="The more alike two inputs are, the more hidden units their masks share: the rank "
        "correlation of input similarity and mask overlap is at least 0.7.",
    ),
    fails(
        value(
            "bernoulli.g1_rho",
            ">=",
            0.7,
            name="ctrl_g1_bernoulli",
            explain="Random Bernoulli masks, which ignore the input, do not show that correlation.",
        )
    ),
    fails(
        value(
            "resampled.g1_rho",
            ">=",
            0.7,
            name="ctrl_g1_fresh_v",
            explain="A router that draws a new random projection at every call does not show it either.",
        )
    ),
    value(
        "bernoulli.g1_abs_rho",
        "<=",
        0.1,
        name="g1_bernoulli_abs_rho",
        gating=False,
        explain="Reported only: the overlap of random masks is unrelated to input similarity.",
    ),
    value(
        "comet.g2_dead_frac",
        "<",
        0.001,
        name="g2_dead_units",
        paper="7.6e-4 % of units (1,000 nets)",
        falsifier="ctrl_g2_rank1",
        explain="Fewer than 0.1 % of hidden units never fire on digits across 20 random routers: no "
        "expert dies.",
    ),
    fails(
        value(
            "rank1.g2_dead_frac",
            "<",
            0.001,
            name="ctrl_g2_rank1",
            explain="A degenerate rank-1 first routing matrix leaves many units dead.",
        )
    ),
    value(
        "comet.g3_same",
        ">=",
        1.0,
        name="g3_fixed_experts",
        paper="experts fixed by construction",
        gating=False,
        explain="Reported only (true by construction): COMET's masks on a probe batch are unchanged "
        "by an epoch of training.",
    ),
    fails(
        value(
            "topk.g3_same",
            ">=",
            1.0,
            name="ctrl_g3_topk",
            gating=False,
            explain="Reported only: Top-k masks, which follow the trained weights, move in training.",
        )
    ),
    value(
        "comet.gpt2_same",
        ">=",
        1.0,
        name="g3_gpt2_frozen_fixed",
        gating=False,
        explain="Reported only (true by construction): in a tiny GPT-2 routed from a frozen copy of "
        "its embedding, the masks are unchanged by training.",
    ),
    fails(
        value(
            "layerwise.gpt2_same",
            ">=",
            1.0,
            name="ctrl_g3_gpt2_layer_input",
            gating=False,
            explain="Reported only: masks read from each FFN's trained input move in training.",
        )
    ),
    # -- "learns faster" (a): the paper's regime, plain SGD at lr 1e-4, read at matched steps --
    diff(
        "comet.sgd_acc",
        "dense.sgd_acc",
        ">=",
        0.005,
        name="sgd_digits",
        paper="Figs. 3-5: faster learning (run_models.py: SGD, lr 1e-4, batch 32, 100 epochs)",
        falsifier="ctrl_sgd_resampled",
        explain="Learns faster in the paper's regime: after the same number of plain-SGD steps (lr "
        "1e-4, batch 32, 100 epochs of digits), COMET's test accuracy is at least 0.5 points above "
        "the same-width dense network's (same backbone, same batches).",
    ),
    fails(
        diff(
            "resampled.sgd_acc",
            "dense.sgd_acc",
            ">=",
            0.005,
            name="ctrl_sgd_resampled",
            explain="COMET with its routing redrawn at every step does not beat dense at matched "
            "steps in that regime.",
        )
    ),
    diff(
        "comet.sgd_acc_mean",
        "dense.sgd_acc_mean",
        ">=",
        0.005,
        name="sgd_digits_mean",
        gating=False,
        explain="Reported only: the same rule on the test accuracy averaged over the 100 epoch "
        "checkpoints (the area under the learning curve).",
    ),
    # -- "learns faster" (b): Adam, the first-epoch training-loss area ---------------------
    ratio(
        "comet.digits_auc1",
        "dense.digits_auc1",
        "<=",
        0.97,
        name="speed_digits",
        paper="Figs. 3-5: faster learning",
        falsifier="ctrl_speed_resampled_digits",
        explain="Learns faster under Adam: COMET's mean training loss over the first epoch on digits "
        "is at most 97 % of the same-width dense network's (same backbones, same batches).",
    ),
    ratio(
        "comet.clusters_auc1",
        "dense.clusters_auc1",
        "<=",
        0.97,
        name="speed_clusters",
        paper="Figs. 3-5: faster learning",
        falsifier="ctrl_speed_resampled_clusters",
        explain="Learns faster under Adam: the same first-epoch loss rule on the cluster set.",
    ),
    ratio(
        "comet.digits_auc1",
        "smaller.digits_auc1",
        "<",
        1.0,
        name="speed_vs_smaller",
        falsifier="ctrl_speed_resampled_vs_smaller",
        explain="Learns faster: COMET's first-epoch loss on digits is below that of a dense network of "
        "width p_k N, which has as many active units.",
    ),
    fails(
        ratio(
            "resampled.digits_auc1",
            "dense.digits_auc1",
            "<=",
            0.97,
            name="ctrl_speed_resampled_digits",
            explain="With its routing redrawn at every pass, COMET does not learn faster than "
            "dense in the first epoch on digits.",
        )
    ),
    fails(
        ratio(
            "resampled.clusters_auc1",
            "dense.clusters_auc1",
            "<=",
            0.97,
            name="ctrl_speed_resampled_clusters",
            explain="Nor on the cluster set.",
        )
    ),
    fails(
        ratio(
            "resampled.digits_auc1",
            "smaller.digits_auc1",
            "<",
            1.0,
            name="ctrl_speed_resampled_vs_smaller",
            explain="The redrawn-routing variant does not learn faster than the smaller dense network.",
        )
    ),
    ratio(
        "comet.digits_auc1",
        "bernoulli.digits_auc1",
        "<",
        1.0,
        name="speed_vs_bernoulli",
        gating=False,
        explain="Reported only: COMET's first-epoch loss on digits is below that of fixed random "
        "per-example masks (which, seen once each in epoch 1, are input-independent masks).",
    ),
    # -- "generalises better at convergence": the large cluster set (G6) ---------------------
    value(
        "comet.clusters_val_se",
        "<=",
        0.005 / 4,
        name="val_se_clusters",
        precondition=True,
        explain="Precondition: the validation split that picks each run's best epoch on the cluster "
        "set resolves the 0.005 bar: the binomial standard error of its accuracy (COMET's or dense's, "
        "the larger) is at most a quarter of the bar.",
    ),
    *(
        converged(
            arm,
            _CONVERGE_EPS,
            metric="clusters_plateau_gap",
            name=f"converged_{arm}_clusters",
            explain=f"Precondition: the {label} has converged on the cluster set: its best-so-far "
            "validation accuracy rose by at most 0.0025 (half the bar) over the last fifth of its "
            "epochs, so a longer run would not change its best-epoch reading by as much as the bar.",
        )
        for arm, label in (
            ("comet", "COMET arm"),
            ("dense", "dense arm"),
            ("resampled", "redrawn-routing control"),
        )
    ),
    diff(
        "comet.clusters_acc",
        "dense.clusters_acc",
        ">=",
        0.005,
        name="general_clusters",
        paper="Figs. 3-5: COMET above dense at large width",
        falsifier="ctrl_general_resampled_clusters",
        explain="Generalises better at convergence: on the cluster set (width 512), COMET's test "
        "accuracy at its best validation epoch is at least 0.5 points above the dense network's at "
        "its own best epoch (same backbone, same batches).",
    ),
    fails(
        diff(
            "resampled.clusters_acc",
            "dense.clusters_acc",
            ">=",
            0.005,
            name="ctrl_general_resampled_clusters",
            explain="COMET with its routing redrawn at every forward pass does not beat dense on the "
            "cluster set at its best epoch.",
        )
    ),
    diff(
        "comet.clusters_acc_last",
        "dense.clusters_acc_last",
        ">=",
        0.005,
        name="last_clusters",
        gating=False,
        explain="Reported only: the accuracy rule read at the last epoch on the cluster set.",
    ),
    # -- reported only: digits (G4) and distorted digits (G5), whose validation splits (288 rows)
    # cannot resolve the 0.005 bar --------------------------------------------------------------
    *(
        value(
            f"comet.{name}_val_se",
            "<=",
            0.005 / 4,
            name=f"val_se_{name}",
            gating=False,
            explain=f"Reported only: the standard error of the {label} validation split (at the best "
            "validation accuracy, COMET's or dense's, the larger) against a quarter of the 0.005 bar. "
            "It misses it, so the accuracy rows on this set are reported, not gated.",
        )
        for name, label in (("digits", "digits"), ("hard", "distorted-digits"))
    ),
    diff(
        "comet.digits_acc",
        "dense.digits_acc",
        ">=",
        0.005,
        name="general_digits",
        gating=False,
        paper="Figs. 3-5: COMET above dense at large width",
        explain="Reported only: at width 512 on digits (Adam, 20 epochs), COMET's test accuracy at its "
        "best validation epoch against the dense network's at its own (mean over the paired backbones).",
    ),
    fails(
        diff(
            "resampled.digits_acc",
            "dense.digits_acc",
            ">=",
            0.005,
            name="ctrl_general_resampled_digits",
            gating=False,
            explain="Reported only: the redrawn-routing variant against dense on digits.",
        )
    ),
    fails(
        diff(
            "bernoulli.digits_acc",
            "dense.digits_acc",
            ">=",
            0.005,
            name="ctrl_general_bernoulli_digits",
            gating=False,
            explain="Reported only: fixed random masks per training example (off at test) against "
            "dense on digits.",
        )
    ),
    diff(
        "comet.digits_acc_ep5",
        "dense.digits_acc_ep5",
        ">=",
        0.005,
        name="early_digits_ep5",
        gating=False,
        explain="Reported only: the same accuracy rule read at epoch 5, where an earlier version of "
        "this check gated (an early-stopping artefact: the gap closes by convergence).",
    ),
    diff(
        "comet.digits_acc_last",
        "dense.digits_acc_last",
        ">=",
        0.005,
        name="last_digits",
        gating=False,
        explain="Reported only: the accuracy rule read at the last (20th) epoch on digits.",
    ),
    value(
        "comet.digits_capacity_flip",
        ">",
        0.0,
        name="capacity_flip_digits",
        gating=False,
        paper="dense wins at small width",
        explain="Reported only: COMET's best-epoch accuracy edge over dense on digits is larger at "
        "width 512 than at width 64.",
    ),
    *(
        diff(
            "comet.digits_acc",
            f"{arm}.digits_acc",
            ">=",
            0.005,
            name=f"vs_{arm}_digits",
            gating=False,
            paper="Figs. 3-5: COMET above the sparse and MoE baselines",
            explain=f"Reported only: at width 512 on digits, COMET's best-epoch test accuracy against "
            f"the {label}'s (mean over the paired backbones).",
        )
        for arm, label in (("topk", "Top-k baseline"), ("moe", "top-1 MoE"), ("dropout", "dropout net"))
    ),
    diff(
        "comet.hard_acc",
        "dense.hard_acc",
        ">=",
        0.005,
        name="general_hard_wide",
        gating=False,
        paper="Figs. 3-5: COMET above dense at large width (N = 1000 on CIFAR-10)",
        explain="Reported only: at the widest width of the sweep (1024) on distorted 16 x 16 digits, "
        "COMET's test accuracy at its best validation epoch against the dense network's.",
    ),
    fails(
        diff(
            "resampled.hard_acc",
            "dense.hard_acc",
            ">=",
            0.005,
            name="ctrl_general_resampled_hard",
            gating=False,
            explain="Reported only: the redrawn-routing variant against dense there.",
        )
    ),
    value(
        "comet.hard_width_trend",
        ">",
        0.0,
        name="width_trend_hard",
        gating=False,
        paper="Figs. 3-5: the benefit grows with width",
        explain="Reported only: COMET's best-epoch accuracy edge over dense on distorted digits is "
        "larger at the widest width of the sweep than at the narrowest (64). Any masking costs a "
        "narrow net more than a wide one, so a broken router may show the same trend.",
    ),
    ratio(
        "comet.hard_auc1",
        "dense.hard_auc1",
        "<=",
        0.97,
        name="speed_hard_wide",
        gating=False,
        explain="Reported only: the first-epoch loss rule on distorted digits at width 1024.",
    ),
    ratio(
        "comet.step_gflops",
        "dense.step_gflops",
        "<=",
        1.5,
        name="step_flops_ratio",
        gating=False,
        paper="one extra matmul per layer",
        explain="Reported only (analytic): a COMET training step costs at most 1.5 times the matmul "
        "FLOPs of a dense step at width 1000.",
    ),
    ratio(
        "comet.step_s",
        "dense.step_s",
        "<=",
        1.5,
        name="step_time_ratio",
        gating=False,
        explain="Reported only: a COMET step takes at most 1.5 times a dense step's wall-clock "
        "(default Adam).",
    ),
    ratio(
        "comet.fused_step_s",
        "dense.fused_step_s",
        "<=",
        1.5,
        name="fused_step_time_ratio",
        gating=False,
        explain="Reported only: the same wall-clock ratio with Adam's fused CPU kernel.",
    ),
)

CLAIM = Claim(
    name="comet",
    paper=PaperRef(
        title=(
            "More Experts Than Galaxies: Conditionally-Overlapping Experts With Biologically-Inspired "
            "Fixed Routing"
        ),
        authors="Sagi Shaier, Francisco Pereira, Katharina von der Wense, Lawrence E. Hunter, Matt Jones",
        arxiv="2410.08003",
        code="Shaier/COMET",
    ),
    statement=(
        "Fixed random-projection routing with k-winner-take-all gives every input its own sparse, "
        "overlapping expert: similar inputs share units, no unit dies and experts never change; with enough "
        "capacity the masked network learns faster per update and generalises better than the same-width "
        "dense network and the sparse / mixture-of-experts baselines."
    ),
    arms={
        "comet": "COMET: masks from a fixed random routing chain on x_0 (3 hidden layers, softplus)",
        "dense": "standard dense MLP of the same width (same init, same batches)",
        "smaller": "dense MLP of width p_k N",
        "dropout": "dense MLP with dropout 1 - p_k",
        "topk": "Top-k baseline m_l = C_k(a_l) (masks follow the trained weights)",
        "moe": "top-1 MoE, floor(1/p_k) experts of width p_k N, trained Switch gate",
        "bernoulli": "control: one fixed random mask per training example (keep p_k), unmasked at test",
        "layerwise": "layer-wise routing c_l = V_l x_{l-1}; in GPT-2 masks from the FFN input",
        "resampled": "control: COMET with a fresh V at every forward pass (G1, and trained in G4-G7)",
        "rank1": "control: COMET with a rank-1 V_1",
        "live_emb": "GPT-2 with masks from the live (trained) embedding (report only)",
    },
    criteria=tuple(dataclasses.replace(c, part=_part_of(c.name)) for c in _CRITERIA),
    budgets={
        "smoke": Budget("smoke", _SMOKE, seeds=1, seconds=20.0, report_only=True),
        "full": Budget("full", _FULL, seeds=3, seconds=_FULL_S),
    },
    run_fn=run,
    headline="general_clusters",
    figure="learning_clusters",
    deviations=(
        "CPU scale: digits (1,797 x 64) and a synthetic 40-cluster set replace CIFAR-10 and SARCOS.",
        "The paper's regime (plain SGD, lr 1e-4, batch 32, 100 epochs: run_models.py) runs on digits at "
        "width 512 for one backbone a claim seed: 100 epochs of 1,149 rows are 3,600 steps, against the "
        "paper's 156,250 on CIFAR-10 (100 epochs of 50,000 rows); every arm is read after the same step.",
        "Generalisation is gated on the cluster set alone: 8,000 training, 32,000 validation and 8,000 "
        "test rows (independent draws), width 512, Adam at a peak lr of 1e-3 with a cosine decay to zero "
        "over the run (every arm alike), batch 32, 20 epochs, one backbone a claim seed, each run read at "
        "its best validation epoch. The teacher's first-layer scale (0.5) "
        "and a label margin (draws whose two largest teacher outputs differ by less than 0.25 are "
        "redrawn) were fixed from dense-only probes, so that the set can be learned to an accuracy at "
        "which the validation split resolves the 0.005 bar; no COMET run on the set was seen before.",
        "Every Adam run (G4-G6) uses that cosine decay; the paper's rate is constant, and the SGD regime "
        "(G7) keeps it constant, as the official script does.",
        "Digits (Adam, 20 epochs, 2 paired backbones a seed: COMET, dense, the smaller net, dropout, "
        "Top-k, the top-1 MoE, Bernoulli masks and the control) and the width sweep on distorted 16 x 16 "
        "digits (widths 64, 256, 1024; the paper: 100-3000) are reported only: their 288-row validation "
        "splits have a standard error near 0.01, twice the bar, so a best-epoch difference of half a "
        "point there could come from which epoch the noise picked.",
        "Distorted digits: each digit upsampled to 16 x 16, rotated up to 20 degrees, zoomed up to 15 %, "
        "shifted up to 15 % of the half-width and given pixel noise of std 0.3, since no harder labelled "
        "image set ships with the installed packages and CIFAR-10 is not available offline.",
        "Validation splits: 20 % of the training rows on digits and distorted digits (stratified); fresh "
        "draws on the cluster set. The paper plots test curves; the test set picks nothing here.",
        "G1 pairs share a random fraction of their component means, so input similarity spans a range; "
        "200 pairs, 4 x 256 routers, p_k = 0.2, 5 routers (the paper: 500 pairs, 10 x 512, 10 nets).",
        "G2 runs 20 random nets on digits instead of 1,000 on CIFAR-10.",
        "Learning speed under Adam is the mean training loss over epoch 1 (the area under the "
        "first-epoch loss curve); in the paper's regime it is test accuracy at matched steps.",
        "Step cost: matmul FLOPs from torch's FlopCounterMode and wall-clock, both reported only (the "
        "FLOP ratio follows from the architecture).",
        "Digits are standardised per pixel on the training split (the analogue of CIFAR normalisation).",
        "Not run here: widths beyond 1024, CIFAR-10, example-tied dropout and the L1 baseline; the "
        "SARCOS regression; transformer training curves (GPT-2 is used only for the fixed-expert check).",
    ),
    unchecked=(
        "the paper's step count: the SGD regime runs 3,600 steps on digits, not 156,250 on CIFAR-10",
        "the report-only digits and distorted-digits rows are read at best validation epochs of 20 "
        "without a convergence check",
        "whether a longer cosine schedule would give a higher best-epoch reading on the cluster set: a "
        "rate decayed to zero flattens every curve at its end, so the convergence precondition shows "
        "that each reading settled, not that the 20-epoch budget is enough",
    ),
)
