"""The shipped text foundation of the claim check: the diffusion text side and the AR speaker,
each pretrained on an unlimited stream of grammar expressions, then fine-tuned on the scenes.

At paper scale VIE-DM's text side starts from a DiffuSeq checkpoint (a text diffusion model
pretrained on a large corpus) and the autoregressive REG baselines from pretrained language
models. The CPU analogue trains the same tiny networks the claim uses on expressions of fresh
shapes-world scenes (split "text", a world seed outside the claim's seeds), with no image: the
visual memory is a single zero token (:meth:`VIEDM.null_condition`). Every step draws new scenes,
so the stream does not repeat. The recipes write ``config.json``, ``model.safetensors`` (the
diffusion's EMA weights of ``embedding`` and ``denoiser``; the speaker's text layers) and
``training.json`` (every step's loss, a held-out loss curve, the grammaticality of unconditional
samples) and checkpoint into their output folder so an interrupted run resumes.

:func:`load_text_foundation` loads a shipped folder into a claim model (VIE-DM, its no-VTC
ablation, or the AR speaker); the visual parts (memory projections, box embedding) stay freshly
initialised, as the paper's visual side is not part of the text checkpoint.

References:
    Ke et al., "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion for
    Boosting Referring Expression Generation and Comprehension", ICLR 2025 (text side initialised
    from DiffuSeq).
    Gong et al., "DiffuSeq", ICLR 2023 (the pretrained text diffusion).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from iclr25._core.claims import ProgressFn
from iclr25._core.pretrained import RecipeRun, read_training, require_artefact
from iclr25.common import rng
from iclr25.methods.vie_dm.ar_speaker import ARSpeaker
from iclr25.methods.vie_dm.config import DiffusionConfig, TextPretrainConfig, VIEDMConfig
from iclr25.methods.vie_dm.model import VIEDM
from iclr25.methods.vie_dm.tokenizer import ExpressionTokenizer
from iclr25.methods.vie_dm.visual import ImageEncoder

__all__ = [
    "AR_TEXT",
    "TEXT_DIFFUSION",
    "load_text_foundation",
    "pretrain_ar_text",
    "pretrain_text_diffusion",
    "text_model_config",
]

TEXT_DIFFUSION = Path(__file__).parent / "pretrained" / "text_diffusion"
AR_TEXT = Path(__file__).parent / "pretrained" / "ar_text"


def _world(cfg: TextPretrainConfig) -> Any:
    from iclr25.common.data.shapes_world import ShapesWorld, WorldConfig

    return ShapesWorld(WorldConfig(image_size=cfg.image_size, n_objects=cfg.n_objects), seed=cfg.seed)


def _tokenizer(world: Any) -> ExpressionTokenizer:
    from iclr25.common.data.shapes_world.language import vocabulary

    return ExpressionTokenizer(vocabulary(world.config, "train"))


def text_model_config(cfg: TextPretrainConfig, vocab_size: int) -> VIEDMConfig:
    """The model sizes both recipes train (those of the claim's models)."""
    return VIEDMConfig.tiny(vocab_size).replace(
        seq_len=cfg.seq_len, d_model=cfg.d_model, d_emb=cfg.d_emb, heads=cfg.heads,
        vtc_layers=cfg.vtc_layers, denoiser_layers=cfg.denoiser_layers,
        diffusion=DiffusionConfig(steps=cfg.T, sampling_steps=cfg.sampling_steps),
    )  # fmt: skip


def _expressions(world: Any, split: str, start: int, n: int) -> list[str]:
    """Every expression of scenes ``start .. start + n - 1`` of ``split``."""
    return [t for i in range(start, start + n) for _, t in world.referring(i, split=split).expressions]


def _grammatical(texts: list[str], world: Any) -> float:
    """Fraction of ``texts`` the world's grammar parses (the oracle listener's parser)."""
    from iclr25.common.data.shapes_world import OracleListener

    parser = OracleListener(world.config)
    return sum(parser.parse(t) is not None for t in texts) / max(len(texts), 1)


def _null_model(cfg: TextPretrainConfig, tok: ExpressionTokenizer, kind: str) -> nn.Module:
    mcfg = text_model_config(cfg, len(tok))
    encoder = ImageEncoder((4, 4, 4), strides=(2, 2, 2))  # unused: text-only training never reads images
    if kind == "diffusion":
        return VIEDM(mcfg, encoder=encoder, grid_tokens=1, decode=tok.decode)
    return ARSpeaker(mcfg, encoder=encoder, grid_tokens=1, decode=tok.decode)


def _text_keys(kind: str) -> tuple[str, ...]:
    if kind == "diffusion":
        return ("embedding.", "denoiser.")
    return ("embed.", "pos", "layers.", "norm.", "head.")


def _run(
    out: str | os.PathLike[str],
    kind: str,
    *,
    progress: ProgressFn,
    max_steps: int | None,
    device: torch.device | str,
) -> list[float]:
    """The shared recipe loop (``kind``: "diffusion" or "ar"). The model trains on ``device``;
    initialisation and every random draw stay on the CPU, so a CPU run repeats bit for bit."""
    from safetensors.torch import save_file

    cfg = TextPretrainConfig()
    run = RecipeRun(out, replay=max_steps is not None)
    world = _world(cfg)
    tok = _tokenizer(world)
    L = cfg.seq_len
    dev = torch.device(device)
    torch.manual_seed(cfg.seed)  # the initialisation (on the CPU, then moved)
    model = _null_model(cfg, tok, kind).to(dev)
    params = [p for n, p in model.named_parameters() if p.requires_grad and n.startswith(_text_keys(kind))]
    lr = cfg.lr if kind == "diffusion" else cfg.ar_lr
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    shadow = copy.deepcopy(model) if kind == "diffusion" else model
    gen = torch.Generator().manual_seed(cfg.seed)
    heldout = (
        tok.encode(_expressions(world, "text_heldout", 0, cfg.n_heldout_scenes), length=L).to(dev)
        if max_steps is None
        else None
    )
    losses: list[float] = []
    val: list[tuple[int, float]] = []
    start = 0
    if run.state is not None:
        s = run.state
        model.load_state_dict(s["model"])
        if kind == "diffusion":
            shadow.load_state_dict(s["ema"])
            model.sampler._losses, model.sampler._counts = s["sampler"]
        opt.load_state_dict(s["opt"])
        gen.set_state(s["generator"])
        losses, val, start = list(s["losses"]), [tuple(v) for v in s["val"]], int(s["step"])
    if kind == "diffusion":
        shadow.sampler = model.sampler  # one loss history (the EMA copy never trains)
    total = cfg.steps if kind == "diffusion" else cfg.ar_steps
    stop = total if max_steps is None else min(max_steps, total)

    def validate() -> float:
        assert heldout is not None
        vgen = torch.Generator().manual_seed(cfg.seed + 1)  # the same noise and timesteps every time
        with torch.no_grad():
            if kind == "ar":
                return float(model.text_loss(heldout))
            T = shadow.diffusion.T
            t = rng.randint(0, T, (len(heldout),), generator=vgen).to(dev)
            terms = shadow.diffusion.training_losses(
                shadow._model_fn(shadow.null_condition(len(heldout))), shadow.embedding.weight, heldout, t,
                generator=vgen,
            )  # fmt: skip
            return float(terms["loss"].mean())

    model.train()
    for step in range(start, stop):
        texts = _expressions(world, "text", step * cfg.scenes_per_step, cfg.scenes_per_step)
        ids = tok.encode(texts, length=L).to(dev)
        loss = model.text_loss(ids, generator=gen)["loss"] if kind == "diffusion" else model.text_loss(ids)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if kind == "diffusion":
            with torch.no_grad():
                for ps, pm in zip(shadow.parameters(), model.parameters(), strict=True):
                    ps.lerp_(pm, 1.0 - cfg.ema)
        losses.append(float(loss.detach()))
        done = step + 1
        if max_steps is None and (done % cfg.eval_every == 0 or done == total):
            val.append((done, validate()))
            model.train()
        if done % 50 == 0:
            progress(f"text foundation ({kind})", done, total)
        if done % cfg.checkpoint_every == 0 and done < stop:
            state: dict[str, Any] = {
                "model": model.state_dict(), "opt": opt.state_dict(), "generator": gen.get_state(),
                "losses": losses, "val": val, "step": done,
            }  # fmt: skip
            if kind == "diffusion":
                sampler = (model.sampler._losses, model.sampler._counts)
                state |= {"ema": shadow.state_dict(), "sampler": sampler}
            run.checkpoint(state)
    if max_steps is not None:
        return losses
    # quality: grammaticality of unconditional samples and the final held-out loss
    qgen = torch.Generator().manual_seed(cfg.seed + 2)
    if kind == "diffusion":
        n = 200
        cond = shadow.null_condition(n)
        x0 = shadow.diffusion.spaced(cfg.sampling_steps).sample(
            shadow._model_fn(cond), (n, L, cfg.d_emb), shadow.embedding.weight, clamp=True,
            noise=rng.randn(n, L, cfg.d_emb, generator=qgen).to(dev), generator=qgen,
        )  # fmt: skip
        from iclr25.methods.vie_dm.diffusion import round_to_tokens

        samples = tok.decode(round_to_tokens(x0, shadow.embedding.weight))
    else:
        samples = tok.decode(model.sample_text(200, generator=qgen))
    quality = {"heldout_loss": val[-1][1] if val else float("nan")}
    quality["grammatical"] = _grammatical(samples, world)
    keys = _text_keys(kind)
    state = {k: v.detach().cpu().contiguous() for k, v in shadow.state_dict().items() if k.startswith(keys)}
    Path(out).mkdir(parents=True, exist_ok=True)
    save_file(state, str(Path(out) / "model.safetensors"))
    mcfg = text_model_config(cfg, len(tok))
    meta = {
        "kind": kind, "vocabulary": tok.itos, "seq_len": L, "d_model": cfg.d_model, "d_emb": cfg.d_emb,
        "heads": cfg.heads, "vtc_layers": cfg.vtc_layers, "denoiser_layers": cfg.denoiser_layers,
        "T": mcfg.diffusion.steps, "schedule": mcfg.diffusion.schedule,
    }  # fmt: skip
    (Path(out) / "config.json").write_text(json.dumps(meta, indent=1) + "\n")
    name = "text_diffusion" if kind == "diffusion" else "ar_text"
    run.finish(
        command=f"iclr25 pretrain vie_dm {name} --out {out}",
        loss_curve=losses,
        quality=quality,
        data=f"shapes world seed {cfg.seed}, split 'text': {cfg.scenes_per_step} fresh scenes a step "
        f"(train surface forms); held-out loss on {cfg.n_heldout_scenes} scenes of split 'text_heldout'",
        heldout_curve=[[s, v] for s, v in val],
        samples=samples[:20],
        config=dataclasses.asdict(cfg),
    )
    return losses


def pretrain_text_diffusion(
    out: str | os.PathLike[str],
    *,
    progress: ProgressFn,
    max_steps: int | None = None,
    device: torch.device | str = "cpu",
) -> list[float]:
    """Recipe of the shipped ``text_diffusion``: VIE-DM's text side (word embeddings and the
    denoiser, VTC layers included, against a null visual memory) trained with the DiffuSeq loss
    on the grammar stream; the EMA weights are shipped.

    Args:
        out: the folder to write (an unfinished run there resumes).
        progress: called as ``progress(stage, done, total)`` every 50 steps.
        max_steps: stop after this many steps and write nothing (replays the first steps).
        device: where the model trains; the initialisation and every random draw stay on the CPU
            (the shipped artefact was trained on the CPU).

    Returns:
        The per-step (importance-weighted) training losses.
    """
    return _run(out, "diffusion", progress=progress, max_steps=max_steps, device=device)


def pretrain_ar_text(
    out: str | os.PathLike[str],
    *,
    progress: ProgressFn,
    max_steps: int | None = None,
    device: torch.device | str = "cpu",
) -> list[float]:
    """Recipe of the shipped ``ar_text``: the AR speaker's text layers trained as a language model
    of grammar expressions (teacher-forced cross-entropy, null visual memory).

    Args:
        out: the folder to write (an unfinished run there resumes).
        progress: called as ``progress(stage, done, total)`` every 50 steps.
        max_steps: stop after this many steps and write nothing.
        device: where the model trains; the initialisation and every random draw stay on the CPU
            (the shipped artefact was trained on the CPU).

    Returns:
        The per-step training losses.
    """
    return _run(out, "ar", progress=progress, max_steps=max_steps, device=device)


_DECODER_TO_ENCODER = {"self_attn": "self_attn", "linear1": "linear1", "linear2": "linear2", "norm1": "norm1"}


def load_text_foundation(
    model: VIEDM | ARSpeaker, directory: str | os.PathLike[str], *, vocabulary: list[str]
) -> dict[str, Any]:
    """Load a shipped text foundation into a claim model (its text parts only).

    VIE-DM and the AR speaker load their own artefacts whole. The no-VTC ablation loads the
    diffusion artefact too: its prefix self-attention layers take the VTC layers' self-attention
    and feed-forward weights (the cross-attention has no counterpart), so both diffusion arms start
    from the same text checkpoint.

    Args:
        model: the model to initialise (in place).
        directory: the artefact folder.
        vocabulary: the claim tokenizer's ``itos``; it must equal the artefact's.

    Returns:
        The artefact's ``training.json`` record.

    Raises:
        ArtefactMissingError: a file is missing (the message names the command that trains it).
        ValueError: the artefact's kind, vocabulary or sizes do not match ``model``.
    """
    from safetensors.torch import load_file

    d = Path(directory)
    name = d.name
    require_artefact(d, method="vie_dm", name=name)
    meta = json.loads((d / "config.json").read_text())
    kind = "diffusion" if isinstance(model, VIEDM) else "ar"
    if meta["kind"] != kind:
        raise ValueError(f"{d} holds a {meta['kind']} foundation, not a {kind} one")
    if list(meta["vocabulary"]) != list(vocabulary):
        raise ValueError(f"{d}: the artefact's vocabulary differs from the tokenizer's")
    c = model.config
    want = {"seq_len": c.seq_len, "d_model": c.d_model, "heads": c.heads, "vtc_layers": c.vtc_layers}
    want |= {"denoiser_layers": c.denoiser_layers}
    if kind == "diffusion":
        want |= {"d_emb": c.d_emb, "T": c.diffusion.steps, "schedule": c.diffusion.schedule}
    bad = {k: (meta[k], v) for k, v in want.items() if meta[k] != v}
    if bad:
        raise ValueError(f"{d}: sizes differ (artefact, model): {bad}")
    state = load_file(str(d / "model.safetensors"))
    if kind == "diffusion" and not model.config.use_vtc:
        mapped = {}
        for k, v in state.items():
            parts = k.split(".")
            if parts[:3] == ["denoiser", "vtc", "layers"]:  # denoiser.vtc.layers.i.x -> denoiser.vtc.i.x
                sub = parts[4]
                if sub == "norm3":  # the decoder layer's feed-forward norm is the encoder layer's norm2
                    sub = "norm2"
                elif sub not in _DECODER_TO_ENCODER:
                    continue  # cross-attention and its norm
                k = ".".join(["denoiser", "vtc", parts[3], sub, *parts[5:]])
            mapped[k] = v
        state = mapped
    missing, unexpected = model.load_state_dict(state, strict=False)
    text = [k for k in missing if k.startswith(_text_keys(kind))]
    if unexpected or text:
        raise ValueError(f"{d}: weights do not fit the model (missing {text}, unexpected {unexpected})")
    return read_training(d)
