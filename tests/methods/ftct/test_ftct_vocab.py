"""Tests of the FTCT tokenizer."""

import pytest

from iclr25.methods.ftct import FTCTTokenizer


@pytest.fixture(scope="module")
def tok() -> FTCTTokenizer:
    return FTCTTokenizer(n_letters=26, modulus=200, context_div=4)


def test_size(tok):
    # 4 special + 4 punctuation + 26 letters + 200 values + 104 context tokens
    assert len(tok) == 4 + 4 + 26 + 200 + 104


def test_round_trip_through_the_wrapped_tokenizer(tok):
    words = ["Q", "=", "?:", "A~3", "A", "=", "117", ",", "B", "=", "5", "<nl>"]
    ids = tok.encode(words)
    assert tok.decode(ids) == words
    assert tok.hf(" ".join(words))["input_ids"] == ids
    assert tok.hf.decode(ids) == " ".join(words)


def test_one_token_per_value(tok):
    ids = [tok.value_id(v) for v in range(200)]
    assert len(set(ids)) == 200
    assert all(tok.is_value(i) and tok.value_of(i) == v for v, i in enumerate(ids))
    assert tok.encode([123]) == [tok.value_id(123)]


def test_out_of_vocabulary_raises(tok):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.value_id(200)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tok.encode([-1])
    with pytest.raises(ValueError, match="not in the FTCT vocabulary"):
        tok.encode(["hello"])
    with pytest.raises(ValueError):
        tok.letter_id("a")  # only 26 letters


def test_context_tokens_are_private(tok):
    a, b = set(tok.context_ids("A")), set(tok.context_ids("B"))
    assert len(a) == 4 and not a & b
    assert all(tok.context_owner(i) == "A" for i in a)


def test_save_and_reload(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    back = FTCTTokenizer.from_pretrained(tmp_path)
    assert (back.n_letters, back.modulus, back.context_div) == (26, 200, 4)
    assert back.encode(["A", "=", 7]) == tok.encode(["A", "=", 7])
