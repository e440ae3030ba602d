"""Optional adapters of SCOPE-Gen: RDKit molecules and Hugging Face ``generate``.

Supports the experiments of *Conformal Generative Modeling with Improved Sample Efficiency
through Sequential Greedy Filtering* (Klaus-Rudolf Kladny, Bernhard Schölkopf, Michael
Muehlebach; ICLR 2025; arXiv 2410.01660), Sec. 5:

- molecular scaffold extension (the paper extends scaffolds with DiGress on MOSES): a pool of
  molecules from a small atom-by-atom grammar in this module; the scaffold is the molecule minus
  one terminal heavy atom; the generator adds one atom, biased towards the truth; admissibility
  is canonical-SMILES equality, quality is QED, similarity the duplicate indicator (RDKit, extra
  ``scope_gen``);
- a text generator over a local Hugging Face causal LM (``generate(do_sample=True,
  num_return_sequences=n)``), quality = per-token geometric-mean probability, plus a synthetic
  arithmetic QA task for tiny models built from configs.

Heavy dependencies are imported inside the functions that need them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from iclr25._core.registry import require
from iclr25.methods.scope_gen.oracle import AdmissibilityOracle
from iclr25.methods.scope_gen.tasks import TaskArrays

__all__ = [
    "ArithmeticTask",
    "HFGenerator",
    "MoleculeTask",
    "build_arithmetic_lm",
    "canonical_smiles",
    "molecule_task",
    "text_similarity",
]

_ELEMENTS = ("C", "N", "O")
_VALENCE = {"C": 4, "N": 3, "O": 2}


def canonical_smiles(smiles: str) -> str:
    """RDKit canonical SMILES (the memo key of the molecule oracle).

    Raises:
        ValueError: ``smiles`` does not parse.

    Example:
        >>> canonical_smiles("OCC") == canonical_smiles("CCO")
        True
    """
    chem = require("rdkit.Chem", "scope_gen")
    mol = chem.MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"invalid SMILES {smiles!r}")
    return chem.MolToSmiles(mol)


def _random_molecule(rng: np.random.Generator, n_atoms: int) -> Any:
    """Grow a molecule atom by atom: each new C/N/O atom bonds (single, sometimes double) to a
    random atom with free valence; occasionally a ring is closed."""
    chem = require("rdkit.Chem", "scope_gen")
    mol = chem.RWMol()
    mol.AddAtom(chem.Atom("C"))
    free = [4]
    while mol.GetNumAtoms() < n_atoms:
        el = _ELEMENTS[rng.choice(3, p=[0.7, 0.15, 0.15])]
        hosts = [i for i, f in enumerate(free) if f >= 1]
        if not hosts:
            break
        h = int(rng.choice(hosts))
        order = 2 if (free[h] >= 2 and _VALENCE[el] >= 2 and rng.random() < 0.15) else 1
        j = mol.AddAtom(chem.Atom(el))
        mol.AddBond(h, j, chem.BondType.DOUBLE if order == 2 else chem.BondType.SINGLE)
        free[h] -= order
        free.append(_VALENCE[el] - order)
    # Close one ring of size 5-6 sometimes.
    n = mol.GetNumAtoms()
    if n >= 6 and rng.random() < 0.4:
        dist = chem.GetDistanceMatrix(mol)
        cands = [
            (a, b) for a in range(n) for b in range(a + 1, n) if dist[a, b] in (4, 5) and free[a] and free[b]
        ]
        if cands:
            a, b = cands[int(rng.integers(len(cands)))]
            mol.AddBond(a, b, chem.BondType.SINGLE)
    out = mol.GetMol()
    chem.SanitizeMol(out)
    return out


def _extensions(scaffold: Any) -> list[str]:
    """Every single-atom extension (one C/N/O added by a single bond) of a scaffold, as canonical
    SMILES with multiplicity (one entry per attachment choice)."""
    chem = require("rdkit.Chem", "scope_gen")
    out = []
    for atom in scaffold.GetAtoms():
        if atom.GetTotalNumHs() < 1:
            continue
        for el in _ELEMENTS:
            rw = chem.RWMol(scaffold)
            j = rw.AddAtom(chem.Atom(el))
            rw.AddBond(atom.GetIdx(), j, chem.BondType.SINGLE)
            m = rw.GetMol()
            try:
                chem.SanitizeMol(m)
            except Exception:  # an invalid valence: not an extension
                continue
            out.append(chem.MolToSmiles(m))
    return out


class MoleculeTask:
    """Scaffold extension: recover a molecule from its scaffold by adding one heavy atom.

    Args:
        n_prompts: number of scaffolds.
        n_atoms: ``(low, high)`` heavy-atom counts of the pool molecules.
        beta: ``(a, b)`` of the per-prompt probability that the generator proposes the truth.
        n_alternatives: at most this many other single-atom additions per scaffold (random subset).
        seed: seed of the pool.

    Attributes:
        scaffolds: scaffold SMILES per prompt; truths: canonical SMILES of the full molecule;
        candidates: per prompt, the distinct extensions (canonical SMILES), their QED and the
        generator's probabilities.

    Example:
        >>> task = MoleculeTask(n_prompts=3, seed=0)  # doctest: +SKIP
        >>> task.oracle()(0, task.truths[0])  # doctest: +SKIP
        True
    """

    def __init__(
        self,
        n_prompts: int = 900,
        n_atoms: tuple[int, int] = (7, 12),
        beta: tuple[float, float] = (2.0, 4.0),
        n_alternatives: int = 6,
        seed: int = 0,
    ) -> None:
        chem = require("rdkit.Chem", "scope_gen")
        qed = require("rdkit.Chem.QED", "scope_gen")
        require("rdkit.RDLogger", "scope_gen").DisableLog("rdApp.*")
        rng = np.random.default_rng([seed, 303])
        self.scaffolds: list[str] = []
        self.truths: list[str] = []
        self.candidates: list[list[str]] = []
        self.cand_qed: list[np.ndarray] = []
        self.cand_probs: list[np.ndarray] = []
        qed_cache: dict[str, float] = {}
        while len(self.truths) < n_prompts:
            mol = _random_molecule(rng, int(rng.integers(n_atoms[0], n_atoms[1] + 1)))
            terminal = [
                a.GetIdx()
                for a in mol.GetAtoms()
                if a.GetDegree() == 1 and a.GetBonds()[0].GetBondTypeAsDouble() == 1.0
            ]
            if not terminal:
                continue
            rw = chem.RWMol(mol)
            rw.RemoveAtom(int(rng.choice(terminal)))
            scaffold = rw.GetMol()
            chem.SanitizeMol(scaffold)
            if len(chem.GetMolFrags(scaffold)) != 1:
                continue
            truth = chem.MolToSmiles(mol)
            ext = _extensions(scaffold)
            names, counts = np.unique(ext, return_counts=True)
            if truth not in set(names):
                continue
            # Alternatives: a random subset of the other extensions, weighted by attachment count.
            others = [i for i, smi in enumerate(names) if smi != truth]
            pick = sorted(rng.choice(others, size=min(n_alternatives, len(others)), replace=False).tolist())
            keep = sorted([*pick, list(names).index(truth)])
            names, counts = names[keep], counts[keep]
            p_true = rng.beta(*beta)
            probs = np.where(names == truth, 0.0, counts.astype(float))
            probs = (1.0 - p_true) * probs / max(probs.sum(), 1e-12)
            probs[list(names).index(truth)] += p_true
            for smi in names:
                if smi not in qed_cache:
                    qed_cache[smi] = float(qed.qed(chem.MolFromSmiles(smi)))
            self.scaffolds.append(chem.MolToSmiles(scaffold))
            self.truths.append(truth)
            self.candidates.append([str(x) for x in names])
            self.cand_qed.append(np.array([qed_cache[x] for x in names]))
            self.cand_probs.append(probs / probs.sum())
        self._index = [{smi: i for i, smi in enumerate(c)} for c in self.candidates]

    @property
    def prompts(self) -> list[int]:
        """Prompt ids ``0..n_prompts-1`` (prompt ``i`` is ``scaffolds[i]``)."""
        return list(range(len(self.truths)))

    def sample(self, prompt: int, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` single-atom extensions of the scaffold (canonical SMILES)."""
        c = self.candidates[prompt]
        return [c[i] for i in rng.choice(len(c), size=n, p=self.cand_probs[prompt])]

    def quality(self, prompt: int, items: Sequence[str]) -> np.ndarray:
        """QED of each extension."""
        return self.cand_qed[prompt][[self._index[prompt][canonical_smiles(y)] for y in items]]

    @staticmethod
    def similarity(items: Sequence[str]) -> np.ndarray:
        """Duplicate indicator of canonical SMILES."""
        keys = [canonical_smiles(y) for y in items]
        return np.array([[1.0 if a == b else 0.0 for b in keys] for a in keys])

    def oracle(self, budget: int | None = None) -> AdmissibilityOracle:
        """Canonical-SMILES equality with the truth, memoised by canonical SMILES."""
        return AdmissibilityOracle(
            lambda prompt, y: canonical_smiles(y) == self.truths[prompt], key=canonical_smiles, budget=budget
        )

    def to_arrays(self, m: int, rng: np.random.Generator) -> TaskArrays:
        """Draw ``m`` extensions per scaffold and store them as :class:`TaskArrays`."""
        n = len(self.truths)
        keys = np.empty((n, m), dtype=int)
        q = np.empty((n, m))
        lab = np.empty((n, m), dtype=bool)
        for i in range(n):
            v = rng.choice(len(self.candidates[i]), size=m, p=self.cand_probs[i])
            keys[i], q[i] = v, self.cand_qed[i][v]
            lab[i] = v == self._index[i][self.truths[i]]
        sim = (keys[:, :, None] == keys[:, None, :]).astype(float)  # (n, m, m)
        return TaskArrays(q, sim, lab, keys)


def molecule_task(n_prompts: int = 900, seed: int = 0) -> MoleculeTask:
    """Build the molecule task (needs the ``scope_gen`` extra: rdkit)."""
    return MoleculeTask(n_prompts=n_prompts, seed=seed)


def text_similarity(items: Sequence[str]) -> np.ndarray:
    """Jaccard similarity of whitespace token sets; 1 for identical normalised strings.

    Example:
        >>> text_similarity(["a b", "a  b", "a c"]).round(3).tolist()
        [[1.0, 1.0, 0.333], [1.0, 1.0, 0.333], [0.333, 0.333, 1.0]]
    """
    toks = [frozenset(y.lower().split()) for y in items]
    k = len(toks)
    out = np.eye(k)
    for i in range(k):
        for j in range(i + 1, k):
            union = toks[i] | toks[j]
            out[i, j] = out[j, i] = len(toks[i] & toks[j]) / len(union) if union else 1.0
    return out


class HFGenerator:
    """A Hugging Face causal LM behind the :class:`~iclr25.methods.scope_gen.Generator` protocol.

    Samples with ``model.generate(do_sample=True, num_return_sequences=n)``; quality is the
    geometric-mean token probability of the completion under the model.

    Args:
        model: a causal LM (``transformers.PreTrainedModel``), already on ``device``.
        tokenizer: its tokenizer (left padding for batches).
        max_new_tokens: completion length cap.
        temperature: sampling temperature.
        device: where inputs go ("cpu", "cuda", ...); chosen by the caller.

    Example:
        >>> model, tok = build_arithmetic_lm(seed=0)  # doctest: +SKIP
        >>> gen = HFGenerator(model, tok, max_new_tokens=2)  # doctest: +SKIP
        >>> len(gen.sample("3 + 4 =", 3, np.random.default_rng(0)))  # doctest: +SKIP
        3
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_new_tokens: int = 8,
        temperature: float = 1.0,
        device: str = "cpu",
    ) -> None:
        if max_new_tokens < 1 or temperature <= 0:
            raise ValueError("max_new_tokens must be positive and temperature > 0")
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens, self.temperature, self.device = max_new_tokens, temperature, device

    @classmethod
    def from_pretrained(
        cls, path: str | os.PathLike[str], *, device: str = "cpu", **kwargs: Any
    ) -> HFGenerator:
        """Load a model and tokenizer from a local folder (``local_files_only=True``; never the hub)."""
        transformers = require("transformers", "scope_gen")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise FileNotFoundError(f"no model folder with config.json at {str(path)!r}")
        tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = (
            transformers.AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device).eval()
        )
        return cls(model, tok, device=device, **kwargs)

    def sample(self, prompt: str, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` sampled completions of ``prompt`` (seeded from ``rng``; the global RNG is restored)."""
        return self.sample_batch([prompt], n, rng)[0]

    def sample_batch(
        self,
        prompts: Sequence[str],
        n: int,
        rng: np.random.Generator,
        *,
        batch_size: int = 64,
        with_quality: bool = False,
    ) -> Any:
        """``n`` sampled completions of each prompt, ``batch_size`` prompts per ``generate`` call.

        One seed is drawn from ``rng`` for the whole call; torch's global RNG is restored
        afterwards. Prompts of different lengths are left-padded. Special tokens other than
        end-of-sequence are never sampled.

        Args:
            prompts: the prompts.
            n: completions per prompt.
            rng: the seed source.
            batch_size: prompts per ``generate`` call.
            with_quality: also return each completion's :meth:`quality`, read off the raw logits
                that ``generate`` computed anyway instead of a second forward pass. It equals
                :meth:`quality` up to float rounding whenever the decoded text tokenises back to
                the sampled tokens (always so for word-level tokenizers).

        Returns:
            One list of ``n`` completions per prompt; with ``with_quality``, also their qualities
            as an array of shape ``(len(prompts), n)``.
        """
        torch = require("torch", "scope_gen")
        if n < 1 or batch_size < 1:
            raise ValueError(f"n and batch_size must be positive, got {n}, {batch_size}")
        dev = torch.device(self.device)
        forked = [dev.index or 0] if dev.type == "cuda" else []
        out: list[list[str]] = []
        qualities: list[np.ndarray] = []
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        # Special tokens other than end-of-sequence are never sampled: decoding would drop them,
        # and the text would no longer be the sampled token sequence.
        suppress = sorted({i for i in self.tokenizer.all_special_ids if i is not None and i != eos})
        with torch.random.fork_rng(devices=forked), torch.no_grad():
            torch.manual_seed(int(rng.integers(2**31)))
            for i in range(0, len(prompts), batch_size):
                chunk = list(prompts[i : i + batch_size])
                enc = self.tokenizer(chunk, return_tensors="pt", padding=True).to(self.device)
                gen = self.model.generate(
                    **enc,
                    do_sample=True,
                    num_return_sequences=n,
                    max_new_tokens=self.max_new_tokens,
                    temperature=self.temperature,
                    top_k=0,
                    # Finished rows are filled with end-of-sequence tokens (dropped when decoding).
                    pad_token_id=eos if eos is not None else pad,
                    eos_token_id=eos,
                    suppress_tokens=suppress or None,
                    return_dict_in_generate=True,
                    output_logits=with_quality,
                )
                new = gen.sequences[:, enc["input_ids"].shape[1] :]  # (len(chunk) * n, T), prompt-major
                texts = [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]
                out += [texts[j * n : (j + 1) * n] for j in range(len(chunk))]
                if with_quality:
                    logits = torch.stack(gen.logits, dim=1).float()  # (B, T, V): raw, before sampling
                    lp = torch.log_softmax(logits, dim=-1).gather(2, new[..., None])[..., 0]  # (B, T)
                    # The completion is every token before the first end-of-sequence token.
                    ended = torch.cumsum((new == eos).long(), dim=1) > 0
                    valid = (~ended & (new != pad)).float()
                    count = valid.sum(dim=1)
                    mean = (lp * valid).sum(dim=1) / count.clamp(min=1)
                    q = torch.where(count > 0, mean.exp(), torch.zeros_like(mean))
                    qualities.append(q.cpu().numpy().reshape(len(chunk), n).astype(float))
        if with_quality:
            return out, np.concatenate(qualities, axis=0)
        return out

    def quality(self, prompt: str, items: Sequence[str]) -> np.ndarray:
        """Geometric-mean token probability of each completion given the prompt, in [0, 1]."""
        return self.quality_batch([prompt], [items])[0]

    def quality_batch(
        self, prompts: Sequence[str], items: Sequence[Sequence[str]], *, batch_size: int = 1024
    ) -> np.ndarray:
        """:meth:`quality` of ``items[i]`` given ``prompts[i]`` for every prompt, batched.

        Each (prompt, completion) pair is one right-padded row of a forward pass; an empty
        completion has quality 0.

        Returns:
            The qualities, one row per prompt.

        Shape:
            -> (len(prompts), m) with ``m = len(items[i])`` for every ``i``.
        """
        torch = require("torch", "scope_gen")
        if len(prompts) != len(items) or len({len(ys) for ys in items}) > 1:
            raise ValueError("need one list of items per prompt, all of the same length")
        m = len(items[0]) if items else 0
        rows = []  # (prompt ids, completion ids) per pair, prompt-major
        for p, ys in zip(prompts, items, strict=True):
            p_ids = self.tokenizer(p)["input_ids"]
            rows += [
                (p_ids, self.tokenizer(y, add_special_tokens=False)["input_ids"] if y else []) for y in ys
            ]
        out = np.zeros(len(rows))
        pad = self.tokenizer.pad_token_id
        with torch.no_grad():
            for i in range(0, len(rows), batch_size):
                chunk = rows[i : i + batch_size]
                width = max(len(a) + len(b) for a, b in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for r, (a, b) in enumerate(chunk):
                    ids[r, : len(a) + len(b)] = torch.tensor(a + b)
                    mask[r, : len(a) + len(b)] = 1
                ids, mask = ids.to(self.device), mask.to(self.device)
                logp = torch.log_softmax(self.model(input_ids=ids, attention_mask=mask).logits.float(), -1)
                tok_lp = logp[:, :-1].gather(2, ids[:, 1:, None])[..., 0].cpu().numpy()  # (B, width-1)
                for r, (a, b) in enumerate(chunk):
                    if b:  # token t of the completion is predicted at position len(a) + t - 1
                        out[i + r] = float(np.exp(tok_lp[r, len(a) - 1 : len(a) + len(b) - 1].mean()))
        return out.reshape(len(prompts), m)


class ArithmeticTask:
    """Synthetic arithmetic QA: ``"a + b ="`` with answer ``str(a + b)``.

    Args:
        n_prompts: number of questions.
        max_operand: operands are drawn from ``0..max_operand``.
        seed: seed of the questions.

    Example:
        >>> task = ArithmeticTask(n_prompts=2, seed=0)
        >>> task.oracle()(task.prompts[0], task.answers[0])
        True
    """

    def __init__(self, n_prompts: int = 100, max_operand: int = 9, seed: int = 0) -> None:
        rng = np.random.default_rng([seed, 404])
        ab = rng.integers(0, max_operand + 1, size=(n_prompts, 2))
        self.prompts = [f"{a} + {b} =" for a, b in ab]
        self.answers = [str(a + b) for a, b in ab]
        self._answer = dict(zip(self.prompts, self.answers, strict=True))
        self.vocab = [str(v) for v in range(2 * max_operand + 1)] + ["+", "="]

    def oracle(self, budget: int | None = None) -> AdmissibilityOracle:
        """Exact match of the normalised completion with the answer."""
        return AdmissibilityOracle(lambda x, y: " ".join(str(y).split()) == self._answer[x], budget=budget)


def build_arithmetic_lm(
    task: ArithmeticTask | None = None, *, n_layer: int = 1, d_model: int = 32, seed: int = 0
) -> tuple[Any, Any]:
    """A tiny, randomly initialised GPT-2 and word-level tokenizer over the arithmetic vocabulary.

    Returns:
        ``(model, tokenizer)`` on the CPU.
    """
    tiny_lm = require("iclr25.common.tiny_lm", "scope_gen")
    task = task or ArithmeticTask(n_prompts=1)
    tok = tiny_lm.build_word_tokenizer(task.vocab)
    model = tiny_lm.build_tiny_lm(
        "gpt2", vocab_size=len(tok), n_layer=n_layer, n_head=2, d_model=d_model, seed=seed
    )
    return model, tok
