"""Retrieval metrics, exact to trec_eval, plus evidence-complete and sufficiency measures.

Rankings follow the one canonical rule stated in lookalike.eval.ranking (score descending, ties
by unit id descending, as trec_eval). Every measure is registered, with both its spellings, in
lookalike.eval.measures; the per-query function of each family is in COMPUTE below.

Measures (per query; names follow trec_eval / ir_measures, k is a cutoff):
  trec_eval's:  num_ret, num_rel, num_rel_ret, map, gm_map (aggregate only), Rprec, bpref,
                recip_rank, P_k, recall_k, success_k, ndcg, ndcg_cut_k, iprec_at_recall_x.
                ``-l`` (level) decides which graded judgements count as relevant for the binary
                measures; nDCG uses the grades as gains, as trec_eval does.
  exponential gain (gdeval): ndcg_exp, ndcg_exp_cut_k — gain 2^rel - 1, discount log2(rank + 1).
  lookalike's own:
    recall_all_k   1 when every relevant unit of the query is in the top k, else 0 (VL-DocIR's
                   RecallAll@k: evidence-complete retrieval); 0 for a query with no relevant unit.
    ndcg_all_k     ndcg_cut_k when every relevant unit is in the top k, else 0 (NDCGAll@k).
    top1           1 when the unit ranked first is relevant (the screenshot test's number).
    sufficient_k, supporting_only_k, neither_k
                   from three-way labels (grades in lookalike.trec.LABEL_GRADES): 1 when the top k
                   holds a sufficient unit / a supporting unit and no sufficient one / neither.
                   The three add up to 1 for every query and k.
    judged_k       share of the top min(k, num_ret) units that carry any judgement (0 when nothing
                   was retrieved): how much of a ranking the labels can speak for.

Queries: as trec_eval, a query is evaluated when it is in both the qrels and the run. With
complete=True (trec_eval -c) every qrels query is evaluated, a query missing from the run
scoring as an empty ranking, so means are over all qrels queries. Run queries absent from the
qrels are never scored; they are listed (Evaluation.run_only_queries). Queries whose qrels hold
no relevant unit are evaluated (most measures 0, as in trec_eval) and listed too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.eval import measures, ranking
from lookalike.eval.ranking import Qrels, Run, as_qrels, as_run, rank  # noqa: F401 (re-exported)
from lookalike.vocab import LABEL_GRADES

# Names callers import from here (the measure registry lives in lookalike.eval.measures).
TREC_DEFAULT = measures.TREC_DEFAULT
GM_FLOOR = 0.00001  # trec_eval's MIN_GEO_MEAN for gm_map
MeasureError = measures.MeasureError


def parse_measures(specs: Iterable[str]) -> list[str]:
    """Measure names from names in either spelling and trec_eval-style specs, in order, without
    repeats (see lookalike.eval.measures): ``P.5,10`` -> P_5, P_10; ``nDCG@10`` stays nDCG@10."""
    return [str(m) for m in measures.parse(specs)]


# ----------------------------------------------------------------------------- evaluation

@dataclass
class Evaluation:
    """Per-query values of one run, with the bookkeeping trec_eval prints or hides.

    per_query: frame indexed by query_id (sorted), one float64 column per measure.
    """

    per_query: pd.DataFrame
    measures: list[str]
    run_name: str = "run"
    complete: bool = False
    run_only_queries: list[str] = field(default_factory=list)
    missing_from_run: list[str] = field(default_factory=list)
    no_relevant_queries: list[str] = field(default_factory=list)
    empty_reason: str = ""          # why no query was evaluated, when none was
    text: dict = field(default_factory=dict)      # measure -> per-query text (relstring), never averaged

    def mean(self) -> pd.Series:
        """Micro aggregate over the evaluated queries (trec_eval's 'all' line); counts are summed.
        Over no query every mean is NaN, with an EmptyEvaluation warning that says why."""
        if self.per_query.empty:
            warnings.warn(EmptyEvaluation(self.empty_reason or "no query was evaluated; every mean is NaN"),
                          stacklevel=2)
        return aggregate_values(self.per_query, self.measures)

    def by_group(self, groups: Mapping[str, str] | pd.Series, name: str = "group") -> pd.DataFrame:
        """Each measure's aggregate per group of queries (groups: query id -> group), one row per group."""
        return aggregate(self.per_query, groups, self.measures, name=name)


def aggregate_values(per_query: pd.DataFrame, names: Sequence[str]) -> pd.Series:
    """Each measure's aggregate over the queries of per_query, by the measure's own rule: mean,
    sum (counts), geometric mean with trec_eval's floor (gm_map), or the number of queries; a
    column that is no registered measure is averaged."""
    out = {}
    for name in names:
        try:
            how = measures.parse_one(name).aggregation
        except measures.MeasureError:       # a column of the caller's own: averaged
            how = "mean"
        if how == "count":
            out[name] = float(len(per_query))
        elif how == "sum":
            out[name] = float(per_query[name].sum())
        elif how == "gmean":
            # per-query gm_map holds the query's AP; the aggregate is trec_eval's geometric mean
            out[name] = (float(np.exp(np.mean(np.log(np.maximum(per_query[name], GM_FLOOR)))))
                         if len(per_query) else float("nan"))
        else:       # a mean over no query is undefined (NaN, as ir_measures gives), never 0
            out[name] = float(per_query[name].mean()) if len(per_query) else float("nan")
    return pd.Series(out, dtype="float64")


def aggregate(per_query: pd.DataFrame, groups: Mapping[str, str] | pd.Series, measures: Sequence[str],
              name: str = "group") -> pd.DataFrame:
    """Micro (over queries) and macro (over groups, equal weight per group) aggregates.

    Returns a long frame: aggregate (micro | macro | group), group, measure, value, n (queries in the
    group; for macro, the number of groups). Queries without a group are an error.
    """
    g = pd.Series(groups) if not isinstance(groups, pd.Series) else groups
    g = g.reindex(per_query.index)
    if g.isna().any():
        missing = list(per_query.index[g.isna().to_numpy()][:5])
        raise ValueError(f"{name}: no group for queries {missing}{' ...' if g.isna().sum() > 5 else ''}")
    rows = []
    micro = aggregate_values(per_query, measures)
    for m in measures:
        rows.append(("micro", "", m, micro[m], len(per_query)))
    group_means = {}
    for key, part in per_query.groupby(g.to_numpy(), sort=True):
        vals = aggregate_values(part, measures)
        group_means[key] = vals
        for m in measures:
            rows.append(("group", str(key), m, vals[m], len(part)))
    for m in measures:
        rows.append(("macro", "", m, float(np.mean([v[m] for v in group_means.values()])), len(group_means)))
    return pd.DataFrame(rows, columns=["aggregate", name, "measure", "value", "n"])


def evaluate(qrels, run, names: Sequence[str] | None = None, *, level: int = 1, complete: bool = False,
             max_docs: int | None = None, grades: Mapping[str, int] | None = None, num_docs: int = 0,
             judged_only: bool = False) -> Evaluation:
    """Evaluate one run against qrels; returns per-query values (see the module docstring).

    qrels: Qrels, long frame (relevance or three-way label column) or dict. run: Run, long frame or
    dict. level: the smallest grade that counts as relevant for binary measures (trec_eval -l).
    complete: evaluate every qrels query (trec_eval -c). max_docs: use only the top max_docs of
    each ranking (trec_eval -M). grades: label -> grade for the sufficiency measures. num_docs: the
    collection size, read only by utility's fourth coefficient (trec_eval -N). judged_only: remove the
    units without a judgement (no label, or a negative one) from each ranking first, ranks closing up
    (trec_eval -J; ir_measures' judged_only=True does it for one measure). A measure whose value is text
    (relstring) is in ``Evaluation.text``, not in ``per_query``.
    """
    if isinstance(names, str):
        names = [names]
    elif names is not None and (not isinstance(names, Iterable) or isinstance(names, Mapping)):
        raise TypeError(f"names: expected measure names (a list such as ['map', 'ndcg@10'], or one name), "
                        f"got {type(names).__name__}")
    wanted = measures.parse(list(names) if names else TREC_DEFAULT)
    Q = as_qrels(qrels, "qrels", grades=grades)
    R = as_run(run, "run")
    grades = dict(LABEL_GRADES if grades is None else grades)

    if len(Q.query_ids) == len(R.query_ids) and bool(np.array_equal(Q.query_ids, R.query_ids)):
        # the usual case: a run over exactly the judged queries (both sorted): nothing to align
        run_only, missing, eval_q = [], [], Q.query_ids
        q_in_qrels = q_in_run = np.arange(len(eval_q), dtype=np.int64)
    else:
        in_run = pd.Index(R.query_ids, dtype=object)
        qrels_q = pd.Index(Q.query_ids, dtype=object)
        run_only = sorted(set(R.query_ids) - set(Q.query_ids))
        missing = sorted(set(Q.query_ids) - set(R.query_ids))
        eval_q = Q.query_ids if complete else np.asarray(sorted(set(Q.query_ids) & set(R.query_ids)), dtype=object)
        q_in_qrels = qrels_q.get_indexer(eval_q)
        q_in_run = in_run.get_indexer(eval_q)                # -1: empty ranking
    if judged_only:
        # as trec_eval -J: the judged units only, in the same order; a query left with none is still
        # evaluated (an empty ranking), as its ranking was given
        R = _judged_units_only(Q, R)
        q_in_run = pd.Index(R.query_ids, dtype=object).get_indexer(eval_q)
    nq = len(eval_q)

    # Judgements of the evaluated queries, with each one's rank in the run (0: not retrieved).
    lengths_q = np.diff(Q.offsets)[q_in_qrels]
    starts_q = Q.offsets[:-1][q_in_qrels]
    idx = np.repeat(starts_q - np.concatenate([[0], np.cumsum(lengths_q)[:-1]]), lengths_q) + np.arange(lengths_q.sum())
    qi = np.repeat(np.arange(nq, dtype=np.int64), lengths_q)
    rel = Q.relevance[idx]
    run_lengths = np.zeros(nq, dtype=np.int64)
    has_run = q_in_run >= 0
    run_lengths[has_run] = np.diff(R.offsets)[q_in_run[has_run]]
    num_ret = run_lengths if max_docs is None else np.minimum(run_lengths, max_docs)
    rank_of = np.zeros(len(idx), dtype=np.int64)
    if len(idx) and len(R):
        # Match judgements to run entries on (query, unit) keys in the run's code space: the
        # judgements (usually far fewer than run entries) are hashed, the run's keys probe them.
        rq = q_in_run[qi]
        hashed = _judged_ranks_hashed(R, rq, Q.unit_ids[idx]) if R.unit_hashes is not None else None
        if hashed is not None:
            rank_of = hashed
        else:
            ucode = R.vocab_index.get_indexer(pd.Index(Q.unit_ids[idx], dtype=object))
            ok = (ucode >= 0) & (rq >= 0)
            rank_of[np.flatnonzero(ok)] = _judged_ranks(R, rq[ok], ucode[ok])
    retrieved = (rank_of > 0) & (rank_of <= num_ret[qi])
    rank_of = np.where(retrieved, rank_of, 0)

    relevant = rel >= level
    judged = rel >= 0
    num_rel = np.bincount(qi, weights=relevant, minlength=nq)
    rel_ret = relevant & retrieved
    num_rel_ret = np.bincount(qi, weights=rel_ret, minlength=nq)
    score = None
    if any(m.family == "compat" for m in wanted):      # Compat orders the ideal ranking by the run's scores
        score = np.full(len(idx), np.nan)
        at = np.flatnonzero(retrieved)
        score[at] = R.scores[R.offsets[q_in_run[qi[at]]] + rank_of[at] - 1]
    ctx = _Context(qi=qi, rel=rel, rank=rank_of, retrieved=retrieved, relevant=relevant, judged=judged, nq=nq,
                   num_rel=num_rel, num_ret=num_ret.astype(np.float64), num_rel_ret=num_rel_ret, level=level,
                   grades=grades, num_docs=num_docs, score=score)
    index = pd.Index(eval_q, name="query_id", dtype=object)
    own = [m for m in wanted if not m.opt("judged_only")]
    columns = {str(m): ctx.value(m) for m in own}
    if len(own) < len(wanted):          # measures asked for with judged_only=True: the same queries, judged units only
        alone = evaluate(Q, run, [_without_judged_only(m) for m in wanted if m.opt("judged_only")], level=level,
                         complete=complete, max_docs=max_docs, grades=grades, num_docs=num_docs, judged_only=True)
        for m in wanted:
            if m.opt("judged_only"):
                got = alone.text if m.text else alone.per_query
                columns[str(m)] = got[str(_without_judged_only(m))].reindex(index).to_numpy()
    columns = {str(m): columns[str(m)] for m in wanted}
    text = {str(m): pd.Series(columns[str(m)], index=index, dtype=object) for m in wanted if m.text}
    per_query = pd.DataFrame({k: v for k, v in columns.items() if k not in text}, index=index, dtype="float64")
    no_rel = [str(q) for q, n in zip(eval_q, num_rel) if n == 0]
    return Evaluation(per_query=per_query, measures=[k for k in columns if k not in text], run_name=R.name,
                      complete=complete, run_only_queries=run_only, missing_from_run=missing, no_relevant_queries=no_rel,
                      empty_reason=no_queries_reason(Q.query_ids, R.query_ids, complete) if nq == 0 else "",
                      text=text)


def _without_judged_only(m: measures.Measure) -> measures.Measure:
    from dataclasses import replace

    return replace(m, opts=tuple(kv for kv in m.opts if kv[0] != "judged_only"), spelled="")


def _judged_units_only(Q: Qrels, R: Run) -> Run:
    """R with only the units each query's qrels judge (a label of 0 or more), in R's order."""
    frame = R.frame()
    lengths = np.diff(Q.offsets)
    judged = pd.DataFrame({"query_id": np.repeat(Q.query_ids, lengths), "unit_id": Q.unit_ids,
                           "judged": Q.relevance >= 0})
    judged = judged[judged["judged"]]
    keys = pd.MultiIndex.from_frame(judged[["query_id", "unit_id"]])
    keep = pd.MultiIndex.from_frame(frame[["query_id", "unit_id"]]).isin(keys)
    kept = frame.loc[keep, ["query_id", "unit_id", "score"]].reset_index(drop=True)
    return Run(kept, name=R.name)


class EmptyEvaluation(UserWarning):
    """No query was evaluated: every mean is NaN (a mean over nothing), counts are 0."""


def _sample(ids, n: int = 5) -> str:
    ids = [str(x) for x in ids]
    return ", ".join(ids[:n]) + (f" … ({len(ids)} in all)" if len(ids) > n else "") if ids else "none"


def no_queries_reason(qrels_ids, run_ids, complete: bool = False) -> str:
    """Why an evaluation scored no query, with a sample of each side's ids."""
    if not len(qrels_ids):
        return "no query was evaluated: the qrels hold no judgements"
    if complete:
        return "no query was evaluated"
    return (f"no query was evaluated: the qrels and the run share no query id (qrels: {_sample(qrels_ids)}; "
            f"run: {_sample(run_ids)}); every mean is NaN")


DENSE_CELLS = 1 << 22        # cells of one block of the dense (query x unit) rank table: 16 MiB of int32 (cache-sized)
DENSE_BLOCKS = 2000          # more blocks than this (a very large unit vocabulary): hash the keys instead


def _judged_ranks(R: Run, jq: np.ndarray, ju: np.ndarray) -> np.ndarray:
    """The 1-based rank in R of each judgement (run query index jq, unit code ju in R's vocabulary);
    0 when the unit is not in that query's ranking. Blocks of a dense (query × unit) table of
    ranks are filled from the run and read at the judgements — no hashing of the run's entries;
    a vocabulary too large for that falls back to one hash of the judged keys.

    No array as long as the run is made here: a block holds each entry's 1-based place among the
    block's entries (no more than its cells, so int32), and a rank is that place less the query's
    start within the block, computed only at the judgements. (On 10 million entries, a run-long
    rank array cost 0.03-0.8 s, most of it in touching fresh memory.)"""
    n_q, width = len(R.query_ids), max(len(R.vocab), 1)
    rows = max(1, DENSE_CELLS // width)
    out = np.zeros(len(jq), dtype=np.int64)
    if -(-n_q // rows) > DENSE_BLOCKS:
        keys = pd.Index(jq.astype(np.int64) * width + ju)
        hit = keys.get_indexer(R._qcode * np.int64(width) + R.unit_codes)
        pos = np.flatnonzero(hit >= 0)
        out[hit[pos]] = pos - R.offsets[R._qcode[pos]] + 1
        return out
    order = np.argsort(jq, kind="stable")
    jq_sorted = jq[order]
    block = np.zeros((min(rows, n_q), width), dtype=np.int32)
    for a in range(0, n_q, rows):
        b = min(n_q, a + rows)
        lo, hi = int(R.offsets[a]), int(R.offsets[b])
        block[R._qcode[lo:hi] - a, R.unit_codes[lo:hi]] = np.arange(1, hi - lo + 1, dtype=np.int32)
        j0, j1 = np.searchsorted(jq_sorted, [a, b])
        sel = order[j0:j1]
        q = jq[sel]
        at = block[q - a, ju[sel]]                    # 1 + the entry's place in the block, 0: not retrieved
        out[sel] = np.where(at > 0, at - (R.offsets[q] - lo), 0)
        block[R._qcode[lo:hi] - a, R.unit_codes[lo:hi]] = 0
    return out


_MIX = np.uint64(0x9E3779B97F4A7C15)     # 2^64 / golden ratio: spreads a query index over all 64 bits


def _judged_ranks_hashed(R: Run, jq: np.ndarray, units: np.ndarray) -> np.ndarray | None:
    """The 1-based rank in R of each judgement (run query index jq, -1 for a query the run lacks;
    unit id), 0 when not retrieved — for a run from dicts, whose unit ids were never coded.

    Each (query, unit) is keyed by the query index mixed into the unit id's Python hash; the
    judgements' keys are hashed once and the run's probe them, and every hit is confirmed by
    comparing the unit ids themselves, so two ids that share a hash can never be matched. None
    (the caller codes the run instead) when two judgements share a key — the same unit judged twice
    for a query, or a collision, neither of which this join may guess at."""
    out = np.zeros(len(jq), dtype=np.int64)
    jh = np.fromiter(map(ranking.unit_hash, units), dtype=np.int64, count=len(units)).view(np.uint64)
    with np.errstate(over="ignore"):
        keys = pd.Index(jh ^ (jq.astype(np.uint64) * _MIX))
        if not keys.is_unique:
            return None
        hit = keys.get_indexer(R.unit_hashes.view(np.uint64) ^ (R._qcode.astype(np.uint64) * _MIX))
    at = np.flatnonzero(hit >= 0)                 # places in the dicts' order
    j = hit[at]
    same = R.arrival_ids_equal(at, units[j]) & (jq[j] >= 0)
    at, j = at[same], j[same]
    pos = R.canonical_place(at)
    out[j] = pos - R.offsets[R._qcode[pos]] + 1
    return out


RBP_P = 0.9      # trec_eval's default persistence for rbp


def _log2_discount(ranks: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(ranks.astype(np.float64) + 1.0)


@dataclass
class _Context:
    qi: np.ndarray
    rel: np.ndarray
    rank: np.ndarray
    retrieved: np.ndarray
    relevant: np.ndarray
    judged: np.ndarray
    nq: int
    num_rel: np.ndarray
    num_ret: np.ndarray
    num_rel_ret: np.ndarray
    level: int
    grades: dict
    num_docs: int = 0          # the collection size, for utility's fourth coefficient (trec_eval -N)
    score: np.ndarray | None = None     # each judgement's score in the run (NaN: not retrieved), for Compat
    _codes: list | None = None

    def _replace(self, **changes) -> _Context:
        fields = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "_codes"}
        return _Context(**{**fields, **changes})

    def _count(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.qi, weights=mask, minlength=self.nq)

    def _safe_div(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        out = np.zeros(self.nq)
        np.divide(num, den, out=out, where=den > 0)
        return out

    def _top(self, k: int) -> np.ndarray:
        return self.retrieved & (self.rank <= k)

    def value(self, m: measures.Measure) -> np.ndarray:
        """Per-query values of one measure; a measure with a level of its own (P(rel=2)@5) is
        computed on the judgements at that level; one with a minimum grade (ranx's -l2 on a graded
        measure) sees the grades below it as 0."""
        ctx = self if m.rel is None or m.rel == self.level else self.at_level(m.rel)
        floor = m.opt("min_rel")
        if floor is not None and m.family != "rbp":
            ctx = ctx.at_level(max(ctx.level, floor))._replace(rel=np.where(ctx.rel >= floor, ctx.rel, np.minimum(ctx.rel, 0)))
        return COMPUTE[m.family](ctx, m)

    def at_level(self, level: int) -> _Context:
        relevant = self.rel >= level
        return self._replace(relevant=relevant, num_rel=np.bincount(self.qi, weights=relevant, minlength=self.nq),
                             num_rel_ret=np.bincount(self.qi, weights=relevant & self.retrieved, minlength=self.nq),
                             level=level)

    # ---------------------------------------------------------------- rank by rank (trec_eval's loops)

    def _rank_codes(self) -> list[np.ndarray]:
        """Per query, the label at each rank 1..num_ret as trec_eval's res_rels holds it: the grade
        when judged, -2 when the qrels hold a negative label (pooled, unjudged), -1 when the unit is
        not in the qrels at all."""
        if self._codes is None:
            out = [np.full(int(n), -1, dtype=np.int64) for n in self.num_ret]
            sel = np.flatnonzero(self.retrieved)
            for q, r, g in zip(self.qi[sel], self.rank[sel], self.rel[sel]):
                out[q][r - 1] = g if g >= 0 else -2
            self._codes = out
        return self._codes

    def _gain_tables(self, params: tuple) -> list[tuple[dict, np.ndarray]]:
        """Per query, trec_eval's gains (setup_gains): level -> gain (each level present in the query's
        judgements gains its own value unless the level=gain parameters say otherwise), and the ideal
        ranking's positive gains in descending order."""
        given = dict(params)
        judged = self.rel >= 0
        # one pass over the judgements: counts per (query, level)
        counts: list[dict] = [dict() for _ in range(self.nq)]
        for q, g in zip(self.qi[judged], self.rel[judged]):
            counts[q][int(g)] = counts[q].get(int(g), 0) + 1
        tables = []
        for q in range(self.nq):
            top = max(counts[q]) if counts[q] else -1
            table = {lv: float(given.get(lv, lv)) for lv in range(top + 1)}
            table.update({lv: float(g) for lv, g in given.items()})
            ideal = sorted((table[lv] for lv, n in counts[q].items() for _ in range(n) if table[lv] > 0), reverse=True)
            tables.append((table, np.asarray(ideal, dtype=np.float64)))
        return tables

    def _per_query(self, fn) -> np.ndarray:
        return np.array([fn(q) for q in range(self.nq)], dtype=np.float64)

    def _gains_of(self, table: dict, codes: np.ndarray) -> np.ndarray:
        return np.array([table.get(int(c), 0.0) for c in codes], dtype=np.float64)

    def _G(self, params: tuple) -> np.ndarray:
        """trec_eval's G: each unit's gain over log2(2 + ideal cost so far - gain so far), the cost
        growing by the ideal gain at each rank (at least 1), over the ideal ranking's total gain."""
        codes, tables = self._rank_codes(), self._gain_tables(params)

        def one(q: int) -> float:
            table, ideal = tables[q]
            if not len(ideal):
                return 0.0
            gains = self._gains_of(table, codes[q])
            at = np.zeros(len(gains))
            at[:min(len(gains), len(ideal))] = ideal[:len(gains)]
            cost = np.cumsum(np.maximum(at, 1.0))
            got = np.cumsum(gains)
            hit = gains != 0
            return float(np.sum(gains[hit] / np.log2(2 + cost[hit] - got[hit])) / ideal.sum())
        return self._per_query(one)

    def _ndcg_rel(self, params: tuple) -> np.ndarray:
        """trec_eval's ndcg_rel: nDCG at each relevant unit retrieved (the ideal DCG to that rank),
        and the DCG of the whole ranking for each relevant unit not retrieved, averaged over them."""
        codes, tables = self._rank_codes(), self._gain_tables(params)

        def one(q: int) -> float:
            table, ideal = tables[q]
            gains = self._gains_of(table, codes[q])
            n = len(gains)
            disc = 1.0 / np.log2(np.arange(2, max(n, len(ideal)) + 2, dtype=np.float64))
            dcg = np.cumsum(gains * disc[:n])
            idcg = np.cumsum(ideal * disc[:len(ideal)])
            ideal_at = idcg[np.minimum(np.arange(n), len(ideal) - 1)] if len(ideal) else np.zeros(n)
            pos = gains > 0
            with np.errstate(divide="ignore", invalid="ignore"):
                total = float(np.sum(dcg[pos] / ideal_at[pos]))
                # relevant units the ranking never reached score the whole ranking's DCG each; a query with
                # nothing relevant has none (trec_eval adds nothing, and an empty ranking must not divide)
                missing = len(ideal) - int(pos.sum())
                if missing > 0 and idcg[-1] > 0:
                    total += missing * (float(dcg[-1]) if n else 0.0) / float(idcg[-1])
            return total / len(ideal) if total > 0 else 0.0
        return self._per_query(one)

    def _rndcg(self, params: tuple) -> np.ndarray:
        """trec_eval's Rndcg: nDCG averaged at each rank where the ideal gain changes (the R levels),
        and at the end of the ranking when it ends first."""
        codes, tables = self._rank_codes(), self._gain_tables(params)

        def one(q: int) -> float:
            if self.num_rel[q] == 0:
                return 0.0
            table, ideal = tables[q]
            gains = self._gains_of(table, codes[q])
            n, m = len(gains), len(ideal)
            top = max(table.values()) if table else 0.0
            result = ideal_dcg = total = 0.0
            changes, old, current, i = 0, top, top, 0
            while i < n and current > 0:
                current = ideal[i] if i < m else 0.0
                if old != current:
                    if ideal_dcg > 0:
                        total, changes = total + result / ideal_dcg, changes + 1
                    old = current
                if gains[i] != 0:
                    result += gains[i] / np.log2(i + 2)
                if current > 0:
                    ideal_dcg += current / np.log2(i + 2)
                i += 1
            if i < n:
                result += float(np.sum(gains[i:] / np.log2(np.arange(i, n) + 2.0)))
                if ideal_dcg > 0:
                    total, changes = total + result / ideal_dcg, changes + 1
            while current > 0:
                current = ideal[i] if i < m else 0.0
                if old != current:
                    if ideal_dcg > 0:
                        total, changes = total + result / ideal_dcg, changes + 1
                    old = current
                if current > 0:
                    ideal_dcg += current / np.log2(i + 2)
                i += 1
            return total / changes if changes else float("nan")
        return self._per_query(one)

    def _infap(self) -> np.ndarray:
        """trec_eval's infAP: at each relevant unit retrieved at 0-based rank j, 1 / (j + 1) plus the
        share of the j units above that are in the pool, times the precision among the judged ones
        above (smoothed by 1e-5); units not in the qrels are skipped, -1 labels count as pooled but
        unjudged; summed over the query's relevant units."""
        mask = self.retrieved
        q, r = self.qi[mask], self.rank[mask]
        g = self.rel[mask]
        order = np.lexsort((r, q))
        q, r, g = q[order], r[order], g[order]
        is_unj, is_rel = g < 0, g >= self.level
        is_non = ~is_unj & ~is_rel
        starts = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]])) if len(q) else np.zeros(0, dtype=np.int64)
        sizes = np.diff(np.concatenate([starts, [len(q)]]))

        def above(flag: np.ndarray) -> np.ndarray:
            c = np.cumsum(flag) - flag
            return c - np.repeat(c[starts], sizes) if len(c) else c
        rel_so_far, non, unj = above(is_rel) + 1, above(is_non), above(is_unj)
        j = (r - 1).astype(np.float64)
        eps = 1e-5
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(j == 0, 1.0, 1.0 / (j + 1) + (j / (j + 1)) * ((rel_so_far - 1 + non + unj) / j)
                            * ((rel_so_far - 1 + eps) / (rel_so_far - 1 + non + 2 * eps)))
        total = np.bincount(q[is_rel], weights=term[is_rel], minlength=self.nq)
        return self._safe_div(total, self.num_rel)

    def _bin_g(self) -> np.ndarray:
        """trec_eval's binG: each relevant unit retrieved at rank r (the n-th relevant one) adds
        1 / log2(2 + r - n), summed over the query's relevant units."""
        q, r = self._sorted_hits(self.relevant & self.retrieved)
        n = self._ordinal(q)
        return self._safe_div(np.bincount(q, weights=1.0 / np.log2(2.0 + r - n), minlength=self.nq), self.num_rel)

    def _err(self, k: int) -> np.ndarray:
        """gdeval's ERR@k: the n-th unit stops a reader with R = (2^grade - 1) / 2^4 (grade 4 is gdeval's
        top), ERR = sum over ranks of R / rank times the chance no unit above stopped them."""
        mask = self.retrieved & (self.rank <= k) & (self.rel != 0) & self.judged
        q, r = self.qi[mask], self.rank[mask]
        stop = (np.exp2(self.rel[mask].astype(np.float64)) - 1.0) / 16.0
        order = np.lexsort((r, q))
        q, r, stop = q[order], r[order], stop[order]
        if not len(q):
            return np.zeros(self.nq)
        # the chance the reader reached each unit: the product of (1 - R) over the units above it
        reached = pd.Series(1.0 - stop).groupby(q).cumprod().groupby(q).shift(1, fill_value=1.0).to_numpy()
        return np.bincount(q, weights=stop * reached / r, minlength=self.nq)

    def _dcg(self, k: int | None, exponential: bool = False) -> np.ndarray:
        """ranx's DCG: grade (Jarvelin) or 2^grade - 1 (Burges) over log2(rank + 1), summed over the
        judged units with a positive grade (rank <= k)."""
        hit = self.retrieved & (self.rel > 0)
        if k is not None:
            hit &= self.rank <= k
        raw = self.rel[hit].astype(np.float64)
        gain = np.exp2(raw) - 1.0 if exponential else raw
        return np.bincount(self.qi[hit], weights=gain * _log2_discount(self.rank[hit]), minlength=self.nq)

    def _compat(self, p: float, normalize: bool) -> np.ndarray:
        """Compatibility (Clarke, Vtyurina & Smucker 2021, as ir_measures computes it): rank-biased
        overlap, persistence p, between the ranking and the ideal one (relevant units by grade, then by
        the run's score, then as the qrels list them), to the deeper of the two; over the ideal's own
        overlap with itself when normalize."""
        pos = self.rel > 0
        out = np.zeros(self.nq)
        score = self.score if self.score is not None else np.zeros(len(self.rel))
        for q in range(self.nq):
            mine = np.flatnonzero(pos & (self.qi == q))
            depth = int(max(self.num_ret[q], len(mine)))
            if depth == 0:
                continue
            s = np.where(np.isnan(score[mine]), 0.0, score[mine])
            ideal = mine[np.lexsort((np.arange(len(mine)), -s, -self.rel[mine]))]
            ranks = np.where(self.retrieved[ideal], self.rank[ideal], np.iinfo(np.int64).max)
            both = np.maximum(np.arange(len(ideal)), ranks - 1)          # depth at which each is in both prefixes
            both = both[both < depth]
            weights = p ** np.arange(depth)
            inter = np.cumsum(np.bincount(both, minlength=depth))
            rbo = float(np.sum(weights * inter / np.arange(1, depth + 1)) / weights.sum())
            if normalize:
                best_inter = np.minimum(np.arange(1, depth + 1), len(ideal))
                best = float(np.sum(weights * best_inter / np.arange(1, depth + 1)) / weights.sum())
                rbo = rbo / best if best > 0 else rbo
            out[q] = rbo
        return out

    def _recip_rank(self) -> np.ndarray:
        best = np.full(self.nq, np.inf)
        m = self.relevant & self.retrieved
        np.minimum.at(best, self.qi[m], self.rank[m])
        return np.where(np.isfinite(best), 1.0 / best, 0.0)

    def _rbp(self, mask: np.ndarray, graded: bool = False, p: float = RBP_P) -> np.ndarray:
        """Rank-biased precision's weight of the masked units: (1 - p) p^(rank - 1); graded: times the
        unit's grade over its query's highest grade (negative grades count 0), as trec_eval's rbp does
        whatever the relevance level."""
        weights = np.where(mask, (1 - p) * p ** (self.rank.astype(np.float64) - 1), 0.0)
        if graded:
            top = np.zeros(self.nq)
            np.maximum.at(top, self.qi, self.rel.astype(np.float64))
            gain = np.maximum(self.rel, 0) / np.where(top[self.qi] > 0, top[self.qi], 1.0)
            weights = weights * gain
        return np.bincount(self.qi, weights=weights, minlength=self.nq)

    def _rbp_dialect(self, m: measures.Measure) -> np.ndarray:
        """rbp in each library's meaning: trec_eval's (p 0.9, grade over the query's top grade),
        ir_measures' RBP (p 0.8, binary at the level), ranx's rbp.p (the raw grade of units at or
        above its level); a cutoff keeps the top k only."""
        p, gain = m.opt("p", RBP_P), m.opt("gain", "top")
        mask = self.retrieved if m.k is None else self._top(m.k)
        if gain == "binary":
            return self._rbp(mask & self.relevant, p=p)
        if gain == "raw":
            floor = m.opt("min_rel", 1)
            raw = np.where(self.rel >= floor, self.rel, 0).astype(np.float64)
            weights = np.where(mask, (1 - p) * p ** (self.rank.astype(np.float64) - 1), 0.0) * raw
            return np.bincount(self.qi, weights=weights, minlength=self.nq)
        return self._rbp(mask, graded=True, p=p)

    def _rprec_mult(self, x: float) -> np.ndarray:
        # trec_eval m_Rprec_mult.c: precision at the cutoff x * R rounded up (its test outputs say up, not
        # to nearest), over that cutoff; the 1e-9 keeps an exact product such as 0.2 * 80 from going to 17
        cut = np.ceil(x * self.num_rel - 1e-9)
        hits = self._count(self.relevant & self.retrieved & (self.rank <= cut[self.qi]))
        return self._safe_div(hits, cut)

    def _rprec(self) -> np.ndarray:
        in_r = self.relevant & self.retrieved & (self.rank <= self.num_rel[self.qi])
        return self._safe_div(self._count(in_r), self.num_rel)

    def _three_way(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        suff_grade, supp_grade = self.grades["sufficient"], self.grades["supporting"]
        top = self._top(k)
        has_suff = self._count(top & (self.rel >= suff_grade)) > 0
        has_supp = self._count(top & (self.rel >= supp_grade) & (self.rel < suff_grade)) > 0
        return has_suff, has_supp

    def _all_in_top(self, k: int) -> np.ndarray:
        return (self.num_rel > 0) & (self._count(self.relevant & self._top(k)) == self.num_rel)

    def _sorted_hits(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Query index and rank of the masked judgements, ordered by (query, rank)."""
        q, r = self.qi[mask], self.rank[mask]
        order = np.lexsort((r, q))
        return q[order], r[order]

    def _ordinal(self, q: np.ndarray) -> np.ndarray:
        """1-based position of each entry within its query (entries grouped by query)."""
        if len(q) == 0:
            return np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]]))
        first = np.repeat(starts, np.diff(np.concatenate([starts, [len(q)]])))
        return np.arange(len(q)) - first + 1

    def _map(self, k: int | None = None) -> np.ndarray:
        """Average precision (trec_eval map; with k, map_cut: only the relevant units in the top k add
        their precision, and the sum is still over all relevant units)."""
        q, r = self._sorted_hits(self.relevant & (self.retrieved if k is None else self._top(k)))
        prec = self._ordinal(q) / r
        return self._safe_div(np.bincount(q, weights=prec, minlength=self.nq), self.num_rel)

    def _bpref(self) -> np.ndarray:
        # trec_eval m_bpref.c: for each judged relevant retrieved unit, 1 - min(nonrel above, R) /
        # min(N, R), where N counts the judged non-relevant units of the query; summed, over R.
        mask = self.judged & self.retrieved
        q, r = self.qi[mask], self.rank[mask]
        rel = self.rel[mask]
        order = np.lexsort((r, q))
        q, rel = q[order], rel[order]
        nonrel = (rel < self.level).astype(np.int64)
        csum = np.cumsum(nonrel)
        starts = np.flatnonzero(np.concatenate([[True], q[1:] != q[:-1]])) if len(q) else np.zeros(0, dtype=np.int64)
        base = np.repeat(csum[starts] - nonrel[starts], np.diff(np.concatenate([starts, [len(q)]]))) if len(q) else csum
        above = csum - base - nonrel
        is_rel = nonrel == 0
        num_nonrel = np.bincount(self.qi, weights=self.judged & ~self.relevant, minlength=self.nq)
        R = self.num_rel[q[is_rel]]
        N = num_nonrel[q[is_rel]]
        a = above[is_rel].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            term = np.where(a > 0, 1.0 - np.minimum(a, R) / np.minimum(N, R), 1.0)
        return self._safe_div(np.bincount(q[is_rel], weights=term, minlength=self.nq), self.num_rel)

    def _iprec(self, x: float) -> np.ndarray:
        # trec_eval m_iprec_at_recall.c: the cutoff is round(x * R) relevant units; the value is the
        # best precision at or after the cutoff-th relevant retrieved unit (0 past num_rel_ret).
        q, r = self._sorted_hits(self.relevant & self.retrieved)
        ordinal = self._ordinal(q)
        prec = ordinal / r
        # suffix maximum of precision within each query
        best = pd.Series(prec[::-1]).groupby(q[::-1]).cummax().to_numpy()[::-1] if len(q) else prec
        cut = np.floor(x * self.num_rel + 0.5).astype(np.int64)
        out = np.zeros(self.nq)
        # value for cut >= 1: best at the cut-th relevant retrieved unit, when it exists
        hit = cut[q] == ordinal
        out[q[hit]] = best[hit]
        # cut == 0: best over all relevant retrieved units (the first one's suffix maximum)
        zero = (cut == 0) & (self.num_rel_ret > 0)
        first = ordinal == 1
        firsts = np.zeros(self.nq)
        firsts[q[first]] = best[first]
        out[zero] = firsts[zero]
        return out

    def _utility(self, p: tuple) -> np.ndarray:
        """trec_eval's utility: p1 x relevant retrieved + p2 x non-relevant retrieved + p3 x relevant
        not retrieved + p4 x non-relevant not retrieved, the last over the collection size (trec_eval
        -N, num_docs; 0 unless given, as trec_eval)."""
        rel_ret, ret, rel = self.num_rel_ret, self.num_ret, self.num_rel
        return (p[0] * rel_ret + p[1] * (ret - rel_ret) + p[2] * (rel - rel_ret)
                + p[3] * (self.num_docs + rel_ret - ret - rel))

    def _ndcg(self, k: int | None, exponential: bool, gains: dict | None = None) -> np.ndarray:
        """nDCG (cut at k), gains the grades (2^grade - 1 when exponential), or trec_eval's gain map
        (level -> gain; a level not named keeps its grade as gain; gains may be 0 or negative, and
        level 0 may be given one)."""
        if gains:
            levels = np.unique(self.rel[self.judged])
            table = {int(lv): float(gains.get(int(lv), lv)) for lv in levels}
            gain = np.zeros(len(self.rel))
            for lv, g in table.items():
                gain[self.rel == lv] = g
            gain[~self.judged] = 0.0
            gain_of_unit = gain
        else:
            raw = self.rel.astype(np.float64)
            gain_of_unit = np.where(self.rel > 0, np.exp2(raw) - 1.0 if exponential else raw, 0.0)
        hit = self.retrieved & (gain_of_unit != 0)
        if k is not None:
            hit &= self.rank <= k
        dcg = np.bincount(self.qi[hit], weights=gain_of_unit[hit] * _log2_discount(self.rank[hit]),
                          minlength=self.nq)
        # ideal: the query's positive gains in descending order, at ranks 1, 2, ...
        pos = gain_of_unit > 0
        q, g = self.qi[pos], gain_of_unit[pos]
        order = np.lexsort((-g, q))
        q, g = q[order], g[order]
        ideal_rank = self._ordinal(q)
        keep = ideal_rank <= k if k is not None else np.ones(len(q), dtype=bool)
        idcg = np.bincount(q[keep], weights=g[keep] * _log2_discount(ideal_rank[keep]), minlength=self.nq)
        return self._safe_div(dcg, idcg)


# One per-query function per measure family (lookalike.eval.measures names them all).
COMPUTE = {
    "num_q": lambda c, m: np.ones(c.nq),
    "num_ret": lambda c, m: c.num_ret,
    "num_rel": lambda c, m: c.num_rel,
    "num_rel_ret": lambda c, m: c.num_rel_ret,
    "map": lambda c, m: c._map(),
    "gm_map": lambda c, m: c._map(),          # per query the AP; aggregate_values takes the geometric mean
    "Rprec": lambda c, m: c._rprec(),
    "bpref": lambda c, m: c._bpref(),
    "recip_rank": lambda c, m: c._recip_rank(),
    "top1": lambda c, m: c._count(c.relevant & c._top(1)),
    "ndcg": lambda c, m: c._ndcg(None, exponential=False, gains=dict(m.params) if m.params else None),
    "ndcg_exp": lambda c, m: c._ndcg(None, exponential=True),
    "iprec_at_recall": lambda c, m: c._iprec(m.x),
    "map_cut": lambda c, m: c._map(m.k),
    "Rprec_mult": lambda c, m: c._rprec_mult(m.x),
    "rbp": lambda c, m: c._rbp_dialect(m),
    # what rbp could still gain: the weight of the unjudged units retrieved and of the ranks past the ranking
    # (all the weight but the judged units'); trec_eval gives it only when an unjudged unit was retrieved,
    # else 0 (a fully judged ranking, or an empty one)
    "rbp_resid": lambda c, m: np.where(c.num_ret > c._count(c.judged & c.retrieved),
                                       1.0 - c._rbp(c.judged & c.retrieved, p=m.opt("p", RBP_P)), 0.0),
    # 11pt_avg: mean interpolated precision at recall 0, 0.1, ..., 1, or at the points given
    "11pt_avg": lambda c, m: (sum(c._iprec(x) for x in m.params) / len(m.params) if m.params
                              else sum(c._iprec(x / 10) for x in range(11)) / 11),
    "utility": lambda c, m: c._utility(m.params or (1.0, -1.0, 0.0, 0.0)),
    "unj": lambda c, m: (np.minimum(c.num_ret, m.k) - c._count(c.judged & c._top(m.k))) / m.k,
    "relative_P": lambda c, m: c._safe_div(c._count(c.relevant & c._top(m.k)), np.minimum(c.num_rel, m.k)),
    "gm_bpref": lambda c, m: c._bpref(),     # per query the bpref; aggregate_values takes the geometric mean
    "num_nonrel_judged_ret": lambda c, m: c._count(c.judged & ~c.relevant & c.retrieved),
    "set_P": lambda c, m: c._safe_div(c.num_rel_ret, c.num_ret),
    "set_recall": lambda c, m: c._safe_div(c.num_rel_ret, c.num_rel),
    # trec_eval's set_F.x: (x + 1) P R / (x P + R), x the weight of recall (1: the harmonic mean); ir_measures'
    # SetF(beta=x) passes its beta to trec_eval as this x
    "set_F": lambda c, m: (lambda x, P, R: c._safe_div((x + 1) * P * R, x * P + R))(
        m.opt("beta", 1.0), c._safe_div(c.num_rel_ret, c.num_ret), c._safe_div(c.num_rel_ret, c.num_rel)),
    "set_map": lambda c, m: c._safe_div(c.num_rel_ret, c.num_ret) * c._safe_div(c.num_rel_ret, c.num_rel),
    "set_relative_P": lambda c, m: c._safe_div(c.num_rel_ret, np.minimum(c.num_ret, c.num_rel)),
    "P": lambda c, m: c._count(c.relevant & c._top(m.k)) / m.k,
    "recall": lambda c, m: c._safe_div(c._count(c.relevant & c._top(m.k)), c.num_rel),
    "success": lambda c, m: (c._count(c.relevant & c._top(m.k)) > 0).astype(np.float64),
    "ndcg_cut": lambda c, m: c._ndcg(m.k, exponential=False),
    "ndcg_exp_cut": lambda c, m: c._ndcg(m.k, exponential=True),
    "recall_all": lambda c, m: c._all_in_top(m.k).astype(np.float64),
    "ndcg_all": lambda c, m: np.where(c._all_in_top(m.k), c._ndcg(m.k, exponential=False), 0.0),
    "sufficient": lambda c, m: c._three_way(m.k)[0].astype(np.float64),
    "supporting_only": lambda c, m: (lambda s, p: (~s & p).astype(np.float64))(*c._three_way(m.k)),
    "neither": lambda c, m: (lambda s, p: (~s & ~p).astype(np.float64))(*c._three_way(m.k)),
    # judged@k: judged units in the top min(k, num_ret); 0 when nothing was retrieved. trec_eval's rule (judged_k):
    # a -1 label is not a judgement; ir_measures' (Judged@k): any unit in the qrels is judged, -1 included
    "judged": lambda c, m: c._safe_div(c._count((np.ones_like(c.judged) if m.opt("rule") == "in-qrels" else c.judged)
                                                & (c.retrieved if m.k is None else c._top(m.k))),
                                       c.num_ret if m.k is None else np.minimum(c.num_ret, m.k)),
    "infAP": lambda c, m: c._infap(),
    "binG": lambda c, m: c._bin_g(),
    "G": lambda c, m: c._G(m.params),
    "ndcg_rel": lambda c, m: c._ndcg_rel(m.params),
    "Rndcg": lambda c, m: c._rndcg(m.params),
    "relstring": lambda c, m: relstrings(c._rank_codes(), m.k or 10),
    "recip_rank_cut": lambda c, m: np.where(c._recip_rank() >= 1.0 / m.k, c._recip_rank(), 0.0),
    "err_cut": lambda c, m: c._err(m.k),
    "hits": lambda c, m: c._count(c.relevant & c._top(m.k)),
    "dcg": lambda c, m: c._dcg(None),
    "dcg_cut": lambda c, m: c._dcg(m.k),
    "dcg_exp_cut": lambda c, m: c._dcg(m.k, exponential=True),
    # ranx's F1: P@k (over k, or over the ranking's length without k) and R@k
    "f1": lambda c, m: (lambda hits: (lambda P, R: c._safe_div(2 * P * R, P + R))(
        hits / m.k if m.k else c._safe_div(hits, c.num_ret), c._safe_div(hits, c.num_rel)))(
        c._count(c.relevant & (c._top(m.k) if m.k else c.retrieved))),
    "compat": lambda c, m: c._compat(m.opt("p", 0.95), m.opt("normalize", True)),
}


def relstrings(codes: list[np.ndarray], n: int) -> np.ndarray:
    """trec_eval's relstring: the labels of the top n units as text, quoted: a digit, '>' above 9,
    '-' for a unit not in the qrels, '.' for a negative (pooled but unjudged) label."""
    def char(c: int) -> str:
        return ">" if c > 9 else str(c) if c >= 0 else "-" if c == -1 else "."
    return np.array(["'" + "".join(char(int(c)) for c in row[:n]) + "'" for row in codes], dtype=object)
assert set(COMPUTE) == set(measures.FAMILIES), "every registered measure family needs its function"


def evaluate_many(qrels, runs: Mapping[str, object], measures: Sequence[str] | None = None, **kwargs) -> pd.DataFrame:
    """Per-query values of several runs on the same qrels: long frame system, query_id, measure, value."""
    Q = qrels if isinstance(qrels, Qrels) else Qrels(qrels, grades=kwargs.get("grades"))
    frames = []
    for name, run in runs.items():
        ev = evaluate(Q, run, measures, **kwargs)
        long = ev.per_query[ev.measures].reset_index().melt(
            id_vars="query_id", var_name="measure", value_name="value")
        long.insert(0, "system", name)
        frames.append(long)
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["system", "measure", "query_id"], kind="mergesort").reset_index(drop=True)


def format_value(measure: str, value: float) -> str:
    """trec_eval's printing: counts as integers, everything else with 4 decimals."""
    return measures.parse_one(measure).format(value)
