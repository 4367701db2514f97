"""The blind and caption-derived queries of the leak ablation (analysis.leak_queries): drawn from the page, never from the caption; paraphrase; your own blind queries' twins."""

from __future__ import annotations

import pandas as pd
import pytest
from lookalike.analysis import leakage


def test_paraphrase_is_deterministic_and_rewords():
    text = "Halvorsen Energy revenue by segment, Q2 FY2024"
    assert leakage.paraphrase(text) == leakage.paraphrase(text) == "Q2 FY2024, Halvorsen Energy sales by segment"
    assert leakage.paraphrase("bar chart with Grid $1,038M, Q2 FY2024") == "Q2 FY2024, bar graph with Grid $1,038M"


def test_blind_queries_come_from_the_page_and_never_from_the_caption(ci_corpus):
    c, _ = ci_corpus
    q = leakage.build_query_sets(c.units, seed=7, visible=c.visible, facts=c.facts)
    blind, derived = q[q["query_set"] == "blind"], q[q["query_set"] == "caption-derived"]
    assert len(blind) == len(derived) > 20
    assert list(blind["unit_id"]) == list(derived["unit_id"])
    assert list(blind["register"]) == list(derived["register"])
    # the blind path is never handed a caption field: garbling every caption changes no blind query
    garbled = c.units.assign(filename="zzz.png",
                             alt_text=c.units["alt_text"].where(c.units["alt_text"] == "", "alt " + c.units["unit_id"]),
                             caption=c.units["caption"].where(c.units["caption"] == "", "Caption " + c.units["unit_id"]))
    again = leakage.build_query_sets(garbled, seed=7, visible=c.visible, facts=c.facts)
    again = again[again["query_set"] == "blind"].set_index("unit_id")["text"]
    assert set(blind["unit_id"]) <= set(again.index)
    assert list(again[blind["unit_id"]]) == list(blind["text"])
    # each blind query prints something the page shows: a colour word and a printed value or line
    colours = dict(zip(c.visible["unit_id"], c.visible["colour"]))
    assert all(colours[u] in t for u, t in zip(blind["unit_id"], blind["text"]))
    # their words come from the page, the caption-derived ones from the caption
    overlap = leakage.caption_overlap(q, c.units).set_index("query_set")
    assert overlap.loc["caption-derived", "overlap_lo"] > overlap.loc["blind", "overlap_hi"]
    assert overlap.loc["caption-derived", "overlap"] > 2 * overlap.loc["blind", "overlap"]
    source = c.units.set_index("unit_id")["caption"]
    targets = source[blind["unit_id"]].str.lower()
    assert targets[targets != ""].is_unique


def test_without_a_visible_record_blind_queries_fall_back_to_metadata(ci_units):
    units, _ = ci_units
    q = leakage.build_query_sets(units, seed=7)
    blind = q[q["query_set"] == "blind"]
    assert len(blind) > 20 and all("entity" in x for x in blind["qualifiers"])


def test_users_own_blind_queries_get_caption_derived_twins(tmp_path, ci_units):
    units, _ = ci_units
    with_caption = units[units["caption"] != ""].head(3)
    no_caption = units[(units["caption"] == "") & (units["alt_text"] == "")].head(1)
    rows = [{"query_id": f"u{i}", "unit_id": uid, "text": f"page {i} as I saw it", "register": "question"}
            for i, uid in enumerate(list(with_caption["unit_id"]) + list(no_caption["unit_id"]))]
    pd.DataFrame(rows).to_csv(tmp_path / "blind.csv", index=False)
    q, dropped = leakage.read_blind_queries(tmp_path / "blind.csv", units)
    assert list(dropped["unit_id"]) == list(no_caption["unit_id"]) and list(dropped["row"]) == [5]
    assert "no caption or alt text" in dropped["problem"].iloc[0]
    assert list(q["query_set"].value_counts().sort_index()) == [3, 3]         # the caption-less unit is dropped
    assert set(q["register"]) == {"question"}
    assert set(q[q["query_set"] == "blind"]["text"]) == {"page 0 as I saw it", "page 1 as I saw it", "page 2 as I saw it"}
    pd.DataFrame([{"query_id": "x", "unit_id": "nope:1", "text": "t"}]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="bad.csv: row 1 \\(query 'x'\\): unknown unit_id 'nope:1'"):
        leakage.read_blind_queries(tmp_path / "bad.csv", units)
