"""ParaLab dashboard entry: `streamlit run app/Home.py`."""
from pathlib import Path

import streamlit as st

st.set_page_config(page_title="ParaLab", layout="wide")
here = Path(__file__).parent
nav = st.navigation([st.Page(str(here / "pages" / "overview.py"), title="Home", default=True),
                     st.Page(str(here / "pages" / "codecs.py"), title="Codecs")])
nav.run()
