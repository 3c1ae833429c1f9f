"""Collectives page section "Where did the time go?": one measured allreduce per rank as a timeline (its
encode, decode, hop, add, send, recv-wait and Python ranges from torch.profiler traces), the per-rank split
(on the wire, waiting, codec work, Python) and what it teaches. Shows the committed `paralab bench compressed
--trace` measurement until the learner measures here (2 processes, Run / Stop). Rendered by
app/views/collectives.py with one call (`render`)."""
from __future__ import annotations

import pandas as pd
import streamlit as st

import _common as ui
import _runs as jobs
from lab import plots
from lab.experiments import (LIVE_CODECS, codec_names, RANGE_KINDS, TIME_SPLIT_RESULT, load_time_split, time_split)
from lab.plots.units import bytes_label

KEY = "split_run"
LIVE_SIZES = [1 << k for k in range(14, 25, 2)]  # 16 K .. 16 M values per rank
SPLIT_COLUMNS = {
    "codec": ("Codec", None),
    "rank": ("Rank", None),
    "seconds": ("Call (ms)", "wall time of the rank's median traced call (of 3), under the profiler"),
    "wire_s": ("On the wire (ms)", "blocked time the link needs for this rank's bytes: min(blocked, messages·L + "
                                   "bytes/B), L and B measured by a ring shift in the same run"),
    "wait_s": ("Waiting (ms)", "the rest of the blocked time: a peer still busy, or a shared link"),
    "codec_s": ("Codec work (ms)", "encode + decode + hop + add"),
    "python_s": ("Python (ms)", "time in the call outside every range: control flow, buffers, the interpreter"),
    "of_call": ("Split / call", "wire + waiting + codec + Python over the call's wall time: 1 = all accounted"),
}


@st.cache_data(show_spinner=False, max_entries=2)
def _committed(path: str):
    return load_time_split(path)


def _split_table(split: pd.DataFrame) -> None:
    shown = split[list(SPLIT_COLUMNS)].copy()
    for c in ("seconds", "wire_s", "wait_s", "codec_s", "python_s"):
        shown[c] = (shown[c] * 1e3).round(3)
    shown["of_call"] = shown["of_call"].round(3)
    shown = shown.rename(columns={c: v[0] for c, v in SPLIT_COLUMNS.items()})
    ui.table(shown, "time_split", help={v[0]: v[1] for v in SPLIT_COLUMNS.values() if v[1]})


def _faster(rows: pd.DataFrame, eight: str) -> tuple[str, str] | None:
    """The prediction's answer from the untraced rows: which of fp16 and `eight` was faster (10 %: noise)."""
    t = dict(zip(rows["codec"], rows["seconds"]))
    if "fp16" not in t or eight not in t:
        return None
    a, b = t["fp16"], t[eight]
    if abs(a - b) < 0.1 * max(a, b):
        return SAME, f"fp16 took {a * 1e3:.3g} ms and {eight} {b * 1e3:.3g} ms: within noise (10 %)."
    win = "fp16" if a < b else EIGHT
    return win, (f"fp16 took {a * 1e3:.3g} ms, {eight} {b * 1e3:.3g} ms per allreduce (untraced medians): "
                 f"{'fp16' if a < b else eight} is {max(a, b) / min(a, b):.2g}x faster. The split below says why.")


EIGHT, SAME = "the 8-bit dynamic tree (half of fp16's bytes)", "the same, within noise"


def _show(res, where: str) -> None:
    """The prediction, the timeline of one call (codec chosen), the split of every call, the takeaway."""
    split, timeline = res.split, res.timeline
    eight = next((c for c in split["codec"] if c.startswith("dynamic_tree")), None)
    if eight is not None and "fp16" in set(split["codec"]):
        ui.predict("Which allreduce finishes first on this CPU: fp16, or the 8-bit dynamic tree, which puts half "
                   "of fp16's bytes on the wire?", ["fp16", EIGHT, SAME], lambda: _faster(res.rows, eight),
                   key="split_guess")
    codecs = list(dict.fromkeys(split["codec"]))
    default = next((c for c in codecs if c.startswith("dynamic_tree")), codecs[-1])
    wk = ui.widget_key("split_codec")
    linked = st.query_params.get("split_codec")
    if st.session_state.get(wk) not in (None, *codecs) or (
            linked not in (None, *codecs) and str(linked).split("[")[0] in codec_names()):
        # a call of the result shown before (the committed one, an earlier run): this result's default instead (a
        # link's value that names no codec is ui.radio's to say, in the control's name)
        st.session_state.pop(wk, None)
        st.query_params.pop("split_codec", None)
    codec = ui.radio("Call on the timeline", codecs, "split_codec", default if default in codecs else codecs[0],
                     help="which measured allreduce the timeline draws (one row per rank)")
    one = timeline[timeline["codec"] == codec]
    row = res.rows[res.rows["codec"] == codec]
    values = int(row["n_values"].iloc[0]) if len(row) and "n_values" in row else None
    title = f"{codec}: one ring allreduce" + (f" of {values:,} values" if values else "") + f" ({where})"
    ui.figure(plots.time_split_figure(one, title), one, "time_split_timeline", key="fig_time_split_timeline")
    st.caption("Colours: " + "; ".join(f"**{k}** {v}" for k, v in RANGE_KINDS.items()) + ". Each rank's call "
               "starts at 0 after a barrier; bars are the innermost range at each moment.")
    ui.figure(plots.split_bars_figure(split), split, "time_split_bars", key="fig_time_split_bars")
    _split_table(split)
    ui.takeaway(res.takeaway, key="takeaway-time-split")


def render() -> None:
    """The section (inside a fragment of the Collectives page)."""
    st.subheader("Where did the time go?")
    st.caption("Each rank of a compressed allreduce either works on the codec (encode, decode, the fused "
               "decode-add-encode hop), talks to the link (posting sends, blocked on a receive), or runs Python. "
               "torch.profiler traced three calls per codec on every rank; the median call is drawn. The same "
               "traces come from `paralab bench compressed --trace DIR` (open them in ui.perfetto.dev; "
               "docs/trace.md).")
    c1, c2 = st.columns(2)
    values = ui.select_slider("Values per rank (measure here)", LIVE_SIZES, "split_values", 1 << 20, where=c1,
                              format_func=lambda v: f"{v:,} ({bytes_label(4 * v)} fp32)",
                              help="the vector each of 2 processes contributes (Gloo over loopback, no shaping)")
    codecs = ui.multiselect("Codecs (beside fp32)", ["fp16", "bf16", "dynamic_tree", "linear", "mxfp8_e4m3"],
                            "split_codecs", list(LIVE_CODECS), where=c2,
                            help="each is timed and traced in the same run as fp32")
    job = jobs.controls("Measure here", KEY, [int(values), list(codecs)],
                        lambda j: time_split(int(values), list(codecs), progress=j.progress),
                        help="start 2 processes, time and trace one allreduce per codec (about half a minute)")
    if job is not None and job.running:
        jobs.watch(KEY, lambda j: None)
        return
    if job is not None and job.state == "failed":
        st.error(job.error)
    if job is not None and job.state == "stopped":
        st.warning("Stopped before the measurement finished: the processes were ended and no call was split. The "
                   "committed measurement is shown; press Measure here to run again.")
    if job is not None and job.state == "done" and job.result is not None:
        _show(job.result, f"measured here on 2 processes, {ui.device_name()}")
        return
    try:
        res = _committed(str(TIME_SPLIT_RESULT))
    except ValueError as e:
        st.info(f"No committed measurement to show ({e}). Press Measure here.")
        return
    cfg = res.config
    _show(res, f"committed: {cfg.get('procs')} processes, {cfg.get('link_rate') or 'loopback'} link, "
               f"{cfg.get('device')}")
