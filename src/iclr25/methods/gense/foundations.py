"""The shipped GenSE foundations: the codec the paper takes as pretrained (SimCodec).

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3.2: SimCodec is trained once, before and apart
from the two language models, and frozen. Here :func:`pretrain_codec` is its recipe
(``iclr25 pretrain gense codec``): the two-stage reorganisation of :func:`~.train.load_or_train_codecs`
(stage 1: two group quantisers; usage ranking; stage 2: the top-N x top-K product book) run for
many more steps than a claim can afford, resumable, and scored on the claim's held-out voices.

Quality bars recorded in ``training.json`` (the claim re-measures them as preconditions):

- ``copy_per <= 0.35``: clean speech through the codec keeps its phones;
- ``ceiling_stoi_gain >= 0.03``: clean speech through the codec is more intelligible (STOI) than
  the noisy input at the test SNRs, so a token-domain enhancer has room to show a gain.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import torch

from iclr25._core.pretrained import RecipeRun, artefact_dir, require_artefact
from iclr25.methods.gense.codec import SimCodec, train_codec
from iclr25.methods.gense.config import CodecConfig, CodecRecipe, TokenizerConfig

__all__ = ["CODEC_BARS", "CODEC_DIR", "codec_quality", "load_codec", "pretrain_codec", "save_codec"]

CODEC_DIR = artefact_dir("gense", "codec")
#: the bars the shipped codec must reach (``training.json`` records each value and whether it does)
CODEC_BARS = {"copy_per": ("<=", 0.35), "ceiling_stoi_gain": (">=", 0.03)}


def save_codec(codec: SimCodec, directory: str | os.PathLike[str]) -> None:
    """Write ``config.json`` and ``model.safetensors`` of a single-quantiser codec."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    conf = {"codec": dataclasses.asdict(codec.cfg), "codebook_size": codec.codebook_size}
    (d / "config.json").write_text(json.dumps(conf, indent=1) + "\n")
    tensors = {k: v.detach().clone().contiguous() for k, v in codec.state_dict().items()}
    save_file(tensors, str(d / "model.safetensors"))


def load_codec(directory: str | os.PathLike[str] = CODEC_DIR) -> SimCodec:
    """The shipped codec (or one :func:`pretrain_codec` wrote to ``directory``), eval mode.

    Raises:
        ArtefactMissingError: the folder lacks ``config.json``, ``model.safetensors`` or
            ``training.json`` (the message names the command that trains it).
    """
    from safetensors.torch import load_file

    d = require_artefact(directory, method="gense", name="codec")
    conf = json.loads((d / "config.json").read_text())
    cfg = CodecConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in conf["codec"].items()})
    codec = SimCodec(cfg, n_groups=1, codebook_size=conf["codebook_size"])
    codec.load_state_dict(load_file(str(d / "model.safetensors")))
    return codec.eval()


def codec_quality(
    codec: SimCodec,
    recipe: CodecRecipe = CodecRecipe(),
    *,
    judge: tuple[torch.nn.Module, list[str]] | None = None,
) -> dict[str, float]:
    """Copy-synthesis quality on the claim's held-out voices, against the noisy input.

    Clean test clips (the claim's seed-0 test set) go through the codec; the noisy input is
    those clips mixed at ``recipe.eval_snrs`` as the claim's seed 0 mixes them. PER is read by
    the claim's independently trained phone recogniser.

    Returns:
        ``copy_stoi``, ``copy_per``, ``noisy_stoi``, ``noisy_per``, ``clean_per``,
        ``ceiling_stoi_gain`` (copy - noisy STOI) and ``ceiling_per_ratio`` (copy / noisy PER).
    """
    from iclr25.methods.gense.data import make_mixtures, make_speech_set
    from iclr25.methods.gense.metrics import phone_error_rate, stoi
    from iclr25.methods.gense.semantic import ctc_greedy_decode
    from iclr25.methods.gense.train import load_or_train_recognizer

    dc = recipe.data
    test = make_speech_set(dc, dc.test_voices, recipe.n_eval, seed=1)
    babble = make_speech_set(dc, dc.train_voices, 12, seed=2).wavs
    if judge is None:
        train = make_speech_set(dc, dc.train_voices, recipe.n_train, seed=0)
        judge = load_or_train_recognizer(train, TokenizerConfig(), seed=1)
    model, vocab = judge
    rng = np.random.default_rng([0, 2])  # the claim's seed-0 test mixtures
    noisy, _, _ = make_mixtures(test.wavs, dc.train_noises, recipe.eval_snrs, rng, babble)
    with torch.no_grad():
        copy = codec.decode(codec.encode(torch.from_numpy(test.wavs)[:, None]))[:, 0].numpy()

    def score(est: np.ndarray) -> tuple[float, float]:
        with torch.no_grad():
            hyps = ctc_greedy_decode(model(torch.from_numpy(est.astype(np.float32))), vocab)
        s = float(np.mean([stoi(c, e) for c, e in zip(test.wavs, est, strict=True)]))
        return s, phone_error_rate(test.phones, hyps)

    (cs, cp), (ns, np_), (_, clp) = score(copy), score(noisy), score(test.wavs)
    return {
        "copy_stoi": cs,
        "copy_per": cp,
        "noisy_stoi": ns,
        "noisy_per": np_,
        "clean_per": clp,
        "ceiling_stoi_gain": cs - ns,
        "ceiling_per_ratio": cp / max(np_, 1e-9),
    }


def pretrain_codec(
    out: str | os.PathLike[str],
    *,
    progress=lambda stage, done, total: None,
    max_steps: int | None = None,
    recipe: CodecRecipe | None = None,
) -> list[float]:
    """Recipe of the shipped codec: :class:`~iclr25.methods.gense.config.CodecRecipe`.

    Stage 1 trains the two-group codec for ``stage1_steps``; its codes are ranked by usage on the
    training clips and the top-N x top-K product book formed (:meth:`SimCodec.reorganize`);
    stage 2 trains that single-quantiser codec for ``stage2_steps``. An unfinished run
    checkpoints into ``out`` every ``checkpoint_every`` steps and resumes from there, bit for
    bit, when called again. At the end it writes ``config.json``, ``model.safetensors`` and
    ``training.json`` (every step's loss and :func:`codec_quality`, with the bars).

    Args:
        out: the folder to write.
        progress: called as ``progress(stage, done, total)``.
        max_steps: stop after this many steps and write nothing (replays the first steps).
        recipe: the recipe (default :class:`CodecRecipe`; tests pass a smaller one).

    Returns:
        The per-step training losses (of both stages, in order).
    """
    from iclr25.methods.gense.data import make_speech_set

    rc = recipe or CodecRecipe()
    cfg = rc.codec
    run = RecipeRun(out, replay=max_steps is not None)
    train = make_speech_set(rc.data, rc.data.train_voices, rc.n_train, seed=0)
    wavs = torch.from_numpy(train.wavs)
    state = run.state
    losses: list[float] = list(state["losses"]) if state is not None else []
    total = cfg.stage1_steps + cfg.stage2_steps
    gen = torch.Generator().manual_seed(rc.seed)

    def checkpoint(stage: int):
        return lambda st: run.checkpoint({**st, "stage": stage, "losses": list(losses)})

    stop = max_steps
    if state is None or state["stage"] == 1:
        torch.manual_seed(rc.seed)  # the initialisation
        stage1 = SimCodec(cfg)
        train_codec(
            stage1, wavs, steps=cfg.stage1_steps, generator=gen, resume=state, stop=stop,
            checkpoint=checkpoint(1), checkpoint_every=rc.checkpoint_every, step_losses=losses,
            progress=lambda d, t: progress("codec stage 1", d, total),
        )  # fmt: skip
        if max_steps is not None and max_steps <= cfg.stage1_steps:
            return losses
        codec = stage1.reorganize(stage1.usage(wavs), cfg.top_n, cfg.top_k)
        gen = torch.Generator().manual_seed(rc.seed + 1)
        state = None
    else:
        codec = SimCodec(cfg, n_groups=1, codebook_size=cfg.codebook_size)
    stop2 = None if max_steps is None else max_steps - cfg.stage1_steps
    train_codec(
        codec, wavs, steps=cfg.stage2_steps, generator=gen, init_codebook=False, resume=state,
        stop=stop2, checkpoint=checkpoint(2), checkpoint_every=rc.checkpoint_every, step_losses=losses,
        progress=lambda d, t: progress("codec stage 2", cfg.stage1_steps + d, total),
    )  # fmt: skip
    if max_steps is not None:
        return losses
    progress("codec quality", 0, 1)
    quality = codec_quality(codec, rc)
    met = {k: (quality[k] <= v) if op == "<=" else (quality[k] >= v) for k, (op, v) in CODEC_BARS.items()}
    save_codec(codec, out)
    run.finish(
        command=f"iclr25 pretrain gense codec --out {out}",
        loss_curve=losses,
        quality=quality,
        bars={k: f"{op} {v}" for k, (op, v) in CODEC_BARS.items()},
        bars_met=met,
        data=f"{rc.n_train} clean espeak-ng clips of the training voices (the full claim's, seed 0); "
        f"scored on {rc.n_eval} clips of the held-out voices, noisy input at {list(rc.eval_snrs)} dB",
        config=dataclasses.asdict(rc),
    )
    return losses
