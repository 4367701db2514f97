"""The door between the label pools (judging.door): the two pools compared on pairs both labelled, and why when they cannot be."""

from __future__ import annotations

import pandas as pd
import pytest
from lookalike.judging import door
from tests.judging.label_rows import door_units, frame


def test_people_door_compares_the_pools_on_pairs_both_labelled():
    questions = pd.DataFrame({"query_id": [f"q{i}" for i in range(8)], "text": ["What was the revenue?"] * 8})
    rows = []
    for i in range(8):
        pid = f"q{i}-u{i}"
        rows.append(("blind1", pid, "irrelevant", "blind"))
        # seeing the file name, the metadata pool calls the revenue_* pages relevant
        rows.append(("meta1", pid, "supporting" if i % 2 == 0 else "irrelevant", "metadata"))
    rows.append(("blind1", "q9-u9", "irrelevant", "blind"))     # labelled in one pool only: not compared
    per_pair, summary, why = door.people_door(frame(rows), questions, door_units())
    assert why == ""
    s = summary.iloc[0]
    assert s["judge"].startswith("people (1 blind, 1 seeing file name and caption")
    assert (s["n_pairs"], s["relevant_blind"], s["relevant_with_metadata"], s["gained"], s["lost"]) == (8, 0, 4, 4, 0)
    assert s["gained_with_term"] == 1.0 and s["others_with_term"] == 0.0
    assert s["share_with_metadata"] == 0.5 and s["share_with_metadata_lo"] <= 0.5 <= s["share_with_metadata_hi"]
    assert list(per_pair.columns) == door.DOOR_COLUMNS and per_pair["term_in_metadata"].sum() == 4


def test_people_door_says_why_when_a_pool_is_empty():
    questions = pd.DataFrame({"query_id": ["q1"], "text": ["What was the revenue?"]})
    only_blind = frame([("a", "q1-u1", "irrelevant", "blind")])
    _, summary, why = door.people_door(only_blind, questions, door_units())
    assert summary.empty and "no labels yet from the metadata pool" in why
    _, _, why = door.people_door(frame([]), questions, door_units())
    assert why == "no people's labels from either pool yet"
    apart = frame([("a", "q1-u1", "irrelevant", "blind"), ("b", "q2-u2", "irrelevant", "metadata")])
    assert "no pair has a label from both pools" in door.people_door(apart, questions, door_units())[2]


def test_people_door_counts_a_split_pool_as_its_share_instead_of_dropping_the_pair():
    """Two people per pool: where one person seeing captions moves to 'supporting' the pool splits —
    the very effect the door measures — and the pair counts half, not as a tie left out (seen on photos:
    12 split pairs dropped, the people row 'relevant 0 blind, 0 with metadata')."""
    questions = pd.DataFrame({"query_id": [f"q{i}" for i in range(4)], "text": ["What was the revenue?"] * 4})
    rows = []
    for i in range(4):
        pid = f"q{i}-u{i}"
        rows += [("b1", pid, "irrelevant", "blind"), ("b2", pid, "irrelevant", "blind"),
                 ("m1", pid, "supporting", "metadata"), ("m2", pid, "irrelevant", "metadata")]
    per_pair, summary, why = door.people_door(frame(rows), questions, door_units())
    s = summary.iloc[0]
    assert why == "" and s["n_pairs"] == 4 and s["gained"] == 4 and s["lost"] == 0
    assert (s["relevant_blind"], s["relevant_with_metadata"]) == (0, 2)
    assert s["share_blind"] == 0.0 and s["share_with_metadata"] == 0.5
    assert s["difference"] == pytest.approx(0.5) and s["difference_lo"] <= 0.5 <= s["difference_hi"]
    assert per_pair["with_metadata"].iloc[0] == "1 of 2 relevant (irrelevant, supporting)"


def test_a_judge_that_abstains_on_every_pair_measures_no_door():
    """On photos the judge door was 'measured' (difference 0.00 [0.00, 0.00]) on an answer-string judge that
    abstained on all 2,942 pairs (no answers to look for): it is not measured, and says why."""
    import pandas as pd

    from lookalike.judging import door as JD
    from lookalike.judging.judges import AnswerStringJudge
    from lookalike.judging.protocol import unit_viewer

    units = pd.DataFrame({"unit_id": ["p1:1", "p2:1"], "doc_id": ["p1", "p2"], "image_path": ["a.jpg", "b.jpg"],
                          "filename": ["red-car.jpg", "blue-boat.jpg"], "caption": ["a red car", "a blue boat"]})
    questions = pd.DataFrame({"query_id": ["q1"], "text": ["Which picture has a red car?"], "answer": [""]})
    pairs = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["p1:1", "p2:1"]})
    out, summary = JD.judge_door(AnswerStringJudge(), pairs, questions, unit_viewer(units, {}), units)
    assert out.empty and summary.empty
    assert "abstained on all 2 pairs" in summary.attrs["not_measured"] and "not measured" in summary.attrs["not_measured"]
