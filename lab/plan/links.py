"""Links for the planner: `lab.comm.cost`'s presets, the papers' links (`PAPER_LINKS`), a Link, or
the link calibrated by `paralab bench collectives` (its JSON's "fit": latency and bandwidth fitted
to measured allreduces).

`dettmers2016` is Dettmers 2016 §2.3.2's link as the paper computes with it: 7 GB/s read in GiB/s
(his 0.223 "GB" of AlexNet gradients are GiB) and 0.5 ms per message (his "1-2 ms latency per
layer" as 4 tree messages of 0.5 ms). The physical `pcie3` preset is 7e9 B/s with 2 µs per message.
"""
from __future__ import annotations

import json
from pathlib import Path

from lab.comm import cost
from lab.comm.cost import Link


def link_from_bench(path: str | Path) -> Link:
    """The fitted Link stored in a `bench/results/collectives-*.json` file."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read a calibrated link from {p}: {e}") from None
    fit = data.get("fit") if isinstance(data, dict) else None
    if not isinstance(fit, dict) or "latency_s" not in fit or "bandwidth_Bps" not in fit:
        raise ValueError(f"{p} has no fitted link (a 'fit' with latency_s and bandwidth_Bps); "
                         "write one with `paralab bench collectives`")
    return Link(f"fitted:{p.stem}", float(fit["latency_s"]), float(fit["bandwidth_Bps"]),
                f"fitted by paralab bench collectives ({data.get('device', '?')}), {p.name}",
                bool(fit.get("shared", False)))


PAPER_LINKS: dict[str, Link] = {link.name: link for link in (
    Link("dettmers2016", 0.5e-3, 7.0 * 2.0 ** 30,
         "Dettmers 2016 §2.3.2 as the paper computes: 7 GB/s read in GiB/s, 0.5 ms per message (1-2 ms per layer "
         "= 4 tree messages); the physical pcie3 preset has 7e9 B/s and 2 µs"),
)}


def link_presets() -> dict[str, Link]:
    """Every named link: `lab.comm.cost.LINKS` and the papers' links."""
    return {**cost.LINKS, **PAPER_LINKS}


def resolve_link(link: str | Link) -> Link:
    """A Link, a preset name, or the path of a collectives benchmark JSON with a fitted link."""
    if isinstance(link, Link):
        return link
    if isinstance(link, str) and link in link_presets():
        return link_presets()[link]
    if isinstance(link, (str, Path)) and (str(link).endswith(".json") or Path(link).is_file()):
        return link_from_bench(link)
    raise ValueError(f"unknown link {link!r}: give one of the presets {', '.join(link_presets())}, a Link, "
                     "or a collectives benchmark JSON with a fitted link")


__all__ = ["PAPER_LINKS", "link_presets", "link_from_bench", "resolve_link"]
