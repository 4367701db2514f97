"""Retrieval metrics, exact to trec_eval, plus evidence-complete and sufficiency measures.

Canonical ranking (the one rule every ranking in lookalike follows): within a query, units are
ordered by score descending, ties broken by unit id descending in strcmp (byte / code point)
order; any rank column of the input is ignored. This is trec_eval's rule (form_res_rels.c,
comp_sim_docno), so a tie never depends on dict, heap or faiss order. ``rank`` and ``Run``
implement it; nothing else sorts rankings.

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

import math
import re
from dataclasses import dataclass, field
from itertools import chain
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike import trec

CUTOFF_MEASURES = ("P", "recall", "success", "ndcg_cut", "ndcg_exp_cut", "recall_all", "ndcg_all",
                   "sufficient", "supporting_only", "neither", "judged")
PLAIN_MEASURES = ("num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                  "ndcg", "ndcg_exp", "top1")
SUM_MEASURES = ("num_ret", "num_rel", "num_rel_ret")          # aggregated by sum, as trec_eval does
INTEGER_MEASURES = ("num_q", "num_ret", "num_rel", "num_rel_ret")
TREC_DEFAULT = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
                *[f"iprec_at_recall_{x / 10:.2f}" for x in range(11)],
                "P_5", "P_10", "P_15", "P_20", "P_30", "P_100", "P_200", "P_500", "P_1000"]
GM_FLOOR = 0.00001  # trec_eval's MIN_GEO_MEAN for gm_map
_MEASURE_RE = re.compile(r"^(?P<base>[A-Za-z_]+?)_(?P<k>\d+)$")
_IPREC_RE = re.compile(r"^iprec_at_recall_(?P<x>\d*\.?\d+)$")


class MeasureError(ValueError):
    """An unknown measure name or malformed cutoff."""


def parse_measures(specs: Iterable[str]) -> list[str]:
    """Measure names from trec_eval-style specs, in order, without repeats.

    Accepts our names (``P_5``, ``ndcg_cut_10``, ``recall_all_5``) and trec_eval's parameter
    forms (``P.5,10`` -> P_5, P_10; ``ndcg_cut.5,10``; ``success.1,5``; ``iprec_at_recall.0,.5``).
    ``all_trec`` / ``official`` expand to trec_eval's default set.
    """
    out: list[str] = []
    for spec in specs:
        for name in _expand(spec.strip()):
            _check_measure(name)
            if name not in out:
                out.append(name)
    return out


def _expand(spec: str) -> list[str]:
    if spec in ("official", "all_trec", "trec"):
        return list(TREC_DEFAULT)
    if "." in spec and not _IPREC_RE.match(spec):
        base, _, params = spec.partition(".")
        names = []
        for p in params.split(","):
            p = p.strip()
            if not p:
                continue
            if base == "iprec_at_recall":
                names.append(f"iprec_at_recall_{float(p):.2f}")
            else:
                try:
                    k = float(p)
                except ValueError:
                    raise MeasureError(f"measure {spec!r}: cutoff {p!r} is not a number") from None
                if k <= 0:
                    raise MeasureError(f"measure {spec!r}: cutoffs must be positive")
                names.append(f"{base}_{int(k)}")   # trec_eval truncates fractional cutoffs (23.4 -> 23)
        return names
    return [spec]


def _check_measure(name: str) -> None:
    if name in PLAIN_MEASURES or _IPREC_RE.match(name):
        return
    m = _MEASURE_RE.match(name)
    if m and m.group("base") in CUTOFF_MEASURES and int(m.group("k")) > 0:
        return
    known = ", ".join([*PLAIN_MEASURES, *(f"{b}_k" for b in CUTOFF_MEASURES), "iprec_at_recall_x"])
    raise MeasureError(f"unknown measure {name!r} (known: {known})")


# ----------------------------------------------------------------------------- prepared inputs

def _factorize_sorted(values) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the sorted unique values (code point order == strcmp order on UTF-8).

    Works on a plain object ndarray: pandas 3 would otherwise convert the strings to Arrow and back.
    """
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), sort=True)
    return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object)


class Run:
    """A run held in canonical order, ready to be evaluated many times.

    Built from a long frame (query_id, unit_id, score), a dict run[qid][uid] -> score, or a
    TREC run file (``Run.read``). Attributes: query_ids (sorted), offsets (query i's units are
    [offsets[i], offsets[i+1])), unit_ids and scores in canonical order, name.
    """

    def __init__(self, run, name: str = "run", what: str = "run"):
        self.name = name
        if isinstance(run, Run):
            self.__dict__.update(run.__dict__)
            return
        if isinstance(run, Mapping):
            query_ids, lengths, units, scores = _flatten_nested(run)
            qcode = np.repeat(np.arange(len(query_ids), dtype=np.int64), lengths)
            duplicates_possible = False
        else:
            frame = trec.run_frame(run, what) if not _is_clean_run_frame(run) else run
            qcode, query_ids = _factorize_sorted(frame["query_id"].to_numpy())
            units = frame["unit_id"].to_numpy(dtype=object)
            scores = frame["score"].to_numpy(dtype=np.float64)
            duplicates_possible = True
        if not np.isfinite(scores).all():
            i = int(np.argmin(np.isfinite(scores)))
            raise trec.TrecFormatError(f"{what}: query {query_ids[qcode[i]]!r} unit {units[i]!r} has a "
                                       f"non-finite score {float(scores[i])!r}")
        # Units coded in sorted (strcmp) order: the tie-break of the canonical ranking and the
        # join with judgements both use these codes.
        ucode, vocab = _factorize_sorted(units)
        if duplicates_possible and len(scores):
            dup = pd.Index(qcode * np.int64(max(len(vocab), 1)) + ucode).duplicated()
            if dup.any():
                i = int(np.argmax(dup))
                raise trec.TrecFormatError(f"{what}: row {i} lists unit {units[i]!r} twice for query "
                                           f"{query_ids[qcode[i]]!r}")
        order = _canonical_order(qcode, scores, units, ucode)
        self.query_ids = query_ids
        self.offsets = np.concatenate([[0], np.cumsum(np.bincount(qcode, minlength=len(query_ids)))]).astype(np.int64)
        self.unit_codes = ucode[order]
        self.scores = scores[order]
        self.vocab = vocab
        self._qcode = qcode[order]
        self._vocab_index: pd.Index | None = None

    @classmethod
    def read(cls, path, name: str | None = None) -> "Run":
        frame, tag = trec.read_run(path)
        return cls(frame, name=name or tag or str(path), what=str(path))

    @property
    def unit_ids(self) -> np.ndarray:
        return self.vocab[self.unit_codes]

    @property
    def vocab_index(self) -> pd.Index:
        if self._vocab_index is None:
            self._vocab_index = pd.Index(self.vocab, dtype=object)
        return self._vocab_index

    def __len__(self) -> int:
        return len(self.scores)

    def frame(self) -> pd.DataFrame:
        """Long frame in canonical order with 1-based rank: query_id, unit_id, score, rank."""
        lengths = np.diff(self.offsets)
        ranks = np.arange(len(self.scores), dtype=np.int64) - np.repeat(self.offsets[:-1], lengths) + 1
        return pd.DataFrame({"query_id": self.query_ids[self._qcode], "unit_id": self.unit_ids,
                             "score": self.scores, "rank": ranks})


def _flatten_nested(nested: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """{qid: {uid: value}} -> (sorted query ids, per-query lengths, unit ids, float64 values), grouped by query."""
    qids = sorted(nested)
    lengths = np.fromiter((len(nested[q]) for q in qids), dtype=np.int64, count=len(qids))
    n = int(lengths.sum())
    units = np.fromiter(chain.from_iterable(nested[q].keys() for q in qids), dtype=object, count=n)
    values = np.fromiter(chain.from_iterable(nested[q].values() for q in qids), dtype=np.float64, count=n)
    return np.asarray(qids, dtype=object), lengths, units, values


def _is_clean_run_frame(run) -> bool:
    return (isinstance(run, pd.DataFrame) and list(run.columns[:3]) == ["query_id", "unit_id", "score"]
            and run["score"].dtype == np.float64 and run["query_id"].dtype == object and run["unit_id"].dtype == object)


def _canonical_order(qcode: np.ndarray, scores: np.ndarray, units: np.ndarray,
                     ucode: np.ndarray | None = None) -> np.ndarray:
    """Permutation putting entries in (query asc, score desc, unit id desc) order — trec_eval's rule.

    ucode: codes of units in sorted (strcmp) order, when the caller has them; otherwise only the
    units of queries that hold a score tie are ranked by string, which is all the tie-break needs.
    """
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    counts = np.bincount(qcode)
    grouped = bool(np.all(qcode[1:] >= qcode[:-1]))
    if grouped and counts.min() == counts.max() and counts[0] > 1:
        # Every query has the same number of units, stored contiguously: sort each row on its own
        # by score, then re-sort with the unit-id tie-break only the rows that hold a tie — several
        # times faster than one global three-key sort, and the same order.
        width = int(counts[0])
        s2 = scores.reshape(-1, width)
        within = np.argsort(-s2, axis=1)
        ranked = np.take_along_axis(s2, within, axis=1)
        tied = np.flatnonzero((ranked[:, 1:] == ranked[:, :-1]).any(axis=1))
        if len(tied):
            if ucode is None:
                u2 = _factorize_sorted(units.reshape(-1, width)[tied].ravel())[0].reshape(-1, width)
            else:
                u2 = ucode.reshape(-1, width)[tied]
            within[tied] = np.lexsort((-u2, -s2[tied]), axis=1)
        return (within + (np.arange(len(counts), dtype=np.int64) * width)[:, None]).ravel()
    if ucode is None:
        ucode = _factorize_sorted(units)[0]
    return np.lexsort((-ucode, -scores, qcode))


class Qrels:
    """Judgements held per query: query_ids (sorted), offsets, unit_ids, relevance (int64)."""

    def __init__(self, qrels, what: str = "qrels", grades: Mapping[str, int] | None = None):
        if isinstance(qrels, Qrels):
            self.__dict__.update(qrels.__dict__)
            return
        if isinstance(qrels, Mapping):
            qids, lengths, self.unit_ids, rel = _flatten_nested(qrels)
            if not np.all(rel == np.round(rel)):
                i = int(np.argmax(rel != np.round(rel)))
                raise trec.TrecFormatError(f"{what}: relevance {float(rel[i])!r} of unit {self.unit_ids[i]!r} is not an integer")
            self.relevance = rel.astype(np.int64)
            self.query_ids = qids
            self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        else:
            frame = trec.qrels_frame(qrels, what, grades)
            qcode, self.query_ids = _factorize_sorted(frame["query_id"].to_numpy())
            order = np.argsort(qcode, kind="stable")
            self.unit_ids = frame["unit_id"].to_numpy(dtype=object)[order]
            self.relevance = frame["relevance"].to_numpy(dtype=np.int64)[order]
            self.offsets = np.concatenate([[0], np.cumsum(np.bincount(qcode, minlength=len(self.query_ids)))]).astype(np.int64)

    @classmethod
    def read(cls, path) -> "Qrels":
        return cls(trec.read_qrels(path), what=str(path))

    def __len__(self) -> int:
        return len(self.relevance)


def rank(run) -> pd.DataFrame:
    """The canonical ranking of a run (frame, dict or Run): query_id, unit_id, score, rank (1-based)."""
    return (run if isinstance(run, Run) else Run(run)).frame()


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

    def mean(self) -> pd.Series:
        """Micro aggregate over the evaluated queries (trec_eval's 'all' line); counts are summed."""
        return aggregate_values(self.per_query, self.measures)

    def by_group(self, groups: Mapping[str, str] | pd.Series, name: str = "group") -> pd.DataFrame:
        return aggregate(self.per_query, groups, self.measures, name=name)


def aggregate_values(per_query: pd.DataFrame, measures: Sequence[str]) -> pd.Series:
    out = {}
    for m in measures:
        if m == "num_q":
            out[m] = float(len(per_query))
        elif m in SUM_MEASURES:
            out[m] = float(per_query[m].sum())
        elif m == "gm_map":
            # per-query gm_map holds the query's AP; the aggregate is trec_eval's geometric mean
            out[m] = float(np.exp(np.mean(np.log(np.maximum(per_query[m], GM_FLOOR))))) if len(per_query) else 0.0
        else:
            out[m] = float(per_query[m].mean()) if len(per_query) else 0.0
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


def evaluate(qrels, run, measures: Sequence[str] | None = None, *, level: int = 1, complete: bool = False,
             max_docs: int | None = None, grades: Mapping[str, int] | None = None) -> Evaluation:
    """Evaluate one run against qrels; returns per-query values (see the module docstring).

    qrels: Qrels, long frame (relevance or three-way label column) or dict. run: Run, long frame or
    dict. level: the smallest grade that counts as relevant for binary measures (trec_eval -l).
    complete: evaluate every qrels query (trec_eval -c). max_docs: use only the top max_docs of
    each ranking (trec_eval -M). grades: label -> grade for the sufficiency measures.
    """
    measures = parse_measures(measures or TREC_DEFAULT)
    Q = qrels if isinstance(qrels, Qrels) else Qrels(qrels, grades=grades)
    R = run if isinstance(run, Run) else Run(run)
    grades = dict(trec.LABEL_GRADES if grades is None else grades)

    in_run = pd.Index(R.query_ids, dtype=object)
    qrels_q = pd.Index(Q.query_ids, dtype=object)
    run_only = sorted(set(R.query_ids) - set(Q.query_ids))
    missing = sorted(set(Q.query_ids) - set(R.query_ids))
    eval_q = Q.query_ids if complete else np.asarray(sorted(set(Q.query_ids) & set(R.query_ids)), dtype=object)
    nq = len(eval_q)
    q_in_qrels = qrels_q.get_indexer(eval_q)
    q_in_run = in_run.get_indexer(eval_q)                    # -1: empty ranking

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
        ucode = R.vocab_index.get_indexer(pd.Index(Q.unit_ids[idx], dtype=object))
        rq = q_in_run[qi]
        ok = (ucode >= 0) & (rq >= 0)
        width = np.int64(max(len(R.vocab), 1))
        judged_keys = pd.Index(rq[ok] * width + ucode[ok])
        hit = judged_keys.get_indexer(R._qcode * width + R.unit_codes)
        pos = np.flatnonzero(hit >= 0)
        r = np.zeros(int(ok.sum()), dtype=np.int64)
        r[hit[pos]] = pos - R.offsets[R._qcode[pos]] + 1
        rank_of[np.flatnonzero(ok)] = r
    retrieved = (rank_of > 0) & (rank_of <= num_ret[qi])
    rank_of = np.where(retrieved, rank_of, 0)

    relevant = rel >= level
    judged = rel >= 0
    num_rel = np.bincount(qi, weights=relevant, minlength=nq)
    rel_ret = relevant & retrieved
    num_rel_ret = np.bincount(qi, weights=rel_ret, minlength=nq)
    ctx = _Context(qi=qi, rel=rel, rank=rank_of, retrieved=retrieved, relevant=relevant, judged=judged, nq=nq,
                   num_rel=num_rel, num_ret=num_ret.astype(np.float64), num_rel_ret=num_rel_ret, level=level,
                   grades=grades)
    columns = {m: ctx.measure("map" if m == "gm_map" else m) for m in measures}
    per_query = pd.DataFrame(columns, index=pd.Index(eval_q, name="query_id", dtype=object), dtype="float64")
    no_rel = [str(q) for q, n in zip(eval_q, num_rel) if n == 0]
    return Evaluation(per_query=per_query, measures=measures, run_name=R.name, complete=complete,
                      run_only_queries=run_only, missing_from_run=missing, no_relevant_queries=no_rel)


def _log2_discount(rank: np.ndarray) -> np.ndarray:
    return 1.0 / np.log2(rank.astype(np.float64) + 1.0)


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

    def _count(self, mask: np.ndarray) -> np.ndarray:
        return np.bincount(self.qi, weights=mask, minlength=self.nq)

    def _safe_div(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        out = np.zeros(self.nq)
        np.divide(num, den, out=out, where=den > 0)
        return out

    def _top(self, k: int) -> np.ndarray:
        return self.retrieved & (self.rank <= k)

    def measure(self, name: str) -> np.ndarray:
        if name == "num_q":
            return np.ones(self.nq)
        if name == "num_ret":
            return self.num_ret
        if name == "num_rel":
            return self.num_rel
        if name == "num_rel_ret":
            return self.num_rel_ret
        if name == "map":
            return self._map()
        if name == "Rprec":
            in_r = self.relevant & self.retrieved & (self.rank <= self.num_rel[self.qi])
            return self._safe_div(self._count(in_r), self.num_rel)
        if name == "bpref":
            return self._bpref()
        if name == "recip_rank":
            best = np.full(self.nq, np.inf)
            m = self.relevant & self.retrieved
            np.minimum.at(best, self.qi[m], self.rank[m])
            return np.where(np.isfinite(best), 1.0 / best, 0.0)
        if name == "top1":
            return self._count(self.relevant & self._top(1))
        if name == "ndcg":
            return self._ndcg(None, exponential=False)
        if name == "ndcg_exp":
            return self._ndcg(None, exponential=True)
        m = _IPREC_RE.match(name)
        if m:
            return self._iprec(float(m.group("x")))
        m = _MEASURE_RE.match(name)
        base, k = m.group("base"), int(m.group("k"))
        if base == "P":
            return self._count(self.relevant & self._top(k)) / k
        if base == "recall":
            return self._safe_div(self._count(self.relevant & self._top(k)), self.num_rel)
        if base == "success":
            return (self._count(self.relevant & self._top(k)) > 0).astype(np.float64)
        if base == "ndcg_cut":
            return self._ndcg(k, exponential=False)
        if base == "ndcg_exp_cut":
            return self._ndcg(k, exponential=True)
        if base == "recall_all":
            return self._all_in_top(k).astype(np.float64)
        if base == "ndcg_all":
            return np.where(self._all_in_top(k), self._ndcg(k, exponential=False), 0.0)
        if base in ("sufficient", "supporting_only", "neither"):
            suff_grade, supp_grade = self.grades["sufficient"], self.grades["supporting"]
            top = self._top(k)
            has_suff = self._count(top & (self.rel >= suff_grade)) > 0
            has_supp = self._count(top & (self.rel >= supp_grade) & (self.rel < suff_grade)) > 0
            if base == "sufficient":
                return has_suff.astype(np.float64)
            if base == "supporting_only":
                return (~has_suff & has_supp).astype(np.float64)
            return (~has_suff & ~has_supp).astype(np.float64)
        if base == "judged":
            return self._safe_div(self._count(self.judged & self._top(k)), np.minimum(self.num_ret, k))
        raise MeasureError(f"unknown measure {name!r}")

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

    def _map(self) -> np.ndarray:
        q, r = self._sorted_hits(self.relevant & self.retrieved)
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

    def _ndcg(self, k: int | None, exponential: bool) -> np.ndarray:
        gain_of = (lambda g: np.exp2(g) - 1.0) if exponential else (lambda g: g.astype(np.float64))
        hit = self.retrieved & (self.rel > 0)
        if k is not None:
            hit &= self.rank <= k
        dcg = np.bincount(self.qi[hit], weights=gain_of(self.rel[hit]) * _log2_discount(self.rank[hit]),
                          minlength=self.nq)
        # ideal: the query's positive grades in descending order, at ranks 1, 2, ...
        pos = self.rel > 0
        q, g = self.qi[pos], self.rel[pos]
        order = np.lexsort((-g, q))
        q, g = q[order], g[order]
        ideal_rank = self._ordinal(q)
        keep = ideal_rank <= k if k is not None else np.ones(len(q), dtype=bool)
        idcg = np.bincount(q[keep], weights=gain_of(g[keep]) * _log2_discount(ideal_rank[keep]), minlength=self.nq)
        return self._safe_div(dcg, idcg)


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
    if measure in INTEGER_MEASURES:
        return str(int(round(value)))
    if math.isnan(value):
        return "nan"
    return f"{value:.4f}"
