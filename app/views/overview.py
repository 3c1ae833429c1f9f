"""Home: the device in use, and what each page of the page list teaches, with the papers' sections."""
import streamlit as st

import _common as ui
import page_list
from lab import backend


def render() -> None:
    """Render the page (called by Home's navigation on every rerun)."""
    st.title("ParaLab")
    st.markdown("An interactive lab for the tricks that make parallel deep-learning training fast. "
                "Every figure is measured on this machine or computed from a stated model; every page's "
                "state is in its URL, so a link reproduces a view.")
    c1, c2 = st.columns(2)
    c1.metric("Device", ui.device_name())
    c2.metric("Backend", "CUDA + CuPy kernels" if backend.gpu_available() else "CPU (torch reference path)")
    if not backend.gpu_available():
        st.caption("No CUDA GPU with CuPy found: the CPU path runs (same results; the CUDA kernels are checked "
                   "against it).")

    st.markdown(page_list.overview_table(page_list.PAGES))
    st.caption("Cheap controls update at once; expensive runs have a Run button, a progress bar and a Stop button, "
               "and their results are cached. Every figure can be downloaded with its data.")
