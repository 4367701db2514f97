"""The reference judge (judging.reference): the answer key's labels on the demo corpus."""

from __future__ import annotations

from lookalike.judging import judges


def test_reference_calls_the_on_subject_look_alike_supporting(ci_demo):
    """The look-alike that prints the asked metric for the asked entity in another period is
    'supporting' (on the subject, insufficient alone); the old judge called it irrelevant."""
    from lookalike.data import demo

    c = ci_demo
    judge = judges.ReferenceJudge(c.facts, c.answer_key, c.units, demo.REGIONS)
    key = c.answer_key[(c.answer_key["op"] == "value") & (c.answer_key["metric"] == "operating_income")]
    qid = key["query_id"].iloc[0]
    q = c.questions.set_index("query_id").loc[qid].to_dict() | {"query_id": qid}
    need = key.iloc[0]
    u = c.units
    same = u[(u["entity"] == need["entity"]) & (u["template_id"] == "kpi_table") & (u["period"] != need["period"])
             & (u["revision"] == 1)]
    # a KPI table of the same entity a year later prints this period as its comparison column: the
    # look-alike two periods away does not
    far = [x for x in same["unit_id"] if not ((c.facts["unit_id"] == x) & (c.facts["period"] == need["period"])).any()]
    assert far, "no look-alike without the asked period"
    got = judge.judge(q, {"unit_id": far[0]})
    assert got.label == "supporting" and "on the subject" in got.rationale
    other_entity = u[(u["entity"] != need["entity"]) & (u["template_id"] == "kpi_table")]["unit_id"].iloc[0]
    assert judge.judge(q, {"unit_id": other_entity}).label == "irrelevant"      # template look-alike, other entity
    risk = u[(u["entity"] == need["entity"]) & (u["template_id"] == "risk_factors")]["unit_id"].iloc[0]
    assert judge.judge(q, {"unit_id": risk}).label == "irrelevant"              # same entity, no such figure
