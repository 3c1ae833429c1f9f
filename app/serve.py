"""Start the dashboard: `python app/serve.py [streamlit options, e.g. --server.port 8501]` is `streamlit run
app/Home.py` (what `paralab dashboard` runs, from any folder); its warm-up starts with the server either way, so
even the first learner finds every page's default view warm (app/warmup.py)."""
import sys
from pathlib import Path

import warmup

if __name__ == "__main__":
    warmup.serve(str(Path(__file__).resolve().parent / "Home.py"), sys.argv[1:])
