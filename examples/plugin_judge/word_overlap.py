"""A worked plug-in judge for lookalike: does the page's text hold the answer's words?

Named in a run's parameters either way a judge plugs in:

    plugins: [examples/plugin_judge/word_overlap.py]     # imported first: registers "word-overlap"
    validate:
      compare_judge: word-overlap                        # by the name it registered
    labels:
      model_judge: "examples/plugin_judge/word_overlap.py:WordOverlapJudge"   # or by import path

What lookalike asks of a judge class (docs/judges-and-labels.md):

- ``capabilities``: a Capabilities — whose labels these are (``source``: "model" for anything a
  program decides; "human" and "reference" are for people's labels and an answer key) and what the
  judge reads and needs (here the page's text, read off its pixels, and the question's answer);
- ``from_resources(**resources)``: a class method making the judge from what the stage has (units,
  facts, answer_key, labels, url, model, cache_dir — take what you need, ignore the rest);
- ``judge(question, unit) -> Judgement``: question is a mapping with ``text`` and ``answer``; unit is
  what a judge may see of a page — ``unit_id``, ``image_path`` and ``text`` (OCR or the PDF's text
  layer), never its file name or caption. Return ABSTAIN when you cannot see what a label needs:
  the pair stays unlabelled rather than wrongly labelled.

``register_judge(name, worth)`` enters the class in the registry under ``name`` when its module is
imported; named by import path instead, the class's own ``name`` and ``worth`` are used.

The rule itself is deliberately plain: *sufficient* when every word and number of the answer is a
word of the page's text; *supporting* when at least half of the question's longer words are; else
*irrelevant*. It is not a good judge — which is what the agreement table next to its labels says.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lookalike.plugin import ABSTAIN, Capabilities, Judgement, register_judge

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")


def words(text: str) -> set[str]:
    """Lower-cased words and numbers (a thousands separator or decimal point kept inside a number)."""
    return set(_WORD.findall(str(text).lower()))


WORTH = ("the answer's words found among the page text's words: a model label, unverified — read it beside "
         "its agreement with people or an answer key")


@register_judge("word-overlap", WORTH)
class WordOverlapJudge:
    """Labels a page by the answer's words in its text (see the module's docstring)."""

    name = "word-overlap"
    worth = WORTH
    capabilities = Capabilities("model", reads_text=True, judges_sets=True, needs_answer=True)

    @classmethod
    def from_resources(cls, **_resources) -> WordOverlapJudge:
        return cls()

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        answer, text = str(question.get("answer", "")), str(unit.get("text", ""))
        if not words(answer):
            return Judgement(ABSTAIN, "no answer to look for", self.name)
        if not text.strip():
            return Judgement(ABSTAIN, "no text on the page to read", self.name)
        on_page = words(text)
        if words(answer) <= on_page:
            return Judgement("sufficient", f"every word of the answer {answer!r} is on the page", self.name, answer)
        asked = {w for w in words(question.get("text", "")) if len(w) > 3} - words(answer)
        found = asked & on_page
        if asked and len(found) * 2 >= len(asked):
            return Judgement("supporting", f"the question's words on the page ({', '.join(sorted(found)[:4])}), "
                                           "not the answer", self.name)
        return Judgement("irrelevant", "neither the answer nor most of the question's words are on the page", self.name)
