"""The two-level machine (lab.comm.cluster) against hand-computed alpha-beta numbers on a tiny cluster,
the in-network (NVLS) factors, ZeRO++'s 4x less cross-node volume, the presets' limits and bad input."""
import math

import pytest

from lab.comm import cost
from lab.comm import cluster as cl
from lab.comm.cluster import BF16, Cluster, CodecCost
from lab.comm.cost import Link

# 2 nodes × 2 GPUs; inside L = 1 µs, 100 GB/s; one NIC per GPU, L = 10 µs, 10 GB/s
A = Link("a", 1e-6, 100e9, "test")
E = Link("e", 10e-6, 10e9, "test")
C = Cluster(2, 2, A, E)
N_VALUES = 1e6  # bf16: m = 2e6 bytes
# a 4-bit codec with no side bytes: 1 ps/value to encode, 2 ps to decode, one kernel each, 1 µs per launch
Q4 = CodecCost("q4", 0.5, 0.0, 1e-12, 2e-12, 1, 1, 1e-6, "requantize")


def hier(c, n, inter=BF16, intra=BF16, **kw):
    """hierarchical as it prices itself on the machine (its `Algorithm.cluster_time`)."""
    return cl.algorithm_time(c, "hierarchical", n, inter, intra_codec=intra, **kw)


def a2a(c, n, codec, **kw):
    """alltoall_quantized (ZeRO++ qgZ) as it prices itself on the machine."""
    return cl.algorithm_time(c, "alltoall_quantized", n, codec, **kw)


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-18)


def test_flat_ring_on_the_slowest_link_by_hand():
    # ring over P = 4 with every hop at L = 10 µs and 10 GB/s: 2·3·10 µs + 2·2e6·(3/4)/10e9 = 60 µs + 300 µs
    t = cl.flat_time(C, N_VALUES)
    assert t.seconds == approx(3.6e-4) and t.codec_s == 0
    assert cl.flat_time(C, N_VALUES).seconds == approx(cost.allreduce_time("ring", 4, 2e6, C.slowest))
    # any registered algorithm: tree over 4 ranks = 2·2 messages of the whole vector
    assert cl.flat_time(C, N_VALUES, BF16, "tree").seconds == approx(2 * 2 * (10e-6 + 2e6 * 1e-10))


def test_hierarchical_by_hand():
    # intra reduce-scatter: 1·(1 µs + 1e6 B / 100 GB/s) = 11 µs; allgather the same
    # inter ring of the 1e6-byte shard over N = 2: 2·1·10 µs + 2·1e6·(1/2)/10e9 = 20 µs + 100 µs
    t = hier(C, N_VALUES)
    assert t.transfer_s == approx(2 * 11e-6 + 120e-6) and t.seconds == approx(1.42e-4)
    assert t.node_egress_bytes == approx(2e6)  # 2m(N−1)/N leaves each node
    # one node: a plain ring; one GPU per node: the inter-node ring of the whole vector
    one = hier(Cluster(1, 4, A, E), N_VALUES)
    assert one.seconds == approx(cost.allreduce_time("ring", 4, 2e6, A))
    assert hier(Cluster(4, 1, A, E), N_VALUES).seconds == approx(cost.allreduce_time("ring", 4, 2e6, E))


def test_alltoall_quantized_hierarchical_by_hand():
    t = a2a(C, N_VALUES, Q4)
    # all-to-all inside: 1·(1 µs + 0.5·5e5 B·1e-11) = 3.5 µs; across (the 5e5-value shard, 2.5e5-value pieces):
    # 1·(10 µs + 0.5·2.5e5·1e-10) = 22.5 µs, twice (all-to-all, allgather); allgather inside: 3.5 µs
    assert t.transfer_s == approx(3.5e-6 + 2 * 22.5e-6 + 3.5e-6)
    # encoded: n inside, the shard and its piece's sum across (7.5e5); decoded: 5e5 inside, 2.5e5 summed,
    # 2.5e5 + 5e5 arriving sums -> 1.75e6·1 ps + 1.5e6·2 ps
    assert t.codec_s == approx(1.75e6 * 1e-12 + 1.5e6 * 2e-12)
    assert t.launch_s == approx((2 + 5) * 1e-6)  # one encode + decode set inside, 2 encodes + 3 decodes across
    assert t.node_egress_bytes == approx(2 * 1 * 0.5 * 2.5e5 * 2)


def test_qgz_cross_node_volume_is_4x_less_than_bf16():
    """ZeRO++ qgZ (arXiv 2306.10209 §4.3): 4-bit instead of 16-bit gradients across nodes, 4x less volume."""
    for nodes, gpus in ((2, 2), (8, 8), (64, 8)):
        c = Cluster(nodes, gpus, cost.LINKS["nvlink4"], cost.LINKS["ib_ndr"])
        b16 = hier(c, 124e6).node_egress_bytes
        q4 = a2a(c, 124e6, Q4).node_egress_bytes
        assert b16 / q4 == pytest.approx(4.0)
    # flat qgZ sends every GPU's whole vector out of the node: g times the hierarchical's volume
    c = Cluster(8, 8, cost.LINKS["nvlink4"], cost.LINKS["ib_ndr"])
    flat = a2a(c, 124e6, Q4, hierarchical=False).node_egress_bytes
    assert flat / a2a(c, 124e6, Q4).node_egress_bytes == pytest.approx(8 * 56 / 64 / (7 / 8))


def test_nvls_factor_and_why_its_busbw_beats_the_ring():
    # NCCL's NVLS: each rank moves m(P+1)/P; busbw (the ring's convention 2(P−1)/P · algbw) = wire · 2(P−1)/(P+1)
    assert cl.in_network_coefficients(8, 1.0, "nvls") == (2.0, 9 / 8)
    assert cl.in_network_coefficients(8, 1.0, "sharp") == (2.0, 1.0)
    assert cl.nvls_wire_factor(8) == pytest.approx(14 / 9) and cl.nvls_wire_factor(2) == pytest.approx(2 / 3)
    assert cl.nvls_wire_factor(1) == 1.0
    d = cl.nvls_explained(8, 450.0, 370.0, 480.0)
    assert d["nvls_wire_GBps"] == pytest.approx(480 * 9 / 14)  # 308.6 GB/s on the wire
    assert d["nvls_line_fraction"] == pytest.approx(480 * 9 / 14 / 450)
    assert d["ring_line_fraction"] == pytest.approx(370 / 450)
    assert d["measured_speedup"] == pytest.approx(480 / 370) and d["model_speedup_same_wire"] == pytest.approx(14 / 9)
    assert d["measured_speedup"] < d["model_speedup_same_wire"]  # NVLS gets less of the line than the ring does
    # one H100 node: NVLS time = 2 L + m·(9/8)/450 GB/s against the ring's 14 L + 2m·(7/8)/450 GB/s
    node = Cluster(1, 8, cost.LINKS["nvlink4"], cost.LINKS["ib_ndr"])
    m = 2.0 * 1e8
    assert cl.in_network_time(node, 1e8).seconds == approx(2e-6 + m * 9 / 8 / 450e9)
    assert cl.flat_time(node, 1e8).seconds == approx(14e-6 + 2 * m * 7 / 8 / 450e9)


def test_in_network_two_levels_and_where_it_exists():
    c = Cluster(2, 2, Link("nvlink4", 1e-6, 100e9, "t"), Link("ib_ndr", 10e-6, 10e9, "t"))
    # NVLS inside and SHARP across pipeline: 2(L_a + L_e) + max(m·3/2·G_a, (m/2)·G_e)
    assert cl.in_network_time(c, N_VALUES).seconds == approx(2 * (1e-6 + 10e-6) + max(3e6 / 100e9, 1e6 / 10e9))
    assert not cl.in_network_available(Cluster(2, 8, cost.LINKS["pcie4_x16"], cost.LINKS["eth100g"]))
    with pytest.raises(ValueError, match="nvlink4, nvlink5.*ib_hdr, ib_ndr"):
        cl.in_network_time(Cluster(2, 8, cost.LINKS["pcie4_x16"], cost.LINKS["eth100g"]), 10)
    with pytest.raises(ValueError, match="allowed: bf16"):
        cl.in_network_time(c, 10, Q4)


def test_codec_per_level_and_launches():
    # the codec across only: the inside levels are bf16 rings, the shard's ring requantizes per hop
    t = hier(C, N_VALUES, Q4)
    inter = cost.compressed_time("ring", 2, 500000, C.inter_per_gpu, wire_bytes_per_value=0.5,
                                 encode_s_per_value=1e-12, decode_s_per_value=2e-12)
    assert t.seconds == approx(2 * 11e-6 + inter + 2 * (1 + 1) * 1e-6)  # 2 ring messages × (encode + decode)
    assert t.node_egress_bytes == approx(2e6 / 4)
    # the flat ring pays a codec launch set per message: 2(P−1) of them
    assert cl.flat_time(C, N_VALUES, Q4).launch_s == approx(6 * 2 * 1e-6)


def test_nics_per_node_share_the_network():
    one_nic = Cluster(2, 8, cost.LINKS["nvlink4"], cost.LINKS["ib_ndr"], nics_per_node=1)
    assert one_nic.inter_per_gpu.bandwidth_Bps == pytest.approx(50e9 / 8)
    assert Cluster(2, 8, cost.LINKS["nvlink4"], cost.LINKS["ib_ndr"]).inter_per_gpu.bandwidth_Bps == pytest.approx(50e9)


def test_presets_have_sources_and_aliases():
    assert cost.LINKS["nvlink5"].bandwidth_Bps == 900e9 and cost.LINKS["eth400g"].bandwidth_Bps == 50e9
    for table in (cl.INTRA, cl.INTER):
        for name, lim in table.items():
            assert name in cost.LINKS and lim.source and lim.max_endpoints >= 2
    c = cl.make_cluster("8x8", "nvlink4", "ndr400")
    assert c.P == 64 and c.inter is cost.LINKS["ib_ndr"] and c.intra is cost.LINKS["nvlink4"]
    assert cl.parse_cluster(" 16 x 8 ") == (16, 8)


@pytest.mark.parametrize("args, words", [
    (("0x8",), "must be >= 1"),
    (("8 by 8",), "NODESxGPUS"),
    (("8x9", "nvlink4"), "GPUs per node allowed: nvlink3: 8, nvlink4: 8, nvlink5: 72"),
    (("257x8", "nvlink4", "ib_ndr"), "at most 256 nodes of 8 NICs"),
    (("801x1", "nvlink4", "ib_hdr"), "800"),
    (("8x8", "nvlink9"), "unknown intra-node link 'nvlink9'; allowed: nvlink3"),
    (("8x8", "nvlink4", "ib_xdr"), "unknown inter-node link 'ib_xdr'; allowed: ib_qdr"),
])
def test_bad_clusters_name_the_allowed_values(args, words):
    with pytest.raises(ValueError) as e:
        cl.make_cluster(*args)
    assert words in str(e.value)


def test_bad_numbers():
    with pytest.raises(ValueError, match="nodes must be an int >= 1"):
        Cluster(0, 8, A, E)
    with pytest.raises(ValueError, match="nics_per_node"):
        Cluster(2, 8, A, E, nics_per_node=0)
    with pytest.raises(ValueError, match="n_values"):
        hier(C, -1)
    with pytest.raises(ValueError, match="unknown two-level algorithm"):
        cl.cluster_allreduce(C, 10, BF16, "tree2")
    with pytest.raises(ValueError, match="mode"):
        CodecCost("x", 1.0, mode="sparse")
    assert cl.cluster_allreduce(C, 0, BF16, "hierarchical").seconds == 0
    assert math.isfinite(a2a(C, 1, Q4, hierarchical=False).seconds)


def test_a_single_ring_crosses_each_node_boundary_with_a_whole_nic():
    """One NIC per node of 2 GPUs: the hierarchical level shares it (two flows), the flat ring does not (one
    flow per node boundary per direction); other flat algorithms stay on one GPU's share."""
    one_nic = Cluster(2, 2, A, E, nics_per_node=1)
    assert one_nic.ring_link.bandwidth_Bps == 10e9 and one_nic.inter_per_gpu.bandwidth_Bps == 5e9
    ring = [cl.algorithm_time(c, "ring", N_VALUES).seconds for c in (one_nic, C)]
    assert ring[0] == approx(ring[1])
    assert cl.flat_time(one_nic, N_VALUES, algorithm="tree").seconds > cl.flat_time(C, N_VALUES, algorithm="tree").seconds


def _levels(intra: Link, nic: Link, n: int, k: int = 2, N: int = 2) -> dict:
    """What `bench.levels_rank` would measure on a machine that is exactly these links."""
    rows = lambda P, sizes, lk: [{"kind": "allreduce", "algorithm": "ring", "P": P, "nbytes": 4 * m,  # noqa: E731
                                  "seconds": cost.allreduce_time("ring", P, 4 * m, lk)} for m in sizes]
    sizes = [n // 16, n // 4, n]
    return {"intra": rows(k, sizes, intra), "inter": rows(N, [m // k for m in sizes], nic),
            "codecs": {"q8": {"encode_s_per_value": 2e-9, "decode_s_per_value": 1e-9, "bytes_per_value": 1.0}}}


def test_calibration_recovers_the_links_and_models_rows_by_hand():
    """The two levels measured apart give back the links; a 2x2 hierarchical fp32 allreduce of n values is
    2 L_i + 4n G_i (ring reduce-scatter and allgather of 4n bytes on 2 ranks) + 2 (L_e + n·2G_e) (a 2-rank
    ring of the n/2 shard, 2n bytes, in two messages of n bytes on half a NIC: the node's two ranks share it)."""
    import pandas as pd

    from lab.experiments.benchmarks import two_level_model

    n = 1 << 22
    intra, nic = Link("i", 50e-6, 2e9, "t"), Link("e", 200e-6, 0.125e9, "t")
    machine = cl.calibrate(_levels(intra, nic, n), 2, 2)
    assert machine.intra.L == pytest.approx(50e-6, rel=1e-6) and machine.intra.bandwidth_Bps == pytest.approx(2e9)
    assert machine.inter.L == pytest.approx(200e-6, rel=1e-6) and machine.inter.bandwidth_Bps == pytest.approx(0.125e9)
    by_hand = 2 * 50e-6 + 4 * n / 2e9 + 2 * (200e-6 + n * 2 / 0.125e9)
    assert cl.predict(machine, "hierarchical", n, cl.FP32, cl.FP32).seconds == pytest.approx(by_hand, rel=1e-9)
    df = pd.DataFrame([
        {"algorithm": "hierarchical", "codec": "fp32", "mode": "raw", "n_values": n, "seconds": by_hand,
         "intra_codec": "none"},
        {"algorithm": "hierarchical", "codec": "q8", "mode": "requantize", "n_values": n, "seconds": 1.0,
         "intra_codec": "none"},
        {"algorithm": "ring", "codec": "fp32", "mode": "raw", "n_values": n, "seconds": 1.0}])
    out = two_level_model(df, _levels(intra, nic, n), 2, 2)
    assert out["model_error"][0] == pytest.approx(0, abs=1e-9)
    # the codec across: 1 byte per value, two messages of n/4 bytes on half a NIC; the shard's ring hop
    # decodes-adds-encodes (E = n/2, D = 3n/4)
    q8_hand = 2 * 50e-6 + 4 * n / 2e9 + 2 * (200e-6 + n / 4 * 2 / 0.125e9) + (n / 2) * 2e-9 + (3 * n / 4) * 1e-9
    assert out["model_s"][1] == pytest.approx(q8_hand, rel=1e-9)
    # the flat ring: 6 messages of n bytes (a quarter of 4n), every hop at the slower link, a whole NIC
    assert out["model_s"][2] == pytest.approx(6 * (200e-6 + n / 0.125e9), rel=1e-9)
    cal = out.attrs["calibration"]
    assert cal["nic_GBps"] == pytest.approx(0.125) and cal["max_abs_model_error"] == out["model_error"].abs().max()
    bad = {"intra": _levels(intra, nic, n)["intra"][:1], "inter": [], "codecs": {}}  # one size: no fit
    assert "no model" in two_level_model(df, bad, 2, 2).attrs["calibration"]["error"]


def test_hierarchical_codec_work_is_what_the_algorithm_does():
    """The model's values encoded and decoded per rank are the algorithm module's own counts (inner ring
    re-quantising per hop, the owner keeping its decoded sum, the outer ring on the shard)."""
    from lab.comm.algorithms import hierarchical

    for P, k in ((4, 2), (8, 4), (8, 2)):
        c = Cluster(P // k, k, A, E)
        E_, D_ = hierarchical.codec_counts(P, N_VALUES, k)
        assert hier(c, N_VALUES, Q4, Q4).codec_s == approx(E_ * 1e-12 + D_ * 2e-12)


def test_chunks_and_pipeline_hide_what_they_overlap():
    from lab.comm.algorithms.hierarchical import across_nodes
    assert cl.pipelined_hidden(3.0, 1.0, 1) == 0 and cl.pipelined_hidden(3.0, 1.0, 4) == approx(0.75)
    slow = CodecCost("slow8", 1.0, 0.0, 1e-9, 1e-9, mode="requantize")
    plain = hier(C, 8e6, slow, cl.FP32)
    # the shard's 2-rank ring sends 2e6-value messages: 2 chunks of 1e6 -> half the smaller of transfer and codec
    chunked = hier(C, 8e6, slow, cl.FP32, chunk_values=1e6)
    across = across_nodes(C, 8e6, slow, "ring", None)
    assert chunked.hidden_s == approx(min(across.transfer_s, across.codec_s) / 2)
    assert chunked.seconds == approx(plain.seconds - chunked.hidden_s)
    # pipeline = 4: each level runs 4 times on a quarter (4x the latency) and the levels overlap
    piped = hier(C, 8e6, cl.FP32, cl.FP32, pipeline=4)
    node = hier(Cluster(1, 2, A, E), 2e6, cl.FP32, cl.FP32)
    cross = across_nodes(C, 2e6, cl.FP32, "ring", None)
    assert piped.seconds == approx(4 * node.seconds + 4 * cross.seconds
                                   - cl.pipelined_hidden(4 * node.seconds, 4 * cross.seconds, 4))
    assert piped.seconds < hier(C, 8e6, cl.FP32, cl.FP32).seconds
