"""Home: a guided tour through the lab (each step a deep link into a page's URL state, with what to try and
what you should see), the device in use, and what each page of the page list teaches."""
import streamlit as st

import _common as ui
import page_list
from lab import backend


def _link(step: page_list.TourStep, i: int) -> None:
    """A step's deep link: the navigation's page with the step's query parameters (a plain link when the
    page is rendered outside Home's navigation, as in the tests)."""
    label = f"Step {i}: {step.title}"
    target = page_list.NAV.get(step.page)
    if target is not None:
        st.page_link(target, label=label, icon=":material/arrow_forward:", query_params=step.params or None)
    else:
        query = "&".join(f"{k}={v}" for k, vs in step.params.items() for v in (vs if isinstance(vs, list) else [vs]))
        st.markdown(f"**{label}** (`/{step.page}{'?' + query if query else ''}`)")


def _carries(step: page_list.TourStep) -> str:
    """What a step's link sets on its page (everything else starts at the page's defaults)."""
    if not step.params:
        return "the page's defaults"
    said = "; ".join(f"`{k}` = {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in step.params.items())
    return f"{said}; everything else at the page's defaults"


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("ParaLab")
    ui.lesson("Which tricks make parallel training fast, and when do they pay?",
              "Follow the tour: each step opens a page already set up, says what to try, and what you should see. "
              "Every figure is measured on this machine or computed from a stated model; every page's state is in "
              "its URL, so a link reproduces a view.")
    c1, c2 = st.columns(2)
    c1.metric("Device", ui.device_name())
    c2.metric("Backend", "CUDA + CuPy kernels" if backend.gpu_available() else "CPU (torch reference path)")
    if not backend.gpu_available():
        st.caption("No CUDA GPU with CuPy found: the CPU path runs (same results; the CUDA kernels are checked "
                   "against it).")

    ui.scorecard({p.url_path: p.title for p in page_list.PAGES})

    st.subheader("A guided tour")
    for i, step in enumerate(page_list.TOUR, 1):
        with st.container(border=True, key=f"tour-{i}"):
            _link(step, i)
            st.markdown(f"**Opens with:** {_carries(step)}  \n**Try this:** {step.try_this}  \n"
                        f"**You should see:** {step.you_see}")

    st.subheader("Every page")
    st.markdown(page_list.overview_table(page_list.PAGES))
    st.caption("Cheap controls update at once; expensive runs have a Run button, a progress bar and a Stop button "
               "that keeps what finished. Every figure can be downloaded with its data.")
