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

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from lookalike.data.schema import filename_words
from lookalike.eval import stats
from lookalike.judging.judges import AnswerStringJudge, Judge, content_words, label_pairs
from lookalike.judging.protocol import ABSTAIN

# the labels that count as relevant; an abstention (the judge could not see the pair) is not one
RELEVANT = frozenset({"sufficient", "supporting"})
DOOR_COLUMNS = ["query_id", "unit_id", "blind", "with_metadata", "gained", "term_in_metadata"]
SUMMARY_COLUMNS = ["judge", "n_pairs", "relevant_blind", "relevant_with_metadata", "gained", "lost",
                   "gained_with_term", "gained_with_term_lo", "gained_with_term_hi",
                   "others_with_term", "others_with_term_lo", "others_with_term_hi",
                   "share_blind", "share_blind_lo", "share_blind_hi",
                   "share_with_metadata", "share_with_metadata_lo", "share_with_metadata_hi",
                   "difference", "difference_lo", "difference_hi"]


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

    if blind is not None:
        got = list(zip(blind["query_id"], blind["unit_id"]))
        want = list(zip(pairs["query_id"], pairs["unit_id"]))
        rest = iter(want)
        # labels given without the pairs the judge abstained on: these pairs, in this order, less those
        short = bool(blind.attrs.get("abstained")) and all(p in rest for p in got)
        if got != want and not short:
            raise ValueError("judge_door: the blind labels given are not of these pairs, in this order")
        if short and got != want:
            blind = None
    if blind is None:
        # the door compares two views of every pair: a pair the judge abstains on blind (no text to read)
        # counts as not relevant there, which is what the judge said of it
        blind = label_pairs(judge, pairs, questions, view, keep_abstained=True)
    seen = label_pairs(judge, pairs, questions, leaky_view, keep_abstained=True)
    # a pair the judge abstained on both blind and with the metadata says nothing about the door: left out,
    # and a judge that abstained on every pair measures nothing (said, never a difference of 0.00)
    said = ~((blind["label"].to_numpy() == ABSTAIN) & (seen["label"].to_numpy() == ABSTAIN))
    out = door_pairs(blind["query_id"][said], blind["unit_id"][said], blind["label"][said], seen["label"][said],
                     questions, meta)
    if not len(out):
        empty = pd.DataFrame(columns=SUMMARY_COLUMNS)
        reasons = sorted(set(seen.loc[~said, "note"].astype(str)) | set(blind.loc[~said, "note"].astype(str)))
        empty.attrs["not_measured"] = (f"the {name or judge.name} judge abstained on all {len(pairs)} pairs, blind and "
                                       f"with each unit's file name and caption ({'; '.join(reasons[:2])}): its "
                                       "door is not measured")
        return out, empty
    return out, door_summary(out, units, name or judge.name)


def door_pairs(query_ids, unit_ids, blind, with_metadata, questions: pd.DataFrame, meta: Mapping[str, str]
               ) -> pd.DataFrame:
    """The door's per-pair table (DOOR_COLUMNS): each pair's label blind and with metadata, whether it
    gained relevance (irrelevant -> supporting / sufficient) and whether the unit's metadata text
    (``meta``: unit_id -> metadata_text) holds a content word of the question."""
    asked = dict(zip(questions["query_id"], questions["text"]))
    out = pd.DataFrame({"query_id": list(query_ids), "unit_id": list(unit_ids), "blind": list(blind),
                        "with_metadata": list(with_metadata)})
    relevant = RELEVANT
    out["gained"] = ~out["blind"].isin(relevant) & out["with_metadata"].isin(relevant)
    out["term_in_metadata"] = [bool(content_words(asked.get(q, "")) & content_words(meta.get(u, "")))
                               for q, u in zip(out["query_id"], out["unit_id"])]
    return out[DOOR_COLUMNS]


def door_summary(out: pd.DataFrame, units: pd.DataFrame, name: str, blind_relevant=None,
                 metadata_relevant=None) -> pd.DataFrame:
    """One summary row of a door's per-pair table (DOOR_COLUMNS): relevant labels blind and with
    metadata (counts, and shares with intervals), the paired difference (with metadata − blind) with
    its interval, gains and losses, and the share of gains (and of the other pairs) whose metadata holds
    a query word. blind_relevant / metadata_relevant: each pair's relevance as a number in [0, 1] (a
    pool of people splitting on a pair counts as its share); by default 1 where the label is relevant.
    Every interval is a bootstrap 95% interval resampling whole documents of the judged units (pairs of
    one document move together)."""
    doc = dict(zip(units["unit_id"], units["doc_id"].astype(str))) if "doc_id" in units.columns else {}
    b_rel = (out["blind"].isin(RELEVANT) if blind_relevant is None else pd.Series(blind_relevant, index=out.index)
             ).astype(float)
    m_rel = (out["with_metadata"].isin(RELEVANT) if metadata_relevant is None
             else pd.Series(metadata_relevant, index=out.index)).astype(float)
    groups_all = np.asarray([doc.get(u, u) for u in out["unit_id"]], dtype=object)

    def share(part: pd.DataFrame, values: pd.Series):
        if not len(part):
            return stats.Interval(float("nan"), float("nan"), float("nan"), 0, "bootstrap")
        groups = pd.Series([doc.get(u, u) for u in part["unit_id"]], index=range(len(part)), name="document")
        return stats.bootstrap_ci(values.to_numpy(float), 2000, rng=0, clusters=groups.to_numpy(dtype=object))

    gained, others = out[out["gained"]], out[~out["gained"]]
    g, o = share(gained, gained["term_in_metadata"]), share(others, others["term_in_metadata"])
    b, m = share(out, b_rel), share(out, m_rel)
    diff, lo, hi, _ = stats.paired_bootstrap(m_rel.to_numpy(), b_rel.to_numpy(), 2000, rng=0,
                                              clusters=groups_all if len(out) else None)

    def count(v: float):
        # a pool's split pairs count as their share: a whole number where every pair was unanimous
        return int(round(v)) if abs(v - round(v)) < 1e-9 else round(float(v), 2)

    return pd.DataFrame([{
        "judge": name, "n_pairs": len(out), "relevant_blind": count(b_rel.sum()),
        "relevant_with_metadata": count(m_rel.sum()), "gained": len(gained),
        "lost": int((m_rel < b_rel).sum()),
        "gained_with_term": g.estimate, "gained_with_term_lo": g.lo, "gained_with_term_hi": g.hi,
        "others_with_term": o.estimate, "others_with_term_lo": o.lo, "others_with_term_hi": o.hi,
        "share_blind": b.estimate, "share_blind_lo": b.lo, "share_blind_hi": b.hi,
        "share_with_metadata": m.estimate, "share_with_metadata_lo": m.lo, "share_with_metadata_hi": m.hi,
        "difference": diff, "difference_lo": lo, "difference_hi": hi}],
        columns=SUMMARY_COLUMNS)


def people_door(labels: pd.DataFrame, questions: pd.DataFrame, units: pd.DataFrame
                ) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The judge door measured with people (the team label database with ``labels.door`` on): on every
    pair labelled in both pools, the share of the blind pool's labels that call it relevant against the
    share of the metadata pool's (who saw the file name and caption beside the page) — a pool whose
    people split counts as its share, so no pair is dropped as a tie. Returns (per pair, summary, why):
    why says in words why there is no row (empty when there is one). Adjudications are not used here:
    they settle a pair once for both pools, which is what the door compares."""
    empty = (pd.DataFrame(columns=DOOR_COLUMNS), pd.DataFrame(columns=SUMMARY_COLUMNS))
    people = labels[(labels["kind"] == "label") & (labels["retracted"].astype(int) == 0)] if len(labels) else labels
    pools = {pool: people[people["pool"] == pool] for pool in ("blind", "metadata")} if len(people) else {}
    missing = [pool for pool in ("blind", "metadata") if not len(pools.get(pool, ()))]
    if len(missing) == 2:
        return (*empty, "no people's labels from either pool yet")
    if missing == ["metadata"]:
        return (*empty, "no labels yet from the metadata pool (people who see file names and captions)")
    if missing == ["blind"]:
        return (*empty, "no labels yet from the blind pool (people who do not see file names and captions)")
    share = {pool: part.assign(relevant=part["label"].isin(RELEVANT)).groupby("pair_id", sort=True)
             .agg(query_id=("query_id", "first"), unit_id=("unit_id", "first"), relevant=("relevant", "sum"),
                  n=("label", "size"), labels=("label", lambda v: ", ".join(sorted(v))))
             for pool, part in pools.items()}
    both = share["blind"].merge(share["metadata"][["relevant", "n", "labels"]], left_index=True, right_index=True,
                                how="inner", suffixes=("", "_metadata"))
    if both.empty:
        return (*empty, "no pair has a label from both pools yet")
    meta = {r["unit_id"]: metadata_text(r) for r in units.to_dict("records")}
    b_rel, m_rel = both["relevant"] / both["n"], both["relevant_metadata"] / both["n_metadata"]

    def said(relevant, n, labels) -> str:
        return f"{int(relevant)} of {int(n)} relevant ({labels})"

    out = door_pairs(both["query_id"], both["unit_id"],
                     [said(*v) for v in zip(both["relevant"], both["n"], both["labels"])],
                     [said(*v) for v in zip(both["relevant_metadata"], both["n_metadata"], both["labels_metadata"])],
                     questions, meta)
    # a pair gains when a larger share of the metadata pool than of the blind pool calls it relevant
    out["gained"] = (m_rel > b_rel).to_numpy()
    out = out.assign(_b=b_rel.to_numpy(), _m=m_rel.to_numpy()).sort_values(["query_id", "unit_id"], kind="mergesort")
    out = out.reset_index(drop=True)
    n_blind, n_meta = pools["blind"]["annotator"].nunique(), pools["metadata"]["annotator"].nunique()
    name = (f"people ({n_blind} blind, {n_meta} seeing file name and caption; every pair both pools labelled, "
            "a pool that splits counting as its share)")
    return (out[DOOR_COLUMNS], door_summary(out[DOOR_COLUMNS], units, name, out["_b"].to_numpy(), out["_m"].to_numpy()),
            "")


def subject_terms_judge() -> Judge:
    """The lenient judge the demo plants behind the door: answer string, else half of the question's
    content words on the page (no entity / metric vocabulary)."""
    return AnswerStringJudge()
