"""Metric tables as people read them: each estimate with its 95% CI in one cell
("0.68 [0.62, 0.73]"), its n beside it, fixed precision, rendered as an HTML table (pandas Styler
with a fixed id, so the same table gives the same bytes run to run).

The CSVs under tables/ keep every column at full precision; these renderings are for reading. The
plain-text blocks nbval checks are built separately and are not touched.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
from markupsafe import Markup

from lookalike.eval.compare import format_p

_ID = re.compile(r"[^A-Za-z0-9_-]+")
_P_VALUE = re.compile(r"^(p|p_\w+|p \(.*\)|.*p-value.*)$")   # p, p_holm, p (Holm), 'p-value' columns
PROSE_CHARS = 40         # a text column with a longer cell is prose: it wraps


def as_number(value) -> float:
    """A number from a table cell ('' and text read as NaN)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def fmt_ci(estimate, lo, hi, digits: int = 2) -> str:
    """'0.68 [0.62, 0.73]'; an estimate with no interval is written alone; a missing estimate is ''."""
    def one(v):
        return f"{float(v):.{digits}f}"

    if estimate is None or (isinstance(estimate, float) and np.isnan(estimate)) or estimate == "":
        return ""
    missing = [v is None or v == "" or (isinstance(v, float) and np.isnan(v)) for v in (lo, hi)]
    if any(missing):
        return one(estimate)
    return f"{one(estimate)} [{one(lo)}, {one(hi)}]"


def ci_measures(df: pd.DataFrame) -> list[str]:
    """The columns m that come with m_lo and m_hi, in the frame's order."""
    cols = set(df.columns)
    return [c for c in df.columns if f"{c}_lo" in cols and f"{c}_hi" in cols]


def with_ci(df: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """The frame with every m, m_lo, m_hi triple folded into one 'm' cell written as an estimate
    with its interval (the column stays where m was; m_lo and m_hi go)."""
    out = df.copy()
    for m in ci_measures(df):
        out[m] = [fmt_ci(e, lo, hi, digits) for e, lo, hi in zip(df[m], df[f"{m}_lo"], df[f"{m}_hi"])]
        out = out.drop(columns=[f"{m}_lo", f"{m}_hi"])
    return out


def html_table(df: pd.DataFrame, table_id: str, digits: int = 3, caption: str = "") -> str:
    """An HTML table of df: no index, floats at `digits` decimals, integers as integers, every cell
    and header escaped, element ids derived from table_id (so the output is the same every run)."""
    shown = df.reset_index(drop=True)
    formats = {}
    for col in shown.columns:
        s = shown[col]
        if pd.api.types.is_bool_dtype(s):
            formats[col] = lambda v: "yes" if v else "no"
        elif pd.api.types.is_integer_dtype(s):
            formats[col] = "{:d}"
        elif pd.api.types.is_float_dtype(s) and _P_VALUE.match(str(col[-1] if isinstance(col, tuple) else col)):
            formats[col] = lambda v: html.escape(format_p(v))     # "< 0.001", never "0.000" (Styler leaves
            # what a callable formatter returns unescaped)
        elif pd.api.types.is_float_dtype(s):
            formats[col] = (lambda v, d=digits: "" if pd.isna(v) else ("∞" if np.isinf(v) else f"{v:.{d}f}"))
    styler = (shown.style.hide(axis="index").set_uuid(_ID.sub("-", table_id))
              .format(formats, precision=digits, escape="html", na_rep="")
              .format_index(escape="html", axis=1)
              .set_table_attributes('class="metric"'))
    # columns of prose (explanations, encoder ids) wrap and read left to right; numbers stay on one line
    prose = [c for c in shown.columns if (shown[c].dtype == object or pd.api.types.is_string_dtype(shown[c]))
             and max(map(len, map(str, shown[c])), default=0) > PROSE_CHARS]
    if prose:
        styler = styler.set_properties(subset=prose, **{"white-space": "normal", "text-align": "left",
                                                        "min-width": "14rem", "overflow-wrap": "anywhere"})
    if caption:
        styler = styler.set_caption(html.escape(str(caption)))
    # Styler writes an empty <style> block when no cell is styled: left out
    out = re.sub(r'^<style type="text/css">\s*</style>\s*', "", styler.to_html())
    # an interval never breaks inside itself: a narrow window wraps a cell between the estimate and
    # its interval (the page's CSS lets cells wrap at spaces) instead of scrolling the table sideways
    return _INTERVAL.sub(r"[\1,&nbsp;\2]", out)


_INTERVAL = re.compile(r"\[([-+]?\d[\d.]*), ([-+]?\d[\d.]*)\]")


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """A frame without the index pandas would print: a named or multi-level index (a pivot's rows)
    becomes columns; a plain 0..n index goes."""
    if isinstance(df.index, pd.RangeIndex) and df.index.name is None:
        return df.reset_index(drop=True)
    return df.reset_index()


class Readable:
    """A frame for a notebook cell, shown the way every table of the report is: the Styler table
    (no index column, CI triples folded, cells escaped, long text wrapped, nothing truncated), and
    a sentence instead of an empty table when it has no rows."""

    def __init__(self, df: pd.DataFrame, table_id: str, what: str = "", digits: int = 3):
        self.df, self.table_id, self.what, self.digits = _plain(df), table_id, what or table_id, digits

    def empty_words(self) -> str:
        """The sentence shown instead of an empty table."""
        return f"No rows: {self.what} has nothing to show on this run."

    def _repr_html_(self) -> str:
        if not len(self.df):
            return Markup("<p>{}</p>").format(self.empty_words())
        return html_table(with_ci(self.df), self.table_id, digits=self.digits)

    def __repr__(self) -> str:
        if not len(self.df):
            return self.empty_words()
        with pd.option_context("display.max_colwidth", None, "display.width", 200):
            return self.df.to_string(index=False)


def ci_pivot(long: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """One row per index, one column per measure, each cell 'estimate [lo, hi]' (a long table with
    measure, value, value_lo, value_hi)."""
    wide = with_ci(long).pivot_table(index=index, columns="measure", values="value", aggfunc="first").reset_index()
    wide.columns.name = None
    return wide
