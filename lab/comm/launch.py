"""Start P real processes on this machine, run fn(comm, *args) on every rank, gather the results.

One zygote process imports fn's module, then forks the P ranks. The zygote is itself forked by this
process's warm server (`python -m lab.comm.launch - serve`, started at the first launch, kept for the
next: torch and the comm code imported once), so a launch pays no interpreter or torch start-up after the
first (where no server can run, a fresh `python -m lab.comm.launch JOBDIR zygote P` does the same). A server
never runs stale code: before each job it checks the source file of every module it has imported and, if one was
edited since, leaves; the caller starts a fresh one (a second run after an edit runs the edit). The
zygote forks only while it is single-threaded (no torch or OpenMP thread yet: jemalloc's background
thread aside, whose allocator handles fork), otherwise each rank is a fresh `python -m
lab.comm.launch JOBDIR RANK` process. A rank of a `ShapedLink` joins its network namespace itself
(setns(2) on the link's `netns_file`, right after the fork, with the link's `env`); a fresh one starts
inside it (the link's `command_prefix`). The ranks meet through a file store in a private directory and talk
over Gloo (loopback, or the veth links of a `ShapedLink`) or NCCL. The parent watches them: the
first rank that raises or dies stops the run, every other rank is killed, and the error names
the rank (a rank that hangs makes its peers' transfers time out, which names it too). Nothing
is left running. `fn` must be importable (a module-level function). Codecs and algorithms
registered at run time in this process reach the ranks too: the job carries `lab.plugins.carried()`
and every rank adopts it before it runs `fn`.
"""
from __future__ import annotations

import gc
import importlib
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch

from .base import CommError
from .dist import check_backend
from lab import plugins
from lab.backend import Progress, RowSink

GB_PER_PROC = 0.4  # resident memory of one rank process with torch imported, measured on CPU
MAX_PROCS_PER_CORE = 8


def max_procs(backend: str = "gloo") -> int:
    """How many ranks this machine can host: one GPU each for NCCL; for Gloo, what memory and
    cores allow (a rank process with torch takes ~0.4 GB)."""
    if backend == "nccl":
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gb = 8.0
    return max(1, min(int(mem_gb / GB_PER_PROC), MAX_PROCS_PER_CORE * (os.cpu_count() or 1)))


def run(fn: Callable[..., Any], procs: int, *args: Any, backend: str = "gloo", timeout: float = 120.0,
        net: Any = None, progress: Progress | None = None, on_row: RowSink | None = None,
        **kwargs: Any) -> list[Any]:
    """fn(comm, *args, **kwargs) on `procs` ranks; the results in rank order.

    timeout: seconds for any single transfer to wait on a peer, and (plus start-up) for the run.
    net: a ShapedLink whose namespaces the ranks run in (see lab/comm/shaped.py).
    progress: called in this process with rank 0's progress; fn then gets a `progress` keyword
    (a callback on rank 0, None on the others).
    on_row: called in this process with each row rank 0 finishes, as it finishes (fn then gets an
    `on_row` keyword: a callback on rank 0, None on the others), so a stopped run keeps them: on
    KeyboardInterrupt every row rank 0 had reported is relayed before the ranks are killed.
    Raises CommError naming the rank that failed, died or hung.
    """
    check_backend(backend)
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < 1:
        raise ValueError(f"procs={procs!r}; allowed: an integer >= 1")
    limit = max_procs(backend)
    if procs > limit:
        what = (f"{limit} GPU(s) visible and NCCL needs one per process" if backend == "nccl" else
                f"about {limit} processes fit ({os.cpu_count()} cores, ~{GB_PER_PROC} GB per process); "
                "use SimComm (lab.comm.sim.simulate) for more virtual ranks")
        raise ValueError(f"procs={procs} is more than this machine can host: {what}")
    if net is not None and getattr(net, "procs", procs) < procs:
        raise ValueError(f"the shaped network has {net.procs} hosts, fewer than procs={procs}")
    if timeout <= 0:
        raise ValueError(f"timeout={timeout}; allowed: seconds > 0")
    jobdir = Path(tempfile.mkdtemp(prefix="paralab-run-"))
    os.chmod(jobdir, 0o755)
    try:
        try:
            job = pickle.dumps((fn, args, kwargs, backend, procs, timeout, progress is not None, on_row is not None))
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise ValueError(f"cannot hand {fn!r} and its arguments to rank processes ({e}); "
                             "pass a module-level function and picklable arguments") from None
        main = getattr(sys.modules["__main__"], "__file__", None) if fn.__module__ == "__main__" else None
        preload = fn.__module__ if fn.__module__ not in ("__main__", "__mp_main__") else None
        with open(jobdir / "job.pkl", "wb") as f:
            pickle.dump((list(sys.path), main, plugins.carried(), preload), f)
            f.write(job)
        return _watch(_start(jobdir, procs, net), jobdir, timeout, progress, _RowRelay(jobdir / ROWS, on_row))
    finally:
        shutil.rmtree(jobdir, ignore_errors=True)


def _start(jobdir: Path, procs: int, net: Any) -> list[Any]:
    """The rank processes, all children of one zygote on this host: forked by this process's warm server where
    there is one, else a fresh `python -m lab.comm.launch JOBDIR zygote P` (`_zygote` forks the ranks, or starts
    them afresh where it cannot fork safely)."""
    threads = max(1, (os.cpu_count() or 1) // procs)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    # torch.compile's own worker pool (one more torch process per rank) only pays with cores to spare
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(threads))
    env["GLOO_SOCKET_IFNAME"] = "lo"
    # torch's CPU allocator maps tensors of 2 MB and more on transparent huge pages (c10 alloc_cpu): a rank's fresh
    # 64 MB allreduce buffer took 16,384 page faults, 73 ms of a 0.33 s 8-bit hierarchical call on 4 ranks / 2 cores
    # (32 ms -> 10 ms per 64 MB copy alone). THP_MEM_ALLOC_ENABLE=0 keeps 4 kB pages.
    env.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    if net is not None:
        netns = getattr(net, "netns_file", None)
        (jobdir / NET).write_text(json.dumps({"netns": [netns(r) if netns else None for r in range(procs)],
                                              "env": [net.env(r) for r in range(procs)],
                                              "prefix": [net.command_prefix(r) for r in range(procs)]}))
    zygote = _served_zygote(env, jobdir, procs)
    if zygote is None:  # no warm server here: a fresh zygote for this job
        with open(jobdir / "stderr.txt", "w") as err:
            zygote = subprocess.Popen([sys.executable, "-m", "lab.comm.launch", str(jobdir), ZYGOTE, str(procs)],
                                      env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err)
    return [_Forked(zygote, jobdir, r) for r in range(procs)]


def _joinable(net: dict | None) -> bool:
    """Can a forked rank join the shaped network `net` (`_net`) itself: Linux, and a namespace file for every
    rank (else each rank starts afresh inside its namespace, through the network's command prefix)."""
    return net is None or (sys.platform.startswith("linux") and
                           all(ns is not None and os.path.exists(ns) for ns in net["netns"]))


def _setns(path: str) -> None:
    """Move this (single-threaded) process into the network namespace `path` names (setns(2), CLONE_NEWNET)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if hasattr(os, "setns"):  # Python 3.12+
            os.setns(fd, os.CLONE_NEWNET)
            return
        import ctypes  # imported by torch already

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            err = ctypes.get_errno()
            raise OSError(err, f"cannot join the network namespace {path}: {os.strerror(err)}")
    finally:
        os.close(fd)


def _net(jobdir: Path) -> dict | None:
    """The job's shaped network as `_start` wrote it (each rank's namespace file, env and command prefix), or
    None on loopback."""
    try:
        return json.loads((jobdir / NET).read_text())
    except FileNotFoundError:
        return None


ZYGOTE = "zygote"  # the argument that makes `python -m lab.comm.launch JOBDIR zygote P` the ranks' parent
NET = "net.json"  # JOBDIR/net.json: the ranks' namespaces, when they run on a shaped network (`_net`)
SERVE = "serve"  # `python -m lab.comm.launch - serve`: the warm server that forks a zygote per job
STALE = "stale"  # a warm server's answer instead of a pid: a module it imported was edited, and it has left
ZYGOTE_EXIT = "exit"  # JOBDIR/exit: a served zygote's exit status, written by the server that reaped it
# In a warm server and the processes it forks: the file a rank touches when it imported torch.compile's inductor
# (so the server readies torch.compile for the ranks after it; `_warm_compiler`). None elsewhere. torch imports
# inductor with torch._dynamo, at a process's first optimizer, FSDP or torch.compile call.
_COMPILED_SEEN: Path | None = None


class _Server:
    """A warm `python -m lab.comm.launch - serve` of this process: torch and the comm code imported once, it
    forks one zygote per job (`_serve`), so a job after the first pays a fork, not an interpreter and torch
    start-up (~1.4 s of CPU here). One per environment (what torch read when it was imported: OpenMP threads,
    page settings); it leaves when this process does (its stdin closes)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "lab.comm.launch", "-", SERVE], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self.ready = self._line() == "ready"  # not forkable (a thread at start-up) or failed: not used

    def _line(self) -> str:
        return self.proc.stdout.readline().decode().strip()

    def start(self, jobdir: Path, procs: int, env: dict[str, str]) -> int | None:
        """The pid of the zygote forked for this job (its own session), or None if the server is gone (or has left
        because a module it imported was edited: `STALE`)."""
        try:
            request = {"jobdir": str(jobdir), "procs": procs, "cwd": os.getcwd(), "umask": _umask(), "env": env}
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            return int(self._line())
        except (OSError, ValueError):  # gone, or out of step: not used again
            self.ready = False
            self.close()
            return None

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass


def _umask() -> int:
    """This process's umask, read without setting it (os.umask would change it for every thread meanwhile)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise OSError("no Umask line in /proc/self/status")


_SERVERS: dict[tuple, _Server] = {}
_SERVERS_LOCK = threading.Lock()
_SERVERS_KEPT = 2  # environments with a warm server at once (the oldest is stopped for a third)
# The variables a server's own imports read and keep (the interpreter's, OpenMP's and the math libraries' threads,
# torch's allocator, compiler and collective settings, ATen's vector ISA (ATEN_CPU_CAPABILITY), the lab's own): only
# a change of these needs a server started with it. Everything else reaches the job anyway (its zygote gets the
# caller's whole environment), and many variables change from call to call or are set by a library in the caller's
# own environment partway through its life; a new server for each would cost a start-up (~3 core-seconds) and its
# ranks' first torch.compile again.
_SERVER_ENV_PREFIXES = ("PYTHON", "LD_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "THP_", "TORCH", "PYTORCH_",
                        "CUDA_", "NCCL_", "GLOO_", "PARALAB_", "ATEN_")


def _served_zygote(env: dict[str, str], jobdir: Path, procs: int) -> "_ServedZygote | None":
    """This job's zygote, forked by this process's warm server for `env` (started on first use); None
    where there is none (not Linux, or the server could not start)."""
    if not sys.platform.startswith("linux"):
        return None
    read = tuple(sorted((k, v) for k, v in env.items() if k.startswith(_SERVER_ENV_PREFIXES)))
    key = (os.getpid(), sys.executable, read)
    with _SERVERS_LOCK:
        for fresh in (False, True):  # a server that died since its last job is replaced once
            server = _SERVERS.get(key)
            if fresh or server is None or server.proc.poll() is not None:
                for old in [k for k in _SERVERS if k[0] != os.getpid() or k == key]:  # forked copies: not ours
                    _SERVERS.pop(old).close()
                while len(_SERVERS) >= _SERVERS_KEPT:
                    _SERVERS.pop(next(iter(_SERVERS))).close()
                server = _SERVERS[key] = _Server(env)
            if not server.ready:
                return None
            pid = server.start(jobdir, procs, env)
            if pid is not None:
                return _ServedZygote(server, pid, jobdir)
    return None


def servers() -> list[int]:
    """The process ids of this process's warm launch servers (kept between runs on purpose; each leaves when
    this process does)."""
    with _SERVERS_LOCK:
        return [s.proc.pid for k, s in _SERVERS.items() if k[0] == os.getpid() and s.proc.poll() is None]


class _ServedZygote:
    """The parent's handle on a zygote its warm server forked (what _Forked and _kill use of a Popen): the server
    reaps it and writes its exit status to JOBDIR/exit (Popen's convention: -N for killed by signal N)."""

    def __init__(self, server: _Server, pid: int, jobdir: Path) -> None:
        self.server, self.pid, self.jobdir = server, pid, jobdir
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            server_gone = self.server.proc.poll() is not None  # it writes the status before it leaves
            code = _read_code(self.jobdir / ZYGOTE_EXIT)
            self.returncode = -signal.SIGKILL if code is None and server_gone else code
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Forked:
    """The parent's handle on a rank the zygote started (what _watch uses of a Popen: poll, wait,
    the process group to kill). The zygote reaps its ranks and writes each exit status (Popen's
    convention: -N for killed by signal N) to JOBDIR/exit<r>, and its pid to JOBDIR/pid<r>. Each rank
    leads its own session, as a rank started on its own does (the kernel's autogroup scheduler then
    gives each rank its own share of the CPU, not one share for all)."""

    def __init__(self, zygote: "subprocess.Popen | _ServedZygote", jobdir: Path, rank: int) -> None:
        self.zygote, self.jobdir, self.rank = zygote, jobdir, rank
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        return self.zygote.pid

    def poll(self) -> int | None:
        if self.returncode is None:
            code = _exit_code(self.jobdir, self.rank)
            if code is None and self.zygote.poll() is not None:
                # gone with the zygote (killed), unless its status was written just before the zygote exited
                code = _exit_code(self.jobdir, self.rank)
                if code is None:
                    code = self.zygote.returncode or -signal.SIGKILL
            self.returncode = code
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        self.zygote.wait(timeout)
        return self.poll()

    def rank_pid(self) -> int | None:
        """The rank's process id (and process group: each rank leads its own session), once started."""
        try:
            return int((self.jobdir / f"pid{self.rank}").read_text())
        except (OSError, ValueError):
            return None


def _publish(path: Path, data: str | bytes) -> None:
    """Write `path` whole or not at all, for a process that polls it: a hidden temporary file, then a rename."""
    tmp = path.parent / f".{path.name}.tmp"
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data)
    tmp.replace(path)


def _exit_code(jobdir: Path, rank: int) -> int | None:
    return _read_code(jobdir / f"exit{rank}")


def _read_code(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def _watch(ps: list[Any], jobdir: Path, timeout: float,
           progress: Progress | None = None, rows: "_RowRelay | None" = None) -> list[Any]:
    deadline = time.monotonic() + timeout + 60.0
    try:
        while True:
            if progress is not None:
                _relay(jobdir, progress)
            if rows is not None:
                rows.relay()
            codes = [p.poll() for p in ps]
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                raise CommError(_diagnose(ps, jobdir, timeout))
            if all(c == 0 for c in codes):
                break
            if time.monotonic() > deadline:
                alive = [r for r, c in enumerate(codes) if c is None]
                raise CommError(f"timed out after {timeout + 60:.0f} s: rank(s) {alive} still running "
                                "(hung); all ranks were stopped")
            time.sleep(0.02)
    except KeyboardInterrupt:
        if rows is not None:
            rows.relay()  # what rank 0 finished before the stop
        raise
    finally:
        _kill(ps)
    if rows is not None:
        rows.relay()
    return [torch.load(jobdir / f"result{r}.pt", weights_only=False) for r in range(len(ps))]


def _culprit(ps: list[subprocess.Popen], jobdir: Path) -> str | None:
    """A rank that died without writing an error, or one that raised an error of its own (not a
    peer's failure seen from here), or None."""
    codes = [p.poll() for p in ps]
    died = [r for r, c in enumerate(codes) if c not in (None, 0) and not (jobdir / f"error{r}.txt").exists()]
    if died:
        return _failure(died[0], codes[died[0]], jobdir)
    own = [r for r, t in _errors(ps, jobdir).items() if not _is_peer_failure(t)]
    return _failure(own[0], codes[own[0]], jobdir) if own else None


def _diagnose(ps: list[subprocess.Popen], jobdir: Path, timeout: float) -> str:
    """Name the rank at fault. A rank that died, or raised an error of its own, is reported at
    once. When the first failures are only consequences (a transfer that timed out, a connection
    the peer closed or reset), the culprit is a rank that died or raised meanwhile, or the one
    still running after every rank waiting on it has given up: wait up to one timeout to see."""
    time.sleep(0.3)
    culprit = _culprit(ps, jobdir)
    if culprit:
        return culprit
    end = time.monotonic() + timeout + 2.0
    while time.monotonic() < end and any(p.poll() is None for p in ps):
        still = [r for r, p in enumerate(ps) if p.poll() is None]
        if all((jobdir / f"error{r}.txt").exists() for r in still):
            break
        if len(still) == 1 and still[0] in _waited_on(ps, jobdir):
            break  # every other rank has given up on this one: there is nobody left to hear from
        time.sleep(0.05)
    culprit = _culprit(ps, jobdir)
    if culprit:
        return culprit
    codes = [p.poll() for p in ps]
    errors = _errors(ps, jobdir)
    hung = [r for r, c in enumerate(codes) if c is None and not (jobdir / f"error{r}.txt").exists()]
    first = min(errors)
    if hung:
        return (f"rank {hung[0]} hung: it was still running after the ranks waiting on it timed out "
                f"({timeout:.0f} s), e.g. {_failure(first, codes[first], jobdir)}")
    return _failure(first, codes[first], jobdir)


_PEER_OF_FAILED_TRANSFER = re.compile(r"(?:receive from|send to) rank (\d+)")


def _waited_on(ps: list[subprocess.Popen], jobdir: Path) -> set[int]:
    """The ranks the exited ranks' error reports name as the peer of a transfer that failed (lab.comm.dist's
    'receive from rank N failed')."""
    return {int(r) for text in _errors(ps, jobdir).values()
            for r in _PEER_OF_FAILED_TRANSFER.findall(text.split("\n\n")[0])}


def _errors(ps: list[subprocess.Popen], jobdir: Path) -> dict[int, str]:
    """The error reports of the ranks that have exited with one, by rank."""
    out = {}
    for r, p in enumerate(ps):
        if p.poll() not in (None, 0):
            try:
                out[r] = (jobdir / f"error{r}.txt").read_text()
            except OSError:
                pass
    return out


def _relay(jobdir: Path, progress: Progress) -> None:
    try:
        frac, msg = (jobdir / "progress.txt").read_text().split("\t", 1)
        progress(float(frac), msg)
    except (OSError, ValueError):
        pass


class _FileProgress:
    """Rank 0's progress callback: the parent polls the file (picklable, no pipes)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, frac: float, msg: str) -> None:
        _publish(self.path, f"{frac}\t{msg}")


ROWS = "rows.jsonl"


class _FileRows:
    """Rank 0's row callback: one JSON line per finished row, appended in one write (the parent
    reads complete lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, row: dict) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(row, default=_plain) + "\n")


def _plain(v: Any) -> Any:
    """A row value JSON does not know (a numpy or torch scalar) as a plain number or string."""
    item = getattr(v, "item", None)
    return item() if callable(item) else str(v)


class _RowRelay:
    """The parent's side of `on_row`: hands each complete line of rows.jsonl to the callback once."""

    def __init__(self, path: Path, on_row: RowSink | None) -> None:
        self.path, self.on_row, self.offset = path, on_row, 0

    def relay(self) -> None:
        if self.on_row is None:
            return
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        done = data[:data.rfind("\n") + 1]
        self.offset += len(done.encode())
        for line in done.splitlines():
            self.on_row(json.loads(line))


# What a rank reports when a peer, not itself, failed: Gloo's and NCCL's transfer timeouts, a
# connection the dead peer's kernel closed or reset, and TorchComm's own "may have died or hung".
_PEER_FAILURE = ("timed out", "timeout", "connection closed by peer", "connection reset by peer",
                 "broken pipe", "may have died or hung", "a rank died or hung")


def _is_peer_failure(text: str) -> bool:
    low = text.split("\n\n")[0].lower()
    return any(k in low for k in _PEER_FAILURE)


def _failure(rank: int, code: int | None, jobdir: Path) -> str:
    err = jobdir / f"error{rank}.txt"
    if err.exists():
        return f"rank {rank} failed: {err.read_text().split(chr(10) * 2)[0].strip()}"
    how = f"killed by {signal.Signals(-code).name}" if code and code < 0 else f"exit code {code}"
    stderr = jobdir / f"stderr{rank}.txt"
    if not stderr.exists():  # the zygote failed before it started this rank: its own stderr
        stderr = jobdir / "stderr.txt"
    tail = stderr.read_text().strip().splitlines()[-3:] if stderr.exists() else []
    return f"rank {rank} died ({how})" + (f": {' | '.join(tail)}" if tail else "") + "; all ranks were stopped"


def _kill(ps: list[Any]) -> None:
    """SIGKILL every rank's process group (each rank leads its own) and a zygote's, and reap them."""
    leaders = list({id(q): q for q in (getattr(p, "zygote", p) for p in ps)}.values())
    for p in ps:
        if isinstance(p, _Forked) and p.poll() is None and (pid := p.rank_pid()) is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for p in leaders:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                p.kill()
    for p in leaders:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def _worker(jobdir: Path, rank: int) -> int:
    with open(jobdir / "job.pkl", "rb") as f:
        sys.path[:], main, carried, _ = pickle.load(f)
        plugins.adopt(carried)  # plugins registered in the parent: the registries import them on first use
        if main:  # fn lives in the parent's script: load it the way multiprocessing's spawn does
            import runpy
            import types

            mod = types.ModuleType("__mp_main__")
            mod.__dict__.update(runpy.run_path(main, run_name="__mp_main__"))
            sys.modules["__main__"] = sys.modules["__mp_main__"] = mod
        fn, args, kwargs, backend, procs, timeout, with_progress, with_rows = pickle.load(f)
    gc.freeze()  # what the imports made lives as long as the rank: its garbage collections skip it
    if with_progress:
        kwargs = {**kwargs, "progress": _FileProgress(jobdir / "progress.txt") if rank == 0 else None}
    if with_rows:
        kwargs = {**kwargs, "on_row": _FileRows(jobdir / ROWS) if rank == 0 else None}
    import torch.distributed as dist

    from .dist import TorchComm

    try:
        if backend == "nccl":
            torch.cuda.set_device(rank % torch.cuda.device_count())
        dist.init_process_group(backend, init_method=f"file://{jobdir}/store", rank=rank, world_size=procs,
                                timeout=timedelta(seconds=timeout))
        if backend == "gloo":
            # Gloo's init returns once this rank's side of every pair is up; a rank that ran fn and
            # left at once could close a socket a slower peer was still handshaking on
            # ("Connection closed by peer" in connectFullMesh). NCCL connects lazily.
            dist.barrier()
        result = fn(TorchComm(), *args, **kwargs)
        torch.save(result, jobdir / f"result{rank}.pt")
    except BaseException as e:  # reported to the parent, which names this rank
        msg = str(e) if isinstance(e, CommError) else f"{type(e).__name__}: {e}"
        (jobdir / f"error{rank}.txt").write_text(msg + "\n\n" + traceback.format_exc()[-2000:])
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


_FORK_SAFE_THREADS = {"jemalloc_bg_thd"}  # an allocator's helper that handles fork itself (pthread_atfork)


def forkable() -> bool:
    """True when this process runs no thread but the main one (and fork-safe helpers): fork then
    copies nothing half-done (Linux: read from /proc; elsewhere never)."""
    try:
        tasks = os.listdir("/proc/self/task")
        names = [Path(f"/proc/self/task/{t}/comm").read_text().strip() for t in tasks if int(t) != os.getpid()]
    except (OSError, ValueError):
        return False
    return all(n in _FORK_SAFE_THREADS for n in names)


def _freeze_for_fork() -> None:
    """Move every object alive now (the modules this process imported, mostly) into the garbage collector's
    permanent generation, as the gc module advises before a fork without exec: a child's collections then never
    walk them, nor write to the memory pages it shares with its parent. On a 2-core machine 11-13 % of the ranks'
    CPU was the collector's, most of it full collections walking torch's objects again in every rank."""
    gc.freeze()


def _zygote(jobdir: Path, procs: int) -> int:
    """The ranks' parent: import what every rank imports once, start the ranks (fork when that is
    safe, else fresh processes), reap them and write each one's exit status to JOBDIR/exit<r>."""
    with open(jobdir / "job.pkl", "rb") as f:
        sys.path[:], _, carried, preload = pickle.load(f)
    plugins.adopt(carried)
    try:
        import torch.distributed  # noqa: F401

        from . import dist  # noqa: F401
        if preload:
            importlib.import_module(preload)
    except BaseException:  # noqa: BLE001  each rank imports it again and reports what failed
        pass
    net = _net(jobdir)
    fork = forkable() and _joinable(net)
    if fork:
        _freeze_for_fork()
    zygote = os.getpid()
    ranks: dict[int, int] = {}
    for r in range(procs):
        sys.argv[1:] = [str(jobdir), str(r)]  # what a rank's own process sees (at-fork handlers too)
        if fork:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _forked_rank(jobdir, r, zygote, net)
        else:
            prefix = net["prefix"][r] if net else []
            argv = [*prefix, sys.executable, "-m", "lab.comm.launch", str(jobdir), str(r)]
            env = {**os.environ, **(net["env"][r] if net else {})}
            pid = os.posix_spawnp(argv[0], argv, env, setsid=True, file_actions=[
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, str(jobdir / f"stderr{r}.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)])
        ranks[pid] = r
        _publish(jobdir / f"pid{r}", str(pid))
    while ranks:
        pid, status = os.wait()
        if pid in ranks:
            r = ranks.pop(pid)
            _publish(jobdir / f"exit{r}", str(os.waitstatus_to_exitcode(status)))
    return 0


def _forked_rank(jobdir: Path, rank: int, zygote: int, net: dict | None = None) -> None:
    """In a child of the zygote: become rank `rank` (its own session, stdout/stderr and random seeds,
    dead with the zygote, in its namespace of the shaped network `net` with its environment), run it and leave
    without the interpreter's teardown."""
    code = 1
    try:
        os.setsid()
        try:
            import ctypes  # imported by torch already

            ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG: a killed zygote takes its ranks along
        except (OSError, AttributeError):
            pass
        if os.getppid() != zygote:  # the zygote was killed before the line above
            os._exit(1)
        err = os.open(jobdir / f"stderr{rank}.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        out = os.open(os.devnull, os.O_WRONLY)
        os.dup2(err, 2)
        os.dup2(out, 1)
        os.close(err)
        os.close(out)
        if net:
            _setns(net["netns"][rank])
            os.environ.update(net["env"][rank])
        torch.seed()  # as a fresh process would be: its own default torch and NumPy streams
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        passes: list = []
        if _COMPILED_SEEN is not None:
            from lab.codecs import warm_passes

            warm_passes.record(passes.append)
        code = _worker(jobdir, rank)
        if _COMPILED_SEEN is not None and "torch._inductor" in sys.modules:
            try:
                _COMPILED_SEEN.touch()
                if passes:  # for the server to compile ahead of the ranks it forks next (`_compile_passes`)
                    _publish(_COMPILED_SEEN.parent / f"passes-{os.getpid()}", pickle.dumps(passes))
            except Exception:  # noqa: BLE001  the server has left, or a key does not pickle: nothing compiled ahead
                pass
    except BaseException:  # noqa: BLE001  reported on this rank's stderr; the parent names the rank
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve() -> int:
    """The warm server: import what every zygote imports (torch, the comm code, the allreduce algorithms and so the
    cost model's pandas), then for each request line on stdin (a job's directory, ranks, and the caller's cwd,
    umask and environment, as JSON) fork a zygote in its own session and answer its pid; reap the zygotes, writing
    each exit status to JOBDIR/exit. The first second it is idle after a rank of its own has used torch.compile
    (or torch._dynamo, which imports it), it readies torch.compile for later ranks (`_warm_compiler`), and whenever
    it is idle after a second job it compiles the codec passes its ranks ran (`_compile_passes`; a one-shot caller,
    a CLI run, gets none: it leaves). Leaves when stdin closes (its caller is gone, or stopped it), once the zygotes
    it started have, when a compile left it unable to fork, or when the file of a module it imported has changed
    (`_edited`, checked before each job; its caller then starts another)."""
    import select

    import torch.distributed  # noqa: F401

    from . import dist  # noqa: F401
    try:  # the plugin scan of every rank that runs a collective (~0.4 core-s a rank, pandas mostly)
        from .algorithms import algorithm_names

        algorithm_names()
    except Exception:  # noqa: BLE001  a broken plugin is for the rank that uses the registry to report
        pass
    if not forkable():
        print("no fork", flush=True)
        return 1
    sources: dict[str, tuple[int, int] | None] = {}
    _edited(sources)  # what it imported, as it was: an edit after this makes it leave before its next job
    gc.collect()  # once: the imports' own garbage is not frozen with them (before each fork, _freeze_for_fork)
    global _COMPILED_SEEN
    flags = tempfile.mkdtemp(prefix="paralab-serve-")
    _COMPILED_SEEN = Path(flags) / "compiled"
    print("ready", flush=True)
    jobs: dict[int, Path] = {}
    pending = b""
    warm = False
    compiled: set = set()
    served = 0  # jobs so far: a caller that came back (served > 1) gets its ranks' passes compiled ahead
    try:
        while True:
            readable, _, _ = select.select([0], [], [], 0.05 if jobs else 1.0)
            _reap(jobs, block=False)
            if not readable:
                if not jobs and not warm and _COMPILED_SEEN.exists():  # idle, and a rank has compiled
                    warm = True
                    _warm_compiler()
                if not jobs and served > 1 and not _compile_passes(Path(flags), compiled):
                    break
                continue
            data = os.read(0, 65536)
            if not data:
                break
            pending += data
            if b"\n" in pending and _edited(sources):
                print(STALE, flush=True)  # its caller starts a fresh server for this job
                break
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                req = json.loads(line)
                _freeze_for_fork()  # the preloads, and what the compiler's warm-up imported since
                pid = os.fork()
                if pid == 0:
                    _served_job(req)
                jobs[pid] = Path(req["jobdir"])
                served += 1
                print(pid, flush=True)
        _reap(jobs, block=True)
    finally:
        shutil.rmtree(flags, ignore_errors=True)
    return 0


def _stamp(path: str) -> tuple[int, int] | None:
    """A file's (modification time in ns, size), or None where there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _edited(seen: dict[str, tuple[int, int] | None]) -> bool:
    """Whether the file of a module this process imported has changed since `seen` first recorded it (path ->
    `_stamp`; the modules imported since the last call are recorded now). ~5 ms for torch's ~1,400 files here."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path not in seen:
            seen[path] = _stamp(path)
    return any(_stamp(path) != stamp for path, stamp in seen.items())


def _warm_compiler() -> None:
    """torch.compile's start-up, done once in the server so that every rank it forks has it: inductor's import and
    its probe of the CPU's vector instruction sets (a test library built and loaded per set). A rank that compiles a
    codec's CPU pass (lab.codecs.cpu) then starts it 2.8 instead of 6.7 core-seconds here. Only a server whose
    ranks have imported inductor (to compile, or with torch._dynamo at a first optimizer) does it (~1.5 core-seconds
    of the server's). A failure is left for the rank that compiles to meet and report."""
    try:
        from lab.codecs.torch_compile_private import probe_vector_isa

        probe_vector_isa()
    except Exception:  # noqa: BLE001
        pass


def _compile_passes(flags: Path, done: set) -> bool:
    """Compile the codec passes the server's ranks recorded (FLAGS/passes-PID, lab.codecs.warm_passes) and it has
    not compiled yet, so the ranks it forks from now on run them at once (~3-4.5 core-seconds a rank here otherwise:
    torch._dynamo's import, its trace, Inductor's cached kernel loaded). False when that left this process with a
    thread (it must not fork then)."""
    files = sorted(flags.glob("passes-*"))
    if not files:
        return True
    from lab.codecs import warm_passes

    for f in files:
        try:
            records = pickle.loads(f.read_bytes())
        except Exception:  # noqa: BLE001  half-written by a rank that was killed: its passes are compiled later
            records = []
        f.unlink(missing_ok=True)
        for rec in records:
            if rec not in done:
                done.add(rec)
                warm_passes.replay(rec)
    return forkable()


def _reap(jobs: dict[int, Path], block: bool) -> None:
    """Reap the server's finished zygotes (all of them, waiting, with block), each exit status to JOBDIR/exit."""
    while jobs:
        pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        if pid == 0:
            return
        if pid in jobs:
            try:
                _publish(jobs[pid] / ZYGOTE_EXIT, str(os.waitstatus_to_exitcode(status)))
            except OSError:  # its caller has cleaned up already
                pass
            del jobs[pid]


def _served_job(req: dict) -> None:
    """In a child of the warm server: become this job's zygote (what `python -m lab.comm.launch JOBDIR zygote P`
    runs) in its own session, with the caller's environment, cwd and umask, and leave without the interpreter's
    teardown."""
    code = 1
    try:
        os.setsid()
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        os.umask(req["umask"])
        jobdir = Path(req["jobdir"])
        err = os.open(jobdir / "stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDWR)
        for fd, to in ((0, null), (1, null), (2, err)):
            os.dup2(to, fd)
        os.close(err)
        os.close(null)
        sys.argv[1:] = [str(jobdir), ZYGOTE, str(req["procs"])]
        code = _zygote(jobdir, int(req["procs"]))
    except BaseException:  # noqa: BLE001  on the job's stderr.txt, which the parent reads when a rank is missing
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[2] == SERVE:
        sys.exit(_serve())
    if sys.argv[2] == ZYGOTE:
        code = _zygote(Path(sys.argv[1]), int(sys.argv[3]))
    else:
        code = _worker(Path(sys.argv[1]), int(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    # The result file is written and the group destroyed: skip interpreter teardown, where a
    # DistributedDataParallel reducer's threads sometimes met std::terminate (SIGABRT) after the
    # rank had finished (5 of 40 two-rank DDP runs here).
    os._exit(code)
