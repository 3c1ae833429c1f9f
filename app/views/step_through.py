"""Step through page ("See a collective happen"): one allreduce on 2..8 simulated ranks,
message by message, for any registered algorithm — arrows between ranks, bytes per link, buffers
filling with partial sums, the codec's error at each hop — and, beside it, algbw vs busbw for the
same run: why nccl-tests multiplies by 2(P−1)/P."""
import streamlit as st

import _common as ui
import chart
from lab import plots
from lab.experiments import (LINKS, STEP_P, STEP_VALUES, algorithm_catalog, algorithm_traffic, busbw_table,
                             op_busbw_text, op_catalog, op_names, op_step_through, step_codecs, step_through)
from lab.plots.units import bytes_label

SIZES = [1 << k for k in range(10, 31, 2)]  # 1 kB .. 1 GB per rank, for the timing


@st.cache_data(max_entries=64, show_spinner=False)
def _trace(algorithm: str, P: int, n: int, codec: str, seed: int):
    return step_through(algorithm, P, n, codec=None if codec == "none" else codec, seed=seed)


@st.cache_data(max_entries=64, show_spinner=False)
def _op_trace(op: str, algorithm: str, P: int, n: int, root: int):
    return op_step_through(op, algorithm, P, n, root=root)


def _get(algorithm: str, P: int, n: int, codec: str, seed: int, op: str = "all_reduce", root: int = 0):
    """The traced run: an allreduce (with its codec) or another op (fp32)."""
    return _trace(algorithm, P, n, codec, seed) if op == "all_reduce" else _op_trace(op, algorithm, P, n, root)


@st.cache_resource(max_entries=32, show_spinner=False)
def _frames(algorithm: str, P: int, n: int, codec: str, seed: int, op: str = "all_reduce", root: int = 0,
            stacked: bool = False):
    """The animation's frames, built once per run and shared read-only by the figure of every step."""
    return plots.step_through_frames(_get(algorithm, P, n, codec, seed, op, root), stacked=stacked)


def _figure(algorithm: str, P: int, n: int, codec: str, seed: int, step: int, op: str = "all_reduce", root: int = 0,
            stacked: bool = False):
    """The figure at `step` (cheap: the frames are shared). No animation of its own: the page's Step is
    the one step state, and Play advances it."""
    return plots.step_through_figure(_get(algorithm, P, n, codec, seed, op, root), step,
                                     frames=_frames(algorithm, P, n, codec, seed, op, root, stacked), animate=False)


LAYOUTS = ["side by side", "stacked"]


def _stacked() -> bool:
    """The figure's layout: panels side by side (wide windows) or stacked one per row (about 800 px). Drawn
    under More settings: nothing comes between the step controls and the figure they drive."""
    return ui.radio("Figure", LAYOUTS, "layout", LAYOUTS[0],
                    help="side by side: ranks and buffers in one row; stacked: one panel per row, larger, for a "
                         "window about 800 px wide or P = 8") == "stacked"


def _predict(tr, algorithm: str, P: int) -> None:
    """Predict, then reveal: the bytes through the busiest rank, in multiples of n, against 2(P−1)/P."""
    s = tr.summary

    def reveal() -> tuple[float, str]:
        x, share = s["busiest_rank_x_n"], s["nccl_share"]
        return round(x, 3), (
            f"Rank {s['busiest_rank']} moves {s['busiest_rank_bytes']:,.0f} B of n = {tr.nbytes} B (the larger of "
            f"what it sends and receives): {s['busiest_rank_bytes']:,.0f} / {tr.nbytes} = {x:.3g}·n. The least "
            f"any allreduce can move is 2(P−1)/P·n = 2·{P - 1}/{P}·n = {share:.3g}·n"
            + (" — this algorithm reaches it." if abs(x - share) < 1e-9 else f"; this one moves {x / share:.2g}× that."))
    ui.predict(f"How many bytes does the busiest rank of {algorithm} move in one allreduce at P = {P}, in multiples "
               f"of n (one rank's vector)?", None, reveal, key="guess", unit="× n", tolerance=0.05, lo=0, hi=100)


#: seconds each step shows while playing
PLAY_SECONDS = 0.9
_PLAYING, _LAST = "step_playing", "step_played_at"


def _tick(S: int) -> None:
    """One beat of Play: the next step, written to the Step slider's own state (the slider, metrics, figure
    and tables all follow), then a rerun of the page. Called before the slider is drawn, so its state
    may change; the beat waits PLAY_SECONDS since the last, so the rerun it causes does not advance again."""
    import time

    if not st.session_state.get(_PLAYING):
        return
    now = time.monotonic()
    if now - st.session_state.get(_LAST, 0.0) < PLAY_SECONDS:
        return
    cur = int(st.session_state.get(ui.widget_key("step"), 0))
    nxt = min(cur + 1, S)
    ui.set_state(step=nxt)
    st.session_state[_LAST] = now
    if nxt >= S:
        st.session_state[_PLAYING] = False  # the last step: Play stops there
    st.rerun()


@st.fragment(run_every=PLAY_SECONDS)
def _player(S: int) -> None:
    """While playing, re-run every PLAY_SECONDS (a fragment, so nothing else recomputes until a step is due)."""
    _tick(S)


def _step_controls(S: int) -> int:
    """◀, ▶ Play / ❚❚ Pause and ▶ in a row that wraps at 800 px, and the Step slider below them at full width:
    one step state for the whole page. Returns the step shown."""
    wkey = ui.widget_key("step")
    if st.session_state.get(wkey, 0) > S:  # fewer steps than the last view: the last step
        ui.set_state(step=S)
    if st.session_state.get(_PLAYING):
        _player(S)

    def move(d: int) -> None:
        st.session_state[_PLAYING] = False
        ui.set_state(step=min(max(st.session_state.get(wkey, 0) + d, 0), S))

    def play() -> None:
        import time

        if st.session_state.get(wkey, 0) >= S:  # at the end: play from the start
            ui.set_state(step=0)
        st.session_state[_PLAYING] = True
        st.session_state[_LAST] = time.monotonic()

    def pause() -> None:
        st.session_state[_PLAYING] = False

    row = st.container(horizontal=True, vertical_alignment="center")
    row.button("◀", on_click=move, args=(-1,), key="step_back", help="One step back")
    if st.session_state.get(_PLAYING):
        row.button("❚❚ Pause", on_click=pause, key="step_pause", help="Stop at this step")
    else:
        row.button("▶ Play", on_click=play, key="step_play", type="primary",
                   help=f"Advance one step every {PLAY_SECONDS:g} s to the last; the slider, metrics, figure "
                        "and tables move together")
    row.button("▶", on_click=move, args=(1,), key="step_next", help="One step forward")
    step = ui.slider("Step", "step", 0, 0, max(S, 1),
                     help=f"0: before any message. k: after the messages of step k arrived and were added "
                          f"({S} steps here). ▶ Play advances this same slider.")
    return min(int(step), S)


@st.cache_data(max_entries=32, show_spinner=False)
def _traffic(P: int, n: int, link: str, size: int, op: str = "all_reduce"):
    return algorithm_traffic(P, n, link, size, op=op)


#: what each op leaves in the buffers, for the lesson line
OP_LESSON = {
    "all_gather": "every rank's buffer fills with the other ranks' shards, row by row (the number is whose data it is)",
    "reduce_scatter": "every rank ends with one shard of the sum: its own row of the grid reaches P ranks summed",
    "alltoall": "block j of rank i lands as block i of rank j: the grid is a transposition filling in",
    "broadcast": "the root's buffer spreads along a tree; the other ranks fill when it reaches them",
    "reduce": "partial sums flow up a tree to the root, whose buffer alone ends as the full sum",
    "sendrecv": "every rank sends its buffer to the next rank and receives the previous one's",
}


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    ops = op_names()
    head = st.container()  # the title and lesson above the choice of op they depend on
    o1, o2 = st.columns(2)
    op = ui.select("Collective", ops, "op", "all_reduce", where=o1,
                   help="nccl-tests' seven collectives; each has its own algorithms and its own busbw factor")
    if op != "all_reduce":
        _render_op(op, o2, head)
        return
    catalog = algorithm_catalog()  # read per run: an algorithm registered later shows too
    algorithms = catalog.name.tolist()
    head.title("Step through an allreduce")
    with head:
        ui.lesson("What does an allreduce send, step by step, and why does nccl-tests report busbw = algbw · 2(P−1)/P?",
                  "Press **▶ Play** above the figure, or move **Step**: both move the one step the whole page shows. Arrows are the messages of that step with "
                  "their bytes; the buffer grid darkens as partial sums arrive (the number is how many ranks are "
                  "summed into that value); the link grid counts bytes per link; the error plot shows what the codec "
                  "loses at each hop where a partial sum is re-encoded. Below the figure: the busiest rank's bytes "
                  "against the 2(P−1)/P·n that busbw assumes.")
    c2, c3 = st.columns(2)
    algorithm = ui.select("Algorithm", algorithms, "algorithm", "ring" if "ring" in algorithms else algorithms[0],
                          where=o2, help="Every registered allreduce algorithm (plugins too): "
                          + "; ".join(f"{r.name}: {r.summary}" for r in catalog.itertuples()))
    P = ui.number("Ranks P", "P", 4, where=c2, min_value=STEP_P[0], max_value=STEP_P[1], step=1,
                  help=f"Simulated ranks (GPUs), {STEP_P[0]} to {STEP_P[1]}: small enough to see every message.")
    codecs = ["none", *step_codecs()]
    codec_name = ui.select("Codec on the wire", codecs, "codec", "dynamic_tree", where=c3,
                           help="What each message is encoded with. 'none' sends fp32. A codec is decoded, added "
                                "and re-encoded at every hop (requantize mode), so its error grows with the hops.")
    with ui.more_settings():
        m1, m2 = st.columns(2)
        m3, m4 = st.columns(2)
        n = ui.select("Values per rank", list(STEP_VALUES), "n", 24, where=m1,
                      help="Length of each rank's vector (n = 4 × this many bytes in fp32). 840 splits evenly "
                           "for every P from 2 to 8.")
        seed = ui.number("Seed", "seed", 0, where=m2, min_value=0, step=1,
                         help="Seed of every rank's random vector (N(0, 1) values) and of stochastic codecs: an "
                              "integer ≥ 0; the same seed repeats the run exactly.")
        link = ui.select("Link for the timing", list(LINKS), "link", "nvlink4", where=m3,
                         help="Latency and bandwidth used to time this run's steps: "
                              + "; ".join(f"{k}: {v.source}" for k, v in LINKS.items()))
        size = ui.select_slider("Message size for the timing", SIZES, "size", 1 << 28, where=m4,
                                format_func=bytes_label,
                                help="Bytes per rank (nccl-tests' size) the traced pattern is scaled to for algbw "
                                     "and busbw: 1 kB to 1 GB. Small sizes are latency-bound.")
        spec = ui.codec_options(codec_name, "codec_opt") if codec_name != "none" else "none"
        stacked = _stacked()
    with ui.guard():
        tr = _trace(algorithm, int(P), int(n), spec, int(seed))
    info = catalog.set_index("name").loc[algorithm]
    st.caption(f"**{algorithm}**: {info.summary} ({info.citation}).")

    S = tr.steps
    _predict(tr, algorithm, int(P))
    step = _step_controls(S)

    ui.figure(_figure(algorithm, int(P), int(n), spec, int(seed), step, stacked=stacked), tr.messages, "step_through")
    shown = tr.messages[tr.messages.step < step]
    now = tr.messages[tr.messages.step == step - 1]
    k1, k2 = st.columns(2)
    k3, k4 = st.columns(2)
    k1.metric("Step", f"{step} of {S}", help="Lamport rounds: a message sent after receiving one from step k is "
              "in step k + 1 or later")
    k2.metric("Messages now", f"{len(now)}", help=f"Messages of this step; {len(tr.messages)} in the whole allreduce")
    k3.metric("Bytes sent so far", f"{int(shown.bytes.sum()):,} B",
              help=f"all ranks together; {int(tr.messages.bytes.sum()):,} B in the whole allreduce "
                   f"({tr.codec})")
    full = (tr.counts[step] == P).mean()
    k4.metric("Full sums", f"{full:.0%}", help="Share of the values in all ranks' buffers that hold the sum of all "
              "P ranks at this step")
    if tr.ranks_per_node:  # a two-level machine: what each level carried so far
        k = tr.ranks_per_node
        now_lv, all_lv = tr.level_bytes(step - 1 if step else None), tr.level_bytes()
        if not step:
            now_lv = {lv: 0.0 for lv in now_lv}
        l1, l2, l3 = st.columns([1, 1, 2])
        l1.metric("Bytes inside nodes", f"{now_lv['inside nodes']:,.0f} B",
                  help=f"sent so far over the fast links inside the {P // k} nodes of {k} ranks (e.g. NVLink); "
                       f"{all_lv['inside nodes']:,.0f} B in the whole allreduce")
        l2.metric("Bytes between nodes", f"{now_lv['between nodes']:,.0f} B",
                  help=f"sent so far over the slow links between nodes (e.g. InfiniBand); "
                       f"{all_lv['between nodes']:,.0f} B in the whole allreduce")
        fp = tr.level_bytes(wire=False)
        per_node = fp["between nodes"] / (P // k) / tr.nbytes
        l3.caption(f"**Two levels.** {algorithm} runs on {P // k} nodes of {k} ranks (the dotted circles): blue "
                   f"arrows are fast links inside a node, red arrows the slow links between nodes. In fp32, "
                   f"{fp['inside nodes']:,.0f} B stay inside nodes and {fp['between nodes']:,.0f} B cross between "
                   f"them: {per_node:.3g}·n leaves each node, where a flat ring on the same machine sends "
                   f"{2 * (P - 1) / P:.3g}·n out of each node over its one slow link.")

    st.subheader("algbw vs busbw for this run")
    s = tr.summary
    with ui.guard():
        bw = busbw_table(tr, link, float(size))
        traffic = _traffic(int(P), int(n), link, int(size))
    share, x = s["nccl_share"], s["busiest_rank_x_n"]
    fp = bw.iloc[0]
    b1, b2 = st.columns(2)
    b1.metric("algbw, GB/s", f"{fp.algbw_GBps:,.3g}",
              help=f"size / time: {bytes_label(size)} per rank in {fp.time_us:,.1f} µs on {link}, each traced "
                   "step costing one latency + its busiest rank's bytes / bandwidth (fp32 on the wire)")
    b2.metric("busbw, GB/s", f"{fp.busbw_GBps:,.3g}", help="algbw × 2(P−1)/P (nccl-tests), fp32 on the wire")
    b3, b4 = st.columns(2)
    b3.metric("Busiest rank", f"{x:.3g}·n", help=f"rank {s['busiest_rank']}: {s['busiest_rank_bytes']:,.0f} B "
              f"of n = {tr.nbytes} B, the larger of what it sends and receives (fp32)")
    b4.metric("busbw / link", f"{fp.busbw_of_link:.1%}",
              help=f"busbw over the link's bandwidth ({link}: {fp.link_GBps:g} GB/s per direction)")
    eq = abs(x - share) < 1e-9
    st.markdown(
        f"**Why 2(P−1)/P.** algbw = size / time. An allreduce cannot finish with fewer than 2(P−1)/P·n bytes "
        f"through each rank: it must send out the (P−1)/P of its vector that others reduce, and receive the "
        f"(P−1)/P of the result it did not compute. At P = {P} that is {share:.3g}·n. Multiplying algbw by "
        f"{share:.3g} turns it into the bytes per second each rank's link carried *if* the algorithm moves "
        f"only that minimum — a number to hold against the link's bandwidth, which does not shrink as P grows.\n\n"
        f"**Here.** {algorithm}'s busiest rank moves {x:.3g}·n ({s['busiest_rank_bytes']:,.0f} B of "
        f"n = {tr.nbytes} B), its busiest single link {s['busiest_link_x_n']:.3g}·n (rank "
        f"{s['busiest_link'][0]} → {s['busiest_link'][1]}). "
        + (f"That is exactly the {share:.3g}·n busbw assumes, so busbw can reach the link bandwidth "
           f"({fp.busbw_of_link:.1%} of it here, the rest is latency)."
           if eq else
           f"That is {x / share:.2g}× the {share:.3g}·n busbw assumes, so its busbw reaches at most "
           f"{share / x:.0%} of the link bandwidth even with no latency ({fp.busbw_of_link:.0%} here)."
           if x > share else
           f"That is less than the {share:.3g}·n busbw assumes (its factor is {s['busbw_factor']:.3g}).")
        + ("" if len(bw) < 2 else
           f" With {tr.codec.split('[')[0]} the busiest rank moves {s['wire_busiest_rank_bytes']:,.0f} B "
           f"on the wire instead: busbw counted from the fp32 size is then {bw.iloc[1].busbw_of_link:.0%} of "
           f"the link — compression shows up as bandwidth the link does not have."))
    # across the page's width: its legend's longest entry alone (~270 px) is wider than a half column at 800 px
    chart.plotly(plots.step_traffic_figure(traffic), key="fig_step_traffic")
    cols = ["algorithm", "steps", "messages", "busiest_link_x_n", "busiest_rank_x_n", "nccl_share_x_n", "busbw_of_link"]
    if (traffic.busbw_factor.round(9) != traffic.nccl_share_x_n.round(9)).any():  # a plugin with its own factor
        cols.append("busbw_factor")
    if (traffic.note.fillna("") != "").any():
        cols.append("note")
    st.markdown(f"**Every algorithm at P = {P}** (fp32, traced the same way; × n = multiples of one rank's vector)")
    view = traffic[cols].rename(columns={
        "algorithm": "Algorithm", "steps": "Steps", "messages": "Messages",
        "busiest_link_x_n": "Busiest link (× n)", "busiest_rank_x_n": "Busiest rank (× n)",
        "nccl_share_x_n": "2(P−1)/P", "busbw_factor": "busbw factor", "busbw_of_link": "busbw / link",
        "note": "Note"})
    ui.table(view, "step_through_algorithms", help={"busbw / link": f"modelled busbw on {link} at {bytes_label(size)}"},
             formats={"busbw / link": "percent", **{c: "%.3g" for c in ("Busiest link (× n)", "Busiest rank (× n)",
                                                                        "2(P−1)/P", "busbw factor")}})

    errs = tr.messages.dropna(subset=["max_abs_error"])
    if tr.codec == "fp32" or not len(errs):
        err_part = (f"in fp32 the largest error on any message is {errs.max_abs_error.max():.1g} (rounding only)"
                    if len(errs) else "")
    else:
        first = errs[errs.step == errs.step.min()].max_abs_error.max()
        peak = errs.loc[errs.max_abs_error.idxmax()]
        err_part = (f"with {tr.codec.split('[')[0]} the largest |error| grows from {first:.2g} on the first hop to "
                    f"{peak.max_abs_error:.2g} at step {int(peak.step) + 1} ({peak.kind} of ranks {peak.ranks})")
    ui.takeaway(
        f"{algorithm.capitalize()} at P = {P}: the busiest rank moves {x:.3g}·n, "
        + ("exactly " if eq else f"{x / share:.2g}× ")
        + f"the 2(P−1)/P·n = {share:.3g}·n that busbw = algbw × {share:.3g} assumes, so its modelled busbw on "
        f"{link} at {bytes_label(size)} is {fp.busbw_of_link:.1%} of the link bandwidth"
        + (f"; {err_part}." if err_part else "."))
    with ui.folded("Final error on every rank and the buffers as a table", "final") as box:
        if box.open:  # built only when opened
            ui.table(tr.final.rename(columns={"max_abs_error": "largest |error| vs exact sum",
                                              "rel_error": "relative L2 error",
                                              "exact_provenance": "fp32 run summed every rank once"}),
                     "step_through_final")
            st.download_button("⬇ buffers per step (CSV)", lambda: tr.buffers.to_csv(index=False),
                               "step_through_buffers.csv", "text/csv", key="csv_step_buffers", on_click="ignore")


def _render_op(op: str, where, head) -> None:
    """The step-through of any other collective (fp32): buffers filling, its busbw factor from its own messages."""
    catalog = op_catalog(op)
    algorithms = catalog.name.tolist()
    head.title(f"Step through {op}")
    with head:
        _op_lesson(op, catalog)
    _render_op_body(op, where, catalog, algorithms)


def _op_lesson(op: str, catalog) -> None:
    ui.lesson(f"What does {op} send, step by step, and why does nccl-tests count its busbw the way it does?",
              f"Press **▶ Play** or move **Step**. Arrows are the messages of that step with their bytes; "
              f"{OP_LESSON[op]}; the link grid counts bytes per link. Below the figure: this run's busiest "
              f"rank against the bytes nccl-tests' factor {catalog.busbw.iloc[0]} assumes.")


def _render_op_body(op: str, where, catalog, algorithms: list) -> None:
    algorithm = ui.select("Algorithm", algorithms, "op_algorithm", algorithms[0], where=where,
                          help="Every registered algorithm of this op (plugins too): "
                               + "; ".join(f"{r.name}: {r.summary}" for r in catalog.itertuples()))
    c1, c2 = st.columns(2)
    P = ui.number("Ranks P", "P", 4, where=c1, min_value=STEP_P[0], max_value=STEP_P[1], step=1,
                  help=f"Simulated ranks (GPUs), {STEP_P[0]} to {STEP_P[1]}: small enough to see every message.")
    slotted = op in ("all_gather", "reduce_scatter", "alltoall")
    root = 0
    if op in ("broadcast", "reduce"):
        root = ui.number("Root", "root", 0, where=c2, min_value=0, max_value=int(P) - 1, step=1,
                         help="The rank that sends (broadcast) or receives the sum (reduce)")
    else:
        c2.caption("fp32 on the wire here: codecs ride these ops in `lab.comm.collectives` (each source encodes "
                   "once; reduce-scatter requantizes per hop or once, as qgZ) and on the Collectives page.")
    with ui.more_settings():
        m1, m2 = st.columns(2)
        per = ui.select("Values per slot" if slotted else "Values per rank", [1, 2, 3, 6], "op_k", 3, where=m1,
                        help="Values in each of the P slots of a rank's buffer (all-gather's rows, reduce-scatter's "
                             "shards, all-to-all's blocks)" if slotted else "Length of each rank's buffer")
        link = ui.select("Link for the timing", list(LINKS), "link", "nvlink4", where=m2,
                         help="Latency and bandwidth used to time this run's steps")
        stacked = _stacked()
    n = int(per) * (int(P) if slotted else 1)
    with ui.guard():
        tr = _op_trace(op, algorithm, int(P), n, int(root))
    info = catalog.set_index("name").loc[algorithm]
    st.caption(f"**{algorithm}**: {info.summary} ({info.citation}).")
    S = tr.steps
    step = _step_controls(S)
    ui.figure(_figure(algorithm, int(P), n, "none", 0, step, op, int(root), stacked), tr.messages, "step_through")
    shown = tr.messages[tr.messages.step < step]
    k1, k2 = st.columns(2)
    k1.metric("Step", f"{step} of {S}", help="Lamport rounds: a message sent after receiving one from step k is "
              "in step k + 1 or later")
    k2.metric("Bytes sent so far", f"{int(shown.bytes.sum()):,} B",
              help=f"all ranks together; {int(tr.messages.bytes.sum()):,} B in the whole {op}")
    st.subheader(f"busbw of {op}")
    st.markdown(op_busbw_text(tr))
    size = 1 << 28
    with ui.guard():
        traffic = _traffic(int(P), n, link, size, op)
    view = traffic[["algorithm", "steps", "messages", "busiest_rank_x_n", "busbw_of_link"]].rename(
        columns={"algorithm": "Algorithm", "steps": "Steps", "messages": "Msgs",
                 "busiest_rank_x_n": "Busiest rank (× S)", "busbw_of_link": "busbw / link"})
    st.markdown(f"**Every {op} algorithm at P = {P}** (fp32, traced the same way; S = nccl-tests' size; its "
                f"factor: {traffic.nccl_share_x_n.iloc[0]:.3g})")
    ui.table(view, "step_through_op_algorithms",
             help={"busbw / link": f"modelled busbw on {link} at {bytes_label(size)}", "Msgs": "messages"},
             formats={"busbw / link": "percent", "Busiest rank (× S)": "%.3g"})
    s = tr.summary
    best = traffic.loc[traffic.busbw_of_link.idxmax()] if traffic.busbw_of_link.notna().any() else None
    ui.takeaway(f"{op} by {algorithm} at P = {P}: the busiest rank moves {s['busiest_rank_x_n']:.3g}·S against the "
                f"{s['nccl_share']:.3g}·S nccl-tests' factor assumes, in {S} steps of {len(tr.messages)} messages"
                + (f"; of its algorithms, {best.algorithm} gets closest to the link ({best.busbw_of_link:.0%} of "
                   f"{link} at {bytes_label(size)})." if best is not None else "."))
