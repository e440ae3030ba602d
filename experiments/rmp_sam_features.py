"""Where RMP-SAM's thing-class information is lost at the full budget: backbone or decoder.

Trains the claim's joint model (800 co-training steps, the full budget's schedule, seed 0) in
three variants of the backbone:

- ``scratch``: random init, as in the claim;
- ``pretrained``: the conv net first trained to name the shape of single-object 64 px images
  (a stand-in for ImageNet pre-training; 4,000 images of another split, ``--pre-steps`` AdamW
  steps of batch 64), then co-trained at the claim's settings;
- ``frozen``: the same pre-trained conv net, frozen during co-training.

For each: the thing-class accuracy of the Hungarian-matched queries and PQ on the 60 test scenes,
and a linear probe (scikit-learn logistic regression) of the thing's shape from the neck output F
pooled over the ground-truth mask (mean) and from the backbone's stride-8 map pooled the same
way, fitted on the training scenes' things and scored on the test scenes' things. A probe well
above the matched queries' accuracy says the features carry the shape and the decoder's class
path has not learnt to read it yet.

Usage: ``python experiments/rmp_sam_features.py --variants scratch pretrained frozen``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import numpy as np
import torch
import torch.nn.functional as F
from rmp_sam_diagnosis import thing_accuracy
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig
from iclr25.methods.rmp_sam import RMPSAM, ClaimConfig, co_train, evaluate_panoptic, from_shapes_world


def pretrain_backbone(model: RMPSAM, seed: int, steps: int) -> float:
    """Shape classification of single-object images; returns held-out accuracy."""
    world = ShapesWorld(WorldConfig(image_size=64, single_object_scale=1.0), seed=seed)
    X, y = world.classification_arrays(4000, split="pretrain", label_scheme="shape")
    x = torch.from_numpy(X).permute(0, 3, 1, 2).float() / 255
    x = (x - model.pixel_mean) / model.pixel_std
    t = torch.from_numpy(y)
    bb = model.backbone
    head = torch.nn.Linear(bb.channels[-1], len(world.config.shapes))
    opt = torch.optim.AdamW([*bb.parameters(), *head.parameters()], lr=1e-3, weight_decay=0.05)
    gen = torch.Generator().manual_seed(seed)
    bb.train()
    for _ in range(steps):
        idx = torch.randint(0, 3600, (64,), generator=gen)
        loss = F.cross_entropy(head(bb(x[idx])[-1].mean((2, 3))), t[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    bb.eval()
    with torch.no_grad():
        return float((head(bb(x[3600:])[-1].mean((2, 3))).argmax(-1) == t[3600:]).float().mean())


@torch.no_grad()
def pooled(model: RMPSAM, data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mask-mean of F and of the stride-8 backbone map over each thing's ground truth, and its shape."""
    model.eval()
    x = (data.images - model.pixel_mean) / model.pixel_std
    feats = model.backbone(x)
    neck = model.neck(feats)
    f_rows, b_rows, labels = [], [], []
    for i, t in enumerate(data.targets):
        for lab, mask in zip(t["labels"][t["isthing"]], t["masks"][t["isthing"]], strict=True):
            m = mask[None, None].float()
            for rows, fmap in ((f_rows, neck[i]), (b_rows, feats[1][i])):
                w = F.adaptive_avg_pool2d(m, fmap.shape[-2:])[0, 0]
                rows.append(((fmap * w).sum((1, 2)) / w.sum().clamp_min(1e-6)).numpy())
            labels.append(int(lab))
    return np.stack(f_rows), np.stack(b_rows), np.array(labels)


def probe(train: tuple, test: tuple, k: int) -> float:
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    clf.fit(train[k], train[2])
    return float(clf.score(test[k], test[2]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="+", default=["scratch", "pretrained", "frozen"])
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--pre-steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="rmp_sam_features.json")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = ClaimConfig(steps=args.steps, ablations=False)
    world = ShapesWorld(WorldConfig(image_size=cfg.image_size, n_objects=cfg.n_objects), seed=args.seed)
    train = from_shapes_world(world, cfg.n_train_scenes, cfg.n_train_videos, split="train", num_frames=4)
    test = from_shapes_world(world, cfg.n_test_scenes, cfg.n_test_videos, split="test", num_frames=4)
    report = {}
    for variant in args.variants:
        t0 = time.perf_counter()
        torch.manual_seed(args.seed * 100 + 1)  # the claim's initial weights
        model = RMPSAM(cfg.model)
        row: dict[str, float] = {}
        if variant != "scratch":
            row["pretrain_acc"] = pretrain_backbone(model, args.seed, args.pre_steps)
        if variant == "frozen":
            for p in model.backbone.parameters():
                p.requires_grad_(False)
        co_train(
            model,
            train,
            train=dataclasses.replace(cfg.train, steps=args.steps),
            loss=cfg.loss,
            seed=args.seed,
        )
        model.eval()
        tr, te = pooled(model, train), pooled(model, test)
        row |= {
            "thing_acc": thing_accuracy(model, test),
            "pq": evaluate_panoptic(model, test)["pq"],
            "probe_neck": probe(tr, te, 0),
            "probe_backbone_s8": probe(tr, te, 1),
            "seconds": time.perf_counter() - t0,
        }
        report[variant] = row
        print(variant, json.dumps(row), flush=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
