"""Rank functions for test_fsdp.py: module level, so that rank processes can import them."""
from __future__ import annotations

from lab.train.fsdp import FSDPSettings, _train_one
from lab.train.run import TrainConfig

TINY = dict(train_limit=256, hidden=(32,), dropout=(0.1, 0.1), batch=32, evals_per_epoch=1, lr=0.01)


def _one(comm, settings: FSDPSettings, epochs: float, name: str, trace: str | None = None) -> dict:
    return _train_one(comm, TrainConfig(**TINY, epochs=epochs), settings, name, None, None, (0.0, 1.0), trace)


def two_rank_cases(comm, trace: str | None = None) -> dict:
    """Plain FSDP2 (its defaults: blocking all-gathers, no forward prefetch), FSDP2 through the codec
    hooks without a codec (async prefetched all-gathers), and 8-bit weights + gradients (error feedback
    on the gradients), on the same data and seeds, prefetched (traced into `trace`) and blocking."""
    codec = dict(weights_codec="mxfp8_e4m3", grads_codec="ef:dynamic_tree", baselines=False)
    return dict(plain=_one(comm, FSDPSettings(custom=False, baselines=False, overlap=False), 0.5, "plain"),
                hooked=_one(comm, FSDPSettings(baselines=False), 0.5, "hooked"),
                codec=_one(comm, FSDPSettings(**codec), 1.0, "codec", trace),
                codec_blocking=_one(comm, FSDPSettings(**codec, overlap=False), 1.0, "codec"))


def hpz_case(comm) -> dict:
    """2x2 ranks, hpZ over nodes of 2, 8-bit weights and gradients, two steps."""
    return _one(comm, FSDPSettings(weights_codec="mxfp8_e4m3", grads_codec="dynamic_tree", hpz=2, baselines=False),
                0.25, "hpz")


def registered_algorithm_cases(comm) -> dict:
    """FSDP2 through the hooks on the process group's own collectives, then on registered algorithms: a
    plugin all-gather (`counted_all_gather`, registered by the test) and the ring reduce-scatter; then 8-bit
    weights on the native all-gather and on Bruck's. The plugin's calls in this rank are counted."""
    import counted_all_gather

    out = dict(native=_one(comm, FSDPSettings(baselines=False), 0.5, "native"))
    before = counted_all_gather.CALLS[0]
    out["registered"] = _one(comm, FSDPSettings(baselines=False, all_gather="counted_ring", reduce_scatter="ring"),
                             0.5, "registered")
    out["plugin_calls"] = counted_all_gather.CALLS[0] - before
    w = dict(weights_codec="mxfp8_e4m3", baselines=False)
    out["codec_native"] = _one(comm, FSDPSettings(**w), 0.25, "codec")
    out["codec_bruck"] = _one(comm, FSDPSettings(**w, all_gather="bruck"), 0.25, "codec")
    return out
