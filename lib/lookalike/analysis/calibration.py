"""The demo as a calibration corpus: what the generator planted (tables/planted.csv) beside what
the instrument recovered from the run's own tables (tables/planted_effects.csv).

Each effect is recovered by the stage that measures it on any corpus — question validation,
the revision pools, the leak gate, the leak ablation, the judge door, the validity ladder — so a
row that is not ``ok`` means the instrument failed to see something that is known to be there.
``ok``: the planted value lies in the recovered 95% interval, or, where the planted value is an
expected outcome (a verdict, a bound, a direction), the outcome holds; ``check`` says which.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import numpy as np
import pandas as pd

from lookalike.eval import stats
from lookalike.report.tables import as_number

EFFECT_COLUMNS = ["effect", "planted", "recovered", "lo", "hi", "ok", "check", "explanation"]
# The judge the demo plants behind the judge door (stage 06 runs it beside the model judge).
DOOR_JUDGE = "subject-terms"


def _row(effect, planted, recovered, lo, hi, ok, check, explanation) -> dict:
    return dict(effect=effect, planted=planted, recovered=recovered, lo=lo, hi=hi, ok=bool(ok), check=check,
                explanation=explanation)


def ratio_ci(per_query: pd.DataFrame, index: str, unit_clusters: Mapping[str, str] | None, seed: int,
             n_boot: int = 2000) -> tuple[float, float, float]:
    """caption-derived / blind mean recall@10 of one ablation index over the units that have both
    queries, with a percentile bootstrap 95% CI resampling units (their clusters when given)."""
    part = per_query[per_query["index"] == index]
    wide = part.pivot_table(index="unit_id", columns="query_set", values="recall_10", aggfunc="mean")
    if not {"blind", "caption-derived"} <= set(wide.columns):
        return (np.nan, np.nan, np.nan)
    wide = wide.dropna(subset=["blind", "caption-derived"])
    a, b = wide["caption-derived"].to_numpy(float), wide["blind"].to_numpy(float)
    if not len(a) or b.sum() == 0:
        return (np.nan, np.nan, np.nan)
    groups = np.asarray([(unit_clusters or {}).get(u, u) for u in wide.index], dtype=object)
    names, inverse = np.unique(groups, return_inverse=True)
    rng = np.random.default_rng([seed, 91])
    sa, sb = np.bincount(inverse, a, len(names)), np.bincount(inverse, b, len(names))
    draws = rng.integers(len(names), size=(n_boot, len(names)))
    num, den = sa[draws].sum(axis=1), sb[draws].sum(axis=1)
    ratios = num[den > 0] / den[den > 0]
    lo, hi = np.percentile(ratios, [2.5, 97.5]) if len(ratios) else (np.nan, np.nan)
    return float(a.mean() / b.mean()), float(lo), float(hi)


def planted_effects(planted: pd.DataFrame, *, validation: pd.DataFrame, revision_pool_units: int,
                    leak_gate: pd.DataFrame, leak_planted: pd.DataFrame, leak_per_query: pd.DataFrame,
                    door_summary: pd.DataFrame, ladder_slopes: Mapping[str, float],
                    unit_clusters: Mapping[str, str] | None = None, clusters: pd.Series | None = None,
                    seed: int = 0, planted_questions: Collection[str] | None = None,
                    judgements: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per planted effect the run can recover (EFFECT_COLUMNS). Inputs are the run's tables:
    question_validation (stage 05), the count of units with a non-empty revision pool (stage 04's
    pools over every unit), leak_gate and leak_planted (stage 03), leak_per_query (stage 03),
    judge_door_summary (stage 06) and the validity ladder's slopes (stage 04). clusters: query_id ->
    cluster (stats.query_clusters), unit_clusters: unit_id -> cluster — what the intervals resample."""
    want = dict(zip(planted["effect"], planted["planted"]))
    meaning = dict(zip(planted["effect"], planted["meaning"]))
    rows = []
    nan = float("nan")

    name = "under-specified questions"
    if name in want and len(validation) and planted_questions is not None:
        rows.append(_under_specified_row(name, meaning[name], validation, set(planted_questions), judgements))
    elif name in want and len(validation):
        hit = (validation["status"] == "answerable_from_distractor").to_numpy(float)
        flagged = int(hit.sum())
        ci = stats.bootstrap_ci(hit, 2000, rng=np.random.default_rng([seed, 92]),
                                clusters=stats.cluster_array(clusters, list(validation["query_id"])))
        p = as_number(want[name])
        rows.append(_row(name, p, ci.estimate, ci.lo, ci.hi, ci.lo <= p <= ci.hi,
                         f"planted share in the {stats.interval_words(clusters)} CI",
                         f"{meaning[name]}; stage 05 flagged {flagged} of {len(validation)} as answerable from "
                         "another page"))

    name = "restatement pairs"
    if name in want:
        p = as_number(want[name])
        # a count: no interval
        rows.append(_row(name, int(p), int(revision_pool_units), nan, nan, revision_pool_units == p, "equal counts",
                         f"{meaning[name]}; {revision_pool_units} units have a non-empty revision pool"))

    name = "leaky pixel system"
    if name in want and len(leak_planted):
        leaky = leak_planted[leak_planted["system"].str.endswith("+filename")]
        clean = leak_planted[~leak_planted["system"].str.endswith("+filename")]
        ok = bool(len(leaky)) and (leaky["verdict"] == "LEAK").all() and (clean["verdict"] == "PASS").all()
        said = "; ".join(f"{r.system} {r.verdict}" for r in leak_planted.itertuples())
        rows.append(_row(name, want[name], "LEAK" if (leaky["verdict"] == "LEAK").all() else "PASS", nan, nan, ok,
                         "every leaky system LEAK, every clean one PASS", f"{meaning[name]}; the gate said: {said}"))

    name = "caption index: caption-derived / blind recall@10"
    if name in want and len(leak_per_query):
        est, lo, hi = ratio_ci(leak_per_query, "caption", unit_clusters, seed)
        p = as_number(want[name])
        rows.append(_row(name, p, est, lo, hi, bool(est >= p), "ratio at least the planted value",
                         f"{meaning[name]} (bootstrap 95% CI over units)"))

    name = "image index: caption-derived − blind recall@10"
    if name in want and len(leak_gate) and (leak_gate["system"] == "image").any():
        g = leak_gate[leak_gate["system"] == "image"].iloc[0]
        lo, hi, p = as_number(g["difference_lo"]), as_number(g["difference_hi"]), as_number(want[name])
        margin = as_number(g["threshold"]) if "threshold" in g.index else 0.0
        # the design's rule is one-sided: a pixels-only index must not favour caption-derived queries by
        # more than the gate's margin; blind queries being found more often says nothing about a leak
        rows.append(_row(name, p, as_number(g["difference"]), lo, hi, bool(lo <= p + margin),
                         f"one-sided: caption-derived − blind not shown above {p:+.2f} + the margin {margin:.2f} "
                         "(the paired 95% CI reaches down to it)",
                         f"{meaning[name]}; a pixels-only index may find blind queries more often (they describe "
                         f"what the page shows) — only a difference above the margin would point to a leak "
                         f"({int(g['n_pairs'])} paired units)"))

    name = "judge door: relevant labels gained with metadata visible"
    if name in want and len(door_summary):
        planted_judge = door_summary[door_summary["judge"].astype(str).str.startswith(DOOR_JUDGE)]
        d = (planted_judge if len(planted_judge) else door_summary).iloc[0]
        gained_lo, others = as_number(d["gained_with_term_lo"]), as_number(d["others_with_term"])
        more = int(as_number(d["relevant_with_metadata"])) > int(as_number(d["relevant_blind"]))
        concentrated = bool(gained_lo > others)
        # recovered: the relevant labels gained (a count: no interval); the share's interval is in the explanation
        rows.append(_row(name, want[name], int(as_number(d["relevant_with_metadata"]) - as_number(d["relevant_blind"])),
                         nan, nan, more and concentrated,
                         "more relevant labels, and the gains' share with a query word in the metadata above "
                         "the other pairs' share",
                         f"{meaning[name]}; {d['judge']}: {int(as_number(d['relevant_blind']))} relevant blind, "
                         f"{int(as_number(d['relevant_with_metadata']))} with metadata; {as_number(d['gained_with_term']):.2f} "
                         f"[{gained_lo:.2f}, {as_number(d['gained_with_term_hi']):.2f}] of the {int(as_number(d['gained']))} gains "
                         f"hold a query word in file name or caption, against {others:.2f} "
                         f"[{as_number(d['others_with_term_lo']):.2f}, {as_number(d['others_with_term_hi']):.2f}] of the other "
                         "pairs (bootstrap 95%, documents resampled)"))

    for name, key, test, check in (
            ("validity ladder: slope under random negatives", "random", lambda s: abs(s) <= 0.1, "slope within ±0.1"),
            ("validity ladder: slope under hard negatives", "hard", lambda s: s > 0.5, "slope above 0.5")):
        if name in want and key in ladder_slopes:
            s = as_number(ladder_slopes[key])
            rows.append(_row(name, as_number(want[name]), s, nan, nan, bool(test(s)), check,
                             f"{meaning[name]}; least-squares slope of top-1 on p over the five rungs"))
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def _under_specified_row(name: str, meaning: str, validation: pd.DataFrame, planted: set,
                         judgements: pd.DataFrame | None) -> dict:
    """Planted × flagged, question by question. ok: every planted question that was validated is flagged,
    and every question flagged beyond the plant carries a look-alike the validation judge says answers
    it (named in the explanation with its axis) — an extra flag without one would be a defect."""
    seen = set(validation["query_id"])
    flagged = set(validation.loc[validation["status"] == "answerable_from_distractor", "query_id"])
    planted = planted & seen
    both, missed, extra = planted & flagged, sorted(planted - flagged), sorted(flagged - planted)
    answered = set()
    if judgements is not None and len(judgements):
        j = judgements[(judgements["role"] == "distractor") & (judgements["label"] == "sufficient")
                       & (judgements["attempt"].astype(str) == "0")]
        answered = set(j["query_id"])
    unexplained = [q for q in extra if q not in answered]
    axes = validation[validation["query_id"].isin(extra)]["axis"].str.split(";").explode().value_counts()
    said = (f"{meaning}; planted {len(planted)}, flagged {len(flagged)} of {len(seen)}: {len(both)} both, "
            f"{len(missed)} planted but not flagged" + (f" ({', '.join(missed[:5])})" if missed else "")
            + f", {len(extra)} flagged beyond the plant")
    if extra:
        said += (" — each answered by a look-alike according to the validation judge (axes: "
                 + ", ".join(f"{a} {n}" for a, n in axes.items()) + "; tables/validation_judgements.csv names the page)"
                 if not unexplained else f" — {len(unexplained)} without a look-alike that answers them: "
                 + ", ".join(unexplained[:5]))
    return _row(name, len(planted), len(both), float("nan"), float("nan"), not missed and not unexplained,
                "question by question: every planted question flagged; every extra flag answered by a look-alike",
                said)
