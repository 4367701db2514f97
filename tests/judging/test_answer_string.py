"""The answer-string judge (judging.answer_string): it reads the answer in the unit's text, says supporting only for the asked entity and metric, and abstains where it cannot see."""

from __future__ import annotations

import pandas as pd
import pytest
from lookalike.judging import judges


@pytest.mark.parametrize("text, expected", [
    ("Revenue $1,234M", [1.234e9]),
    ("$-59M and (12.5)", [-59e6, -12.5]),
    ("+9.1% growth, 9,620 staff", [9.1, 9620.0]),
    ("1.5bn", [1.5e9]),
])
def test_number_normalisation(text, expected):
    assert judges.normalise_numbers(text) == pytest.approx(expected)


def test_answer_string_judge():
    judge = judges.AnswerStringJudge()
    q = {"text": "What was Corvane Systems' operating income in Q1 FY2024?", "answer": "$183M"}
    page = {"text": "Key figures Operating income $183M $167M Corvane Systems"}
    assert judge.judge(q, page).label == "sufficient"
    other = {"text": "Key figures Operating income $190M Corvane Systems Q1 FY2024"}
    assert judge.judge(q, other).label == "supporting"
    assert judge.judge(q, {"text": "Risk factors Demand may decline"}).label == "irrelevant"
    assert judges.answer_in_text("183 million", "operating income $183M", "What was the operating income?")  # scale words agree
    assert judges.answer_in_text("Devices, $437M", "Cloud $216M Devices $437M")
    assert not judges.answer_in_text("$-59M", "Capital expenditure $59M", "What was the capital expenditure?")  # signs matter


def test_answer_string_needs_the_answers_words_not_only_its_numbers():
    """A casino operator's earnings page printing the same figure does not answer a beverage
    company's question; a bare number matches only beside the question's words; N/A never matches."""
    judge = judges.AnswerStringJudge()
    q = {"text": "What was Fizzco Beverages' net revenue in 2022?", "answer": "$2,310 million net revenue"}
    casino = {"text": "Lucky Star Casinos: gaming revenue 2,310 million in 2022"}
    assert judge.judge(q, casino).label != "sufficient"                  # the old rule said sufficient (numbers only)
    right = {"text": "Fizzco Beverages 2022: net revenue $2,310 million"}
    got = judge.judge(q, right)
    assert got.label == "sufficient" and "2,310,000,000" in got.rationale and "net" in got.rationale
    bare = {"text": "How many plants did Fizzco Beverages open in 2022?", "answer": "2"}
    assert judge.judge(bare, {"text": "Table 2: weather in Oslo, page 6 of 9"}).label != "sufficient"
    assert judge.judge(bare, {"text": "Fizzco Beverages opened 2 plants in 2022"}).label == "sufficient"
    assert not judges.answer_in_text("N/A", "N/A appears here, and so does everything else")
    assert not judges.answer_in_text("", "anything")


def test_answer_string_supporting_needs_the_asked_entity_and_metric(ci_demo):
    judge = judges.AnswerStringJudge.from_resources(units=ci_demo.units)
    q = {"text": "What was Corvane Systems' operating income in Q1 FY2024?", "answer": "$183M"}
    same_subject = {"text": "Key figures Q3 FY2024 Operating income $190M $170M CORVANE SYSTEMS Page 4"}
    assert judge.judge(q, same_subject).label == "supporting"
    # the same template's words (title, columns, period) for another entity: the old rule called
    # this supporting because most subject terms were there
    look_alike = {"text": "Key figures Q1 FY2024 compared with Q1 FY2023 Metric Operating income $88M income "
                          "HALVORSEN ENERGY Page 4"}
    assert judges.AnswerStringJudge().judge(q, look_alike).label == "supporting"      # no vocabulary: the old rule
    assert judge.judge(q, look_alike).label == "irrelevant"
    assert judge.judge(q, {"text": "Operating income $183M CORVANE SYSTEMS"}).label == "sufficient"


def test_the_answer_string_judge_abstains_where_it_cannot_see():
    """Seen on photos with captions: no answers and no OCR text, and every pair was labelled
    'irrelevant' — then counted as measured."""
    from lookalike.judging import judges
    from lookalike.judging.protocol import ABSTAIN

    judge = judges.make_judge("answer-string")
    no_answer = judge.judge({"text": "A lone person skiing", "answer": ""}, {"text": "ski slope, person"})
    no_text = judge.judge({"text": "revenue of Acme in 2023?", "answer": "$12M"}, {"text": "  "})
    assert no_answer.label == ABSTAIN and "no answer" in no_answer.rationale
    assert no_text.label == ABSTAIN and "no text" in no_text.rationale
    assert judge.judge({"text": "revenue of Acme?", "answer": "$12M"}, {"text": "Acme revenue $12M"}).label == "sufficient"
    pairs = pd.DataFrame({"query_id": ["q1", "q2"], "unit_id": ["u1", "u2"]})
    questions = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["revenue of Acme?", "revenue of Acme?"],
                              "answer": ["$12M", "$12M"]})
    texts = {"u1": "Acme revenue $12M", "u2": ""}
    labels = judges.label_pairs(judge, pairs, questions, lambda ids: {"text": texts[ids[0]]})
    assert list(labels["unit_id"]) == ["u1"] and sum(labels.attrs["abstained"].values()) == 1


def test_a_text_judge_abstains_where_the_evidence_is_drawn_not_written():
    """On long documents the answer-string judge labelled 40 of 63 pages whose evidence is a figure
    'irrelevant': their text cannot show what the figure draws. It keeps 'sufficient' where the answer is in
    the text (a printed value is evidence) and abstains otherwise."""
    import pandas as pd

    from lookalike.judging.protocol import ABSTAIN, unit_viewer

    units = pd.DataFrame({"unit_id": ["d:1", "d:2", "d:3"], "image_path": ["a.png", "b.png", "c.png"],
                          "content_type": ["chart", "chart", "text"]})
    texts = {"d:1": "Revenue by quarter Q1 Q2 Q3", "d:2": "Revenue by quarter 4.2 million", "d:3": "Revenue by quarter"}
    view = unit_viewer(units, texts)
    judge = judges.AnswerStringJudge()
    question = {"text": "What was the revenue in Q3?", "answer": "4.2 million"}
    chart = judge.judge(question, view(["d:1"]))
    assert chart.label == ABSTAIN and "chart" in chart.rationale
    assert judge.judge(question, view(["d:2"])).label == "sufficient"
    assert judge.judge(question, view(["d:3"])).label in ("irrelevant", "supporting")     # text: it can read it
    assert judge.judge(question, view(["d:1", "d:3"])).label != ABSTAIN                # not all of it is drawn
