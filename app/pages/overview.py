"""Home: the device in use and what each page teaches."""
import streamlit as st

from lab import backend

st.title("ParaLab")
st.markdown("An interactive lab for the tricks that make parallel deep-learning training fast.")
st.metric("Device", backend.device_name())
if not backend.gpu_available():
    st.caption("No CUDA GPU with CuPy found: the CPU path runs (same results; the CUDA kernels are checked against it).")
st.markdown("""
**Codecs** — Dettmers, *8-bit Approximations for Parallelism in Deep Learning* (ICLR 2016), §3.1–3.4:
the four 8-bit data types (linear, mantissa, static tree, dynamic tree), your own bit layouts,
fp16/bf16/fp8/int8 and the gradient compressors of the HPC literature (1-bit SGD, TernGrad, QSGD,
top-k). See their value tables and error on any distribution, and reproduce Table 1 with the
original kernel's rounding or exact rounding.
""")
