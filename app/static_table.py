"""A result table as static HTML in a markdown element: Streamlit's table look, each header's meaning in its
tooltip, numbers rounded for reading with the exact value on hover. Drawing one costs a new tab ~0.05 s where
`st.dataframe`'s data grid costs ~0.5 s on a 2-core machine (measured by bench/app_browser.py). `read` turns
the HTML back into a DataFrame (the tests and bench/app_render.py use it through `tables`)."""
from __future__ import annotations

import math
from html import escape
from html.parser import HTMLParser
from typing import Any, Mapping

import pandas as pd

CLASS = "paralab-table"
SCROLL_ROWS = 15  # longer tables scroll inside a box


def _text(s: Any) -> str:
    return escape(str(s)).replace("$", "&#36;").replace("\n", "<br>")  # `$` would start TeX in markdown


def _cell(v: Any, fmt: str | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "<td></td>"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"<td>{_text(v)}</td>"
    if fmt == "percent":
        shown = f"{100 * v:.3g} %"
    elif fmt:
        shown = fmt % v
    else:
        shown = f"{v:.4g}" if isinstance(v, float) else str(v)
    return f'<td title="{v!r}" style="text-align:right">{_text(shown)}</td>'


def html(df: pd.DataFrame, help: Mapping[str, str] | None = None, formats: Mapping[str, str] | None = None) -> str:
    """`df` (its index dropped) as one HTML table. `help`: column -> tooltip; `formats`: column -> printf
    format ('%.3g') or 'percent' (fractions shown as %); floats default to 4 significant digits."""
    help, formats = help or {}, formats or {}
    head = "".join(
        f'<th title="{escape(help[c])}" style="text-decoration:underline dotted;cursor:help">{_text(c)}</th>'
        if help.get(c) else f"<th>{_text(c)}</th>" for c in df.columns)
    cols = list(df.columns)
    rows = "".join("<tr>" + "".join(_cell(v.item() if hasattr(v, "item") else v, formats.get(c))
                                    for c, v in zip(cols, r)) + "</tr>" for r in df.itertuples(index=False))
    table = f'<table class="{CLASS}"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
    # a wide table scrolls sideways inside its box (never the page, also in an 800 px window); a long one downwards
    tall = "max-height:30rem;" if len(df) > SCROLL_ROWS else ""
    return f'<div class="{CLASS}-box" style="{tall}overflow:auto;max-width:100%">{table}</div>'



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

