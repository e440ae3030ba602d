"""Adapters: tiny Hugging Face LM through generate, RDKit molecules, array loading."""

import numpy as np
import pytest

from iclr25.methods.scope_gen import (
    ArithmeticTask,
    HFGenerator,
    ScopeGen,
    build_arithmetic_lm,
    load_arrays,
    text_similarity,
)


def test_hf_generate_adapter_end_to_end(tmp_path):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    task = ArithmeticTask(n_prompts=7, seed=0)
    model, tok = build_arithmetic_lm(task, seed=0)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    gen = HFGenerator.from_pretrained(tmp_path, max_new_tokens=1)
    state = torch.get_rng_state()
    ys = gen.sample(task.prompts[0], 4, np.random.default_rng(0))
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is untouched
    assert ys == gen.sample(task.prompts[0], 4, np.random.default_rng(0))
    q = gen.quality(task.prompts[0], ys)
    assert q.shape == (4,) and ((q >= 0) & (q <= 1)).all()
    oracle = task.oracle()
    with pytest.warns(UserWarning, match="at least n=30"):  # 6 prompts: the online path warns too
        model_ = ScopeGen(alpha=0.4, m_max=3, random_state=0).calibrate(
            task.prompts[:6], gen, oracle, text_similarity
        )
    assert oracle.calls <= 6 * 3
    assert model_.predict(task.prompts[6], gen, text_similarity).trace[0][0] == "generation"


def test_hf_missing_folder_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        HFGenerator.from_pretrained(tmp_path / "nope")


def test_molecule_task_canonical_oracle():
    pytest.importorskip("rdkit")
    from iclr25.methods.scope_gen import MoleculeTask, canonical_smiles

    assert canonical_smiles("OCC") == canonical_smiles("C(O)C")
    with pytest.raises(ValueError):
        canonical_smiles("C(((")
    task = MoleculeTask(n_prompts=4, seed=0)
    oracle = task.oracle()
    truth = task.truths[0]
    from rdkit import Chem

    alt = Chem.MolToSmiles(Chem.MolFromSmiles(truth), doRandom=True, canonical=False)
    assert oracle(0, truth) and oracle(0, alt)
    assert oracle.unique_calls == 1  # the non-canonical spelling shares the label
    arr = task.to_arrays(10, np.random.default_rng(0))
    assert arr.qualities.shape == (4, 10) and ((arr.qualities >= 0) & (arr.qualities <= 1)).all()
    ys = task.sample(1, 5, np.random.default_rng(1))
    assert np.allclose(np.diag(task.similarity(ys)), 1.0)


def test_load_arrays_roundtrip_and_errors(tmp_path):
    rng = np.random.default_rng(0)
    q, s, lab = rng.random((5, 3)), np.broadcast_to(np.eye(3), (5, 3, 3)), rng.random((5, 3)) < 0.5
    for name, a in (("q", q), ("s", s), ("l", lab.astype(int))):
        np.save(tmp_path / f"{name}.npy", a)
    arr = load_arrays(tmp_path / "q.npy", tmp_path / "s.npy", tmp_path / "l.npy")
    assert arr.labels.dtype == bool and np.array_equal(arr.labels, lab)
    with pytest.raises(FileNotFoundError):
        load_arrays(tmp_path / "x.npy", tmp_path / "s.npy", tmp_path / "l.npy")
