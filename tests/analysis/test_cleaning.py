"""Query cleaning: each rule flags what it names and leaves closed questions alone; drop lists what it drops."""

import pandas as pd
import pytest

from lookalike.analysis import cleaning


@pytest.mark.parametrize("text, rule", [
    ("What is the total revenue in the table?", "layout-reference"),
    ("Which region is listed above?", "layout-reference"),
    ("What does the chart on this slide show for Q3?", "layout-reference"),
    ("Is the figure below the 2024 restatement?", "layout-reference"),
    ("Describe the revenue trend across the year.", "not-closed"),
    ("Discuss the main risk factors of Halvorsen Energy.", "not-closed"),
    ("What do you think of the margin in Q2 FY2024?", "not-closed"),
    ("Revenue?", "too-short"),
    ("What was its revenue in Q1 FY2024?", "dangling-pronoun"),
    ("How much did they spend on capex in FY2024?", "dangling-pronoun"),
])
def test_each_rule_flags_what_it_names(text, rule):
    assert rule in [r for r, _ in cleaning.flags(text)]


@pytest.mark.parametrize("text", [
    "Which segment contributed the most revenue at Corvane Systems in Q1 FY2024?",
    "Was operating margin above the target at Halvorsen Retail in Q2 FY2024?",
    "Did free cash flow fall below $100M at Corvane Systems in FY2024?",
    "What was the restated net income of Halvorsen Energy in Q3 FY2024?",
    "Which company reported the highest dividends paid in Q4 FY2024?",
])
def test_closed_questions_about_content_pass(text):
    assert cleaning.flags(text) == []


def test_flag_keeps_every_question_and_drop_lists_what_it_leaves_out():
    qs = pd.DataFrame({"query_id": ["q1", "q2", "q3"],
                       "text": ["What is the total in the table below?", "What was Corvane's revenue in Q1 FY2024?",
                                "Describe it."]})
    kept, flagged, summary = cleaning.clean(qs, "flag")
    assert list(kept["query_id"]) == ["q1", "q2", "q3"] and set(flagged["action"]) == {"flagged"}
    assert set(flagged["query_id"]) == {"q1", "q3"}
    row = summary.set_index("rule").loc["not-closed"]
    assert row["questions"] == 1 and row["n"] == 3 and row["examples"] == "q3: Describe it."
    kept, flagged, summary = cleaning.clean(qs, "drop")
    assert list(kept["query_id"]) == ["q2"] and set(flagged["action"]) == {"dropped"}
    # q3 breaks two rules and is listed under each; nothing is dropped without its reason
    assert sorted(flagged[flagged["query_id"] == "q3"]["rule"]) == ["not-closed", "too-short"]
    with pytest.raises(ValueError, match="questions.clean"):
        cleaning.clean(qs, "fix")
