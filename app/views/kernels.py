"""Kernels page: the report card of the lab's CUDA kernels, read without a GPU (bench/results/kernel_report_card.json,
`paralab kernels report`): ptxas's registers and shared memory, the occupancy they allow, DRAM bytes and SASS
instructions per value, and the roofline (Williams, Waterman and Patterson 2009; instructions for flops as in
Ding and Williams 2019) that says whether memory or instruction issue bounds each kernel on H100, H200 and B200."""
import streamlit as st

import _common as ui
import chart
from lab.experiments.kernel_report import (family_distance, kernel_card_frame, kernel_report, kernel_takeaway)
from lab.plots import roofline_figure

ANSWERS = {"encoder": "its encoder (x to codes)", "decoder": "its decoder (codes to x)",
           "fused hop": "its fused hop (decode, add, encode)"}
PLURAL = {"encoder": "encoders", "decoder": "decoders", "fused hop": "fused hops"}
TRIO = {"encoder": "encode_block_f32_lut", "decoder": "decode_block_f32", "fused hop": "hop_codes_block_lut"}
HIDDEN = ("the roofline, each kernel's bound and the takeaway show once you answer the question above, or skip it")

COLUMNS = {
    "kernel": ui.Col("Kernel"),
    "family": ui.Col("Does", "", "encoder: x to codes; decoder: codes to x; fused hop: one reduction step of a "
                     "compressed allreduce (decode, add, encode) or its absmax pass; decode_sum: P payloads summed"),
    "registers": ui.Col("Registers", "per thread", "ptxas -v"),
    "occupancy": ui.Col("Occupancy", "%", "active warps / the SM's 64, the lowest over the CTA sizes the launchers "
                        "choose (CUDA's occupancy rules)", 100.0, "%.0f"),
    "limited_by": ui.Col("Limited by", "", "what stops one more CTA fitting on an SM: warps (the SM is full), "
                         "registers, shared memory or the CTA count"),
    "bytes_per_value": ui.Col("DRAM traffic", "B per value", "read + written once, in the representative call", 1.0,
                              "%.3g"),
    "instructions_per_value": ui.Col("Instructions", "per value", "static SASS count over the values a thread "
                                     "owns in one pass (every path once, loop bodies once: an estimate)", 1.0, "%.3g"),
    "predicted_ps": ui.Col("Predicted", "ps/value", "the slower roof: max(memory, issue)", 1.0, "%.3g"),
    "bound": ui.Col("Bound", "", "the roof that sets the prediction"),
    "issue_over_memory": ui.Col("Issue / memory", "x", "issue-roof time over memory-roof time: above 1 the "
                                "kernel would wait on instruction issue, not DRAM", 1.0, "%.2f"),
    "spill_bytes": ui.Col("Spills", "B", "spill stores + loads per thread (ptxas)"),
    "shared_bytes": ui.Col("Shared memory", "B", "static, per CTA (ptxas)"),
    "cta_sizes": ui.Col("CTA sizes", "threads", "every CTA size the launchers choose for it"),
    "occupancy_cta": ui.Col("Lowest at", "threads per CTA", "the CTA size of the lowest occupancy"),
    "instructions_per_byte": ui.Col("Instructions per byte", "", "arithmetic intensity: instructions / DRAM "
                                    "bytes", 1.0, "%.3g"),
    "memory_ps": ui.Col("DRAM roof", "ps/value", "bytes / HBM bandwidth", 1.0, "%.3g"),
    "issue_ps": ui.Col("Issue roof", "ps/value", "instructions / (SMs x 128 x clock)", 1.0, "%.3g"),
    "sass_instructions": ui.Col("SASS instructions", "", "in the kernel's cubin section"),
    "values_per_thread": ui.Col("Values per thread", "", "in one pass of the representative call", 1.0, "%.0f"),
    "bytes_counted": ui.Col("Bytes counted", "", "what the byte count assumes"),
}
DEFAULT = ["kernel", "family", "registers", "occupancy", "limited_by", "bytes_per_value", "instructions_per_value",
           "predicted_ps", "bound", "issue_over_memory"]
FAMILY_COLUMNS = {"family": ui.Col("Does"), "kernels": ui.Col("Kernels"),
                  "median_issue_over_memory": ui.Col("Issue / memory, median", "x", "", 1.0, "%.2f"),
                  "lowest": ui.Col("Lowest", "x", "", 1.0, "%.2f"), "highest": ui.Col("Highest", "x", "", 1.0, "%.2f"),
                  "issue_bound": ui.Col("Issue bound", "kernels")}


def _predict(frame, gpu: str) -> None:
    """Of one codec's three kernels (the dynamic tree, blocks of 64, fp32, table search by prefix), which is
    furthest from the memory roof on this GPU, revealed from the card's numbers."""
    trio = {k: frame.loc[frame["kernel"] == k].iloc[0] for k in TRIO.values()}

    def reveal():
        far = max(TRIO, key=lambda f: trio[TRIO[f]]["issue_over_memory"])
        per = ", ".join(f"{f} ({k}) {trio[k]['instructions_per_byte']:.3g} instructions per byte, issue "
                        f"{trio[k]['issue_over_memory']:.2f}x memory" for f, k in TRIO.items())
        fam = family_distance(frame)
        med = ", ".join(f"{PLURAL.get(r.family, r.family)} {r.median_issue_over_memory:.2f}x" for r in fam.itertuples())
        return ANSWERS[far], (
            f"On {gpu}: {per}. The fused hop decodes two payloads, adds them, reduces the absmax and searches the "
            "table again for every value, yet moves only about 3 bytes per value (two codes in, one out): the most "
            "instructions per byte. The decoder is a lookup and a multiply. Over every kernel of the card, the "
            f"median issue / memory per family: {med}.")
    ui.predict(f"The dynamic tree with blocks of 64 on fp32: on {gpu}, which of its kernels sits furthest from the "
               "memory roof (its instruction issue, not DRAM, would hold it back most)?", list(ANSWERS.values()),
               reveal, key="guess")


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("Kernels")
    ui.lesson("Why is this kernel memory bound?",
              "Pick a GPU: each kernel's DRAM bytes and SASS instructions per value place it on that GPU's "
              "roofline. Left of the ridge the memory roof is lower (memory bound), right of it the issue roof "
              "(issue bound). The table says what limits each kernel's occupancy.")
    with ui.guard():
        card = kernel_report()
    gpus = [g["name"] for g in card["gpus"]]
    c1, c2, c3 = st.columns(3)
    gpu = ui.select("GPU", gpus, "gpu", "H200", where=c1,
                    help="the GPU whose roofs the prediction uses: " + "; ".join(
                        f"{g['name']}: {g['hbm_GBps']:g} GB/s, {g['sms']} SMs at {g['boost_MHz']:g} MHz"
                        for g in card["gpus"]))
    arch_of = {g["name"]: g["arch"] for g in card["gpus"]}
    arch = ui.select("Architecture (table)", card["archs"], "arch", arch_of[gpu], where=c2,
                     help="the architecture whose ptxas numbers the table below shows: "
                          + ", ".join(card["archs"]) + " (the roofline always uses the GPU's)")
    frame = kernel_card_frame(card, gpu)
    kernel = ui.select("Kernel", list(frame["kernel"]), "kernel", "hop_codes_block_lut", where=c3,
                       help="circled on the roofline, and read out below")
    _predict(frame, gpu)
    takeaway_slot = st.container()
    if not ui.revealed("guess"):
        with takeaway_slot:
            ui.withheld(HIDDEN, f"Which of the lab's kernels would wait on instruction issue rather than DRAM on "
                                f"{gpu} is the question above: answer it (or skip it) to see the roofline.")
        return
    g = next(x for x in card["gpus"] if x["name"] == gpu)
    with takeaway_slot:
        ui.takeaway(kernel_takeaway(frame, card, gpu))
    chart.plotly(roofline_figure(frame, g, kernel), key="kernels_roofline")
    r = frame.loc[frame["kernel"] == kernel].iloc[0]
    m = st.columns(4)
    m[0].metric(f"{kernel}: bytes per value", f"{r['bytes_per_value']:.3g} B", help=r["bytes_counted"])
    m[1].metric("Instructions per value", f"{r['instructions_per_value']:.3g}",
                help=f"{r['sass_instructions']:,} SASS instructions over {r['values_per_thread']:.0f} values a thread")
    m[2].metric(f"Predicted on {gpu}", f"{r['predicted_ps']:.3g} ps/value", f"{r['bound']} bound",
                delta_color="off", delta_arrow="off", help=f"memory roof {r['memory_ps']:.3g} ps, issue roof {r['issue_ps']:.3g} ps")
    m[3].metric("Occupancy", f"{r['occupancy']:.0%}", f"limited by {r['limited_by']}", delta_color="off", delta_arrow="off",
                help=f"at {r['occupancy_cta']} threads per CTA, {r['registers']} registers, "
                     f"{r['shared_bytes']} B shared memory")
    why = ("its DRAM bytes take longer than its instructions take to issue: a faster memory speeds it up"
           if r["bound"] == "memory" else
           f"it issues {r['instructions_per_byte']:.3g} instructions per byte, above the ridge's "
           f"{g['balance_instructions_per_byte']:.1f}: fewer instructions per value, not more bandwidth, would "
           "speed it up")
    st.markdown(f"**{kernel}** on {gpu} is predicted **{r['bound']} bound**: {why}.")
    st.subheader("How far each kind of kernel is from the memory roof")
    ui.people_table(family_distance(frame), "kernels_families", FAMILY_COLUMNS)
    st.subheader(f"Every kernel on {arch}")
    if arch != arch_of[gpu]:
        st.caption(f"{gpu} is {arch_of[gpu]}: the table shows {arch}'s ptxas numbers, occupancy and instruction "
                   f"counts under {gpu}'s roofs.")
    ui.people_table(kernel_card_frame(card, gpu, arch), f"kernels_{arch}", COLUMNS, DEFAULT)
    st.caption(f"{card['nvcc']}; options {' '.join(card['nvcc_options'])}. Instructions are a static count "
               "(every path once, each loop body once), so a kernel with a loop per value (decode_sum walks its "
               f"{card['assumptions']['payloads']} payloads, a binary search its steps) issues more than shown, and "
               "one with a path it does not take fewer. `paralab kernels report` prints the same card.")

