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


def test_agreement_leaves_out_the_pairs_a_judge_abstained_on():
    """A second judge that abstains (it cannot see a chart's drawing) ended stage 05 in KeyError: 'abstain';
    its abstentions are counted and left out of the agreement, and one that abstains on every pair measures
    nothing."""
    import pandas as pd

    from lookalike.judging.protocol import ABSTAIN, Judgement
    from lookalike.stages import validate_questions

    class Second:
        name = "second"

        def __init__(self, abstain_on):
            self.abstain_on = abstain_on

        def judge(self, question, unit):
            if unit["unit_id"] in self.abstain_on:
                return Judgement(ABSTAIN, "a chart", self.name)
            return Judgement("sufficient", "", self.name)

    class First:
        name = "first"

    judgements = pd.DataFrame({"query_id": ["q1", "q1", "q2"], "attempt": [0, 0, 0], "role": ["gold", "distractor", "gold"],
                               "unit_ids": ["a:1", "b:1", "c:1"], "label": ["sufficient", "irrelevant", "sufficient"]})
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["x", "y"], "evidence_structure": ["page-single"] * 2})
    view = lambda ids: {"unit_id": ";".join(ids)}                                   # noqa: E731
    sec, table = validate_questions.agreement_section(judgements, Second({"b:1"}), questions, view, First())
    assert "1 of 3 pairs left out of the agreement: 1 the second judge abstained on" in sec.text["agreement"]
    assert table.set_index("subset").loc["all pairs", "n"] == 2
    sec, table = validate_questions.agreement_section(judgements, Second({"a:1", "b:1", "c:1"}), questions, view, First())
    assert table.empty and "agreement not measured" in sec.text["agreement"]
