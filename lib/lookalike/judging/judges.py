"""Judges: judge(question, unit) -> sufficient | supporting | irrelevant, with a short rationale.

The judges' front door: a judge made by name (``make_judge``, ``second_judge``), said in words
(``describe``), and set to label pairs (``label_pairs``, ``Memo``). Importing this module registers
every built-in judge, one module each:
  reference          judging.reference: the demo generator's answer key (exact for the demo corpus,
                     unavailable for yours; labelled as such wherever used)
  answer-string      judging.answer_string: from the unit's OCR text only: sufficient when the
                     normalised answer appears, supporting when the question's subject terms appear
                     without it, else irrelevant
  human              judging.human: labels people wrote, read from a file (never overwritten by a model)
  openai-compatible  judging.openai_judge: a vision-language model behind an OpenAI-compatible
                     chat-completions endpoint
A judge sees the question and the unit's page (its image, or text read off its pixels) — never the
unit's file name or caption. Every judge follows one protocol (judging.protocol: ``Judge``, its
``capabilities``, the ``REGISTRY`` it enters with ``register``). Agreement between two judges lives
in judging.agreement. The names below are gathered here so that ``judges.X`` reaches any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd

from lookalike import progress as bars
from lookalike import registry
from lookalike.judging.protocol import (ABSTAIN, REGISTRY, Capabilities, Judge, JudgeError, Judgement, JudgeSpec,  # noqa: F401
                                        plugin_judge, register, unit_view, unit_viewer)
# imported in the order they register (the order the registry, its errors and the docs list them)
from lookalike.judging.reference import ReferenceJudge  # noqa: F401
from lookalike.judging.answer_string import (STOPWORDS, AnswerStringJudge, answer_in_text, answer_match,  # noqa: F401
                                             content_words, normalise_numbers)
from lookalike.judging.human import HumanJudge  # noqa: F401
from lookalike.judging.openai_judge import RUBRIC, OpenAICompatibleJudge, majority, parse_reply  # noqa: F401
from lookalike.judging.agreement import agreement, boundary_kappa, cohen_kappa, confusion, kappa_ci  # noqa: F401
from lookalike.vocab import LABELS  # noqa: F401


JUDGES = tuple(REGISTRY.names())


def resolve_name(name: str, answer_key: pd.DataFrame | None = None) -> str:
    """The registered judge a parameter names: 'auto' is the reference judge when the run has the demo's
    answer key, else answer-string; a plug-in by import path ("package.module:Class",
    "path/to/file.py:Class") is imported and entered under its own name (protocol.plugin_judge)."""
    if name == "auto":
        return "reference" if answer_key is not None and len(answer_key) else "answer-string"
    if registry.is_plugin(name):
        from lookalike.params import PROJECT_ROOT

        return plugin_judge(name, [PROJECT_ROOT])
    if name not in REGISTRY:
        raise JudgeError(f"unknown judge {name!r}; expected auto or one of {', '.join(REGISTRY)}")
    return name


def make_judge(name: str, **resources) -> Judge:
    """A judge by name (validate.judge, labels.model_judge, mining.judge in params). Resources, each
    used by the judges that need it: facts, answer_key, units (reference), labels (human: the CSV's
    path), url, model, cache_dir (openai-compatible)."""
    return REGISTRY[resolve_name(name, resources.get("answer_key"))].make(**resources)


def describe(judge: Judge | str) -> str:
    """'<name> (<source> labels): <what they are worth>'."""
    spec = REGISTRY[judge if isinstance(judge, str) else judge.name]
    return f"{spec.name} ({spec.capabilities.source} labels): {spec.worth}"


def label_pairs(judge: Judge, pairs: pd.DataFrame, questions: pd.DataFrame, view: Callable[[list], Mapping],
                shas: Mapping[str, str] | None = None, keep_abstained: bool = False) -> pd.DataFrame:
    """Label every (query_id, unit_id) of pairs with judge, as rows for the label store: query_id,
    unit_id, question_sha, label, judge, source (the judge's capability), note (its rationale). A pair
    the judge abstains on (protocol.ABSTAIN: it cannot see what a label needs) gets no row (a row labelled
    ABSTAIN with keep_abstained, for a caller that compares two views of the same pairs); the frame's
    attrs["abstained"] counts them by reason."""
    columns = ["query_id", "unit_id", "question_sha", "label", "judge", "source", "note"]
    asked = {r["query_id"]: r for r in questions.to_dict("records")}
    rows, abstained = [], {}
    for q, u in bars.bar(zip(pairs["query_id"].tolist(), pairs["unit_id"].tolist()), total=len(pairs),
                         desc=f"judging ({judge.name})", unit="pair"):
        j = judge.judge(dict(asked[q]), view([u]))
        if j.label == ABSTAIN:
            abstained[j.rationale] = abstained.get(j.rationale, 0) + 1
            if not keep_abstained:
                continue
        rows.append({"query_id": q, "unit_id": u, "question_sha": (shas or {}).get(q, ""), "label": j.label,
                     "judge": judge.name, "source": judge.capabilities.source, "note": j.rationale})
    out = pd.DataFrame(rows, columns=columns)
    out.attrs["abstained"] = dict(sorted(abstained.items()))
    return out


class Memo:
    """Each (judge, question text, query, unit) judged once within a run: the label is remembered.
    view(unit_ids) gives what the judge may see of the unit(s)."""

    def __init__(self, view: Callable[[list], Mapping]):
        self.view, self.seen = view, {}

    def label(self, judge: Judge, questions: pd.DataFrame, query_id: str, unit_id: str) -> str:
        """questions: indexed by query_id."""
        row = questions.loc[query_id]
        key = (judge.name, row["text"], query_id, unit_id)
        if key not in self.seen:
            self.seen[key] = judge.judge({**row.to_dict(), "query_id": query_id}, self.view([unit_id]))
        return self.seen[key].label

    def abstained_because(self, judge: Judge, questions: pd.DataFrame, query_id: str, unit_id: str) -> str:
        """Why the judge abstained on a pair it labelled (label() first); '' when it did not."""
        self.label(judge, questions, query_id, unit_id)
        j = self.seen[(judge.name, questions.loc[query_id]["text"], query_id, unit_id)]
        return j.rationale if j.label == ABSTAIN else ""


def second_judge(first: Judge, name: str, **resources) -> Judge | None:
    """The judge to compare the first with, or None when none is set or it is the first judge
    itself (a judge is never compared with itself)."""
    if not name or name == "none":
        return None
    if resolve_name(name, resources.get("answer_key")) == first.name:
        return None
    return make_judge(name, **resources)
