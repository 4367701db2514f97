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
