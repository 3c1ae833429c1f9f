"""Links for the planner: `lab.comm.cost`'s presets, a Link, or the link calibrated by
`paralab bench collectives` (its JSON's "fit": latency and bandwidth fitted to measured allreduces)."""
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


def resolve_link(link: str | Link) -> Link:
    """A Link, a preset name, or the path of a collectives benchmark JSON with a fitted link."""
    if isinstance(link, Link):
        return link
    if isinstance(link, str) and link in cost.LINKS:
        return cost.LINKS[link]
    if isinstance(link, (str, Path)) and (str(link).endswith(".json") or Path(link).is_file()):
        return link_from_bench(link)
    raise ValueError(f"unknown link {link!r}: give one of the presets {', '.join(cost.LINKS)}, a Link, "
                     "or a collectives benchmark JSON with a fitted link")


__all__ = ["link_from_bench", "resolve_link"]
