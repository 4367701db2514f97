"""The judge pool: which (question, unit) pairs get judged. One function for every stage: the union
of every system's top k per question (plus, when given, each question's hard-negative candidates),
pooled once and reused across experiments; ``blind_sheet`` shuffles a pool into items a blind judge
sees (stage 03); ``unjudged`` is what re-pooling adds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from lookalike.eval.ranking import rank

POOL_COLUMNS = ["query_id", "unit_id", "systems", "best_rank", "hard_candidate"]


def pool(runs: Mapping[str, pd.DataFrame], query_ids: Iterable[str], k: int,
         candidates: Mapping[str, Iterable[str]] | None = None) -> pd.DataFrame:
    """Union of each system's top k per question (canonical order: score desc, unit id desc),
    plus any candidates given per question. One row per (query, unit): which systems put it in
    their top k, its best rank there (0 when only a candidate), and whether it is a candidate."""
    wanted = set(query_ids)
    rows: dict[tuple, dict] = {}
    for name in sorted(runs):
        run = runs[name]
        mine = run[run["query_id"].isin(wanted)]
        ranked = rank(mine[["query_id", "unit_id", "score"]]) if len(mine) else pd.DataFrame(columns=["query_id", "unit_id", "rank"])
        # lists, not the columns: iterating pandas 3's Arrow-backed strings costs ~1 µs an item
        for q, u, r in zip(ranked["query_id"].tolist(), ranked["unit_id"].tolist(), ranked["rank"].tolist()):
            if r > k:
                continue
            row = rows.setdefault((q, u), {"systems": [], "best_rank": int(r), "hard_candidate": False})
            row["systems"].append(name)
            row["best_rank"] = min(row["best_rank"], int(r))
    for q, units in (candidates or {}).items():
        if q not in wanted:
            continue
        for u in units:
            row = rows.setdefault((q, u), {"systems": [], "best_rank": 0, "hard_candidate": True})
            row["hard_candidate"] = True
    out = pd.DataFrame([{"query_id": q, "unit_id": u, "systems": ";".join(r["systems"]), "best_rank": r["best_rank"],
                         "hard_candidate": r["hard_candidate"]} for (q, u), r in rows.items()], columns=POOL_COLUMNS)
    return out.sort_values(["query_id", "unit_id"], kind="mergesort").reset_index(drop=True)


def pool_by_system(pooled: pd.DataFrame, systems: Iterable[str]) -> pd.DataFrame:
    """Per system: pairs it contributed, and pairs only it contributed."""
    lists = pooled["systems"].str.split(";")
    rows = []
    for s in systems:
        mine = lists.apply(lambda xs, s=s: s in xs)
        only = lists.apply(lambda xs, s=s: xs == [s])
        rows.append({"system": s, "pairs": int(mine.sum()), "only_this_system": int(only.sum())})
    return pd.DataFrame(rows, columns=["system", "pairs", "only_this_system"])


def unjudged(pooled: pd.DataFrame, judged: pd.DataFrame | None) -> pd.DataFrame:
    """The pooled pairs without a judgement in judged (query_id, unit_id): what re-pooling adds."""
    if judged is None or not len(judged):
        return pooled
    done = set(zip(judged["query_id"], judged["unit_id"]))
    keep = [(q, u) not in done for q, u in zip(pooled["query_id"], pooled["unit_id"])]
    return pooled[keep].reset_index(drop=True)


def blind_sheet(pooled: pd.DataFrame, queries: pd.DataFrame, seed: int) -> pd.DataFrame:
    """A pool as a blind judging sheet: shuffled with the seed, each pair an opaque item id (j00000,
    ...) with its query text; never the system, the rank, the file name or the caption. Columns
    item, query_id, text, unit_id (the sheet's key; a judge is shown item and text only)."""
    pairs = pooled[["query_id", "unit_id"]].merge(queries[["query_id", "text"]], on="query_id", how="left")
    order = np.random.default_rng([seed, 55]).permutation(len(pairs))
    sheet = pairs.iloc[order].reset_index(drop=True)
    sheet.insert(0, "item", [f"j{i:05d}" for i in range(len(sheet))])
    return sheet[["item", "query_id", "text", "unit_id"]]
