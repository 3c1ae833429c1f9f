"""What a codec costs on the wire and on the GPU, for the planner: bytes per value measured from
the real codec (`lab.codecs`, its `Encoded.wire_bytes`), codec work modelled as memory traffic
plus kernel launches, and communication times from `lab.comm.cost` (no formula is repeated here).

Codec time per encoded value = bytes it reads and writes / the device's memory bandwidth (likewise
for decoding), plus `launch_us` per kernel for every message on the critical path. Defaults:
encode reads 4 B and writes w B in 2 kernels (scale, quantise); decode reads w B and writes 4 B
in 1 kernel. 1-bit SGD (`onebit`) carries Seide et al.'s error feedback: encode also reads and
writes the 4-byte residual, in 4 kernels (add residual, two means, pack, update residual), and
it runs as a two-stage (requantize) allreduce. Sparse codecs (top-k, random-k) gather. Each codec's
numbers and flags come from its registry entry (`CodecInfo.work`, `two_stage`, `gradient_only`).

A codec with its own collective (`Codec.phases`: PowerSGD, Vogels et al. 2019) is mode "phased": its
wire depends on each layer's matrix shapes (`Layer.matrices`), not on a rate per value: per layer
one fp32 allreduce of the uncompressed values (vectors, and matrices where (n+m)·r·rate >= n·m)
and one each of P (n·r) and Q (m·r) values, from the codec's own `wire_values(shape)`; its work:
4 + extra_encode_bytes read/written per compressed value to encode (residual, M Q, M^T P) and 4 to
decode (P Q^T), encode_kernels + decode_kernels launches per compressed matrix. A layer with no
known matrices is a vector to it (uncompressed), as a flat tensor is to torch's hook.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, replace

import torch

from lab.comm import cost
from lab.comm.cost import Link

from .devices import Device

RAW = ("none",)
log = logging.getLogger(__name__)
_LEFT_OUT: set[str] = set()


def _infos():
    from lab.codecs import codec_infos
    return codec_infos()


def compressing_codecs() -> list[str]:
    """Every registered codec that compresses (not raw fp32), read now, that the planner can price: a
    plugin that fails when probed (its factory or encode raises) is left out and named once, in one
    warning line on stderr, so one broken plugin never takes a plan down."""
    out = []
    for info in _infos():
        if info.work.raw:
            continue
        try:
            wire_codec(info.name)
        except Exception as e:
            if info.name not in _LEFT_OUT:
                _LEFT_OUT.add(info.name)
                log.warning("codec %r left out: it fails when probed (%s)", info.name,
                            str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}")
            continue
        out.append(info.name)
    return out


def two_stage() -> tuple[str, ...]:
    """Codecs the planner runs as a two-stage (requantize) allreduce although they gather by default:
    1-bit SGD (Seide et al. 2014) quantises twice, the local gradient and then each reduced part
    (Dettmers 2016 §5), as `lab.comm.allreduce` runs it with mode='requantize' on butterfly_sync or
    parameter_server. From the registry's `two_stage` flag."""
    return tuple(i.name for i in _infos() if i.two_stage)


def gradient_only() -> tuple[str, ...]:
    """Gradient compressors that model parallelism cannot use on activations (Dettmers 2016 §2.2, §5):
    the registry's `gradient_only` flag."""
    return tuple(i.name for i in _infos() if i.gradient_only)


@dataclass(frozen=True)
class WireCodec:
    """A codec as the cost model sees it: wire bytes = w·n + side_bytes; collective mode."""

    name: str
    bytes_per_value: float
    side_bytes: float
    mode: str  # raw | requantize | gather
    enc_traffic: float  # bytes read + written per encoded value
    dec_traffic: float
    enc_kernels: int
    dec_kernels: int
    gradient_only: bool = False
    phased: bool = False  # the codec runs its own fp32 allreduces (PowerSGD): bytes follow the matrix shapes

    @property
    def raw(self) -> bool:
        return self.mode == "raw"


def wire_codec(name: str | None) -> WireCodec:
    """The WireCodec of a codec name or spec from `lab.codecs` (None or 'none': uncompressed fp32)."""
    if name is None or name in RAW:
        return _raw()
    from lab.codecs.registry import EF_PREFIX, codec_names, split_spec

    if not isinstance(name, str):
        raise ValueError(f"codec={name!r}; allowed: none or a codec name / spec string")
    try:
        ef, base, _ = split_spec(name)
    except ValueError as e:
        head = name.strip().removeprefix(f"{EF_PREFIX}:").split(":", 1)[0].strip()
        # 'none' is one more name here: worth saying only when the name is what was wrong
        raise ValueError(str(e) if head in codec_names() else f"{e}; or none") from None
    if ef:
        return with_error_feedback(name, _wire_codec(name.strip()[len("ef:"):].strip(), base))
    return _wire_codec(name, base)


EF_TRAFFIC = 12.0  # bytes per value error feedback adds: residual read, corrected input written, residual written


def with_error_feedback(spec: str, inner: WireCodec) -> WireCodec:
    """`inner` with error feedback (Seide et al. 2014, `lab.codecs.error_feedback`): the same wire bytes;
    encoding adds the residual, decodes the code locally and stores the new residual (one decode and
    EF_TRAFFIC bytes per value more, one more kernel)."""
    if inner.phased or inner.raw:
        raise ValueError(f"codec {spec!r}: {inner.name} keeps its own error feedback (or has nothing to feed back); "
                         "give it without 'ef:'")
    return replace(inner, name=spec, enc_traffic=inner.enc_traffic + inner.dec_traffic + EF_TRAFFIC,
                   enc_kernels=inner.enc_kernels + inner.dec_kernels + 1)


def _raw() -> WireCodec:
    return WireCodec("none", 4.0, 0.0, "raw", 0.0, 0.0, 0, 0)


@functools.cache
def _wire_codec(spec: str, base: str) -> WireCodec:
    from lab.codecs import codec_info, parse_spec

    info = codec_info(base)
    work = info.work
    if work.raw:
        return _raw()
    codec = parse_spec(spec)
    if codec.payload_codec.phases:  # its sums travel as fp32; what it saves is in phased_values
        return WireCodec(spec, 4.0, 0.0, "phased", 4.0 + work.extra_encode_bytes, 4.0, work.encode_kernels,
                         work.decode_kernels, info.gradient_only, phased=True)
    g = torch.Generator().manual_seed(0)
    n1, n2 = 1 << 10, 1 << 14  # below lab.codecs.cpu.MIN_COMPILED: eager encode, no torch.compile
    try:
        b1 = codec.encode(torch.randn(n1, generator=g)).wire_bytes
        b2 = codec.encode(torch.randn(n2, generator=g)).wire_bytes
    except ValueError:
        raise
    except Exception as e:  # a plugin's bug: one line naming the codec, not its traceback
        raise ValueError(f"codec {spec!r}: its encode failed ({type(e).__name__}: {e})") from e
    w = (b2 - b1) / (n2 - n1)
    side = max(0.0, b1 - w * n1)
    mode = "requantize" if (codec.requantize or info.two_stage) else "gather"
    return WireCodec(spec, w, side, mode, 4.0 + w + work.extra_encode_bytes, w + 4.0, work.encode_kernels,
                     work.decode_kernels, info.gradient_only)


@functools.cache
def _phased_codec(spec: str):
    from lab.codecs import parse_spec
    return parse_spec(spec).payload_codec


def phased_values(codec: WireCodec, n: float, matrices: tuple[tuple[int, int], ...] = ()) -> tuple[float, ...]:
    """fp32 values one rank puts into each allreduce of a phased codec for a layer of n values with
    weight `matrices`: (uncompressed, P, Q) from the codec's `wire_values`, and the values that are
    compressed (its work); raw or per-value codecs: (n·bytes_per_value/4,) and 0."""
    if not codec.phased:
        return (n * codec.bytes_per_value / 4.0,)
    c = _phased_codec(codec.name)
    plain, p, q, squeezed = max(0.0, n - sum(a * b for a, b in matrices)), 0.0, 0.0, 0.0
    for shape in matrices:
        vp, vq, vu = c.wire_values(shape)
        plain, p, q = plain + vu, p + vp, q + vq
        squeezed += 0 if vu else shape[0] * shape[1]
    return plain, p, q, squeezed


def _phased_seconds(n: float, P: int, link: Link, algorithm: str, codec: WireCodec, device: Device,
                    matrices: tuple[tuple[int, int], ...]) -> float:
    plain, p, q, _ = phased_values(codec, n, matrices)
    comm = sum(cost.allreduce_time(algorithm, P, 4.0 * v, link) for v in (plain, p, q) if v > 0)
    return comm + phased_work_seconds(n, codec, device, matrices)


def phased_work_seconds(n: float, codec: WireCodec, device: Device,
                        matrices: tuple[tuple[int, int], ...] = ()) -> float:
    """A phased codec's own work on one layer (besides its fp32 allreduces): the compressed values'
    memory traffic over the device's bandwidth plus its kernel launches per compressed matrix."""
    _, _, _, squeezed = phased_values(codec, n, matrices)
    mats = sum(1 for m in matrices if not _phased_codec(codec.name).wire_values(m)[2])
    work = squeezed * (_per_value(codec.enc_traffic, device) + _per_value(codec.dec_traffic, device))
    return work + mats * (codec.enc_kernels + codec.dec_kernels) * device.launch_us * 1e-6


def _per_value(traffic: float, device: Device) -> float:
    return traffic / (device.memory_GBps * 1e9)


def _messages(algorithm: str, P: int, nbytes: float, link: Link, mode: str) -> float:
    """Messages on the critical path (the latency coefficient of the collective)."""
    if mode == "gather":
        return cost.allgather_coefficients(algorithm, P, nbytes)[0]
    return (cost.shared_coefficients if link.shared else cost.coefficients)(algorithm, P, nbytes)[0]


def allreduce_seconds(n: float, P: int, link: Link, algorithm: str, codec: WireCodec, device: Device,
                      matrices: tuple[tuple[int, int], ...] = ()) -> float:
    """Allreduce of n gradient values on P ranks with the codec on the wire (cost.compressed_time);
    `matrices`: the layer's weight shapes, which a phased codec (PowerSGD) compresses."""
    if P == 1 or n <= 0:
        return 0.0
    if codec.phased:
        return _phased_seconds(n, P, link, algorithm, codec, device, matrices)
    if codec.raw:
        return cost.allreduce_time(algorithm, P, 4.0 * n, link)
    t = cost.compressed_time(algorithm, P, int(round(n)), link, wire_bytes_per_value=codec.bytes_per_value,
                             encode_s_per_value=_per_value(codec.enc_traffic, device),
                             decode_s_per_value=_per_value(codec.dec_traffic, device),
                             side_bytes=codec.side_bytes, mode=codec.mode)
    msgs = _messages(algorithm, P, codec.bytes_per_value * n + codec.side_bytes, link, codec.mode)
    return t + msgs * (codec.enc_kernels + codec.dec_kernels) * device.launch_us * 1e-6


def allgather_seconds(n_total: float, P: int, link: Link, algorithm: str, codec: WireCodec, device: Device) -> float:
    """Allgather of n_total values spread evenly over P ranks (each ends with all of them):
    `cost.compressed_time` in its gather mode, with fp32 as a codec that costs nothing."""
    if P == 1 or n_total <= 0:
        return 0.0
    part = max(1, int(round(n_total / P)))
    if codec.raw:
        return cost.compressed_time(algorithm, P, part, link, wire_bytes_per_value=4.0, encode_s_per_value=0.0,
                                    decode_s_per_value=0.0, mode="gather")
    t = cost.compressed_time(algorithm, P, part, link, wire_bytes_per_value=codec.bytes_per_value,
                             encode_s_per_value=_per_value(codec.enc_traffic, device),
                             decode_s_per_value=_per_value(codec.dec_traffic, device),
                             side_bytes=codec.side_bytes, mode="gather")
    msgs = _messages(algorithm, P, codec.bytes_per_value * part + codec.side_bytes, link, "gather")
    return t + (codec.enc_kernels + msgs * codec.dec_kernels) * device.launch_us * 1e-6


def reduce_scatter_seconds(n_total: float, P: int, link: Link, algorithm: str, codec: WireCodec,
                           device: Device) -> float:
    """Reduce-scatter of n_total values (each rank ends with the sum of its 1/P): half an allreduce,
    exact for ring, butterfly_sync and Rabenseifner (reduce-scatter + allgather), a model for the rest."""
    return 0.5 * allreduce_seconds(n_total, P, link, algorithm, codec, device)


def transfer_seconds(n: float, link: Link, codec: WireCodec, device: Device) -> float:
    """One point-to-point message of n values (Dettmers 2016 Fig. 2; `cost.compressed_transfer_time`)."""
    if n <= 0:
        return 0.0
    if codec.raw:
        return cost.transfer_time(4.0 * n, link)
    return (cost.compressed_transfer_time(int(round(n)), link, wire_bytes_per_value=codec.bytes_per_value,
                                          encode_s_per_value=_per_value(codec.enc_traffic, device),
                                          decode_s_per_value=_per_value(codec.dec_traffic, device),
                                          side_bytes=codec.side_bytes)
            + (codec.enc_kernels + codec.dec_kernels) * device.launch_us * 1e-6)


def wire_bytes(n: float, codec: WireCodec, matrices: tuple[tuple[int, int], ...] = ()) -> float:
    """Bytes of one payload of n values (a phased codec: the fp32 values of its allreduces, from
    the layer's `matrices`)."""
    if codec.phased:
        return 4.0 * sum(phased_values(codec, n, matrices)[:3])
    return codec.bytes_per_value * n + (codec.side_bytes if not codec.raw else 0.0)


__all__ = ["two_stage", "gradient_only", "WireCodec", "wire_codec", "allreduce_seconds", "allgather_seconds", "reduce_scatter_seconds",
           "transfer_seconds", "wire_bytes", "phased_values", "phased_work_seconds"]
