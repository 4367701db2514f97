"""The judge door: the design's third way metadata leaks into an evaluation — a judge who sees the
file name marks look-alikes relevant.

``judge_door`` runs a judge twice on the same pairs: once as it always runs (what ``unit_view``
shows: pixels and OCR text, never caption fields) and once with each unit's file name and caption
appended to the text it reads. A judge moved by metadata labels more pairs relevant the second
time, and its gains sit on units whose file name or caption holds one of the question's words.
Only judges that read text can be run this way here (the answer-string judge); a judge behind an
endpoint would need every pair sent twice, which the report does not do on its own.

``subject_terms_judge`` is the door's planted judge on the demo: the answer-string judge without
the corpus's entity and metric vocabulary, so "supporting" is any page holding half of the
question's words — what a lenient judge does, and what metadata moves.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

from lookalike.data.schema import filename_words
from lookalike.eval import stats
from lookalike.judging.judges import AnswerStringJudge, Judge, content_words, label_pairs

DOOR_COLUMNS = ["query_id", "unit_id", "blind", "with_metadata", "gained", "term_in_metadata"]
SUMMARY_COLUMNS = ["judge", "n_pairs", "relevant_blind", "relevant_with_metadata", "gained", "lost",
                   "gained_with_term", "gained_with_term_lo", "gained_with_term_hi",
                   "others_with_term", "others_with_term_lo", "others_with_term_hi"]


def metadata_text(unit: Mapping) -> str:
    """What a leaky judging set-up shows beside the page: the file name (separators as spaces, no
    extension) and the caption."""
    name = filename_words(unit.get("filename", ""))
    return " ".join(p for p in (name, str(unit.get("caption", "")).strip()) if p)


def judge_door(judge: Judge, pairs: pd.DataFrame, questions: pd.DataFrame, view: Callable[[list], Mapping],
               units: pd.DataFrame, name: str = "", blind: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per pair, summary): the judge's label blind and with metadata appended, whether the pair
    gained relevance (irrelevant -> supporting / sufficient), and whether the unit's metadata holds
    a word of the question. The summary gives both counts of relevant labels and the share of
    gains (and of the other pairs) whose metadata holds a query term, with bootstrap 95% intervals
    that resample whole documents of the judged units.
    name: what the summary calls the judge (default its registry name).
    blind: this judge's labels of these pairs through this view, when the caller already has them
    (stage 06's model pre-labels): the blind pass is then not run again."""
    if not judge.capabilities.reads_text or judge.capabilities.needs_endpoint:
        raise ValueError(f"the {judge.name} judge does not read text here; the judge door runs text-reading judges only")
    meta = {r["unit_id"]: metadata_text(r) for r in units.to_dict("records")}

    def leaky_view(ids: list) -> Mapping:
        shown = dict(view(ids))
        shown["text"] = "\n".join([str(shown.get("text", ""))] + [meta.get(u, "") for u in ids])
        return shown

    if blind is None:
        blind = label_pairs(judge, pairs, questions, view)
    elif not (blind["query_id"].tolist() == pairs["query_id"].tolist()
              and blind["unit_id"].tolist() == pairs["unit_id"].tolist()):
        raise ValueError("judge_door: the blind labels given are not of these pairs, in this order")
    seen = label_pairs(judge, pairs, questions, leaky_view)
    asked = dict(zip(questions["query_id"], questions["text"]))
    out = pd.DataFrame({"query_id": blind["query_id"], "unit_id": blind["unit_id"], "blind": blind["label"],
                        "with_metadata": seen["label"]})
    out["gained"] = (out["blind"] == "irrelevant") & (out["with_metadata"] != "irrelevant")
    out["term_in_metadata"] = [bool(content_words(asked.get(q, "")) & content_words(meta.get(u, "")))
                               for q, u in zip(out["query_id"], out["unit_id"])]
    gained, others = out[out["gained"]], out[~out["gained"]]
    doc = dict(zip(units["unit_id"], units["doc_id"].astype(str))) if "doc_id" in units.columns else {}

    def share(part: pd.DataFrame):
        # bootstrap over pairs, whole documents of the judged unit resampled (pairs of one document move together)
        if not len(part):
            return stats.Interval(float("nan"), float("nan"), float("nan"), 0, "bootstrap")
        groups = pd.Series([doc.get(u, u) for u in part["unit_id"]], index=range(len(part)), name="document")
        return stats.bootstrap_ci(part["term_in_metadata"].to_numpy(float), 2000, rng=0,
                                  clusters=groups.to_numpy(dtype=object))

    g, o = share(gained), share(others)
    summary = pd.DataFrame([{
        "judge": name or judge.name, "n_pairs": len(out), "relevant_blind": int((out["blind"] != "irrelevant").sum()),
        "relevant_with_metadata": int((out["with_metadata"] != "irrelevant").sum()), "gained": len(gained),
        "lost": int(((out["blind"] != "irrelevant") & (out["with_metadata"] == "irrelevant")).sum()),
        "gained_with_term": g.estimate, "gained_with_term_lo": g.lo, "gained_with_term_hi": g.hi,
        "others_with_term": o.estimate, "others_with_term_lo": o.lo, "others_with_term_hi": o.hi}],
        columns=SUMMARY_COLUMNS)
    return out[DOOR_COLUMNS], summary


def subject_terms_judge() -> Judge:
    """The lenient judge the demo plants behind the door: answer string, else half of the question's
    content words on the page (no entity / metric vocabulary)."""
    return AnswerStringJudge()
