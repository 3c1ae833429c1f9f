"""Compressed-collective hops (lab.codecs.hop, kernels/collective.cu): on the CPU the entry points
equal the codec compositions and the kernels' arithmetic (in torch) equals them too; launch
plans and kernel names; the kernels == the CPU reference bit for bit through hop's dispatch and
the real launchers, on a GPU (`gpu`) and on the CPU emulation of CUDA (`emu`, tests/cuda_emu).
kernels/collective.cu is compile-checked with nvcc by tests/test_kernels.py (every *.cu)."""
from __future__ import annotations

import copy
import re
from dataclasses import replace

import pytest
import torch

from lab.backend import kernel_source
from lab.codecs import Encoded, ErrorFeedback, get_codec
from lab.codecs import cuda as CC
from lab.codecs import cuda_hop as H
from lab.codecs import hop

# name -> (registry name, options); mantissa keeps the paper's scale='none'
CODECS = {
    "dynamic_tree": ("dynamic_tree", {}),
    "dynamic_tree-b64": ("dynamic_tree", {"block_size": 64}),
    "dynamic_tree-b4096": ("dynamic_tree", {"block_size": 4096}),
    "linear": ("linear", {}),
    "linear-b64": ("linear", {"block_size": 64}),
    "linear-b4096": ("linear", {"block_size": 4096}),
    "mantissa": ("mantissa", {}),
    "bnb_dynamic": ("bnb_dynamic", {}),
    "bnb_dynamic-b64": ("bnb_dynamic", {"block_size": 64}),
    "bnb_dynamic-b4096": ("bnb_dynamic", {"block_size": 4096}),
}
# the search and rounding variants and a 4-bit table, for the GPU grid
VARIANTS = {
    "dynamic_tree-binary": ("dynamic_tree", {"search": "binary"}),
    "dynamic_tree-b64-binary": ("dynamic_tree", {"block_size": 64, "search": "binary"}),
    "dynamic_tree-paper-b4096": ("dynamic_tree", {"rounding": "paper", "block_size": 4096}),
    "mantissa-binary": ("mantissa", {"search": "binary"}),
    "layout4-b100": ("layout", {"total_bits": 4, "block_size": 100}),
}
LENGTHS = (0, 1, 3, 63, 65, 4097, 3 * 4096 + 5)  # empty, one, odd remainders of every block size
GPU_LENGTHS = LENGTHS + (200_003, (1 << 20) + 3)
# emulated: also multiples of 4 (decode_sum's and the hops' vector paths) and every remainder mod 4
EMU_LENGTHS = LENGTHS + (2, 4, 64, 4096, 4100, 3 * 4096 + 6, 3 * 4096 + 8)


def _codec(name: str):
    reg, options = {**CODECS, **VARIANTS}[name]
    return get_codec(reg, **options)


def _data(n: int, seed: int) -> torch.Tensor:
    """Heavy-tailed float32 values with exact zeros and negative zeros; past 3 blocks of 4096, one
    all-zero block and one block so small that 1/absmax overflows."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=g) * torch.exp(2 * torch.randn(n, generator=g))
    x[torch.rand(n, generator=g) < 0.03] = 0.0
    x[torch.rand(n, generator=g) < 0.03] = -0.0
    if n > 3 * 4096:
        x[4096:8192] = 0.0
        x[8192:12288] *= 1e-39
    return x


def _fit(codec, x: torch.Tensor) -> torch.Tensor:
    """x, kept inside an unscaled table's range (scale='none': mantissa) with room for a few sums,
    so a hop's sum does not saturate (a saturating sum takes the composition, to count it)."""
    if getattr(codec, "scale", None) != "none":
        return x
    m = float(codec.values.abs().max()) / 8
    return x.clamp(-m, m)


def _payloads(codec, n: int, count: int, seed: int = 0) -> list[Encoded]:
    return [codec.encode(_fit(codec, _data(n, seed + i) * (1 + i))) for i in range(count)]


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def _assert_same(got: Encoded, want: Encoded) -> None:
    assert (got.codec, got.shape, got.dtype, got.wire_bytes, got.meta) == \
        (want.codec, want.shape, want.dtype, want.wire_bytes, want.meta)
    assert got.tensors.keys() == want.tensors.keys()
    for k in want.tensors:
        g, w = got.tensors[k].cpu(), want.tensors[k].cpu()
        assert g.dtype == w.dtype and g.shape == w.shape, k
        bad = (_bits(g) != _bits(w)).nonzero()
        assert bad.numel() == 0, f"{k}: {bad.numel()} differ, first at {bad[:5, 0].tolist()}: " \
                                 f"got {g[bad[:5, 0]].tolist()}, want {w[bad[:5, 0]].tolist()}"


def _to(enc: Encoded, device: str | torch.device) -> Encoded:
    return Encoded(enc.codec, enc.shape, enc.dtype, {k: v.to(device) for k, v in enc.tensors.items()},
                   enc.wire_bytes, dict(enc.meta))


# ------------------------------------------------------------------ CPU: the compositions

@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("name", sorted(CODECS))
def test_collective_hops_equal_compositions(name: str, n: int) -> None:
    codec = _codec(name)
    assert hop.fusable(codec)
    a, b = _payloads(codec, n, 2, seed=n)
    want = codec.encode(codec.decode(a).float() + codec.decode(b).float())
    _assert_same(hop.hop_codes(codec, a, b), want)
    x = _data(n, seed=99) * 3
    _assert_same(hop.hop_mixed(codec, a, x), codec.encode(codec.decode(a).float() + x))
    for P in (1, 3, 5):
        ps = _payloads(codec, n, P, seed=7 * n)
        want_sum = torch.zeros(n)
        for p in ps:
            want_sum = want_sum + codec.decode(p).float()
        got = hop.decode_sum(codec, ps)
        assert got.dtype == torch.float32 and torch.equal(_bits(got), _bits(want_sum))


def _emulate_decode(codec, enc: Encoded) -> torch.Tensor:
    """values[code] * (scale of the code's block), float32: the kernels' decode."""
    n = enc.numel
    B = codec.block_size
    idx = torch.zeros(n, dtype=torch.long) if B is None else torch.arange(n) // B
    return codec.values[enc.tensors["codes"].long()] * enc.tensors["scales"][idx]


def _emulate_encode(codec, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernels' encode of the sum s: absmax per block / tensor (1 for 'none'), inv, bucketize."""
    n, B = s.numel(), codec.block_size
    if codec.scale == "none":
        scales, per = torch.ones(1), torch.ones(n)
    elif B is None:
        scales = s.abs().max().reshape(1)
        per = scales.expand(n)
    else:
        nb = -(-n // B)
        scales = torch.cat([s, s.new_zeros(nb * B - n)]).view(nb, B).abs().amax(1)
        per = scales.repeat_interleave(B)[:n]
    from lab.codecs import cpu

    return torch.bucketize(cpu.scale_to_unit(s, per), codec.bounds, right=True).to(torch.uint8), scales


@pytest.mark.parametrize("n", (1, 63, 65, 4097, 3 * 4096 + 5))
@pytest.mark.parametrize("name", sorted(CODECS))
def test_collective_kernel_arithmetic_equals_compositions(name: str, n: int) -> None:
    """The formulas kernels/collective.cu computes, in torch, equal the codec compositions."""
    codec = _codec(name)
    a, b = _payloads(codec, n, 2, seed=n)
    x = _data(n, seed=5)
    for s, want in ((_emulate_decode(codec, a) + _emulate_decode(codec, b), hop.hop_codes_reference(codec, a, b)),
                    (_emulate_decode(codec, a) + x, hop.hop_mixed_reference(codec, a, x))):
        codes, scales = _emulate_encode(codec, s)
        assert torch.equal(codes, want.tensors["codes"])
        assert torch.equal(_bits(scales), _bits(want.tensors["scales"]))
    ps = _payloads(codec, n, 4, seed=3)
    acc = torch.zeros(n)
    for p in ps:
        acc = acc + _emulate_decode(codec, p)
    assert torch.equal(_bits(acc), _bits(hop.decode_sum_reference(codec, ps)))


@pytest.mark.parametrize("name", ["fp16", "int8", "topk", "qsgd"])
def test_collective_hops_any_codec(name: str) -> None:
    """Codecs without a fused kernel go through their own encode/decode (a stochastic codec
    replays the same random draws from a copy of its state)."""
    codec = get_codec(name)
    assert not hop.fusable(codec)
    g = torch.Generator().manual_seed(0)
    a, b = codec.encode(torch.randn(1000, generator=g)), codec.encode(torch.randn(1000, generator=g))
    x = torch.randn(1000, generator=g)
    twin = copy.deepcopy(codec)
    _assert_same(hop.hop_codes(codec, a, b), twin.encode(twin.decode(a).float() + twin.decode(b).float()))
    _assert_same(hop.hop_mixed(codec, a, x), twin.encode(twin.decode(a).float() + x))
    assert torch.equal(hop.decode_sum(codec, [a, b]), twin.decode(a).float() + twin.decode(b).float())


def test_collective_hops_accept_error_feedback_payloads() -> None:
    ef = ErrorFeedback(get_codec("dynamic_tree"))
    a, b = ef.encode(torch.randn(100), key="a"), ef.encode(torch.randn(100), key="b")
    assert torch.equal(hop.decode_sum(ef, [a, b]), ef.decode(a).float() + ef.decode(b).float())


def test_collective_hops_reject_mismatches() -> None:
    tree, tree64, lin = get_codec("dynamic_tree"), get_codec("dynamic_tree", block_size=64), get_codec("linear")
    a, b = tree.encode(torch.randn(100)), tree.encode(torch.randn(100))
    with pytest.raises(ValueError, match="encoded by codec 'linear'"):
        hop.hop_codes(tree, a, lin.encode(torch.randn(100)))
    with pytest.raises(ValueError, match="shape"):
        hop.hop_codes(tree, a, tree.encode(torch.randn(101)))
    with pytest.raises(ValueError, match="block_size=64"):
        hop.hop_codes(tree, a, tree64.encode(torch.randn(100)))
    bad = Encoded(a.codec, a.shape, a.dtype, {"codes": a.tensors["codes"], "scales": torch.ones(2)},
                  a.wire_bytes, dict(a.meta))
    with pytest.raises(ValueError, match="2 scales"):
        hop.hop_codes(tree, bad, b)
    short = Encoded(a.codec, a.shape, a.dtype, {"codes": a.tensors["codes"][:50], "scales": a.tensors["scales"]},
                    a.wire_bytes, dict(a.meta))
    with pytest.raises(ValueError, match="50 codes"):
        hop.hop_mixed(tree, short, torch.randn(100))
    with pytest.raises(ValueError, match="x has shape"):
        hop.hop_mixed(tree, a, torch.randn(10, 10))
    with pytest.raises(ValueError, match="floating"):
        hop.hop_mixed(tree, a, torch.ones(100, dtype=torch.int32))
    with pytest.raises(ValueError, match="torch.Tensor"):
        hop.hop_mixed(tree, a, [0.0] * 100)
    with pytest.raises(ValueError, match="at least one"):
        hop.decode_sum(tree, [])
    with pytest.raises(ValueError, match="payload 1"):
        hop.decode_sum(tree, [a, tree.encode(torch.randn(7))])
    with pytest.raises(ValueError, match="Encoded"):
        hop.hop_codes(tree, a, torch.randn(100))


@pytest.mark.parametrize("n", [1 << 16, 3 << 15, (1 << 16) + 5])
@pytest.mark.parametrize("name", sorted(CODECS))
def test_cpu_fused_hop_equals_the_composition(name: str, n: int) -> None:
    """Lengths past cpu.MIN_COMPILED take the compiled one-pass hop (cpu.hop_blocks) for absmax-scaled
    tables: bit for bit the composition (a ragged tail or an overflowing 1/absmax takes the composition)."""
    from lab.codecs import cpu

    assert n >= cpu.MIN_COMPILED
    codec = _codec(name)
    (a,) = _payloads(codec, n, 1, seed=n)
    x = _data(n, seed=7) * 3  # heavy tails, zeros, an all-zero block, a block whose 1/absmax overflows
    _assert_same(hop.hop_mixed(codec, a, x), codec.encode(codec.decode(a).float() + x))
    x = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 3  # every block takes the fused pass
    x[::97] = 0.0
    _assert_same(hop.hop_mixed(codec, a, x), codec.encode(codec.decode(a).float() + x))


def test_collective_hop_keeps_the_codec_nonfinite_policy() -> None:
    """A sum that overflows float32 is the codec's error ('raise') or saturates ('saturate')."""
    big = torch.full((100,), 3e38)
    for kw in ({}, {"block_size": 64}):
        codec = get_codec("linear", **kw)
        a = codec.encode(big)
        with pytest.raises(ValueError, match="non-finite"):
            hop.hop_codes(codec, a, a)
        with pytest.raises(ValueError, match="non-finite"):
            hop.hop_mixed(codec, a, torch.full((100,), float("nan")))
        sat = get_codec("linear", nonfinite="saturate", **kw)
        _assert_same(hop.hop_codes(sat, a, a), sat.encode(sat.decode(a) + sat.decode(a)))


def test_collective_rows_view_a_gather_buffer() -> None:
    buf = torch.arange(5 * 12, dtype=torch.uint8)
    rows = [buf[12 * i: 12 * i + 10] for i in range(5)]
    v = hop._rows(rows)
    assert v.data_ptr() == buf.data_ptr() and v.stride() == (12, 1) and torch.equal(v, torch.stack(rows))
    scattered = [buf[0:10], buf[12:22], buf[40:50]]
    s = hop._rows(scattered)
    assert s.is_contiguous() and torch.equal(s, torch.stack(scattered))
    assert torch.equal(hop._rows([buf[3:13]]), buf[3:13][None])


# ------------------------------------------------------------------ launch plans and the source

def _source_kernels() -> set[str]:
    src = kernel_source("collective")
    names = set()
    for kind, search in re.findall(r"^HOP_SEARCH_KERNELS\((\w+),.*,\s*(\w+),\s*(?:true|false)\)$", src, re.M):
        names |= {f"hop_{kind}_block_{search}", f"hop_{kind}_scale_{search}"}
    names |= {f"hop_{k}_absmax" for k in re.findall(r"^HOP_ABSMAX_KERNEL\((\w+),", src, re.M)}
    names |= set(re.findall(r"__launch_bounds__\(MAX_THREADS\) (decode_sum)\(", src))
    return names


def test_collective_source_matches_launcher() -> None:
    src = kernel_source("collective")
    for macro, value in (("HOP_ITEMS", H.HOP_ITEMS), ("GROUP", H.GROUP), ("MAX_K", CC.MAX_K)):
        assert re.search(rf"^#define {macro} {value}\b", src, re.M), macro
    kernels = _source_kernels()
    assert len(kernels) == 11
    for kind in H.KINDS:
        for scale in H.SCALES:
            for search in H.SEARCHES:
                for bs in ((None, 64) if scale == "absmax" else (None,)):
                    for plan in H.hop_plan(kind, 1000, block_size=bs, scale=scale, search=search, aligned=True):
                        assert plan.kernel in kernels
    assert H.decode_sum_plan(10, block_size=None, aligned=True).kernel in kernels


@pytest.mark.parametrize("kind", H.KINDS)
def test_collective_hop_plans(kind: str) -> None:
    for n in (1, 3, 4097, 10**6, 3 * 2**31):
        for block_size in (1, 3, 63, 64, 100, 4096, 65536, 10**6, None):
            for scale in ("absmax", "none") if block_size is None else ("absmax",):
                for aligned in (True, False):
                    plans = H.hop_plan(kind, n, block_size=block_size, scale=scale, search="lut", aligned=aligned)
                    names = [p.kernel for p in plans]
                    if block_size is not None:
                        assert names == [f"hop_{kind}_block_lut"]
                    elif scale == "absmax":
                        assert names == [f"hop_{kind}_absmax", f"hop_{kind}_scale_lut"]
                    else:
                        assert names == [f"hop_{kind}_scale_lut"]
                    for plan in plans:
                        assert plan.threads % 32 == 0 and plan.threads <= CC.MAX_CTA
                        assert plan.team == plan.threads or (plan.team <= 32 and plan.team & (plan.team - 1) == 0)
                        assert plan.threads % plan.team == 0
                        assert 1 <= plan.grid <= CC.MAX_GRID
                        assert not plan.vec or aligned
                        if plan.vec:
                            assert plan.block % H.GROUP == 0
                        if block_size is not None:
                            assert plan.block == block_size
                            # a thread holds HOP_ITEMS groups or the team is as large as a CTA gets
                            groups = -(-block_size // (H.GROUP if plan.vec else 1))
                            assert groups <= plan.team * H.HOP_ITEMS or plan.team == CC.MAX_CTA
                            teams = plan.grid * (plan.threads // plan.team)
                            assert teams >= -(-n // block_size) or plan.grid == CC.MAX_GRID
                        else:
                            assert plan.team == plan.threads == CC.CTA
                            assert plan.block == CC.CTA * H.HOP_ITEMS * (H.GROUP if plan.vec else 1)
                            assert plan.grid == min(H.REDUCE_GRID, -(-n // plan.block))
                    if len(plans) == 2:  # both passes cut the tensor alike
                        assert replace(plans[0], kernel="") == replace(plans[1], kernel="")


def test_collective_decode_sum_plans() -> None:
    for n in (1, 3, 4, 4097, 10**6, 3 * 2**31):
        for block_size in (1, 3, 64, 4096, None):
            for aligned in (True, False):
                plan = H.decode_sum_plan(n, block_size=block_size, aligned=aligned)
                assert plan.kernel == "decode_sum" and plan.threads == CC.CTA
                assert plan.block == (block_size or 0)
                assert not plan.vec or (aligned and (block_size or 4) % H.GROUP == 0)
                groups = n // H.GROUP if plan.vec else n
                assert 1 <= plan.grid <= CC.MAX_GRID
                assert plan.grid * plan.threads >= groups or plan.grid == CC.MAX_GRID


def test_collective_plans_reject_bad_arguments() -> None:
    with pytest.raises(ValueError, match="kind"):
        H.hop_plan("sum", 10, block_size=None, scale="absmax", search="lut", aligned=True)
    with pytest.raises(ValueError, match="scale"):
        H.hop_plan("codes", 10, block_size=None, scale="max", search="lut", aligned=True)
    with pytest.raises(ValueError, match="search"):
        H.hop_plan("codes", 10, block_size=None, scale="absmax", search="linear", aligned=True)
    with pytest.raises(ValueError, match="block_size"):
        H.hop_plan("codes", 10, block_size=0, scale="absmax", search="lut", aligned=True)
    with pytest.raises(ValueError, match="block_size needs"):
        H.hop_plan("codes", 10, block_size=64, scale="none", search="lut", aligned=True)


def test_collective_launchers_reject_bad_arguments() -> None:
    codec = get_codec("dynamic_tree")
    p = hop._tables(codec, torch.device("cpu"))
    a = codec.encode(torch.randn(100))
    c, s = a.tensors["codes"], a.tensors["scales"]
    tables = (p.values256, p.bpad, p.lut, p.K)
    with pytest.raises(ValueError, match="CUDA"):
        H.hop_codes_cuda(c, s, c, s, *tables, block_size=None)
    with pytest.raises(ValueError, match="CUDA"):
        H.hop_mixed_cuda(c, s, torch.randn(100), *tables, block_size=None)
    with pytest.raises(ValueError, match="scale"):
        H.hop_codes_cuda(c, s, c, s, *tables, block_size=None, scale="max")
    with pytest.raises(ValueError, match="block_size"):
        H.hop_mixed_cuda(c, s, torch.randn(100), *tables, block_size=-1)
    with pytest.raises(ValueError, match="2-D"):
        H.decode_sum_cuda(c, s, p.values256, block_size=None)
    with pytest.raises(ValueError, match="CUDA"):
        H.decode_sum_cuda(c[None], s[None], p.values256, block_size=None)


# ------------------------------------------------------------------ GPU: kernels == reference

def _no_fallback(monkeypatch) -> dict:
    """Make the composition fail on non-empty kernel-device payloads, so a test sees only the
    fused kernels; returns the real reference functions for the test's own expectations."""
    from lab import backend

    refs = {}
    for fn in ("hop_codes_reference", "hop_mixed_reference", "decode_sum_reference"):
        real = refs[fn] = getattr(hop, fn)

        def guard(codec, first, *rest, _real=real, _fn=fn):
            enc = first[0] if isinstance(first, list) else first
            assert enc.device.type != backend.KERNEL_DEVICE_TYPE or enc.numel == 0, \
                f"{_fn} ran on kernel-device payloads: the fused kernel was not used"
            return _real(codec, first, *rest)
        monkeypatch.setattr(hop, fn, guard)
    return refs


def _gathered(ps: list[Encoded], stride: int, dev: str) -> tuple[torch.Tensor, list[Encoded]]:
    """The payloads' codes as rows of one buffer (an allgather's), `stride` bytes apart."""
    n = ps[0].numel
    buf = torch.zeros(len(ps) * stride, dtype=torch.uint8, device=dev)
    rows = []
    for i, p in enumerate(ps):
        buf[i * stride: i * stride + n] = p.tensors["codes"].to(dev)
        rows.append(Encoded(p.codec, p.shape, p.dtype, {"codes": buf[i * stride: i * stride + n],
                                                        "scales": p.tensors["scales"].to(dev)},
                            p.wire_bytes, dict(p.meta)))
    return buf, rows


def _check_kernels(codec, n: int, dev: str, refs: dict, seed: int = 0) -> None:
    a, b = _payloads(codec, n, 2, seed=seed)
    x = _fit(codec, _data(n, seed=seed + 50) * 2)
    ga, gb, gx = _to(a, dev), _to(b, dev), x.to(dev)
    _assert_same(hop.hop_codes(codec, ga, gb), refs["hop_codes_reference"](codec, a, b))
    _assert_same(hop.hop_mixed(codec, ga, gx), refs["hop_mixed_reference"](codec, a, x))
    ps = _payloads(codec, n, 5, seed=seed + 9)
    got = hop.decode_sum(codec, [_to(p, dev) for p in ps])
    want = refs["decode_sum_reference"](codec, ps)
    assert got.dtype == torch.float32 and torch.equal(_bits(got.cpu()), _bits(want))
    # the same payloads as rows of one gather buffer whose row stride is a multiple of 4: the
    # vector path, with a scalar tail when n is not a multiple of 4
    got = hop.decode_sum(codec, _gathered(ps, -(-n // 4) * 4, dev)[1])
    assert torch.equal(_bits(got.cpu()), _bits(want)), "decode_sum of a gather buffer differs"


@pytest.mark.parametrize("name", sorted(CODECS) + sorted(VARIANTS))
def test_cuda_collective_matches_reference(name: str, monkeypatch, target) -> None:
    refs = _no_fallback(monkeypatch)
    codec = _codec(name)
    for i, n in enumerate(EMU_LENGTHS if target.emulated else GPU_LENGTHS):
        _check_kernels(codec, n, target.device, refs, seed=i)


@pytest.mark.parametrize("name", ["dynamic_tree", "dynamic_tree-b64", "linear-b4096", "mantissa", "layout4-b100"])
def test_cuda_collective_unaligned(name: str, monkeypatch, target) -> None:
    """Codes and x one byte/element off alignment take the kernels' scalar path."""
    refs = _no_fallback(monkeypatch)
    codec = _codec(name)
    dev = target.device
    for n in (4097, 4100, 20_004 if target.emulated else 200_003):
        a, b = _payloads(codec, n, 2, seed=n)
        x = _fit(codec, _data(n, seed=1))

        def shifted(enc: Encoded) -> Encoded:
            c = enc.tensors["codes"].to(dev)
            c = torch.cat([c.new_zeros(1), c])[1:]  # codes at an odd address
            return Encoded(enc.codec, enc.shape, enc.dtype, {"codes": c, "scales": enc.tensors["scales"].to(dev)},
                           enc.wire_bytes, dict(enc.meta))

        gx = torch.cat([x.new_zeros(1), x]).to(dev)[1:]
        _assert_same(hop.hop_codes(codec, shifted(a), _to(b, dev)), refs["hop_codes_reference"](codec, a, b))
        _assert_same(hop.hop_codes(codec, _to(a, dev), shifted(b)), refs["hop_codes_reference"](codec, a, b))
        _assert_same(hop.hop_mixed(codec, _to(a, dev), gx), refs["hop_mixed_reference"](codec, a, x))
        _assert_same(hop.hop_mixed(codec, shifted(a), x.to(dev)), refs["hop_mixed_reference"](codec, a, x))


@pytest.mark.parametrize("name", ["dynamic_tree", "dynamic_tree-b64", "bnb_dynamic-b4096", "mantissa"])
@pytest.mark.parametrize("n", (1, 4096, 4097, 4099, 20_004))
def test_cuda_decode_sum_gather_buffer(name: str, n: int, monkeypatch, target) -> None:
    """Payloads that are rows of one buffer (as an allgather leaves them) are read in place,
    with any row stride: a multiple of 4 (vector path) or not (scalar path)."""
    refs = _no_fallback(monkeypatch)
    codec = _codec(name)
    dev = target.device
    ps = _payloads(codec, n, 6, seed=n)
    want = refs["decode_sum_reference"](codec, ps)
    for pad in (0, 1, 3, 4):
        codes, gathered = _gathered(ps, n + pad, dev)
        assert hop._rows([g.tensors["codes"] for g in gathered]).data_ptr() == codes.data_ptr()
        got = hop.decode_sum(codec, gathered)
        assert torch.equal(_bits(got.cpu()), _bits(want))


@pytest.mark.parametrize("kw", ({}, {"block_size": 64}, {"block_size": 4096}))
def test_cuda_collective_nonfinite(kw: dict, target) -> None:
    """An overflowing sum or a NaN/Inf in x: the codec's error, or its saturation, as on the CPU."""
    n = 5000
    dev = target.device
    codec = get_codec("linear", **kw)
    big = codec.encode(torch.full((n,), 3e38))
    with pytest.raises(ValueError, match="non-finite"):
        hop.hop_codes(codec, _to(big, dev), _to(big, dev))
    x = torch.randn(n)
    x[1234] = float("inf")
    a = codec.encode(torch.randn(n))
    with pytest.raises(ValueError, match="non-finite"):
        hop.hop_mixed(codec, _to(a, dev), x.to(dev))
    sat = get_codec("linear", nonfinite="saturate", **kw)
    _assert_same(hop.hop_mixed(sat, _to(a, dev), x.to(dev)), hop.hop_mixed_reference(sat, a, x))
    _assert_same(hop.hop_codes(sat, _to(big, dev), _to(big, dev)), hop.hop_codes_reference(sat, big, big))
    none = get_codec("mantissa")
    m = none.encode(torch.randn(n))
    with pytest.raises(ValueError, match="non-finite"):
        hop.hop_mixed(none, _to(m, dev), x.to(dev))


def test_cuda_collective_runs_every_launch(target) -> None:
    """The same buffers hop after hop (torch's caching allocator hands the same blocks back every
    step): each call runs its kernels on the data as it is now, never a remembered launch."""
    dev = target.device
    for kw in ({}, {"block_size": 64}):
        codec = get_codec("dynamic_tree", **kw)
        p = hop._tables(codec, torch.device(dev))
        tables = (p.values256, p.bpad, p.lut, p.K)
        steps = [(codec.encode(torch.randn(4096) * (i + 1)), torch.randn(4096) * (i + 2)) for i in range(4)]
        want = [hop.hop_mixed_reference(codec, a, x) for a, x in steps]
        want_sum = [hop.decode_sum_reference(codec, [a, a]) for a, _ in steps]
        ac = torch.empty(4096, dtype=torch.uint8, device=dev)
        asc = torch.empty(steps[0][0].tensors["scales"].shape, device=dev)
        x = torch.empty(4096, device=dev)
        got, got_sum = [], []
        for a, xs in steps:  # a training loop: inputs refilled in place, outputs freed each step
            ac.copy_(a.tensors["codes"])
            asc.copy_(a.tensors["scales"])
            x.copy_(xs)
            codes, scales, _ = H.hop_mixed_cuda(ac, asc, x, *tables, block_size=codec.block_size)
            got.append((codes.cpu().clone(), scales.cpu().clone()))
            del codes, scales
            s = H.decode_sum_cuda(ac.expand(2, -1), asc.expand(2, -1), p.values256, block_size=codec.block_size)
            got_sum.append(s.cpu().clone())
            del s
        for i, ((codes, scales), w, ws, gs) in enumerate(zip(got, want, want_sum, got_sum)):
            assert torch.equal(codes, w.tensors["codes"]), f"step {i}: stale codes"
            assert torch.equal(_bits(scales), _bits(w.tensors["scales"])), f"step {i}: stale scales"
            assert torch.equal(_bits(gs), _bits(ws)), f"step {i}: stale decode_sum"


@pytest.mark.parametrize("name", ["dynamic_tree-b64", "dynamic_tree-b4096", "dynamic_tree"])
def test_cuda_collective_block_inverse_is_exact(name: str, monkeypatch, target) -> None:
    """A hop of an all-zero payload and bound-sitting x (its sum is x exactly): the hop's 1/absmax
    and s * inv are the reference's to the last ulp."""
    from test_kernels import bound_sitting

    refs = _no_fallback(monkeypatch)
    codec = _codec(name)
    B = codec.block_size or 4096
    x = bound_sitting(codec.bounds, B, 4 if B > 64 else 24, seed=B)
    zero = codec.encode(torch.zeros_like(x))
    _assert_same(hop.hop_mixed(codec, _to(zero, target.device), x.to(target.device)),
                 refs["hop_mixed_reference"](codec, zero, x))
    _assert_same(hop.hop_codes(codec, _to(zero, target.device), _to(codec.encode(x), target.device)),
                 refs["hop_codes_reference"](codec, zero, codec.encode(x)))


def test_cuda_collective_tiny_and_zero(monkeypatch, target) -> None:
    """All-zero sums (scale 0) and sums whose 1/absmax overflows (absmax below 2**-128)."""
    refs = _no_fallback(monkeypatch)
    dev = target.device
    for kw in ({}, {"block_size": 64}, {"block_size": 4096}):
        codec = get_codec("dynamic_tree", **kw)
        from test_kernels import tiny_blocks

        tiny = tiny_blocks(5000, seed=3)
        for x in (torch.zeros(5000), -torch.zeros(5000), _data(5000, 3) * 1e-40, tiny,
                  tiny.clamp(-2.5e-39, 2.5e-39)):
            a = codec.encode(x)
            _assert_same(hop.hop_codes(codec, _to(a, dev), _to(a, dev)), refs["hop_codes_reference"](codec, a, a))
            _assert_same(hop.hop_mixed(codec, _to(a, dev), x.to(dev)), refs["hop_mixed_reference"](codec, a, x))


def check_none_sees_every_chunk(dev: str, n: int) -> None:
    """scale='none' (mantissa): a sum beyond the table, or not finite, in the first chunk of a CTA
    that goes on to later chunks (its grid-stride loop loops) is seen: the hop's result is the
    codec's own (saturated count, or its non-finite error), not the fused codes."""
    codec = _codec("mantissa")
    a = codec.encode(torch.zeros(n))
    for bad in (1e6, float("inf")):
        x = torch.zeros(n)
        x[3] = bad  # chunk 0: CTA 0 takes it first, then chunk grid, 2 * grid, ...
        try:
            want = hop.hop_mixed_reference(codec, a, x)
        except ValueError as e:
            with pytest.raises(ValueError, match=str(e)[:30]):
                hop.hop_mixed(codec, _to(a, dev), x.to(dev))
            continue
        _assert_same(hop.hop_mixed(codec, _to(a, dev), x.to(dev)), want)


def test_scale_none_hop_sees_every_chunk(target) -> None:
    """Under the emulator's grid cap 4 chunks give CTA 0 two; on a GPU 2049 CTAs' worth of chunks
    (REDUCE_GRID = 2048) give CTA 0 two."""
    from lab.codecs import cuda_hop

    chunk = cuda_hop.CTA * cuda_hop.HOP_ITEMS * cuda_hop.GROUP
    check_none_sees_every_chunk(target.device, (4 if target.emulated else cuda_hop.REDUCE_GRID + 1) * chunk + 8)


@pytest.mark.gpu
@pytest.mark.slow
def test_cuda_collective_beyond_2_pow_31() -> None:
    """64-bit indexing in kernels/collective.cu: a blockwise hop and decode_sum over 2**31 + 4099
    values agree with the reference on the last blocks (past element 2**31)."""
    codec = _codec("dynamic_tree-b4096")
    n, B, tail = 2**31 + 4099, 4096, 1 << 20
    start = (n - tail) // B * B
    x = torch.zeros(n, device="cuda")
    x[start:] = _data(n - start, seed=3).cuda()
    a = codec.encode(x * 0.5)
    got = hop.hop_mixed(codec, a, x)
    a_tail = codec.encode((x[start:] * 0.5).cpu())
    want = hop.hop_mixed_reference(codec, a_tail, x[start:].cpu())
    assert torch.equal(got.tensors["codes"][start:].cpu(), want.tensors["codes"])
    assert torch.equal(got.tensors["scales"][start // B:].cpu(), want.tensors["scales"])
    del x
    out = hop.decode_sum(codec, [got, got])[start:].cpu()
    assert torch.equal(_bits(out), _bits(hop.decode_sum_reference(codec, [want, want])))
