"""The Transfer page's words, computed from the numbers it draws (Dettmers 2016 §3.3, Figure 2): each codec's
verdict against 32-bit, its cost per value beside the link time it saves, and, for codec speeds measured here,
the spread of the timings: each median's 95 % interval (a verdict the interval does not settle says "within
noise"). Used by
app/views/transfer.py; every function reads the page's model tables, so no sentence can contradict the chart."""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

PAPER = ("Paper (Figure 2, two GTX Titans on PCIe 3): 8-bit is slower below ~50,000 values, about 2x faster "
         "above 250,000; 1-bit 10-20 % faster than 8-bit above 300,000.")


@dataclass(frozen=True)
class Models:
    """One `transfer_model` table (`mid`) and, for codec speeds measured here, the same model with every codec
    at the fast (`fast`) and slow (`slow`) end of its timing's 95 % interval: the spread of each number shown."""
    mid: pd.DataFrame
    fast: pd.DataFrame | None = None
    slow: pd.DataFrame | None = None

    @property
    def spread(self) -> bool:
        return self.fast is not None and self.slow is not None

    def codecs(self) -> list[str]:
        """The compressed lines, in the order chosen (fp32 left out)."""
        return [c for c in self.mid.attrs["breakeven"]]


def short(codec: str) -> str:
    """'dynamic_tree[nearest,tensor]' -> 'dynamic_tree'."""
    return codec.split("[")[0]


def count(v: float) -> str:
    """A number of values in words: '16.8 million', '250,000'."""
    return f"{v / 1e6:.3g} million" if v >= 1e6 else f"{int(v):,}"


def counts(vs: list[int]) -> str:
    """Sizes in words: '256', '256 and 4,096', '256, 4,096 and 65,536'."""
    w = [count(v) for v in vs]
    return w[0] if len(w) == 1 else ", ".join(w[:-1]) + " and " + w[-1]


def about(v: int) -> str:
    """A crossover size to two significant figures ('about 53,000'; 'any size' at 1 value)."""
    return "any size" if v <= 1 else f"about {count(float(f'{v:.2g}'))}"


def ns(v: float) -> str:
    """ns per value for reading: '0.57', '1.5', '32', '614'."""
    return f"{v:,.0f}" if v >= 10 else f"{v:.2g}"


def wins(b: int | None) -> str:
    """A breakeven size (None: never faster) as a verdict: 'never wins', 'wins from about 53,000 values'."""
    return "never wins" if b is None else "wins at any size" if b <= 1 else f"wins from {about(b)} values"


def verdict(m: Models, codec: str) -> str:
    """`codec`'s verdict against 32-bit on the page's link; with measured speeds, what the spread of its timing
    leaves open ('within noise (...)' when the two ends of its interval disagree on whether it wins)."""
    mid = wins(m.mid.attrs["breakeven"][codec])
    if not m.spread:
        return mid
    bf, bs = m.fast.attrs["breakeven"][codec], m.slow.attrs["breakeven"][codec]
    if (bf is None) != (bs is None):
        fast, slow = (v.replace("wins ", "") if v != "never wins" else "never" for v in (wins(bf), wins(bs)))
        return f"within noise (wins {fast} at the fast end of its 95 % interval, {slow} at the slow end)"
    if bf is not None and about(bf) != about(bs) and max(bf, bs) >= m.mid.n_values.min():  # visible on the chart
        lo, hi = (about(b).replace("about ", "") for b in (bf, bs))
        return f"{mid} ({lo} to {hi} over its timing's interval)"
    return mid


def speedup(m: Models, codec: str, n: int | None = None) -> tuple[float, float, float]:
    """(median, low, high) speedup of `codec` over 32-bit at n values (default: the largest size drawn); low and
    high equal the median without measured speeds."""
    n = int(m.mid.n_values.max()) if n is None else n

    def at(df: pd.DataFrame) -> float:
        return float(df[(df.codec == codec) & (df.n_values == n)].speedup_vs_fp32.iloc[0])
    mid = at(m.mid)
    return (mid, at(m.slow), at(m.fast)) if m.spread else (mid, mid, mid)


def times(s: tuple[float, float, float]) -> str:
    """'2.15x', or '0.09x (0.08–0.10)' with a spread (low–high)."""
    mid, lo, hi = s
    return f"{mid:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{mid:.2f}x ({lo:.2f}–{hi:.2f})"


def ranking(m: Models) -> tuple[str, list[str], bool]:
    """The fastest codec at the largest size (by median), the codecs whose speedup spread overlaps its own (within
    noise of it), and whether its own spread straddles 1x (within noise of 32-bit)."""
    sp = {c: speedup(m, c) for c in m.codecs()}
    top = max(sp, key=lambda c: sp[c][0])
    tied = [c for c in sp if c != top and sp[c][2] >= sp[top][1]]
    return top, tied, sp[top][1] < 1 < sp[top][2]


def fastest_words(m: Models) -> str:
    """Which is fastest at the largest size, as the spread supports it."""
    top, tied, straddles = ranking(m)
    s = speedup(m, top)
    head = (f"{short(top)} is the fastest at {count(m.mid.n_values.max())} values, "
            + (f"{times(s)} faster than 32-bit" if s[0] >= 1 else f"yet slower than 32-bit ({times(s)} its speed)"))
    if tied:
        head += (" (within noise of " + " and ".join(short(c) for c in tied)
                 + ": their speedups' spreads overlap, so these timings cannot rank them)")
    if straddles:
        head += "; whether it beats 32-bit is within noise (its spread spans 1x)"
    return head


def takeaway(m: Models, link_label: str, kernel_note: str) -> str:
    """The page's takeaway: the fastest codec and every codec's verdict on this link."""
    return (f"On {link_label} with {kernel_note}, {fastest_words(m)}; "
            + "; ".join(f"{short(c)} {verdict(m, c)}" for c in m.codecs()) + ".")


def launch_us(m: Models, codec: str) -> float:
    """`codec`'s fixed kernel time per message, µs (`launch_us` is keyed by the chosen spec, in the same order)."""
    return dict(zip(m.codecs(), m.mid.attrs["launch_us"].values())).get(codec, 0.0)


def cost_sentence(m: Models, codec: str, link_label: str) -> str:
    """Why `codec` wins or not on this link, per value: the link time 32-bit spends, what the codec saves of it,
    what its encode + decode costs (with the spread of its timings) and its fixed kernel time per message."""
    pv = m.mid.attrs["per_value_ns"]
    w32, saved, c = pv["fp32"]["wire"], pv["fp32"]["wire"] - pv[codec]["wire"], pv[codec]["codec"]
    launch = launch_us(m, codec)
    cost = f"{ns(c)} ns"
    if m.spread:
        lo, hi = m.fast.attrs["per_value_ns"][codec]["codec"], m.slow.attrs["per_value_ns"][codec]["codec"]
        cost += f" (95 % interval {ns(lo)}–{ns(hi)})"
    text = (f"On {link_label} 32-bit spends {ns(w32)} ns per value on the wire; {short(codec)} saves {ns(saved)} ns "
            f"of it and its encode + decode costs {cost} per value"
            + (f", plus {launch:.3g} µs of kernel launches per message" if launch > 0 else ""))
    gbps = 4.0 / w32  # 4 bytes per value / ns per value = GB/s
    need = saved * gbps / c if c > 0 else float("inf")  # the bandwidth below which the saving beats the codec time
    v = verdict(m, codec)
    if v.startswith("within noise"):
        return text + f": within noise — the {ns(saved)} ns it saves lies inside that interval."
    if c >= saved:
        return (text + f", so on {link_label} it never wins; it would on a link slower than {need:.3g} GB/s "
                f"({link_label} moves {gbps:.3g} GB/s).")
    return text + f", so it {v} on {link_label}" + (
        f" (on any link slower than {need:.3g} GB/s it wins on large messages)." if need != float("inf") else ".")


def noise_pairs(m: Models) -> list[tuple[str, str]]:
    """Pairs of codecs whose measured encode + decode intervals overlap: their speeds are not separable here."""
    if not m.spread:
        return []
    cs = m.codecs()
    rng = {c: (m.fast.attrs["per_value_ns"][c]["codec"], m.slow.attrs["per_value_ns"][c]["codec"]) for c in cs}
    return [(a, b) for i, a in enumerate(cs) for b in cs[i + 1:] if rng[a][0] <= rng[b][1] and rng[b][0] <= rng[a][1]]


def speed_table(m: Models, med: dict, rng: dict) -> pd.DataFrame:
    """The measured codec speeds, one row per codec: the median and its 95 % interval of encode, decode and their
    sum (ns per value), the link time it saves per value and the verdict the interval supports. `med`, `rng`:
    `transfer_model`'s measured `codec_ns` and `codec_ns_range` (keyed by the chosen spec, in the chart's order)."""
    pv = m.mid.attrs["per_value_ns"]
    rows = []
    for spec, codec in zip(med, m.codecs()):
        (e, d), ((e0, e1), (d0, d1)) = med[spec], rng[spec]
        total = (m.fast.attrs["per_value_ns"][codec]["codec"], m.slow.attrs["per_value_ns"][codec]["codec"])
        saved = pv["fp32"]["wire"] - pv[codec]["wire"]
        rows.append({"Codec": short(codec),
                     "Encode (ns/value)": f"{ns(e)} ({ns(e0)}–{ns(e1)})",
                     "Decode (ns/value)": f"{ns(d)} ({ns(d0)}–{ns(d1)})",
                     "Both (ns/value)": f"{ns(e + d)} ({ns(total[0])}–{ns(total[1])})",
                     "Saved on link (ns/value)": ns(saved),
                     "Large messages": ("within noise" if total[0] < saved < total[1] else
                                        "wins" if e + d < saved else "loses")})
    return pd.DataFrame(rows)


def noise_words(m: Models) -> str:
    """Which codecs' encode + decode times are within noise of each other (their 95 % intervals overlap)."""
    pairs = noise_pairs(m)
    if len(m.codecs()) < 2:
        return ""
    if not pairs:
        return "Every codec's encode + decode interval is apart from the others': their order here is beyond noise."
    return ("Within noise of each other (their encode + decode intervals overlap, so these timings cannot say which "
            "is faster): " + "; ".join(f"{short(a)} and {short(b)}" for a, b in pairs) + ".")


def callout(m: Models, at250: Models, mode: str, arg, link_label: str) -> str:
    """Paper vs here for Figure 2: the paper's claims, this model's 8-bit and 1-bit numbers (with their spread),
    why they differ, computed from the same tables as the chart."""
    even = m.mid.attrs["breakeven"]
    eight = next((c for c in even if c.startswith(("dynamic_tree", "linear"))), None)
    one = next((c for c in even if c.startswith("onebit")), None)
    here = []
    if eight is not None:
        here.append(f"8-bit {verdict(m, eight).replace('wins', 'beats 32-bit', 1)} and is "
                    f"{times(speedup(at250, eight, 250_000))} at 250,000")
    ratio = None
    if eight is not None and one is not None:
        ratio = speedup(m, one)[0] / speedup(m, eight)[0]
        here.append(f"1-bit is {ratio:.2f}x 8-bit at {count(m.mid.n_values.max())} values")
    ours = "; ".join(here) if here else "pick dynamic_tree and onebit to compare with the paper's curves"
    focus = eight or ranking(m)[0]
    why = cost_sentence(m, focus, link_label)
    if mode == "kernel" and arg == "gtx_titan" and link_label == "pcie3":
        fixed = launch_us(m, focus)
        b = even[focus]
        why += (" This is the paper's link (PCIe 3, 7 GB/s) and GPU (GTX Titan), its codec kernels modelled as "
                "memory-bound plus ~7 µs per kernel launch (an assumption of lab.plan's gtx_titan preset: the paper "
                f"gives no launch time). That fixed {fixed:.3g} µs is what "
                + (f"only messages above {about(b).replace('about ', '~')} values repay." if b and b > 1 else
                   "the saving never repays." if b is None else "the saving repays at any size."))
        if ratio is not None and ratio > 1.2:
            why += (f" Our 1-bit is {ratio:.2f}x 8-bit because its kernels are modelled memory-bound too; the paper "
                    "measured it only 10-20 % faster than 8-bit, so its 1-bit kernels were slower than that.")
    elif mode in ("ns", "custom"):
        why += (" With a cost per value and no fixed kernel time, compression wins at every size or at none. "
                "The paper's curve needs fast kernels with a fixed launch cost: choose 'GPU: gtx_titan (paper's)' "
                "(the Figure 2 preset).")
    elif mode == "measured":
        why += (" These codec speeds were timed on this device's CPU (medians, with their 95 % intervals); the "
                "paper's GPU kernels cost ~0.02 ns per value plus launches.")
    else:
        why += (f" The same model with {arg}'s kernels: a faster GPU shortens the codec's time and a faster link "
                "shrinks what compression saves; the crossover moves with their ratio.")
    return f"{PAPER} Here: {ours}. {why}"
