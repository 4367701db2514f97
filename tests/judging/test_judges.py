"""Judges: answer-string number normalisation, human labels, the OpenAI-compatible client against a
local server that speaks the protocol (success, malformed reply, timeout then retry), kappa."""


import pytest
from lookalike.judging import judges


def test_registry_holds_every_judge_with_its_capabilities():
    # the built-ins, registered as the package loads; a test of a plug-in judge may have added its own since
    assert set(judges.JUDGES) == {"reference", "answer-string", "human", "openai-compatible"}
    assert set(judges.REGISTRY) >= set(judges.JUDGES)
    for name in set(judges.REGISTRY) - set(judges.JUDGES):
        assert not judges.REGISTRY[name].make.__module__.startswith("lookalike."), name
    caps = {n: s.capabilities for n, s in judges.REGISTRY.items()}
    assert caps["reference"].needs_answer_key and caps["reference"].judges_sets and caps["reference"].returns_answer
    assert caps["answer-string"].reads_text and caps["answer-string"].needs_answer and not caps["answer-string"].reads_image
    assert caps["human"].source == "human" and caps["human"].needs_labels and caps["human"].adjudicates
    assert caps["openai-compatible"].needs_endpoint and caps["openai-compatible"].source == "model"
    assert not caps["openai-compatible"].adjudicates and caps["reference"].adjudicates
    for name, spec in judges.REGISTRY.items():       # the class behind each name carries that name and those flags
        assert judges.describe(name).startswith(f"{name} ({spec.capabilities.source} labels): ")
    with pytest.raises(ValueError, match="registered twice"):
        judges.register("human", "again")(type("Dup", (), {"capabilities": caps["human"], "from_resources": None}))


def test_make_judge_by_name_and_auto(tmp_path):
    assert judges.make_judge("auto").name == "answer-string"            # no answer key: the model judge
    assert judges.make_judge("answer-string").capabilities.source == "model"
    with pytest.raises(judges.JudgeError, match="unknown judge 'oracle'; expected auto or one of reference"):
        judges.make_judge("oracle")
    with pytest.raises(judges.JudgeError, match="needs validate.labels"):
        judges.make_judge("human")
    with pytest.raises(judges.JudgeError, match="needs judges.url"):
        judges.make_judge("openai-compatible", url="http://x")
    (tmp_path / "l.csv").write_text("query_id,unit_id,label\nq1,u1,sufficient\n")
    assert judges.make_judge("human", labels=str(tmp_path / "l.csv")).name == "human"


def test_a_judge_is_never_compared_with_itself():
    first = judges.make_judge("answer-string")
    assert judges.second_judge(first, "answer-string") is None
    assert judges.second_judge(first, "auto") is None                   # auto resolves to the first judge here
    assert judges.second_judge(first, "") is None
    with pytest.raises(judges.JudgeError, match="needs validate.labels"):
        judges.second_judge(first, "human")                            # another judge is made (and may refuse)


def test_label_pairs_records_the_judges_source_and_memo_judges_once():
    import pandas as pd
    calls = []

    class Counting(judges.AnswerStringJudge):
        def judge(self, question, unit):
            calls.append((question["query_id"], unit["unit_id"]))
            return super().judge(question, unit)

    questions = pd.DataFrame({"query_id": ["q1"], "text": ["What was revenue?"], "answer": ["$5M"]})
    pairs = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["u1", "u2"]})
    texts = {"u1": "revenue $5M", "u2": "nothing"}
    view = lambda ids: {"unit_id": ids[0], "unit_ids": ids, "text": texts[ids[0]]}  # noqa: E731
    rows = judges.label_pairs(Counting(), pairs, questions, view, {"q1": "abc"})
    assert list(rows["label"]) == ["sufficient", "irrelevant"]
    assert set(rows["source"]) == {"model"} and set(rows["question_sha"]) == {"abc"}
    memo, qrec = judges.Memo(view), questions.set_index("query_id")
    calls.clear()
    assert [memo.label(Counting(), qrec, "q1", "u1") for _ in range(3)] == ["sufficient"] * 3
    assert calls == [("q1", "u1")]


# ----------------------------------------------------------------------------- label semantics


