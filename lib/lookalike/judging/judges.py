"""Judges: judge(question, unit) -> sufficient | supporting | irrelevant, with a short rationale.

A judge sees the question and the unit's page (its image, or text read off its pixels) — never the
unit's file name or caption. Implementations here:
  reference          the demo generator's ground-truth facts and answer key (the demo's answer key:
                     exact for the demo corpus, unavailable for yours; labelled as such wherever used)
  answer-string      from the unit's OCR text only: sufficient when the normalised answer appears,
                     supporting when the question's subject terms appear without it, else irrelevant
  human              labels people wrote, read from a file (never overwritten by a model)
  openai-compatible  a vision-language model behind an OpenAI-compatible chat-completions endpoint
                     (vLLM, Ollama, hosted): page image as base64, a fixed rubric, strict parsing,
                     retries with backoff, responses cached on disk, API key from an environment
                     variable and never written anywhere
Every judge follows one protocol (``Judge``): a ``name``, its ``capabilities`` (what it reads, whether
it judges an evidence set as one item, whether it returns the answer, what it needs: the demo's
answer key, the question's answer, people's label file, an endpoint) and ``judge(question, unit)``.
Judges are made by name through one registry (``REGISTRY``, ``make_judge``); ``describe`` says in
words what a judge's labels are worth.
Agreement between two judges: Cohen's kappa (overall, and on the sufficient/supporting boundary)
and the confusion matrix.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.registry import Registry

from lookalike import progress as bars
from lookalike.data.demo import REGIONS
from lookalike.data.schema import image_data_url, read_required_csv, resolve_image
from lookalike.io import pagebase
from lookalike.vocab import LABEL_GRADES, LABEL_MEANINGS, LABELS, METRIC_LABELS, money


class JudgeError(RuntimeError):
    """A judge could not produce a label (bad reply after retries, unreadable label file, ...)."""


@dataclass(frozen=True)
class Judgement:
    label: str
    rationale: str
    judge: str
    answer: str = ""        # the answer the unit gives, when the judge can tell (reference, answer-string, VLM)
    samples: int = 1        # how many replies the label is the majority of (openai-compatible)
    temperature: float | None = None   # the sampling temperature, for a model judge


@dataclass(frozen=True)
class Capabilities:
    """What a judge reads, returns and needs. ``source`` is what its labels are in the label store:
    people's (human), the demo's answer key (reference) or a model's (model)."""
    source: str                       # human | reference | model
    reads_image: bool = False         # looks at the page pixels
    reads_text: bool = False          # reads OCR text off the page pixels
    judges_sets: bool = False         # judges an evidence set of several pages as one item
    returns_answer: bool = False      # says which answer the unit gives (needed to repair questions)
    needs_answer_key: bool = False    # only the demo has one
    needs_answer: bool = False        # cannot call a unit sufficient for a question without an answer
    needs_labels: bool = False        # a file of people's labels
    needs_endpoint: bool = False      # a served model

    @property
    def adjudicates(self) -> bool:
        """Labels that settle a pair (people's, or the demo's answer key); a model's only pre-label."""
        return self.source in ("human", "reference")


class Judge(Protocol):
    name: str
    capabilities: Capabilities

    def judge(self, question: Mapping, unit: Mapping) -> Judgement: ...


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    capabilities: Capabilities
    make: Callable[..., Judge]        # make(**resources) -> Judge
    worth: str                        # one sentence: what its labels are worth


REGISTRY: Registry[JudgeSpec] = Registry("judge")


def register(name: str, worth: str):
    """Class decorator: the class's ``capabilities`` and ``from_resources`` enter the registry under name
    (a second judge of the same name is refused)."""
    def add(cls):
        REGISTRY.register(JudgeSpec(name, cls.capabilities, cls.from_resources, worth))
        cls.name = name
        return cls
    return add


def unit_view(units: pd.DataFrame, unit_ids: Sequence[str], texts: Mapping[str, str] | None = None,
              base_dir: Path | str | None = None) -> dict:
    """What a judge may see of one unit or of an evidence set judged together: ids, image paths (in
    order, ``image_paths``; ``image_path`` too for one unit) and OCR text — never file names or
    captions. Several ids: texts are joined, ``unit_ids`` lists them."""
    return unit_viewer(units, texts, base_dir)(unit_ids)


def unit_viewer(units: pd.DataFrame, texts: Mapping[str, str] | None = None,
                base_dir: Path | str | None = None) -> Callable[[Sequence[str]], dict]:
    """unit_view for many calls: the id -> image path table is built once (a stage judges tens of
    thousands of pairs; building it per pair was most of their cost)."""
    raw = dict(zip(units["unit_id"], units["image_path"]))
    resolved: dict[str, str] = {}
    texts = texts or {}

    def path(u: str) -> str:
        if base_dir is None:
            return raw[u]
        if u not in resolved:
            resolved[u] = str(resolve_image(raw[u], base_dir))
        return resolved[u]

    def view(unit_ids: Sequence[str]) -> dict:
        ids = list(unit_ids)
        shown = {"unit_id": ";".join(ids), "unit_ids": ids, "text": "\n".join(texts.get(u, "") for u in ids),
                 "image_paths": [path(u) for u in ids]}
        if len(ids) == 1:
            shown["image_path"] = shown["image_paths"][0]
        return shown

    return view


# ----------------------------------------------------------------------------- reference

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

    def __init__(self, facts: pd.DataFrame, answer_key: pd.DataFrame, units: pd.DataFrame):
        self.regions = set(REGIONS)
        if answer_key.empty:
            raise JudgeError("the reference judge needs the demo's answer key (tables/answer_key.csv); this run has "
                             "none — use the answer-string, human or openai-compatible judge")
        meta = units.set_index("unit_id")[["template_id", "revision"]].astype(str)
        self.facts: dict[str, list[tuple]] = {}
        for r in facts.itertuples(index=False):
            self.facts.setdefault(r.unit_id, []).append(
                (r.entity, r.metric, r.period, r.member, float(r.value), str(r.revision),
                 meta["template_id"].get(r.unit_id, "")))
        self.key = {q: list(g.sort_values("need").itertuples(index=False))
                    for q, g in answer_key.groupby("query_id", sort=False)}

    @classmethod
    def from_resources(cls, facts=None, answer_key=None, units=None, **_):
        return cls(facts if facts is not None else pd.DataFrame(),
                   answer_key if answer_key is not None else pd.DataFrame(), units)

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


# ----------------------------------------------------------------------------- answer-string

_SCALE = {"k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9}
_NUMBER = re.compile(r"(?P<sign>[-−–+(])?\s*\$?\s*(?P<num>\d{1,3}(?:[,\u202f ]\d{3})+|\d+)(?P<dec>\.\d+)?\s*"
                     r"(?P<unit>%|k\b|thousand\b|mn\b|m\b|million\b|bn\b|b\b|billion\b)?\)?", re.I)
STOPWORDS = {"what", "which", "was", "were", "the", "of", "in", "for", "at", "and", "a", "an", "did", "does", "is",
             "how", "much", "more", "than", "from", "by", "to", "its", "s", "it", "share", "came", "most", "page",
             "shows", "brought", "contributed", "higher", "larger", "or"}


def normalise_numbers(text: str) -> list[float]:
    """Every number in text as a float: thousands separators dropped, $ ignored, scale words applied
    (k, m/million, bn/billion; '$1,234M' -> 1.234e9), minus signs and accounting parentheses kept."""
    return list(_numbers(text))


@lru_cache(maxsize=1 << 16)
def _numbers(text: str) -> tuple[float, ...]:
    # a page's text is matched against every question pooled with it: read its numbers once
    out = []
    for m in _NUMBER.finditer(text):
        value = float(re.sub(r"[,\u202f ]", "", m.group("num")) + (m.group("dec") or ""))
        unit = (m.group("unit") or "").lower()
        if unit in _SCALE:
            value *= _SCALE[unit]
        if m.group("sign") in ("-", "−", "–", "("):
            value = -value
        out.append(value)
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z][a-z]+", text.lower()) if w not in STOPWORDS)


def content_words(text: str) -> set[str]:
    """The words of a text a judge matches on: lower case, two letters or more, without STOPWORDS."""
    return _words(text)


# words that only say what a number counts in: they are part of the number's match, not context
_NUMBER_WORDS = frozenset(_SCALE) | {"percent", "per", "cent", "usd", "eur", "gbp", "dollars"}


def _fmt_number(n: float) -> str:
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.4g}"


def answer_match(answer: str, text: str, question: str = "") -> str:
    """What of the answer appears in the text, in words; "" when it does not appear.

    Every number of the answer (normalised) must be there, and so must every content word of the
    answer: "the Hanford casino" is not matched by a page that merely prints the same figure. A bare
    number ("2", "$437M") says nothing about what it counts, so it matches only beside its context:
    at least half (rounded up) of the question's content words on the same page. An answer without
    numbers matches when all its content words are there; one with neither ("N/A", "-") never does.
    """
    nums = _numbers(answer)
    words = _words(answer) - _NUMBER_WORDS
    page = _words(text)
    if nums:
        have = _numbers(text)
        if not all(any(abs(n - h) <= 1e-9 * max(1.0, abs(n)) for h in have) for n in nums):
            return ""
        said = ", ".join(_fmt_number(n) for n in nums)
        if words:
            if not words <= page:
                return ""
            return f"the answer's number{'s' if len(nums) > 1 else ''} ({said}) and words ({', '.join(sorted(words))})"
        context = _words(question) - _NUMBER_WORDS
        found = sorted(context & page)
        if not context or len(found) < (len(context) + 1) // 2:
            return ""
        return f"the answer's number{'s' if len(nums) > 1 else ''} ({said}) beside the question's words ({', '.join(found[:5])})"
    if words and words <= page:
        return f"the answer's words ({', '.join(sorted(words))})"
    return ""


def answer_in_text(answer: str, text: str, question: str = "") -> bool:
    """The answer appears in the text by answer_match's rule."""
    return bool(answer_match(answer, text, question))


@register("answer-string", "a string match of the question's answer in OCR text: a model-only label; on the demo "
                           "its agreement with the answer key is low, so read its figures as unverified")
class AnswerStringJudge:
    """Reads the unit's OCR text only (pass it as unit['text']); an evidence set's texts are joined.

    *sufficient*: the answer appears in the text by answer_match's rule (every number, normalised,
    and every content word of the answer; a bare number beside the question's words). *supporting*, as the labels mean it (vocab.LABEL_MEANINGS) as far as text allows: the
    text names the asked metric for the asked entity — the entity and metric names the question
    uses, from the corpus's own entity and metric vocabulary (``units``) — without the answer. Words
    every look-alike of a template prints (titles, axis words) do not make a page supporting. A
    question that names no known entity or metric falls back to its subject terms: at least half of
    its content words, after STOPWORDS, on the page.
    """

    capabilities = Capabilities("model", reads_text=True, judges_sets=True, returns_answer=True, needs_answer=True)

    def __init__(self, entities: Sequence[str] = (), metrics: Sequence[str] = ()):
        self.entities = sorted({e.lower() for e in entities if e}, key=len, reverse=True)
        self.metrics = sorted({m.lower() for m in metrics if m}, key=len, reverse=True)
        self._patterns = {n: re.compile(rf"\b{re.escape(n)}\b") for n in self.entities + self.metrics}
        self._asked: dict[str, tuple[list[str], list[str]]] = {}

    @classmethod
    def from_resources(cls, units=None, **_):
        if units is None or not len(units):
            return cls()
        metrics = [METRIC_LABELS.get(m, str(m).replace("_", " ")) for m in units["metric"].astype(str).unique() if m]
        return cls(units["entity"].astype(str).unique(), metrics)

    def _named(self, names: Sequence[str], text: str) -> list[str]:
        found, rest = [], text
        for name in names:                       # longest first: "operating income" before "income"
            pattern = self._patterns.get(name) or re.compile(rf"\b{re.escape(name)}\b")
            if pattern.search(rest):
                found.append(name)
                rest = pattern.sub(" ", rest)
        return found

    def _asked_names(self, asked: str) -> tuple[list[str], list[str]]:
        """The entities and metrics a question names (once per question text)."""
        if asked not in self._asked:
            self._asked[asked] = (self._named(self.entities, asked), self._named(self.metrics, asked))
        return self._asked[asked]

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        text = str(unit.get("text", ""))
        answer = str(question.get("answer", ""))
        matched = answer_match(answer, text, str(question.get("text", ""))) if answer else ""
        if matched:
            return Judgement("sufficient", f"{matched} on the page (answer {answer!r})", self.name, answer)
        asked, low = str(question.get("text", "")).lower(), text.lower()
        entities, metrics = self._asked_names(asked)
        if entities or metrics:
            if all(self._patterns[n].search(low) for n in entities + metrics):
                return Judgement("supporting", f"names {', '.join(entities + metrics)} as the question does, but not "
                                               "the answer", self.name)
            return Judgement("irrelevant", "the answer does not appear, and the page does not name the asked "
                                           "entity and metric", self.name)
        subject = _words(asked) - _words(answer)
        found = subject & _words(text)
        if subject and len(found) >= max(1, len(subject) // 2):
            return Judgement("supporting", f"subject terms on the page ({', '.join(sorted(found)[:4])}) but not the "
                                           "answer", self.name)
        return Judgement("irrelevant", "neither the answer nor most subject terms appear", self.name)


# ----------------------------------------------------------------------------- human

def check_labels(labels: pd.Series, path: Path, error: type[Exception]) -> None:
    """Every label one of LABELS; else the error names the file, the 1-based row and the value."""
    bad = ~labels.isin(LABELS)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise error(f"{path}: row {i + 1} label {labels.iloc[i]!r} is not one of {', '.join(LABELS)}")


@register("human", "labels people wrote, read from a file: the labels every other judge is measured against")
class HumanJudge:
    """Labels people wrote: a CSV with query_id, unit_id, label (and optional note)."""

    capabilities = Capabilities("human", reads_image=True, needs_labels=True)

    @classmethod
    def from_resources(cls, labels="", units=None, page_base=1, **_):
        if not labels:
            raise JudgeError("the human judge needs validate.labels: a CSV of query_id, unit_id, label")
        return cls(labels, None if units is None else units["unit_id"], page_base)

    def __init__(self, path: Path | str, unit_ids: Sequence[str] | None = None, page_base: int = 1,
                 query_ids: Sequence[str] | None = None):
        """unit_ids: the corpus's, to check the file's page numbers against page_base (io.pagebase)
        and to set aside rows naming no unit; query_ids: the run's questions, likewise. A pair
        listed twice with different labels is a conflict: both rows are kept in ``skipped`` and
        the pair has no label (never the later one silently); the same label twice is one label."""
        path = Path(path)
        df = read_required_csv(path, ("query_id", "unit_id", "label"), "label file", JudgeError)
        check_labels(df["label"], path, JudgeError)
        if unit_ids is not None:
            try:
                pagebase.check(str(path), list(df["unit_id"]), page_base, unit_ids, range(2, len(df) + 2))
            except pagebase.PageBaseError as exc:
                raise JudgeError(str(exc)) from exc
        df["unit_id"] = pagebase.normalise(df["unit_id"], page_base)
        notes = df["note"] if "note" in df.columns else pd.Series([""] * len(df), index=df.index)
        known_u = None if unit_ids is None else set(unit_ids)
        known_q = None if query_ids is None else set(query_ids)
        by_pair: dict[tuple, list[tuple[int, str, str]]] = {}
        skipped = []
        for row, (q, u, lab, note) in enumerate(zip(df["query_id"], df["unit_id"], df["label"], notes), start=1):
            if known_q is not None and q not in known_q:
                skipped.append((str(path), row, u, f"unknown query {q!r}"))
            elif known_u is not None and u not in known_u:
                skipped.append((str(path), row, u, f"unknown unit {u!r} (query {q!r})"))
            else:
                by_pair.setdefault((q, u), []).append((row, lab, note))
        self.labels = {}
        for (q, u), rows in by_pair.items():
            if len({lab for _, lab, _ in rows}) > 1:
                listed = ", ".join(f"row {r}: {lab}" for r, lab, _ in rows)
                skipped += [(str(path), r, u, f"conflicting labels for query {q!r} ({listed}); the pair is left "
                                              "unlabelled until one is removed") for r, _, _ in rows]
            else:
                _, lab, note = rows[-1]
                self.labels[(q, u)] = (lab, note)
        self.skipped = pd.DataFrame(sorted(skipped, key=lambda x: x[1]), columns=["source", "row", "unit_id", "problem"])

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        key = (question["query_id"], unit["unit_id"])
        if key not in self.labels:
            raise JudgeError(f"no human label for query {key[0]!r} and unit {key[1]!r}")
        label, note = self.labels[key]
        return Judgement(label, note or "human label", self.name)


# ----------------------------------------------------------------------------- openai-compatible

RUBRIC = (
    "You judge whether a document page (or a set of pages, shown in order) answers a question. Look only at\n"
    "the page images. Reply with one JSON object and nothing else: {\"label\": L, \"answer\": A,\n"
    "\"rationale\": R}, where A is the answer the pages give (\"\" when they give none), R is one short\n"
    "sentence and L is\n" + ";\n".join(f"\"{lab}\" if {LABEL_MEANINGS[lab]}" for lab in LABELS) + ".\n"
)


def parse_reply(content: str) -> tuple[str, str, str]:
    """Strictly parse the model's reply: a JSON object with a known label (a fenced block is
    allowed) -> (label, answer, rationale); answer and rationale may be absent."""
    text = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.S)
    if fenced:
        text = fenced.group(1)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JudgeError(f"reply is not a JSON object: {content[:120]!r}") from exc
    if not isinstance(obj, dict) or obj.get("label") not in LABELS:
        raise JudgeError(f"reply has no valid label (expected one of {', '.join(LABELS)}): {content[:120]!r}")
    return obj["label"], str(obj.get("answer", "") or "")[:200], str(obj.get("rationale", ""))[:300]


def majority(labels: Sequence[str]) -> str:
    """The most frequent label; a tie goes to the lower label (irrelevant < supporting < sufficient)."""
    counts = {lab: list(labels).count(lab) for lab in LABELS}
    best = max(counts.values())
    return min((lab for lab, n in counts.items() if n == best), key=lambda lab: LABEL_GRADES[lab])


def image_part(path: Path) -> dict:
    """One page for the request: a data URI with the MIME type of the file's content."""
    return {"type": "image_url", "image_url": {"url": image_data_url(path)}}


@register("openai-compatible", "a vision-language model's labels: model-only until their agreement with people's "
                               "labels is measured")
class OpenAICompatibleJudge:
    """A VLM behind an OpenAI-compatible /chat/completions endpoint.

    base_url: e.g. http://localhost:8000/v1; model: the served model name; api_key_env: the name of
    the environment variable holding the key (the key itself is never stored or logged);
    cache_dir: replies cached by sha256 of (model, rubric, question, samples, temperature, every
    page's bytes). An evidence set's pages go in one request, in order; each page's MIME type is
    read from its content. samples: replies per judgement (each its own request), the label their
    majority (ties to the lower label); samples and temperature are recorded with the label.
    The request carries the rubric, the question and the page pixels only — no file name, path,
    caption or alt text.
    """

    capabilities = Capabilities("model", reads_image=True, judges_sets=True, returns_answer=True, needs_endpoint=True)

    @classmethod
    def from_resources(cls, url="", model="", cache_dir=None, samples=1, temperature=0.0, timeout_s=60.0,
                       max_attempts=4, **_):
        if not url or not model:
            raise JudgeError("the openai-compatible judge needs validate.judge_url and validate.judge_model")
        return cls(url, model, cache_dir=cache_dir, samples=samples, temperature=temperature, timeout=float(timeout_s),
                   retries=max(int(max_attempts), 1) - 1)

    def __init__(self, base_url: str, model: str, api_key_env: str = "LOOKALIKE_JUDGE_API_KEY",
                 cache_dir: Path | str | None = None, timeout: float = 60.0, retries: int = 3, backoff: float = 1.0,
                 temperature: float = 0.0, samples: int = 1):
        if samples < 1:
            raise JudgeError(f"the openai-compatible judge needs samples >= 1, got {samples}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key_env = model, api_key_env
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.timeout, self.retries, self.backoff, self.temperature = timeout, retries, backoff, temperature
        self.samples = samples

    def _key(self, question: str, images: Sequence[bytes]) -> str:
        h = hashlib.sha256()
        for part in (self.model, RUBRIC, question, f"samples={self.samples}", f"temperature={self.temperature}"):
            h.update(part.encode("utf-8") + b"\0")
        for image in images:
            h.update(hashlib.sha256(image).digest())
        return h.hexdigest()

    def _post(self, payload: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "")
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.url, data=json.dumps(payload).encode("utf-8"), headers=headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return json.loads(resp.read().decode("utf-8"))

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        paths = [Path(p) for p in (unit.get("image_paths") or [unit["image_path"]])]
        qtext = str(question["text"])
        cache_path = (self.cache_dir / f"{self._key(qtext, [p.read_bytes() for p in paths])}.json"
                      if self.cache_dir else None)
        if cache_path and cache_path.is_file():
            c = json.loads(cache_path.read_text())
            return Judgement(c["label"], c["rationale"], self.name, c.get("answer", ""), self.samples, self.temperature)
        content = [{"type": "text", "text": f"Question: {qtext}"}] + [image_part(p) for p in paths]
        payload = {"model": self.model, "temperature": self.temperature,
                   "messages": [{"role": "system", "content": RUBRIC}, {"role": "user", "content": content}]}
        replies = [self._one(payload) for _ in range(self.samples)]
        label = majority([r[0] for r in replies])
        answer, rationale = next((a, why) for lab, a, why in replies if lab == label)
        if self.samples > 1:
            votes = ", ".join(f"{lab} {sum(r[0] == lab for r in replies)}" for lab in LABELS)
            rationale = f"{rationale} [majority of {self.samples} at temperature {self.temperature:g}: {votes}]"
        else:
            rationale = f"{rationale} [1 sample at temperature {self.temperature:g}]"
        if cache_path:
            cache_path.parent.mkdir(parents=True, exist_ok=True)
            cache_path.write_text(json.dumps({"label": label, "answer": answer, "rationale": rationale}))
        return Judgement(label, rationale, self.name, answer, self.samples, self.temperature)

    def _one(self, payload: dict) -> tuple[str, str, str]:
        """One reply, with retries and exponential backoff on a network error or an unparseable reply."""
        last = None
        for attempt in range(self.retries + 1):
            try:
                reply = self._post(payload)
                return parse_reply(reply["choices"][0]["message"]["content"])
            except (urllib.error.URLError, TimeoutError, OSError, KeyError, IndexError, JudgeError,
                    json.JSONDecodeError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(self.backoff * 2 ** attempt)
        raise JudgeError(f"{self.url}: no valid judgement after {self.retries + 1} attempts: {last}")


# ----------------------------------------------------------------------------- agreement

def cohen_kappa(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = LABELS) -> float:
    """Cohen's kappa of two label sequences over the given label set (nan when undefined)."""
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise ValueError(f"kappa needs paired labels: {len(a)} vs {len(b)}")
    if not a or len(set(a)) < 2 or len(set(b)) < 2:
        # one judge gave one label throughout: chance agreement is then the agreement itself and
        # kappa comes out 0 whatever the other judge did — a number that measures nothing
        return float("nan")
    cm = confusion(a, b, labels).to_numpy(dtype=float)
    n = cm.sum()
    po = np.trace(cm) / n
    pe = float((cm.sum(axis=1) * cm.sum(axis=0)).sum() / n**2)
    return float("nan") if pe == 1.0 else float((po - pe) / (1 - pe))


def boundary_kappa(a: Sequence[str], b: Sequence[str]) -> float:
    """Kappa on the sufficient/supporting boundary: over the items both judges called relevant
    (sufficient or supporting), do they agree on which?"""
    pairs = [(x, y) for x, y in zip(a, b) if x != "irrelevant" and y != "irrelevant"]
    return cohen_kappa([x for x, _ in pairs], [y for _, y in pairs], labels=("sufficient", "supporting"))


def confusion(a: Sequence[str], b: Sequence[str], labels: Sequence[str] = LABELS) -> pd.DataFrame:
    """Counts: rows the first judge's labels, columns the second's."""
    idx = {lab: i for i, lab in enumerate(labels)}
    cm = np.zeros((len(labels), len(labels)), dtype=int)
    for x, y in zip(a, b):
        cm[idx[x], idx[y]] += 1
    return pd.DataFrame(cm, index=pd.Index(labels, name="first"), columns=pd.Index(labels, name="second"))


# ----------------------------------------------------------------------------- factory

JUDGES = tuple(REGISTRY.names())


def resolve_name(name: str, answer_key: pd.DataFrame | None = None) -> str:
    """'auto' is the reference judge when the run has the demo's answer key, else answer-string."""
    if name == "auto":
        return "reference" if answer_key is not None and len(answer_key) else "answer-string"
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
                shas: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Label every (query_id, unit_id) of pairs with judge, as rows for the label store: query_id,
    unit_id, question_sha, label, judge, source (the judge's capability), note (its rationale)."""
    columns = ["query_id", "unit_id", "question_sha", "label", "judge", "source", "note"]
    asked = {r["query_id"]: r for r in questions.to_dict("records")}
    rows = []
    for q, u in bars.bar(zip(pairs["query_id"].tolist(), pairs["unit_id"].tolist()), total=len(pairs),
                         desc=f"judging ({judge.name})", unit="pair"):
        j = judge.judge(dict(asked[q]), view([u]))
        rows.append({"query_id": q, "unit_id": u, "question_sha": (shas or {}).get(q, ""), "label": j.label,
                     "judge": judge.name, "source": judge.capabilities.source, "note": j.rationale})
    return pd.DataFrame(rows, columns=columns)


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
            self.seen[key] = judge.judge({**row.to_dict(), "query_id": query_id}, self.view([unit_id])).label
        return self.seen[key]


def second_judge(first: Judge, name: str, **resources) -> Judge | None:
    """The judge to compare the first with, or None when none is set or it is the first judge
    itself (a judge is never compared with itself)."""
    if not name or name == "none":
        return None
    if resolve_name(name, resources.get("answer_key")) == first.name:
        return None
    return make_judge(name, **resources)


KAPPA_SLAB = 1 << 20      # resampled pairs counted at a time by kappa_ci


def kappa_ci(a: Sequence[str], b: Sequence[str], n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of Cohen's kappa, pairs resampled (nan when undefined)."""
    code = {lab: i for i, lab in enumerate(LABELS)}
    x = np.asarray([code[v] for v in a], dtype=np.int64)
    y = np.asarray([code[v] for v in b], dtype=np.int64)
    n, m = len(x), len(LABELS)
    if n < 2 or len(set(x.tolist())) < 2 or len(set(y.tolist())) < 2:
        return float("nan"), float("nan")
    # The same draws as integers(0, n, size=(n_boot, n)) in int64 (numpy takes both from one 32-bit
    # stream), held in int32; each pair's (first, second) cell coded once; the replicates' cells
    # counted a slab at a time. So no (n_boot × n) array but the draws is made: at 55,000 pairs
    # four such arrays would take 440 MB each.
    idx = np.random.default_rng([seed, 77]).integers(0, n, size=(n_boot, n),
                                                     dtype=np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    pair_cell = x * m + y
    cm = np.empty((n_boot, m * m))
    step = max(1, KAPPA_SLAB // n)
    for start in range(0, n_boot, step):
        rows = idx[start:start + step]
        cells = pair_cell[rows] + (np.arange(len(rows), dtype=np.int64)[:, None] * (m * m))
        cm[start:start + len(rows)] = np.bincount(cells.ravel(), minlength=len(rows) * m * m).reshape(len(rows), m * m)
    cm = cm.reshape(n_boot, m, m)
    po = np.trace(cm, axis1=1, axis2=2) / n
    pe = (cm.sum(axis=2) * cm.sum(axis=1)).sum(axis=1) / n ** 2
    # a replicate in which either judge drew one label only has no kappa (as cohen_kappa)
    one_label = ((cm.sum(axis=2) > 0).sum(axis=1) < 2) | ((cm.sum(axis=1) > 0).sum(axis=1) < 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas = np.where((pe < 1.0) & ~one_label, (po - pe) / (1 - pe), np.nan)
    values = kappas[~np.isnan(kappas)]
    if not len(values):
        return float("nan"), float("nan")
    lo, hi = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def kappa_words(row: Mapping) -> str:
    """'kappa 0.15 [0.11, 0.19]' from an agreement row (values may come back from a CSV as text);
    'kappa undefined' when it is (a judge that gave a single label throughout, or no pairs)."""
    def num(key):
        try:
            return float(row.get(key, float("nan")))
        except (TypeError, ValueError):
            return float("nan")
    k, lo, hi = num("kappa"), num("kappa_lo"), num("kappa_hi")
    if k != k:
        agree, n = num("agreement"), num("n")
        raw = (f"; raw agreement {agree:.2f} over {int(n)} pairs" if agree == agree and n == n and n > 0 else "")
        return ("kappa undefined (a judge gave one label throughout, or there were no pairs)" + raw)
    return f"kappa {k:.2f}" + (f" [{lo:.2f}, {hi:.2f}]" if lo == lo and hi == hi else "")


def agreement(first: Sequence[str], second: Sequence[str], seed: int = 0) -> dict:
    """n, raw agreement, Cohen's kappa with a bootstrap 95% CI (pairs resampled), and kappa on the
    sufficient/supporting boundary."""
    a, b = list(first), list(second)
    boundary = [(x, y) for x, y in zip(a, b) if x != "irrelevant" and y != "irrelevant"]
    lo, hi = kappa_ci(a, b, seed=seed)
    return {"n": len(a), "agreement": float(np.mean([x == y for x, y in zip(a, b)])) if a else float("nan"),
            "kappa": cohen_kappa(a, b), "kappa_lo": lo, "kappa_hi": hi, "n_boundary": len(boundary),
            "kappa_boundary": boundary_kappa(a, b)}
