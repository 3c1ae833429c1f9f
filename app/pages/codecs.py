"""Codecs page: error table of chosen codecs on a chosen distribution; Table 1 preset."""
import streamlit as st

from lab import plots
from lab.codecs import TableCodec, codec_names, get_codec
from lab.experiments import TABLE1_NOTE, error_table, parse_distribution, table1

qp = st.query_params
st.title("Codecs")
st.caption("Dettmers 2016 §3.1 (data types), Table 1 (errors). Relative error leaves out exact zeros.")

default_codecs = qp.get_all("codec") or ["dynamic_tree", "linear", "fp8_e4m3", "int8"]
col1, col2 = st.columns([2, 1])
with col1:
    chosen = st.multiselect("Codecs", codec_names(), default=[c for c in default_codecs if c in codec_names()])
    dist = st.text_input("Distribution", qp.get("dist", "normal(0,1)"),
                         help="uniform(a,b), normal(mu,sigma), laplace(mu,b), student_t(df), lognormal(mu,sigma)")
with col2:
    rounding = st.radio("Rounding of the 8-bit types", ["nearest", "paper"],
                        index=["nearest", "paper"].index(qp.get("rounding", "nearest")), horizontal=True)
    samples = st.select_slider("Samples", [10_000, 100_000, 1_000_000], value=int(qp.get("samples", 100_000)))
    seed = st.number_input("Seed", value=int(qp.get("seed", 0)), step=1)
qp.update({"dist": dist, "rounding": rounding, "samples": str(samples), "seed": str(int(seed))})
qp["codec"] = chosen


@st.cache_data(show_spinner="measuring…")
def run(chosen: tuple, dist: str, rounding: str, samples: int, seed: int):
    codecs = [get_codec(c, rounding=rounding) if c in ("dynamic_tree", "linear", "mantissa", "static_tree")
              else get_codec(c) for c in chosen]
    return error_table(codecs, [dist], samples=samples, seed=seed)


try:
    parse_distribution(dist)
    if not chosen:
        st.info("Pick at least one codec.")
        st.stop()
    df = run(tuple(chosen), dist, rounding, samples, int(seed))
except ValueError as e:
    st.error(str(e))
    st.stop()

best = df.loc[df.mean_rel_error.idxmin()]
st.metric("Lowest mean relative error", f"{100 * best.mean_rel_error:.3f} %", help=best.codec)
st.dataframe(df, hide_index=True)
st.download_button("Download CSV", df.to_csv(index=False), "codec_errors.csv", "text/csv")
st.plotly_chart(plots.error_bar_figure(df))
tables = [get_codec(c) for c in chosen]
tables = [c for c in tables if isinstance(c, TableCodec)]
if tables:
    st.subheader("Value tables")
    st.plotly_chart(plots.value_table_figure(tables))

st.subheader("Table 1 preset")
if st.button("Reproduce Table 1 (1 M samples)"):
    bar = st.progress(0.0)
    t1 = table1(samples=1_000_000, progress=lambda f, m: bar.progress(min(f, 1.0), m))
    st.dataframe(t1, hide_index=True)
    st.caption(TABLE1_NOTE)
