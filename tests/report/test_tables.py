"""Metric tables as people read them: estimate [lo, hi] in one cell, n, fixed precision, escaped."""

import re
from pathlib import Path

import numpy as np
import pandas as pd

from lookalike import params
from lookalike.report import site
from lookalike.report import tables


def test_fmt_ci_and_folding_keep_the_column_where_it_was():
    assert tables.fmt_ci(0.6789, 0.6234, 0.7311) == "0.68 [0.62, 0.73]"
    assert tables.fmt_ci(0.5, float("nan"), 0.7) == "0.50"                   # no interval: the estimate alone
    assert tables.fmt_ci(float("nan"), 0.1, 0.2) == ""
    df = pd.DataFrame({"system": ["a"], "recall_10": [0.5], "recall_10_lo": [0.4], "recall_10_hi": [0.6], "n": [12],
                       "ndcg": [0.3]})
    folded = tables.with_ci(df)
    assert list(folded.columns) == ["system", "recall_10", "n", "ndcg"]
    assert folded.loc[0, "recall_10"] == "0.50 [0.40, 0.60]" and folded.loc[0, "ndcg"] == 0.3


def test_html_table_escapes_fixes_precision_and_ids():
    df = pd.DataFrame({"system": ["<b>x</b> & y"], "n": [7], "v": [0.123456789], "inf": [np.inf], "ok": [True]})
    df = df.rename(columns={"v": "<i>v</i>"})
    a, b = tables.html_table(df, "t 1"), tables.html_table(df, "t 1")
    assert a == b                                                        # same table, same bytes
    assert "<b>x</b>" not in a and "&lt;b&gt;x&lt;/b&gt; &amp; y" in a
    assert "<i>v</i>" not in a and "&lt;i&gt;v&lt;/i&gt;" in a
    assert ">0.123<" in a and ">7<" in a and "∞" in a and ">yes<" in a
    assert 'id="T_t-1"' in a and "<style" not in a


def test_index_systems_table_folds_intervals_and_states_them_once(tmp_path):
    systems = pd.DataFrame({"system": ["bm25", "minilm"], "provenance": ["pixels"] * 2, "n": [96, 96],
                            "interval": ["bootstrap 95%, documents resampled"] * 2,
                            "recall_10": [0.9010416666666666, 0.7291666666666666],
                            "recall_10_lo": [0.8541666666666666, 0.6666666666666666],
                            "recall_10_hi": [0.953125, 0.7916666666666666], "encoder_id": ["bm25@x", "minilm@y"],
                            "kind": ["text", "single"]})
    (tmp_path / "tables").mkdir()
    systems.to_csv(tmp_path / "tables" / "systems.csv", index=False)
    page = site.build_index(tmp_path, params.recorded({"title": "t", "run": "r"}), []).read_text()
    # an interval is kept on one line (a narrow window wraps between the estimate and its interval)
    assert "0.90 [0.85,&nbsp;0.95]" in page and "0.73 [0.67,&nbsp;0.79]" in page
    assert "table.metric td{white-space:normal}" in page
    assert not re.search(r"\d\.\d{4,}", page)                            # no raw six-decimal floats
    assert page.count("documents resampled") == 1                        # the interval said once, under the table
    assert "<th" in page and "Recall@10" in page


def test_prose_columns_wrap_and_numbers_stay_on_one_line():
    df = pd.DataFrame({"effect": ["short"], "explanation": ["a long sentence that explains what was planted " * 2],
                       "value": ["0.50 [0.40, 0.60]"]})
    html = tables.html_table(df, "p")
    assert "#T_p_row0_col1 {" in html and "white-space: normal" in html
    assert "#T_p_row0_col0 {" not in html and "#T_p_row0_col2 {" not in html


def test_a_stage_says_one_interval_wording_once_under_its_table(tmp_path):
    from lookalike.stages.base import StageResult

    res = StageResult("07_x", "t", tmp_path)
    df = pd.DataFrame({"system": ["a", "b"], "top1": [0.5, 0.6], "top1_lo": [0.4, 0.5], "top1_hi": [0.6, 0.7],
                       "interval": ["bootstrap 95%, documents resampled"] * 2})
    res.html_table("x", df)
    html = res.html["x"]
    assert html.count("documents resampled") == 1 and "<caption>intervals: bootstrap 95%" in html
    res.html_table("y", df.assign(interval=["one", "two"]))                # differing wordings stay per row
    assert "<td" in res.html["y"] and ">one<" in res.html["y"] and ">two<" in res.html["y"]


def test_frames_a_stage_shows_take_the_report_table_style():
    """res.show[...] frames render as the report's tables: no 0..n index column, a pivot's row
    labels kept as a column, cells escaped and not truncated; no rows -> a sentence."""
    from lookalike.stages.base import StageResult

    res = StageResult("09_x", "t", Path("."))
    long_text = "a very long explanation " * 20
    res.show["units"] = pd.DataFrame({"unit": ["<b>u</b>"], "note": [long_text]})
    res.show["pivot"] = pd.DataFrame({"register": ["shown", "hidden"], "recall": [0.5, 0.25]}).set_index("register")
    res.show["empty"] = pd.DataFrame(columns=["a", "b"])
    res.show["other"] = "a string passes through"
    page = res.show["units"]._repr_html_()
    assert "&lt;b&gt;u&lt;/b&gt;" in page and long_text.strip() in page and "row_heading" not in page
    assert ">register<" in res.show["pivot"]._repr_html_() and ">shown<" in res.show["pivot"]._repr_html_()
    assert "..." not in repr(res.show["units"]) and repr(res.show["units"]).count("long explanation") == 20
    assert res.show["empty"]._repr_html_() == "<p>No rows: empty has nothing to show on this run.</p>"
    assert res.show["other"] == "a string passes through"


def test_an_empty_table_or_chart_is_a_sentence_or_nothing():
    import altair as alt

    from lookalike.stages.base import StageResult

    res = StageResult("09_x", "t", Path("."))
    res.html_table("by_source", pd.DataFrame(columns=["system", "n"]))
    assert res.html["by_source"] == "<p>No rows: by source has nothing to show on this run.</p>"
    assert "No missing thing table" in res.table_html("missing_thing").data
    empty, full = pd.DataFrame(columns=["x", "y"]), pd.DataFrame({"x": [1], "y": [2]})
    res.figure("bars", alt.Chart(empty).mark_bar().encode(x="x:Q", y="y:Q"))
    res.figure("layered", alt.Chart(empty).mark_bar().encode(x="x:Q") + alt.Chart(empty).mark_rule().encode(x="x:Q"))
    res.figure("faceted", alt.Chart(empty).mark_bar().encode(x="x:Q").properties(width=50).facet(column="y:N"))
    res.figure("drawn", alt.Chart(full).mark_bar().encode(x="x:Q", y="y:Q"))
    assert set(res.figures) == {"drawn"}
