"""Shared widget helpers for the pages: widgets whose state lives in `st.query_params` (so a URL
reproduces a view), a figure with CSV/JSON downloads, error messages instead of tracebacks, and
Run/Stop buttons for expensive experiments. No experiment logic here (docs/design.md rule 3)."""
from __future__ import annotations

import hashlib
import json
import math
import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import pandas as pd
import streamlit as st

import chart
import static_table
from lab import backend
from lab.backend import Progress
from lab.experiments import USER_ERRORS, check_range, codec_catalog, codec_spec


@st.cache_resource
def device_name() -> str:
    """The device the lab computes on (GPU name or CPU), probed once per server."""
    return backend.device_name()


def widget_key(key: str) -> str:
    return f"w_{key}"


# True inside a closed `folded` expander: the ui widgets there keep their value without being drawn.
_FOLDED: ContextVar[bool] = ContextVar("folded", default=False)


def _value(key: str, draw: Callable[[], Any]) -> Any:
    """The widget's value: `draw()` draws it and returns it; inside a closed `folded` expander it is not drawn
    and keeps its state from the last run it was drawn in, else the URL's, else the default (`_init` has put
    one of them in place)."""
    return st.session_state[widget_key(key)] if _FOLDED.get() else draw()


def _init(key: str, value: Any) -> None:
    """Seed a widget's state from the URL on the first run of this session."""
    if widget_key(key) not in st.session_state:
        st.session_state[widget_key(key)] = value


def sync_url(key: str, value: Any) -> Any:
    """Write a widget's value to the URL, only when it changed (each write is a message to the browser)."""
    if isinstance(value, (list, tuple)):
        new = [str(v) for v in value]
        if st.query_params.get_all(key) != new or key not in st.query_params:
            st.query_params[key] = new
    else:
        new = ("1" if value else "0") if isinstance(value, bool) else str(value)
        if st.query_params.get_all(key) != [new]:
            st.query_params[key] = new
    return value


def from_url(key: str, default: Any, cast: Callable[[str], Any]) -> Any:
    raw = st.query_params.get(key)
    if raw is None:
        return default
    try:
        return cast(raw)
    except (TypeError, ValueError):
        return default


# Messages about out-of-range values of widgets inside a closed `folded` expander: drawn under it (visible), not
# inside it. None outside a folded block.
_PENDING: ContextVar[list | None] = ContextVar("pending", default=None)


def complain(text: str, where=st) -> None:
    """An out-of-range or refused value, said the same way on every page: a red message next to its control
    (`where`), or right under its closed expander when the control is folded away."""
    pending = _PENDING.get()
    if _FOLDED.get() and pending is not None:
        pending.append(text)
    else:
        where.error(text, icon=":material/error:")


def _allowed(options: Sequence[Any]) -> str:
    shown = [str(o) for o in options]
    return ", ".join(shown[:10]) + (f", … ({len(shown)} in all)" if len(shown) > 10 else "")


# A control that does not show what it was given (a link's value it cannot take, a typed number out of range) says
# so beside it, in its own name, for as long as it shows the value it took instead: the message is kept in the
# session beside that value and forgotten once the control shows another (the learner's change, a preset).

def _note_key(key: str) -> str:
    return widget_key(f"{key}__said")  # a widget key: dropped with the page's widgets on arriving elsewhere


def _same(v: Any) -> Any:
    return list(v) if isinstance(v, (list, tuple)) else v


def _note(key: str, shown: Any, text: str) -> None:
    """Keep `text`, why the control `key` shows `shown` rather than what it was given, to say beside it."""
    st.session_state[_note_key(key)] = (_same(shown), text)


def _say(key: str, value: Any, where) -> None:
    """Say the control's kept message (`_note`) beside it while it shows the value the message is about; forget it
    once the control shows another value."""
    note = st.session_state.get(_note_key(key))
    if note is None:
        return
    if note[0] == _same(value):
        complain(note[1], where)
    else:
        del st.session_state[_note_key(key)]


def _refused_url(label: str, key: str, allowed: str, used: Any, shown: str | None = None) -> None:
    """Keep, for saying beside the control, that the URL's value for `key` was not taken and that it shows `used`
    (`shown`: how to write it) instead (first run of a page only: the control then writes its own value back to
    the URL)."""
    if widget_key(key) in st.session_state:
        return
    raw = st.query_params.get_all(key)
    raw = raw[0] if len(raw) == 1 else raw
    _note(key, used, f"{label}: {raw!r} from the link is not allowed; allowed: {allowed}. "
                     f"Showing {used if shown is None else shown}.")


def arrive(url_path: str) -> None:
    """Called by Home before each run with the page it renders. On arriving at another page (sidebar, tour
    step, link) every widget's state is dropped, so the page starts from its URL alone (its defaults, or
    what a tour step or link carries in its query parameters): a page never inherits another page's values
    for the same names (codecs, P, batch, ...). Predictions already scored stay on the scorecard."""
    if st.session_state.get(PAGE) != url_path:
        for k in [k for k in st.session_state if str(k).startswith("w_")]:
            del st.session_state[k]
        st.session_state[PAGE] = url_path


def described(params: dict, labels: dict | None = None) -> str:
    """Settings in words for a caption: `name = value`, lists joined, names in `labels` replaced
    (e.g. `kinds = conventional, RDP (row)` rather than `kinds=['bernoulli', 'row']`), numbers with :g."""
    labels = labels or {}

    def word(v: Any) -> str:
        if isinstance(v, (list, tuple)):
            return ", ".join(word(x) for x in v) or "none"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:g}"
        return str(labels.get(v, v)) if isinstance(v, str) else str(v)
    return ", ".join(f"{k} = {word(v)}" for k, v in params.items() if v not in ("", None))


def set_state(**values: Any) -> None:
    """Preset helper (use in on_click callbacks): set widgets by their query-parameter key."""
    for k, v in values.items():
        st.session_state[widget_key(k)] = v


def select(label: str, options: Sequence[Any], key: str, default: Any, where=st, **kw: Any) -> Any:
    options = list(options)
    cast = (lambda s: type(default)(s)) if default is not None else str
    v = from_url(key, default, cast)
    if key in st.query_params and (v not in options or from_url(key, None, cast) is None):
        _refused_url(label, key, _allowed(options), default)
    _init(key, v if v in options else default)
    v = _value(key, lambda: where.selectbox(label, options, key=widget_key(key), **kw))
    _say(key, v, where)
    return sync_url(key, v)


def radio(label: str, options: Sequence[Any], key: str, default: Any, where=st, **kw: Any) -> Any:
    options = list(options)
    v = from_url(key, default, str)
    if key in st.query_params and v not in options:
        _refused_url(label, key, _allowed(options), default)
    _init(key, v if v in options else default)
    v = _value(key, lambda: where.radio(label, options, key=widget_key(key), horizontal=True, **kw))
    _say(key, v, where)
    return sync_url(key, v)


def multiselect(label: str, options: Sequence[str], key: str, default: Sequence[str], where=st, **kw: Any) -> list:
    options = list(options)
    url = st.query_params.get_all(key)
    chosen = [c for c in url if c in options] if url else list(default)
    if len(chosen) < len(url):
        _refused_url(label, key, _allowed(options), chosen, ", ".join(chosen) or "none")
    _init(key, chosen)
    v = list(_value(key, lambda: where.multiselect(label, options, key=widget_key(key), **kw)))
    _say(key, v, where)
    return sync_url(key, v)


def _range_words(lo: float | None, hi: float | None) -> str:
    return (f"in {lo:g}..{hi:g}" if lo is not None and hi is not None else f">= {lo:g}" if lo is not None
            else f"<= {hi:g}" if hi is not None else "")


def _limits(lo: float | None, hi: float | None) -> str:
    """An allowed range as lab.experiments.check_range words it: `lo..hi`, `>= lo`, `<= hi`."""
    return _range_words(lo, hi).removeprefix("in ") or "any finite number"


def _nearest(x: float, lo: float | None, hi: float | None, whole: bool, default: float | int) -> float | int:
    """The allowed value nearest to `x`: within [lo, hi] and, for a whole-number control, whole (halves round
    up: 1.5 -> 2); `default` for NaN or an infinity with no limit on its side."""
    if whole:
        lo, hi = (None if lo is None else math.ceil(lo)), (None if hi is None else math.floor(hi))
    y = min(max(x, -math.inf if lo is None else lo), math.inf if hi is None else hi)
    if not math.isfinite(y):
        return default
    return math.floor(y + 0.5) if whole else y


def _why_not(label: str, given: str, x: float, lo: float | None, hi: float | None, whole: bool,
             used: float | int) -> str | None:
    """Why a number control does not take `x` (`given`: how it was given, e.g. `'1.5' from the link`) and the
    value it computes with instead; None when `x` is allowed."""
    inside = math.isfinite(x) and (lo is None or x >= lo) and (hi is None or x <= hi)
    fraction = whole and math.isfinite(x) and x != math.floor(x)
    if inside and not fraction:
        return None
    if fraction:
        problem = "is not a whole number" if inside else "is out of range and not a whole number"
        allowed = f"a whole number {_range_words(lo, hi)}".strip()
    else:
        problem, allowed = "is out of range", _limits(lo, hi)
    return f"{label} = {given} {problem}; allowed: {allowed}. Computing with {used:g}, the nearest."


def _from_link(label: str, key: str, default: float | int, lo: float | None, hi: float | None,
               field: type = float) -> None:
    """Put the URL's value of a number control `key` in its state (as `field`, the widget's type) on the page's
    first run: as given when allowed, else the nearest allowed value (the default for a non-number), with a
    message (`_note`) saying why."""
    if widget_key(key) in st.session_state or key not in st.query_params:
        return
    whole = isinstance(default, int)
    raw = st.query_params.get(key)
    try:
        x = float(raw)
    except ValueError:
        st.session_state[widget_key(key)] = field(default)
        _note(key, field(default), f"{label}: {raw!r} from the link is not a number; allowed: "
                                   f"{'a whole number' if whole else 'a number'} {_range_words(lo, hi)}".rstrip()
              + f". Showing {default:g}.")
        return
    used = field(_nearest(x, lo, hi, whole, default))
    said = _why_not(label, f"{raw!r} from the link", x, lo, hi, whole, used)
    st.session_state[widget_key(key)] = used if said else field(x)
    if said:
        _note(key, used, said)


def number(label: str, key: str, default: float | int, where=st, min_value: float | None = None,
           max_value: float | None = None, **kw: Any) -> float | int:
    """A number input whose limits (`min_value`, `max_value`; a whole number when `default` is an int) are checked
    here, not by the widget (which would silently ignore a typed value while the field keeps showing it). A value
    it cannot take, typed or from the link (a fraction for a whole number included), is replaced in the field by
    the nearest allowed value (the default for a non-number) and a message right under the field, in the control's
    own name, says what was given, what is allowed and what the page computes with; it stays while the field
    shows that value. Every other widget still draws and keeps its state."""
    whole = isinstance(default, int)
    cast = int if whole else float
    wk = widget_key(key)
    if whole:  # a field of floats shown without decimals: Streamlit's whole-number field drops what follows a
        # typed decimal point in the browser (2.5 becomes 2, unsaid), so a typed fraction would never reach here
        kw["step"] = float(kw.get("step", 1))
        kw.setdefault("format", "%.0f")
    _from_link(label, key, default, min_value, max_value)
    _init(key, float(default))
    then, args, kwargs = kw.pop("on_change", None), kw.pop("args", ()), kw.pop("kwargs", None)

    def said(v: float) -> tuple[float, str | None]:
        """The value to compute with for `v` and why it is not `v` (None when it is)."""
        used = float(_nearest(float(v), min_value, max_value, whole, default))
        return used, _why_not(label, f"{v:g}" if whole else repr(v), float(v), min_value, max_value, whole, used)

    def typed() -> None:  # a typed value it cannot take: the nearest allowed one in the field, and why
        st.session_state.pop(_note_key(key), None)
        v = st.session_state.get(wk)
        if v is not None:
            used, why = said(v)
            if why:
                st.session_state[wk] = used
                _note(key, used, why)
        if then is not None:
            then(*args, **(kwargs or {}))

    v = _value(key, lambda: where.number_input(label, key=wk, on_change=typed, **kw))
    note = st.session_state.get(_note_key(key))
    if note is None or note[0] != _same(v):  # a value set otherwise (a preset): said, computed with the nearest
        used, why = said(v)
        if why:
            complain(why, where)
            return sync_url(key, cast(used))
    _say(key, v, where)
    return sync_url(key, cast(v))


def slider(label: str, key: str, default: float | int, lo: float | int, hi: float | int, where=st,
           **kw: Any) -> float | int:
    """A slider from `lo` to `hi` (whole numbers when `default` is an int); a link's value it cannot take is said
    as `number` says it."""
    _from_link(label, key, default, lo, hi, type(default))
    _init(key, min(max(default, lo), hi))
    v = _value(key, lambda: where.slider(label, lo, hi, key=widget_key(key), **kw))
    _say(key, v, where)
    return sync_url(key, v)


def range_slider(label: str, key: str, default: tuple[int, int], lo: int, hi: int, where=st, **kw: Any) -> tuple:
    url = st.query_params.get_all(key)
    try:
        v, ok = ((int(url[0]), int(url[1])), True) if len(url) == 2 else (tuple(default), not url)
    except ValueError:
        v, ok = tuple(default), False
    used = (max(lo, min(v)), min(hi, max(v)))
    if not ok or used != (min(v), max(v)):
        _refused_url(label, key, f"two whole numbers in {lo}..{hi}", used, f"{used[0]}..{used[1]}")
    _init(key, used)
    v = tuple(_value(key, lambda: where.slider(label, lo, hi, key=widget_key(key), **kw)))
    _say(key, v, where)
    return tuple(sync_url(key, list(v)))


def select_slider(label: str, options: Sequence[Any], key: str, default: Any, where=st, **kw: Any) -> Any:
    options = list(options)
    v = from_url(key, default, lambda s: type(default)(s))
    if key in st.query_params and (v not in options or from_url(key, None, lambda s: type(default)(s)) is None):
        _refused_url(label, key, _allowed(options), default)
    _init(key, v if v in options else default)
    v = _value(key, lambda: where.select_slider(label, options, key=widget_key(key), **kw))
    _say(key, v, where)
    return sync_url(key, v)


def checkbox(label: str, key: str, default: bool, where=st, **kw: Any) -> bool:
    raw = st.query_params.get(key)
    if raw is not None and raw not in ("0", "1", "true", "false", "True", "False"):
        _refused_url(label, key, "1 (on) or 0 (off)", default, "on" if default else "off")
    _init(key, from_url(key, default, lambda s: s in ("1", "true", "True")) if raw in (None, "0", "1", "true",
          "false", "True", "False") else default)
    v = bool(_value(key, lambda: where.checkbox(label, key=widget_key(key), **kw)))
    _say(key, v, where)
    return sync_url(key, v)


def text(label: str, key: str, default: str, where=st, **kw: Any) -> str:
    _init(key, from_url(key, default, str))
    return sync_url(key, _value(key, lambda: where.text_input(label, key=widget_key(key), **kw)))


EF = "ef:"
DEFAULT = "default"


def _option_start(o: Any) -> float | int:
    """A number input's starting value for an option whose default is None (its range's low end)."""
    lo, hi = o.range or (None, None)
    if o.type is float and lo is not None and hi is not None:
        return float(lo + (hi - lo) / 100)  # e.g. topk's ratio: 1 %
    return o.type(lo if lo is not None else hi if hi is not None else 0)


def codec_options(name: str, key: str, where=st, skip: Sequence[str] = (), **fixed: Any) -> str:
    """Widgets for the options of codec `name` drawn from its registry entry (OptionSpecs): bool ->
    checkbox, choices -> selectbox, int/float -> number input with the option's range checked and its
    help as tooltip, options that may be None -> a 'default' choice. Widget state lives in the URL as
    `<key>.<codec>.<option>`. `skip`: options the page sets itself, given in `fixed`. Returns the spec
    string (`lab.experiments.codec_spec`, defaults left out); `ef:<name>` keeps its error feedback; a
    name the registry does not know (the page's '32-bit') comes back as is. A value out of range is
    a message naming the option and what it takes, and the page stops there."""
    ef = name.startswith(EF)
    base = name[len(EF):] if ef else name
    info = {c.name: c for c in codec_catalog()}.get(base)
    if info is None:
        return name
    shown_opts = [o for o in info.options if o.name not in skip]
    values: dict[str, Any] = dict(fixed)
    cols = where.columns(min(len(shown_opts), 4)) if shown_opts else []
    for i, o in enumerate(shown_opts):
        k, col = f"{key}.{base}.{o.name}", cols[i % len(cols)]
        label, tip = f"{o.name}", f"{o.help} (allowed: {o.allowed()})".strip()
        nullable = o.optional or o.default is None
        if o.type is bool:
            values[o.name] = checkbox(label, k, bool(o.default), where=col, help=tip)
        elif o.choices is not None or (o.type is str and not nullable):
            opts = [*(o.choices or ()), *([DEFAULT] if nullable else [])]
            if o.choices is None:
                values[o.name] = text(label, k, str(o.default), where=col, help=tip)
                continue
            v = select(label, opts, k, DEFAULT if o.default is None else o.default, where=col, help=tip)
            values[o.name] = None if v == DEFAULT else v
        elif o.type in (int, float):
            if nullable and checkbox(f"{o.name}: {DEFAULT}", f"{k}.default", True, where=col,
                                     help=f"leave {o.name} at its default ({o.default})"):
                values[o.name] = None if o.default is None else o.default
                continue
            start = o.default if o.default is not None else _option_start(o)
            lo, hi = o.range or (None, None)
            kw = {"step": 1} if o.type is int else {"format": "%.4g"}
            values[o.name] = number(label, k, o.type(start), where=col, min_value=lo, max_value=hi, help=tip, **kw)
        else:
            values[o.name] = text(label, k, "" if o.default is None else str(o.default), where=col, help=tip)
    try:
        return codec_spec(base, {k: v for k, v in values.items() if v is not None or info.option(k).optional},
                          error_feedback=ef)
    except ValueError as e:
        st.error(f"{name}: {e}")
        st.stop()


def codec_option_specs(names: Sequence[str], key: str, skip: Callable[[str], Sequence[str]] = lambda n: (),
                       fixed: Callable[[str], dict] = lambda n: {}) -> list[str]:
    """The spec string of each chosen codec, its option widgets in an expander 'Codec options' (one
    group per codec, `codec_options`)."""
    specs = []
    with folded("Codec options", f"{key}.options"):
        for name in names:
            st.markdown(f"**{name}**")
            specs.append(codec_options(name, key, skip=skip(name), **fixed(name)))
    return specs


def seed(where=st) -> int:
    """The page's seed (in the URL as `seed`)."""
    return number("Seed", "seed", 0, where=where, min_value=0, step=1)


def figure(fig, data: pd.DataFrame | None, name: str, key: str | None = None) -> None:
    """A plotly figure with its data as CSV and the figure (data + layout) as JSON (both made on the click:
    nothing is serialised or stored per rerun)."""
    chart.plotly(fig, key=key or f"fig_{name}")
    c1, c2, _ = st.columns([1, 1, 2])
    if data is not None:
        c1.download_button("⬇ CSV", lambda: data.to_csv(index=False), f"{name}.csv", "text/csv",
                           key=f"csv_{key or name}", on_click="ignore")
    c2.download_button("⬇ JSON", fig.to_json, f"{name}.json", "application/json",
                       key=f"json_{key or name}", on_click="ignore")


def table(df: pd.DataFrame, name: str, help: dict[str, str] | None = None, formats: dict[str, str] | None = None,
          download: bool = True) -> None:
    """A result table (app/static_table.py: headers' tooltips from `help`, `formats` per column) with a CSV
    download of its exact numbers (unless `download` is False: rows of an unfinished run)."""
    st.markdown(static_table.html(df, help, formats), unsafe_allow_html=True)
    if download:
        st.download_button("⬇ table (CSV)", lambda: df.to_csv(index=False), f"{name}.csv", "text/csv",
                           key=f"tcsv_{name}", on_click="ignore")


ALL_COLUMNS = "All columns"  # the tick above a table that shows its every column
BYTES, Col = static_table.BYTES, static_table.Col  # a byte count's unit picked from its column; a column's reading


def people_table(df: pd.DataFrame, name: str, columns: Mapping[str, static_table.Col | tuple],
                 default: Sequence[str] | None = None, download: bool = True, every: bool | None = None) -> None:
    """A result table for people (static_table.people): the `default` columns (None: those of `columns`), headed
    'Header (unit)' by `columns` ({column: Col(header, unit, help, scale, format)} or a tuple of those), and an
    "All columns" tick (in the URL as `<name>_all`) for the rest, or, with `every` given, the page's own tick for
    several tables. The CSV has every column, exact and named as the result names them."""
    hidden = static_table.hidden_columns(df, columns, default)
    if every is None:
        every = bool(hidden) and checkbox(ALL_COLUMNS, f"{name}_all", False, help=f"{len(hidden)} more columns: " +
                                          ", ".join(static_table.header(c, columns) for c in hidden))
    shown, tips, formats = static_table.people(df, columns, default, every)
    table(shown, name, help=tips, formats=formats, download=False)
    if download:
        st.download_button("⬇ table (CSV)", lambda: df.to_csv(index=False), f"{name}.csv", "text/csv",
                           key=f"tcsv_{name}", on_click="ignore")


def shown(section: Callable[[], None]) -> None:
    """Run one section of a page; a library's complaint about bad input becomes a message there (the
    other sections still render)."""
    try:
        section()
    except USER_ERRORS as e:
        st.error(str(e))


@contextmanager
def guard():
    """Show a library's complaint about bad parameters as a message and stop the page."""
    try:
        yield
    except USER_ERRORS as e:
        st.error(str(e))
        st.stop()


def params_token(params: Any) -> str:
    return hashlib.sha1(json.dumps(params, sort_keys=True, default=str).encode()).hexdigest()[:10]


def run_button(label: str, key: str, params: Any, help: str | None = None) -> bool:
    """A Run button and a Stop button for an expensive experiment. Returns True when the result for
    `params` should be shown: Run was pressed for exactly these parameters (remembered in the URL
    as `<key>=<hash>`, so a shared URL shows the result). Stop interrupts a run (any click reruns
    the page, which stops the script) and forgets it."""
    token = params_token(params)
    c1, c2, c3 = st.columns([1, 1, 5])
    run = c1.button(label, type="primary", key=f"run_{key}", help=help)
    stop = c2.button("Stop", key=f"stop_{key}", help="stop the run (or forget its result); nothing else changes")
    if run:
        st.query_params[key] = token
    if stop and st.query_params.get(key) is not None:
        del st.query_params[key]
        c3.caption("stopped")
    return st.query_params.get(key) == token


def progress() -> Progress:
    """A progress bar and its (fraction, message) callback, the shape lab.experiments expects."""
    bar = st.progress(0.0, text="starting…")

    def update(frac: float, msg: str) -> None:
        bar.progress(min(max(float(frac), 0.0), 1.0), text=msg)
    return update


@st.cache_resource
def results_store() -> dict:
    return {}


def cached_run(name: str, params: Any, fn: Callable[[], Any], max_entries: int = 32) -> Any:
    """Result of `fn()` for `params`, cached across reruns and sessions (an `st.cache_resource`
    store). Unlike `st.cache_data`, `fn` may drive progress bars and live charts created outside it."""
    store = results_store()
    key = (name, params_token(params))
    if key not in store:
        value = fn()
        while len(store) >= max_entries:
            store.pop(next(iter(store)))
        store[key] = value
    return store[key]


# --- The lesson frame every page shares (docs/design.md rule 7): question, what to look at, a takeaway computed
# from the data on screen, paper-vs-here callouts, and the settings folded under "More settings".
# Each piece sits in a keyed container (CSS class `st-key-<key>`), which the browser tests look for.

def lesson(question: str, look_at: str) -> None:
    """The page's opening: the question it answers and what to look at, in plain words."""
    with st.container(key="lesson"):
        st.markdown(f"**{question}**  \n{look_at}")


def machine_load() -> tuple[float, int]:
    """This machine's 1-minute load average and its CPU count (load NaN where the OS has no load average)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return load, os.cpu_count() or 1


def load_warning(load: tuple[float, int] | None = None, what: str = "These timings") -> bool:
    """Warn beside a measurement when the machine was busy (load average above its CPU count): the timings are
    then slower and noisier than on an idle machine. `load`: (load average, CPU count) taken while measuring
    (default: now). Returns whether it warned."""
    avg, cores = load if load is not None else machine_load()
    if not avg > cores:  # NaN (no load average): no warning
        return False
    st.warning(f"{what} ran on a busy machine (load average {avg:.1f} on {cores} CPU cores): other work shared "
               "the CPU, so they are slower and noisier than on an idle one. Measure again when it is quieter.",
               icon=":material/speed:")
    return True


def takeaway(text: str, key: str = "takeaway") -> None:
    """The one-sentence takeaway, computed by the page from the numbers it shows (markdown)."""
    with st.container(key=key):
        st.success(f"**Takeaway.** {text}", icon=":material/lightbulb:")


def paper_callout(text: str, key: str) -> None:
    """A view named after a paper's table or figure: where our numbers and the paper's agree or not, and
    why, in one or two sentences (markdown). `key` names the view (unique on the page)."""
    with st.container(key=f"paper-{key}"):
        st.info(f"**Paper vs here.** {text}", icon=":material/menu_book:")


@contextmanager
def folded(label: str, key: str, expanded: bool = False) -> Iterator[Any]:
    """An expander whose ui widgets are drawn only while it is open: a closed one costs the browser nothing
    (Streamlit builds the widgets in a collapsed expander all the same), and each widget in it keeps its value
    without being drawn (`_value`). Opening it reruns the page; its open state is in the URL as `key`."""
    box = st.expander(label, expanded=expanded, key=key, bind="query-params")
    token = _FOLDED.set(not box.open)
    pending: list[str] = []
    ptoken = _PENDING.set(pending)
    try:
        with box:
            yield box
    finally:
        _FOLDED.reset(token)
        _PENDING.reset(ptoken)
    for text in pending:  # a folded control's refused value, said where it is seen: right under the expander
        complain(f"Under “{label}”: {text}")


def more_settings(label: str = "More settings", expanded: bool = False, key: str = "more") -> Any:
    """The expander the page's less-used controls fold into (at most about six controls in view), drawn
    only while open (`folded`)."""
    return folded(label, key, expanded)


def tabs(labels: Sequence[str], key: str, default: str | None = None, **kw: Any) -> tuple[list, str]:
    """Tabs whose open tab lives in the URL as `key` (a navigation between views, not an input): the
    containers and the open tab's label. Only the open tab reruns the page when chosen, so draw only its
    content (`st.tabs` with on_change='rerun'). Presets set it like a widget: `set_state(key=label)`."""
    labels = list(labels)
    default = labels[0] if default is None else default
    v = from_url(key, default, str)
    if key in st.query_params and v not in labels:
        _refused_url("View", key, _allowed(labels), default)
    _init(key, v if v in labels else default)
    if st.session_state[widget_key(key)] not in labels:
        st.session_state[widget_key(key)] = default
    _say(key, st.session_state[widget_key(key)], st)  # above the tabs: below them is below the open tab's content
    containers = st.tabs(labels, key=widget_key(key), on_change="rerun", **kw)
    chosen = next((lab for lab, t in zip(labels, containers) if t.open), default)
    return list(containers), sync_url(key, chosen)


# --- Predict, then reveal (docs/design.md rule 7): one question the learner answers before the page says the answer, the
# reveal explained from the numbers the page computed, the answer in the URL, a per-session scorecard on Home.

PAGE = "_page"        # session-state key: URL path of the page this run renders (set by Home.py)
SCORE = "_scorecard"  # session-state key: {page URL path: {question key: right (bool)}}, first answers only


PREDICT_HELP = ("your prediction, before the page says the answer: a question, not a setting (it changes no result); "
                "kept in the link, and your first answer counts on Home's scorecard")
ANSWER_LABEL = "Your answer"  # the label of predict's widget (tests that count a page's settings leave it out)


def page_id() -> str:
    """URL path of the page being rendered ('' for Home or for a page rendered on its own, as in tests)."""
    return str(st.session_state.get(PAGE, ""))


def _is_right(answer: Any, right: Any, tolerance: float) -> bool:
    if isinstance(right, (int, float)) and not isinstance(right, bool):
        return abs(float(answer) - float(right)) <= tolerance * max(abs(float(right)), 1e-12)
    return str(answer) == str(right)


def _shown_answer(v: Any, unit: str) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:,.3g}{(' ' + unit) if unit else ''}"
    return str(v)


SKIP = "skip"          # a predict key's URL value when the learner chose to see the answer without predicting
REVEALED = "_revealed"  # session-state key: {question key: answer on screen}, set by each run's `predict`
SKIPPED = "_skipped"  # session-state key: {page URL path: {question keys skipped}}: a later answer is not scored
ASKED = "_asked"  # session-state key: {page URL path: {question key: {question, answer, shown, query}}}: the scored
#                   answer, the question as it was asked and the page's URL query then (the scorecard's review links)
REVIEW = "review"  # URL parameter of a scorecard's review link: the question key to bring into view


def _score(key: str, question: str, answer: Any, shown: str, ok: bool) -> None:
    """Put an answer on Home's scorecard: the first one, and again whenever the learner changes it (the score
    follows the answer); the same answer on a later run (a rerun, a changed setting) keeps its score. A question
    skipped first is not scored. Kept with it: the question and the page's URL query, for `scorecard`'s links."""
    page = page_id()
    if key in st.session_state.get(SKIPPED, {}).get(page, set()):
        return
    asked = st.session_state.setdefault(ASKED, {}).setdefault(page, {})
    scores = st.session_state.setdefault(SCORE, {}).setdefault(page, {})
    said = f"{answer:g}" if isinstance(answer, float) else str(answer)
    if key in scores and asked.get(key, {}).get("answer") == said:
        return
    scores[key] = ok
    asked[key] = {"question": question, "answer": said, "shown": shown,
                  "query": {k: st.query_params.get_all(k) for k in st.query_params if k != REVIEW}}


def _bring_into_view(key: str) -> None:
    """Arrived by a scorecard's review link (`review=<key>` in the URL): scroll the question's box into view,
    once (the parameter leaves the URL)."""
    if st.query_params.get(REVIEW) != key:
        return
    del st.query_params[REVIEW]
    st.html(f"""<script>
(() => {{ let tries = 0; const go = () => {{
  const box = document.querySelector('.st-key-predict-{key}');
  if (box) {{ box.scrollIntoView({{block: 'center'}}); }} else if (++tries < 50) {{ setTimeout(go, 100); }}
}}; setTimeout(go, 300); }})();
</script>""", unsafe_allow_javascript=True)


def _skip_key(key: str) -> str:
    return widget_key(f"{key}__skip")  # a widget key: a page arrived at anew starts unskipped (`arrive`)


def _skip(key: str) -> None:
    st.session_state[_skip_key(key)] = True
    st.session_state.setdefault(SKIPPED, {}).setdefault(page_id(), set()).add(key)


def predict(question: str, choices: Sequence[str] | None, reveal: Callable[[], tuple[Any, str] | None], *,
            key: str = "guess", unit: str = "", tolerance: float = 0.25, lo: float | None = None,
            hi: float | None = None) -> bool | None:
    """Predict, then reveal: ask `question` and reveal the answer only once the learner has answered (or
    pressed "Skip", which shows the answer unscored; `key=skip` in the URL).

    Call it after computing the page's results and before drawing them (the question sits above them).
    - `choices`: the options (strings; none is preselected), or None for a number answer (a number input,
      `unit` after it, limits `lo`/`hi` checked like every number: a value outside is named, not scored).
    - `reveal()`: called only after an answer; returns `(right, why)`: the right choice (one of `choices`) or
      number, and a markdown sentence explaining it from the numbers the page shows (format them in); or None
      while the result is not there yet (behind a Run button): the answer is kept and revealed after the run.
      A number answer is right within `tolerance` (relative, 0.25 = ±25 %).
    - `key`: the URL parameter holding the answer (unique on the page; a shared URL shows the reveal).
    Returns None before an answer (and after a skip), else whether it is right; `revealed(key)` says whether
    the answer is out (answered or skipped), for a page that holds back what would give it away. The first
    answer to each question in a session goes on Home's scorecard (`scorecard()`) unless the question was
    skipped first; a changed answer is revealed again and re-scored (the score follows the answer).
    The box is a container with CSS class `st-key-predict-<key>` (the browser tests look for it)."""
    wk = widget_key(key)
    st.session_state.setdefault(REVEALED, {})[key] = False
    with st.container(border=True, key=f"predict-{key}"):
        st.markdown(f":material/psychology_alt: **Predict first.** {question}")
        _bring_into_view(key)
        raw = st.query_params.get(key)
        if _skip_key(key) not in st.session_state:
            st.session_state[_skip_key(key)] = raw == SKIP
            if raw == SKIP:
                _skip(key)
        if choices is not None:
            choices = [str(c) for c in choices]
            if wk not in st.session_state:
                st.session_state[wk] = raw if raw in choices else None
            if raw is not None and raw not in choices and raw != SKIP:
                st.error(f"{ANSWER_LABEL}: {raw!r} from the link is not one of the answers; allowed: "
                         + ", ".join(repr(c) for c in choices) + f" (or {SKIP!r}: the answer, unscored).")
            answer = _value(key, lambda: st.radio(ANSWER_LABEL, choices, index=None, key=wk, horizontal=True,
                                                  label_visibility="collapsed", help=PREDICT_HELP))
        else:
            if wk not in st.session_state:
                st.session_state[wk] = from_url(key, None, float)
            label = f"{ANSWER_LABEL}{f' ({unit})' if unit else ''}"
            if raw is not None and raw != SKIP and from_url(key, None, float) is None:
                st.error(f"{label}: {raw!r} from the link is not a number; allowed: a number "
                         f"{_range_words(lo, hi)}".rstrip() + f" (or {SKIP!r}: the answer, unscored). Type one below.")
            answer = _value(key, lambda: st.number_input(label, value=None,
                                                         key=wk, format="%g", placeholder="type a number",
                                                         help=PREDICT_HELP))
        if answer is None:
            if not st.session_state[_skip_key(key)]:
                st.button("Skip: show me the answer", key=f"skip-{key}", type="tertiary", on_click=_skip,
                          icon=":material/visibility:",
                          args=(key,), help="see the result without predicting (not counted on the scorecard)")
                st.caption("Answer to see what the page computes.")
                return None
            sync_url(key, SKIP)
            got = reveal()
            if got is None:
                st.caption("Skipped: the answer shows once the result is on screen.")
                return None
            right, why = got
            st.session_state[REVEALED][key] = True
            st.info(f"**Skipped.** The page computes {_shown_answer(right, unit)}. {why}",
                    icon=":material/visibility:")
            return None
        sync_url(key, f"{answer:g}" if isinstance(answer, float) else answer)
        if choices is None:
            try:
                check_range(f"{ANSWER_LABEL}{f' ({unit})' if unit else ''}", answer, lo, hi)
            except ValueError as e:
                st.error(f"{e}. Type a number in that range to see the answer.")
                return None
        got = reveal()
        if got is None:  # the result is not on screen yet (an experiment behind a Run button)
            st.caption(f"Your answer ({_shown_answer(answer, unit)}) is kept, in the URL too: the answer shows "
                       "once the result is on screen.")
            return None
        st.session_state[REVEALED][key] = True
        right, why = got
        ok = _is_right(answer, right, tolerance)
        _score(key, question, answer, _shown_answer(answer, unit), ok)
        said = f"You said {_shown_answer(answer, unit)}; the page computes {_shown_answer(right, unit)}."
        if ok:
            st.success(f"**Right.** {said} {why}", icon=":material/check_circle:")
        else:
            st.warning(f"**Not quite.** {said} {why}", icon=":material/lightbulb:")
        return ok


def revealed(key: str = "guess") -> bool:
    """Whether the prediction `key` asked on this run has its answer on screen (answered, or skipped): what
    gives the answer away is drawn only then. Call after that run's `predict`."""
    return bool(st.session_state.get(REVEALED, {}).get(key, False))


def withheld(hidden: str, takeaway_text: str | None = None, metrics: Iterable[tuple[Any, str]] = ()) -> None:
    """While a prediction waits for its answer (`revealed` is False): each (column, label) of `metrics` shows
    "?", `takeaway_text` (what the question holds back) is the takeaway, and a caption says what shows once
    answered (`hidden`: lower-case, no full stop; also the metrics' tooltip)."""
    for where, label in metrics:
        where.metric(label, "?", help=hidden)
    if takeaway_text:
        takeaway(takeaway_text)
    st.caption(hidden[0].upper() + hidden[1:] + ".")


def scores() -> dict[str, tuple[int, int]]:
    """This session's predictions per page URL path: (answered, right)."""
    return {p: (len(q), sum(q.values())) for p, q in st.session_state.get(SCORE, {}).items() if q}


def missed() -> list[tuple[str, str, dict]]:
    """This session's questions answered wrong (their latest answer): (page URL path, question key, what
    `_score` kept: question, answer, shown, query), in the order they were answered."""
    asked = st.session_state.get(ASKED, {})
    return [(p, k, asked.get(p, {}).get(k, {})) for p, q in st.session_state.get(SCORE, {}).items()
            for k, ok in q.items() if not ok]


def _review_link(page: str, key: str, info: dict, title: str, links: dict) -> None:
    """One 'review what I missed' link: the page at the URL state of the answer (the answer included, so the
    explanation shows), scrolled to the question (`REVIEW`)."""
    question = info.get("question") or f"the question '{key}'"
    label = f"{title} — {question}" + (f" (you said {info['shown']})" if info.get("shown") else "")
    query = {**info.get("query", {}), REVIEW: [key]}
    target = links.get(page)
    if target is not None:
        st.page_link(target, label=label, icon=":material/replay:", query_params=query)
    else:  # a page rendered outside Home's navigation (tests): the link as text
        st.markdown(f"{label} (`/{page}?{'&'.join(f'{k}={v}' for k, vs in query.items() for v in vs or [''])}`)")


def scorecard(titles: dict[str, str], links: dict[str, Any] | None = None) -> None:
    """Home's scorecard of this session's predictions: per page (`titles`: URL path -> title), questions
    answered and answered right (each question's latest answer), and a link back to each question missed
    (`links`: URL path -> the navigation's page, for st.page_link)."""
    got = scores()
    with st.container(key="scorecard"):
        if not got:
            st.caption("Your predictions: none yet. Pages marked *Predict first* ask one question before they "
                       "show the answer; your answers are counted here for this session (change one and its "
                       "score follows).")
            return
        rows = [{"Page": titles.get(p, p or "Home"), "Answered": a, "Right": r} for p, (a, r) in got.items()]
        total_a, total_r = sum(a for a, _ in got.values()), sum(r for _, r in got.values())
        st.markdown(f"**Your predictions this session:** {total_r} right of {total_a} answered.")
        st.markdown(static_table.html(pd.DataFrame(rows)), unsafe_allow_html=True)
        wrong = missed()
        if wrong:
            st.markdown("**Review what I missed** (each link opens the page at its question, with the explanation; "
                        "change your answer there and the score follows):")
            for page, key, info in wrong:
                _review_link(page, key, info, titles.get(page, page or "Home"), links or {})
