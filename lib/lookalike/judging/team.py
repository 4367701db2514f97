"""What a team's labels say: agreement among people and with the model, the adjudicator's queue,
progress, and the export of the team database into the run's label store.

Every function takes the database's frames (``LabelDB.labels()``, ``pairs()``, ``machine_labels()``)
so it can be tested without a server. Agreement follows the design's honesty rules: a kappa is
printed with its interval and n, and where it is undefined (no pair labelled twice, or every label
the same) the row says why and gives the raw agreement instead.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping

import numpy as np
import pandas as pd

from lookalike.judging import agreement
from lookalike.judging.labeldb import LabelDB
from lookalike.judging.store import LabelStore
from lookalike.vocab import LABELS

AGREEMENT_COLUMNS = ["scope", "first", "second", "n", "agreement", "kappa", "kappa_lo", "kappa_hi", "statistic", "why"]
QUEUE_COLUMNS = ["pair_id", "query_id", "unit_id", "question", "flagged", "labels", "reason"]
PROGRESS_COLUMNS = ["annotator", "pool", "role", "labels", "adjudications", "first", "last", "labels_per_hour"]
ANNOTATOR_JUDGE = "annotator:"
ADJUDICATOR_JUDGE = "adjudicator:"


# ----------------------------------------------------------------------------- agreement

def fleiss_kappa(first: list[str], second: list[str]) -> float:
    """Fleiss' kappa of items rated by two people each, where the two need not be the same two people
    from item to item (so Cohen's kappa, which assumes fixed raters, does not apply). nan when every
    label is the same (chance agreement is then 1)."""
    n = len(first)
    if n == 0:
        return float("nan")
    counts = np.zeros((n, len(LABELS)))
    index = {lab: i for i, lab in enumerate(LABELS)}
    for i, (a, b) in enumerate(zip(first, second)):
        counts[i, index[a]] += 1
        counts[i, index[b]] += 1
    p_j = counts.sum(axis=0) / (2 * n)
    p_e = float((p_j ** 2).sum())
    p_o = float(((counts * (counts - 1)).sum(axis=1) / 2).mean())
    return float("nan") if p_e >= 1.0 else (p_o - p_e) / (1 - p_e)


def _fleiss_ci(first: list[str], second: list[str], groups: list[str], n_boot: int = 1000, seed: int = 0
               ) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of Fleiss' kappa, whole questions resampled (pairs of one question
    move together: they share a question's difficulty)."""
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(groups):
        by_group.setdefault(g, []).append(i)
    keys = sorted(by_group)
    if len(first) < 2 or len(keys) < 2:
        return float("nan"), float("nan")
    rng = np.random.default_rng([seed, 36])
    values = []
    for _ in range(n_boot):
        idx = [i for g in rng.integers(0, len(keys), len(keys)) for i in by_group[keys[g]]]
        k = fleiss_kappa([first[i] for i in idx], [second[i] for i in idx])
        if k == k:
            values.append(k)
    if len(values) < n_boot * 0.5:
        return float("nan"), float("nan")
    lo, hi = np.quantile(values, [0.025, 0.975])
    return float(lo), float(hi)


def _why_undefined(first: list[str], second: list[str], what: str) -> str:
    if not first:
        return f"no pair has {what}"
    labels = sorted(set(first) | set(second))
    if len(labels) == 1:
        return f"every label was {labels[0]}: chance agreement is then total and kappa measures nothing"
    return ("one side gave one label throughout: kappa measures nothing" if len(set(first)) < 2 or len(set(second)) < 2
            else "too few pairs or questions for an interval")


def people_labels(labels: pd.DataFrame) -> pd.DataFrame:
    """Live labels people gave (kind label), one row each."""
    if labels.empty:
        return labels
    return labels[(labels["kind"] == "label") & (labels["retracted"].astype(int) == 0)]


def resolved(labels: pd.DataFrame) -> pd.DataFrame:
    """People's label of each pair: the adjudication when there is one, else the label most of its
    annotators gave (ties have none and are left out). Columns pair_id, query_id, unit_id, label, basis."""
    rows = []
    live = labels[labels["retracted"].astype(int) == 0] if len(labels) else labels
    for pid, part in (live.groupby("pair_id", sort=True) if len(live) else []):
        adj = part[part["kind"] == "adjudication"]
        if len(adj):
            rows.append((pid, part["query_id"].iloc[0], part["unit_id"].iloc[0], adj["label"].iloc[-1], "adjudicated"))
            continue
        counts = part["label"].value_counts()
        if len(counts) == 1 or counts.iloc[0] > counts.iloc[1]:
            rows.append((pid, part["query_id"].iloc[0], part["unit_id"].iloc[0], counts.index[0],
                         "one person" if len(part) == 1 else "majority"))
    return pd.DataFrame(rows, columns=["pair_id", "query_id", "unit_id", "label", "basis"])


def _people_rows(people: pd.DataFrame, where: str, seed: int) -> list[dict]:
    """Agreement rows among the people in ``people``: overall, and per pair of annotators."""
    rows = []
    twice = (people.sort_values(["pair_id", "id"], kind="mergesort").groupby("pair_id", sort=True).head(2)
             if len(people) else people)
    both = twice.groupby("pair_id").filter(lambda g: len(g) == 2) if len(twice) else twice
    firsts = both.groupby("pair_id", sort=True).nth(0) if len(both) else both
    seconds = both.groupby("pair_id", sort=True).nth(1) if len(both) else both
    a = firsts["label"].tolist() if len(both) else []
    b = seconds["label"].tolist() if len(both) else []
    k = fleiss_kappa(a, b)
    lo, hi = _fleiss_ci(a, b, firsts["query_id"].tolist() if len(both) else [], seed=seed) if k == k else (math.nan, math.nan)
    rows.append({"scope": f"people, overall{where}", "first": "first person", "second": "second person", "n": len(a),
                 "agreement": float(np.mean([x == y for x, y in zip(a, b)])) if a else math.nan,
                 "kappa": k, "kappa_lo": lo, "kappa_hi": hi,
                 "statistic": "Fleiss' kappa (first two people per pair; questions resampled)",
                 "why": "" if k == k and lo == lo else _why_undefined(a, b, "two people's labels")})
    names = sorted(set(people["annotator"])) if len(people) else []
    wide = people.pivot_table(index="pair_id", columns="annotator", values="label", aggfunc="first") if len(people) else None
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            common = wide[[x, y]].dropna()
            fa, fb = common[x].tolist(), common[y].tolist()
            if not fa:
                continue
            stats = agreement.agreement(fa, fb, seed=seed)
            rows.append({"scope": f"people, pair of annotators{where}", "first": x, "second": y, "n": stats["n"],
                         "agreement": stats["agreement"], "kappa": stats["kappa"], "kappa_lo": stats["kappa_lo"],
                         "kappa_hi": stats["kappa_hi"], "statistic": "Cohen's kappa (pairs resampled)",
                         "why": "" if stats["kappa"] == stats["kappa"] else _why_undefined(fa, fb, "labels from both")})
    return rows


def agreement_table(labels: pd.DataFrame, machine: pd.DataFrame | None = None, seed: int = 0) -> pd.DataFrame:
    """Agreement rows: overall among people (Fleiss' kappa over the first two people's labels of each
    pair labelled twice, questions resampled for the CI), per pair of annotators (Cohen's kappa on the
    pairs both labelled, pairs resampled), and each machine judge against people's resolved label.
    With two pools (the judge door on), people are compared within their pool only — across pools the
    difference is the door, not disagreement — and the model is compared with the blind pool and the
    adjudications. Undefined kappas are nan with the reason in ``why``; raw agreement is always given."""
    people = people_labels(labels)
    pools = sorted(set(people["pool"])) if len(people) and "pool" in people.columns else []
    rows = []
    if len(pools) > 1:
        for pool in pools:
            rows += _people_rows(people[people["pool"] == pool], f" ({pool} pool)", seed)
    else:
        rows += _people_rows(people, "", seed)
    if machine is not None and len(machine):
        blind = labels[~((labels["kind"] == "label") & (labels["pool"] == "metadata"))] if len(pools) > 1 else labels
        truth = resolved(blind)
        said = "people (adjudicated, else majority" + ("; blind pool)" if len(pools) > 1 else ")")
        for judge, part in machine.groupby("judge", sort=True):
            m = part.merge(truth, on="pair_id", suffixes=("_model", "_people"))
            fa, fb = m["label_model"].tolist(), m["label_people"].tolist()
            stats = agreement.agreement(fa, fb, seed=seed) if fa else {"n": 0, "agreement": math.nan, "kappa": math.nan,
                                                                  "kappa_lo": math.nan, "kappa_hi": math.nan}
            rows.append({"scope": "model vs people", "first": judge, "second": said,
                         "n": stats["n"], "agreement": stats["agreement"], "kappa": stats["kappa"],
                         "kappa_lo": stats["kappa_lo"], "kappa_hi": stats["kappa_hi"],
                         "statistic": "Cohen's kappa (pairs resampled)",
                         "why": "" if stats["kappa"] == stats["kappa"] else _why_undefined(fa, fb, "labels from both")})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def agreement_words(row: Mapping) -> str:
    """One agreement row in words: kappa with its interval and n, or why it is undefined with the raw agreement."""
    n = int(row["n"])
    raw = f"raw agreement {row['agreement']:.2f}" if row["agreement"] == row["agreement"] else "no raw agreement"
    if row["kappa"] == row["kappa"]:
        interval = (f" [{row['kappa_lo']:.2f}, {row['kappa_hi']:.2f}]" if row["kappa_lo"] == row["kappa_lo"]
                    else " (no interval: " + str(row["why"]) + ")")
        return f"kappa {row['kappa']:.2f}{interval}, {raw}, n = {n} pairs"
    return f"kappa undefined ({row['why']}); {raw}, n = {n} pairs"


# ----------------------------------------------------------------------------- the adjudicator's queue

def disagreements(labels: pd.DataFrame, pairs: pd.DataFrame, machine: pd.DataFrame | None = None) -> pd.DataFrame:
    """Pairs an adjudicator should settle, not yet adjudicated: first those a machine judge flagged
    (it says a distractor answers a question people judged) once a person has labelled them, then those
    people labelled differently. Columns QUEUE_COLUMNS; labels lists who said what (with notes).

    Only the blind pool's labels count and are shown: with the judge door on, the metadata pool saw
    file names and captions, and their labels feed the door's comparison alone — a pair that only they
    split is not queued, and the adjudicator never reads what they said (their labels never reach the
    store or the qrels, and an adjudication is both)."""
    live = labels[labels["retracted"].astype(int) == 0] if len(labels) else labels
    adjudicated = set(live.loc[live["kind"] == "adjudication", "pair_id"]) if len(live) else set()
    people = people_labels(labels)
    if len(people) and "pool" in people.columns:
        people = people[people["pool"] != "metadata"]
    said = {pid: part for pid, part in people.groupby("pair_id", sort=True)} if len(people) else {}
    machine_says = ({p: "; ".join(f"{j} says {lab}" for j, lab in zip(g["judge"], g["label"]))
                     for p, g in machine.groupby("pair_id")} if machine is not None and len(machine) else {})
    rows = []
    for r in pairs.itertuples():
        if r.pair_id in adjudicated or r.pair_id not in said:
            continue
        part = said[r.pair_id]
        differ = part["label"].nunique() > 1
        if not (r.flagged or differ):
            continue
        reason = (f"flagged by {r.flagged}: it says this page answers a question people judged"
                  + ("; people disagree" if differ else "")) if r.flagged else "people disagree"
        if r.pair_id in machine_says:
            reason += f" ({machine_says[r.pair_id]})"
        words = "; ".join(f"{a}: {lab}" + (f" ({n})" if n else "") for a, lab, n in
                          zip(part["annotator"], part["label"], part["note"]))
        rows.append({"pair_id": r.pair_id, "query_id": r.query_id, "unit_id": r.unit_id, "question": r.question,
                     "flagged": r.flagged, "labels": words, "reason": reason, "_first": 0 if r.flagged else 1})
    out = pd.DataFrame(rows, columns=QUEUE_COLUMNS + ["_first"])
    return out.sort_values(["_first", "query_id", "unit_id"], kind="mergesort")[QUEUE_COLUMNS].reset_index(drop=True)


# ----------------------------------------------------------------------------- progress

def round_cost(pairs: pd.DataFrame, per_pair: int, pools: int, labels: pd.DataFrame | None = None) -> str:
    """What a round of labelling costs, said before anyone labels: pairs (and the questions they are for)
    × labels per pair × pools = labels to make, how many are made, and — once the team's rate can be
    measured — the hours left at it."""
    n_pairs = len(pairs)
    n_q = int(pairs["query_id"].nunique()) if n_pairs and "query_id" in pairs.columns else 0
    total = n_pairs * per_pair * pools
    made = len(people_labels(labels)) if labels is not None and len(labels) else 0
    words = (f"this round: {n_pairs:,} pairs for {n_q:,} questions × {per_pair} label(s) per pair"
             + (f" × {pools} pools" if pools > 1 else "") + f" = {total:,} labels to make; {min(made, total):,} made")
    hours = _hours(people_labels(labels)["time"]) if made >= 2 else 0.0
    if hours > 0 and made < total:
        rate = made / hours
        words += f"; at the team's {rate:,.0f} labels per hour so far, about {(total - made) / rate:,.1f} hours left"
    return words



PACES = (60.0, 120.0, 240.0)          # labels per hour the plan shows when no pace is measured or given


def measured_pace(labels: pd.DataFrame | None) -> tuple[float, int]:
    """One person's labels per hour as measured on the label server: 3,600 over the median seconds a
    pair was on screen before its label (``seconds``), and how many labels that rests on; nan when no
    label carries a time."""
    people = people_labels(labels) if labels is not None and len(labels) else pd.DataFrame()
    secs = pd.to_numeric(people["seconds"], errors="coerce").dropna() if len(people) else pd.Series(dtype=float)
    secs = secs[secs > 0]
    return (3600.0 / float(secs.median()), len(secs)) if len(secs) else (math.nan, 0)


def plan(pairs: pd.DataFrame, people: int, per_pair: int, door: bool, door_share: float,
         labels: pd.DataFrame | None = None, machine: pd.DataFrame | None = None,
         pace: float | None = None) -> dict:
    """A round of labelling, planned before its first label: pairs × labels per pair × pools = labels;
    people per pool (the metadata pool takes door_share of them, at least one); each person's share;
    hours at the pace given, else the pace measured here, else at several paces (said as such); and
    the 95% interval half-width the labels buy for the relevant share of the pairs (Wilson, at the
    model judge's pre-label share as the guess, 0.5 without one) and, with the door, the worst case
    for the difference blind − with metadata (±1.96/√n: a paired difference of shares has variance at
    most 1/n). Both treat pairs as independent; the report's intervals resample whole questions and
    are wider where a question's pairs move together. Returns lines (words) and feasible."""
    from lookalike.eval.stats import proportion_ci

    n_pairs = len(pairs)
    n_q = int(pairs["query_id"].nunique()) if n_pairs else 0
    pools = {"blind": people}
    if door:
        meta = min(people, max(1, round(people * door_share)))
        pools = {"blind": people - meta, "metadata": meta}
    lines = [f"{n_pairs:,} pairs for {n_q:,} questions × {per_pair} label(s) per pair"
             + (" × 2 pools (the judge door)" if door else "") + f" = {n_pairs * per_pair * len(pools):,} labels; "
             + ", ".join(f"{n} {p}" for p, n in pools.items()) + f" of {people} people"]
    short = [p for p, n in pools.items() if n < per_pair]
    if short:
        lines.append("not feasible: each pair needs " + f"{per_pair} different people in each pool, and the "
                     + " and ".join(f"{p} pool has {pools[p]}" for p in short)
                     + (f" (labels.door_share {door_share:g} of {people})" if door else ""))
        return {"lines": lines, "feasible": False}
    each = {p: n_pairs * per_pair / n for p, n in pools.items()}
    lines.append("each person labels about " + ", ".join(f"{v:,.0f} ({p} pool)" for p, v in each.items()))
    measured, n_timed = measured_pace(labels)
    if pace is not None:
        paces, said = [pace], f"at {pace:,.0f} labels per hour per person (given)"
    elif measured == measured:
        paces, said = [measured], (f"at {measured:,.0f} labels per hour per person (measured: the median time on "
                                   f"screen of {n_timed:,} labels in this label database)")
    else:
        paces, said = list(PACES), "pace not measured yet (no label in the database has a time on screen)"
    total = n_pairs * per_pair * len(pools)
    lines.append(said + ": " + "; ".join(
        f"{total / r:,.1f} person-hours, about {max(each.values()) / r:,.1f} hours with everyone at once"
        + ("" if len(paces) == 1 else f" at {r:,.0f} labels per hour") for r in paces))
    if n_pairs:
        share, basis = 0.5, "0.5, the widest (no model pre-labels)"
        if machine is not None and len(machine):
            first = machine[machine["judge"] == sorted(set(machine["judge"]))[0]]
            share = float(first["label"].isin(["sufficient", "supporting"]).mean())
            basis = f"{share:.2f}, the share {first['judge'].iloc[0]} pre-labelled relevant"
        ci = proportion_ci(round(share * n_pairs), n_pairs)
        lines.append(f"the relevant share of the {n_pairs:,} pairs is measured to ±{(ci.hi - ci.lo) / 2:.3f} (Wilson 95% "
                     f"at {basis})" + (f"; the door's difference, blind − with metadata, to ±{1.96 / math.sqrt(n_pairs):.3f} "
                                       "at worst" if door else "")
                     + " — pairs taken as independent; the report resamples whole questions, which is wider where "
                       "a question's pairs move together")
    return {"lines": lines, "feasible": True}


def _hours(times: pd.Series) -> float:
    t = pd.to_datetime(times, utc=True, format="ISO8601")
    return (t.max() - t.min()).total_seconds() / 3600 if len(t) > 1 else 0.0


def progress(labels: pd.DataFrame, pairs: pd.DataFrame, annotators: pd.DataFrame, per_pair: int, pools: int = 1
             ) -> dict:
    """Progress: per annotator (labels, adjudications, labels per hour between their first and last
    label), per question (pairs, slots filled), and overall (slots = pairs × per_pair × pools, filled,
    the team's labels per hour over the span of all labels, and hours left at that rate — None while
    the rate cannot be measured: fewer than two labels)."""
    live = labels[labels["retracted"].astype(int) == 0] if len(labels) else labels
    people = people_labels(labels)
    rows = []
    for a in annotators.itertuples():
        mine = people[people["annotator"] == a.name] if len(people) else people
        adj = int(((live["annotator"] == a.name) & (live["kind"] == "adjudication")).sum()) if len(live) else 0
        hours = _hours(mine["time"]) if len(mine) else 0.0
        rows.append({"annotator": a.name, "pool": a.pool, "role": a.role, "labels": len(mine), "adjudications": adj,
                     "first": mine["time"].min() if len(mine) else "", "last": mine["time"].max() if len(mine) else "",
                     "labels_per_hour": (len(mine) - 1) / hours if hours > 0 else math.nan})
    per_annotator = pd.DataFrame(rows, columns=PROGRESS_COLUMNS)
    filled = people.groupby("pair_id").size() if len(people) else pd.Series(dtype=int)
    slots_per_pair = per_pair * pools
    pq = pairs.assign(filled=pairs["pair_id"].map(filled).fillna(0).astype(int).clip(upper=slots_per_pair))
    per_question = (pq.groupby("query_id", sort=True)
                    .agg(pairs=("pair_id", "size"), slots_filled=("filled", "sum"),
                         pairs_complete=("filled", lambda s: int((s >= slots_per_pair).sum())))
                    .reset_index())
    per_question["slots"] = per_question["pairs"] * slots_per_pair
    total = len(pairs) * slots_per_pair
    done = int(pq["filled"].sum())
    hours = _hours(people["time"]) if len(people) else 0.0
    rate = (len(people) - 1) / hours if hours > 0 else math.nan
    left = (total - done) / rate if rate == rate and rate > 0 else None
    return {"per_annotator": per_annotator, "per_question": per_question, "slots": total, "filled": done,
            "labels_per_hour": rate, "hours_left": left}


# ----------------------------------------------------------------------------- export to the store

def export_to_store(db: LabelDB, store: LabelStore) -> dict:
    """Append what people labelled in the database to the run's label store, as people's labels
    (source human; judge ``annotator:<name>``, an adjudication ``adjudicator:<name>``, which the store
    ranks above any one person's label). A label already current in the store for that person is not
    written again; a person's changed label (after an undo) is written after the one it replaces.
    Retracted labels stay in the database only, and so do the metadata pool's labels (with the judge
    door on): those people saw file names and captions, which is the leak the door measures, so their
    labels feed the door's people row and never the qrels. Returns counts: written, already_held,
    retracted, metadata_pool."""
    all_labels = db.labels(live=False)
    live = all_labels[all_labels["retracted"].astype(int) == 0]
    latest = {}
    for r in store.rows:
        latest[(r["query_id"], r["unit_id"], r["judge"])] = (r["label"], r["note"])
    written = held = 0
    seen_metadata = (live["kind"] == "label") & (live["pool"] == "metadata")
    ordered = pd.concat([live[(live["kind"] == "label") & ~seen_metadata], live[live["kind"] == "adjudication"]])
    for r in ordered.itertuples():
        judge = (ADJUDICATOR_JUDGE if r.kind == "adjudication" else ANNOTATOR_JUDGE) + r.annotator
        if latest.get((r.query_id, r.unit_id, judge)) == (r.label, r.note):
            held += 1
            continue
        row = {"query_id": r.query_id, "unit_id": r.unit_id, "question_sha": r.question_sha, "label": r.label,
               "judge": judge, "source": "human", "note": r.note}
        added = store.append([row], time=r.time)
        if not added:     # the same words as an earlier label of theirs that was since replaced: say it is this one
            added = store.append([{**row, "note": f"{r.note} [team label {r.id}]".strip()}], time=r.time)
        written += added
        latest[(r.query_id, r.unit_id, judge)] = (r.label, r.note)
    return {"written": written, "already_held": held, "retracted": int((all_labels["retracted"].astype(int) == 1).sum()),
            "metadata_pool": int(seen_metadata.sum())}


# ----------------------------------------------------------------------------- the run's people figures, checked

def check_run(run_dir, cfg) -> list[tuple[str, str, str]]:
    """People's figures in a run folder against the label database they came from (``lookalike
    audit``): each agreement row among people (n, raw agreement, kappa) and the judge door's people row
    (pairs, blind and with-metadata shares, difference, gained, lost), computed again from the
    database's live labels. Returns (file, figure, problem) for each difference; [] when they agree or
    the run has no label database. A difference means labels changed after stage 06 ran, or a table
    was edited: either way the report no longer says what the database holds."""
    from pathlib import Path

    from lookalike.judging import door as JD
    from lookalike.judging.labeldb import LabelDB, LabelDBError, resolve

    run_dir = Path(run_dir)
    try:
        target = resolve(str(cfg.labels.db or ""), run_dir)
        if not (target.startswith(("postgresql://", "postgres://")) or Path(target).is_file()):
            return []
        db = LabelDB(target, migrate=False)       # an audit reads; it never upgrades or writes a database
        labels = db.labels()
    except (LabelDBError, sqlite3.Error) as exc:
        return [("labels/labels.sqlite", "the label database", f"could not be read ({exc})")]
    tables = run_dir / "tables"
    stale = " — labels changed after stage 06 ran (run it again), or the table was edited"
    found = []
    agreement_file = tables / "annotator_agreement.csv"
    if agreement_file.is_file():
        held = pd.read_csv(agreement_file, keep_default_na=False)
        held = held[held["scope"].astype(str).str.startswith("people")]
        again = agreement_table(labels, seed=int(cfg.seed))
        again = again[again["scope"].str.startswith("people")]
        key = ["scope", "first", "second"]
        mine = {tuple(str(v) for v in r[:3]): r for r in again[key + ["n", "agreement", "kappa"]].itertuples(index=False)}
        theirs = {tuple(str(v) for v in r[:3]): r for r in held[key + ["n", "agreement", "kappa"]].itertuples(index=False)}
        for k in sorted(set(mine) | set(theirs)):
            if k not in theirs or k not in mine:
                found.append(("tables/annotator_agreement.csv", f"{k[0]}: {k[1]} vs {k[2]}",
                              ("missing from the table; the database gives it" if k not in theirs
                               else "in the table; the database gives no such row") + stale))
                continue
            a, b = mine[k], theirs[k]
            for field in ("n", "agreement", "kappa"):
                x, y = _number(getattr(a, field)), _number(getattr(b, field))
                if not (x == y or (x != x and y != y) or abs(x - y) <= 1e-6):
                    found.append(("tables/annotator_agreement.csv", f"{k[0]}: {k[1]} vs {k[2]}: {field}",
                                  f"the table says {y:g}; the label database gives {x:g}" + stale))
    door_file = tables / "judge_door_summary.csv"
    questions, units = tables / "questions_validated.csv", tables / "units.csv"
    if door_file.is_file() and questions.is_file() and units.is_file() and len(labels):
        held = pd.read_csv(door_file, keep_default_na=False)
        held = held[held["judge"].astype(str).str.startswith("people")]
        _, again, why = JD.people_door(labels, pd.read_csv(questions, keep_default_na=False),
                                       pd.read_csv(units, keep_default_na=False))
        if why and len(held):
            found.append(("tables/judge_door_summary.csv", "the people row",
                          f"present, but the label database gives none ({why})" + stale))
        elif not why and len(held) == 0 and (labels["pool"] == "metadata").any():
            found.append(("tables/judge_door_summary.csv", "the people row",
                          f"missing; the label database gives {again['judge'].iloc[0]}" + stale))
        elif not why and len(held):
            a, b = again.iloc[0], held.iloc[0]
            for field in ("judge", "n_pairs", "share_blind", "share_with_metadata", "difference", "gained", "lost"):
                x, y = a[field], b[field]
                same = str(x) == str(y) if field == "judge" else abs(_number(x) - _number(y)) <= 1e-6
                if not same:
                    found.append(("tables/judge_door_summary.csv", f"the people row: {field}",
                                  f"the table says {y}; the label database gives {x}" + stale))
    return found


def _number(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan
