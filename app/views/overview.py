"""Home: the device in use, what each page teaches, and the papers' sections."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import streamlit as st  # noqa: E402

import _common as ui  # noqa: E402
from lab import backend  # noqa: E402

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

DETTMERS = "https://arxiv.org/abs/1511.04561"
SONG = "https://arxiv.org/abs/1805.08939"
BENNUN = "https://arxiv.org/abs/1802.09941"
DEEPIMAGE = "https://arxiv.org/abs/1501.02876"
st.markdown(f"""
| Page | What it teaches | Paper |
|---|---|---|
| **Codecs** | The four 8-bit data types (linear, mantissa, static tree, dynamic tree), your own bit layouts, fp16/bf16/fp8/int8 and the gradient compressors (1-bit SGD, TernGrad, QSGD, top-k): value tables, error histograms, the Table 1 preset with the original kernel's rounding or exact rounding, encode/decode speed here. | [Dettmers 2016]({DETTMERS}) §3.1–3.2, Table 1 |
| **Transfer** | Figure 2: when compressing a message pays — time and speedup against message size, measured between two processes here and modelled for a link. | [Dettmers 2016]({DETTMERS}) §3.3, Figure 2 |
| **Collectives** | Tree, recursive doubling, ring, Rabenseifner, butterfly sync and parameter server: modelled vs measured time, bus bandwidth against the lower bound, a step-by-step view of each algorithm, error of compressed allreduce at scale. | [Ben-Nun & Hoefler 2018]({BENNUN}) (allreduce and its cost model); [Deep Image]({DEEPIMAGE}) §3.1 (butterfly sync) |
| **Training** | Data- and model-parallel training with a codec on the wire, and the consistency models (sync, stale-synchronous, async, EASGD): live curves of loss, test error, bytes and modelled time. | [Dettmers 2016]({DETTMERS}) §3.4; [Ben-Nun & Hoefler 2018]({BENNUN}) (consistency models) |
| **Dropout** | Approximate Random Dropout: row and tile patterns, the search for the pattern distribution (Algorithm 1), layer speedup against the 1/(1−p) ceiling, MLP and LSTM runs. | [Song et al. 2019]({SONG}) §III–IV, Tables I–II |
| **Deep Image** | Augmentation previews and the scaling planner (when that capability is installed). | [Wu et al. 2015]({DEEPIMAGE}) §3–4 |
""")
st.caption("Cheap controls update at once; expensive runs have a Run button, a progress bar and a Stop button, "
           "and their results are cached. Every figure can be downloaded with its data.")
