"""A result table as static HTML in a markdown element: Streamlit's table look, each header's meaning in its
tooltip, numbers written as people write them (no exponents, thousands separated, yes/no) with the exact value
on hover. `people` turns a result's columns into a table for people: human headers with units, the main
columns by default and every column on request. Drawing one costs a new tab ~0.05 s where
`st.dataframe`'s data grid costs ~0.5 s on a 2-core machine (measured by bench/app_browser.py). `read` turns
the HTML back into a DataFrame (the tests and bench/app_render.py use it through `tables`)."""
from __future__ import annotations

import math
import re
from html import escape
from html.parser import HTMLParser
from typing import Any, Mapping, NamedTuple, Sequence

import pandas as pd

CLASS = "paralab-table"
SCROLL_ROWS = 15  # longer tables scroll inside a box


def _text(s: Any) -> str:
    return escape(str(s)).replace("$", "&#36;").replace("\n", "<br>")  # `$` would start TeX in markdown


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
_EXPONENT = re.compile(r"([-+]?)(\d+(?:\.\d*)?)[eE]([-+]?\d+)")


def _no_exponent(m: re.Match) -> str:
    """'2.64e+05' -> '264000'; beyond 10¹⁵ or below 10⁻⁴ the way papers write it: '1.5×10⁻⁵'."""
    sign, mantissa, e = m.group(1), m.group(2), int(m.group(3))
    if not -4 <= e < 15:
        return f"{sign}{mantissa}×10{str(e).translate(_SUPERSCRIPT)}"
    decimals = len(mantissa.partition(".")[2]) - e
    return f"{float(m.group(0)):.{max(0, decimals)}f}"


def number_text(v: int | float, fmt: str | None = None, group: int = 5) -> str:
    """`v` as people write it: `fmt` (a printf format, 'percent' for a fraction shown in %, None: 4 significant
    digits, whole numbers from 10,000) with no exponent (263,712 not 2.637e+05; 1.5×10⁻⁵ below 10⁻⁴ and
    1.165×10¹⁷ from 10¹⁵), thousands separated in an integer part of `group` digits or more, ∞ for infinity."""
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if fmt == "percent":
        return number_text(100 * v, "%.3g", group) + " %"
    if fmt:
        shown = fmt % v
    elif abs(v) >= 1e15 or isinstance(v, float) and abs(v) < 1e4:
        shown = f"{v:.4g}"
    else:
        shown = f"{v:.0f}"  # 263712, not 263700
    shown = _EXPONENT.sub(_no_exponent, shown)
    return re.sub(rf"(?<![\d.,])\d{{{group},}}", lambda d: f"{int(d.group(0)):,}", shown)


def _group(col: pd.Series) -> int:
    """Digits from which a column's numbers are grouped by thousands: 4 where one of them reaches 10,000 (so
    5,566 stands beside 11,504), else 5."""
    big = any(isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and 1e4 <= abs(v) < 1e15
              for v in col)
    return 4 if big else 5


def _cell(v: Any, fmt: str | None, group: int = 5) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "<td></td>"
    if isinstance(v, bool):
        return f"<td>{'yes' if v else 'no'}</td>"
    if not isinstance(v, (int, float)):
        return f"<td>{_text(v)}</td>"
    return f'<td title="{v!r}" style="text-align:right">{_text(number_text(v, fmt, group))}</td>'


def html(df: pd.DataFrame, help: Mapping[str, str] | None = None, formats: Mapping[str, str] | None = None) -> str:
    """`df` (its index dropped) as one HTML table. `help`: column -> tooltip; `formats`: column -> printf
    format ('%.3g') or 'percent' (fractions shown as %); floats default to 4 significant digits; every number is
    written by `number_text`, True/False as yes/no."""
    help, formats = help or {}, formats or {}
    head = "".join(
        f'<th title="{escape(help[c])}" style="text-decoration:underline dotted;cursor:help">{_text(c)}</th>'
        if help.get(c) else f"<th>{_text(c)}</th>" for c in df.columns)
    cols = list(df.columns)
    groups = [_group(df.iloc[:, i]) for i in range(len(cols))]
    rows = "".join("<tr>" + "".join(_cell(v.item() if hasattr(v, "item") else v, formats.get(c), g)
                                    for c, g, v in zip(cols, groups, r)) + "</tr>" for r in df.itertuples(index=False))
    table = f'<table class="{CLASS}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    # a wide table scrolls sideways inside its box (never the page, also in an 800 px window); a long one downwards
    tall = "max-height:30rem;" if len(df) > SCROLL_ROWS else ""
    return f'<div class="{CLASS}-box" style="{tall}overflow:auto;max-width:100%">{table}</div>'


class Col(NamedTuple):
    """How a result's column reads in a table for people: its header, its unit (shown in brackets; BYTES picks
    B, kB, MB or GB from the column's largest value), the header's tooltip, a factor for its values (s -> ms:
    1e3) and a printf format (None: `number_text`'s default)."""

    header: str
    unit: str = ""
    help: str = ""
    scale: float = 1.0
    format: str | None = None


BYTES = "bytes"
_UNITS = {"ms": "ms", "s": "s", "us": "µs", "ns": "ns", "B": "B", "kB": "kB", "KB": "kB", "MB": "MB", "GB": "GB",
          "GBps": "GB/s", "MBps": "MB/s", "pct": "%", "bytes": "B"}


def human_header(name: str) -> str:
    """A column name as a header: 'exposed_comm_ms' -> 'Exposed comm (ms)' (the last word a unit), for the
    columns a table shows without a `Col`."""
    words = name.split("_")
    if len(words) > 2 and words[-2] == "per" and words[-1] == "s":  # images_per_s
        words[-1] = "second"
    unit = _UNITS.get(words[-1]) if len(words) > 1 and words[-2] != "per" else None
    words = words[:-1] if unit else words
    text = " ".join(words)
    text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text


def _col(name: Any, columns: Mapping[str, Col | tuple]) -> Col:
    v = columns.get(name)
    return Col(human_header(str(name))) if v is None else v if isinstance(v, Col) else Col(*v)


def header(name: Any, columns: Mapping[str, Col | tuple]) -> str:
    """The header `people` gives column `name` (without its unit)."""
    return _col(name, columns).header


def _bytes_unit(col: pd.Series) -> tuple[str, float]:
    top = max((abs(float(v)) for v in col if isinstance(v, (int, float)) and v == v), default=0.0)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if top >= 10 * size:
            return unit, 1 / size
    return "B", 1.0


def people(df: pd.DataFrame, columns: Mapping[str, Col | tuple], default: Sequence[str] | None = None,
           every: bool = False) -> tuple[pd.DataFrame, dict[str, str], dict[str, str]]:
    """`df` for people: the `default` columns (None: the keys of `columns` found in `df`), with `every` then
    every other column of `df`, each headed 'Header (unit)' by its `Col` (`human_header` without one) and its
    values scaled. Returns the table, the headers' tooltips and their formats (for `html`)."""
    keep = [c for c in (columns if default is None else default) if c in df.columns]
    if every:
        keep += [c for c in df.columns if c not in keep]
    shown, tips, formats = pd.DataFrame(index=df.index), {}, {}
    for c in keep:
        col = _col(c, columns)
        values, unit, scale = df[c], col.unit, col.scale
        if unit == BYTES:
            unit, scale = _bytes_unit(values * col.scale)
            scale *= col.scale
        head = f"{col.header} ({unit})" if unit else col.header
        shown[head] = values * scale if scale != 1 and pd.api.types.is_numeric_dtype(values) else values
        if col.help:
            tips[head] = col.help
        if col.format:
            formats[head] = col.format
    return shown.reset_index(drop=True), tips, formats


def hidden_columns(df: pd.DataFrame, columns: Mapping[str, Any], default: Sequence[str] | None = None) -> list[str]:
    """The columns of `df` that `people` shows only with `every`."""
    keep = set(columns if default is None else default)
    return [c for c in df.columns if c not in keep]


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.head: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._exact: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "tr" and self.head:
            self.rows.append([])
        if tag in ("th", "td"):
            self._cell, self._exact = [], dict(attrs).get("title") if tag == "td" else None

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            text = self._exact if self._exact is not None else "".join(self._cell)
            (self.head if tag == "th" else self.rows[-1]).append(text)
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def read(markup: str) -> pd.DataFrame:
    """The DataFrame a `html` table shows, numbers exact (from each cell's tooltip)."""
    r = _Reader()
    r.feed(markup)
    df = pd.DataFrame(r.rows, columns=r.head)
    for c in df.columns:
        num = pd.to_numeric(df[c].replace("", None), errors="coerce")
        if num.notna().sum() == (df[c] != "").sum():
            df[c] = num
    return df


def tables(at: Any) -> list[pd.DataFrame]:
    """The tables an AppTest run shows, in page order."""
    return [read(m.value) for m in at.markdown if f'class="{CLASS}"' in m.value]

