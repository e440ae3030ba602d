"""COMET diagnosis: do same-class inputs share more routing units than different-class ones?

Run as a script (never imported by the library)::

    python experiments/comet_mask_overlap.py --seed 10 --width 1024 --keep 0.1 0.5

COMET's argument is that routing by a fixed random projection acts like locality-sensitive
hashing: inputs that are alike share units. That helps classification only where "alike in the
input" means "alike in class". For the claim's plain digits and distorted digits, this prints the
mean cosine of the concatenated masks (the paper's overlap score; p_k is the chance level) over
random training pairs of the same and of different classes, next to the mean input cosine of the
same pairs. No training is involved.
"""

from __future__ import annotations

import argparse

import torch

from iclr25.methods.comet import COMETRouter, mask_cosine
from iclr25.methods.comet.claim import _FULL, _digits, _hard_digits


def main() -> None:
    """Parse the arguments and print one line per data set and keep fraction."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--keep", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--pairs", type=int, default=3000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name, data in (("digits", _digits(args.seed)), ("distorted digits", _hard_digits(_FULL, args.seed))):
        X, y = data[0], data[1]
        gen = torch.Generator().manual_seed(args.seed)
        i = torch.randint(0, len(X), (args.pairs,), generator=gen)
        j = torch.randint(0, len(X), (args.pairs,), generator=gen)
        same = (y[i] == y[j]).numpy()
        in_cos = torch.nn.functional.cosine_similarity(X[i], X[j]).numpy()
        for p in args.keep:
            router = COMETRouter(X.shape[1], (args.width,) * 3, p, seed=args.seed)
            with torch.no_grad():
                cos = mask_cosine(router(X[i]), router(X[j])).numpy()
            print(
                f"{name:16s} p_k={p}: mask cosine same class {cos[same].mean():.3f}, different class "
                f"{cos[~same].mean():.3f}; input cosine same {in_cos[same].mean():.3f}, "
                f"different {in_cos[~same].mean():.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
