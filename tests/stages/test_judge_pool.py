"""Stage 06, the judge pool (stages.judge_pool)."""

from __future__ import annotations

import pandas as pd
from lookalike.judging.judges import AnswerStringJudge
from tests.judging.label_rows import door_units, frame
from tests.stages.recording import (call, recorded_input)


def test_stage_06_measures_the_door_the_label_database_ran_with():
    """Served with --door, then stage 06 run with labels.door off in the params: the database holds a
    metadata pool, so the door is measured and the mismatch said (it once said 'labels.door is off, so
    everyone labelled blind' beside 61 labels from the metadata pool)."""
    from lookalike.stages import judge_pool

    questions = pd.DataFrame({"query_id": ["q0", "q1"], "text": ["What was the revenue?"] * 2})
    rows = [("b1", "q0-u0", "irrelevant", "blind"), ("m1", "q0-u0", "supporting", "metadata"),
            ("b1", "q1-u1", "irrelevant", "blind"), ("m1", "q1-u1", "irrelevant", "metadata")]
    sec, _, summary = judge_pool.door_section(AnswerStringJudge(), None, pd.DataFrame(), questions, None, door_units(),
                                              pd.DataFrame(), frame(rows), people_door=False)
    assert "the labels are what happened, so the door is measured" in sec.text["door"]
    assert list(summary["judge"].str.startswith("people")) == [True] and summary["gained"].iloc[0] == 1
    blind_only = frame([("b1", "q0-u0", "irrelevant", "blind")])
    sec, _, summary = judge_pool.door_section(AnswerStringJudge(), None, pd.DataFrame(), questions, None,
                                              door_units(), pd.DataFrame(), blind_only, people_door=False)
    assert summary.empty and "holds no metadata pool" in sec.text["door"]


def test_judged_at_k_is_a_share_and_falls_to_zero_without_labels(recorded):
    sec, qrels, judged = call(recorded, "judge_pool", "judged_section")
    cols = ["judged_1", "judged_5", "judged_10", "judged_20"]
    assert len(judged) and ((judged[cols] >= 0) & (judged[cols] <= 1)).all().all()
    current = recorded_input(recorded, "judge_pool", "judged_section", "current")
    _, _, none = call(recorded, "judge_pool", "judged_section", current=current.iloc[:0])
    assert (none[cols] == 0).all().all()


def test_the_labelling_sheet_offers_pairs_no_person_has_labelled():
    """On photos, 2,535 of 2,595 pooled pairs were unlabelled, yet the sheet held the 60 pairs the corpus's qrels
    had labelled already (the sheet drew only from pairs that had some label)."""
    from lookalike.stages.judge_pool import sheet_pairs

    pooled = pd.DataFrame({"query_id": [f"q{i % 3}" for i in range(30)], "unit_id": [f"p{i:02d}:1" for i in range(30)]})
    # the corpus's qrels labelled six pairs (people's labels), a model pre-labelled four others
    current = pd.DataFrame({"query_id": list(pooled["query_id"][:10]), "unit_id": list(pooled["unit_id"][:10]),
                            "source": ["human"] * 6 + ["model"] * 4})
    need, again, unlabelled = sheet_pairs(pooled, current, 8, seed=3)
    people = set(zip(current["query_id"][:6], current["unit_id"][:6]))
    assert unlabelled == 24 and len(need) == 8 and len(again) == 0
    assert not set(zip(need["query_id"], need["unit_id"])) & people
    assert need.equals(sheet_pairs(pooled, current, 8, seed=3)[0])          # seeded: the same sheet twice
    assert not need.equals(sheet_pairs(pooled, current, 8, seed=4)[0])
    # room left after every unlabelled pair: people's pairs come back, for agreement with their labels
    need, again, _ = sheet_pairs(pooled, current, 28, seed=3)
    assert len(need) == 24 and len(again) == 4 and set(zip(again["query_id"], again["unit_id"])) <= people
