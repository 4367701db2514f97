"""The summary's claims as data: each sentence a stakeholder reads first — the verdict and what was
scored — is a record of what it claims, the figures it quotes (table, row key, column, value), the
n and interval, the paired test it rests on and the preconditions it needs. Stage 07 writes the
records to outputs/<run>/claims.json and the page shows each record's text, rendered from the record
alone (``render``); ``lookalike audit`` derives every record again from the run's tables, renders it
again and checks its preconditions (report.audit.check_claims).

The verdict's rules, which hold on every corpus:

- a figure under hard negatives counts only questions whose candidate set is larger than the k it
  reports (tables/hard_sets.csv, in_hard); others are outside the hard columns, counted, never 1 by
  construction;
- chance beside it: a random ranking of a question's candidates puts its gold in the top k with
  probability k / candidates, averaged over the questions;
- "best" and "ahead" only where the paired randomisation test (Holm-adjusted, tables/significance.csv)
  separates the systems; a system whose 95% CI reaches down to chance is never best, ahead or tied —
  it is named as indistinguishable from chance.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from lookalike.eval.compare import format_p
from lookalike.report import summary
from lookalike.eval.ranking import tie_settled  # noqa: F401 (stage 07 and the audit read it here)
from lookalike.report.summary import nouned

ALPHA = 0.05
VERDICT_K = 5
VERDICT_MEASURE = "sufficient@5 (hard)"


def _num(v) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _ci(f: Mapping) -> str:
    return f"{f['value']:.2f} [{f['lo']:.2f}, {f['hi']:.2f}]"


def _p(p: float) -> str:
    shown = format_p(p)
    return shown if shown.startswith("<") else f"= {shown}"


def _names(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + f" and {names[-1]}"


def hard_chance(hard_sets: pd.DataFrame, k: int) -> float:
    """A random ranking's sufficient@k under hard negatives: the mean over the questions in the hard
    columns of k / candidates (each question's candidate set holds one gold)."""
    if not len(hard_sets):
        return float("nan")
    inside = hard_sets[hard_sets["in_hard"].astype(str).str.lower() == "true"]
    sizes = pd.to_numeric(inside["candidates"], errors="coerce").dropna()
    return float((k / sizes.clip(lower=k)).mean()) if len(sizes) else float("nan")


def _figure(row, system: str, k: int, ties: Mapping[str, int] | None) -> dict:
    out = {"table": "tables/sufficiency.csv", "key": {"system": system, "negatives": "hard", "k": k},
           "value": _num(row["sufficient"]), "lo": _num(row["sufficient_lo"]), "hi": _num(row["sufficient_hi"]),
           "n": int(_num(row["n"]))}
    if ties is not None and system in ties:
        out["ties"] = int(ties[system])          # questions settled by tie order (runs_hard/<system>.run)
    return out


def _p_of(significance: pd.DataFrame, a: str, b: str, measure: str) -> dict:
    """The Holm-adjusted p of the pair (either order), with where it is."""
    if not len(significance):
        return {}
    s = significance
    hit = s[(s["measure"] == measure) & (((s["system"] == a) & (s["baseline"] == b))
                                         | ((s["system"] == b) & (s["baseline"] == a)))]
    if not len(hit) or pd.isna(_num(hit["p_holm"].iloc[0])):
        return {}
    r = hit.iloc[0]
    return {"table": "tables/significance.csv",
            "key": {"measure": measure, "system": str(r["system"]), "baseline": str(r["baseline"])},
            "p_holm": _num(r["p_holm"])}


# what a system whose index is not built from the pixels reads, in the lead's words (systems.csv's provenance)
READS = {"caption-text": "the caption fields", "metadata": "the metadata fields"}


def reads_of(systems: pd.DataFrame | None) -> dict[str, str]:
    """system -> what it reads, for the systems stage 02's systems table records as reading something other
    than the pixels (caption-text, metadata): the lead names it beside the best system."""
    if systems is None or not len(systems) or "provenance" not in systems.columns:
        return {}
    return {str(s): READS[str(p)] for s, p in zip(systems["system"], systems["provenance"]) if str(p) in READS}


def verdict_claim(sufficiency: pd.DataFrame, significance: pd.DataFrame, hard_sets: pd.DataFrame,
                  k: int = VERDICT_K, alpha: float = ALPHA, noun: str = "page",
                  ties: Mapping[str, int] | None = None, reads: Mapping[str, str] | None = None) -> dict:
    """The verdict as a claim record (rendered by ``render``), from stage 07's tables as written. ties:
    per system, the questions whose figure tie order settled (tie_settled over runs_hard/). reads: what a
    system reads when it is not the pixels (reads_of); the best system's is said beside its name, and a
    best figure whose interval is [1.00, 1.00] is said to be at the ceiling (its set cannot rank it
    against a better system)."""
    measure = f"sufficient@{k} (hard)"
    rows = (sufficiency[(sufficiency["negatives"].astype(str) == "hard")
                        & (pd.to_numeric(sufficiency["k"], errors="coerce") == k)] if len(sufficiency) else sufficiency)
    rows = rows[pd.to_numeric(rows["n"], errors="coerce") > 0] if len(rows) else rows
    base = {"id": "verdict", "page": "summary.html", "measure": measure, "k": k, "alpha": alpha, "noun": noun,
            "preconditions": [f"every question counted has more than {k} candidates (tables/hard_sets.csv, in_hard)",
                              "no system indistinguishable from chance is called best, ahead or not distinguishable "
                              "from one that is not",
                              "'ahead' only at Holm-adjusted p < alpha; 'not distinguishable' only at p >= alpha "
                              "or without a test"]}
    if not len(rows):
        outside = int((hard_sets["in_hard"].astype(str).str.lower() != "true").sum()) if len(hard_sets) else 0
        return base | {"kind": "none", "figures": [], "tests": [], "chance": {},
                       "n": 0, "outside": outside}
    chance = hard_chance(hard_sets, k)
    ranked = rows.assign(_v=pd.to_numeric(rows["sufficient"], errors="coerce")).sort_values(
        ["_v", "system"], ascending=[False, True], kind="mergesort")
    figs = {str(r["system"]): _figure(r, str(r["system"]), k, ties) for _, r in ranked.iterrows()}
    order = list(figs)
    at_chance = [s for s in order if not figs[s]["lo"] > chance] if chance == chance else []
    above = [s for s in order if s not in at_chance]
    out = base | {"chance": {"table": "tables/hard_sets.csv", "rule": f"mean of {k} / candidates over rows with "
                             "in_hard true", "value": chance},
                  "n": figs[order[0]]["n"], "at_chance": at_chance}
    if not above:
        return out | {"kind": "chance", "best": order[0], "peers": [], "behind": [],
                      "figures": [figs[order[0]]], "tests": []}
    best = above[0]
    peers, behind, tests = [], [], []
    for other in above[1:]:
        t = _p_of(significance, best, other, measure)
        tests.append(t | {"pair": [best, other]} if t else {"pair": [best, other]})
        (behind if t and t["p_holm"] < alpha else peers).append(other)
    kind = "only" if len(above) == 1 else "ahead" if not peers else "not-distinguishable"
    said_of_best = ({"reads": str(reads[best])} if reads and best in reads else {}) \
        | ({"ceiling": True} if figs[best]["lo"] >= 1.0 else {})
    return out | said_of_best | {"kind": kind, "best": best, "peers": peers, "behind": behind,
                                 "figures": [figs[s] for s in [best] + peers + behind + at_chance], "tests": tests}


def render(claim: Mapping) -> str:
    """The sentence a claim record says, from the record alone."""
    kind, k, noun = claim.get("kind"), claim.get("k", VERDICT_K), claim.get("noun", "page")
    if claim.get("id") == "scored":
        return scored_text(claim)
    if kind == "derived":
        return str(claim["text"])           # its words are the rule's on the tables: the audit derives them again
    if kind == "none":
        return (f"No system can be named best under hard negatives: no validated question has a hard set larger than "
                f"{k} candidates to be ranked among (see What was scored).")
    figs = {f["key"]["system"]: f for f in claim["figures"]}
    n = claim["n"]
    chance = claim["chance"]["value"]
    chance_words = f"a random ranking of the same candidates would do so for a share of {chance:.2f}"
    best = claim["best"]
    share = (f"puts a sufficient {noun} in its top {k} for a share of {_ci(figs[best])} (95% CI) of the {n} "
             f"questions in the hard columns")
    if claim.get("reads") and kind != "chance":
        share = f"(which reads {claim['reads']}, not the {noun}'s pixels) {share}"
    rest = [s for s in claim.get("at_chance", []) if s != best]
    chance_tail = (f" {_names(rest)} {'is' if len(rest) == 1 else 'are'} indistinguishable from chance there."
                   if rest else "")
    if kind == "chance":
        return (f"No system is distinguishable from chance under hard negatives: the highest, {best}, {share}, and "
                f"{chance_words}.{chance_tail}" + _ties_words(claim, n, k))
    tests = {tuple(t["pair"]): t for t in claim["tests"]}

    def p_of(other: str) -> str:
        t = tests.get((best, other), {})
        return f"Holm-adjusted p {_p(t['p_holm'])}" if "p_holm" in t else "no paired test was run"

    if kind == "only":
        said = f"Best under hard negatives: {best} {share} — the only system above chance ({chance_words})."
    elif kind == "ahead":
        nxt = claim["behind"][0]
        said = (f"Best under hard negatives: {best} {share}, ahead of every other system above chance at "
                f"Holm-adjusted p < {claim['alpha']:g} (the next, {nxt} at {_ci(figs[nxt])}, {p_of(nxt)}); "
                f"{chance_words}.")
    else:
        peers = [f"{s} at {_ci(figs[s])} ({p_of(s)})" for s in claim["peers"]]
        ahead = (f"; it is ahead of {_names(claim['behind'])} at Holm-adjusted p < {claim['alpha']:g}"
                 if claim["behind"] else "")
        said = (f"No single best under hard negatives: {best} {share}, and is not distinguishable from "
                f"{_names(peers)}{ahead}; {chance_words}.")
    ceiling = (f" {best} is at the ceiling — every question's sufficient {noun} is in its top {k} — so these "
               f"questions cannot tell it from a better system." if claim.get("ceiling") else "")
    return said + ceiling + chance_tail + _ties_words(claim, n, k)


def _ties_words(claim: Mapping, n: int, k: int) -> str:
    """Where tied scores settled a quoted figure: how many questions, per system."""
    tied = [(f["key"]["system"], f["ties"]) for f in claim["figures"] if f.get("ties")]
    if not tied:
        return ""
    return (f" Tied scores settled whether the gold is in the top {k} (by unit id, the canonical order) on "
            + ", ".join(f"{t} of the {n} questions for {s}" for s, t in tied) + ".")


# ----------------------------------------------------------------------------- what was scored

# why a question is not in the scored set, in words (question_validation's status)
NOT_SCORED = {"no_page_evidence": "no page judgements (no qrels name a page for them)",
              "not_answerable": "the dataset marks them not answerable (their own slice, never a retrieval failure)",
              "gold_fails": "the judge found their gold page does not answer them (dropped)",
              "gold_unread": "the judge could not read their gold page (no text on it): not validated, not failed",
              "answerable_from_distractor": "a look-alike answers them too and no qualifier fixed it (dropped or "
                                            "kept as any-acceptable)",
              "no_answer": "no answer for the judge that needs one (not validated)"}


def scored_claim(questions: pd.DataFrame, validation: pd.DataFrame, strict_ids, one_unit_ids,
                 hard_sets: pd.DataFrame, random_n: int, k: int = VERDICT_K, noun: str = "page") -> dict:
    """Every n the summary uses, reconciled: the questions read, the validated single-gold ones
    (evidence-complete figures), those of them in the hard columns and why the others are not, and the
    questions as generated that the random-negative column scores."""
    strict = set(map(str, strict_ids))
    rest = validation[~validation["query_id"].astype(str).isin(strict)] if len(validation) else validation
    not_scored = ({str(s): int(c) for s, c in rest["status"].value_counts().sort_index().items()}
                  if len(rest) else {})
    one = set(map(str, one_unit_ids))
    hs = hard_sets[hard_sets["query_id"].astype(str).isin(one)] if len(hard_sets) else hard_sets
    inside = int((hs["in_hard"].astype(str).str.lower() == "true").sum()) if len(hs) else 0
    return {"id": "scored", "page": "summary.html", "kind": "counts", "k": k, "noun": noun,
            "counts": {"questions": int(len(validation)) if len(validation) else int(len(questions)),
                       "scored": len(strict), "one_unit": len(one), "hard": inside, "random": int(random_n)},
            "not_scored": not_scored,
            "figures": [{"table": "tables/question_validation.csv", "rule": "rows", "name": "questions"},
                        {"table": "tables/questions_validated.csv", "rule": "rows with slice single-gold",
                         "name": "scored"},
                        {"table": "tables/hard_sets.csv", "rule": "rows with in_hard true", "name": "hard"},
                        {"table": "tables/top1_random_original.csv", "rule": "largest n", "name": "random"}],
            "preconditions": ["every question read has a validation row", "each n the summary uses is named here"]}


def scored_text(claim: Mapping) -> str:
    return nouned(_scored_text(claim), claim.get("noun", "page"))


def _scored_text(claim: Mapping) -> str:
    c, k, noun = claim["counts"], claim.get("k", VERDICT_K), claim.get("noun", "page")
    if not c["questions"]:
        return "No questions: nothing was scored."
    said = f"{c['scored']} of {c['questions']} questions are scored (the validated single-gold set)."
    if claim["not_scored"]:
        said += " Not scored: " + "; ".join(f"{n} — {NOT_SCORED.get(s, s)}" for s, n in claim["not_scored"].items()) + "."
    if not c["scored"]:
        return said + " No figure below measures retrieval on this run."
    multi = c["scored"] - c["one_unit"]
    small = c["one_unit"] - c["hard"]
    said += (f" Evidence-complete figures and settings rest on these {c['scored']}; the hard columns on the "
             f"{c['hard']} of them with one evidence {noun} whose hard set is larger than {k} candidates")
    why = ([f"{multi} need more than one {noun}"] if multi else []) + (
        [f"{small} have a hard set of {k} or fewer, where the top {k} holds the gold by construction "
         "(tables/hard_sets.csv)"] if small else [])
    said += (f" ({'; '.join(why)})" if why else "") + "."
    if c["random"]:
        said += (f" The random-negative column scores the {c['random']} questions as generated with one evidence "
                 f"{noun}, before validation.")
    return said


# ----------------------------------------------------------------------------- the other sentences

def _rows_of(t: pd.DataFrame, **eq) -> pd.DataFrame:
    for c, v in eq.items():
        t = t[t[c].astype(str) == str(v)] if len(t) and c in t.columns else t.head(0)
    return t


def _haystack(t: Mapping, a: Mapping) -> str:
    curve = t["haystack_curve"].copy()
    if not len(curve):
        return ""
    curve["extrapolated"] = curve["extrapolated"].astype(str).str.lower() == "true"
    for c in ("corpus_size", "value", "lo", "hi", "n"):
        curve[c] = pd.to_numeric(curve[c], errors="coerce")
    return summary.haystack_sentence(curve, int(a["corpus_size"]), interval=a["interval"], rests_on=a["rests_on"])


def _planner(t: Mapping, a: Mapping) -> str:
    plan = t["sample_size"].copy()
    if not len(plan):
        return ""
    for c in ("n", "difference", "se", "resolvable", "n_needed"):
        plan[c] = pd.to_numeric(plan[c], errors="coerce")
    return summary.planner_words(plan, a["interval"])


# sentences the summary says of a table, each made by one function of report.summary: the audit calls
# the same function on the table as written and finds the same words (name -> (function, tables))
RULES = {
    "hard_words": (lambda t, a: summary.hard_words(t["hard_sets"]), ("hard_sets",)),
    "harder_words": (lambda t, a: summary.harder_words(t["hard_vs_random"], t["top1_random_original"])
                     if len(t["hard_vs_random"]) else "", ("hard_vs_random", "top1_random_original")),
    "ceiling_note": (lambda t, a: summary.ceiling_note(t["headline"]), ("headline",)),
    "planner_words": (_planner, ("sample_size",)),
    "haystack_sentence": (_haystack, ("haystack_curve",)),
    "flagged_words": (lambda t, a: summary.flagged_words(t["question_validation"], t["label_agreement"])
                      if len(t["question_validation"]) else "", ("question_validation", "label_agreement")),
    "labels_made": (lambda t, a: summary.labels_made_words(t["label_agreement"], t["labels_current"]),
                    ("label_agreement", "labels_current")),
    "people_words": (lambda t, a: summary.people_words(t["annotator_agreement"], t["judge_door_summary"]),
                     ("annotator_agreement", "judge_door_summary")),
    "labels_rest_on": (lambda t, a: summary.sentence(summary.labels_provenance(t["labels_current"], t["label_agreement"])[0]),
                       ("labels_current", "label_agreement")),
}


def derived_claim(rule: str, tables: Mapping[str, pd.DataFrame], noun: str = "page", **args) -> dict:
    """A sentence of the summary as a claim: the rule that says it, the tables it reads and its
    arguments; its text is the rule's words on those tables, in the corpus's noun."""
    fn, names = RULES[rule]
    text = summary.nouned(fn({n: tables.get(n, pd.DataFrame()) for n in names}, args), noun)
    return {"id": rule, "page": "summary.html", "kind": "derived", "rule": rule, "noun": noun,
            "tables": [f"tables/{n}.csv" for n in names], "args": dict(args), "text": text}


def claims_record(claims: list[dict]) -> dict:
    """claims.json's content: the records with their rendered text, in page order."""
    return {"version": 1, "claims": [dict(c, text=render(c)) for c in claims if c.get("kind") != "derived" or c["text"]]}


def finite(claim: Mapping) -> bool:
    """Every number a claim quotes is finite (a NaN in a claim is a defect, never a figure)."""
    vals = [f.get(x) for f in claim.get("figures", []) for x in ("value", "lo", "hi")]
    vals += [t.get("p_holm") for t in claim.get("tests", [])]
    vals.append((claim.get("chance") or {}).get("value"))
    return all(v is None or (isinstance(v, (int, float)) and math.isfinite(v)) for v in vals)


__all__ = ["verdict_claim", "scored_claim", "render", "claims_record", "hard_chance", "reads_of", "ALPHA", "VERDICT_K"]
