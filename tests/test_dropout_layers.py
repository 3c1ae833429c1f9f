"""Compact layers (Song et al. §III, Fig. 3): equal to conventional dropout driven by the same mask,
forward and backward, while computing only the kept rows/tiles."""
import itertools

import pytest
import torch
import torch.nn.functional as F

from lab.dropout import (ApproxDropoutLinear, Compact, CompactLinear, Pattern, approx_dropout_linear,
                         compact_linear, dense)
from lab.dropout.compact import _weight_piece
from lab.dropout.models import DropoutLSTM, DropoutMLP, approx_dropout, clip_grad_norm, grad_norm, sgd

# dp = 1 (everything kept), strided rows, dp beyond the 45-50 units (empty), partial tiles (70 x 45 with
# 32 x 16 or 16 x 8 tiles: several row groups), one group, more tiles skipped than exist
PATTERNS = [None, Pattern("row", 1, 0), Pattern("row", 3, 1), Pattern("row", 64, 50),
            Pattern("tile", 3, 2, (32, 16)), Pattern("tile", 5, 0, (16, 8)), Pattern("tile", 200, 150, (8, 8))]


pytestmark = pytest.mark.usefixtures("one_thread")


def _check_against_reference(pin, pout, layout, sparse, device="cpu", B=70, n_in=50, n_out=45, seed=0):
    """Two layers: producer (pattern pin on its 50 outputs) -> layer under test (pattern pout).
    Reference: dense GEMMs with the masks multiplied in (conventional dropout, same mask)."""
    g = torch.Generator().manual_seed(seed)
    kw = {"dtype": torch.float64}
    x0 = torch.randn(B, 30, generator=g, **kw).to(device)
    w0 = torch.randn(n_in, 30, generator=g, **kw).to(device)
    w = torch.randn(*((n_out, n_in) if layout == "out_in" else (n_in, n_out)), generator=g, **kw).to(device)
    b = torch.randn(n_out, generator=g, **kw).to(device)
    w0c, w0r = w0.clone().requires_grad_(), w0.clone().requires_grad_()
    wc, wr = w.clone().requires_grad_(), w.clone().requires_grad_()
    bc, br = b.clone().requires_grad_(), b.clone().requires_grad_()
    if pin is None:
        xin, xref = torch.tanh(x0 @ w0c.t()), torch.tanh(x0 @ w0r.t())
    else:
        xin = approx_dropout_linear(x0, w0c, None, pin, "tanh", sparse_grad=sparse)
        assert isinstance(xin, Compact)
        xref = torch.tanh(x0 @ w0r.t()) * pin.mask(B, n_in, device) * pin.scale
    out = approx_dropout_linear(xin, wc, bc, pout, "relu", layout=layout, sparse_grad=sparse)
    mask = pout.mask(B, n_out, device) if pout is not None else 1.0
    scale = pout.scale if pout is not None else 1.0
    ref = torch.relu(xref @ (wr.t() if layout == "out_in" else wr) + br) * mask * scale
    torch.testing.assert_close(dense(out), ref)
    up = torch.randn(B, n_out, generator=g, **kw).to(device)
    (dense(out) * up).sum().backward()
    (ref * up).sum().backward()
    assert wc.grad.is_sparse == sparse and w0c.grad.is_sparse == (sparse and pin is not None)
    assert not bc.grad.is_sparse
    for got, want in ((wc, wr), (bc, br), (w0c, w0r)):
        torch.testing.assert_close(got.grad.to_dense() if got.grad.is_sparse else got.grad, want.grad)


@pytest.mark.parametrize("pin,pout", [(a, b) for a, b in itertools.product(PATTERNS, PATTERNS) if a or b])
@pytest.mark.parametrize("layout", ["out_in", "in_out"])
def test_compact_equals_masked_reference(pin, pout, layout):
    _check_against_reference(pin, pout, layout, sparse=True)


@pytest.mark.parametrize("pin,pout", [(Pattern("row", 3, 0), Pattern("tile", 3, 1, (16, 16))),
                                      (Pattern("tile", 4, 1, (16, 8)), None), (None, Pattern("row", 2, 1))])
def test_dense_weight_gradient_option(pin, pout):
    _check_against_reference(pin, pout, "out_in", sparse=False)


def test_rdp_uses_strided_views_and_row_sparse_gradients():
    w = torch.randn(12, 8, requires_grad=True)
    piece = _weight_piece(w, "out_in", slice(None), slice(1, 12, 3))
    assert piece.data_ptr() == w.data_ptr() + 8 * w.element_size()  # a view of rows 1, 4, 7, 10: no copy
    assert piece.stride() == (24, 1)
    wt = torch.randn(12, 5)  # consumer stored (in, out): kept inputs are rows, again a view
    assert _weight_piece(wt, "in_out", slice(2, 12, 4), slice(None)).data_ptr() == wt[2].data_ptr()
    x = torch.randn(4, 8)
    out = approx_dropout_linear(x, w, None, Pattern("row", 3, 1), "relu")
    assert out.values[0].shape == (4, 4) and out.kept_fraction() == 4 / 12
    out.values[0].sum().backward()
    assert w.grad.is_sparse and w.grad._indices().flatten().tolist() == [1, 4, 7, 10]
    assert w.grad._values().shape == (4, 8)  # only the kept rows were computed


def test_tile_pattern_runs_one_gemm_per_group():
    x = torch.randn(96, 64)
    w = torch.randn(64, 64)
    pat = Pattern("tile", 3, 0, (32, 32))  # J = 2 tile columns, 3 tile rows: offsets 0, 1, 2
    out = approx_dropout_linear(x, w, None, pat)
    assert len(out.values) == len(pat.blocks(96, 64)) == 3
    assert sum(v.numel() for v in out.values) == int(pat.mask(96, 64).sum())


def test_layer_module_training_and_eval():
    torch.manual_seed(0)
    layer = ApproxDropoutLinear(20, 40, p=0.5, kind="row", seed=3)
    head = CompactLinear(40, 5, seed=4)
    x = torch.randn(8, 20)
    pat = Pattern("row", 2, 1)
    h = layer(x, pat)
    assert isinstance(h, Compact) and layer.last_pattern == pat
    ref = torch.relu(F.linear(x, layer.weight, layer.bias)) * pat.mask(8, 40) * 2
    torch.testing.assert_close(h.to_dense(), ref)
    torch.testing.assert_close(head(h), ref @ head.weight_t + head.bias)
    sampled = layer(x)
    assert isinstance(sampled, Compact) and layer.last_pattern is not None
    layer.eval()
    torch.testing.assert_close(layer(x), torch.relu(F.linear(x, layer.weight, layer.bias)))
    conv = ApproxDropoutLinear(20, 40, p=0.5, kind="bernoulli").train()
    y = conv(x)
    assert isinstance(y, torch.Tensor) and 0.3 < float((y == 0).float().mean()) < 0.8


def test_bad_inputs_are_clear_errors():
    w = torch.randn(6, 4)
    with pytest.raises(ValueError, match="expects 4"):
        compact_linear(torch.randn(3, 5), w, None, Pattern("row", 2, 0))
    with pytest.raises(ValueError, match="bias must have shape"):
        compact_linear(torch.randn(3, 4), w, torch.randn(5), Pattern("row", 2, 0))
    with pytest.raises(ValueError, match="layout"):
        compact_linear(torch.randn(3, 4), w, None, None, layout="rows")
    with pytest.raises(ValueError, match="batch, features"):
        compact_linear(torch.randn(3, 4, 1), w)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        ApproxDropoutLinear(4, 6, p=1.0)
    with pytest.raises(ValueError, match="kind"):
        ApproxDropoutLinear(4, 6, p=0.5, kind="block")
    with pytest.raises(ValueError, match="activation"):
        approx_dropout_linear(torch.randn(3, 4), w, None, None, "gelu2")
    with pytest.raises(ValueError, match="rates"):
        DropoutMLP([10, 8, 8, 2], (0.5,))
    with pytest.raises(ValueError, match="out of reach"):
        ApproxDropoutLinear(4, 6, p=0.9, max_dp=4)


def test_dp_larger_than_layer_keeps_shapes():
    x = torch.randn(5, 4, requires_grad=True)
    w = torch.randn(3, 4, requires_grad=True)
    out = approx_dropout_linear(x, w, torch.zeros(3), Pattern("row", 8, 5))  # bias 5 >= 3 rows: nothing kept
    assert out.to_dense().shape == (5, 3) and out.values[0].shape == (5, 0)
    head = CompactLinear(3, 2)
    y = head(out)
    torch.testing.assert_close(y, head.bias.expand(5, 2))
    y.sum().backward()
    assert x.grad.abs().sum() == 0


def test_mlp_and_optimizer_with_sparse_gradients_match_dense():
    torch.manual_seed(0)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    m1 = DropoutMLP([16, 24, 24, 4], (0.5, 0.5), "tile", tile=(8, 8), seed=1)
    m2 = DropoutMLP([16, 24, 24, 4], (0.5, 0.5), "tile", tile=(8, 8), seed=1)
    for layer in [*m2.hidden, m2.head]:
        layer.sparse_grad = False
    o1, o2 = sgd(m1.parameters(), 0.1, 0.9), sgd(m2.parameters(), 0.1, 0.9)
    for step in range(3):
        pats = [Pattern("tile", 3, step % 3, (8, 8)), Pattern("row", 2, 1)]
        for m, o in ((m1, o1), (m2, o2)):
            o.zero_grad()
            h = x
            for layer, pt in zip(m.hidden, pats):
                h = layer(h, pt)
            F.cross_entropy(m.head(h), y).backward()
            o.step()
        for p1, p2 in zip(m1.parameters(), m2.parameters()):
            torch.testing.assert_close(p1, p2)
    assert any(p.grad.is_sparse for p in m1.parameters())
    assert m1.eval()(x).shape == (32, 4)


def test_lstm_language_model_runs_every_kind():
    tokens = torch.randint(0, 50, (7, 4), generator=torch.Generator().manual_seed(0))
    for kind in ("bernoulli", "row", "tile", "none"):
        m = DropoutLSTM(50, 16, 2, (0.5, 0.5), kind, tile=(8, 8), seed=0)
        logits, state = m(tokens, m.init_state(4))
        assert logits.shape == (28, 50) and len(state) == 2
        F.cross_entropy(logits, tokens.reshape(-1)).backward()
        params = list(m.parameters())
        total = grad_norm(params)
        assert torch.isfinite(total) and total > 0
        clip_grad_norm(params, 1e-3)
        assert float(grad_norm(params)) <= 1.01e-3
    x = torch.randn(10, 12)
    pat = Pattern("tile", 3, 1, (4, 4))
    torch.testing.assert_close(approx_dropout(x, pat).to_dense(), x * pat.mask(10, 12) * 3)


@pytest.mark.gpu
@pytest.mark.parametrize("pin,pout", [(None, Pattern("row", 3, 1)), (Pattern("row", 2, 0), Pattern("tile", 3, 2)),
                                      (Pattern("tile", 5, 0, (16, 8)), None)])
def test_compact_equals_masked_reference_on_gpu(pin, pout):
    for layout in ("out_in", "in_out"):
        _check_against_reference(pin, pout, layout, sparse=True, device="cuda")
