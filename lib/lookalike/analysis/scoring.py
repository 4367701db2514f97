"""Stage 07's tables: sufficiency under hard negatives, evidence-complete metrics, fusion traces.

Every number here is a mean over questions with its own n and bootstrap CI; numbers computed on
different question sets or candidate sets sit side by side and are never subtracted across sets.
Within one set, paired differences (slot 1 -> slot 5, system vs system) are fine and reported.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike import memory
from lookalike.eval import metrics
from lookalike.eval import ranking
from lookalike.eval import stats
from lookalike.retrieval import doc_context, fusion
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import systems
from lookalike.vocab import HARD_KS  # noqa: F401 (the k of the hard columns; stage 07 reads it here)

SUFFICIENCY_COLUMNS = ["system", "negatives", "k", "n", "sufficient", "sufficient_lo", "sufficient_hi",
                       "supporting_only", "supporting_only_lo", "supporting_only_hi", "neither", "neither_lo",
                       "neither_hi", "judged", "interval"]
EVIDENCE_COLUMNS = ["system", "aggregate", "evidence_structure", "measure", "k", "value", "n", "value_lo", "value_hi"]
EVIDENCE_MEASURES = {"nDCG": "ndcg_cut", "Recall": "recall", "nDCGAll": "ndcg_all", "RecallAll": "recall_all"}


class SharedCandidates(Mapping):
    """Each question's candidates as one list every question shares plus the question's own extras
    (none of them in the shared list, none twice): a haystack subsample with each question's gold
    and hard distractors. Reads as query_id -> its candidates; a scorer ranks the shared part once
    per block of questions instead of listing every (question, unit) pair."""

    def __init__(self, shared: Sequence[str], extra: Mapping[str, Sequence[str]]):
        self.shared = list(dict.fromkeys(shared))
        held = set(self.shared)
        self.extra = {q: [u for u in dict.fromkeys(more) if u not in held] for q, more in extra.items()}

    def __getitem__(self, query_id: str) -> list[str]:
        return self.shared + self.extra[query_id]

    def __iter__(self):
        return iter(self.extra)

    def __len__(self) -> int:
        return len(self.extra)

    def sizes(self) -> list[int]:
        """Each question's number of candidates, in question order."""
        return [len(self.shared) + len(more) for more in self.extra.values()]


def restricted_run(scores: np.ndarray, query_ids: Sequence[str], unit_ids: Sequence[str],
                   candidates: Mapping[str, Sequence[str]], depth: int | None = None) -> pd.DataFrame:
    """A run holding, per question, only its candidate units with the system's scores — with depth,
    only each question's canonical top depth of them. scores: (query_ids, unit_ids)."""
    if isinstance(candidates, SharedCandidates) and depth is not None:
        return _shared_top(np.asarray(scores), list(query_ids), unit_ids, candidates, depth)
    rows_q, rows_u, at = [], [], []
    for qi, q in enumerate(query_ids):
        mine = sorted(set(candidates.get(q, [])))
        rows_q.extend([q] * len(mine))
        rows_u.extend(mine)
        at.extend([qi] * len(mine))
    cols = _positions(pd.Index(unit_ids), rows_u)
    picked = np.asarray(scores)[np.asarray(at, dtype=np.int64), cols] if rows_u else np.empty(0)
    run = pd.DataFrame({"query_id": rows_q, "unit_id": rows_u, "score": picked.astype(np.float64)})
    return run if depth is None else cut(run, depth)


def _positions(where: pd.Index, ids: Sequence[str]) -> np.ndarray:
    """Each id's position in where; KeyError naming the first id that is not there."""
    at = where.get_indexer(list(ids)) if len(ids) else np.empty(0, dtype=np.int64)
    if (at < 0).any():
        raise KeyError(ids[int(np.flatnonzero(at < 0)[0])])
    return at


def _shared_top(scores: np.ndarray, query_ids: list[str], unit_ids: Sequence[str], candidates: SharedCandidates,
                depth: int) -> pd.DataFrame:
    """restricted_run's top depth over shared candidates: each question's top depth of the shared list
    (ties at the cut by unit id, indexes.top_columns) joined with its extras, then cut — the extras are
    disjoint from the shared list, so this is the top depth of all its candidates."""
    ids = np.asarray(unit_ids, dtype=object)
    where = pd.Index(ids)
    shared = _positions(where, candidates.shared)
    rows = np.asarray([i for i, q in enumerate(query_ids) if q in candidates.extra], dtype=np.int64)
    if not len(rows):
        return pd.DataFrame({"query_id": pd.Series([], dtype=object), "unit_id": pd.Series([], dtype=object),
                             "score": pd.Series([], dtype=np.float64)})
    qids = np.asarray(query_ids, dtype=object)
    part = scores[rows][:, shared]
    if part.shape[1] > depth:
        top = retrieve.top_columns(part, depth, ranking._factorize_sorted(ids[shared])[0])
    else:
        top = np.tile(np.arange(part.shape[1]), (len(rows), 1))
    keep = top >= 0
    r_idx = np.repeat(np.arange(len(rows)), top.shape[1])[keep.ravel()]
    c_idx = top.ravel()[keep.ravel()]
    more_r, more_c = [], []
    for r in rows:
        extra = _positions(where, candidates.extra[query_ids[r]])
        more_r.extend([r] * len(extra))
        more_c.extend(extra.tolist())
    more_r, more_c = np.asarray(more_r, dtype=np.int64), np.asarray(more_c, dtype=np.int64)
    run = pd.DataFrame({"query_id": np.concatenate([qids[rows[r_idx]], qids[more_r]]),
                        "unit_id": np.concatenate([ids[shared[c_idx]], ids[more_c]]),
                        "score": np.concatenate([part[r_idx, c_idx], scores[more_r, more_c]]).astype(np.float64)})
    return cut(run, depth)


def _exported_positions(run: pd.DataFrame, query_ids: Sequence[str], unit_index: pd.Index
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An exported run as (question row, unit column, score) arrays over query_ids x unit_index; units
    the corpus does not hold and questions not asked are left out."""
    q_at = pd.Index(list(query_ids)).get_indexer(run["query_id"].tolist())
    u_at = unit_index.get_indexer(run["unit_id"].tolist())
    keep = (q_at >= 0) & (u_at >= 0)
    return q_at[keep], u_at[keep], run["score"].to_numpy(dtype=np.float64)[keep]


def follow_exported(scores: np.ndarray, rows: range, q_at: np.ndarray, u_at: np.ndarray,
                    exported: np.ndarray) -> np.ndarray:
    """A block of scores (rows of the questions, every unit) made to agree with an exported run: each
    exported unit takes its exported score, and every other unit of that question a score no higher than
    just below the question's lowest exported score, so the canonical order of any subset of units is the
    exported run's order (ties included) followed by the units it did not export, in their own order. Two
    computations of one score can differ in the last bit (another block shape, another BLAS path); where
    many units tie that moved whole rankings, and a view's full-corpus figure differed from the exported
    run's. Returns a float64 copy; a question the run does not hold is left as computed."""
    out = np.array(scores, dtype=np.float64)
    mine = (q_at >= rows.start) & (q_at < rows.stop)
    if not mine.any():
        return out
    r, c, v = q_at[mine] - rows.start, u_at[mine], exported[mine]
    floor = np.full(out.shape[0], np.inf)
    np.minimum.at(floor, r, v)
    has = np.isfinite(floor)
    ceiling = np.nextafter(floor[has], -np.inf)[:, None]
    out[has] = np.minimum(out[has], ceiling)
    out[r, c] = v
    return out


def cut(run: pd.DataFrame, depth: int) -> pd.DataFrame:
    """Each question's canonical top depth of a run (query_id, unit_id, score)."""
    if run.empty:
        return run
    ranked = ranking.rank(run)
    return ranked.loc[ranked["rank"] <= depth, ["query_id", "unit_id", "score"]].reset_index(drop=True)


def per_query(qrels: pd.DataFrame, run: pd.DataFrame, measures: Sequence[str], query_ids: Sequence[str]) -> pd.DataFrame:
    """Per-query values on exactly these questions (a question missing from the run scores as an
    empty ranking), indexed by query_id."""
    q = qrels[qrels["query_id"].isin(set(query_ids))]
    ev = metrics.evaluate(q, run[run["query_id"].isin(set(query_ids))], list(measures), complete=True)
    return ev.per_query[ev.measures]




def sufficiency(qrels: pd.DataFrame, runs: Mapping[str, pd.DataFrame], query_ids: Sequence[str], negatives: str,
                ks: Sequence[int] = (1, 3, 5, 10), seed: int = 0, n_boot: int = 2000,
                clusters: pd.Series | None = None) -> tuple[pd.DataFrame, dict]:
    """sufficient@k, supporting-only@k, neither@k per system with bootstrap CIs (resampling the
    questions' clusters when given: stats.query_clusters; every system draws the same resamples).
    judged: the share of each system's top k that carries a label (Judged@k, averaged over the
    questions) — what the three shares rest on; an unlabelled pair counts as neither.
    Returns the table and the per-query frames (system -> frame) for paired comparisons."""
    measures = [f"{m}_{k}" for k in ks for m in ("sufficient", "supporting_only", "neither", "judged")]
    rows, frames = [], {}
    for name, run in sorted(runs.items()):
        pq = per_query(qrels, run, measures, query_ids)
        frames[name] = pq
        cl = stats.cluster_array(clusters, list(pq.index))
        for k in ks:
            row = {"system": name, "negatives": negatives, "k": k, "n": len(pq), "interval": stats.interval_words(clusters)}
            for j, m in enumerate(("sufficient", "supporting_only", "neither")):
                ci = stats.bootstrap_ci(pq[f"{m}_{k}"].to_numpy(), n_boot, rng=np.random.default_rng([seed, k, j]),
                                        clusters=cl)
                row.update({m: ci.estimate, f"{m}_lo": ci.lo, f"{m}_hi": ci.hi})
            row["judged"] = float(pq[f"judged_{k}"].mean()) if len(pq) else float("nan")
            rows.append(row)
    return pd.DataFrame(rows, columns=SUFFICIENCY_COLUMNS), frames


def slot_gain(frame: pd.DataFrame, a: str, b: str, seed: int = 0, n_boot: int = 2000,
              clusters: pd.Series | None = None) -> dict:
    """Paired gain b - a on the same questions (e.g. sufficient_1 -> sufficient_5), with a CI."""
    diff = frame[b].to_numpy() - frame[a].to_numpy()
    ci = stats.bootstrap_ci(diff, n_boot, rng=np.random.default_rng([seed, 15]),
                            clusters=stats.cluster_array(clusters, list(frame.index)))
    return {"gain": ci.estimate, "gain_lo": ci.lo, "gain_hi": ci.hi, "n": ci.n}


def evidence_complete(qrels: pd.DataFrame, runs: Mapping[str, pd.DataFrame], questions: pd.DataFrame,
                      ks: Sequence[int] = (3, 5, 10), seed: int = 0, n_boot: int = 2000,
                      clusters: pd.Series | None = None) -> tuple[pd.DataFrame, dict]:
    """nDCG@k, Recall@k, nDCGAll@k, RecallAll@k by evidence structure, Macro over structures and
    Micro over questions, each with a bootstrap 95% CI: within a structure its questions (their
    clusters when given) are resampled; Macro resamples every structure on its own and averages the
    structure means (a stratified bootstrap); Micro resamples all questions. Every system draws the
    same resamples. Returns the long table and per-query frames (system -> frame)."""
    measures = [f"{code}_{k}" for code in EVIDENCE_MEASURES.values() for k in ks]
    structure = questions.set_index("query_id")["evidence_structure"]
    rows, frames = [], {}
    for name, run in sorted(runs.items()):
        pq = per_query(qrels, run, measures, list(questions["query_id"]))
        frames[name] = pq
        groups = structure.reindex(pq.index)
        for _j, (label, code) in enumerate(EVIDENCE_MEASURES.items()):
            for k in ks:
                col = pq[f"{code}_{k}"]
                draws = {}
                for i, (st, part) in enumerate(col.groupby(groups, sort=True)):
                    cl = stats.cluster_array(clusters, list(part.index))
                    draws[st] = stats.bootstrap_means(part.to_numpy(dtype=np.float64), n_boot,
                                                  np.random.default_rng([seed, 16, i]), cl)
                    # one question says nothing of its own spread: no interval (never a zero-width one)
                    lo, hi = np.quantile(draws[st], [0.025, 0.975]) if len(part) >= 2 else (np.nan, np.nan)
                    rows.append({"system": name, "aggregate": "structure", "evidence_structure": st, "measure": label,
                                 "k": k, "value": float(part.mean()), "value_lo": float(lo), "value_hi": float(hi),
                                 "n": len(part)})
                by_mean = col.groupby(groups, sort=True).mean()
                sizes = col.groupby(groups, sort=True).size()
                # a structure of one question would enter the Macro as exact: the Macro then has no interval
                macro = (np.mean(np.vstack(list(draws.values())), axis=0) if draws and (sizes >= 2).all()
                         else np.array([np.nan]))
                rows.append({"system": name, "aggregate": "macro", "evidence_structure": "all", "measure": label,
                             "k": k, "value": float(by_mean.mean()) if len(by_mean) else float("nan"),
                             "value_lo": float(np.quantile(macro, 0.025)), "value_hi": float(np.quantile(macro, 0.975)),
                             "n": len(by_mean)})
                ci = stats.bootstrap_ci(col.to_numpy(), n_boot, rng=np.random.default_rng([seed, 17]),
                                        clusters=stats.cluster_array(clusters, list(col.index)))
                rows.append({"system": name, "aggregate": "micro", "evidence_structure": "all", "measure": label,
                             "k": k, "value": float(col.mean()) if len(col) else float("nan"), "value_lo": ci.lo,
                             "value_hi": ci.hi, "n": len(col)})
    return pd.DataFrame(rows, columns=EVIDENCE_COLUMNS), frames


def macro_weights(evidence: pd.DataFrame, few: int = 10) -> str:
    """What a Macro figure averages: the questions per evidence structure (each structure weighs the
    same), and a warning naming the structures with fewer than ``few`` questions."""
    st = evidence[evidence["aggregate"] == "structure"]
    if st.empty:
        return "Macro: no evidence structures."
    n = st.groupby("evidence_structure")["n"].max().sort_index()
    if len(n) == 1:
        # one structure: nothing to weigh against, and the two aggregates are the same mean
        return (f"Macro and Micro are the same figure here: every question has the one evidence structure "
                f"{n.index[0]} (n = {int(n.iloc[0])})."
                + (" It has no interval: one question cannot measure its own uncertainty." if n.iloc[0] < 2 else ""))
    said = (f"Macro averages {len(n)} evidence structures with equal weight (questions: "
            + ", ".join(f"{k} n = {v}" for k, v in n.items()) + f"; Micro averages all {int(n.sum())}).")
    single = n[n < 2]
    if len(single):
        said += (f" The Macro figure has no interval: {', '.join(single.index)} "
                 f"{'has' if len(single) == 1 else 'have'} one question, whose uncertainty one question cannot measure.")
    thin = n[n < few]
    if len(thin):
        said += (f" Caution: {', '.join(f'{k} ({v})' for k, v in thin.items())} "
                 f"{'has' if len(thin) == 1 else 'have'} fewer than {few} questions but weigh"
                 f"{'s' if len(thin) == 1 else ''} as much as any other structure in the Macro figure.")
    return said


def fusion_trace(components: Mapping[str, pd.DataFrame], fused: Mapping[str, pd.DataFrame],
                 sufficient: Mapping[str, set], k: int = 10) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Where fusion loses evidence: per question and fusion method, was a sufficient unit in some
    component's candidate pool (its whole ranking) but missing from the fused top k?

    sufficient[qid]: the question's sufficient units. Returns (per question: query_id, method,
    in_some_pool, in_fused_top_k, lost, components_holding), (counts: method, component,
    questions_lost — the lost questions whose sufficient unit that component held; and a row
    component "any" with all lost questions)."""
    pools = {name: run.groupby("query_id")["unit_id"].apply(set).to_dict() for name, run in components.items()}
    per_q, counts = [], []
    for method, run in sorted(fused.items()):
        top = metrics.rank(run)
        top = top[top["rank"] <= k].groupby("query_id")["unit_id"].apply(set).to_dict()
        lost_by = {c: 0 for c in components}
        lost_any = 0
        for q in sorted(sufficient):
            good = sufficient[q]
            if not good:
                continue
            holding = [c for c in sorted(components) if pools[c].get(q, set()) & good]
            in_top = bool(top.get(q, set()) & good)
            lost = bool(holding) and not in_top
            per_q.append({"query_id": q, "method": method, "in_some_pool": bool(holding), "in_fused_top_k": in_top,
                          "lost": lost, "components_holding": ";".join(holding)})
            if lost:
                lost_any += 1
                for c in holding:
                    lost_by[c] += 1
        counts.extend({"method": method, "component": c, "questions_lost": n} for c, n in sorted(lost_by.items()))
        counts.append({"method": method, "component": "any", "questions_lost": lost_any})
    return (pd.DataFrame(per_q, columns=["query_id", "method", "in_some_pool", "in_fused_top_k", "lost",
                                         "components_holding"]),
            pd.DataFrame(counts, columns=["method", "component", "questions_lost"]))


def restrict_ranking(run: pd.DataFrame, candidates: Mapping[str, Sequence[str]], depth: int | None = None
                     ) -> pd.DataFrame:
    """A run that only has a top-depth ranking (an external run) restricted to each question's
    candidates: candidates it ranked keep their scores; the ones it did not rank come after all of
    them (score below its lowest), in canonical order among themselves (the larger unit id first).
    With depth, only each question's canonical top depth."""
    rows_q, rows_u, rows_s = [], [], []
    by_q = {q: dict(zip(g["unit_id"], g["score"])) for q, g in run.groupby("query_id", sort=False)}
    shared = isinstance(candidates, SharedCandidates)
    if shared:
        shared_set, shared_desc = set(candidates.shared), sorted(candidates.shared, reverse=True)
    for q in sorted(candidates):
        have = by_q.get(q, {})
        floor = (min(have.values()) if have else 0.0) - 1.0
        if depth is None:
            units = sorted(set(candidates[q]))
        elif shared:
            extra = set(candidates.extra[q])
            ranked = [u for u in have if u in shared_set or u in extra]
            need = max(0, depth - len(ranked))
            # the unranked ones that can stand in the top depth: the largest ids of the shared list
            # and of the question's extras
            unranked = [u for u in shared_desc[:need + len(ranked)] if u not in have]
            unranked = sorted(unranked + [u for u in extra if u not in have], reverse=True)[:need]
            units = ranked + unranked
        else:
            held = set(candidates[q])
            ranked = [u for u in have if u in held]
            units = ranked + heapq.nlargest(max(0, depth - len(ranked)), (u for u in held if u not in have))
        for u in units:
            rows_q.append(q)
            rows_u.append(u)
            rows_s.append(float(have.get(u, floor)))
    out = pd.DataFrame({"query_id": rows_q, "unit_id": rows_u, "score": rows_s})
    return out if depth is None else cut(out, depth)


@dataclass
class CandidateSystems:
    """Every system of a run, ranking each question's candidate units only (the hard-negative and
    random-negative views). base: the encoded systems (name -> unit Vectors); fusions: name ->
    the base systems it fuses with RRF; external: your runs (only their top-depth ranking is known,
    so they are restricted, not re-scored); doc_context: name -> members of the catalogue's
    document-context systems (retrieval.doc_context), scored over the same candidates when their
    member is a base system."""
    units: pd.DataFrame
    base: Mapping[str, object]
    fusions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    external: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    settings: Mapping[str, object] = field(default_factory=dict)
    rrf_k: int = 60
    depth: int = 100
    seed: int = 0
    doc_context: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        """Every system this scorer ranks, in order: encoded, fused, rescored by document context, then brought-in
        runs."""
        return list(self.base) + list(self.fusions) + list(self._rescored()) + list(self.external)

    def _rescored(self) -> dict[str, Sequence[str]]:
        return {n: m for n, m in self.doc_context.items() if m[0] in self.base}

    def runs(self, questions: pd.DataFrame, candidates: Mapping[str, Sequence[str]],
             order: Mapping[str, pd.DataFrame] | None = None) -> dict[str, pd.DataFrame]:
        """name -> run over the questions, each question's ranking holding its candidates only (order:
        as runs_for)."""
        return self.runs_for(questions, {"": candidates}, order=order)[""]

    def runs_for(self, questions: pd.DataFrame, candidate_sets: Mapping[object, Mapping[str, Sequence[str]]],
                 depth: int | None = None, order: Mapping[str, pd.DataFrame] | None = None
                 ) -> dict[object, dict[str, pd.DataFrame]]:
        """key -> name -> run, one per candidate set given (the questions encoded once). The encoded and
        document-context systems score the questions a block at a time (indexes.BLOCK_CELLS score cells
        at once; the context vectors are found once), so no question x unit matrix is held: 5,000
        questions over 100,000 units would be 2 GB of float32 per system, three of them at once for a
        document-context system. With depth, each run holds each question's canonical top depth only,
        so no run lists every (question, candidate) pair either. order: system -> the exported corpus run
        of these questions (runs/ or runs_validated/); a system named there ranks its exported units in the
        exported order, above every unit it did not export (follow_exported), so a view's tie order is
        the exported runs' and the full-corpus point of any view equals the exported run's figure."""
        if depth is not None and depth < self.depth and self.fusions:
            raise ValueError(f"runs_for: depth {depth} is below the run depth {self.depth} the fused systems "
                             "fuse their parts at")
        if questions.empty:
            return {key: {} for key in candidate_sets}
        qids, unit_ids = list(questions["query_id"]), list(self.units["unit_id"])
        qv = systems.encode_queries(questions, list(self.base), **self.settings)
        block = max(1, retrieve.BLOCK_CELLS // max(1, len(unit_ids)))
        unit_index = pd.Index(unit_ids)
        exported = {n: _exported_positions(order[n], qids, unit_index) for n in (order or {}) if n in self.base
                    or n in self._rescored()}
        # name -> (its scorer, whose query vectors it reads): the encoded systems, then the document-context ones
        scorers = {n: (systems.scorer(v), n) for n, v in self.base.items()}
        scorers.update({name: (doc_context.system_scorer(name, members, self.base, self.units["doc_id"], self.seed),
                               members[0]) for name, members in self._rescored().items()})
        parts: dict[object, dict[str, list]] = {key: {n: [] for n in scorers} for key in candidate_sets}
        with memory.returning_freed_blocks():
            for a in range(0, len(qids), block):
                rows = range(a, min(a + block, len(qids)))
                for n, (score, reads) in scorers.items():
                    scores = score(qv[reads] if len(rows) == len(qids) else qv[reads].take(rows))
                    if n in exported:
                        scores = follow_exported(scores, rows, *exported[n])
                    for key, candidates in candidate_sets.items():
                        parts[key][n].append(restricted_run(scores, qids[rows.start:rows.stop], unit_ids,
                                                            candidates, depth))
        out = {}
        for key, candidates in candidate_sets.items():
            runs = {n: pd.concat(p, ignore_index=True) if len(p) > 1 else p[0] for n, p in parts[key].items()
                    if n in self.base}
            for name, members in self.fusions.items():
                # each part cut at the run depth first, as stages 02 and 06 fuse the runs they export:
                # the full-corpus point of any view is then the exported fused run's own figure
                runs[name] = fusion.fuse("rrf", [cut(runs[p], self.depth) for p in members], rrf_k=self.rrf_k,
                                         depth=self.depth)
            for name, run in self.external.items():
                runs[name] = restrict_ranking(run, candidates, depth)
            for name in self._rescored():
                p = parts[key][name]
                runs[name] = pd.concat(p, ignore_index=True) if len(p) > 1 else p[0]
            out[key] = runs
        return out



