"""The one way fusedkit writes a number for a reader, in every table and sentence: a time
``2.724`` ms (3 decimals; µs 1), a rate ``157.7`` TFLOP/s, a share ``75%``, an error ``1.6e-06``, a
speed-up ``3.12x``, GB/s and MB as integers, sizes ``1024 × 8192 × 8192``, a device ``H200``. A
missing value is an en dash, never ``nan``. :func:`format_frame` applies the rules by column name,
:func:`table` makes a frame ready to display, :func:`md` renders Markdown built from numbers.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Callable, Mapping

import pandas as pd

MISSING = "–"


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    try:
        return bool(isinstance(value, float) and math.isnan(value)) or (
            not isinstance(value, str) and pd.isna(value))
    except (TypeError, ValueError):
        return False


def _num(spec: str, suffix: str = "") -> Callable[[Any], str]:
    def fmt(value: Any) -> str:
        if _missing(value):
            return MISSING
        try:
            return f"{float(value):{spec}}{suffix}"
        except (TypeError, ValueError):
            return str(value)
    return fmt


ms = _num(".3f")              # milliseconds: 2.724
us = _num(".1f")              # microseconds: 28.8
tflops = _num(".1f")          # TFLOP/s: 157.7
pct = _num(".0f", "%")        # a share already in percent: 75%
err = _num(".1e")             # a relative or absolute error: 1.6e-06
speedup = _num(".2f", "x")    # a ratio of times: 3.12x
gbps = _num(".0f")            # GB/s: 3174
mb = _num(".0f")              # megabytes (or KB, GiB: any size shown as an integer): 67
gb = _num(".2f")              # gigabytes moved, as a profiler counts them: 1.07
count = _num(".0f")           # an integer count (a step number, registers, a launch's grid)
ratio = _num(".1f")           # a ratio of two counts (sectors per request): 4.0


def ms_diff(value: Any) -> str:
    """A difference of times, signed: ``+0.018``."""
    return MISSING if _missing(value) else f"{float(value):+.3f}"


def sizes(value: Any) -> str:
    """Sizes as the records write them (``"batch_size=1024,in_features=8192,out_features=8192"``)
    as a table shows them, their values in order: ``1024 × 8192 × 8192``; other text as it is."""
    if _missing(value):
        return MISSING
    text = str(value)
    if not re.fullmatch(r"\w+=\d+(,\w+=\d+)*", text):
        return text
    return " × ".join(part.split("=", 1)[1] for part in text.split(","))


def device(name: Any) -> str:
    """A device as a table shows it: ``H200`` for "NVIDIA H200" (the vendor's name left out)."""
    return MISSING if _missing(name) else str(name).removeprefix("NVIDIA ")


def share(fraction: Any) -> str:
    """A fraction (0.78) as a percent: ``78%``."""
    return MISSING if _missing(fraction) else pct(100.0 * float(fraction))


# Column name -> formatter. Names as the notebooks' tables spell them (results.ladder_table)
# and as data/records.csv and data/counters.csv spell them.
COLUMN_FORMATS: dict[str, Callable[[Any], str]] = {
    "ms": ms, "median_ms": ms, "p10_ms": ms, "p90_ms": ms, "floor ms": ms, "floor_ms": ms,
    "µs": us, "duration_us": us, "TFLOP/s": tflops, "tflops": tflops, "% of floor": pct, "pct_of_floor": pct,
    "% of measured": pct, "pct_of_measured": pct, "rel. error": err, "rel_error": err, "max_abs_error": err,
    "speedup": speedup, "GB/s": gbps, "gbps": gbps, "peak_mem_mb": mb, "MB": mb,
    "step": count, "launch": count, "registers": count, "grid": count, "block": count, "repeats": count,
    "sm_pct": pct, "tensor_pct": pct, "fma_pct": pct, "dram_pct": pct, "occupancy_pct": pct,
    "l2_hit_pct": pct, "l1_hit_pct": pct, "dram_gb": gb, "l2_l1_gb": gb, "smem_kb": mb, "local_bytes": count,
    "gld_sectors_per_request": ratio, "smem_ld_conflicts": count, "smem_st_conflicts": count,
    # the by-batch checks (fusedkit.results.route_check, route_rule)
    "eager_ms": ms, "routed_ms": ms, "routed_p10_ms": ms, "routed_p90_ms": ms,
    "routed_speedup": speedup, "routed_step": count, "sizes": sizes, "device": device,
}
TEXT_FORMATS = {"sizes", "device"}
"""The columns of :data:`COLUMN_FORMATS` that hold text, not numbers (left-aligned)."""


def formatter(column: str) -> Callable[[Any], str] | None:
    """The formatter for a column name (``ms_at_<rows>`` too), or None for an unknown column."""
    return COLUMN_FORMATS.get(column) or (ms if re.fullmatch(r"ms_at_\d+", column) else None)


def format_frame(df: pd.DataFrame, formats: Mapping[str, Callable[[Any], str]] | None = None
                 ) -> pd.DataFrame:
    """``df`` with every known column written as text by the rules above, other columns as they
    are but for a missing value, an en dash; ``formats`` adds or overrides formatters by column."""
    out = df.copy()
    extra = dict(formats or {})
    for col in out.columns:
        f = extra.get(col) or formatter(str(col))
        if f is not None:
            out[col] = pd.Series([f(v) for v in out[col]], index=out.index, dtype=object)
        elif out[col].isna().any():
            out[col] = pd.Series([MISSING if _missing(v) else v for v in out[col]], index=out.index,
                                 dtype=object)
    if out.index.name in COLUMN_FORMATS:
        out.index = pd.Index([COLUMN_FORMATS[out.index.name](v) for v in out.index], name=out.index.name)
    return out


def all_missing(df: pd.DataFrame) -> list[str]:
    """The columns of ``df`` that hold no value at all (every cell None, NaN or a dash)."""
    return [c for c in df.columns
            if df.empty or all(_missing(v) or (isinstance(v, str) and v == MISSING) for v in df[c])]


MISSING_NOTE = f"{MISSING}: not recorded or not measured here"
"""What a dash in a table means, said under every table that shows one."""


TABLE_CSS = [
    {"selector": "", "props": [("font-size", "11.5px"), ("border-collapse", "collapse")]},
    {"selector": "th, td", "props": [("padding", "2px 4px")]},
    {"selector": "td", "props": [("text-align", "right"), ("white-space", "nowrap")]},
    {"selector": "caption", "props": [("caption-side", "bottom"), ("text-align", "left"),
                                      ("font-size", "11px"), ("color", "#57606a")]},
]
"""The tables' style: numbers on one line each, right-aligned; a caption below the table."""

TEXT_CELLS = {"text-align": "left", "white-space": "normal", "overflow-wrap": "break-word"}   # whole, never cut

ONE_LINE = {"tier", "recorded", "date", "device", "precision"}
"""Short text columns kept on one line (a date or "fp32-faithful" broken at its hyphen reads badly)."""

LONG_NAMES = {"kernel", "main kernel"}
"""Text columns of names too long for a line (a cuBLAS kernel's runs to 120 characters): they wrap anywhere."""


def breakable(value: Any) -> str:
    """A cell or header as HTML that may break after its underscores (``routed_<wbr>p10_ms``):
    a snake_case name or slug wraps where the page is narrow, shown and copied whole."""
    return re.sub(r"(?<=[^_])(_+)(?=[^_])", r"\1<wbr>", html.escape(str(value)))


def table(df: pd.DataFrame, *, index: bool = False,
          formats: Mapping[str, Callable[[Any], str]] | None = None) -> Any:
    """``df`` formatted (:func:`format_frame`) as a Styler without row numbers (``index=True`` keeps
    the index): text left and wrapping (:data:`TEXT_CELLS`), numbers right on one line, a column with
    no value left out, and under a table that shows a dash, :data:`MISSING_NOTE`."""
    df = df.drop(columns=all_missing(df)) if len(df) else df
    shown = format_frame(df, formats)
    numeric = (set(COLUMN_FORMATS) - TEXT_FORMATS) | set(formats or {})
    text = [c for c in df.columns if str(c) not in numeric and not re.fullmatch(r"ms_at_\d+", str(c))
            and not pd.api.types.is_numeric_dtype(df[c])]
    styler = shown.style.set_table_styles(TABLE_CSS).format_index(breakable, axis=1)
    if text:
        styler = styler.format(breakable, subset=text)   # per column (``#T td.colN``), so that it outranks the tables' ``#T td``
        wrap = lambda c: ({**TEXT_CELLS, "overflow-wrap": "anywhere"} if c in LONG_NAMES else  # noqa: E731
                          {**TEXT_CELLS, "white-space": "nowrap"} if c in ONE_LINE else TEXT_CELLS)
        styler = styler.set_table_styles({c: [{"selector": "td", "props": list(wrap(c).items())},
                                              {"selector": "th", "props": [("text-align", "left")]}]
                                          for c in text}, overwrite=False)
    if any((shown[c].astype(str) == MISSING).any() for c in shown.columns):
        styler = styler.set_caption(MISSING_NOTE)
    return styler if index else styler.hide(axis="index")


LONG_CODE = 40
"""A code span longer than this with no space in it (a cuBLAS kernel's name) is shown with a
zero-width break opportunity after each underscore: whole, never past the page's edge."""

_CODE_SPAN = re.compile(r"(?<!`)`([^`\s]{%d,})`(?!`)" % (LONG_CODE + 1))
_BREAK = "\u200b"   # zero-width space: a line may break here, nothing is drawn


class Markdown:
    """Markdown shown rendered in a notebook and the report, as itself in plain text; a code span
    too long for a line (:data:`LONG_CODE`) may break after its underscores."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return _CODE_SPAN.sub(lambda m: "`" + re.sub(r"(?<=[^_])(_+)(?=[^_])", r"\1" + _BREAK, m.group(1)) + "`",
                              self.text)

    def __repr__(self) -> str:
        return self.text

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text)


def md(template: str, **values: Any) -> Markdown:
    """Markdown from a template and already formatted values: ``md("{t} ms", t=ms(2.7))``.
    The values are inserted with :meth:`str.format`; nothing else is formatted here."""
    return Markdown(template.format(**values) if values else template)
