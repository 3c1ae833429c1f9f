"""What does FSDP send? The bytes and seconds of ZeRO-3 / FSDP's three collectives per
step (forward all-gather, backward all-gather, gradient reduce-scatter) on a two-level cluster, with
ZeRO++'s qwZ / qgZ / hpZ and any codec (`lab.plan.sharded`), and ZeRO++'s 3M -> 0.75M volume arithmetic
reproduced by the same model. Predictions, not measurements."""
from __future__ import annotations

import pandas as pd

from lab.comm import cluster as _cluster
from lab.plan import sharded as _sh
from lab.plan.devices import get_device
from lab.plan.layers import ModelSpec

PAR_STRATEGIES = _sh.STRATEGIES
ZERO_PP_SWITCHES = _sh.ZERO_PP
ZERO_PP_DEFAULT = _sh.ZERO_PP_ALL
FSDP_ALGORITHMS = _sh.FSDP_ALGORITHMS
FSDP_COLLECTIVES = _sh.COLLECTIVES
PAPER_ZEROPP_VOLUME = dict(_sh.PAPER_VOLUME_M)


def fsdp_codecs() -> list[str]:
    """The codecs FSDP can put on the wire, read now (every registered one that compresses and has a
    reduce-scatter form), bf16 (none) first."""
    from lab.plan.sharded_pays import fsdp_candidates
    return ["bf16", *fsdp_candidates()]


def parse_zero_pp(value) -> tuple[str, ...]:
    """'qwz,qgz,hpz' (any subset, 'none') -> the switches in canonical order; ValueError names the allowed."""
    return _sh.parse_zero_pp(value)


def fsdp_model(billions: float, seq_len: int = 2048) -> ModelSpec:
    """A GPT-style model of about `billions` B parameters (`lab.plan.sharded.transformer`)."""
    return _sh.transformer(billions, seq_len=seq_len)


def _spec(model) -> ModelSpec:
    if isinstance(model, (int, float)) and not isinstance(model, bool):
        return fsdp_model(float(model))
    return _sh.sized_model(model)


def fsdp_traffic(model: str | float | ModelSpec = 7.0, nodes: int = 8, gpus_per_node: int = 8, *,
                 codec: str = "bf16", zero_pp: str | tuple = "none", algorithm: str = "hierarchical",
                 intra: str = "nvlink4", inter: str = "ib_ndr", gpu: str = "h100", batch_per_gpu: int = 1,
                 overlap: bool = False) -> pd.DataFrame:
    """One FSDP step's collectives (model: a preset name or a size in billions of parameters): per
    collective where it runs, its codec, MB leaving one node, MB a node's GPUs send each other, and ms;
    then a 'step' row (compute and step ms, the step in model sizes M = bf16 bytes of the model).
    `attrs`: model, cluster, step_ms, compute_ms, zero3_cross_node_M (plain bf16 ZeRO-3, same cluster)."""
    from lab.plan.pays import BASELINE, Setting, codec_cost

    spec = _spec(model)
    c = _sh.check_fsdp_cluster(_cluster.make_cluster((nodes, gpus_per_node), intra, inter))
    zp = _sh.parse_zero_pp(zero_pp)
    _sh.check_fsdp_algorithm(algorithm)
    if sum(lay.params for lay in spec.layers) == 0:
        raise ValueError(f"model {spec.name!r} has no parameters to shard")
    dev = get_device(gpu)
    cc = _cluster.BF16 if codec in (BASELINE, "none", None) else codec_cost(codec, dev)
    if not isinstance(cc, _cluster.CodecCost):
        raise ValueError(f"codec {codec!r} runs its own allreduces; FSDP reduce-scatters shards: pick one of "
                         f"{', '.join(fsdp_codecs())}")
    s = Setting(spec, c, dev, batch_per_gpu, overlap)
    st = _sh.price_step(s.params, s.fwd, s.bwd, c, cc, algorithm, zp, overlap)
    M = 2.0 * sum(s.params)
    rows = [{"collective": k, "where": t.where, "codec": t.codec, "cross_node_MB": t.cross_node_bytes / 1e6,
             "intra_node_MB": t.intra_node_bytes / 1e6, "cross_node_M": t.cross_node_bytes / M, "ms": 1e3 * t.seconds}
            for k, t in st.collectives.items()]
    tot = st.total
    rows.append({"collective": "step", "where": c.name, "codec": f"{st.weights_codec} / {st.grads_codec}",
                 "cross_node_MB": tot.cross_node_bytes / 1e6, "intra_node_MB": tot.intra_node_bytes / 1e6,
                 "cross_node_M": tot.cross_node_bytes / M, "ms": 1e3 * st.seconds})
    df = pd.DataFrame(rows)
    zero3 = _sh.price_step(s.params, s.fwd, s.bwd, c, _cluster.BF16, algorithm, (), overlap)
    df.attrs.update(model=spec.describe(), cluster=c.name, step_ms=1e3 * st.seconds, compute_ms=1e3 * st.compute_s,
                    zero3_step_ms=1e3 * zero3.seconds, zero3_cross_node_M=zero3.total.cross_node_bytes / M,
                    zero_pp=_sh.zero_pp_label(zp), owned_GB=_sh.owned_GB(sum(s.params), c),
                    hpz_extra_GB=_sh.hpz_extra_GB(sum(s.params), c) if "hpz" in zp else 0.0)
    return df


def fsdp_takeaway(df: pd.DataFrame) -> str:
    """One sentence from an `fsdp_traffic` table: cross-node volume and step time against plain ZeRO-3."""
    a = df.attrs
    step = df[df["collective"] == "step"].iloc[0]
    worst = df[df["collective"] != "step"].sort_values("cross_node_MB").iloc[-1]
    return (f"With ZeRO++ {a['zero_pp']}, {step['cross_node_M']:.2f} M cross each node boundary per step "
            f"(plain bf16 ZeRO-3: {a['zero3_cross_node_M']:.2f} M), most of it in the {worst['collective']}; "
            f"the step takes {a['step_ms']:.1f} ms against ZeRO-3's {a['zero3_step_ms']:.1f} ms "
            f"({a['zero3_step_ms'] / a['step_ms']:.2f}x), compute {a['compute_ms']:.1f} ms.")


def zeropp_volume(cluster: str = "48x8", *, lab_codecs: bool = False, algorithm: str = "hierarchical") -> pd.DataFrame:
    """ZeRO++ §3's cross-node volume per step, ZeRO-3 vs ZeRO++, in model sizes M, by the lab's model beside
    the paper's (`lab.plan.sharded.volume_table`). lab_codecs: the lab's int8 weights and mxfp4_e2m1
    gradients with their scale bytes instead of the paper's scale-free INT8 / INT4."""
    kw = {}
    if lab_codecs:
        from lab.plan.pays import codec_cost
        dev = get_device("h100")
        kw = {"weights": codec_cost("int8", dev), "grads": codec_cost("mxfp4_e2m1", dev)}
    return _sh.volume_table(cluster, algorithm=algorithm, **kw)


__all__ = ["PAR_STRATEGIES", "ZERO_PP_SWITCHES", "ZERO_PP_DEFAULT", "FSDP_ALGORITHMS", "FSDP_COLLECTIVES",
           "PAPER_ZEROPP_VOLUME", "fsdp_codecs", "parse_zero_pp", "fsdp_model", "fsdp_traffic", "fsdp_takeaway",
           "zeropp_volume"]
