"""Question validation: gold first, distractors by axis, repair, slices; the reference judge; regressions."""

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import negatives
from lookalike.analysis import questions
from lookalike.data import demo
from lookalike.data.schema import CorpusError
from lookalike.io import inputs
from lookalike.judging import judges


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("run")


@pytest.fixture(scope="module")
def corpus(run_dir):
    return demo.generate("ci", 7, run_dir / "corpus")


@pytest.fixture(scope="module")
def reference(corpus):
    return judges.ReferenceJudge(corpus.facts, corpus.answer_key, corpus.units, demo.REGIONS)


def _view(units):
    return lambda ids: judges.unit_view(units, ids)


def test_reference_judge_gold_answers_every_demo_question(corpus, reference):
    for q in corpus.questions.to_dict("records"):
        ids = q["evidence_unit_ids"].split(";")
        j = reference.judge(q, _view(corpus.units)(ids))
        assert (j.label, j.answer) == ("sufficient", q["answer"]), q["query_id"]
        if len(ids) > 1:      # each page of a multi-page question holds only part of the evidence
            assert all(reference.judge(q, {"unit_id": u}).label == "supporting" for u in ids)


def test_reference_judge_frees_unstated_axes(corpus, reference):
    q = corpus.questions.set_index("query_id")
    under = q[(q["qualifiers"] == "metric") & (q["evidence_structure"] == "page-single")].iloc[0]
    question = {**under.to_dict(), "query_id": under.name}
    gold = corpus.units.set_index("unit_id").loc[under["evidence_unit_ids"]]
    other = corpus.units[(corpus.units["template_id"] == "segment_bar") & (corpus.units["metric"] == "revenue")
                         & (corpus.units["entity"] != gold["entity"]) & (corpus.units["revision"] == 1)].iloc[0]
    j = reference.judge(question, {"unit_id": other["unit_id"]})
    assert j.label == "sufficient" and j.answer != under["answer"]
    # stated: the same page no longer answers it
    stated = {**question, "qualifiers": "entity;metric;period"}
    assert reference.judge(stated, {"unit_id": other["unit_id"]}).label == "irrelevant"
    # a page without the facts is irrelevant
    filler = corpus.units[corpus.units["template_id"] == "risk_factors"].iloc[0]["unit_id"]
    assert reference.judge(question, {"unit_id": filler}).label == "irrelevant"


def test_reference_judge_needs_an_answer_key(corpus):
    with pytest.raises(judges.JudgeError, match="answer key"):
        judges.ReferenceJudge(corpus.facts, corpus.answer_key.head(0), corpus.units)
    assert judges.make_judge("auto", answer_key=corpus.answer_key.head(0)).name == "answer-string"
    assert judges.make_judge("auto", facts=corpus.facts, answer_key=corpus.answer_key, units=corpus.units,
                        regions=demo.REGIONS).name == "reference"


class Recording:
    """A judge that answers from a table and records every call."""

    name = "recording"

    def __init__(self, labels: dict, default="irrelevant", answer=""):
        self.labels, self.default, self.answer, self.calls = labels, default, answer, []

    def judge(self, question, unit):
        self.calls.append(unit["unit_id"])
        label = self.labels.get(unit["unit_id"], self.default)
        return judges.Judgement(label, "test", self.name, self.answer if label == "sufficient" else "")


QUESTION = {"query_id": "q1", "text": "Which segment brought in the most revenue?", "answer": "A, $1M",
            "qualifiers": "metric", "evidence_unit_ids": "g"}
UNITS = pd.DataFrame({"unit_id": ["g", "d1", "d2"], "image_path": ["g.png", "d1.png", "d2.png"],
                      "entity": ["Acme", "Beta", "Acme"], "metric": ["revenue"] * 3,
                      "period": ["Q1 FY2024", "Q1 FY2024", "Q2 FY2024"], "revision": [1, 1, 1]})


def test_gold_fails_is_checked_before_any_distractor():
    judge = Recording({"g": "supporting", "d1": "sufficient"})
    v = questions.is_well_posed(QUESTION, {"g": [("d1", "entity"), ("d2", "period")]}, judge, _view(UNITS))
    assert v.status == "gold_fails"
    assert judge.calls == ["g"]                     # no distractor was judged


def test_gold_with_another_answer_fails():
    judge = Recording({"g": "sufficient"}, answer="B, $2M")
    assert questions.is_well_posed(QUESTION, {"g": []}, judge, _view(UNITS)).status == "gold_fails"


def test_answering_distractors_give_their_axes():
    judge = Recording({"g": "sufficient", "d1": "sufficient", "d2": "sufficient"}, answer="A, $1M")
    v = questions.is_well_posed(QUESTION, {"g": [("d2", "period"), ("d1", "entity")]}, judge, _view(UNITS))
    assert v.status == "answerable_from_distractor" and v.axes == ["entity", "period"]
    assert judge.calls == ["g", "d2", "d1"]


def test_add_qualifier_question_and_noun_phrase_forms():
    gold = UNITS.set_index("unit_id").loc["g"]
    q = questions.add_qualifier(QUESTION, "period", gold)
    assert q["text"] == "Which segment brought in the most revenue in Q1 FY2024?"
    assert q["qualifiers"] == "period;metric"
    q = questions.add_qualifier({**QUESTION, "text": "Bar chart of revenue by segment"}, "entity", gold)
    assert q["text"] == "Bar chart of revenue by segment, Acme"
    q = questions.add_qualifier(q, "revision", gold)
    assert q["text"].endswith(", as originally reported") and "revision" in q["qualifiers"]
    # a qualifier the text already carries is not added twice
    assert questions.add_qualifier(q, "entity", gold)["text"] == q["text"]


def test_repair_then_slices(corpus, reference, run_dir):
    units = corpus.units
    q = corpus.questions
    golds = sorted({u for ids in q["evidence_unit_ids"] for u in ids.split(";")})
    from lookalike.retrieval.encoders.appearance import appearance_vector
    from PIL import Image

    vecs = np.stack([appearance_vector(Image.open(run_dir / p)) for p in units["image_path"]])
    hard, _ = negatives.hard_negatives(units, vecs, golds, k=3)
    validation, validated, log = questions.validate(q, negatives.for_questions(q, hard), reference, _view(units), units)
    assert list(validation.columns[:5]) == ["query_id", "status", "axis", "repaired", "final_text"]
    caught = validation[validation["status"] == "answerable_from_distractor"]
    assert len(caught) > 0
    # the question asking only for "the most revenue by segment" is caught on entity and period
    bare = q[q["qualifiers"] == "metric"]["query_id"]
    assert len(bare) and set(validation.set_index("query_id").loc[bare, "status"]) == {"answerable_from_distractor"}
    # a repair adds a qualifier the question lacked and leaves it ok
    assert validation["repaired"].any()
    assert (validation.loc[validation["repaired"], "final_status"] == "ok").all()
    stated = q.set_index("query_id")["qualifiers"]
    for r in validation[validation["repaired"]].itertuples():
        added = r.added_qualifiers.split(";")
        assert added[0] in r.axis.split(";") and not set(added) & set(stated[r.query_id].split(";"))
        assert r.final_text != r.original_text
    # the validated set holds the repaired text and no dropped question
    v = validated.set_index("query_id")
    for r in validation.itertuples():
        if r.slice == "dropped":
            assert r.query_id not in v.index
        else:
            assert v.loc[r.query_id, "text"] == r.final_text
    # judgements are logged per attempt, gold first
    first = log[log["attempt"] == 0].groupby("query_id").head(1)
    assert (first["role"] == "gold").all()


def test_any_acceptable_and_dropped_slices():
    q = pd.DataFrame([{**QUESTION, "evidence_structure": "page-single", "register": "question", "qualified": False}])
    q["qualifiers"] = "entity;metric;period"       # nothing left to add
    d = pd.DataFrame({"query_id": ["q1"], "gold_unit_id": ["g"], "unit_id": ["d1"], "axis": ["entity"],
                      "similarity": [0.9]})
    same = Recording({"g": "sufficient", "d1": "sufficient"}, answer="A, $1M")
    validation, validated, _ = questions.validate(q, d, same, _view(UNITS), UNITS)
    assert validation.loc[0, "slice"] == "any-acceptable"
    assert validated.loc[0, "acceptable_unit_ids"] == "d1;g"

    class Conflicting(Recording):
        def judge(self, question, unit):
            j = super().judge(question, unit)
            return judges.Judgement(j.label, j.rationale, j.judge, "A, $1M" if unit["unit_id"] == "g" else "B, $9M")

    validation, validated, _ = questions.validate(q, d, Conflicting({"g": "sufficient", "d1": "sufficient"}), _view(UNITS),
                                          UNITS)
    assert validation.loc[0, "slice"] == "dropped" and validated.empty


def test_random_negatives_never_used_for_validation():
    q = pd.DataFrame([{**QUESTION, "evidence_structure": "page-single", "register": "question", "qualified": False}])
    d = pd.DataFrame({"query_id": ["q1"], "gold_unit_id": ["g"], "unit_id": ["d1"], "axis": ["random"],
                      "similarity": [float("nan")]})
    judge = Recording({"g": "sufficient", "d1": "sufficient"}, answer="A, $1M")
    validation, _, _ = questions.validate(q, d, judge, _view(UNITS), UNITS)
    assert validation.loc[0, "status"] == "ok" and judge.calls == ["g"]


def test_tallies_count_each_failing_axis():
    v = pd.DataFrame({"query_id": ["a", "b", "c", "d"],
                      "status": ["ok", "answerable_from_distractor", "answerable_from_distractor", "gold_fails"],
                      "axis": ["", "entity;period", "period", ""], "repaired": [False, True, False, False],
                      "slice": ["single-gold", "single-gold", "dropped", "dropped"]})
    t = questions.tallies(v).set_index("axis")
    assert t.loc["any", "checked"] == 3 and t.loc["any", "answerable"] == 2
    assert t.loc["period", "answerable"] == 2 and t.loc["entity", "answerable"] == 1
    assert t.loc["period", "dropped"] == 1 and "metric" not in t.index


def test_regression_file_skips_bad_rows_and_keeps_the_rest(tmp_path):
    path = tmp_path / "reports.csv"
    path.write_text("text,expected_unit_id,returned_unit_id\n"
                    "revenue chart,g,d1\n"
                    ",g,\n"
                    "what about this,nope,\n"
                    "another,d2,ghost\n", encoding="utf-8")
    rows, skipped = inputs.read_regressions(path, UNITS["unit_id"])
    assert list(rows["query_id"]) == ["r001"] and rows.loc[0, "returned_unit_id"] == "d1"
    assert list(skipped["row"]) == [3, 4, 5]
    assert "empty text" in skipped.loc[0, "problem"] and "'nope'" in skipped.loc[1, "problem"]
    assert "'ghost'" in skipped.loc[2, "problem"]
    (tmp_path / "bad.csv").write_text("question,unit\nx,g\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="bad.csv: column 'text' is missing"):
        inputs.read_regressions(tmp_path / "bad.csv", UNITS["unit_id"])


def test_top1_with_a_set_of_acceptable_units():
    scores = np.array([[0.9, 0.5, 0.1]])
    ids = ["a", "b", "c"]
    assert negatives.top1_within(scores, ids, ["q"], {"q": {"a", "c"}}, {"q": None}).iloc[0] == 1.0
    assert negatives.top1_within(scores, ids, ["q"], {"q": {"b", "c"}}, {"q": None}).iloc[0] == 0.0
    assert negatives.top1_within(scores, ids, ["q"], {"q": {"b", "c"}}, {"q": ["c"]}).iloc[0] == 1.0


def test_questions_without_evidence_pages_are_not_validated():
    q = pd.DataFrame([{**QUESTION, "evidence_unit_ids": "", "evidence_structure": "", "register": "question",
                       "qualified": False}])
    judge = Recording({})
    validation, validated, _ = questions.validate(q, pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis",
                                                                   "similarity"]), judge, _view(UNITS), UNITS)
    assert validation.loc[0, "status"] == "no_page_evidence" and validated.empty and judge.calls == []
    assert questions.tallies(validation).loc[0, "questions"] == 0


def test_a_judge_that_needs_an_answer_skips_questions_without_one(corpus):
    """Questions without an answer field are reported as not validated (status no_answer), never as
    gold_fails; the tallies leave them out."""
    qs = corpus.questions.head(6).copy()
    qs.loc[qs.index[:4], "answer"] = ""
    none = pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis"])
    validation, validated, _ = questions.validate(qs, none, judges.AnswerStringJudge(),
                                          lambda ids: {"unit_ids": ids, "text": "no figures here"}, corpus.units)
    assert list(validation["status"][:4]) == ["no_answer"] * 4
    assert set(validation["slice"][:4]) == {"not validated"}
    assert "gold_fails" not in set(validation["status"][:4])
    assert questions.tallies(validation)["questions"].iloc[0] == 2


def test_peoples_gold_is_not_second_guessed_by_the_judge(corpus):
    """With gold_from_people the judge checks distractors only: a gold page whose OCR text the judge
    cannot read (here: none at all) is still the gold, so the question is kept."""
    qs = corpus.questions[corpus.questions["evidence_unit_ids"].str.count(";") == 0].head(3)
    none = pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis"])
    blind_view = lambda ids: {"unit_ids": ids, "unit_id": ids[0], "text": ""}  # noqa: E731
    judged, _, _ = questions.validate(qs, none, judges.AnswerStringJudge(), blind_view, corpus.units)
    # without people's word the judge cannot read the gold: not validated, never "gold fails"
    assert set(judged["status"]) == {"gold_unread"}
    trusted, kept, log = questions.validate(qs, none, judges.AnswerStringJudge(), blind_view, corpus.units, gold_from_people=True)
    assert set(trusted["status"]) == {"ok"} and len(kept) == 3
    assert set(log.loc[log["role"] == "gold", "rationale"]) == {"people's judgement (the qrels you supplied)"}


def test_questions_marked_not_answerable_are_their_own_slice(corpus):
    qs = corpus.questions.head(3).copy()
    qs.loc[qs.index[0], "answer"] = "Not answerable"
    qs.loc[qs.index[1], "evidence_unit_ids"] = ""
    qs.loc[qs.index[1], "answer"] = "unanswerable"
    none = pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis"])
    validation, validated, _ = questions.validate(qs, none, judges.ReferenceJudge(corpus.facts, corpus.answer_key, corpus.units, demo.REGIONS),
                                          _view(corpus.units), corpus.units)
    assert list(validation["slice"][:2]) == ["not answerable"] * 2
    assert not set(qs["query_id"][:2]) & set(validated["query_id"])
    assert questions.tallies(validation)["questions"].iloc[0] == 1


@pytest.mark.parametrize("answer, lacks", [("", True), (None, True), (float("nan"), True), ("  ", True), ("N/A", True),
                                           ("n/a.", True), ("Not answerable", True), ("$4.2 million", False),
                                           ("0", False), ("none of the above", False)])
def test_one_rule_for_no_answer(answer, lacks):
    """`check` said "0 questions without an answer" where stage 05 counted an 'N/A' answer: they share the rule."""
    from lookalike.analysis import questions as Q

    assert Q.lacks_answer(answer) is lacks
