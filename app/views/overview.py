"""Home: the device in use, this session's scorecard of predictions, a guided tour through every page of the lab
(each step a deep link into a page's URL state, with what to try and, on request, what you should see, computed
from the numbers that page shows) and what each page of the page list teaches, with the views and modes inside it."""
from __future__ import annotations

import streamlit as st

import _common as ui
import page_list
import tour
from lab import backend


def _query(params: dict) -> str:
    return "&".join(f"{k}={v}" for k, vs in params.items() for v in (vs if isinstance(vs, list) else [vs]))


def _link(step: tour.TourStep, i: int) -> None:
    """A step's deep link: the navigation's page with the step's query parameters (a plain link when the
    page is rendered outside Home's navigation, as in the tests)."""
    label = f"Step {i}: {step.title}"
    target = page_list.NAV.get(step.page)
    if target is not None:
        st.page_link(target, label=label, icon=":material/arrow_forward:", query_params=step.params or None)
    else:
        st.markdown(f"**{label}** (`/{step.page}{'?' + _query(step.params) if step.params else ''}`)")


def _carries(step: tour.TourStep) -> str:
    """What a step's link sets on its page (everything else starts at the page's defaults)."""
    if not step.params:
        return "the page's defaults"
    said = "; ".join(f"`{k}` = {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in step.params.items())
    return f"{said}; everything else at the page's defaults"


@st.cache_data(show_spinner=False, max_entries=64)
def seen(page: str, title: str) -> tour.Seen:
    """A step's 'you should see', computed once per server (the experiments it reads are deterministic)."""
    step = next(s for s in tour.steps() if (s.page, s.title) == (page, title))
    return step.see()


def warm() -> None:
    """Every step's 'you should see', computed when the server starts (app/warmup.py): opening one is then
    instant (Table 1 at 0.1 million samples compiles the codecs the first time, ~30 s on a busy CPU)."""
    for s in tour.steps():
        seen(s.page, s.title)


def _see(step: tour.TourStep, i: int) -> None:
    """The step's 'you should see', folded: computed and drawn only once the learner opens it (it may answer
    the page's question)."""
    label = "What you should see" + (" (answers the page's question: try it first)" if step.answers else "")
    box = st.expander(label, key=f"tour-see-{i}", on_change="rerun", icon=":material/visibility:")
    if box.open:
        with box, st.spinner("computing what the page shows…"):
            st.markdown(seen(step.page, step.title).text)


def _tour() -> None:
    steps = tour.steps()
    chapters = list(dict.fromkeys(s.chapter for s in steps))
    st.caption(f"{len(steps)} steps through every page, in {len(chapters)} parts: " + "; ".join(chapters) + ".")
    i = 0
    for chapter in chapters:
        st.markdown(f"##### {chapter}")
        for step in (s for s in steps if s.chapter == chapter):
            i += 1
            with st.container(border=True, key=f"tour-{i}"):
                _link(step, i)
                st.markdown(f"**Opens with:** {_carries(step)}  \n**Try this:** {step.try_this}")
                _see(step, i)


def inside() -> dict[str, list[str]]:
    """Per page (URL path): what is inside it beyond its default view, as lines of markdown: the tour's steps
    there, and for Training its modes, for Collectives every collective, for Pipeline every schedule (read from
    the registries now, so a plugin's shows)."""
    from lab.experiments import op_names, schedule_names

    steps: dict[str, list[str]] = {}
    for i, s in enumerate(tour.steps(), 1):
        if s.chapter != tour.MORE:  # a page's own step is the page itself
            steps.setdefault(s.page, []).append(f"step {i} *{s.title}*")
    out = {page: [f"**In the tour:** {', '.join(said)}"] for page, said in steps.items()}
    data_parallel, strategies = tour.modes()
    out.setdefault("training", []).append("**Modes:** " + ", ".join(
        f"{m} (sharded: FSDP2)" if m == "fsdp" else m for m in [*data_parallel, *strategies]))
    out.setdefault("collectives", []).append("**Collectives:** " + ", ".join(op_names()))
    out.setdefault("pipeline", []).append("**Schedules:** " + ", ".join(schedule_names()))
    return out


def overview_table(pages: list[page_list.PageInfo]) -> str:
    """The overview's markdown table: every page but Home, what it teaches, what is inside it and its papers (two
    columns: readable at 800 px)."""
    more = inside()
    rows = [f"| **{p.title}** | {p.teaches}" + "".join(f"<br>{line}" for line in more.get(p.url_path, []))
            + (f"<br>**Paper:** {p.paper}" if p.paper else "") + " |" for p in pages if p is not page_list.HOME]
    return "\n".join(["| Page | What it teaches, what is inside it, its papers |", "|---|---|", *rows])


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("ParaLab")
    ui.lesson("Which tricks make parallel training fast, and when do they pay?",
              "Follow the tour: each step opens a page already set up, says what to try, and (when you open it) what "
              "you should see there, computed from the numbers that page shows. Every figure is measured on this "
              "machine or computed from a stated model; every page's state is in its URL, so a link reproduces a "
              "view.")
    # the device's name is words, not a number: metric values at a size that fits a column at 800 px
    st.html("<style>.st-key-home-device [data-testid='stMetricValue'] { font-size: 1.6rem; }</style>")
    c1, c2 = st.container(key="home-device").columns(2)
    c1.metric("Device", ui.device_name())
    c2.metric("Backend", "CUDA + CuPy kernels" if backend.gpu_available() else "CPU (torch reference path)")
    if not backend.gpu_available():
        st.caption("No CUDA GPU with CuPy found: the CPU path runs (same results; the CUDA kernels are checked "
                   "against it).")

    ui.scorecard({p.url_path: p.title for p in page_list.PAGES}, page_list.NAV)

    st.subheader("A guided tour")
    _tour()

    st.subheader("Every page")
    data_parallel, strategies = tour.modes()
    st.markdown(f"Training runs in {len(data_parallel) + len(strategies)} modes: data parallel on simulated workers "
                f"or real processes ({', '.join(data_parallel)}; fsdp shards the model, FSDP2), and "
                f"{_and(strategies)} parallelism on real ranks.")
    st.markdown(overview_table(page_list.PAGES), unsafe_allow_html=True)
    st.caption("Cheap controls update at once; expensive runs have a Run button, a progress bar and a Stop button "
               "that keeps what finished. Every figure can be downloaded with its data.")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
