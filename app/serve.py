"""Start the dashboard with its warm-up running from the server's start (app/warmup.py), so even the first
learner finds every page's default view warm: `python app/serve.py [streamlit options, e.g. --server.port 8501]`
is `streamlit run app/Home.py` plus that."""
import sys
from pathlib import Path

import warmup

if __name__ == "__main__":
    warmup.serve(str(Path(__file__).resolve().parent / "Home.py"), sys.argv[1:])
