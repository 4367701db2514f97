"""Mined candidates are not negatives until judged.

Mining: each labelled question's top N from a configured retriever, gold removed, frozen as a
candidate pool (``mine``). A judge then labels the top of the pool; "relevant" means sufficient
or supporting — a page holding part of the answer is no clean negative either.

Label incompleteness (``incompleteness``): per question, how many of the top 4 mined candidates
are relevant, and whether the top-1 mined candidate is; means with bootstrap CIs over questions
(the question is the cluster: its candidates are resampled together).

Selection rules (``select``), compared at an equal count of negatives per question:
  top-k              the first k mined candidates
  window:a-b         k drawn uniformly (seeded) from mined ranks a..b
  topk-percpos:α     the first k whose miner score is below α × the positive's score (TopK-PercPos)
  judged             the highest-ranked candidates the judge called irrelevant (within the judged
                     budget), back-filled with the lowest-scored remaining candidates when fewer
                     exist; back-fill is counted
Contamination of a rule: the share of its chosen negatives the judge rates relevant, with a CI
from resampling questions (ratio of sums). Every chosen negative is judged for this evaluation,
so the judged rule's own budget is the only place its selection sees labels.

Export (``export_training``): per rule, JSON Lines and parquet rows a colpali-engine
``ColPaliEngineDataset`` reads directly — ``query`` (text), ``pos_target`` (unit ids),
``neg_target`` (unit ids) — plus query_id, rule and the judge's labels of the negatives; and
``corpus.jsonl`` (``doc``: image path, ``unit_id``) for colpali-engine's ``Corpus`` with
``docid_to_idx_mapping`` = unit id -> row.
"""

from __future__ import annotations

import json
from pathlib import Path
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.judging.protocol import ABSTAIN
from lookalike.eval import stats
from lookalike.eval.metrics import rank

RELEVANT = ("sufficient", "supporting")
RULE_COLUMNS = ["rule", "n_queries", "n_negatives", "contamination", "contamination_lo", "contamination_hi",
                "backfill_share", "median_rank", "sufficient_share"]
CHOSEN_COLUMNS = ["rule", "query_id", "unit_id", "rank", "score", "backfill"]


def mine(run: pd.DataFrame, gold: Mapping[str, set], n: int = 100) -> pd.DataFrame:
    """Per question in gold: the top n units of the run that are not gold, in canonical order.
    Columns: query_id, unit_id, rank (1-based among the mined), score, positive_score (the best
    score of a gold unit in the run; NaN when no gold unit was retrieved)."""
    cols = ["query_id", "unit_id", "rank", "score", "positive_score"]
    mine_from = run[run["query_id"].isin(set(gold))][["query_id", "unit_id", "score"]]
    if mine_from.empty:
        return pd.DataFrame(columns=cols)
    ranked = rank(mine_from)
    rows = []
    for q, g in ranked.groupby("query_id", sort=True):
        golds = gold[q]
        pos = g.loc[g["unit_id"].isin(golds), "score"]
        pos_score = float(pos.max()) if len(pos) else float("nan")
        cand = g[~g["unit_id"].isin(golds)].head(n)
        rows.append(pd.DataFrame({"query_id": q, "unit_id": cand["unit_id"].to_numpy(),
                                  "rank": np.arange(1, len(cand) + 1), "score": cand["score"].to_numpy(),
                                  "positive_score": pos_score}))
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)


def is_relevant(labels: pd.Series) -> pd.Series:
    """Whether each label counts as relevant for mining (sufficient or supporting)."""
    return labels.isin(RELEVANT)


def incompleteness(mined: pd.DataFrame, labels: pd.DataFrame, groups: Mapping[str, str] | None = None,
                   top: int = 4, n_boot: int = 2000, seed: int = 0, clusters: pd.Series | None = None) -> pd.DataFrame:
    """Relevant among the top `top` mined candidates per question (mean count) and the share of
    questions whose top-1 mined candidate is relevant, with bootstrap CIs over questions (whole
    clusters resampled when given: query_id -> cluster, stats.query_clusters); overall and per
    group (groups: query_id -> group name). labels: query_id, unit_id, label."""
    m = mined[mined["rank"] <= top].merge(labels[["query_id", "unit_id", "label"]], on=["query_id", "unit_id"], how="left")
    if m["label"].isna().any():
        q, u = m.loc[m["label"].isna(), ["query_id", "unit_id"]].iloc[0]
        raise ValueError(f"mined candidate {u!r} of question {q!r} has no label: judge the top {top} first")
    # a question whose top candidates a judge abstained on (it could not see them) is not measured
    m = m[~m["query_id"].isin(set(m.loc[m["label"] == ABSTAIN, "query_id"]))]
    m["rel"] = is_relevant(m["label"]).astype(float)
    per_q = m.groupby("query_id").agg(relevant_top=("rel", "sum"),
                                      top1_relevant=("rel", lambda s: float(s.iloc[0]) if len(s) else np.nan))
    rows = []
    sets = {"all": per_q}
    if groups is not None:
        g = per_q.index.map(lambda q: groups.get(q, ""))
        sets.update({f"{name}": part for name, part in per_q.groupby(g, sort=True)})
    for k, (name, part) in enumerate(sets.items()):
        if not len(part):            # every question of the group abstained on: nothing measured
            continue
        cl = stats.cluster_array(clusters, list(part.index))
        a = stats.bootstrap_ci(part["relevant_top"].to_numpy(), n_boot, rng=[seed, 90, k], clusters=cl)
        b = stats.bootstrap_ci(part["top1_relevant"].to_numpy(), n_boot, rng=[seed, 91, k], clusters=cl)
        rows.append({"group": name, "n_queries": len(part), f"relevant_in_top{top}": a.estimate,
                     f"relevant_in_top{top}_lo": a.lo, f"relevant_in_top{top}_hi": a.hi,
                     "top1_relevant": b.estimate, "top1_relevant_lo": b.lo, "top1_relevant_hi": b.hi,
                     "interval": stats.interval_words(clusters)})
    return pd.DataFrame(rows, columns=["group", "n_queries", f"relevant_in_top{top}", f"relevant_in_top{top}_lo",
                                       f"relevant_in_top{top}_hi", "top1_relevant", "top1_relevant_lo",
                                       "top1_relevant_hi", "interval"])


def select(mined: pd.DataFrame, rule: str, k: int = 4, judged_labels: pd.DataFrame | None = None,
           seed: int = 0) -> pd.DataFrame:
    """The k negatives per question a rule chooses (CHOSEN_COLUMNS). judged_labels (query_id,
    unit_id, label) is what the judged rule may see: its judging budget."""
    out = []
    lab = {} if judged_labels is None else {(q, u): lab_ for q, u, lab_ in zip(judged_labels["query_id"],
                                                                        judged_labels["unit_id"], judged_labels["label"])}
    for j, (q, g) in enumerate(mined.groupby("query_id", sort=True)):
        g = g.sort_values("rank")
        backfill = np.zeros(len(g), dtype=bool)
        if rule == "top-k":
            pick = g.head(k)
        elif rule.startswith("window:"):
            a, b = (int(x) for x in rule.split(":", 1)[1].split("-"))
            win = g[(g["rank"] >= a) & (g["rank"] <= b)]
            rng = np.random.default_rng([seed, 80, j])
            pick = win.iloc[np.sort(rng.choice(len(win), size=min(k, len(win)), replace=False))] if len(win) else win
        elif rule.startswith("topk-percpos:"):
            alpha = float(rule.split(":", 1)[1])
            pos = g["positive_score"].iloc[0]
            pick = g[g["score"] < alpha * pos].head(k) if np.isfinite(pos) else g.head(0)
        elif rule == "judged":
            labels = np.array([lab.get((q, u)) or "" for u in g["unit_id"]], dtype=object)
            irrelevant = g[labels == "irrelevant"].head(k)
            need = k - len(irrelevant)
            rest = g[labels == ""]
            fill = rest.sort_values(["score", "unit_id"], ascending=[True, True], kind="mergesort").head(need)
            pick = pd.concat([irrelevant, fill])
            backfill = np.r_[np.zeros(len(irrelevant), bool), np.ones(len(fill), bool)]
        else:
            raise ValueError(f"unknown selection rule {rule!r}; expected top-k, window:A-B, topk-percpos:ALPHA or judged")
        if rule != "judged":
            backfill = np.zeros(len(pick), dtype=bool)
        out.append(pd.DataFrame({"rule": rule, "query_id": q, "unit_id": pick["unit_id"].to_numpy(),
                                 "rank": pick["rank"].to_numpy(), "score": pick["score"].to_numpy(),
                                 "backfill": backfill}))
    return pd.concat(out, ignore_index=True)[CHOSEN_COLUMNS] if out else pd.DataFrame(columns=CHOSEN_COLUMNS)


def rule_table(chosen: pd.DataFrame, labels: pd.DataFrame, n_boot: int = 2000, seed: int = 0,
               clusters: pd.Series | None = None) -> pd.DataFrame:
    """Per rule: questions, negatives, contamination with CI (ratio of sums, questions resampled —
    or their clusters when given: query_id -> cluster),
    back-fill share and median mined rank of the chosen negatives, and the share judged sufficient
    (the stricter reading of contamination) (RULE_COLUMNS)."""
    c = chosen.merge(labels[["query_id", "unit_id", "label"]], on=["query_id", "unit_id"], how="left")
    if c["label"].isna().any():
        q, u = c.loc[c["label"].isna(), ["query_id", "unit_id"]].iloc[0]
        raise ValueError(f"chosen negative {u!r} of question {q!r} has no label: judge every chosen negative")
    rules = list(dict.fromkeys(c["rule"]))
    c = c[c["label"] != ABSTAIN]          # a negative its judge could not see is not measured
    c["rel"] = is_relevant(c["label"]).astype(float)
    rows = []
    for i, (rule, g) in enumerate(c.groupby("rule", sort=False)):
        # ratio of sums with questions resampled: the cluster bootstrap of the per-negative 0/1 values
        groups = stats.cluster_array(clusters, list(g["query_id"]))
        ci = stats.bootstrap_ci(g["rel"].to_numpy(), n_boot, rng=[seed, 95, i],
                                clusters=g["query_id"].to_numpy() if groups is None else groups)
        rows.append({"rule": rule, "n_queries": g["query_id"].nunique(), "n_negatives": len(g),
                     "contamination": ci.estimate, "contamination_lo": ci.lo, "contamination_hi": ci.hi, "backfill_share": float(g["backfill"].mean()),
                     "median_rank": float(g["rank"].median()),
                     "sufficient_share": float((g["label"] == "sufficient").mean())})
    measured = {r["rule"] for r in rows}
    rows += [{"rule": r, "n_queries": 0, "n_negatives": 0} for r in rules if r not in measured]
    return pd.DataFrame(rows, columns=RULE_COLUMNS)


def score_shape(scores: pd.Series, query_ids: pd.Series, lo: float = 0.0, hi: float = 100.0,
                end_width: float = 10.0) -> dict:
    """How near-binary judge scores are: the share within end_width of either end of the scale,
    and how many questions' judged candidates all carry one score (no ordering to distil)."""
    s = pd.to_numeric(scores, errors="coerce")
    ok = s.notna()
    ends = ((s <= lo + end_width) | (s >= hi - end_width))[ok]
    per_q = s[ok].groupby(query_ids[ok]).nunique()
    return {"scored": int(ok.sum()), "share_at_ends": float(ends.mean()) if len(ends) else float("nan"),
            "questions": int(len(per_q)), "constant_questions": int((per_q == 1).sum())}


def export_training(chosen: pd.DataFrame, questions: pd.DataFrame, gold: Mapping[str, Sequence[str]],
                    labels: pd.DataFrame, units: pd.DataFrame, out_dir: Path | str) -> list[Path]:
    """Training files per rule (JSONL + parquet) and corpus.jsonl; see the module docstring."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = questions.set_index("query_id")["text"]
    lab = {(q, u): lab_ for q, u, lab_ in zip(labels["query_id"], labels["unit_id"], labels["label"])}
    written = []
    for rule, g in chosen.groupby("rule", sort=True):
        rows = []
        for q, part in g.groupby("query_id", sort=True):
            negs = list(part.sort_values("rank")["unit_id"])
            rows.append({"query_id": q, "query": str(text[q]), "pos_target": list(gold[q]), "neg_target": negs,
                         "rule": rule, "neg_labels": [lab.get((q, u), "") for u in negs],
                         "neg_backfill": [bool(b) for b in part.sort_values("rank")["backfill"]]})
        stem = "negatives_" + rule.replace(":", "_").replace(".", "p")
        jl = out_dir / f"{stem}.jsonl"
        jl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        pq = out_dir / f"{stem}.parquet"
        pd.DataFrame(rows).to_parquet(pq, index=False)
        written += [jl, pq]
    corpus = out_dir / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"unit_id": u, "doc": p}) + "\n"
                              for u, p in zip(units["unit_id"], units["image_path"])), encoding="utf-8")
    return written + [corpus]


def read_training(path: Path | str) -> list[dict]:
    """Rows of an exported JSONL file."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def independent_rules(rules_by_judge: pd.DataFrame, selecting: str, other: str = "") -> pd.DataFrame:
    """Each rule's row measured by labels its choice did not see (RULE_COLUMNS + measured_by).

    rules_by_judge: rule_table rows with a judge column (one question set). Rules that choose by
    rank alone are measured by the selecting (primary) judge; the judged rule chose its negatives
    with that judge's labels, so measuring it with the same labels gives 0 by construction — it is
    measured by the other judge, or, without one, left unmeasured (NaN, measured_by 'none')."""
    mine = rules_by_judge[rules_by_judge["judge"] == selecting]
    rows = []
    for rec in mine.to_dict("records"):
        if rec["rule"] == "judged":
            alt = rules_by_judge[(rules_by_judge["judge"] == other) & (rules_by_judge["rule"] == "judged")] if other else mine.head(0)
            if len(alt):
                rec = {**alt.iloc[0].to_dict(), "measured_by": other}
            else:
                rec = {**rec, **{c: float("nan") for c in ("contamination", "contamination_lo", "contamination_hi",
                                                          "sufficient_share")}, "measured_by": "none"}
        else:
            rec = {**rec, "measured_by": selecting}
        rows.append(rec)
    return pd.DataFrame(rows, columns=RULE_COLUMNS + ["measured_by"])
