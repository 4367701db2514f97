"""The long-document benchmark's views of a run's systems (stage 07).

- settings: per family (a base system), the settings Base / Ctx / B+Ctx / Rerank / Q-Split, each
  with nDCGAll@10 and RecallAll@10, Macro (over evidence structures, each resampled on its own) and
  Micro (over questions), 95% CIs. Base is the system; Ctx ranks pages by their document's context
  match alone and B+Ctx by page score plus context match (VL-DocIR eq. 8, ``retrieval.doc_context``);
  Rerank and Q-Split are ``<base>+rerank`` / ``<base>+split`` when the run built them. A setting
  that did not run says why in its status — it is never filled in.
- source x structure: RecallAll@5 per (source, evidence structure) for every system, where the
  source is a units column (report.source_column) of each question's first evidence unit.
- single vs multi: storage per page and the evidence-complete figures of single- and multi-vector
  systems side by side, when both kinds ran.

All figures are scored against the evidence units the questions name (the same qrels as the
evidence-complete table), not against pooled labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike import memory
from lookalike.report.tables import fmt_ci
from lookalike.eval import stats
from lookalike.retrieval import catalog, doc_context
from lookalike.retrieval import indexes as retrieve

SETTINGS = ("Base", "Ctx", "B+Ctx", "Rerank", "Q-Split")
SETTINGS_COLUMNS = ["family", "setting", "system", "status", "measure", "aggregate", "value", "value_lo", "value_hi", "n"]
HEATMAP_COLUMNS = ["system", "source", "evidence_structure", "n", "recall_all_5", "recall_all_5_lo", "recall_all_5_hi",
                   "interval"]
KIND_COLUMNS = ["system", "kind", "vectors_per_page", "dim", "bytes_per_page_fp32", "measure", "aggregate", "value",
                "value_lo", "value_hi", "n"]


def context_runs(families: Sequence[str], unit_vectors: Mapping, query_vectors: Mapping, units: pd.DataFrame,
                 query_ids: Sequence[str], have: Mapping[str, pd.DataFrame], depth: int, seed: int = 0,
                 n_context: int | None = None) -> tuple[dict, dict]:
    """({system name: run}, {family: why not}) for the Ctx and B+Ctx settings of each vector family:
    ``<family>+ctx-only`` and ``<family>+doc-context`` (reused from have when the run already ranked it
    — stage 06 builds ocr-minilm's). n_context: context vectors per document, by default the
    catalogue's doc-context system's, so a family's B+Ctx is scored as that system is."""
    n_context = n_context or catalog.SYSTEMS[catalog.DOC_CONTEXT].context_vectors
    runs, why = {}, {}
    unit_ids = list(units["unit_id"])
    if catalog.own_documents(units["doc_id"]):
        # a document of one unit is its own context: Ctx and B+Ctx would repeat Base row for row
        return runs, {fam: "every unit is its own document, so Ctx and B+Ctx would equal Base" for fam in families}
    for fam in families:
        vecs = unit_vectors.get(fam)
        if vecs is None:
            why[fam] = "no vectors of it in this run (it was not encoded)"
            continue
        if vecs.kind == "text":
            why[fam] = "a text (BM25) system has no vectors to build document context from"
            continue
        if fam not in query_vectors:
            why[fam] = "no query vectors"
            continue
        order = {u: i for i, u in enumerate(vecs.ids)}
        if set(order) != set(unit_ids):
            why[fam] = "its index does not hold every unit (some failed to encode)"
            continue
        pages = [np.asarray(vecs.data[order[u]]) for u in unit_ids]
        scorer = doc_context.ContextScorer(pages, units["doc_id"], n_context=n_context, seed=seed)
        both = f"{fam}+doc-context"
        ctx_only, summed = _context_settings(scorer, list(query_vectors[fam].data), list(query_ids), unit_ids, depth,
                                             both not in have)
        runs[f"{fam}+ctx-only"] = ctx_only
        runs[both] = have[both] if both in have else summed
    return runs, why


def _context_settings(scorer, queries: list, query_ids: list, unit_ids: list, depth: int, with_sum: bool
                      ) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """(Ctx run, B+Ctx run or None) of these queries, a block of queries at a time: each block's page and
    context scores found once, cut to the top depth and let go, so no question x page matrix is held."""
    block = max(1, retrieve.BLOCK_CELLS // max(1, len(unit_ids)))
    ctx_parts, sum_parts = [], []
    with memory.returning_freed_blocks():
        for a in range(0, max(1, len(query_ids)), block):
            page, ctx = scorer.parts(queries[a:a + block])
            ctx_parts.append(retrieve.run_from_scores(ctx, query_ids[a:a + block], unit_ids, depth))
            if with_sum:
                sum_parts.append(retrieve.run_from_scores(page + ctx, query_ids[a:a + block], unit_ids, depth))
    joined = [pd.concat(p, ignore_index=True) if len(p) > 1 else p[0] for p in (ctx_parts, sum_parts) if p]
    return joined[0], (joined[1] if with_sum else None)


def settings_table(families: Sequence[str], evidence: pd.DataFrame, extra_evidence: pd.DataFrame,
                   why_no_context: Mapping[str, str], named: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """The long settings table: one row per family × setting × measure (nDCGAll, RecallAll at 10) ×
    aggregate (macro, micro); a setting that did not run has one row with its status and no value.
    named: {"rerank": rerank.systems, "split": split.systems} — what the parameters asked for."""
    ev = pd.concat([evidence, extra_evidence], ignore_index=True) if len(extra_evidence) else evidence
    ev = ev[(ev["k"] == 10) & ev["measure"].isin(["nDCGAll", "RecallAll"]) & ev["aggregate"].isin(["macro", "micro"])]
    named = dict(named or {})
    rows = []
    for fam in families:
        names = {"Base": fam, "Ctx": f"{fam}+ctx-only", "B+Ctx": f"{fam}+doc-context", "Rerank": f"{fam}+rerank",
                 "Q-Split": f"{fam}+split"}
        for setting, system in names.items():
            part = ev[ev["system"] == system]
            if len(part):
                for r in part.sort_values(["measure", "aggregate"]).itertuples():
                    rows.append((fam, setting, system, "ran", r.measure, r.aggregate, r.value, r.value_lo, r.value_hi,
                                 int(r.n)))
                continue
            if setting in ("Ctx", "B+Ctx"):
                status = f"not run: {why_no_context.get(fam, 'no document context for this system')}"
            else:
                key = "rerank" if setting == "Rerank" else "split"
                status = ("not run: configured, but not built (stage 06 says why)" if fam in named.get(key, ())
                          else f"not run: {key}.systems does not name it")
            rows.append((fam, setting, system, status, "", "", np.nan, np.nan, np.nan, 0))
    return pd.DataFrame(rows, columns=SETTINGS_COLUMNS)


def settings_wide(long: pd.DataFrame) -> pd.DataFrame:
    """One row per family × setting; cells 'estimate [lo, hi]' ('—' and the reason in note when the
    setting did not run)."""
    cols = ["nDCGAll@10 Macro", "nDCGAll@10 Micro", "RecallAll@10 Macro", "RecallAll@10 Micro"]
    rows = []
    for (fam, setting), part in long.groupby(["family", "setting"], sort=False):
        row = {"family": fam, "setting": setting, "system": part["system"].iloc[0]}
        ran = part[part["status"] == "ran"]
        row["n"] = int(ran["n"].max()) if len(ran) else 0
        for c in cols:
            measure, agg = c.split("@10 ")
            hit = ran[(ran["measure"] == measure) & (ran["aggregate"] == agg.lower())]
            row[c] = (fmt_ci(hit["value"].iloc[0], hit["value_lo"].iloc[0], hit["value_hi"].iloc[0]) if len(hit)
                      else "—")
        row["note"] = "" if len(ran) else part["status"].iloc[0]
        rows.append(row)
    return pd.DataFrame(rows, columns=["family", "setting", "system", "n", *cols, "note"])


def source_structure(frames: Mapping[str, pd.DataFrame], questions: pd.DataFrame, units: pd.DataFrame,
                     source_column: str, seed: int = 0, clusters: pd.Series | None = None) -> pd.DataFrame:
    """RecallAll@5 per system × source × evidence structure, with bootstrap 95% CIs (n per cell).
    frames: per-query evidence-complete frames (``scoring.evidence_complete``)."""
    if source_column not in units.columns:
        raise KeyError(source_column)
    first = questions["evidence_unit_ids"].astype(str).str.split(";").str[0]
    source = first.map(units.set_index("unit_id")[source_column].astype(str))
    meta = pd.DataFrame({"source": source.fillna("").replace("", "(none)").to_numpy(),
                         "evidence_structure": questions["evidence_structure"].to_numpy()},
                        index=questions["query_id"].to_numpy())
    rows = []
    for name in sorted(frames):
        pq = frames[name]["recall_all_5"].to_frame().join(meta)
        for j, ((src, st), part) in enumerate(pq.groupby(["source", "evidence_structure"], sort=True)):
            ci = stats.bootstrap_ci(part["recall_all_5"].to_numpy(dtype=float), 2000,
                                    rng=np.random.default_rng([seed, 91, j]),
                                    clusters=stats.cluster_array(clusters, list(part.index)))
            rows.append((name, src, st, ci.n, ci.estimate, ci.lo, ci.hi, stats.interval_words(clusters)))
    return pd.DataFrame(rows, columns=HEATMAP_COLUMNS)



def kinds_table(unit_vectors: Mapping, evidence: pd.DataFrame) -> pd.DataFrame:
    """Single- and multi-vector systems side by side: vectors per page (median), dimension, fp32
    bytes per page, and their Micro / Macro nDCGAll@10 and RecallAll@10. Empty unless both kinds ran."""
    kinds = {n: v.kind for n, v in unit_vectors.items() if v.kind in ("single", "multi")}
    if {"single", "multi"} - set(kinds.values()):
        return pd.DataFrame(columns=KIND_COLUMNS)
    ev = evidence[(evidence["k"] == 10) & evidence["measure"].isin(["nDCGAll", "RecallAll"])
                  & evidence["aggregate"].isin(["macro", "micro"])]
    rows = []
    for name in sorted(kinds):
        v = unit_vectors[name]
        per_page = float(np.median(v.token_counts())) if v.kind == "multi" else 1.0
        dim = v.dim
        for r in ev[ev["system"] == name].sort_values(["measure", "aggregate"]).itertuples():
            rows.append((name, v.kind, per_page, dim, int(per_page * dim * 4), r.measure, r.aggregate, r.value,
                         r.value_lo, r.value_hi, int(r.n)))
    return pd.DataFrame(rows, columns=KIND_COLUMNS)
