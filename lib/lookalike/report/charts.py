"""The report's Altair charts, one function each; stages build them, StageResult.save writes them."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from lookalike.eval.stats import fit_log_line


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


def haystack(curve: pd.DataFrame) -> alt.FacetChart:
    """Each measure against corpus size (log scale), one line per system with 95% CI bars; an
    extrapolation to the target size is drawn dashed, its point hollow and named in the legend
    (stage 07 and the summary page)."""
    data = curve.assign(kind=curve["extrapolated"].map({True: "extrapolated", False: "measured"}))
    measured = data[~data["extrapolated"]]
    # the dashed segment: the fitted line (value = a + b log size, as the extrapolation) from the
    # largest measured size to the target
    segments = []
    for (_system, _measure), g in data.groupby(["system", "measure"], sort=True):
        guess, seen = g[g["extrapolated"]], g[~g["extrapolated"]].sort_values("corpus_size")
        if len(guess) and len(seen) >= 2:
            logs = np.log(seen["corpus_size"].to_numpy(dtype=float))
            at = float(np.clip(fit_log_line(logs, seen["value"].to_numpy(dtype=float)[None, :], logs.max())[0], 0, 1))
            segments += [seen.tail(1).assign(value=at), guess]
    dashed = pd.concat(segments, ignore_index=True) if segments else data.head(0)
    # one table for every layer (a faceted layer chart shares its data), each row marked with its layer
    rows = pd.concat([measured.assign(layer="line"), data.assign(layer="interval"), dashed.assign(layer="dashed"),
                      data[data["extrapolated"]].assign(layer="guess")], ignore_index=True)
    x = alt.X("corpus_size:Q", scale=alt.Scale(type="log"), title="corpus size (units, log scale)",
              axis=alt.Axis(values=sorted(int(v) for v in set(data["corpus_size"])), format="~s"))
    y = alt.Y("value:Q", scale=alt.Scale(domain=[0, 1]), title=None)
    color = alt.Color("system:N", title="system")
    tip = ["system", "measure", "corpus_size", "n", "value", "lo", "hi", "kind"]
    base = alt.Chart()
    layers = [base.mark_line(point=True).encode(x=x, y=y, color=color, tooltip=tip).transform_filter(
                  alt.datum.layer == "line"),
              base.mark_rule().encode(x=x, y="lo:Q", y2="hi:Q", color=color).transform_filter(
                  alt.datum.layer == "interval")]
    if len(dashed):
        layers.append(base.mark_line(strokeDash=[5, 4]).encode(x=x, y=y, color=color, detail="system:N")
                      .transform_filter(alt.datum.layer == "dashed"))
        layers.append(base.mark_point(filled=False, size=70).encode(
            x=x, y=y, color=color, shape=alt.Shape("kind:N", title=None), tooltip=tip)
            .transform_filter(alt.datum.layer == "guess"))
    n = int(curve["n"].max()) if len(curve) else 0
    title = (f"How the figures fall as the corpus grows (n = {n} questions, 95% CI bars"
             + ("; dashed: extrapolated, not measured)" if len(dashed) else ")"))
    return alt.layer(*layers, data=rows).properties(width=300, height=220).facet(
        column=alt.Column("measure:N", title=None)).properties(title=title)
