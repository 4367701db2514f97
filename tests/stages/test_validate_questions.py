"""Stage 05, question validation (stages.validate_questions): cleaning that drops or flags, the second judge never the first, statuses that agree with the validated set."""

from __future__ import annotations

import pandas as pd
from tests.stages.recording import (MODULES, call, recorded_input)
import pytest


def test_cleaning_in_drop_mode_leaves_the_flagged_questions_out(recorded):
    asked = recorded_input(recorded, "validate_questions", "cleaning_section", "questions")
    pointing = asked.iloc[:2].assign(query_id=["zz-1", "zz-2"], text=["Describe the chart above.",
                                                                    "What does the table on this page show?"])
    asked = pd.concat([asked, pointing], ignore_index=True)
    sec, kept = call(recorded, "validate_questions", "cleaning_section", questions=asked, mode="drop")
    flagged = set(sec.tables["question_cleaning"]["query_id"])
    assert {"zz-1", "zz-2"} <= flagged
    assert flagged and not flagged & set(kept["query_id"])
    assert set(kept["query_id"]) | flagged == set(asked["query_id"])
    assert f"{len(flagged)} left out of validation" in sec.text["cleaning"]
    flagged_only, kept_all = call(recorded, "validate_questions", "cleaning_section", questions=asked, mode="flag")
    assert len(kept_all) == len(asked)


def test_validate_setup_says_when_the_second_judge_is_the_first(recorded):
    judge = recorded_input(recorded, "validate_questions", "setup_section", "judge")
    sec, = MODULES["validate_questions"].setup_section(judge, None, judge.name)
    assert "a judge is never compared with itself" in sec.text["setup"]
    sec, = MODULES["validate_questions"].setup_section(judge, None, "")
    assert "never compared" not in sec.text["setup"] and "second judge: none" in sec.text["setup"]


@pytest.mark.slow
def test_validation_statuses_and_validated_set_agree(results):
    _, out = results
    v, validated = out["validate_questions"].tables["question_validation"], out["validate_questions"].tables["questions_validated"]
    kept = v[v["slice"] != "dropped"]["query_id"]
    assert sorted(kept) == sorted(validated["query_id"])
