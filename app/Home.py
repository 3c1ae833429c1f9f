"""ParaLab dashboard entry: `streamlit run app/Home.py`."""
from pathlib import Path

import streamlit as st

st.set_page_config(page_title="ParaLab", layout="wide")
here = Path(__file__).parent / "views"  # not "pages": Streamlit would also auto-list that folder
pages = [st.Page(str(here / "overview.py"), title="Home", default=True),
         st.Page(str(here / "codecs.py"), title="Codecs"),
         st.Page(str(here / "transfer.py"), title="Transfer"),
         st.Page(str(here / "collectives.py"), title="Collectives"),
         st.Page(str(here / "training.py"), title="Training"),
         st.Page(str(here / "dropout.py"), title="Dropout")]
if (here / "deep_image.py").exists():
    pages.append(st.Page(str(here / "deep_image.py"), title="Deep Image"))
st.navigation(pages).run()
