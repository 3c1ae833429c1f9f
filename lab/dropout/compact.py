"""Compact activations and the linear op that computes only kept units (Song et al. §III-A/B, Fig. 3).

A `Compact` holds a (batch, units) activation under a dropout pattern as dense blocks of kept
units only (`Pattern.blocks`). `compact_linear` multiplies such an input by a weight and, given an
output pattern, produces only the kept output units:

* RDP: the kept output units are the strided view W[b::dp] of W (out, in) - no copy, BLAS takes
  it with leading dimension dp*in - and the kept input units of a consumer stored as (in, out)
  are the rows Wt[b::dp], again a view. The GEMM is (1/dp) of the dense one on each side.
* TDP: each block (batch rows sharing one kept-unit set) gathers its rows of W once and runs one
  GEMM on its batch rows.

Backward computes dX on the kept part only and the weight gradient only for the kept rows: the
gradient is returned as a row-sparse COO tensor (like `nn.Embedding(sparse=True)`), so the
dropped rows are neither computed nor written; `sparse_grad=False` returns it dense instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

import torch

from .pattern import Block, Index, Pattern, as_index, index_len

LAYOUTS = ("out_in", "in_out")


@dataclass
class Compact:
    """A (batch, units) activation stored as its kept blocks only; `values[k]` is blocks[k]'s data."""

    values: list[torch.Tensor]
    blocks: list[Block]
    shape: tuple[int, int]
    pattern: Optional[Pattern] = None

    @property
    def device(self) -> torch.device:
        return self.values[0].device

    @property
    def dtype(self) -> torch.dtype:
        return self.values[0].dtype

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "Compact":
        """Apply an elementwise function to the kept values (activation, dropout scale)."""
        return Compact([fn(v) for v in self.values], self.blocks, self.shape, self.pattern)

    def kept_fraction(self) -> float:
        """Fraction of the dense activation's entries that are stored."""
        total = self.shape[0] * self.shape[1]
        return sum(v.numel() for v in self.values) / total if total else 0.0

    def to_dense(self) -> torch.Tensor:
        """Dense (batch, units) tensor with zeros at the dropped units (differentiable)."""
        B, M = self.shape
        out = self.values[0].new_zeros(B, M)
        for blk, v in zip(self.blocks, self.values):  # empty blocks too: keeps the autograd graph
            r = as_index(blk.rows, B, v.device)
            c = as_index(blk.cols, M, v.device)
            out = out.index_put((r[:, None], c[None, :]), v)
        return out


Input = Union[torch.Tensor, Compact]


def _select(w: torch.Tensor, dim: int, ix: Index) -> torch.Tensor:
    """w restricted to ix along dim: a view for a slice, a gather for an index tensor."""
    if isinstance(ix, slice):
        if ix == slice(None):
            return w
        return w[ix] if dim == 0 else w[:, ix]
    return w.index_select(dim, ix)


def _blas_ready(t: torch.Tensor) -> torch.Tensor:
    """t if BLAS can read it in place (one unit stride), else a contiguous copy (made once, reused)."""
    if t.dim() == 2 and (t.stride(1) == 1 or t.stride(0) == 1):
        return t
    return t.contiguous()


@dataclass
class _Piece:
    """One GEMM: input block g's rows `in_rows` (None = all) x output block h's rows `out_rows`."""

    g: int
    h: int
    in_rows: Optional[torch.Tensor]
    out_rows: Optional[torch.Tensor]


def _is_all(ix: Index) -> bool:
    return isinstance(ix, slice) and ix == slice(None)


def _plan(in_blocks: list[Block], out_blocks: list[Block], batch: int, device: torch.device) -> list[_Piece]:
    """Split the batch into pieces with one input block and one output block each."""
    if len(in_blocks) == 1 and _is_all(in_blocks[0].rows):
        return [_Piece(0, h, None if _is_all(b.rows) else b.rows, None) for h, b in enumerate(out_blocks)]
    if len(out_blocks) == 1 and _is_all(out_blocks[0].rows):
        return [_Piece(g, 0, None, None if _is_all(b.rows) else b.rows) for g, b in enumerate(in_blocks)]
    # general case (tile pattern on both sides): intersect the two row partitions
    lab_in = torch.empty(batch, dtype=torch.long, device=device)
    lab_out = torch.empty(batch, dtype=torch.long, device=device)
    pos_in = torch.empty(batch, dtype=torch.long, device=device)
    pos_out = torch.empty(batch, dtype=torch.long, device=device)
    for lab, pos, blocks in ((lab_in, pos_in, in_blocks), (lab_out, pos_out, out_blocks)):
        for k, b in enumerate(blocks):
            r = as_index(b.rows, batch, device)
            lab[r] = k
            pos[r] = torch.arange(r.numel(), device=device)
    pieces = []
    for g in range(len(in_blocks)):
        for h in range(len(out_blocks)):
            rows = torch.nonzero((lab_in == g) & (lab_out == h)).flatten()
            if rows.numel():
                pieces.append(_Piece(g, h, pos_in[rows], pos_out[rows]))
    return pieces


def _weight_piece(w: torch.Tensor, layout: str, kin: Index, kout: Index) -> torch.Tensor:
    """The weight entries connecting kept inputs kin to kept outputs kout, in w's layout."""
    if layout == "out_in":
        return _blas_ready(_select(_select(w, 0, kout), 1, kin))
    return _blas_ready(_select(_select(w, 0, kin), 1, kout))


@dataclass(frozen=True)
class _Plan:
    """What `_CompactLinear` needs besides tensors: the kept blocks on each side, the pieces that
    pair them, the full shapes, the weight's layout ('out_in' or 'in_out') and whether the weight
    gradient is row-sparse."""

    in_blocks: list[Block]
    out_blocks: list[Block]
    pieces: list[_Piece]
    batch: int
    n_in: int
    n_out: int
    layout: str
    sparse_grad: bool


class _CompactLinear(torch.autograd.Function):
    """Forward/backward of `compact_linear` over explicit pieces; weight grad is row-sparse."""

    @staticmethod
    def forward(ctx, meta: _Plan, weight: torch.Tensor, bias: Optional[torch.Tensor], *xs: torch.Tensor):
        in_blocks, out_blocks, pieces = meta.in_blocks, meta.out_blocks, meta.pieces
        batch, n_out, layout = meta.batch, meta.n_out, meta.layout
        outs: list[Optional[torch.Tensor]] = [None] * len(out_blocks)
        wps, xps = [], []
        for pc in pieces:
            kin, kout = in_blocks[pc.g].cols, out_blocks[pc.h].cols
            x = xs[pc.g] if pc.in_rows is None else xs[pc.g].index_select(0, pc.in_rows)
            wp = _weight_piece(weight, layout, kin, kout)
            wps.append(wp)
            xps.append(x)
            wmat = wp.t() if layout == "out_in" else wp
            if bias is not None:
                z = torch.addmm(_select(bias, 0, kout), x, wmat)
            else:
                z = x @ wmat
            if pc.out_rows is None:
                outs[pc.h] = z
            else:
                if outs[pc.h] is None:
                    nrows = index_len(out_blocks[pc.h].rows, batch)
                    outs[pc.h] = z.new_empty(nrows, index_len(kout, n_out))
                outs[pc.h].index_copy_(0, pc.out_rows, z)
        for h, o in enumerate(outs):  # an output block no piece reached (cannot happen: rows partition)
            if o is None:
                raise RuntimeError(f"output block {h} has no rows")
        ctx.meta, ctx.wps, ctx.xps = meta, wps, xps
        ctx.weight_shape, ctx.has_bias = weight.shape, bias is not None
        ctx.x_shapes = [x.shape for x in xs]
        return tuple(outs)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *douts: torch.Tensor):
        meta = ctx.meta
        in_blocks, out_blocks, pieces = meta.in_blocks, meta.out_blocks, meta.pieces
        n_in, n_out, layout = meta.n_in, meta.n_out, meta.layout
        need_w, need_b = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        need_x = ctx.needs_input_grad[3:]
        ref = next(d for d in douts if d is not None)
        dxs: list[Optional[torch.Tensor]] = [None] * len(ctx.x_shapes)
        db = ref.new_zeros(n_out) if (ctx.has_bias and need_b) else None
        other = n_in if layout == "out_in" else n_out  # dense dimension of a weight row
        n_rows = ctx.weight_shape[0]
        # weight-gradient rows of every piece, written in place into one buffer (no concatenation)
        w_rows = []
        for pc in pieces:
            kin, kout = in_blocks[pc.g].cols, out_blocks[pc.h].cols
            w_rows.append(kout if layout == "out_in" else kin)
        sizes = [index_len(r, n_rows) for r in w_rows]
        vals = ref.new_empty(sum(sizes), other) if need_w else None
        offset = 0
        for pc, wp, x, rows, nr in zip(pieces, ctx.wps, ctx.xps, w_rows, sizes):
            dz = douts[pc.h]
            if pc.out_rows is not None:
                dz = dz.index_select(0, pc.out_rows)
            kin, kout = in_blocks[pc.g].cols, out_blocks[pc.h].cols
            if need_x[pc.g]:
                dx = dz @ wp if layout == "out_in" else dz @ wp.t()
                if pc.in_rows is None:
                    dxs[pc.g] = dx if dxs[pc.g] is None else dxs[pc.g] + dx
                else:
                    if dxs[pc.g] is None:
                        dxs[pc.g] = dz.new_zeros(ctx.x_shapes[pc.g])
                    dxs[pc.g].index_add_(0, pc.in_rows, dx)
            if need_w:
                # out_in: rows = kept outputs, columns = kept inputs; in_out: the other way round
                a, b, cols = (dz.t(), x, kin) if layout == "out_in" else (x.t(), dz, kout)
                target = vals[offset:offset + nr]
                if _is_all(cols):
                    torch.mm(a, b, out=target)
                else:
                    target.zero_()
                    if isinstance(cols, slice):
                        target[:, cols] = a @ b
                    else:
                        target.index_copy_(1, cols, a @ b)
            offset += nr
            if db is not None:
                s = dz.sum(0)
                if _is_all(kout):
                    db += s
                elif isinstance(kout, slice):
                    db[kout] += s
                else:
                    db.index_add_(0, kout, s)
        dW = None
        if need_w:
            idx = torch.cat([as_index(r, n_rows, vals.device) for r in w_rows])
            if meta.sparse_grad:
                # a single strided row set is sorted and unique; TDP pieces are disjoint or summed
                coalesced = len(w_rows) == 1 and isinstance(w_rows[0], slice)
                dW = torch.sparse_coo_tensor(idx[None, :], vals, ctx.weight_shape, check_invariants=False,
                                             is_coalesced=coalesced)
            else:
                dW = vals.new_zeros(ctx.weight_shape).index_add_(0, idx, vals)
        for k, d in enumerate(dxs):
            if d is None and need_x[k]:
                dxs[k] = ref.new_zeros(ctx.x_shapes[k])
        ctx.wps = ctx.xps = None
        return (None, dW, db, *dxs)


def _blocks_of(x: Input) -> tuple[list[torch.Tensor], list[Block], int, int]:
    if isinstance(x, Compact):
        return x.values, x.blocks, x.shape[0], x.shape[1]
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"input must be a (batch, features) tensor or a Compact, got {type(x).__name__}"
                         + (f" of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else ""))
    return [x], [Block(slice(None), slice(None))], x.shape[0], x.shape[1]


def compact_linear(x: Input, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                   pattern: Optional[Pattern] = None, *, layout: str = "out_in",
                   sparse_grad: bool = True) -> Input:
    """x @ W^T + b computed on the kept part only: skips x's dropped input units (x a `Compact`)
    and, given `pattern`, every output unit the pattern drops (returns a `Compact`; else a Tensor).

    `weight` is (out, in) for layout "out_in" (nn.Linear's) or (in, out) for "in_out"; the layout
    whose rows are the dropped dimension makes that selection a strided view (module docstring).
    No dropout scaling or activation here: see `approx_dropout_linear`.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    xs, in_blocks, batch, n_in = _blocks_of(x)
    if weight.dim() != 2:
        raise ValueError(f"weight must be 2-D, got shape {tuple(weight.shape)}")
    w_in, n_out = (weight.shape[1], weight.shape[0]) if layout == "out_in" else tuple(weight.shape)
    if w_in != n_in:
        raise ValueError(f"input has {n_in} features but the weight ({layout}, shape {tuple(weight.shape)}) "
                         f"expects {w_in}")
    if bias is not None and tuple(bias.shape) != (n_out,):
        raise ValueError(f"bias must have shape ({n_out},), got {tuple(bias.shape)}")
    if pattern is None and not isinstance(x, Compact):  # plain dense layer
        wmat = weight.t() if layout == "out_in" else weight
        return torch.addmm(bias, x, wmat) if bias is not None else x @ wmat
    device = weight.device
    if pattern is None:
        out_blocks = [Block(slice(None), slice(None))]
    else:
        out_blocks = pattern.blocks(batch, n_out, device)
    pieces = _plan(in_blocks, out_blocks, batch, device)
    outs = _CompactLinear.apply(_Plan(in_blocks, out_blocks, pieces, batch, n_in, n_out, layout, sparse_grad),
                                weight, bias, *xs)
    if pattern is None:
        return outs[0]
    return Compact(list(outs), out_blocks, (batch, n_out), pattern)
