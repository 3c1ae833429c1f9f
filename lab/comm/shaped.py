"""A bandwidth-limited link, measured, not only modelled.

:class:`ShapedLink` builds P virtual hosts (one Linux network namespace per
rank) plugged into one virtual switch (a bridge living in its own namespace),
and shapes every host's link with ``tc``: a token bucket (``tbf``) caps the rate
in both directions, and, when ``delay_ms > 0``, ``netem`` adds a one-way
latency.  Processes started with :meth:`ShapedLink.command_prefix` run inside a
rank's namespace, so Gloo's TCP traffic between ranks really crosses the slow
link instead of the loopback device.

Nothing touches the host's own network: every interface is created directly
inside a namespace the link owns (the root namespace never holds a link of
ours), and deleting the namespaces deletes every veth and the bridge.

Topology for ``ShapedLink(3)`` (names for prefix ``plab``, pid 4242, instance 0)::

    netns plab-4242-0-0        netns plab-4242-0-sw              netns plab-4242-0-1
    plab0 10.231.0.1/24 <-veth-> plab0p --+                +-- plab1p <-veth-> plab1 10.231.0.2/24
      egress: [netem] + tbf      egress:  |   bridge       | egress: tbf  egress: [netem] + tbf
                                 tbf      +--- plabbr -----+
                                                |
                                              plab2p <-veth-> plab2 10.231.0.3/24 (netns plab-4242-0-2)

A packet from rank a to rank b is shaped twice at the same rate (at a's egress
and at the switch port towards b) and delayed once (at a's egress), so the
host-to-host path has bandwidth ``rate`` and one-way latency ``delay_ms``
(round trip ``2 * delay_ms``); each host's link is full duplex.

Needs root, ``ip`` and ``tc`` (iproute2), and a kernel with veth, bridge,
sch_tbf and, for ``delay_ms > 0``, sch_netem.  See ``docs/shaped_link.md``.
"""
from __future__ import annotations

import atexit
import itertools
import math
import os
import re
import shlex
import shutil
import subprocess
from typing import Sequence

__all__ = ["available", "ShapedLink", "cleanup_stale", "parse_rate"]

SUBNET = "10.231.0"           # rank r gets SUBNET.(r+1)/24
MAX_PROCS = 64
MTU = 1500
_WIRE_FRAME = MTU + 14         # bytes tbf charges for one full-size frame

# tc rate units (see tc(8), "RATES"): bits or bytes per second, SI multipliers.
_RATE_UNITS = {
    "bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
    "bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9, "tbps": 8e12,
}
_RATE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]+)\s*$")
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_counter = itertools.count()


# --------------------------------------------------------------------------- commands

def _run(cmd: Sequence[str]) -> subprocess.CompletedProcess:
    """Run one ``ip``/``tc`` command (never through a shell); raise on failure.

    Tests monkeypatch this to inject failures.
    """
    return subprocess.run(list(cmd), check=True, capture_output=True, text=True, timeout=30)


def _describe(cmd: Sequence[str], err: BaseException) -> str:
    if isinstance(err, subprocess.CalledProcessError):
        stderr = (err.stderr or "").strip() or (err.stdout or "").strip() or "(no output)"
        msg = f"command `{shlex.join(cmd)}` exited {err.returncode}: {stderr}"
        if "netem" in cmd and "unknown" in stderr.lower():
            msg += (" (this kernel lacks the sch_netem qdisc: try `modprobe sch_netem`,"
                    " or use delay_ms=0, which needs only tbf)")
        return msg
    if isinstance(err, FileNotFoundError):
        return f"command `{shlex.join(cmd)}` failed: {cmd[0]!r} not found on PATH"
    if isinstance(err, subprocess.TimeoutExpired):
        return f"command `{shlex.join(cmd)}` timed out after {err.timeout} s"
    return f"command `{shlex.join(cmd)}` failed: {err}"


def _netns_list() -> list[str]:
    out = _run(["ip", "netns", "list"]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _netns_delete(name: str) -> bool:
    """Delete a namespace; True if it was deleted, False if it was already gone."""
    try:
        _run(["ip", "netns", "delete", name])
        return True
    except subprocess.CalledProcessError as err:
        if name not in _netns_list():
            return False
        raise RuntimeError(_describe(["ip", "netns", "delete", name], err)) from None


# --------------------------------------------------------------------------- availability

def available(*, delay: bool = False) -> tuple[bool, str]:
    """Can this process build a shaped link?  ``(True, "")`` or ``(False, reason)``.

    Checks root, ``ip`` and ``tc`` on PATH, and really creates a throwaway
    namespace with a veth pair and a ``tbf`` qdisc (then deletes it).  With
    ``delay=True`` it also checks that the kernel has ``netem`` (needed for
    ``delay_ms > 0``).
    """
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "needs root (network namespaces and tc need CAP_NET_ADMIN)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` (iproute2) not found on PATH"
    probe = f"plabprobe-{os.getpid()}-{next(_counter)}"
    steps = [["ip", "netns", "add", probe],
             ["ip", "-n", probe, "link", "add", "pa", "type", "veth", "peer", "name", "pb"],
             ["tc", "-n", probe, "qdisc", "add", "dev", "pa", "root", "tbf",
              "rate", "1gbit", "burst", "64kb", "latency", "50ms"]]
    if delay:
        steps.append(["tc", "-n", probe, "qdisc", "add", "dev", "pb", "root", "netem",
                      "delay", "1ms"])
    made = False
    try:
        for cmd in steps:
            try:
                _run(cmd)
            except (OSError, subprocess.SubprocessError) as err:
                return False, _describe(cmd, err)
            made = True
        return True, ""
    finally:
        if made:
            try:
                _run(["ip", "netns", "delete", probe])
            except (OSError, subprocess.SubprocessError):
                pass


# --------------------------------------------------------------------------- validation

def parse_rate(rate: str) -> float:
    """Parse a tc rate such as ``'100mbit'``, ``'2.5gbit'`` or ``'10mbps'``; return bits/s."""
    units = ", ".join(_RATE_UNITS)
    if not isinstance(rate, str):
        raise ValueError(f"rate must be a string such as '100mbit' or '1gbit', got {rate!r}")
    m = _RATE_RE.match(rate.lower())
    if not m or m.group(2) not in _RATE_UNITS:
        raise ValueError(
            f"bad rate {rate!r}: expected a number and a tc unit, e.g. '100mbit', '1gbit', "
            f"'2.5gbit'; allowed units: {units} ('bit' units are bits/s, 'bps' units are "
            "bytes/s, SI multipliers)")
    value = float(m.group(1)) * _RATE_UNITS[m.group(2)]
    if value < 8 * _WIRE_FRAME:
        raise ValueError(f"bad rate {rate!r}: must be positive and at least "
                         f"{8 * _WIRE_FRAME}bit (one full frame per second)")
    if value > 100e9:
        raise ValueError(f"bad rate {rate!r}: above 100gbit is not a slow link (veth tops out "
                         "far below that)")
    return value


# --------------------------------------------------------------------------- the link

class ShapedLink:
    """P hosts (one netns per rank) on one virtual switch; every host's link shaped
    to ``rate`` with one-way ``delay_ms``.

    ``delay_ms`` is the one-way host-to-host latency (added once, at the
    sender's egress), so a TCP handshake between two ranks takes ``2*delay_ms``.
    ``burst_bytes`` is the tbf bucket (default: 1 ms of line rate, at least 8 KiB).
    ``ranks_per_node=k`` makes it two-level: ranks jk..jk+k−1 share host j (one namespace, one
    shaped link to the switch), so ranks of a node talk over that namespace's loopback at memory
    speed and every byte between nodes crosses the node's one shaped link, as on a cluster whose
    nodes have one NIC each (``namespace``/``address``/``interface`` of a rank are its host's).

    Use as a context manager::

        with ShapedLink(4, rate="100mbit", delay_ms=1) as link:
            subprocess.run(link.command_prefix(0) + [sys.executable, "worker.py"],
                           env={**os.environ, **link.env(0)})
    """

    def __init__(self, procs: int, *, rate: str = "1gbit", delay_ms: float = 0.0,
                 prefix: str = "plab", burst_bytes: int | None = None, ranks_per_node: int = 1) -> None:
        if isinstance(procs, bool) or not isinstance(procs, int):
            raise ValueError(f"procs must be an int in 1..{MAX_PROCS}, got {procs!r}")
        if not 1 <= procs <= MAX_PROCS:
            raise ValueError(f"procs must be in 1..{MAX_PROCS} (one /24 subnet, one "
                             f"namespace each), got {procs}")
        self.rate_bits = parse_rate(rate)
        if isinstance(delay_ms, bool) or not isinstance(delay_ms, (int, float)) \
                or not math.isfinite(delay_ms) or delay_ms < 0:
            raise ValueError(f"delay_ms must be a finite number >= 0 (one-way latency in "
                             f"milliseconds), got {delay_ms!r}")
        if delay_ms > 10_000:
            raise ValueError(f"delay_ms must be at most 10000 (10 s), got {delay_ms!r}")
        if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
            raise ValueError(f"prefix must be 1-8 characters, a lowercase letter then "
                             f"lowercase letters or digits (it is part of interface names, "
                             f"which Linux limits to 15 characters), got {prefix!r}")
        rate_bytes = self.rate_bits / 8
        if burst_bytes is None:
            burst_bytes = max(8192, int(rate_bytes / 1000))
        if isinstance(burst_bytes, bool) or not isinstance(burst_bytes, int) \
                or burst_bytes < _WIRE_FRAME:
            raise ValueError(f"burst_bytes must be an int >= {_WIRE_FRAME} (one full "
                             f"Ethernet frame), got {burst_bytes!r}")
        if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 1 \
                or procs % ranks_per_node:
            raise ValueError(f"ranks_per_node={ranks_per_node!r} must divide procs={procs}; allowed: "
                             + ", ".join(str(d) for d in range(1, procs + 1) if procs % d == 0))
        self.procs = procs
        #: ranks sharing one host (namespace): they talk over its loopback, unshaped; hosts talk
        #: over the shaped links (two-level: "fast inside a node, shaped between nodes")
        self.ranks_per_node = ranks_per_node
        self.hosts = procs // ranks_per_node
        self.rate = rate.strip().lower()
        self.delay_ms = float(delay_ms)
        self.prefix = prefix
        self.burst_bytes = burst_bytes
        # tbf queue: at least 50 ms, and room for a few round trips when delayed.
        self.queue_ms = max(50.0, 4 * self.delay_ms)
        self.tag = f"{prefix}-{os.getpid()}-{next(_counter)}"
        self.commands: list[list[str]] = []    # every command setup() ran, in order
        self._made: list[str] = []             # namespaces created, in order
        self._up = False

    # ----------------------------------------------------------------- names
    def _check_rank(self, rank: int) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.procs:
            raise ValueError(f"rank must be an int in 0..{self.procs - 1}, got {rank!r}")
        return rank // self.ranks_per_node  # the rank's host

    @property
    def switch_namespace(self) -> str:
        return f"{self.tag}-sw"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def namespaces(self) -> list[str]:
        """Every namespace this link owns: the ranks', then the switch's."""
        return [self.namespace(h * self.ranks_per_node) for h in range(self.hosts)] + [self.switch_namespace]

    def namespace(self, rank: int) -> str:
        return f"{self.tag}-{self._check_rank(rank)}"

    def address(self, rank: int) -> str:
        return f"{SUBNET}.{self._check_rank(rank) + 1}"

    def interface(self, rank: int) -> str:
        return f"{self.prefix}{self._check_rank(rank)}"

    def port(self, rank: int) -> str:
        """The switch-side end of rank's veth pair (inside the switch namespace)."""
        return f"{self.prefix}{self._check_rank(rank)}p"

    def command_prefix(self, rank: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(rank)]

    def netns_file(self, rank: int) -> str:
        """The file `ip netns add` made for rank's namespace: a forked process joins it with setns(2)
        (lab.comm.launch's ranks do, instead of a fresh `command_prefix` process each)."""
        return f"/run/netns/{self.namespace(rank)}"

    def env(self, rank: int) -> dict[str, str]:
        return {"GLOO_SOCKET_IFNAME": self.interface(rank), "MASTER_ADDR": self.address(0)}

    # ----------------------------------------------------------------- commands
    def _tbf(self, ns: str, dev: str, parent: list[str]) -> list[str]:
        return ["tc", "-n", ns, "qdisc", "add", "dev", dev, *parent, "tbf",
                "rate", self.rate, "burst", str(self.burst_bytes),
                "latency", f"{self.queue_ms:g}ms"]

    def _netem_limit(self) -> int:
        """netem's queue (packets) must hold everything in flight during the delay."""
        in_flight = self.rate_bits / 8 * self.delay_ms / 1000 / _WIRE_FRAME
        return max(1000, int(4 * in_flight) + 100)

    def setup_commands(self) -> list[list[str]]:
        """The exact commands :meth:`setup` runs, in order (also for doing it by hand)."""
        sw, br = self.switch_namespace, self.bridge
        cmds = [["ip", "netns", "add", sw],
                ["ip", "-n", sw, "link", "add", br, "type", "bridge"],
                ["ip", "-n", sw, "link", "set", br, "up"]]
        for r in range(0, self.procs, self.ranks_per_node):  # one host per node
            ns, dev, port = self.namespace(r), self.interface(r), self.port(r)
            cmds += [
                ["ip", "netns", "add", ns],
                ["ip", "-n", ns, "link", "add", dev, "mtu", str(MTU), "type", "veth",
                 "peer", "name", port, "netns", sw],
                ["ip", "-n", ns, "addr", "add", f"{self.address(r)}/24", "dev", dev],
                ["ip", "-n", ns, "link", "set", "lo", "up"],
                ["ip", "-n", ns, "link", "set", dev, "up"],
                ["ip", "-n", sw, "link", "set", port, "master", br],
                ["ip", "-n", sw, "link", "set", port, "up"],
            ]
            if self.delay_ms > 0:
                cmds += [
                    ["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:",
                     "netem", "delay", f"{self.delay_ms:g}ms",
                     "limit", str(self._netem_limit())],
                    self._tbf(ns, dev, ["parent", "1:1", "handle", "10:"]),
                ]
            else:
                cmds.append(self._tbf(ns, dev, ["root", "handle", "10:"]))
            cmds.append(self._tbf(sw, port, ["root", "handle", "10:"]))
        return cmds

    def teardown_commands(self) -> list[list[str]]:
        """Rank namespaces first (that deletes both ends of each veth), then the switch."""
        return [["ip", "netns", "delete", ns] for ns in self.namespaces]

    # ----------------------------------------------------------------- life cycle
    def setup(self) -> None:
        if self._up:
            raise RuntimeError(f"shaped link {self.tag} is already set up")
        try:
            taken = set(_netns_list()) & set(self.namespaces)
        except (OSError, subprocess.SubprocessError) as err:
            raise RuntimeError("shaped link setup failed: "
                               + _describe(["ip", "netns", "list"], err)) from None
        if taken:
            raise RuntimeError(f"namespaces already exist: {sorted(taken)}")
        atexit.register(self.teardown)
        self._up = True
        try:
            for cmd in self.setup_commands():
                try:
                    _run(cmd)
                except (OSError, subprocess.SubprocessError) as err:
                    raise RuntimeError("shaped link setup failed: " + _describe(cmd, err)) \
                        from None
                self.commands.append(cmd)
                if cmd[:3] == ["ip", "netns", "add"]:
                    self._made.append(cmd[3])
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> None:
        """Delete every namespace this link made (idempotent; safe after a failed setup)."""
        if not self._up:
            return
        self._up = False
        atexit.unregister(self.teardown)
        errors = []
        mine = set(self._made)
        try:   # also catch a namespace whose `ip netns add` failed half-way
            mine |= set(_netns_list()) & set(self.namespaces)
        except (OSError, subprocess.SubprocessError):
            pass
        # Ranks first (deleting one deletes both ends of its veth), the switch last.
        for ns in [n for n in self.namespaces if n in mine]:
            try:
                _netns_delete(ns)
            except (RuntimeError, OSError, subprocess.SubprocessError) as err:
                errors.append(str(err))
        self._made.clear()
        if errors:
            raise RuntimeError("shaped link teardown failed: " + "; ".join(errors))

    def __enter__(self) -> "ShapedLink":
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def __repr__(self) -> str:
        return (f"ShapedLink(procs={self.procs}, ranks_per_node={self.ranks_per_node}, rate={self.rate!r}, "
                f"delay_ms={self.delay_ms:g}, tag={self.tag!r}, up={self._up})")


# --------------------------------------------------------------------------- crash recovery

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale(prefix: str = "plab") -> list[str]:
    """Delete namespaces left by a :class:`ShapedLink` whose creating process is dead.

    Only names of the form ``{prefix}-{pid}-{n}-{rank|sw}`` (and, for the default
    prefix, ``plabprobe-{pid}-{n}`` from :func:`available`) are considered, and only when ``pid`` is no longer alive,
    so links of running processes (e.g. a parallel test run) are left alone.  The
    veth pairs and the bridge live inside those namespaces and vanish with them.
    Returns the deleted namespace names.
    """
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ValueError(f"bad prefix {prefix!r}")
    probe = r"|plabprobe-(\d+)-\d+" if prefix == "plab" else ""
    pattern = re.compile(rf"^(?:{re.escape(prefix)}-(\d+)-\d+-(?:sw|\d+){probe})$")
    removed = []
    # Ranks before switches, as in teardown.
    for name in sorted(_netns_list(), key=lambda n: n.endswith("-sw")):
        m = pattern.match(name)
        if not m:
            continue
        pid = int(m.group(1) or m.group(2))
        if pid == os.getpid() or _pid_alive(pid):
            continue
        if _netns_delete(name):
            removed.append(name)
    return removed
