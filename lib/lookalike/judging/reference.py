"""The reference judge: the demo generator's answer key, exact on the demo corpus and unavailable on yours.
The region names its answer key ranges over (``*region``) come in as a resource (the demo supplies them),
so this module knows nothing of the generator's vocabulary."""

from __future__ import annotations

from collections.abc import Sequence

import itertools
from collections.abc import Mapping

import pandas as pd


from lookalike.vocab import money


from lookalike.judging.protocol import Capabilities, JudgeError, Judgement, register


@register("reference", "the demo generator's answer key: exact on the demo corpus, unavailable on yours")
class ReferenceJudge:
    """The demo generator's answer key: exact for the demo corpus, and only there.

    facts: tables/facts.csv (what each page prints); answer_key: tables/answer_key.csv (which facts
    each question asks for); units: tables/units.csv (template and revision of each unit).

    A unit (or an evidence set judged together) is *sufficient* when its facts hold every fact the
    question needs; *supporting* when they hold some (part of a multi-page question's evidence) or
    when it prints the asked metric for the asked entity in another period, member, revision or
    template (on the subject, insufficient alone — vocab.LABEL_MEANINGS); else *irrelevant*. Axes the question does
    not state (its ``qualifiers``) are free: "Which segment contributed the most revenue?" is
    answered by any revenue-by-segment page, whatever its entity or period — which is exactly what
    question validation must find. A free axis takes one value across all needs of the question.
    Revision is free unless "revision" is among the qualifiers. The answer the unit gives is
    computed from its facts in the generator's format, so a distractor that answers with another
    number is told apart from one that agrees.
    """

    capabilities = Capabilities("reference", judges_sets=True, returns_answer=True, needs_answer_key=True)
    FREE_AXES = ("entity", "metric", "period")

    def __init__(self, facts: pd.DataFrame, answer_key: pd.DataFrame, units: pd.DataFrame,
                 regions: Sequence[str] = ()):
        # regions: the member names a "*region" need ranges over (the demo generator's regions; any other
        # member of a breakdown is a segment)
        self.regions = set(regions)
        if answer_key.empty:
            raise JudgeError("the reference judge needs the demo's answer key (tables/answer_key.csv); this run has "
                             "none — use the answer-string, human or openai-compatible judge")
        if not self.regions and (answer_key["member"].astype(str) == "*region").any():
            raise JudgeError("the answer key asks for regions (*region) but the reference judge was given no region "
                             "names (the regions resource: lookalike.data.demo.REGIONS for the demo corpus)")
        meta = units.set_index("unit_id")[["template_id", "revision"]].astype(str)
        self.facts: dict[str, list[tuple]] = {}
        for r in facts.itertuples(index=False):
            self.facts.setdefault(r.unit_id, []).append(
                (r.entity, r.metric, r.period, r.member, float(r.value), str(r.revision),
                 meta["template_id"].get(r.unit_id, "")))
        self.key = {q: list(g.sort_values("need").itertuples(index=False))
                    for q, g in answer_key.groupby("query_id", sort=False)}

    @classmethod
    def from_resources(cls, facts=None, answer_key=None, units=None, regions=(), **_):
        """The reference judge for a run: the corpus's facts and answer key (the demo's ground truth)."""
        return cls(facts if facts is not None else pd.DataFrame(),
                   answer_key if answer_key is not None else pd.DataFrame(), units, regions)

    def _values(self, pool: list[tuple], entity: str, metric: str, period: str, member: str):
        rows = [(m, v) for e, mt, p, m, v, *_ in pool if e == entity and mt == metric and p == period]
        if member == "*segment":
            return dict((m, v) for m, v in rows if m != "total" and m not in self.regions) or None
        if member == "*region":
            return dict((m, v) for m, v in rows if m in self.regions) or None
        hit = [v for m, v in rows if m == member]
        return (hit[0], entity) if hit else None

    @staticmethod
    def _answer(op: str, vals: list) -> str:
        if op in ("argmax_value", "argmax"):
            best = max(sorted(vals[0].items()), key=lambda kv: kv[1])
            return f"{best[0]}, {money(best[1])}" if op == "argmax_value" else best[0]
        (a, ea), (b, eb) = vals[0], vals[-1]
        if op == "value":
            return money(a)
        if op == "diff":
            return money(a - b)
        if op == "sum":
            return money(sum(v for v, _ in vals))
        if op == "ratio":
            return f"{a / b * 100:.1f}%" if b else "undefined"
        if op == "greater":
            return "yes" if a > b else "no"
        if op == "higher_of":
            return ea if a > b else eb
        raise JudgeError(f"answer key: unknown op {op!r}")

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        """The label the answer key gives: sufficient when the unit's facts answer the question as asked,
        supporting when they answer part of it, irrelevant otherwise."""
        qid = question["query_id"]
        if qid not in self.key:
            raise JudgeError(f"question {qid!r} is not in the answer key")
        needs = self.key[qid]
        ids = unit.get("unit_ids") or [unit["unit_id"]]
        pool = [f for u in ids for f in self.facts.get(u, [])]
        stated = set(filter(None, str(question.get("qualifiers", "")).split(";")))
        template = needs[0].template_id
        if template:
            pool = [f for f in pool if f[6] == template]
        if "revision" in stated:
            pool = [f for f in pool if f[5] == str(needs[0].revision)]
        if not pool:
            return Judgement("irrelevant", "the page prints none of the facts the question needs", self.name)
        free = [a for a in self.FREE_AXES if a not in stated]
        col = {"entity": 0, "metric": 1, "period": 2}
        choices = [sorted({f[col[a]] for f in pool}) for a in free]
        best_partial, answers = 0, []
        for combo in itertools.product(*choices):
            bind = dict(zip(free, combo))
            vals = [self._values(pool, bind.get("entity", n.entity), bind.get("metric", n.metric),
                                 bind.get("period", n.period), n.member) for n in needs]
            got = sum(v is not None for v in vals)
            if got == len(vals):
                answers.append((self._answer(needs[0].op, vals), bind))
            best_partial = max(best_partial, got)
        expected = str(question.get("answer", ""))
        if answers:
            answer, bind = next(((a, b) for a, b in answers if a == expected), answers[0])
            where = ", ".join(f"{k} {v}" for k, v in bind.items())
            return Judgement("sufficient", f"the page gives {answer!r}" + (f" (reading {where})" if where else ""),
                             self.name, answer)
        if best_partial:
            return Judgement("supporting", f"the page holds {best_partial} of the {len(needs)} facts the question needs",
                             self.name)
        on_subject = self._on_subject(needs, [f for u in ids for f in self.facts.get(u, [])], free)
        if on_subject:
            entity, metric, period = on_subject
            return Judgement("supporting", f"on the subject but not the answer: the page prints {metric} for {entity} "
                                           f"({period}), not what the question asks", self.name)
        return Judgement("irrelevant", "the page prints none of the facts the question needs", self.name)

    @staticmethod
    def _on_subject(needs: list, pool: list[tuple], free: list[str]) -> tuple | None:
        """A fact of the asked metric for the asked entity (any entity when the question leaves it
        free) in any period, member, revision or template: the look-alike that is on the subject and
        evidentially empty for this question. The first such fact (entity, metric, period), or None."""
        for n in needs:
            for e, mt, p, *_ in pool:
                if mt == n.metric and ("entity" in free or e == n.entity):
                    return e, mt, p
        return None
