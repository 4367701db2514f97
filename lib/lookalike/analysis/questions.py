"""Question validation: is a question well posed against its hard distractors — and repair if not.

A question is *well posed* when its gold evidence answers it and no hard distractor does. The
check runs in that order on purpose: a question its gold cannot answer is broken whatever the
distractors say (``gold_fails``), and judging distractors for it would only add noise. Otherwise
every hard distractor of every evidence unit is put in that unit's place and judged; each one
the judge calls sufficient makes the question ``answerable_from_distractor`` on that
distractor's axis (period, metric, entity, revision, or cluster for corpora without metadata).

Repair adds the qualifier the failing axis names, taken from the gold unit's metadata ("in Q2
FY2024", "at Corvane Systems", "(revenue)", "as originally reported"), and validates again, up to
``max_repairs`` times. Outcome per question (``slice``):
  single-gold     ok as written, or after repair: scored against its one gold
  any-acceptable  still answered by distractors that all give the gold's answer (a fact printed
                  on several pages): kept in its own slice, where any acceptable unit counts,
                  never mixed into the single-gold set
  dropped         gold fails, or distractors give other answers and no qualifier is left to add
  not validated   the question has no evidence pages (document-level judgements): status
                  ``no_page_evidence``; it is not in the validated set

Random negatives are never used here: only hard distractors can expose an under-specified question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping

import pandas as pd

from lookalike import progress as bars
from lookalike.vocab import METRIC_LABELS
from lookalike.judging.protocol import ABSTAIN

AXIS_ORDER = ("entity", "period", "metric", "revision", "cluster")
REPAIRABLE = ("entity", "period", "metric", "revision")
VALIDATION_COLUMNS = ["query_id", "status", "axis", "repaired", "final_text", "final_status", "slice",
                      "added_qualifiers", "acceptable_unit_ids", "original_text", "evidence_structure", "register",
                      "flagged_by", "note"]
# Answers by which a dataset marks a question no page answers.
NOT_ANSWERABLE = re.compile(r"(not answerable|unanswerable|no answer|cannot be answered|n/a)\.?", re.I)


def answer_text(value) -> str:
    """A question's answer as text: '' for none (missing, null, NaN, blank)."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value).strip()


def lacks_answer(value) -> bool:
    """The one rule for "no answer", read by stage 05 and `lookalike check` alike: none at all, or an answer
    that says no page answers ('N/A', 'not answerable', ...)."""
    text = answer_text(value)
    return not text or bool(NOT_ANSWERABLE.fullmatch(text))
JUDGEMENT_COLUMNS = ["query_id", "attempt", "role", "axis", "gold_unit_id", "unit_ids", "label", "answer", "rationale"]


@dataclass
class Verdict:
    """One question's validation: its status, the axes its gold fails on, the distractors that answer it, and every
    judgement made on the way."""
    status: str                                     # ok | gold_fails | gold_unread | answerable_from_distractor
    axes: list = field(default_factory=list)        # failing axes, in AXIS_ORDER
    answering: list = field(default_factory=list)   # (gold_unit_id, unit_id, axis, answer) per answering distractor
    log: list = field(default_factory=list)         # one dict per judgement made (JUDGEMENT_COLUMNS)


def _stated(question: Mapping) -> list[str]:
    return [a for a in str(question.get("qualifiers", "")).split(";") if a]


def is_well_posed(question: Mapping, distractors: Mapping[str, list], judge, view: Callable, attempt: int = 0,
                  gold_from_people: bool = False) -> Verdict:
    """Gold first, then every hard distractor.

    distractors[gold_unit_id]: [(unit_id, axis), ...] for each evidence unit; view(unit_ids) -> the
    dict a judge sees for those units judged together; judge.judge(question, unit) -> Judgement.
    gold_from_people: the gold comes from judgements people made (your qrels): it is sufficient by
    their word, and the judge is not asked to confirm it.
    Multi-page evidence: a distractor put in one gold page's place answers only when the remaining
    gold pages alone do not (their own judgement is logged with role "rest").
    """
    golds = [u for u in str(question["evidence_unit_ids"]).split(";") if u]
    qid = question["query_id"]
    log = []

    def record(role, axis, gold_id, ids, j):
        log.append(dict(query_id=qid, attempt=attempt, role=role, axis=axis, gold_unit_id=gold_id,
                        unit_ids=";".join(ids), label=j.label, answer=j.answer, rationale=j.rationale))

    if gold_from_people:
        g = type("PeoplesGold", (), {"label": "sufficient", "answer": "",
                                     "rationale": "people's judgement (the qrels you supplied)"})()
    else:
        g = judge.judge(question, view(golds))
    record("gold", "", "", golds, g)
    expected = str(question.get("answer", ""))
    if g.label == ABSTAIN:
        return Verdict("gold_unread", log=log)
    if g.label != "sufficient" or (g.answer and expected and g.answer != expected):
        return Verdict("gold_fails", log=log)
    answering = []
    for gi, gold_id in enumerate(golds):
        rest = golds[:gi] + golds[gi + 1:]
        if rest and distractors.get(gold_id):
            # a distractor in this gold page's place "answers" only if the other gold pages alone do not:
            # when they already answer, the swap says nothing about the distractor
            jr = judge.judge(question, view(rest))
            record("rest", "", gold_id, rest, jr)
            if jr.label == "sufficient":
                continue
        for unit_id, axis in distractors.get(gold_id, []):
            ids = golds[:gi] + [unit_id] + golds[gi + 1:]
            j = judge.judge(question, view(ids))
            record("distractor", axis, gold_id, ids, j)
            if j.label == "sufficient":
                answering.append((gold_id, unit_id, axis, j.answer))
    if not answering:
        return Verdict("ok", log=log)
    axes = [a for a in AXIS_ORDER if any(a == x for _, _, x, _ in answering)]
    return Verdict("answerable_from_distractor", axes, answering, log)


def qualifier_phrase(axis: str, gold: Mapping, question_form: bool) -> str:
    """The words that pin the axis to the gold unit's value."""
    if axis == "entity":
        return f"at {gold['entity']}" if question_form else str(gold["entity"])
    if axis == "period":
        return f"in {gold['period']}" if question_form else str(gold["period"])
    if axis == "metric":
        label = METRIC_LABELS.get(str(gold["metric"]), str(gold["metric"]).replace("_", " "))
        return f"({label})"
    if axis == "revision":
        return "as originally reported" if int(gold.get("revision", 1) or 1) <= 1 else "as restated"
    raise ValueError(f"axis {axis!r} has no qualifier; repairable axes are {', '.join(REPAIRABLE)}")


def add_qualifier(question: Mapping, axis: str, gold: Mapping) -> dict:
    """A copy of the question with the axis stated: the phrase is added to the text (unless the
    text already carries it) and the axis to ``qualifiers``."""
    q = dict(question)
    text = str(q["text"]).rstrip()
    is_question = text.endswith("?")
    phrase = qualifier_phrase(axis, gold, is_question)
    bare = re.sub(r"^(at|in) |[()]", "", phrase)
    if bare.lower() not in text.lower():
        text = f"{text[:-1]} {phrase}?" if is_question else f"{text}, {phrase}"
    q["text"] = text
    q["qualifiers"] = ";".join(a for a in AXIS_ORDER if a in set(_stated(question)) | {axis})
    q["qualified"] = all(a in q["qualifiers"].split(";") for a in ("entity", "metric", "period"))
    return q


def validate(questions: pd.DataFrame, distractors: pd.DataFrame, judge, view: Callable, units: pd.DataFrame,
             max_repairs: int = 3, gold_from_people: bool = False) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Validate and repair every question.

    gold_from_people: the evidence pages come from people's judgements (is_well_posed), and people
    come first: such a question is never moved out of the main set (single-gold) by a machine rule or
    an answer text. When the judge says a distractor answers it, it stays as written with
    ``flagged_by`` naming the judge (no qualifier is added to a question people judged); when the
    judge needs an answer and there is none (or the answer says "N/A" while people named pages), it
    is kept with status ``no_answer`` and a note saying the distractor check did not run. Without
    people's gold, a question without an answer is ``not validated`` — skipped, not failed.

    distractors: tables/distractors.csv rows (random negatives are ignored). Returns
    (validation: VALIDATION_COLUMNS, validated questions: the kept questions with their final text
    and qualifiers plus ``slice`` and ``acceptable_unit_ids``, judgements: JUDGEMENT_COLUMNS).
    """
    hard = distractors[distractors["axis"] != "random"]
    by_gold = {g: list(zip(d["unit_id"], d["axis"])) for g, d in hard.groupby("gold_unit_id", sort=False)}
    meta = units.set_index("unit_id")
    rows, kept, logs = [], [], []
    name = getattr(judge, "name", "judge")
    caps = getattr(judge, "capabilities", None)

    def row(q, status, slice_, final_status="", note="", **kw):
        return dict(dict(query_id=q["query_id"], status=status, axis="", repaired=False, final_text=q["text"],
                         final_status=final_status or status, slice=slice_, added_qualifiers="", acceptable_unit_ids="",
                         original_text=q["text"], evidence_structure=q.get("evidence_structure", ""),
                         register=q.get("register", ""), flagged_by="", note=note), **kw)

    for q in bars.bar(questions.to_dict("records"), desc=f"validating ({name})", unit="question"):
        has_pages = bool([u for u in str(q.get("evidence_unit_ids", "")).split(";") if u])
        answer = answer_text(q.get("answer", ""))
        if lacks_answer(answer) and answer and not (gold_from_people and has_pages):
            # the dataset says no page answers it: its own slice, never a retrieval failure
            rows.append(row(q, "not_answerable", "not answerable"))
            continue
        if not has_pages:
            # document-level judgements (or none): nothing page-level to validate against
            rows.append(row(q, "no_page_evidence", "not validated"))
            continue
        if (lacks_answer(answer) and answer) or (caps is not None and caps.needs_answer and not answer):
            why = (f"distractor check not run: {name} needs an answer" if not answer else
                   f"distractor check not run: the answer text {answer!r} says no page answers, and people's "
                   "judgements name evidence pages (theirs stand)")
            if gold_from_people:
                # people's judgements are the gold's labels: the question is scored and pooled, unchecked
                rows.append(row(q, "no_answer", "single-gold", note=why))
                kept.append({**q, "slice": "single-gold", "acceptable_unit_ids": ""})
            else:
                rows.append(row(q, "no_answer", "not validated", note=why))
            continue
        verdict = is_well_posed(q, by_gold, judge, view, gold_from_people=gold_from_people)
        logs.extend(verdict.log)
        if gold_from_people and verdict.status == "answerable_from_distractor":
            # a machine judge never moves a question people judged: it stays in the main set as written,
            # flagged, and the pairs it named are in the labelling pool for people to settle
            named = ", ".join(sorted({u for _, u, _, _ in verdict.answering}))
            rows.append(row(q, verdict.status, "single-gold", axis=";".join(verdict.axes), flagged_by=name,
                            note=f"{name} says {named} also answers; kept as people judged it, pair pooled for people"))
            kept.append({**q, "slice": "single-gold", "acceptable_unit_ids": ""})
            continue
        first, cur, added = verdict, dict(q), []
        while verdict.status == "answerable_from_distractor" and len(added) < max_repairs:
            todo = [a for a in verdict.axes if a in REPAIRABLE and a not in _stated(cur)]
            if not todo:
                break
            axis = todo[0]
            gold_id = next(g for g, _, x, _ in verdict.answering if x == axis)
            cur = add_qualifier(cur, axis, meta.loc[gold_id])
            added.append(axis)
            verdict = is_well_posed(cur, by_gold, judge, view, attempt=len(added), gold_from_people=gold_from_people)
            logs.extend(verdict.log)
        acceptable = ""
        if verdict.status == "ok":
            slice_ = "single-gold"
        elif verdict.status in ("gold_fails", "gold_unread"):
            slice_ = "dropped"
        else:
            answers = {a for *_, a in verdict.answering}
            agree = bool(q.get("answer")) and answers == {str(q["answer"])}
            slice_ = "any-acceptable" if agree else "dropped"
            if agree:
                acceptable = ";".join(sorted(set(str(q["evidence_unit_ids"]).split(";"))
                                             | {u for _, u, _, _ in verdict.answering}))
        rows.append(row(q, first.status, slice_, final_status=verdict.status, axis=";".join(first.axes),
                        repaired=bool(added) and verdict.status == "ok", final_text=cur["text"],
                        added_qualifiers=";".join(added), acceptable_unit_ids=acceptable))
        if slice_ != "dropped":
            kept.append({**cur, "slice": slice_, "acceptable_unit_ids": acceptable})
    validation = pd.DataFrame(rows, columns=VALIDATION_COLUMNS)
    validation["repaired"] = validation["repaired"].astype(bool)
    validated = pd.DataFrame(kept, columns=list(questions.columns) + ["slice", "acceptable_unit_ids"])
    return validation, validated, pd.DataFrame(logs, columns=JUDGEMENT_COLUMNS)


def tallies(validation: pd.DataFrame) -> pd.DataFrame:
    """Per axis (and 'any'): questions checked, how many a distractor on that axis answered, and
    the outcome counts. A question failing on two axes counts under both; questions without
    evidence pages, and questions the judge could not validate for want of an answer, are not counted."""
    validation = validation[~validation["status"].isin(["no_page_evidence", "no_answer", "not_answerable",
                                                        "gold_unread"])]
    n = len(validation)
    checked = validation[validation["status"] != "gold_fails"]
    rows = []
    for axis in ["any", *AXIS_ORDER]:
        if axis == "any":
            hit = [s == "answerable_from_distractor" for s in checked["status"]]
        else:
            hit = [axis in str(a).split(";") for a in checked["axis"]]
        sub = checked[pd.Series(hit, index=checked.index, dtype=bool)]
        rows.append(dict(axis=axis, questions=n, checked=len(checked), answerable=int(sum(hit)),
                         repaired=int(sub["repaired"].sum()), any_acceptable=int((sub["slice"] == "any-acceptable").sum()),
                         dropped=int((sub["slice"] == "dropped").sum())))
    out = pd.DataFrame(rows)
    return out[(out["axis"] == "any") | (out["answerable"] > 0)].reset_index(drop=True)


