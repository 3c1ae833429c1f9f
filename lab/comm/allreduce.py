"""`allreduce(comm, x, algorithm=..., codec=...)`: the front door of the collectives.

Without a codec the algorithms move fp32 and equal the backend's `all_reduce` up to summation
order. With a codec (Dettmers 2016 §3.3: compress, transfer, decompress) two modes exist:
  requantize: decode-add-encode at every reduction hop (the codec's `requantize` flag; table
              codecs, casts, fp8, int8, QSGD, TernGrad); error grows with the hop count.
  gather:     every rank encodes its vector once, the P payloads are all-gathered in the
              algorithm's pattern, and every rank decodes and adds them in rank order (top-k,
              random-k, 1-bit SGD; also allowed for dense codecs, at P times the bytes).
Every rank ends with the same result (for stochastic codecs under recursive doubling, see there).
"""
from __future__ import annotations

import torch

from lab.codecs.base import Codec, get_codec

from .algorithms import ALGORITHMS
from .base import Comm, CommError
from .channel import Channel
from .wire import WireFormat

NATIVE = "native"
MODES = ("auto", "requantize", "gather")
_SCRATCH = {"ring": "segment", "butterfly_sync": "segment", "rabenseifner": "half"}


def algorithm_names() -> list[str]:
    """Every algorithm `allreduce` accepts, the backend's own first."""
    return [NATIVE, *ALGORITHMS]


def resolve_codec(codec: Codec | str | None) -> Codec | None:
    if codec is None or isinstance(codec, Codec):
        return codec
    if isinstance(codec, str):
        return None if codec in ("", "none") else get_codec(codec)
    raise ValueError(f"codec={codec!r}; allowed: None, a codec name or a Codec")


def resolve_mode(codec: Codec | None, mode: str) -> str:
    """'raw' without a codec, else 'requantize' or 'gather' ('auto' follows the codec)."""
    if mode not in MODES:
        raise ValueError(f"mode={mode!r}; allowed: {', '.join(MODES)}")
    if codec is None:
        return "raw"
    if mode == "auto":
        return "requantize" if codec.requantize else "gather"
    if mode == "requantize" and not codec.requantize:
        raise ValueError(f"codec {codec.name!r} cannot be re-encoded at every hop (sparse or sign "
                         "payloads); use mode='gather'")
    return mode


def check_algorithm(algorithm: str) -> None:
    if algorithm not in ALGORITHMS and algorithm != NATIVE:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(algorithm_names())}")


def allreduce(comm: Comm, x: torch.Tensor, *, algorithm: str = "ring", codec: Codec | str | None = None,
              mode: str = "auto", check: bool = True) -> torch.Tensor:
    """The sum over ranks of x (every rank passes a tensor of the same length), as a new tensor
    of x's shape and dtype on the comm's device. check=True first verifies, with a small control
    exchange, that every rank asked for the same length, algorithm, codec and mode. With one
    rank nothing crosses a wire and the result is x itself."""
    check_algorithm(algorithm)
    codec = resolve_codec(codec)
    how = resolve_mode(codec, mode)
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"allreduce takes a floating-point torch.Tensor, got {type(x).__name__}"
                         + (f" of {x.dtype}" if isinstance(x, torch.Tensor) else ""))
    if algorithm == NATIVE and codec is not None:
        raise ValueError("the native all_reduce carries fp32 only; pick one of "
                         f"{', '.join(ALGORITHMS)} to put a codec on the wire")
    if check:
        comm.check_same((x.numel(), algorithm, codec.describe() if codec else None, how),
                        "(length, algorithm, codec, mode)")
    buf = x.detach().reshape(-1).to(device=comm.device, dtype=torch.float32, copy=True)
    n, P = buf.numel(), comm.size
    if n and P > 1:
        if algorithm == NATIVE:
            comm.native_allreduce(buf)
        elif how == "gather":
            buf = _gather_sum(comm, buf, codec, ALGORITHMS[algorithm].gather)
        else:
            scratch = {"segment": -(-n // P), "half": -(-n // 2)}.get(_SCRATCH.get(algorithm, ""), n)
            ALGORITHMS[algorithm].reduce(comm, buf, Channel(comm, codec, scratch=scratch))
    return buf.view(x.shape).to(x.dtype)


def _gather_sum(comm: Comm, buf: torch.Tensor, codec: Codec, gather) -> torch.Tensor:
    from .hop import decode_sum

    fmt = WireFormat.of(codec, buf.numel(), torch.float32, comm.device)
    rows = torch.empty((comm.size, fmt.nbytes), dtype=torch.uint8, device=comm.device)
    rows[comm.rank] = fmt.encode(buf)
    gather(comm, rows)
    return decode_sum(codec, [fmt.unpack(rows[p]) for p in range(comm.size)]).reshape(-1).float()


__all__ = ["allreduce", "algorithm_names", "resolve_codec", "resolve_mode", "check_algorithm",
           "CommError", "MODES", "NATIVE"]
