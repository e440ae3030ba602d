"""The shipped GenSE foundations: the codec, the semantic tokenizer and the two language models.

Paper: *GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling*,
Yao et al., ICLR 2025 (arXiv 2502.02942), Sec. 3.2-3.4: SimCodec and the XLS-R k-means tokenizer
are trained once and frozen; N2S and S2S are trained on their tokens. Each has a recipe here,
run by ``iclr25 pretrain gense <artefact>``, trained for many more steps than a claim can afford
and scored on the claim's held-out voices:

- ``codec`` (:func:`pretrain_codec`): the two-stage reorganisation of
  :func:`~.train.load_or_train_codecs` (stage 1: two group quantisers; usage ranking; stage 2:
  the top-N x top-K product book), resumable;
- ``tokenizer`` (:func:`pretrain_tokenizer`): the CTC phone recogniser, its held-out PER read
  every epoch, and k-means on its features;
- ``n2s``, ``s2s``, ``s2s_nc``, ``single`` (:func:`pretrain_lm`): the two GenSE LMs, the S2S
  without the token chain and the single-stage LM, at equal steps on the same tokens, resumable.

Quality bars recorded in ``training.json`` (the claim re-measures them as preconditions):

- codec ``copy_per <= 0.35``: clean speech through the codec keeps its phones;
- codec ``ceiling_stoi_gain >= 0.03``: clean speech through the codec is more intelligible (STOI)
  than the noisy input at the test SNRs, so a token-domain enhancer has room to show a gain;
- S2S ``oracle_semantic_per_ratio <= 0.8``: fed the clean semantic tokens, S2S writes speech
  with at most 0.8x the noisy input's phone error rate;
- every LM ``plateau_gap <= 0.02``: its held-out loss moved at most 0.02 nats over the last fifth.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import torch

from iclr25._core.convergence import plateau_gap
from iclr25._core.pretrained import RecipeRun, artefact_dir, read_training, require_artefact
from iclr25.methods.gense.codec import SimCodec, train_codec
from iclr25.methods.gense.config import (
    CodecConfig,
    CodecRecipe,
    DataConfig,
    LMConfig,
    LMRecipe,
    TokenizerConfig,
    TokenizerRecipe,
)
from iclr25.methods.gense.lm import N2S, S2S, train_lm
from iclr25.methods.gense.semantic import PhoneCTC, PhoneCTCFeatures, SemanticTokenizer

__all__ = [
    "CODEC_BARS",
    "CODEC_DIR",
    "LM_ARMS",
    "LM_BARS",
    "TOKENIZER_DIR",
    "arm_batch",
    "build_lm",
    "codec_quality",
    "eval_set",
    "lm_dir",
    "lm_tokens",
    "lm_validation",
    "load_codec",
    "load_lm",
    "load_tokenizer",
    "pretrain_codec",
    "pretrain_lm",
    "pretrain_n2s",
    "pretrain_s2s",
    "pretrain_s2s_nc",
    "pretrain_single",
    "pretrain_tokenizer",
    "save_codec",
    "save_tokenizer",
    "token_agreement",
    "tokenize",
]

CODEC_DIR = artefact_dir("gense", "codec")
#: the bars the shipped codec must reach (``training.json`` records each value and whether it does)
CODEC_BARS = {"copy_per": ("<=", 0.35), "ceiling_stoi_gain": (">=", 0.03)}


def _write_folder(directory: str | os.PathLike[str], config: dict, tensors: dict[str, torch.Tensor]) -> None:
    """Write an artefact's ``config.json`` and ``model.safetensors`` (independent contiguous copies,
    so tied weights such as GPT-2's head and embedding are accepted)."""
    from safetensors.torch import save_file

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    save_file({k: v.detach().clone().contiguous() for k, v in tensors.items()}, str(d / "model.safetensors"))


def _bars_met(quality: dict[str, float], bars: dict[str, tuple[str, float]]) -> dict[str, bool]:
    """Whether each bar (``name -> (op, value)``) that ``quality`` measured is met."""
    return {
        k: quality[k] <= v if op == "<=" else quality[k] >= v for k, (op, v) in bars.items() if k in quality
    }


def save_codec(codec: SimCodec, directory: str | os.PathLike[str]) -> None:
    """Write ``config.json`` and ``model.safetensors`` of a single-quantiser codec."""
    conf = {"codec": dataclasses.asdict(codec.cfg), "codebook_size": codec.codebook_size}
    _write_folder(directory, conf, codec.state_dict())


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


def eval_set(
    data: DataConfig,
    n_eval: int,
    snrs: tuple[float, ...],
    *,
    n_train: int = 400,
    judge: tuple[torch.nn.Module, list[str]] | None = None,
) -> dict:
    """The quality bars' test set: the claim's first ``n_eval`` held-out clips, mixed at ``snrs`` as
    the claim's seed 0 mixes them, and a ``score(wavs) -> (STOI, PER)`` function whose PER is read
    by the claim's independently trained phone recogniser (``judge``, trained if not given).

    Returns:
        ``test`` (the clean :class:`~.data.SpeechSet`), ``noisy`` [n, N] and ``score``.
    """
    from iclr25.methods.gense.data import make_mixtures, make_speech_set
    from iclr25.methods.gense.metrics import phone_error_rate, stoi
    from iclr25.methods.gense.semantic import ctc_greedy_decode
    from iclr25.methods.gense.train import load_or_train_recognizer

    test = make_speech_set(data, data.test_voices, n_eval, seed=1)
    babble = make_speech_set(data, data.train_voices, 12, seed=2).wavs
    if judge is None:
        train = make_speech_set(data, data.train_voices, n_train, seed=0)
        judge = load_or_train_recognizer(train, TokenizerConfig(), seed=1)
    model, vocab = judge
    rng = np.random.default_rng([0, 2])  # the claim's seed-0 test mixtures
    noisy, _, _ = make_mixtures(test.wavs, data.train_noises, snrs, rng, babble)

    def score(est: np.ndarray) -> tuple[float, float]:
        with torch.no_grad():
            hyps = ctc_greedy_decode(model(torch.from_numpy(est.astype(np.float32))), vocab)
        s = float(np.mean([stoi(c, e) for c, e in zip(test.wavs, est, strict=True)]))
        return s, phone_error_rate(test.phones, hyps)

    return {"test": test, "noisy": noisy, "score": score}


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
    ev = eval_set(recipe.data, recipe.n_eval, recipe.eval_snrs, n_train=recipe.n_train, judge=judge)
    test = ev["test"]
    with torch.no_grad():
        copy = codec.decode(codec.encode(torch.from_numpy(test.wavs)[:, None]))[:, 0].numpy()
    score = ev["score"]
    (cs, cp), (ns, np_), (_, clp) = score(copy), score(ev["noisy"]), score(test.wavs)
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
    save_codec(codec, out)
    run.finish(
        command=f"iclr25 pretrain gense codec --out {out}",
        loss_curve=losses,
        quality=quality,
        bars={k: f"{op} {v}" for k, (op, v) in CODEC_BARS.items()},
        bars_met=_bars_met(quality, CODEC_BARS),
        data=f"{rc.n_train} clean espeak-ng clips of the training voices (the full claim's, seed 0); "
        f"scored on {rc.n_eval} clips of the held-out voices, noisy input at {list(rc.eval_snrs)} dB",
        config=dataclasses.asdict(rc),
    )
    return losses


# ---------------------------------------------------------------------------------------------
# the semantic tokenizer
# ---------------------------------------------------------------------------------------------

TOKENIZER_DIR = artefact_dir("gense", "tokenizer")


def save_tokenizer(tok: SemanticTokenizer, vocab: list[str], cfg: TokenizerConfig, directory) -> None:
    """Write ``config.json`` (sizes, phone vocabulary) and ``model.safetensors`` (the recogniser's
    weights under ``recognizer.``, the k-means centroids as ``kmeans.centers``)."""
    tensors = {f"recognizer.{k}": v for k, v in tok.features.model.state_dict().items()}
    tensors["kmeans.centers"] = torch.from_numpy(tok.kmeans_.cluster_centers_)
    _write_folder(directory, {"tokenizer": dataclasses.asdict(cfg), "vocab": vocab}, tensors)


def load_tokenizer(directory: str | os.PathLike[str] = TOKENIZER_DIR) -> tuple[SemanticTokenizer, list[str]]:
    """The shipped semantic tokenizer (or one :func:`pretrain_tokenizer` wrote) and its phone
    vocabulary. The centroids become a fitted scikit-learn ``KMeans`` (one Lloyd step on the
    centroids themselves leaves them unchanged), so ``transform`` is the same nearest-centroid
    rule as after ``fit``.

    Raises:
        ArtefactMissingError: the folder lacks one of its files (the message names the command).
    """
    from safetensors.torch import load_file
    from sklearn.cluster import KMeans

    d = require_artefact(directory, method="gense", name="tokenizer")
    conf = json.loads((d / "config.json").read_text())
    cfg = TokenizerConfig(**conf["tokenizer"])
    tensors = load_file(str(d / "model.safetensors"))
    model = PhoneCTC(len(conf["vocab"]), cfg)
    model.load_state_dict(
        {k.removeprefix("recognizer."): v for k, v in tensors.items() if k.startswith("recognizer.")}
    )
    centers = tensors["kmeans.centers"].numpy().astype(np.float32)  # the features' dtype
    tok = SemanticTokenizer(PhoneCTCFeatures(model.eval()), len(centers), random_state=0)
    tok.kmeans_ = KMeans(len(centers), init=centers, n_init=1, max_iter=1).fit(centers)
    return tok, list(conf["vocab"])


def pretrain_tokenizer(
    out: str | os.PathLike[str],
    *,
    progress=lambda stage, done, total: None,
    max_steps: int | None = None,
    recipe: TokenizerRecipe | None = None,
) -> list[float]:
    """Recipe of the shipped semantic tokenizer: :class:`~iclr25.methods.gense.config.TokenizerRecipe`.

    The CTC phone recogniser trains ``tokenizer.epochs`` epochs on the clean training clips; after
    every epoch its greedy phone error rate on clean clips of the held-out voices is recorded
    (``val_per``, read for the plateau, never to pick an epoch). k-means is then fitted on its
    features of the training clips. ``training.json`` records every step's CTC loss, the PER
    curve, and the same-text / different-text token agreement across the held-out voices.
    With ``max_steps`` it stops after that many steps and writes nothing.

    Returns:
        The per-step CTC losses.
    """
    from iclr25.methods.gense.data import make_speech_set
    from iclr25.methods.gense.metrics import phone_error_rate
    from iclr25.methods.gense.semantic import ctc_greedy_decode, phone_vocabulary, train_phone_ctc

    rc = recipe or TokenizerRecipe()
    cfg = rc.tokenizer
    run = RecipeRun(out, replay=max_steps is not None)
    train = make_speech_set(rc.data, rc.data.train_voices, rc.n_train, seed=0)
    val = make_speech_set(rc.data, rc.data.test_voices, rc.n_val, seed=1)
    vocab = phone_vocabulary(train.phones)
    losses: list[float] = []
    val_per: list[float] = []

    class _Stop(Exception):
        pass

    def epoch_end(epoch: int, model: PhoneCTC) -> None:
        if max_steps is not None and len(losses) >= max_steps:
            raise _Stop
        with torch.no_grad():
            hyps = ctc_greedy_decode(model(torch.from_numpy(val.wavs)), vocab)
        val_per.append(phone_error_rate(val.phones, hyps))
        progress(f"tokenizer recogniser (held-out PER {val_per[-1]:.3f})", epoch, cfg.epochs)

    torch.manual_seed(rc.seed)
    try:
        model = train_phone_ctc(
            train.wavs, train.phones, vocab, cfg, generator=torch.Generator().manual_seed(rc.seed),
            epoch_end=epoch_end, step_losses=losses,
        )  # fmt: skip
    except _Stop:
        return losses[:max_steps]
    if max_steps is not None:
        return losses[:max_steps]
    progress("tokenizer k-means", 0, 1)
    tok = SemanticTokenizer(
        PhoneCTCFeatures(model), cfg.n_clusters, batch_size=cfg.kmeans_batch, random_state=rc.seed
    ).fit(list(train.wavs))
    agreement = token_agreement(tok, rc.data.test_voices)
    save_tokenizer(tok, vocab, cfg, out)
    gap = plateau_gap(val_per)
    run.finish(
        command=f"iclr25 pretrain gense tokenizer --out {out}",
        loss_curve=losses,
        quality={"val_per": val_per[-1], "val_per_plateau_gap": gap, **agreement},
        val_per=val_per,
        data=f"{rc.n_train} clean espeak-ng clips of the training voices (the full claim's, seed 0); "
        f"held-out PER on {rc.n_val} clean clips of the test voices",
        config=dataclasses.asdict(rc),
    )
    return losses


def token_agreement(tok: SemanticTokenizer, voices: tuple[str, ...], n_texts: int = 6) -> dict[str, float]:
    """Speaker invariance of the semantic tokens: histogram intersection of the token counts of
    the same text in two voices (``same_text``), against that of different texts (``diff_text``)."""
    from iclr25.methods.gense.data import random_text, synthesize

    rng = np.random.default_rng(123)
    texts = [random_text(rng, 2, 2) for _ in range(n_texts)]
    hist = {}
    for v in voices[:2]:
        for i, t in enumerate(texts):
            ids = tok.transform(synthesize(t, v, rate=170, pitch=50)).numpy()
            hist[v, i] = np.bincount(ids, minlength=tok.n_clusters) / len(ids)
    a, b = voices[0], voices[1]

    def inter(i: int, j: int) -> float:
        return float(np.minimum(hist[a, i], hist[b, j]).sum())

    same = np.mean([inter(i, i) for i in range(n_texts)])
    other = np.mean([inter(i, j) for i in range(n_texts) for j in range(n_texts) if i != j])
    return {"same_text": float(same), "diff_text": float(other)}


# ---------------------------------------------------------------------------------------------
# the language models
# ---------------------------------------------------------------------------------------------

#: the shipped LMs: N2S and S2S of GenSE, and the two comparisons trained alike
LM_ARMS = {
    "n2s": "N2S: noisy -> clean semantic tokens",
    "s2s": "S2S with token-chain prompting: (noisy, clean semantic; noisy acoustic) -> clean acoustic",
    "s2s_nc": "S2S without the token chain (no noisy acoustic prompt)",
    "single": "single-stage LM: noisy -> clean acoustic tokens",
}
#: the bars ``training.json`` records (the claim re-measures the S2S one as a precondition)
LM_BARS = {"plateau_gap": ("<=", 0.02), "oracle_semantic_per_ratio": ("<=", 0.8)}


def build_lm(arm: str, n_semantic: int, n_acoustic: int, cfg: LMConfig) -> N2S | S2S:
    """A freshly initialised LM of one of :data:`LM_ARMS`."""
    if arm not in LM_ARMS:
        raise ValueError(f"unknown LM {arm!r}; expected one of {sorted(LM_ARMS)}")
    if arm == "n2s":
        return N2S(n_semantic, cfg)
    if arm == "single":
        return N2S(n_acoustic, cfg)
    return S2S(n_semantic, n_acoustic, cfg, chain=arm == "s2s")


def arm_batch(arm: str, lm: N2S | S2S, tokens: dict[str, torch.Tensor], idx) -> dict[str, torch.Tensor]:
    """Training sequences of rows ``idx`` for ``arm``, from token tensors ``ns``/``cs`` (noisy /
    clean semantic) and ``na``/``ca`` (noisy / clean acoustic)."""
    t = {k: v[idx] for k, v in tokens.items()}
    if arm == "n2s":
        return lm.batch(t["ns"], t["cs"])
    if arm == "single":
        return lm.batch(t["na"], t["ca"])
    return lm.batch(t["ns"], t["cs"], t["na"] if arm == "s2s" else None, t["ca"])


def tokenize(tok: SemanticTokenizer, codec: SimCodec, clean: np.ndarray, noisy: np.ndarray, chunk: int = 200):
    """``cs``/``ns`` semantic and ``ca``/``na`` acoustic ids of aligned clean and noisy clips."""
    out: dict[str, list[torch.Tensor]] = {"cs": [], "ns": [], "ca": [], "na": []}
    with torch.no_grad():
        for i in range(0, len(clean), chunk):
            for key, wav in (("c", clean[i : i + chunk]), ("n", noisy[i : i + chunk])):
                x = torch.from_numpy(np.ascontiguousarray(wav))
                out[key + "s"].append(tok.transform_batch(x))
                out[key + "a"].append(codec.encode(x[:, None])[..., 0])
    return {k: torch.cat(v) for k, v in out.items()}


def lm_validation(data: DataConfig, n_val: int, tok: SemanticTokenizer, codec: SimCodec, *, seed: int = 0):
    """Held-out tokens of the LMs' validation curves: the first ``n_val`` clips of the test voices
    mixed with the seen noises at the training SNRs (read for convergence, never to select)."""
    from iclr25.methods.gense.data import make_mixtures, make_speech_set

    test = make_speech_set(data, data.test_voices, max(n_val, 50), seed=1).wavs[:n_val]
    babble = make_speech_set(data, data.train_voices, 12, seed=2).wavs
    noisy = make_mixtures(test, data.train_noises, data.train_snrs, np.random.default_rng([seed, 3]), babble)[
        0
    ]
    return tokenize(tok, codec, test, noisy)


def _lm_quality(arm: str, lm, tok, codec, rc: LMRecipe) -> dict[str, float]:
    """The arm's score on the quality bars' test set (decoding as the claim: sampling, seed 0)."""
    lc = rc.lm
    ev = eval_set(rc.data, rc.n_eval, rc.eval_snrs, n_train=rc.n_train)
    clean, noisy = ev["test"].wavs, ev["noisy"]
    t = tokenize(tok, codec, clean, noisy)
    kw = {"strategy": lc.strategy, "temperature": lc.temperature, "seed": 0}
    if arm == "n2s":
        sem = lm.generate(t["ns"], **kw)
        return {
            "n2s_acc": float((sem == t["cs"]).float().mean()),
            "identity_acc": float((t["ns"] == t["cs"]).float().mean()),
        }
    with torch.no_grad():
        if arm == "single":
            ac = lm.generate(t["na"], **kw)
        else:  # S2S fed the clean semantic tokens (a perfect N2S)
            ac = lm.generate(t["ns"], t["cs"], t["na"] if arm == "s2s" else None, **kw)
        wav = codec.decode(ac[..., None])[:, 0].numpy()
    (s, p), (ns, np_) = ev["score"](wav), ev["score"](noisy)
    out = {
        "token_acc": float((ac == t["ca"]).float().mean()),
        "stoi": s,
        "per": p,
        "noisy_stoi": ns,
        "noisy_per": np_,
    }
    key = "oracle_semantic_per_ratio" if arm == "s2s" else "per_ratio"
    out[key] = p / max(np_, 1e-9)
    return out


def lm_tokens(rc: LMRecipe, tok: SemanticTokenizer, codec: SimCodec, sources: tuple[Path, ...]):
    """The LMs' training tokens (:func:`tokenize` of ``n_clips`` clean clips of the training voices,
    each mixed ``mixtures_per_clip`` times with the seen noises at the training SNRs). The four
    LMs share them, so they are cached on disk under a hash of the recipe's data and of the
    tokenizer's and codec's weights (``sources``: their folders)."""
    import hashlib

    from safetensors.torch import load_file, save_file

    from iclr25.methods.gense.data import default_cache_dir, make_mixtures, make_speech_set

    dc = rc.data
    h = hashlib.sha256(
        json.dumps(
            [dataclasses.asdict(dc), rc.n_clips, rc.mixtures_per_clip, rc.seed], sort_keys=True
        ).encode()
    )
    for folder in sources:
        h.update((folder / "model.safetensors").read_bytes())
    path = default_cache_dir() / f"lm-tokens-{h.hexdigest()[:16]}.safetensors"
    if path.is_file():
        return load_file(str(path))
    clips = make_speech_set(dc, dc.train_voices, rc.n_clips, seed=4).wavs
    babble = make_speech_set(dc, dc.train_voices, 12, seed=2).wavs
    rng = np.random.default_rng([rc.seed, 5])
    parts = [
        tokenize(tok, codec, clips, make_mixtures(clips, dc.train_noises, dc.train_snrs, rng, babble)[0])
        for _ in range(rc.mixtures_per_clip)
    ]
    tokens = {k: torch.cat([p[k] for p in parts]).contiguous() for k in parts[0]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    save_file(tokens, str(tmp))
    os.replace(tmp, path)
    return tokens


def lm_dir(arm: str) -> Path:
    """The shipped folder of one of :data:`LM_ARMS`."""
    return artefact_dir("gense", arm)


def load_lm(arm: str, directory: str | os.PathLike[str] | None = None) -> tuple[N2S | S2S, dict]:
    """A shipped LM (or one :func:`pretrain_lm` wrote to ``directory``), eval mode, and its
    ``training.json`` record.

    Raises:
        ArtefactMissingError: the folder lacks one of its files (the message names the command).
    """
    from safetensors.torch import load_file

    d = require_artefact(directory or lm_dir(arm), method="gense", name=arm)
    conf = json.loads((d / "config.json").read_text())
    lm = build_lm(conf["arm"], conf["n_semantic"], conf["n_acoustic"], LMConfig(**conf["lm"]))
    lm.load_state_dict(load_file(str(d / "model.safetensors")))
    return lm.eval(), read_training(d)


def pretrain_lm(
    out: str | os.PathLike[str],
    *,
    arm: str,
    progress=lambda stage, done, total: None,
    max_steps: int | None = None,
    recipe: LMRecipe | None = None,
    tokenizer_dir: str | os.PathLike[str] = TOKENIZER_DIR,
    codec_dir: str | os.PathLike[str] = CODEC_DIR,
) -> list[float]:
    """Recipe of a shipped LM (:class:`~iclr25.methods.gense.config.LMRecipe`).

    ``n_clips`` clean clips of the training voices, each mixed ``mixtures_per_clip`` times with
    the seen noises at the training SNRs, are tokenised by the shipped tokenizer and codec; the
    LM trains ``lm.steps`` steps (:func:`~.lm.train_lm`) and its held-out loss is read every
    ``eval_every`` steps on :func:`lm_validation`. It checkpoints into ``out`` and resumes bit for
    bit. ``training.json`` records every step's loss, the held-out curve, its plateau gap and the
    arm's quality on the test voices at the claim's test SNRs (S2S: fed the clean semantic tokens,
    its PER against the noisy input's, the bar the claim re-measures).

    Returns:
        The per-step training losses.
    """

    if arm not in LM_ARMS:
        raise ValueError(f"unknown LM {arm!r}; expected one of {sorted(LM_ARMS)}")
    rc = recipe or LMRecipe()
    lc, dc = rc.lm, rc.data
    run = RecipeRun(out, replay=max_steps is not None)
    tok, _ = load_tokenizer(tokenizer_dir)
    codec = load_codec(codec_dir)
    progress(f"{arm}: tokenising {rc.n_clips} clips x {rc.mixtures_per_clip} mixtures", 0, lc.steps)
    tokens = lm_tokens(rc, tok, codec, (Path(tokenizer_dir), Path(codec_dir)))
    val = lm_validation(dc, rc.n_val, tok, codec, seed=rc.seed)
    n_sem, n_ac = tok.n_clusters, codec.codebook_size
    torch.manual_seed(rc.seed)  # the initialisation
    lm = build_lm(arm, n_sem, n_ac, lc)
    state = run.state
    losses: list[float] = list(state["losses"]) if state is not None else []
    val_losses: list[float] = []
    train_lm(
        lm, lambda i: arm_batch(arm, lm, tokens, i), len(tokens["ns"]), steps=lc.steps,
        batch_size=lc.batch_size, lr=lc.lr, generator=torch.Generator().manual_seed(rc.seed + 50),
        progress=lambda d, t: progress(f"{arm} (held-out loss {val_losses[-1]:.3f})", d, t),
        validate=lambda: arm_batch(arm, lm, val, slice(None)), val_losses=val_losses,
        block=rc.eval_every, resume=state, stop=max_steps,
        checkpoint=lambda st: run.checkpoint({**st, "losses": list(losses)}),
        checkpoint_every=rc.checkpoint_every, step_losses=losses,
    )  # fmt: skip
    if max_steps is not None:
        return losses
    progress(f"{arm} quality", 0, 1)
    quality = {"val_loss": val_losses[-1], "plateau_gap": plateau_gap(val_losses)}
    quality.update(_lm_quality(arm, lm, tok, codec, rc))
    conf = {"arm": arm, "n_semantic": n_sem, "n_acoustic": n_ac, "lm": dataclasses.asdict(lc)}
    _write_folder(out, conf, lm.state_dict())
    run.finish(
        command=f"iclr25 pretrain gense {arm} --out {out}",
        loss_curve=losses,
        quality=quality,
        bars={k: f"{op} {v}" for k, (op, v) in LM_BARS.items() if k in quality},
        bars_met=_bars_met(quality, LM_BARS),
        val_every=rc.eval_every,
        val_losses=val_losses,
        data=f"{rc.n_clips} clean espeak-ng clips of the training voices (seed 4) x {rc.mixtures_per_clip} "
        "noisy mixtures (seen noises, training SNRs); held-out loss on the first "
        f"{rc.n_val} clips of the test voices; quality on {rc.n_eval} test clips at {list(rc.eval_snrs)} dB",
        config=dataclasses.asdict(rc),
    )
    return losses


def pretrain_n2s(out, **kw) -> list[float]:
    """``iclr25 pretrain gense n2s``: :func:`pretrain_lm` of N2S."""
    return pretrain_lm(out, arm="n2s", **kw)


def pretrain_s2s(out, **kw) -> list[float]:
    """``iclr25 pretrain gense s2s``: :func:`pretrain_lm` of S2S with the token chain."""
    return pretrain_lm(out, arm="s2s", **kw)


def pretrain_s2s_nc(out, **kw) -> list[float]:
    """``iclr25 pretrain gense s2s_nc``: :func:`pretrain_lm` of S2S without the token chain."""
    return pretrain_lm(out, arm="s2s_nc", **kw)


def pretrain_single(out, **kw) -> list[float]:
    """``iclr25 pretrain gense single``: :func:`pretrain_lm` of the single-stage LM."""
    return pretrain_lm(out, arm="single", **kw)
