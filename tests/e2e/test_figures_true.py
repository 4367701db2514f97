"""Defects the corpus-shape lane found, each pinned by a test that fails on the old behaviour."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lookalike.analysis import leakage
from lookalike.analysis import negatives
from lookalike.analysis import questions as Q
from lookalike.eval import ranking
from lookalike.judging.judges import Judgement
from lookalike.retrieval import indexes
from lookalike.retrieval.encoders.base import Vectors


def test_dense_index_resolves_ties_wider_than_its_margin_by_the_canonical_rule():
    """A caption index that scores all 124 pages of one PDF alike: the exported top k is the
    canonical one (ties by unit id descending), not faiss' internal order (it asked for k + 16)."""
    ids = [f"doc:{i}" for i in range(1, 125)]
    data = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (len(ids), 1))
    index = indexes.DenseIndex(accepts=("caption-text",), name="caption").add(Vectors("e", "caption-text", ids, data))
    got = index.search(Vectors("e", "caption-text", ["q"], np.array([[1.0, 0.0]], dtype=np.float32)), k=10)
    full = ranking.rank(pd.DataFrame({"query_id": "q", "unit_id": ids, "score": 1.0}))
    assert list(got["unit_id"]) == list(full["unit_id"][:10])
    assert list(got["unit_id"])[:3] == ["doc:99", "doc:98", "doc:97"]       # strcmp order, descending


class _SetJudge:
    """'sufficient' exactly when the evidence set holds every unit of one of the answering sets."""
    name = "fake"

    def __init__(self, answering):
        self.answering = [set(a) for a in answering]

    def judge(self, question, view):
        ids = set(view["ids"])
        ok = any(a <= ids for a in self.answering)
        return Judgement("sufficient" if ok else "irrelevant", "fake", self.name, "A" if ok else "")


def test_multi_page_distractor_answers_only_when_the_other_gold_pages_alone_do_not():
    q = {"query_id": "q1", "evidence_unit_ids": "g1;g2", "answer": "A", "text": "t"}
    view = lambda ids: {"ids": list(ids)}                             # noqa: E731
    distractors = {"g1": [("d1", "entity")], "g2": [("d2", "period")]}
    # g2 alone already answers: putting d1 in g1's place (d1 + g2) "answers" only because of g2
    judge = _SetJudge([{"g1", "g2"}, {"g2"}])
    v = Q.is_well_posed(q, distractors, judge, view)
    assert v.status == "ok", v.answering                             # was answerable_from_distractor
    assert any(r["role"] == "rest" for r in v.log)
    # a distractor that really stands in for g1 (the rest, g2, does not answer alone) is caught
    judge = _SetJudge([{"g1", "g2"}, {"d1", "g2"}])
    v = Q.is_well_posed(q, distractors, judge, view)
    assert v.status == "answerable_from_distractor" and v.answering[0][1] == "d1"


def _questions(**extra):
    base = {"query_id": "q1", "text": "Which picture shows a red circle?", "answer": "", "evidence_structure": "",
            "register": "question", "qualified": False, "qualifiers": "", "evidence_unit_ids": "p:1"}
    return pd.DataFrame([{**base, **extra}])


class _AnswerJudge:
    name = "answer-string"

    class capabilities:                                                 # noqa: N801 - mimics Capabilities
        needs_answer = True

    def judge(self, question, view):
        return Judgement("sufficient", "x", self.name, str(question.get("answer", "")))


def test_people_judged_questions_without_answers_are_kept_and_say_the_check_did_not_run():
    units = pd.DataFrame({"unit_id": ["p:1", "p:2"]})
    distractors = pd.DataFrame({"gold_unit_id": ["p:1"], "unit_id": ["p:2"], "axis": ["cluster"]})
    v, kept, _ = Q.validate(_questions(), distractors, _AnswerJudge(), lambda ids: {}, units, gold_from_people=True)
    assert list(kept["query_id"]) == ["q1"] and v.loc[0, "slice"] == "single-gold"   # was "not validated", unscored
    assert "distractor check not run: answer-string needs an answer" in v.loc[0, "note"]
    # an answer text "N/A" does not override the page people judged
    v, kept, _ = Q.validate(_questions(answer="N/A"), distractors, _AnswerJudge(), lambda ids: {}, units,
                            gold_from_people=True)
    assert v.loc[0, "status"] == "no_answer" and list(kept["query_id"]) == ["q1"]


def test_a_machine_judge_never_moves_a_people_judged_question_out_of_the_main_set():
    units = pd.DataFrame({"unit_id": ["p:1", "p:2"], "entity": ["A", "B"], "period": ["", ""], "metric": ["", ""],
                          "revision": [1, 1]})
    distractors = pd.DataFrame({"gold_unit_id": ["p:1"], "unit_id": ["p:2"], "axis": ["entity"]})
    v, kept, _ = Q.validate(_questions(answer="7"), distractors, _AnswerJudge(), lambda ids: {}, units,
                            gold_from_people=True)
    assert v.loc[0, "slice"] == "single-gold" and v.loc[0, "flagged_by"] == "answer-string"
    assert kept.loc[0, "text"] == "Which picture shows a red circle?"     # no qualifier added to people's question
    assert "p:2" in v.loc[0, "note"]


def test_ladder_slopes_read_back_from_csv_with_unmeasured_rungs():
    ladder = pd.DataFrame({"negatives": ["random", "random", "random", "hard", "hard"],
                           "p": ["0.0", "0.5", "1.0", "0.0", "1.0"], "top1": ["0.5", "", "0.5", "0.2", "0.9"]})
    slopes = negatives.ladder_slopes(ladder)                                 # was ValueError: could not convert ''
    assert slopes["random"] == 0.0 and slopes["hard"] == pytest.approx(0.7)


def test_degenerate_query_sets_are_refused_with_their_counts():
    q = pd.DataFrame({"query_set": ["blind"] * 159, "text": ["Which page shows page for ,?"] * 150 + [f"x{i}" for i in range(9)]})
    why = leakage.degenerate_queries(q)
    assert "159 queries, 10 distinct texts" in why
    fine = pd.DataFrame({"query_set": ["blind"] * 20, "text": [f"a photo of thing {i}" for i in range(20)]})
    assert leakage.degenerate_queries(fine) == ""


def test_a_one_question_structure_leaves_the_macro_without_an_interval():
    """A one-question evidence structure entered the Macro as exact (its resamples all equal)."""
    from lookalike.analysis import scoring

    questions = pd.DataFrame({"query_id": ["a", "b", "c"], "evidence_structure": ["page-single", "page-single", "cross-doc"]})
    qrels = pd.DataFrame({"query_id": ["a", "b", "c"], "unit_id": ["u1", "u2", "u3"], "relevance": [1, 1, 1]})
    run = pd.DataFrame({"query_id": ["a", "b", "c"], "unit_id": ["u1", "u9", "u3"], "score": [1.0, 1.0, 1.0]})
    table, _ = scoring.evidence_complete(qrels, {"sys": run}, questions, ks=(10,), n_boot=200)
    macro = table[(table["aggregate"] == "macro") & (table["measure"] == "Recall")].iloc[0]
    assert macro["value"] == pytest.approx(0.75) and np.isnan(macro["value_lo"]) and np.isnan(macro["value_hi"])
    single = table[(table["aggregate"] == "structure") & (table["evidence_structure"] == "cross-doc")].iloc[0]
    assert np.isnan(single["value_lo"])
    assert "cross-doc has one question" in scoring.macro_weights(table)


def test_recall_is_shown_beside_chance_and_a_ratio_of_chance_level_figures_is_not_printed():
    from lookalike.retrieval import systems

    look = pd.DataFrame({"system": ["ocr", "pix"], "recall_10": [0.07, 0.6], "recall_10_lo": [0.03, 0.5],
                         "recall_10_hi": [0.11, 0.7]})
    out = systems.with_chance(look, 159)
    assert out["chance_recall_10"].iloc[0] == pytest.approx(10 / 159)
    assert list(out["vs_chance"]) == ["indistinguishable from chance", "above chance"]
    table = pd.DataFrame({"index": ["image", "image", "caption", "caption", "both", "both"],
                          "query_set": ["blind", "caption-derived"] * 3,
                          "recall_10": [0.03, 0.054, 0.2, 0.8, 0.3, 0.7],
                          "recall_10_lo": [0.0, 0.01, 0.1, 0.7, 0.2, 0.6]})
    r = leakage.ratios(table, chance=10 / 159).set_index("index")
    assert np.isnan(r.loc["image", "ratio"]) and "chance" in r.loc["image", "note"]   # was 1.80 from two near-zero recalls
    assert r.loc["caption", "ratio"] == pytest.approx(4.0)
