"""lab.comm.launch starts a job's ranks from one zygote process, forked by the caller's warm server (torch imported
once per caller, then fork), each rank in its own session with its own random streams, the caller's environment,
directory and umask; a zygote that runs a thread starts fresh processes instead."""
from __future__ import annotations

import os

import pytest
import torch

from lab.comm.launch import run, servers


def _check(out: list[dict], P: int) -> None:
    assert [o["argv"][-1] for o in out] == [str(r) for r in range(P)]  # what each rank's own process sees
    assert all(o["sid"] == o["pid"] for o in out)  # each rank leads its own session, as before
    assert len({o["pid"] for o in out}) == P
    assert all(not torch.equal(out[0]["randn"], o["randn"]) for o in out[1:])  # fresh random streams per rank


def test_ranks_are_forked_from_one_zygote_that_is_not_the_caller(monkeypatch, tmp_path) -> None:
    import launch_ranks

    out = run(launch_ranks.identity, 3, timeout=60)
    _check(out, 3)
    parents = {o["ppid"] for o in out}
    assert len(parents) == 1 and os.getpid() not in parents  # one zygote forked them all
    assert all(o["cmdline"] == "serve" for o in out)  # forked by the warm `python -m lab.comm.launch - serve`
    # the objects the server and zygote imported are frozen (gc.freeze) before the fork: a rank's collections skip
    # them and leave the pages it shares with them unwritten; its own objects are still collected
    assert all(o["gc"][0] and o["gc"][1] > 100_000 for o in out), [o["gc"] for o in out]
    # the next job: a zygote of its own from the same warm server, which hands it this process's working
    # directory, umask and environment as they are now
    # a variable that changes from call to call (a test runner's current test) is not a server of its own, nor
    # what the caller's libraries set in its environment as they go (Streamlit's import, Inductor's compile)
    monkeypatch.setenv("CALLER_NOTE", "another call")
    monkeypatch.setenv("MPLBACKEND", "a backend of a library imported since")
    monkeypatch.setenv("_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR", "140329507015712")
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o027)
    try:
        again = run(launch_ranks.identity, 2, timeout=60)
    finally:
        os.umask(old)
    _check(again, 2)
    assert len({o["ppid"] for o in again}) == 1 and not parents & {o["ppid"] for o in again}
    assert len({o["server"] for o in out + again}) == 1
    assert [(o["cwd"], o["umask"], o["test"], o["mpl"]) for o in again] == \
        [(str(tmp_path), 0o027, "another call", "a backend of a library imported since")] * 2
    # any other change of the environment reaches the ranks too (from a server started with it: torch reads
    # some variables when it is imported)
    monkeypatch.setenv("PARALAB_LAUNCH_PROBE", "42")
    probed = run(launch_ranks.identity, 2, timeout=60)
    assert [o["probe"] for o in out + probed] == [None] * 3 + ["42"] * 2


@pytest.mark.parametrize("uses", ["imports_inductor", "makes_an_optimizer"])
def test_an_idle_server_readies_torch_compile_once_its_ranks_have_used_it(monkeypatch, uses) -> None:
    """A warm server imports what every rank imports (the allreduce algorithms, pandas with them: ~0.4 core-seconds
    a rank). One whose ranks have imported inductor (torch.compile; torch._dynamo imports it, at a first optimizer)
    imports it and probes the CPU's vector ISAs itself once it has been idle for a second, so later ranks do not
    (~1.5 core-seconds of a rank that makes an optimizer, ~4 of one that compiles a codec pass, here); a server whose
    ranks never did does not."""
    import time
    import uuid

    import launch_ranks

    monkeypatch.setenv("PARALAB_LAUNCH_PROBE", str(uuid.uuid4()))  # a server of this test's own
    first = run(launch_ranks.identity, 2, timeout=60)
    assert all(o["loaded"]["lab.comm.algorithms.ring"] and o["loaded"]["pandas"] for o in first)
    time.sleep(1.5)  # idle for longer than the server waits
    assert not any(o["compile_ready"] or o["loaded"]["torch._dynamo"] for o in run(launch_ranks.identity, 2,
                                                                                   timeout=60))
    run(getattr(launch_ranks, uses), 2, timeout=60)
    end = time.monotonic() + 60
    out = run(launch_ranks.identity, 2, timeout=60)
    while not all(o["compile_ready"] for o in out) and time.monotonic() < end:
        time.sleep(0.5)  # the server warms once it has been idle for a second
        out = run(launch_ranks.identity, 2, timeout=60)
    assert all(o["compile_ready"] and o["loaded"]["torch._dynamo"] for o in out)
    assert {o["server"] for o in first} == {o["server"] for o in out}  # the same server, readied in place


def test_an_idle_server_compiles_the_codec_passes_its_ranks_ran(monkeypatch) -> None:
    """A rank forked by a warm server compiles the codec passes it runs (torch._dynamo's import and trace, Inductor's
    cached kernel: ~3-4.5 core-seconds a rank, against 0.08 s for a ring's allreduces here) and records them
    (lab.codecs.warm_passes); once its caller has come back (a second job: a one-shot CLI's server compiles nothing)
    the server compiles them when it is idle, so the ranks it forks later find them compiled and trace nothing, and
    it can still fork (no compile worker thread)."""
    import time
    import uuid

    import launch_ranks

    monkeypatch.setenv("PARALAB_LAUNCH_PROBE", str(uuid.uuid4()))  # a server of this test's own
    first = run(launch_ranks.runs_a_codec_pass, 2, timeout=120)
    assert all(o["before"] == 0 < o["after"] for o in first)  # each rank compiled the pass itself
    server = servers()[-1]
    run(launch_ranks.identity, 2, timeout=60)  # the caller comes back (a second job, one that compiles nothing)
    end = time.monotonic() + 60
    while True:
        _until_idle(server, end)  # the server compiled the first job's passes once it was idle
        out = run(launch_ranks.runs_a_codec_pass, 2, timeout=120)
        if all(o["before"] > 0 for o in out) or time.monotonic() > end:
            break
    assert all(0 < o["before"] == o["after"] for o in out), out  # compiled before the fork: nothing traced
    assert all(o["cmdline"] == "serve" for o in run(launch_ranks.identity, 2, timeout=60))  # still forks


def _until_idle(pid: int, end: float, quiet_s: float = 1.5) -> None:
    """Wait until process `pid` has used no CPU for `quiet_s` seconds (longer than a warm server waits, idle, before
    it compiles), or until `end` (time.monotonic)."""
    import time

    from comm_ranks import proc_stat

    def cpu() -> int:  # utime + stime, clock ticks
        return sum(int(f) for f in proc_stat(pid)[11:13])

    last, since = cpu(), time.monotonic()
    while time.monotonic() - since < quiet_s and time.monotonic() < end:
        time.sleep(0.25)
        if (now := cpu()) != last:
            last, since = now, time.monotonic()


def test_a_zygote_with_a_thread_starts_fresh_rank_processes(monkeypatch) -> None:
    import threaded_ranks

    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")  # a user's own page setting reaches the ranks unchanged
    out = run(threaded_ranks.identity, 2, timeout=60)
    _check(out, 2)
    assert [o["cmdline"] for o in out] == ["0", "1"]  # `python -m lab.comm.launch JOBDIR RANK`, not forked
    assert [o["thp"] for o in out] == ["0", "0"]
    assert all(o["gc"][0] and o["gc"][1] > 100_000 for o in out), [o["gc"] for o in out]  # froze its imports


def test_a_shaped_link_s_ranks_are_forked_into_their_namespaces() -> None:
    """Root only: a ShapedLink's ranks are forked too (no interpreter and torch start-up each), and each joins
    its host's network namespace with the link's environment; a zygote that runs a thread starts fresh ranks
    inside the namespaces instead (`ip netns exec`). (Two ranks a host: test_collectives_19's shaped machine.)"""
    import launch_ranks
    import threaded_ranks
    from lab.comm.shaped import ShapedLink, available

    ok, why = available()
    if not ok:
        pytest.skip(why)
    with ShapedLink(2, rate="1gbit") as net:
        forked = run(launch_ranks.identity, 2, net=net, timeout=60)
        fresh = run(threaded_ranks.identity, 2, net=net, timeout=60)
        want = [f"net:[{os.stat(net.netns_file(r)).st_ino}]" for r in range(2)]
        ifs = [net.env(r)["GLOO_SOCKET_IFNAME"] for r in range(2)]
    assert len(set(want)) == 2 and os.readlink("/proc/self/ns/net") not in want
    for out in (forked, fresh):
        _check(out, 2)
        assert [o["netns"] for o in out] == want and [o["gloo_if"] for o in out] == ifs
    assert [o["cmdline"] for o in forked] == ["serve"] * 2 and [o["cmdline"] for o in fresh] == ["0", "1"]


def test_ranks_get_a_share_of_the_cores_for_openmp_and_torch_compile(monkeypatch) -> None:
    """Unless set, each of P ranks gets cores // P OpenMP threads and as many torch.compile workers (on a
    2-core machine: none beside the rank, not a pool of compile processes per rank), and torch's CPU tensors of
    2 MB and more on transparent huge pages (a fresh 64 MB buffer is 16,384 page faults of 4 kB)."""
    import launch_ranks

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    out = run(launch_ranks.identity, 2, timeout=60)
    share = str(max(1, (os.cpu_count() or 1) // 2))
    assert [(o["omp"], o["compile_threads"], o["thp"]) for o in out] == [(share, share, "1")] * 2


def test_a_killed_warm_server_is_replaced_and_a_server_leaves_with_its_caller(tmp_path) -> None:
    import signal
    import subprocess
    import sys
    import time

    import launch_ranks
    from comm_ranks import alive

    (old,) = {o["server"] for o in run(launch_ranks.identity, 2, timeout=60)}
    assert old in servers()
    os.kill(old, signal.SIGKILL)
    out = run(launch_ranks.identity, 2, timeout=60)  # a new server (a job is never handed to a dead one)
    _check(out, 2)
    (new,) = {o["server"] for o in out}
    assert new != old and new in servers() and old not in servers()
    # a caller that exits takes its server along: the server's stdin closes and it leaves
    code = ("import sys, launch_ranks; from lab.comm.launch import run, servers; "
            "run(launch_ranks.identity, 2, timeout=60); print(servers()[0])")
    pid = int(subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout)
    end = time.monotonic() + 30
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.05)
    assert not alive(pid)


def test_a_run_after_an_edit_runs_the_edited_code(tmp_path) -> None:
    """A user edits a module the warm server had imported (lab.comm.dist, in a copy of the lab on a tmp path) between
    two runs from the same parent: the second run runs the edit (the server saw the file change and left; a fresh
    one imported the edit), and a run with no edit in between reuses the server."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import lab

    real = Path(lab.__file__).parent
    shutil.copytree(real, tmp_path / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    for entry in real.parent.iterdir():  # the rest of the checkout as it is (the kernels and results it reads)
        if entry.name != "lab" and not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    dist_py = tmp_path / "lab" / "comm" / "dist.py"
    code = f"""
import launch_ranks
from lab.comm.launch import run
first = run(launch_ranks.dist_marker, 2, timeout=60)
same = run(launch_ranks.dist_marker, 2, timeout=60)
with open({str(dist_py)!r}, "a") as f:
    f.write("\\nEDITED_MARK = 'edited'\\n")
print([first, same, run(launch_ranks.dist_marker, 2, timeout=60)])
"""
    path = os.pathsep.join([str(tmp_path), *sys.path])  # the copy first: it is the lab the parent and ranks import
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": path})
    assert out.returncode == 0, out.stderr[-2000:]
    first, same, edited = eval(out.stdout.strip().splitlines()[-1])
    assert {o["file"] for o in first + same + edited} == {str(dist_py)}
    assert [o["mark"] for o in first + same + edited] == [None] * 4 + ["edited"] * 2
    assert len({o["server"] for o in first + same}) == 1  # no edit: the same warm server
    assert not {o["server"] for o in first} & {o["server"] for o in edited}  # after the edit: a fresh one


def test_a_changed_vector_isa_gets_a_server_of_its_own(monkeypatch, tmp_path) -> None:
    """ATEN_CPU_CAPABILITY is read when torch is imported, as the warm server does once: ranks launched with another
    ISA (ATEN_CPU_CAPABILITY=avx2 to measure AVX2 on an AVX-512 machine) come from a server started with it, never
    from one that imported torch with the other."""
    from lab.comm import launch

    started: list[dict] = []

    class FakeServer:
        def __init__(self, env: dict[str, str]) -> None:
            started.append(env)
            self.ready, self.proc = False, type("P", (), {"poll": staticmethod(lambda: None)})()

        def close(self) -> None:
            pass

    monkeypatch.setattr(launch, "_Server", FakeServer)
    monkeypatch.setattr(launch, "_SERVERS", {})
    for isa in ("avx2", "avx2", "avx512"):
        launch._served_zygote({**os.environ, "ATEN_CPU_CAPABILITY": isa}, tmp_path, 2)
    assert [e["ATEN_CPU_CAPABILITY"] for e in started] == ["avx2", "avx512"]
