"""The answer-string judge: from a unit's OCR text only, sufficient when the question's normalised
answer appears, supporting when its subject terms appear without it, else irrelevant (a model-only
label); and the number and word normalisation it rests on."""

from __future__ import annotations

import re
from functools import lru_cache
from collections.abc import Mapping, Sequence



from lookalike.vocab import METRIC_LABELS


from lookalike.judging.protocol import ABSTAIN, Capabilities, Judgement, drawn_not_written, register


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
        """The judge for a run: the entity names and metric words of the corpus's units, which its reading looks
        for."""
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
        """Sufficient when the unit's text holds the answer; supporting when it names what the question asks
        about (its entity and metric, or most of its subject words) without the answer; irrelevant
        otherwise. Abstains without an answer to look for or text to read."""
        text = str(unit.get("text", ""))
        answer = str(question.get("answer", ""))
        # it reads for the answer in OCR text: without either it cannot see what a label needs
        if not answer.strip():
            return Judgement(ABSTAIN, "no answer to look for (the question has none)", self.name)
        if not text.strip():
            return Judgement(ABSTAIN, "no text on the unit (OCR found none), so nothing to read", self.name)
        matched = answer_match(answer, text, str(question.get("text", ""))) if answer else ""
        if matched:
            return Judgement("sufficient", f"{matched} on the page (answer {answer!r})", self.name, answer)
        drawn = drawn_not_written(unit)
        if drawn:
            # the answer printed in a chart's text is evidence; its absence from the text is not
            return Judgement(ABSTAIN, f"{drawn}, and the answer is not in its text", self.name)
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
