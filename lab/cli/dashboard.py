"""`paralab dashboard`: the Streamlit dashboard shipped with paralab (app/ in the repository, package data
of `lab` in a wheel: lab.packaged), started with its warm-up from the server's start (app/serve.py) from
any folder. Streamlit's own options pass through: `paralab dashboard --server.port 8502`."""
from __future__ import annotations

import os
import sys

import typer

from lab.packaged import shipped

from .base import app


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def dashboard(ctx: typer.Context) -> None:
    """Start the dashboard (`streamlit run` of the installed app/Home.py, warmed from the start) at
    http://localhost:8501; any further options are Streamlit's (`streamlit run --help`), e.g.
    --server.port 8502 or --server.headless true."""
    serve = shipped("app") / "serve.py"
    # the server takes this process's place, so a signal that stops `paralab dashboard` (Ctrl-C, a service
    # manager's SIGTERM) stops the server itself and leaves no orphan behind
    os.execv(sys.executable, [sys.executable, str(serve), *ctx.args])
