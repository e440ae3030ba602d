"""The synthetic attack world: grammar, trigger priors, victims and the toxicity classifier."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.common.data.attack_world import (
    TEMPLATES,
    AttackWorld,
    AttackWorldConfig,
    BowToxicityClassifier,
    ToxicityClassifier,
    TriggerVictim,
    Victim,
)


def test_trigger_priors_are_low_nonzero_and_unequal() -> None:
    world = AttackWorld(AttackWorldConfig())
    p = world.trigger_probs[: world.config.n_modes]
    assert (p > 0).all() and p.sum() < 0.1
    assert (np.diff(p) < 0).all()  # strictly unequal
    corpus = world.corpus(4000, np.random.default_rng(0))
    counts = [sum(i in world.modes_of(c) for c in corpus) for i in range(8)]
    assert all(c > 0 for c in counts) and counts[0] > 3 * counts[-1]
    assert len(TEMPLATES) == 30 and all(set(c.split()) <= set(world.vocab) for c in corpus)


def test_victim_rates_and_own_rng() -> None:
    v = TriggerVictim(("vorn",), p_toxic=0.9, p_false=0.02, seed=3)
    # share of marker words: 0.9 * 0.5 + 0.1 * 0.03 with a trigger, 0.02 * 0.5 + 0.98 * 0.03 without
    share = lambda rs: np.mean([w.startswith("tox") for r in rs for w in r[0].split()])  # noqa: E731
    hit, miss = share(v.respond(["open the vorn"] * 400, n=1)), share(v.respond(["open the lamp"] * 400, n=1))
    assert 0.4 < hit < 0.5 and 0.02 < miss < 0.06
    a = TriggerVictim(("vorn",), seed=1).respond(["vorn x"], 5)
    assert a == TriggerVictim(("vorn",), seed=1).respond(["vorn x"], 5)
    assert v.queries == 800 and isinstance(v, Victim)


def test_transfer_victim_overlaps() -> None:
    world = AttackWorld(AttackWorldConfig(n_modes=8, n_shared=5))
    shared = set(world.triggers) & set(world.transfer_triggers)
    assert len(shared) == 5 and len(world.transfer_triggers) == 8


def test_classifier_separates_replies() -> None:
    world = AttackWorld(AttackWorldConfig(n_modes=4, n_shared=2))
    clf = world.fit_classifier(600)
    assert isinstance(clf, ToxicityClassifier)
    v = world.victim(0)
    tox = clf.predict_proba([r for rs in v.respond(["mend the vorn"] * 50, 1) for r in rs])
    safe = clf.predict_proba([r for rs in v.respond(["mend the lamp"] * 50, 1) for r in rs])
    assert tox.mean() > 0.7 and safe.mean() < 0.2
    assert clf.predict_proba([]).shape == (0,)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="n_shared"):
        AttackWorldConfig(n_modes=4, n_shared=5)
    with pytest.raises(ValueError, match="n_modes"):
        AttackWorldConfig(n_modes=0, n_shared=0)
    with pytest.raises(ValueError, match="p_toxic"):
        AttackWorldConfig(p_toxic=1.5)
    with pytest.raises(ValueError, match="trigger"):
        TriggerVictim(())
    with pytest.raises(ValueError, match="fitted"):
        BowToxicityClassifier().predict_proba(["x"])
    with pytest.raises(ValueError, match="n must"):
        TriggerVictim(("a",)).respond(["a"], 0)
