"""train() and eval() compute the same function (dropout 0), and the contact bias acts in eval mode.

Regression tests: the lattice encoder once passed a per-head float attention mask to
``nn.TransformerEncoder``, whose eval-mode fast path did not apply it the way training did, so
every sampler decoded from embeddings the decoder had never seen.
"""

from __future__ import annotations

import torch

from iclr25.methods.invmsafold import IFAR, DecoderConfig, InvMSAFold, LatticeEncoder, LatticeWorld

_CFG = DecoderConfig(
    embed_dim=16, d_model=16, n_layers=2, n_heads=4, dim_feedforward=32, rank=3, q=20, dropout=0.0
)


def _batch() -> tuple[LatticeWorld, torch.Tensor, torch.Tensor, LatticeEncoder]:
    world = LatticeWorld((4, 4))
    torch.manual_seed(0)
    enc = LatticeEncoder(max_len=16, coord_dim=2, d_model=16, n_layers=2, n_heads=4)
    f0 = enc.features(world.structures[3])
    f1 = enc.features(world.structures[7])
    feats = torch.stack([f0, f1])
    mask = torch.zeros(2, 16, dtype=torch.bool)
    mask[1, 12:] = True  # the second chain is padded
    feats[1, 12:] = 0.0
    return world, feats, mask, enc


def _train_and_eval(module: torch.nn.Module, fn) -> tuple[object, object]:
    module.train()
    a = fn()
    module.eval()
    with torch.no_grad():
        b = fn()
    return a, b


def test_encoder_train_equals_eval() -> None:
    _, feats, mask, enc = _batch()
    for pm in (None, mask):
        a, b = _train_and_eval(enc, lambda pm=pm: enc(feats, pm))
        assert torch.allclose(a, b, atol=1e-5), float((a - b).abs().max())


def test_contact_bias_changes_eval_output() -> None:
    _, feats, mask, enc = _batch()
    enc.eval()
    with torch.no_grad():
        before = enc(feats, mask)
        enc.contact_bias.mul_(5.0)
        after = enc(feats, mask)
    assert float((after - before).abs().max()) > 0.1


def test_encoder_matches_torch_training_path() -> None:
    """The written-out attention is the library layer's own computation with the bias as a mask."""
    _, feats, _, enc = _batch()
    enc.train()
    bias = enc.contact_bias[None, :, None, None] * feats[..., :16][:, None]
    ref = enc.layers(enc.inp(feats), mask=bias.reshape(-1, 16, 16))
    assert torch.allclose(enc(feats), ref, atol=1e-5)


def test_invmsafold_train_equals_eval() -> None:
    world, _, _, enc = _batch()
    torch.manual_seed(1)
    model = InvMSAFold(_CFG, enc)
    s = world.structures[5]
    a, b = _train_and_eval(model, lambda: model(enc.embed(s)[None]))
    for x, y in zip(a, b, strict=True):
        assert torch.allclose(x, y, atol=1e-5), float((x - y).abs().max())
    # the sampling entry point (which switches to eval) sees the training-mode parameters
    model.train()
    V, h = model(enc.embed(s)[None])
    params = model.potts(s)
    assert torch.allclose(params.V, V[0], atol=1e-5) and torch.allclose(params.h, h[0], atol=1e-5)


def test_invmsafold_train_equals_eval_with_padding() -> None:
    _, feats, mask, enc = _batch()
    torch.manual_seed(1)
    model = InvMSAFold(_CFG, enc)
    a, b = _train_and_eval(model, lambda: model(enc(feats, mask), mask))
    for x, y in zip(a, b, strict=True):
        assert torch.allclose(x, y, atol=1e-5), float((x - y).abs().max())


def test_ifar_train_equals_eval() -> None:
    world, feats, mask, enc = _batch()
    torch.manual_seed(2)
    model = IFAR(enc, q=20, d_model=16, n_layers=2, n_heads=4, dim_feedforward=32)
    tok = torch.randint(0, 20, (2, 3, 16), generator=torch.Generator().manual_seed(0))
    a, b = _train_and_eval(model, lambda: model(feats, tok, mask))
    valid = ~mask[:, None, :, None].expand_as(a)
    assert torch.allclose(a[valid], b[valid], atol=1e-5), float((a - b)[valid].abs().max())
    s = world.structures[5]
    model.train()
    lp_train = model.log_prob(s, tok[0])
    model.eval()
    with torch.no_grad():
        lp_eval = model.log_prob(s, tok[0])
    assert torch.allclose(lp_train, lp_eval, atol=1e-4)
