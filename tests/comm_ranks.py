"""Rank functions for test_dist.py: module level, so that rank processes can import them."""
from __future__ import annotations

import os
import signal
import time

from pathlib import Path

import torch

from lab.codecs import get_codec
from lab.comm import algorithm_names, allreduce


def x_for(rank: int, n: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(1000 + rank))


def every_algorithm(comm, lengths):
    """{(algorithm, n): result} for every algorithm and length, plus two compressed runs."""
    out = {}
    for n in lengths:
        for a in algorithm_names():
            out[(a, n)] = allreduce(comm, x_for(comm.rank, n), algorithm=a)
    n = max(lengths)
    for a in algorithm_names()[1:]:
        out[(a + "+dynamic_tree", n)] = allreduce(comm, x_for(comm.rank, n), algorithm=a, codec="dynamic_tree")
    out[("tree+topk", n)] = allreduce(comm, x_for(comm.rank, n), algorithm="tree", codec=get_codec("topk", ratio=0.5))
    return out


def chunked_ring(comm, n):
    """The ring with segments longer than one chunk, raw and 8-bit, next to the native sum; the 8-bit
    one again unpipelined (`channel.overlap(False)`), whether its payload buffers were the same
    tensors the second time, and the threads `bench.rank_threads` gave this rank."""
    from lab.comm import bench, channel
    x = x_for(comm.rank, n)
    out = {"native": allreduce(comm, x, algorithm="native"), "ring": allreduce(comm, x, algorithm="ring"),
           "ring+linear": allreduce(comm, x, algorithm="ring", codec="linear")}
    pool = {k: v.data_ptr() for k, v in channel.payload_pool(comm).items()}
    with channel.overlap(False):
        out["ring+linear serial"] = allreduce(comm, x, algorithm="ring", codec="linear")
    out["buffers reused"] = bool(pool) and pool == {k: v.data_ptr() for k, v in channel.payload_pool(comm).items()}
    out["threads"] = (bench.rank_threads(comm), torch.get_num_threads())
    return out


def big_exchange(comm, n):
    """Ranks 0 and 1 swap n fp32 values in one exchange (both send and receive at once)."""
    if comm.rank > 1:
        return None
    peer = 1 - comm.rank
    mine, theirs = torch.full((n,), float(comm.rank + 1)), torch.empty(n)
    comm.exchange([(mine, peer)], [(theirs, peer)]).wait()
    return bool(theirs.eq(float(peer + 1)).all())


def dies(comm, victim):
    """Rank `victim` is killed (SIGKILL) in the middle of a series of allreduces."""
    for i in range(1000):
        if i == 3 and comm.rank == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        allreduce(comm, torch.ones(1000), algorithm="ring", check=False)


def hangs(comm, victim):
    """Rank `victim` stops answering."""
    if comm.rank == victim:
        time.sleep(600)
    allreduce(comm, torch.ones(1000), algorithm="tree", check=False)


def mismatched(comm):
    return allreduce(comm, torch.ones(10 + comm.rank), algorithm="ring")


def dies_mid_compressed_allreduce(comm, victim, n, pid_dir):
    """A ring allreduce with dynamic_tree on the wire; rank `victim` is killed (SIGKILL) as it
    starts its third send, so the others are blocked half-way through the reduce-scatter."""
    (pid_dir / f"rank{comm.rank}.pid").write_text(str(os.getpid()))
    x = x_for(comm.rank, n)
    allreduce(comm, x, algorithm="ring", codec="dynamic_tree")  # a whole one first
    if comm.rank == victim:  # every exchange goes through one batch (Comm.exchange)
        real, sends = comm._exchange, [0]

        def exchange(snd, rcv):
            sends[0] += len(snd)
            if sends[0] >= 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(snd, rcv)

        comm._exchange = exchange
    return allreduce(comm, x, algorithm="ring", codec="dynamic_tree")


def live_children(pid: int | None = None) -> list[int]:
    """Live (non-zombie) child processes of `pid` (default: this process), from /proc: what a
    run of ranks may leave behind. Unlike `pgrep -f lab.comm.launch`, blind to other users' runs.
    This process's warm launch servers (lab.comm.launch.servers(), kept on purpose) are looked
    through: their children count, they do not."""
    from lab.comm.launch import servers

    if pid is not None:
        return _children(pid)
    warm = set(servers())
    return [c for child in _children(os.getpid()) for c in (_children(child) if child in warm else [child])]


def launched_children() -> list[int]:
    """`live_children()` that are the lab's own: launcher processes (zygotes, ranks) and `python -m lab` CLI runs.
    A worker's other children (the browser tests' Streamlit server and Chromium, a notebook kernel) are not a run's
    leftovers."""
    def ours(pid: int) -> bool:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"lab.comm.launch" in cmd or b"-m\x00lab\x00" in cmd
    return [p for p in live_children() if ours(p)]


def proc_stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command's closing parenthesis (proc(5)): state, ppid, ...; utime and
    stime (clock ticks) at 11 and 12. Raises OSError once the process is gone."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                state, ppid = proc_stat(int(d.name))[:2]
            except (OSError, ValueError):
                continue
            if int(ppid) == pid and state != "Z":
                out.append(int(d.name))
    return out


def alive(pid: int) -> bool:
    """True while process `pid` runs (a zombie counts as gone)."""
    try:
        return proc_stat(pid)[0] != "Z"
    except OSError:
        return False
