"""The report's Altair charts, one function each; stages build them, StageResult.save writes them."""

from __future__ import annotations

import altair as alt
import pandas as pd


def strata(strata: pd.DataFrame) -> alt.Chart:
    """Units per template, coloured by content type (stage 01)."""
    return (alt.Chart(strata).mark_bar()
            .encode(x=alt.X("units:Q", title="units"),
                    y=alt.Y("template_id:N", sort="-x", title="template"),
                    color=alt.Color("content_type:N", title="content type"),
                    tooltip=["content_type", "template_id", "units"])
            .properties(title="Units per template, coloured by content type", width=520, height=22 * len(strata)))


def top1(table: pd.DataFrame, title: str) -> alt.FacetChart:
    """Bars of top-1 per set of negatives with CI rules, one panel per system (stages 04 and 05)."""
    order = [n for n in ("random", "hard", "corpus") if n in set(table["negatives"])] + sorted(
        set(table["negatives"]) - {"random", "hard", "corpus"})
    bars = alt.Chart(table).mark_bar().encode(
        x=alt.X("negatives:N", sort=order, title=None),
        y=alt.Y("top1:Q", scale=alt.Scale(domain=[0, 1]), title="top-1"),
        color=alt.Color("negatives:N", sort=order), tooltip=["system", "negatives", "n", "top1", "top1_lo", "top1_hi"])
    rules = alt.Chart(table).mark_rule().encode(x=alt.X("negatives:N", sort=order), y="top1_lo:Q", y2="top1_hi:Q")
    return (bars + rules).properties(width=160, height=220).facet(
        column=alt.Column("system:N", title=None)).properties(title=title)


def validity_ladder(ladder: pd.DataFrame) -> alt.LayerChart:
    """Top-1 of synthetic systems of known sibling discrimination p, under random and hard
    negatives, with CI bands (stage 04 and the summary page)."""
    base = alt.Chart(ladder).encode(
        x=alt.X("p:Q", title="sibling discrimination p (chance the system puts the right look-alike first)",
                scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("negatives:N", title="negatives"))
    line = base.mark_line(point=True).encode(y=alt.Y("top1:Q", title="top-1", scale=alt.Scale(domain=[0, 1])),
                                            tooltip=["p", "negatives", "n", "top1", "top1_lo", "top1_hi"])
    band = base.mark_area(opacity=0.2).encode(y="top1_lo:Q", y2="top1_hi:Q")
    return (band + line).properties(width=420, height=240, title=(
        "The validity ladder: under random negatives top-1 stays flat while the property varies"))
