"""Query cleaning before validation: questions a retrieval benchmark should not score as they are.

Three kinds, each a named rule with the words that matched, so a reader can check every flag:

- layout-reference: the question points at the page instead of asking about its content ("in the
  table", "in the figure", "on this slide", "above", "below", "shown here") — it presumes the
  reader already holds the page, so retrieval cannot be asked to find it;
- not-closed: it asks to describe, discuss, explain, summarise or give an opinion — no page can be
  judged sufficient for it;
- unclear: too short to name what it asks about (fewer than MIN_WORDS words), or a pronoun with no
  antecedent in the question ("What was its revenue?", "How did they do in Q3?").

questions.clean decides what happens: `flag` keeps every question and reports the flags; `drop`
leaves the flagged ones out of validation — and still lists each with its rule, never silently.
Rules are English surface patterns: a flag is a reason to look, not a verdict.
"""

from __future__ import annotations

import re

import pandas as pd

MIN_WORDS = 4
FLAG_COLUMNS = ["query_id", "rule", "matched", "action"]
SUMMARY_COLUMNS = ["rule", "questions", "share", "n", "examples"]
RULE_MEANINGS = {
    "layout-reference": "points at the layout ('in the table', 'above', 'shown here') instead of its content",
    "not-closed": "asks to describe, discuss, explain or give an opinion: no page is sufficient for it",
    "too-short": f"fewer than {MIN_WORDS} words: too short to say what it asks about",
    "dangling-pronoun": "a pronoun with no antecedent in the question ('its revenue', 'how did they do')",
}

_LAYOUT = re.compile(
    r"\b(?:in|on|from|of|inside|within|according to)\s+(?:the|this|that|these)\s+"
    r"(?:table|tables|figure|figures|fig\.?|chart|charts|graph|graphs|plot|diagram|image|picture|slide|slides|page|"
    r"screenshot|document|infographic|map|box)\b"
    r"|\b(?:on|in)\s+this\s+(?:slide|page|deck)\b"
    r"|\b(?:shown|displayed|depicted|pictured|presented|illustrated|listed)\s+(?:here|above|below)\b"
    # 'above' / 'below' as places on the page (sentence-final, or next to a figure word), never as a
    # comparison ('above the target', 'below 5%')
    r"|\b(?:above|below)\s*(?:[?.!,;:]|$)"
    r"|\b(?:table|figure|chart|graph|list|image|slide|diagram|text|paragraph)\s+(?:above|below)\b"
    r"|\b(?:above|below)\s+(?:table|figure|chart|graph|list|image|slide|diagram)\b"
    r"|\bthe\s+(?:following|preceding)\s+(?:table|figure|chart|graph|slide|page)\b",
    re.IGNORECASE)
_NOT_CLOSED = re.compile(
    r"^\s*(?:please\s+)?(?:describe|discuss|explain|summari[sz]e|elaborate|comment\s+on|tell\s+me\s+about|"
    r"give\s+(?:an?\s+)?(?:overview|summary|description)|talk\s+about|outline)\b"
    r"|\bwhat\s+(?:do|would)\s+you\s+(?:think|say|make\s+of)\b|\bwhat\s+is\s+your\s+(?:view|opinion|take)\b"
    r"|\bhow\s+would\s+you\s+(?:describe|summari[sz]e|characteri[sz]e)\b|\bin\s+your\s+opinion\b",
    re.IGNORECASE)
_PRONOUN = re.compile(
    r"^\s*(?:(?:what|how|when|where|why|which|who)\s+)?(?:(?:is|are|was|were|did|does|do|has|have|had|will|would|"
    r"much|many|big|large)\s+)*(?:it|its|they|their|them|this|that|these|those|he|she|his|her)\b(?!\s*-)",
    re.IGNORECASE)
_WORD = re.compile(r"[\w$%€£.,-]+", re.UNICODE)


def flags(text: str) -> list[tuple[str, str]]:
    """(rule, matched words) for every rule one question text breaks, in RULE_MEANINGS order."""
    text = str(text)
    out = []
    m = _LAYOUT.search(text)
    if m:
        out.append(("layout-reference", m.group(0)))
    m = _NOT_CLOSED.search(text)
    if m:
        out.append(("not-closed", m.group(0).strip()))
    words = _WORD.findall(text)
    if len(words) < MIN_WORDS:
        out.append(("too-short", f"{len(words)} word{'' if len(words) == 1 else 's'}"))
    m = _PRONOUN.search(text)
    if m:
        out.append(("dangling-pronoun", m.group(0).strip()))
    return out


def clean(questions: pd.DataFrame, mode: str = "flag") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(the questions validation takes, one row per flag (FLAG_COLUMNS), the summary per rule
    (SUMMARY_COLUMNS: flagged questions, their share of all, up to three examples)). mode 'flag'
    keeps every question; 'drop' leaves out each question with a flag."""
    if mode not in ("flag", "drop"):
        raise ValueError(f"questions.clean must be flag or drop, got {mode!r}")
    action = "dropped" if mode == "drop" else "flagged"
    rows = [{"query_id": q, "rule": rule, "matched": matched, "action": action}
            for q, text in zip(questions["query_id"], questions["text"]) for rule, matched in flags(text)]
    flagged = pd.DataFrame(rows, columns=FLAG_COLUMNS)
    text = dict(zip(questions["query_id"], questions["text"]))
    summary = []
    for rule in RULE_MEANINGS:
        mine = flagged[flagged["rule"] == rule]
        ids = list(dict.fromkeys(mine["query_id"]))
        summary.append({"rule": rule, "questions": len(ids), "share": len(ids) / len(questions) if len(questions) else 0.0,
                        "n": len(questions), "examples": " | ".join(f"{q}: {text[q]}" for q in ids[:3])})
    kept = questions[~questions["query_id"].isin(set(flagged["query_id"]))] if mode == "drop" else questions
    return kept.reset_index(drop=True), flagged, pd.DataFrame(summary, columns=SUMMARY_COLUMNS)
