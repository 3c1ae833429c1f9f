"""Notebook kernels forked from one warm process instead of each starting Python afresh.

A notebook's kernel spent ~7 of its 9-14 core-seconds starting: the interpreter, ipykernel, then the notebook's own
first imports (torch; plotly's FigureWidget, whose nbformat import builds rfc3987-syntax's grammar through jsonschema,
~2 s; pandas, ipywidgets, the lab). `serve` imports those once and forks a kernel per request, before any thread
starts (as lab/comm/launch.py forks ranks), so each notebook still gets a process of its own whose cells run from a
clean namespace: what it imports is already in sys.modules, nothing more (an import the notebook lacks still fails).

    python tests/kernel_zygote.py serve SOCKET             the zygote (tests/notebook_client.py starts one per process)
    python tests/kernel_zygote.py SOCKET -m MODULE ARGS    the kernel jupyter_client starts: asks the zygote for a fork
                                                           that runs `python -m MODULE ARGS` with this process's
                                                           environment, directory and stdio, relays SIGINT/SIGTERM to
                                                           it and exits with its status
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

#: what a notebook kernel imports before its first cell runs and what the notebooks' first cells import
WARM = ("ipykernel.kernelapp", "ipykernel_launcher", "ipywidgets", "plotly.graph_objects", "plotly.basewidget",
        "pandas", "torch", "lab.plots", "lab.experiments")


def serve(path: str) -> None:
    """Import WARM, then fork one kernel per request on the Unix socket `path` until its caller closes stdin. A
    kernel whose requester is gone (killed: it cannot pass SIGKILL on) is killed."""
    import gc
    import importlib

    for name in WARM:
        importlib.import_module(name)
    from lab.comm.launch import forkable

    if not forkable():  # an import started a thread: a fork would copy it half-done (kernels then start afresh)
        sys.stdout.write("not forkable: a thread runs\n")
        return
    gc.freeze()  # what was imported lives on: the kernels' collections skip it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(8)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    kernels: dict[int, socket.socket] = {}  # pid -> its requester's connection (told the pid, then the exit status)
    while True:
        ready, _, _ = select.select([listener, sys.stdin, *kernels.values()], [], [], 0.1)
        if sys.stdin in ready and not sys.stdin.readline():  # the caller left
            for pid in kernels:
                os.kill(pid, signal.SIGKILL)
            return
        for pid, conn in list(kernels.items()):
            if conn in ready and not conn.recv(1):  # the requester is gone
                os.kill(pid, signal.SIGKILL)
        if listener in ready:
            conn, _ = listener.accept()
            body, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            pid = os.fork()
            if pid == 0:
                for other in (listener, conn, *kernels.values()):
                    other.close()
                _kernel(json.loads(body), fds)
            for fd in fds:
                os.close(fd)
            conn.send(f"{pid}".encode())
            kernels[pid] = conn
        while kernels:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = kernels.pop(pid, None)
            if conn is not None:
                try:
                    conn.send(f"{os.waitstatus_to_exitcode(status)}".encode())
                except OSError:
                    pass
                conn.close()


def _kernel(request: dict, fds: list[int]) -> None:
    """In the forked child: become `python -m MODULE ARGS` with the requester's environment, directory and stdio."""
    import runpy

    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.setsid()
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        module, *args = request["argv"][1:]  # ["-m", MODULE, ARGS...]
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:  # as the interpreter treats it: a message goes to stderr and exits 1
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def request(path: str, argv: list[str]) -> int:
    """Ask the zygote at `path` for a kernel running `argv` (["-m", MODULE, ARGS...]); its exit status."""
    if argv[:1] != ["-m"] or len(argv) < 2:
        raise SystemExit(f"usage: kernel_zygote.py SOCKET -m MODULE [ARGS...], not {argv}")
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.connect(path)
    body = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(conn, [body], [0, 1, 2])
    reply = conn.recv(64)
    if not reply:
        raise SystemExit(f"the kernel zygote at {path} closed the connection without starting a kernel")
    pid = int(reply)

    def relay(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:  # the kernel has just left: its status follows
            pass

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, relay)
    status = conn.recv(64)
    return int(status) if status else 1


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    else:
        code = request(sys.argv[1], sys.argv[2:])
        sys.exit(code if code >= 0 else 128 - code)
