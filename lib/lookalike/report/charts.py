"""The report's Altair charts, one function each; stages build them, StageResult.save writes them."""

from __future__ import annotations

from collections.abc import Sequence

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


def first_look(look: pd.DataFrame) -> alt.LayerChart | None:
    """Stage 02's first look: each system's Recall@10 against the evidence units with its 95% CI, coloured
    by provenance; None when nothing was scored."""
    if look.empty:
        return None
    return (alt.Chart(look).mark_bar().encode(
                x=alt.X("recall_10:Q", title="Recall@10 (evidence units)", scale=alt.Scale(domain=[0, 1])),
                y=alt.Y("system:N", sort="-x", title=None), color=alt.Color("provenance:N"))
            + alt.Chart(look).mark_rule().encode(x="recall_10_lo:Q", x2="recall_10_hi:Q", y="system:N")
            ).properties(title="First look: Recall@10 with 95% CI", width=480)


def leak_ablation(table: pd.DataFrame, query_sets: Sequence[str], indexes: Sequence[str]) -> alt.FacetChart:
    """Stage 03's ablation: recall@10 per query set with its CI, one panel per index (image, caption, both),
    so each index's two columns are read side by side."""
    bars = alt.Chart(table).mark_bar().encode(
        x=alt.X("query_set:N", title=None, sort=list(query_sets)),
        y=alt.Y("recall_10:Q", title="Recall@10", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("query_set:N", sort=list(query_sets), title="query set"))
    rules = alt.Chart(table).mark_rule().encode(x=alt.X("query_set:N", sort=list(query_sets)),
                                                 y="recall_10_lo:Q", y2="recall_10_hi:Q")
    return (bars + rules).properties(width=140, height=220).facet(
        column=alt.Column("index:N", sort=list(indexes), title="index")).properties(
        title="Leak ablation: read each index's two columns side by side")


def answerable(shares: pd.DataFrame, judge: str) -> alt.LayerChart | None:
    """Stage 05: the share of questions a hard distractor answers, per axis with its CI (judge named)."""
    if shares.empty:
        return None
    return (
        alt.Chart(shares).mark_bar().encode(x=alt.X("axis:N", sort=list(shares["axis"]), title=None),
                                            y=alt.Y("share:Q", scale=alt.Scale(domain=[0, 1]),
                                                    title="share answerable from a distractor"),
                                            tooltip=["axis", "n", "answerable", "share"])
        + alt.Chart(shares).mark_rule().encode(x=alt.X("axis:N", sort=list(shares["axis"])), y="share_lo:Q", y2="share_hi:Q")
    ).properties(width=320, height=220, title=f"Questions a hard distractor answers (judge: {judge})")


def sufficiency(suff_hard: pd.DataFrame) -> alt.FacetChart | None:
    """Stage 07: what the top k holds under hard negatives (sufficient / supporting only / neither, stacked
    to 1), one panel per system; None when nothing was scored."""
    plot = suff_hard.melt(id_vars=["system", "k", "n"], value_vars=["sufficient", "supporting_only", "neither"],
                          var_name="outcome", value_name="share")
    if plot.empty:
        return None
    return alt.Chart(plot).mark_bar().encode(
        x=alt.X("k:O", title="top k"), y=alt.Y("share:Q", stack="normalize", title="share of questions"),
        color=alt.Color("outcome:N", sort=["sufficient", "supporting_only", "neither"],
                        scale=alt.Scale(range=["#2e7d32", "#f9a825", "#c62828"])),
        order=alt.Order("outcome_order:Q"), tooltip=["system", "k", "outcome", "share", "n"]
    ).transform_calculate(outcome_order="indexof(['sufficient','supporting_only','neither'], datum.outcome)").properties(
        width=130, height=200).facet(column=alt.Column("system:N", title=None)).properties(
        title="Hard negatives, validated questions: what the top k holds")


def source_structure(cells: pd.DataFrame, source_column: str, noun: str = "page") -> alt.FacetChart:
    """Stage 07: RecallAll@5 by source x evidence structure, one panel per system, n written in each cell
    (noun: what the corpus's units are called, page or image)."""
    # a cell wide enough for its value over its n (two text marks, not one line that overprints the
    # next cell), two panels a row so the chart keeps its size inside a page column
    base = alt.Chart(cells).encode(
        x=alt.X("evidence_structure:N", title="evidence structure", axis=alt.Axis(labelAngle=-30)),
        y=alt.Y("source:N", title=source_column))
    rect = base.mark_rect().encode(color=alt.Color("recall_all_5:Q", title="RecallAll@5",
                                                   scale=alt.Scale(domain=[0, 1], scheme="blues")),
                                   tooltip=["system", "source", "evidence_structure", "n", "recall_all_5",
                                            "recall_all_5_lo", "recall_all_5_hi"])
    ink = alt.condition("datum.recall_all_5 > 0.6", alt.value("white"), alt.value("black"))
    value = base.mark_text(fontSize=12, dy=-7).encode(text=alt.Text("recall_all_5:Q", format=".2f"), color=ink)
    count = base.mark_text(fontSize=10, dy=8).encode(text=alt.Text("n_label:N"), color=ink)
    return (rect + value + count).transform_calculate(n_label="'n=' + datum.n").properties(
        width=alt.Step(62), height=alt.Step(36)).facet(
        facet=alt.Facet("system:N", title=None), columns=2).properties(
        title=f"RecallAll@5 by source and evidence structure (every evidence {noun} in the top 5)")


def negative_rules(shown: pd.DataFrame, rules: list, question_set: str) -> alt.LayerChart | None:
    """Stage 08: each negative-selection rule's contamination (share of chosen negatives judged relevant)
    with its CI over questions, per judge."""
    if shown.empty:
        return None
    return (
        alt.Chart(shown).mark_point(filled=True, size=70).encode(
            y=alt.Y("rule:N", sort=rules, title=None), x=alt.X("contamination:Q", scale=alt.Scale(domain=[0, 1]),
                                                              title="share of chosen negatives judged relevant"),
            color="judge:N", tooltip=["rule", "judge", "contamination", "n_negatives", "backfill_share"])
        + alt.Chart(shown).mark_rule().encode(y=alt.Y("rule:N", sort=rules), x="contamination_lo:Q",
                                                       x2="contamination_hi:Q", color="judge:N")
    ).properties(width=420, height=220, title=f"Contamination of negative-selection rules, questions {question_set} (95% CI over questions)")
