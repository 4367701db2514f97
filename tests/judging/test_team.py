"""What a team's labels say: Fleiss' and Cohen's kappa with reasons when undefined, the adjudicator's
queue (machine-flagged pairs first), progress, and the judge door measured with two pools of people."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lookalike.judging import team
from tests.judging.label_rows import frame


def test_fleiss_kappa_matches_the_hand_computation():
    # four pairs, two people each: (s,s) (s,i) (i,i) (p,p): p_o = 3/4, p_e = 22/64, kappa = 13/21
    k = team.fleiss_kappa(["sufficient", "sufficient", "irrelevant", "supporting"],
                          ["sufficient", "irrelevant", "irrelevant", "supporting"])
    assert k == pytest.approx(13 / 21)
    assert math.isnan(team.fleiss_kappa(["irrelevant"] * 5, ["irrelevant"] * 5))
    assert math.isnan(team.fleiss_kappa([], []))


def test_agreement_says_why_kappa_is_undefined():
    one_each = frame([("a", "q1-u1", "irrelevant"), ("b", "q1-u2", "sufficient")])
    row = team.agreement_table(one_each).iloc[0]
    assert row["n"] == 0 and math.isnan(row["kappa"]) and "no pair has two people's labels" in row["why"]
    same = frame([(n, f"q{i}-u{i}", "irrelevant") for i in range(1, 6) for n in ("a", "b")])
    table = team.agreement_table(same)
    overall = table.iloc[0]
    assert overall["n"] == 5 and overall["agreement"] == 1.0 and math.isnan(overall["kappa"])
    assert "every label was irrelevant" in overall["why"]
    assert "kappa undefined (every label was irrelevant" in team.agreement_words(overall)
    pair = table[table["scope"] == "people, pair of annotators"].iloc[0]
    assert (pair["first"], pair["second"], pair["n"]) == ("a", "b", 5) and pair["why"]


def test_agreement_overall_per_pair_of_people_and_model_vs_people():
    labs = ["sufficient", "irrelevant", "supporting", "irrelevant", "sufficient", "irrelevant", "supporting", "irrelevant"]
    other = ["sufficient", "irrelevant", "supporting", "supporting", "sufficient", "irrelevant", "irrelevant", "irrelevant"]
    rows = [("a", f"q{i}-u{i}", lab) for i, lab in enumerate(labs)] + [("b", f"q{i}-u{i}", lab) for i, lab in enumerate(other)]
    labels = frame(rows)
    machine = pd.DataFrame({"pair_id": [f"q{i}-u{i}" for i in range(8)], "judge": "answer-string", "label": labs})
    table = team.agreement_table(labels, machine, seed=1)
    assert list(table["scope"]) == ["people, overall", "people, pair of annotators", "model vs people"]
    overall = table.iloc[0]
    assert overall["n"] == 8 and overall["agreement"] == pytest.approx(6 / 8)
    assert overall["kappa"] == pytest.approx(team.fleiss_kappa(labs, other))
    assert overall["kappa_lo"] <= overall["kappa"] <= overall["kappa_hi"]
    # model vs people: people's label is the majority — a tie between a and b leaves the pair out
    model = table.iloc[2]
    assert model["n"] == 6 and model["agreement"] == 1.0


def test_resolved_takes_the_adjudication_then_the_majority_and_leaves_ties_out():
    labels = frame([("a", "q1-u1", "irrelevant"), ("b", "q1-u1", "sufficient"),
                    ("a", "q2-u2", "irrelevant"), ("b", "q2-u2", "sufficient"), ("boss", "q2-u2", "supporting", "blind", "adjudication"),
                    ("a", "q3-u3", "irrelevant"), ("b", "q3-u3", "irrelevant"), ("c", "q3-u3", "sufficient")])
    out = team.resolved(labels).set_index("pair_id")
    assert "q1-u1" not in out.index
    assert (out.loc["q2-u2", "label"], out.loc["q2-u2", "basis"]) == ("supporting", "adjudicated")
    assert (out.loc["q3-u3", "label"], out.loc["q3-u3", "basis"]) == ("irrelevant", "majority")


def test_the_adjudicators_queue_puts_machine_flagged_pairs_first():
    pairs = pd.DataFrame({"pair_id": ["q1-u1", "q2-u2", "q3-u3", "q4-u4"], "query_id": ["q1", "q2", "q3", "q4"],
                          "unit_id": ["u1", "u2", "u3", "u4"], "question": ["a", "b", "c", "d"],
                          "flagged": ["", "", "answer-string", ""]})
    labels = frame([("a", "q1-u1", "irrelevant"), ("b", "q1-u1", "sufficient"),     # people disagree
                    ("a", "q2-u2", "irrelevant"), ("b", "q2-u2", "irrelevant"),     # agree: not queued
                    ("a", "q3-u3", "irrelevant"),                                   # flagged, one person
                    ("a", "q4-u4", "irrelevant"), ("b", "q4-u4", "supporting"),
                    ("boss", "q4-u4", "irrelevant", "blind", "adjudication")])     # settled: not queued
    queue = team.disagreements(labels, pairs)
    assert list(queue["pair_id"]) == ["q3-u3", "q1-u1"]
    assert queue["reason"].iloc[0].startswith("flagged by answer-string")
    assert queue["labels"].iloc[1] == "a: irrelevant; b: sufficient"


def test_progress_counts_slots_rates_and_time_left():
    pairs = pd.DataFrame({"pair_id": [f"q{i // 2}-u{i}" for i in range(6)], "query_id": [f"q{i // 2}" for i in range(6)]})
    annotators = pd.DataFrame({"name": ["a", "b"], "pool": "blind", "role": "annotator"})
    nothing = team.progress(frame([]).reindex(columns=["pair_id", "annotator", "kind", "label", "time", "retracted"]),
                            pairs, annotators, per_pair=2)
    assert (nothing["slots"], nothing["filled"], nothing["hours_left"]) == (12, 0, None)
    labels = frame([("a", "q0-u0", "irrelevant", "blind", "label", 0), ("a", "q0-u1", "irrelevant", "blind", "label", 30),
                    ("b", "q0-u0", "irrelevant", "blind", "label", 59)])
    p = team.progress(labels, pairs, annotators, per_pair=2)
    assert (p["slots"], p["filled"]) == (12, 3)
    assert p["labels_per_hour"] == pytest.approx(2 / (59 / 60))
    assert p["hours_left"] == pytest.approx(9 / p["labels_per_hour"])
    per_q = p["per_question"].set_index("query_id")
    assert (per_q.loc["q0", "slots_filled"], per_q.loc["q0", "pairs_complete"], per_q.loc["q0", "slots"]) == (3, 1, 4)
    per_a = p["per_annotator"].set_index("annotator")
    assert per_a.loc["a", "labels"] == 2 and per_a.loc["a", "labels_per_hour"] == pytest.approx(2.0)
    assert math.isnan(per_a.loc["b", "labels_per_hour"])      # one label: no rate


def test_with_two_pools_people_agree_within_a_pool_and_the_model_meets_the_blind_pool():
    rows = []
    for i in range(6):
        pid = f"q{i}-u{i}"
        rows += [("b1", pid, "irrelevant", "blind"), ("b2", pid, "irrelevant" if i else "supporting", "blind"),
                 ("m1", pid, "supporting", "metadata")]
    labels = frame(rows)
    machine = pd.DataFrame({"pair_id": [f"q{i}-u{i}" for i in range(6)], "judge": "answer-string", "label": "irrelevant"})
    table = team.agreement_table(labels, machine)
    assert list(table["scope"]) == ["people, overall (blind pool)", "people, pair of annotators (blind pool)",
                                    "people, overall (metadata pool)", "model vs people"]
    assert table.iloc[0]["n"] == 6 and table.iloc[0]["agreement"] == pytest.approx(5 / 6)
    assert table.iloc[2]["n"] == 0                          # one metadata person: nothing to agree on
    model = table.iloc[3]
    assert model["second"].endswith("blind pool)") and model["n"] == 5 and model["agreement"] == 1.0


def test_the_metadata_pool_never_reaches_adjudication():
    """With the judge door on, a pair that only the metadata pool split is not queued, and a queued pair
    shows the adjudicator the blind pool's labels alone (seen on photos: 2 of 5 adjudicated pairs got
    there only because the metadata pool split, and the adjudicator read 'ann3: supporting')."""
    pairs = pd.DataFrame({"pair_id": ["q1-u1", "q2-u2"], "query_id": ["q1", "q2"], "unit_id": ["u1", "u2"],
                          "question": ["a", "b"], "flagged": ["", ""]})
    labels = frame([("ann1", "q1-u1", "irrelevant"), ("ann2", "q1-u1", "irrelevant"),            # blind agree
                    ("ann3", "q1-u1", "supporting", "metadata"), ("ann4", "q1-u1", "irrelevant", "metadata"),
                    ("ann1", "q2-u2", "irrelevant"), ("ann2", "q2-u2", "sufficient"),            # blind split
                    ("ann3", "q2-u2", "supporting", "metadata")])
    queue = team.disagreements(labels, pairs)
    assert list(queue["pair_id"]) == ["q2-u2"]
    assert queue["labels"].iloc[0] == "ann1: irrelevant; ann2: sufficient" and "ann3" not in queue["labels"].iloc[0]


def test_a_round_of_labelling_says_what_it_costs_before_anyone_labels():
    pairs = pd.DataFrame({"pair_id": [f"q{i % 3}-u{i}" for i in range(12)], "query_id": [f"q{i % 3}" for i in range(12)]})
    assert team.round_cost(pairs, 2, 2) == ("this round: 12 pairs for 3 questions × 2 label(s) per pair × 2 pools "
                                            "= 48 labels to make; 0 made")
    # two labels an hour apart: 2 per hour, 46 left
    labels = frame([("a", "q0-u0", "irrelevant", "blind", "label", 0), ("a", "q1-u1", "irrelevant", "blind", "label", 0)])
    labels.loc[1, "time"] = "2026-12-04T11:00:00.000+00:00"
    assert team.round_cost(pairs, 2, 2, labels).endswith("2 made; at the team's 2 labels per hour so far, about 23.0 hours left")
    assert team.round_cost(pairs, 1, 1) == "this round: 12 pairs for 3 questions × 1 label(s) per pair = 12 labels to make; 0 made"
