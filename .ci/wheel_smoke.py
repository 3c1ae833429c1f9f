"""Smoke of an installed paralab wheel, run by .ci/run with the fresh venv's Python from a folder outside
the checkout: `python wheel_smoke.py CHECKOUT`. Fails unless the package runs from site-packages with the
checkout's kernels, reference results and dashboard inside it: `paralab codecs`, one `paralab errors`,
`paralab pays` reading $PARALAB_RESULTS before the reference results, the Home page rendered (Streamlit's
AppTest) and `paralab dashboard` serving its page and its chart library."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def run(*args: str, env: dict | None = None) -> str:
    """`paralab ARGS`: its stdout; exits the smoke with its output when it fails."""
    p = subprocess.run(["paralab", *args], capture_output=True, text=True, timeout=600, env=env)
    if p.returncode != 0:
        sys.exit(f"`paralab {' '.join(args)}` failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def same_files(installed: Path, source: Path, *patterns: str) -> int:
    """The installed folder holds every file `patterns` match in the checkout's folder; how many."""
    want = {p.relative_to(source).as_posix() for pat in patterns for p in source.glob(pat)
            if not p.name.endswith(".partial.json")}
    have = {p.relative_to(installed).as_posix() for pat in patterns for p in installed.glob(pat)}
    missing = sorted(want - have)
    assert want and not missing, f"{installed} lacks {missing[:10]} ({len(missing)} of {len(want)})"
    return len(want)


def packaged(checkout: Path) -> None:
    import lab
    from lab.backend import kernel_source
    from lab.packaged import shipped

    site = Path(lab.__file__).resolve().parent
    assert checkout not in site.parents, f"lab imported from the checkout ({site}), not the installed wheel"
    for name in ("kernels", "reference", "app"):
        assert shipped(name) == site / name, (name, shipped(name))
    cu = same_files(site / "kernels", checkout / "kernels", "*.cu", "*.cuh")
    ref = same_files(site / "reference", checkout / "bench" / "results", "*.json")
    ui = same_files(site / "app", checkout / "app", "*.py", "*.js", "views/*.py", "static/*", ".streamlit/config.toml")
    assert '#line 1 "' in kernel_source("codec") and "common.cuh" in kernel_source("codec")
    print(f"installed at {site}: {cu} kernel files, {ref} reference results, {ui} dashboard files")


def cli() -> None:
    names = run("codecs")
    assert "dynamic_tree" in names and "mxfp8_e4m3" in names, names[:500]
    rows = json.loads(run("errors", "--codec", "dynamic_tree", "--dist", "normal(0,1)", "--samples", "20000",
                          "--json"))["rows"]
    assert len(rows) == 1 and rows[0]["codec"].startswith("dynamic_tree"), rows
    print(f"paralab codecs and errors: ok ({len(names.splitlines())} lines, {len(rows)} row)")


def pays_reads_paralab_results(tmp: Path) -> None:
    """Without $PARALAB_RESULTS the shipped H100 codec times price the codecs; with it, the user's."""
    args = ("pays", "--codecs", "dynamic_tree", "--cluster", "2x8", "--json")
    shipped_time = json.loads(run(*args))["codec_time"]
    assert shipped_time.startswith("measured: codecs-nvidia-h100"), shipped_time
    mine = tmp / "results"
    mine.mkdir()
    rows = [{"contestant": "dynamic_tree tensor (lut)", "op": op, "n": 1 << 26, "ns_per_value": ns}
            for op, ns in (("encode", 0.5), ("decode_into", 0.25))]
    (mine / "codecs-nvidia-h100-smoke.json").write_text(json.dumps(
        {"device": "NVIDIA H100 80GB HBM3", "device_type": "cuda", "rows": rows}))
    user_time = json.loads(run(*args, env=dict(os.environ, PARALAB_RESULTS=str(mine))))["codec_time"]
    assert user_time.startswith("measured: codecs-nvidia-h100-smoke.json"), user_time
    print("paralab pays: shipped codec times, then $PARALAB_RESULTS' first: ok")


def home_page() -> None:
    from streamlit.testing.v1 import AppTest

    from lab.packaged import shipped

    at = AppTest.from_file(str(shipped("app") / "Home.py"), default_timeout=300).run()
    assert not at.exception, [e.value for e in at.exception]
    assert [t.value for t in at.title] == ["ParaLab"], [t.value for t in at.title]
    tour = [m.value for m in at.markdown if m.value.startswith("**Opens with:**")]  # a line per page of the tour
    assert len(tour) >= 5, [m.value[:80] for m in at.markdown]
    print(f"Home rendered by AppTest: the tour of {len(tour)} pages")


def dashboard(tmp: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp / "dashboard.log").open("w")
    p = subprocess.Popen(["paralab", "dashboard", "--server.headless", "true", "--server.port", str(port),
                          "--server.address", "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT,
                         env=dict(os.environ, PARALAB_WARMUP="0"), cwd=tmp)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=5) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if p.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"the dashboard did not come up:\n{(tmp / 'dashboard.log').read_text()[-3000:]}")
            time.sleep(1)
        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200 and b"<div id=\"root\">" in r.read()
        # app/static served: the chart library the shipped app/.streamlit/config.toml switches static serving on for
        with urllib.request.urlopen(f"{url}/app/static/plotly-paralab.min.js", timeout=30) as r:
            assert r.status == 200 and len(r.read()) > 100_000
        print(f"paralab dashboard: served at {url}, its page and app/static: ok")
    finally:
        p.terminate()
        p.wait(30)


def main() -> None:
    checkout = Path(sys.argv[1]).resolve()
    assert checkout not in Path.cwd().resolve().parents and Path.cwd().resolve() != checkout, \
        "run the smoke from a folder outside the checkout"
    with tempfile.TemporaryDirectory(prefix="paralab-smoke-") as d:
        tmp = Path(d)
        packaged(checkout)
        cli()
        pays_reads_paralab_results(tmp)
        home_page()
        dashboard(tmp)
    print("wheel smoke: ok")


if __name__ == "__main__":
    main()
