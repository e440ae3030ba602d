"""Static table of methods: name -> where its claim lives, plus what ``iclr25 list`` shows.

Nothing here imports a method: :func:`load_claim` imports ``iclr25.methods.<name>.claim``
only when asked, so ``iclr25 list`` stays fast. A contract test checks that each entry's
paper title and budgets agree with the claim object.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iclr25._core.pretrained import Artefact

if TYPE_CHECKING:
    from iclr25._core.claims import Claim

__all__ = [
    "REGISTRY",
    "Artefact",
    "Entry",
    "MissingExtraError",
    "UnknownMethodError",
    "get_artefact",
    "get_entry",
    "load_claim",
    "load_demo",
    "make_check_seconds",
    "require",
]


@dataclass(frozen=True)
class Entry:
    """One registered method.

    Args:
        name: registry name (the method folder's name).
        target: "module:ATTRIBUTE" of its Claim.
        paper: the paper's title (short form allowed).
        claim: the headline claim in a few words.
        extra: the pip extra the method needs ("" if only core dependencies).
        smoke_s: expected seconds for one smoke seed.
        full_s: expected seconds for one full seed.
        full_seeds: seeds of the full budget (at least 3; all of them within 15 min).
        long_s: expected seconds of the whole ``long`` budget, or 0 when the claim has none.
        demo: "module:function" of the method's demo, or "" when it has none. The function is
            called as ``fn(out_dir, input=path_or_None, seed=int)``, writes its files under
            ``out_dir`` and returns their paths (``iclr25 demo NAME``).
        artefacts: the pretrained parts it ships (``iclr25 pretrain NAME`` trains them).
        threads: the claim's thread count (:attr:`Claim.threads`): the cores one seed takes.
    """

    name: str
    target: str
    paper: str
    claim: str
    extra: str = ""
    smoke_s: float = 30.0
    full_s: float = 300.0
    full_seeds: int = 3
    long_s: float = 0.0
    demo: str = ""
    artefacts: tuple[Artefact, ...] = ()
    threads: int = 1

    @property
    def full_total_s(self) -> float:
        """Expected seconds of the full budget, all seeds."""
        return self.full_s * self.full_seeds


REGISTRY: dict[str, Entry] = {
    e.name: e
    for e in (
        Entry(
            name="ftct",
            target="iclr25.methods.ftct.claim:CLAIM",
            paper="Are Transformers Able to Reason by Connecting Separated Knowledge in Training Data?",
            claim="few-shot CoT chains fragments never seen whole; zero-shot fails",
            smoke_s=20.0,
            full_s=300.0,
            long_s=4800.0,
            threads=2,
        ),
        Entry(
            name="coreset_sc",
            target="iclr25.methods.coreset_sc.claim:CLAIM",
            paper="Coreset Spectral Clustering",
            claim="spectral clustering on a coreset escapes kernel k-means' local optima",
            extra="coreset_sc",
            smoke_s=15.0,
            full_s=30.0,
            full_seeds=5,
        ),
        Entry(
            name="scope_gen",
            target="iclr25.methods.scope_gen.claim:CLAIM",
            paper=(
                "Conformal Generative Modeling with Improved Sample Efficiency "
                "through Sequential Greedy Filtering"
            ),
            claim="valid sets, smaller than CLM's at matched coverage (admissibility checks reported)",
            extra="scope_gen",
            smoke_s=15.0,
            full_s=200.0,
            long_s=1620.0,
        ),
        Entry(
            name="pal",
            target="iclr25.methods.pal.claim:CLAIM",
            paper="PAL: Sample-Efficient Personalized Reward Modeling for Pluralistic Alignment",
            claim="mixture-of-prototype rewards beat a homogeneous one; new users fit from few comparisons",
            extra="pal",
            smoke_s=5.0,
            full_s=85.0,
        ),
        Entry(
            name="comet",
            target="iclr25.methods.comet.claim:CLAIM",
            paper="More Experts Than Galaxies",
            claim="fixed random routing: overlapping fixed experts; beats dense at large width",
            extra="comet",
            smoke_s=20.0,
            full_s=300.0,
        ),
        Entry(
            name="vbll_bo",
            target="iclr25.methods.vbll_bo.claim:CLAIM",
            paper="Bayesian Optimization via Continual Variational Last Layer Training",
            claim="exact last-layer conditioning; continual training cuts surrogate cost at similar regret",
            extra="vbll_bo",
            smoke_s=15.0,
            full_s=270.0,
            long_s=2100.0,
        ),
        Entry(
            name="netmoe",
            target="iclr25.methods.netmoe.claim:CLAIM",
            paper="NetMoE: Accelerating MoE Training through Dynamic Sample Placement",
            claim="sample placement cuts modelled All-to-All time on real MoE routing",
            extra="netmoe",
            smoke_s=20.0,
            full_s=150.0,
        ),
        Entry(
            name="invmsafold",
            target="iclr25.methods.invmsafold.claim:CLAIM",
            paper="Fast Uncovering of Protein Sequence Diversity from Structure",
            claim="structure->low-rank Potts on MSAs: covariances, diversity, fast sampling",
            extra="invmsafold",
            smoke_s=20.0,
            full_s=300.0,
            long_s=1800.0,
            artefacts=(
                Artefact(
                    method="invmsafold",
                    name="ifar",
                    recipe="iclr25.methods.invmsafold.foundation:pretrain_ifar",
                    about="IF-AR inverse-folding transformer (ESM-IF1 stand-in) on the natives of 931 "
                    "5x5 lattice folds",
                    expected_s=300.0,
                    replay_steps=20,
                ),
            ),
        ),
        Entry(
            name="activation_beacon",
            target="iclr25.methods.activation_beacon.claim:CLAIM",
            paper="Long Context Compression with Activation Beacon",
            claim="8x smaller KV cache, comparable quality",
            extra="activation_beacon",
            smoke_s=20.0,
            full_s=270.0,
            long_s=3360.0,
            artefacts=(
                Artefact(
                    method="activation_beacon",
                    name="base",
                    recipe="iclr25.methods.activation_beacon.base:pretrain_base",
                    about="2-layer Llama (hidden 64): induction warm-up, then key->value recall to L = 512",
                    expected_s=150.0,
                ),
            ),
        ),
        Entry(
            name="hessian_distill",
            target="iclr25.methods.hessian_distill.claim:CLAIM",
            paper="Towards Fast, Specialized Machine Learning Force Fields",
            claim="teacher Hessian rows cut student force error; fast, energy-conserving students",
            extra="hessian_distill",
            smoke_s=20.0,
            full_s=260.0,
            long_s=5400.0,
        ),
        Entry(
            name="bigr",
            target="iclr25.methods.bigr.claim:CLAIM",
            paper=(
                "BiGR: Harnessing Binary Latent Codes for Image Generation "
                "and Improved Visual Representation Capabilities"
            ),
            claim="masked binary-code generator: better linear probe than causal AR, fewer passes",
            extra="bigr",
            smoke_s=30.0,
            full_s=150.0,
            artefacts=(
                Artefact(
                    method="bigr",
                    name="feature_net",
                    recipe="iclr25.methods.bigr.perceptual:pretrain_feature_net",
                    about="VGG-style CNN naming the 16 shapes-world classes: the perceptual loss features",
                    expected_s=120.0,
                ),
                Artefact(
                    method="bigr",
                    name="bae_shapes16",
                    recipe="iclr25.methods.bigr.tokenizer:pretrain_tokenizer",
                    about="binary autoencoder (B-AE) of 16 x 16 shapes-world images, L1 + perceptual loss",
                    expected_s=650.0,
                ),
                Artefact(
                    method="bigr",
                    name="generators_seed0",
                    recipe="iclr25.methods.bigr.generators:pretrain_generators_seed0",
                    about="the claim's generators (BiGR, AR, per-bit, causal BiGR) on shapes-world seed 0, "
                    "10,000 steps each",
                    expected_s=2100.0,
                ),
                Artefact(
                    method="bigr",
                    name="generators_seed1",
                    recipe="iclr25.methods.bigr.generators:pretrain_generators_seed1",
                    about="the claim's generators (BiGR, AR, per-bit, causal BiGR) on shapes-world seed 1, "
                    "10,000 steps each",
                    expected_s=2100.0,
                ),
                Artefact(
                    method="bigr",
                    name="generators_seed2",
                    recipe="iclr25.methods.bigr.generators:pretrain_generators_seed2",
                    about="the claim's generators (BiGR, AR, per-bit, causal BiGR) on shapes-world seed 2, "
                    "10,000 steps each",
                    expected_s=2100.0,
                ),
            ),
        ),
        Entry(
            name="wicked_oddities",
            target="iclr25.methods.wicked_oddities.claim:CLAIM",
            paper="Wicked Oddities: Selectively Poisoning for Effective Clean-Label Backdoor Attacks",
            claim="poisoning the least typical target-class images beats random at equal budget",
            extra="wicked_oddities",
            smoke_s=20.0,
            full_s=240.0,
        ),
        Entry(
            name="ditto",
            target="iclr25.methods.ditto.claim:CLAIM",
            paper="Aligning Language Models with Demonstrated Feedback",
            claim="a few demonstrations + online DPO against the model's own samples beat SFT",
            extra="ditto",
            smoke_s=30.0,
            full_s=250.0,
            artefacts=(
                Artefact(
                    method="ditto",
                    name="base",
                    recipe="iclr25.methods.ditto.base:pretrain_base",
                    about="4-layer GPT-2 (width 128) on fresh notes of the style world's base mixture",
                    expected_s=900.0,
                    replay_steps=10,
                ),
            ),
        ),
        Entry(
            name="gfn_redteam",
            target="iclr25.methods.gfn_redteam.claim:CLAIM",
            paper=(
                "Learning Diverse Attacks on Large Language Models for Robust Red-Teaming and Safety Tuning"
            ),
            claim="GFlowNet + MLE attackers: target trigger shares, above RL's toxicity-diversity curve",
            extra="gfn_redteam",
            smoke_s=30.0,
            full_s=250.0,
        ),
        Entry(
            name="procedural_influence",
            target="iclr25.methods.procedural_influence.claim:CLAIM",
            paper="Procedural Knowledge in Pretraining Drives Reasoning in Large Language Models",
            claim="EK-FAC: reasoning draws on shared procedural documents, facts on answer documents",
            extra="procedural_influence",
            smoke_s=20.0,
            full_s=240.0,
        ),
        Entry(
            name="clip_dfkd",
            target="iclr25.methods.clip_dfkd.claim:CLAIM",
            paper="Open-Vocabulary Customization from CLIP via Data-Free Knowledge Distillation",
            claim="a student distilled from text-inverted, style-diversified images beats DFKD baselines",
            extra="clip_dfkd",
            smoke_s=15.0,
            full_s=300.0,
            long_s=2700.0,
            artefacts=(
                Artefact(
                    method="clip_dfkd",
                    name="teacher_bn",
                    recipe="iclr25.methods.clip_dfkd.teacher:pretrain_teacher",
                    about="tiny BatchNorm CLIP (ModifiedResNet) on 1M fresh shapes-world image-caption pairs",
                    expected_s=1500.0,
                ),
            ),
        ),
        Entry(
            name="vie_dm",
            target="iclr25.methods.vie_dm.claim:CLAIM",
            paper=(
                "Generation and Comprehension Hand-in-Hand: Vision-guided Expression Diffusion "
                "for Boosting Referring Expression Generation and Comprehension"
            ),
            claim="diffusion-written referring expressions are accurate, diverse and lift REC accuracy",
            extra="vie_dm",
            smoke_s=15.0,
            full_s=300.0,
            artefacts=(
                Artefact(
                    method="vie_dm",
                    name="text_diffusion",
                    recipe="iclr25.methods.vie_dm.pretrain:pretrain_text_diffusion",
                    about="VIE-DM's text side (embeddings + denoiser, null visual memory): DiffuSeq loss "
                    "on unlimited grammar expressions",
                    expected_s=900.0,
                ),
                Artefact(
                    method="vie_dm",
                    name="ar_text",
                    recipe="iclr25.methods.vie_dm.pretrain:pretrain_ar_text",
                    about="the AR speaker's text layers as a language model of unlimited grammar expressions",
                    expected_s=500.0,
                ),
            ),
        ),
        Entry(
            name="rmp_sam",
            target="iclr25.methods.rmp_sam.claim:CLAIM",
            paper="RMP-SAM: Towards Real-Time Multi-Purpose Segment Anything",
            claim="one dynamic-conv model: panoptic, video instances and clicks, with a cheap decoder",
            extra="rmp_sam",
            smoke_s=10.0,
            full_s=280.0,
            long_s=3450.0,
            demo="iclr25.methods.rmp_sam.demo:demo",
        ),
        Entry(
            name="gense",
            target="iclr25.methods.gense.claim:CLAIM",
            paper="GenSE: Generative Speech Enhancement via Language Models using Hierarchical Modeling",
            claim="noisy->clean semantic, then semantic->acoustic tokens with a token chain enhance speech",
            extra="gense",
            smoke_s=30.0,
            full_s=300.0,
            demo="iclr25.methods.gense.pipeline:demo",
            threads=2,
            artefacts=(
                Artefact(
                    method="gense",
                    name="codec",
                    recipe="iclr25.methods.gense.foundations:pretrain_codec",
                    about="single-quantiser SimCodec (two-group stage, then the re-organised product "
                    "book) on clean clips of the training voices",
                    expected_s=3000.0,
                ),
                Artefact(
                    method="gense",
                    name="tokenizer",
                    recipe="iclr25.methods.gense.foundations:pretrain_tokenizer",
                    about="semantic tokenizer: a BiGRU CTC phone recogniser and k-means (K = 64) on "
                    "clean clips of the training voices",
                    expected_s=60.0,
                ),
                *(
                    Artefact(
                        method="gense",
                        name=arm,
                        recipe=f"iclr25.methods.gense.foundations:pretrain_{arm}",
                        about=f"{about}, on tokens of the shipped tokenizer and codec",
                        expected_s=seconds,
                    )
                    for arm, about, seconds in (
                        ("n2s", "N2S GPT-2: noisy -> clean semantic tokens", 700.0),
                        ("s2s", "S2S GPT-2 with token-chain prompting", 2700.0),
                        ("s2s_nc", "S2S GPT-2 without the token chain", 1300.0),
                        ("single", "single-stage GPT-2: noisy -> clean acoustic tokens", 1450.0),
                    )
                ),
            ),
        ),
    )
}


def get_artefact(method: str, name: str = "") -> list[Artefact]:
    """The artefacts of ``method`` (all of them, or the one named ``name``).

    Raises:
        UnknownMethodError: ``method`` is not registered.
        ValueError: the method ships no artefact, or none called ``name``.
    """
    entry = get_entry(method)
    if not entry.artefacts:
        shipping = sorted(e.name for e in REGISTRY.values() if e.artefacts)
        raise ValueError(
            f"method {method!r} ships no pretrained artefact; methods that do: {', '.join(shipping)}"
        )
    if not name:
        return list(entry.artefacts)
    found = [a for a in entry.artefacts if a.name == name]
    if not found:
        names = ", ".join(a.name for a in entry.artefacts)
        raise ValueError(f"method {method!r} has no artefact {name!r}; it ships: {names}")
    return found


def make_check_seconds(jobs: int = 1) -> float:
    """Expected wall time of ``make check`` (every claim, full budget) on ``jobs`` cores.

    Replays the runner's schedule: seeds in registry order, each taking its claim's ``threads``
    cores (at most ``jobs``) for its entry's ``full_s`` seconds, starting as soon as enough cores
    are free; one that does not fit waits while later ones that fit go first.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    todo = [(e.full_s, min(e.threads, jobs)) for e in REGISTRY.values() for _ in range(e.full_seeds)]
    now, free = 0.0, jobs
    running: list[tuple[float, int]] = []  # (end time, cores)
    while todo or running:
        for task in list(todo):
            if task[1] <= free:
                running.append((now + task[0], task[1]))
                free -= task[1]
                todo.remove(task)
        running.sort()
        end, cores = running.pop(0)
        now, free = end, free + cores
    return now


class UnknownMethodError(KeyError):
    """A method name that is not in the registry."""

    def __str__(self) -> str:
        return f"unknown method {self.args[0]!r}; known: {', '.join(sorted(REGISTRY))}"


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def get_entry(name: str) -> Entry:
    """The registry entry for ``name``, or :class:`UnknownMethodError`."""
    if name not in REGISTRY:
        raise UnknownMethodError(name)
    return REGISTRY[name]


def require(module: str, extra: str) -> object:
    """Import an optional dependency or raise :class:`MissingExtraError` naming the extra.

    Args:
        module: the module to import, e.g. "botorch".
        extra: the project extra that provides it, e.g. "vbll_bo".

    Returns:
        The imported module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"{module!r} is not installed; install the extra: pip install 'iclr25[{extra}]'"
        ) from err


def load_claim(name: str) -> Claim:
    """Import and return the Claim of a registered method.

    Raises:
        UnknownMethodError: ``name`` is not registered.
        MissingExtraError: the method's optional dependencies are not installed.
    """
    entry = get_entry(name)
    return _import(entry, entry.target)


def load_demo(name: str) -> Callable[..., list[Path]]:
    """Import and return the demo function of a registered method.

    Raises:
        UnknownMethodError: ``name`` is not registered.
        ValueError: the method has no demo.
        MissingExtraError: the method's optional dependencies are not installed.
    """
    entry = get_entry(name)
    if not entry.demo:
        with_demo = sorted(e.name for e in REGISTRY.values() if e.demo)
        raise ValueError(f"method {name!r} has no demo; methods with one: {', '.join(with_demo) or 'none'}")
    return _import(entry, entry.demo)


def _import(entry: Entry, target: str) -> Any:
    """The attribute ``target`` ("module:ATTRIBUTE") names, a missing dependency named by its extra."""
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except MissingExtraError:
        raise
    except ModuleNotFoundError as err:
        if err.name and not err.name.startswith("iclr25"):
            extra = entry.extra or "all"
            raise MissingExtraError(
                f"method {entry.name!r} needs {err.name!r}; install the extra: pip install 'iclr25[{extra}]'"
            ) from err
        raise
    return getattr(module, attr)
