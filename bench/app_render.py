"""Render time of each dashboard page's default view with streamlit's AppTest (target: < 3 s on
a 2-core CPU). Each page runs in a fresh process with the libraries already imported (as on a
running server): `cold_s` is the first render (empty caches, first codec/kernel use), `warm_s`
a second render in a new session (caches filled). Writes bench/results/app-render-<device>.json.

    OMP_NUM_THREADS=1 python bench/app_render.py [--pages codecs,transfer] [--out PATH]

The pages are app/page_list.py's (names: their URL paths, `overview` for Home).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "app"))  # as `streamlit run app/Home.py` has it
import page_list  # noqa: E402

PAGES = {p.url_path or "overview": p.module for p in page_list.PAGES}
CHILD = r"""
import importlib, json, sys, time
import lab, lab.experiments, lab.plots, streamlit  # imported before timing, as on a running server
from streamlit.testing.v1 import AppTest
from chart import figures
module = sys.argv[1]
importlib.import_module(module)
script = f"import importlib\nimportlib.import_module({module!r}).render()\n"
out = {}
for what in ("cold_s", "warm_s"):
    at = AppTest.from_string(script, default_timeout=300)
    t = time.perf_counter()
    at.run()
    out[what] = time.perf_counter() - t
    out["exception"] = [e.value for e in at.exception]
    out["plots"] = len(figures(at))
    out["metrics"] = {m.label: m.value for m in at.metric}
print("RESULT" + json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    from lab import backend
    from lab.experiments import write_result

    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               PYTHONPATH=os.pathsep.join([str(ROOT / "app"), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    rows = []
    for name in args.pages.split(","):
        if name not in PAGES:
            raise SystemExit(f"--pages {name!r}; the page list has: {', '.join(PAGES)}")
        p = subprocess.run([sys.executable, "-c", CHILD, PAGES[name]], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=900)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
        if not line:
            raise SystemExit(f"{name}: no result\n{p.stderr[-3000:]}")
        r = {"page": name, **json.loads(line[0][6:])}
        r["under_3s"] = r["cold_s"] < 3.0
        rows.append(r)
        print(f"{name:12s} cold {r['cold_s']:6.2f} s  warm {r['warm_s']:6.2f} s  plots {r['plots']}"
              f"  {'ok' if not r['exception'] else 'EXCEPTION'}")
    info = {"name": "app-render", "device": backend.device_name(), "versions": backend.versions(),
            "cpu_count": os.cpu_count(), "omp_num_threads": env["OMP_NUM_THREADS"], "target_s": 3.0,
            "method": "streamlit AppTest, default view of each page, fresh process per page with lab/streamlit "
                      "imported; cold = first render, warm = second render in a new session",
            "rows": rows}
    out = args.out or ROOT / "bench" / "results" / f"app-render-{backend.device_slug()}.json"
    print(f"wrote {write_result(out, info)}")


if __name__ == "__main__":
    main()
