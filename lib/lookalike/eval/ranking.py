"""The canonical ranking rule, stated once, and runs / qrels prepared in that order.

Rule: within a query, units are ordered by score descending, ties broken by unit id descending in
strcmp (byte / code point) order; any rank column of the input is ignored. This is trec_eval's
rule (form_res_rels.c, comp_sim_docno), so a tie never depends on dict, heap or faiss order.
``Run`` and ``rank`` implement it (``rank_of`` and ``ranks_above`` for one unit's place in a row of
scores); nothing else in lookalike sorts rankings, and ``write_run`` writes every run file in this order.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Mapping

from itertools import chain
from operator import eq, itemgetter

import numpy as np
import pandas as pd

from lookalike.eval import trec


def _factorize_sorted(values) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the sorted unique values (code point order == strcmp order on UTF-8).

    Ids that are all str go through Arrow (trec.sorted_codes): coded in C and the distinct ids
    sorted by their UTF-8 bytes, which is code point order — the order Python's sort gives them,
    without its object comparisons (20 ms of a 42,000-row frame's 110 ms ranking). Any other ids
    (not all str, or a str UTF-8 cannot hold) take pandas' factorize, on a plain object ndarray:
    pandas 3 would otherwise convert the strings to Arrow and back.
    """
    values = np.asarray(values, dtype=object)
    if len(values) and pd.api.types.infer_dtype(values, skipna=False) == "string":
        coded = _arrow_sorted_codes(values)
        if coded is not None:
            return coded[0].astype(np.int64), coded[1]
    codes, uniques = pd.factorize(values, sort=True)
    return codes.astype(np.int64, copy=False), np.asarray(uniques, dtype=object)


def _arrow_sorted_codes(values) -> tuple[np.ndarray, np.ndarray] | None:
    """str ids (a list or an object ndarray) straight into one Arrow dictionary array — Arrow codes
    them as it copies them, with no intermediate string array and no dictionary_encode pass — then
    trec.sorted_codes: (int32 codes, sorted ids). None when Arrow cannot take them (not all str, or
    a str UTF-8 cannot encode, such as a lone surrogate)."""
    import pyarrow as pa

    try:
        keys = pa.array(values, type=pa.dictionary(pa.int32(), pa.string()))
    except (pa.ArrowException, UnicodeError):
        return None
    return trec.sorted_codes(pa.chunked_array([keys]))


unit_hash = hash      # the key of a run-from-dicts join (Python's own: a str caches it); tests swap it for a colliding one


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
            self._hold_nested(run, what)
            return
        # Units coded as integers in sorted (strcmp) order: the join with judgements uses the codes,
        # and the canonical tie-break their order.
        frame = trec.run_frame(run, what) if not _is_clean_run_frame(run) else run
        qcode, query_ids = _factorize_sorted(frame["query_id"].to_numpy())
        units = frame["unit_id"].to_numpy(dtype=object)
        scores = frame["score"].to_numpy(dtype=np.float64)
        ucode, vocab = _factorize_sorted(units)
        if not np.isfinite(scores).all():
            i = int(np.argmin(np.isfinite(scores)))
            raise trec.TrecFormatError(f"{what}: query {query_ids[qcode[i]]!r} unit {vocab[ucode[i]]!r} has a "
                                       f"non-finite score {float(scores[i])!r}")
        if trec.has_duplicates(qcode, ucode, len(vocab)):
            dup = pd.Index(qcode * np.int64(max(len(vocab), 1)) + ucode).duplicated()
            if dup.any():
                i = int(np.argmax(dup))
                raise trec.TrecFormatError(f"{what}: row {i} lists unit {units[i]!r} twice for query "
                                           f"{query_ids[qcode[i]]!r}")
        self._hold(qcode, query_ids, ucode, vocab, scores, units)

    def _hold(self, qcode, query_ids, ucode, vocab, scores, units=None) -> None:
        """Hold a run whose units are coded in sorted (strcmp) order (ucode into vocab)."""
        grouped = bool(np.all(qcode[1:] >= qcode[:-1]))
        counts = np.bincount(qcode, minlength=len(query_ids))
        order = _canonical_order(qcode, scores, units, ucode, counts=counts, grouped=grouped)
        self.query_ids = query_ids
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if order is None:
            self._unit_codes, self.scores, self._qcode = ucode, scores, qcode      # already in rank order
        else:
            # a grouped qcode is already sorted, and the order sorts by query first: it stays as is
            self._unit_codes, self.scores = ucode[order], scores[order]
            self._qcode = qcode if grouped else qcode[order]
        self._vocab = vocab
        self._units = self._unit_hash = None
        self._vocab_index: pd.Index | None = None

    def _hold_nested(self, nested: Mapping, what: str) -> None:
        """Hold a run given as dicts {qid: {uid: score}} without coding its unit ids at all.

        The ids stay the dicts' own objects, in the dicts' order, beside their Python hashes (a str
        caches its hash, and a dict key's was computed when the dict was built): evaluate joins the
        judgements to the run on (query, hash) and confirms each match by comparing the ids, so no
        vocabulary of the run's distinct ids is built — at 300,000 distinct ids, building one cost
        more than the rest of the evaluation. Unit ids are sorted only where two scores of a query
        tie (the canonical tie-break), and codes are made only if something asks for them
        (unit_codes, vocab)."""
        try:
            qids = sorted(nested)
            inner = [nested[q] for q in qids]
            lengths = np.fromiter(map(len, inner), dtype=np.int64, count=len(inner))
            n = int(lengths.sum())
            flat: list = []
            for d in inner:                 # list.extend over each dict: faster than one chained iterator
                flat.extend(d)
            scores = np.fromiter(chain.from_iterable(d.values() for d in inner), dtype=np.float64, count=n)
        except (AttributeError, TypeError, ValueError):
            raise TypeError(nested_problem(nested)) from None
        query_ids = np.asarray(qids, dtype=object)
        qcode = np.repeat(np.arange(len(qids), dtype=np.int64), lengths)
        if not np.isfinite(scores).all():
            i = int(np.argmin(np.isfinite(scores)))
            raise trec.TrecFormatError(f"{what}: query {query_ids[qcode[i]]!r} unit {flat[i]!r} has a "
                                       f"non-finite score {float(scores[i])!r}")
        self._flat = flat
        self._unit_hash = np.fromiter(map(unit_hash, flat), dtype=np.int64, count=n)
        # _arrival[i]: the place in the dicts' order of the i-th entry in canonical order (None: the same)
        self._arrival = _canonical_order(qcode, scores, self.arrival_ids, counts=lengths, grouped=True)
        self.query_ids = query_ids
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self._qcode = qcode             # grouped, and the order sorts by query first: it stays as is
        self.scores = scores if self._arrival is None else scores[self._arrival]
        self._units = self._unit_codes = self._vocab = self._inverse = None
        self._vocab_index = None

    def canonical_place(self, arrival: np.ndarray) -> np.ndarray:
        """For a run from dicts: the place in canonical order of the entries at these places of the
        dicts' own order (the order unit_hashes and arrival_ids are in)."""
        if self._arrival is None:
            return arrival
        if self._inverse is None:
            self._inverse = np.empty(len(self._arrival), dtype=np.int64)
            self._inverse[self._arrival] = np.arange(len(self._arrival), dtype=np.int64)
        return self._inverse[arrival]

    def arrival_ids_equal(self, arrival: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """For a run from dicts: whether the unit id at each of these places of the dicts' order equals ids[i]."""
        flat = self._flat
        return np.fromiter(map(eq, map(flat.__getitem__, arrival.tolist()), ids.tolist()), dtype=bool, count=len(arrival))

    def arrival_ids(self, arrival: np.ndarray) -> np.ndarray:
        """For a run from dicts: the unit ids at these places of the dicts' own order."""
        out = np.empty(len(arrival), dtype=object)
        if len(arrival) == 1:
            out[0] = self._flat[int(arrival[0])]
        elif len(arrival):
            out[:] = itemgetter(*arrival.tolist())(self._flat)
        return out

    @property
    def unit_codes(self) -> np.ndarray:
        """Each entry's unit as a code into vocab (the sorted distinct unit ids)."""
        if self._unit_codes is None:
            self._unit_codes, self._vocab = _factorize_sorted(self.unit_ids)
        return self._unit_codes

    @property
    def vocab(self) -> np.ndarray:
        """The distinct unit ids, sorted (strcmp order)."""
        if self._vocab is None:
            self._unit_codes, self._vocab = _factorize_sorted(self.unit_ids)
        return self._vocab

    @property
    def unit_hashes(self) -> np.ndarray | None:
        """Each entry's unit id's Python hash (int64) when the run came from dicts and its ids were
        never coded; None otherwise. Equal ids hash alike; a match on a hash is confirmed on the id."""
        return self._unit_hash

    @classmethod
    def read(cls, path, name: str | None = None) -> Run:
        """A TREC run file: plain files go straight into arrays (trec.read_columns), any other
        through the line-by-line reader, which names the line of any error."""
        cols = trec.read_columns(path, "run")
        if cols is None:
            frame, tag = trec.read_run_file(path)
            return cls(frame, name=name or tag or str(path), what=str(path))
        run = cls.__new__(cls)
        run.name = name or cols.tag or str(path)
        run._hold(cols.qcode, cols.query_ids, cols.ucode, cols.unit_ids, cols.values)
        return run

    @property
    def unit_ids(self) -> np.ndarray:
        """Each row's unit id, in the run's row order."""
        if self._unit_hash is None:
            return self._vocab[self._unit_codes]
        if self._units is None:
            arrival = np.arange(len(self._flat)) if self._arrival is None else self._arrival
            self._units = self.arrival_ids(arrival)
        return self._units

    @property
    def vocab_index(self) -> pd.Index:
        """The run's unit ids as a pandas Index (built once, for lookups)."""
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
    try:
        qids = sorted(nested)
        lengths = np.fromiter((len(nested[q]) for q in qids), dtype=np.int64, count=len(qids))
        n = int(lengths.sum())
        units = np.fromiter(chain.from_iterable(nested[q].keys() for q in qids), dtype=object, count=n)
        values = np.fromiter(chain.from_iterable(nested[q].values() for q in qids), dtype=np.float64, count=n)
    except (AttributeError, TypeError, ValueError):
        raise TypeError(nested_problem(nested)) from None
    return np.asarray(qids, dtype=object), lengths, units, values


def nested_problem(nested: Mapping) -> str:
    """What makes a dict not {query: {unit: value}}: the first query that maps to something else, or the
    first value that is not a number (said where dicts failed to read, so the scan costs nothing otherwise)."""
    expected = "(expected {query: {unit: value}})"
    kinds = {type(q).__name__ for q in nested}
    if len(kinds) > 1:
        return f"query ids of more than one type ({', '.join(sorted(kinds))}) {expected}"
    for q, inner in nested.items():
        if not isinstance(inner, Mapping):
            return f"query {q!r} maps to {type(inner).__name__} ({inner!r:.40}), not to a dict unit -> value {expected}"
        for u, v in inner.items():
            try:
                float(v)
            except (TypeError, ValueError):
                return f"query {q!r}, unit {u!r}: {v!r:.40} is not a number {expected}"
    return f"not a dict of dicts {expected}"


def _is_clean_run_frame(run) -> bool:
    return (isinstance(run, pd.DataFrame) and list(run.columns[:3]) == ["query_id", "unit_id", "score"]
            and run["score"].dtype == np.float64 and run["query_id"].dtype == object and run["unit_id"].dtype == object)


def _canonical_order(qcode: np.ndarray, scores: np.ndarray, units: np.ndarray,
                     ucode: np.ndarray | None = None, counts: np.ndarray | None = None,
                     grouped: bool | None = None) -> np.ndarray | None:
    """Permutation putting entries in (query asc, score desc, unit id desc) order — trec_eval's rule;
    None when they already stand in that order (a run file written in rank order: nothing to sort).

    ucode: codes of units in sorted (strcmp) order, when the caller has them; otherwise only the
    units of queries that hold a score tie are ranked by string, which is all the tie-break needs.
    units: the unit ids, or a function giving the ids at an array of places (read only for ties).
    counts, grouped: np.bincount(qcode) and whether qcode is non-decreasing, when already known.
    """
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    ids_at = units if callable(units) else (lambda at: units[at])
    if ucode is not None and _already_canonical(qcode, scores, ucode):
        return None
    counts = np.bincount(qcode) if counts is None else counts
    grouped = bool(np.all(qcode[1:] >= qcode[:-1])) if grouped is None else grouped
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
                at = (tied[:, None] * width + np.arange(width)).ravel()
                u2 = _factorize_sorted(ids_at(at))[0].reshape(-1, width)
            else:
                u2 = ucode.reshape(-1, width)[tied]
            within[tied] = np.lexsort((-u2, -s2[tied]), axis=1)
        return (within + (np.arange(len(counts), dtype=np.int64) * width)[:, None]).ravel()
    if ucode is None:
        return _order_deferring_ties(qcode, scores, lambda: _factorize_sorted(ids_at(np.arange(n)))[0])
    return np.lexsort((-ucode, -scores, qcode))


def _order_deferring_ties(qcode: np.ndarray, scores: np.ndarray, sorted_codes) -> np.ndarray | None:
    """The canonical order of a run whose units are not coded: (query, score desc) first; only if two
    scores of a query tie are the units coded in sorted order (sorted_codes()) and the unit-id
    tie-break applied."""
    order = np.lexsort((-scores, qcode))
    q, s = qcode[order], scores[order]
    if not ((q[1:] == q[:-1]) & (s[1:] == s[:-1])).any():
        return None if np.array_equal(order, np.arange(len(order))) else order
    return np.lexsort((-sorted_codes(), -scores, qcode))


def _already_canonical(qcode: np.ndarray, scores: np.ndarray, ucode: np.ndarray) -> bool:
    """Whether the entries already stand in (query asc, score desc, unit id desc) order: one pass
    over neighbours, no sort."""
    q0, q1 = qcode[:-1], qcode[1:]
    if (q1 < q0).any():
        return False
    same = q1 == q0
    s0, s1 = scores[:-1], scores[1:]
    if (same & (s1 > s0)).any():
        return False
    tie = same & (s1 == s0)
    return not (tie.any() and (tie & (ucode[1:] >= ucode[:-1])).any())


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
    def read(cls, path) -> Qrels:
        """A TREC qrels file: plain files go straight into arrays (trec.read_columns), any other
        through the line-by-line reader, which names the line of any error."""
        cols = trec.read_columns(path, "qrels")
        if cols is None:
            return cls(trec.read_qrels_file(path), what=str(path))
        qrels = cls.__new__(cls)
        order = np.argsort(cols.qcode, kind="stable")
        qrels.query_ids = cols.query_ids
        qrels.unit_ids = cols.unit_ids[cols.ucode[order]]
        qrels.relevance = cols.values.astype(np.int64, copy=False)[order]
        qrels.offsets = np.concatenate([[0], np.cumsum(np.bincount(cols.qcode, minlength=len(cols.query_ids)))]
                                       ).astype(np.int64)
        return qrels

    def __len__(self) -> int:
        return len(self.relevance)


def rank(run) -> pd.DataFrame:
    """The canonical ranking of a run (frame, dict or Run): query_id, unit_id, score, rank (1-based)."""
    return (run if isinstance(run, Run) else Run(run)).frame()


def write_run(run, path: Path | str, tag: str = "lookalike") -> Path:
    """Write a run (frame, dict or Run) as TREC lines in canonical rank order."""
    ranked = rank(run)
    path = Path(path)
    trec.check_writable_ids(set(ranked["query_id"].tolist()) | set(ranked["unit_id"].tolist()), str(path))
    # whole or not at all: a full disk or a kill leaves the old file (or none), never half a run
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as fh:
            # lists, not the columns: iterating pandas 3's Arrow-backed strings costs ~1 µs an item
            for q, u, r, s in zip(*(ranked[c].tolist() for c in ("query_id", "unit_id", "rank", "score"))):
                fh.write(f"{q} Q0 {u} {int(r)} {float(s)!r} {tag}\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def ranks_above(score_a: float, id_a: str, score_b: float, id_b: str) -> bool:
    """Whether unit a ranks above unit b under the canonical rule (higher score; on a tie, the
    larger unit id in code point order)."""
    return (score_a, id_a) > (score_b, id_b)


def rank_of(scores: np.ndarray, unit_ids: np.ndarray, i: int) -> int:
    """The 1-based rank of unit i in one query's row of scores over unit_ids, under the canonical
    rule: 1 + the units with a higher score, or an equal score and a larger id."""
    scores = np.asarray(scores)
    ids = np.asarray(unit_ids, dtype=object)
    s, u = scores[i], ids[i]
    return 1 + int(np.sum((scores > s) | ((scores == s) & (ids > u))))


def as_qrels(value, argument: str = "qrels", grades: Mapping[str, int] | None = None) -> Qrels:
    """Qrels from what the public API takes: Qrels, a path to a TREC qrels file (read as
    ``Qrels.read`` reads it), a long frame or a dict query -> unit -> grade. Anything else is a
    TypeError naming the argument and what it accepts."""
    if isinstance(value, Qrels):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Qrels.read(value)
    if isinstance(value, (pd.DataFrame, Mapping)):
        try:
            return Qrels(value, grades=grades)
        except TypeError as exc:
            raise TypeError(f"{argument}: {exc}") from None
    raise TypeError(f"{argument}: expected Qrels, a path to a TREC qrels file, a frame (query_id, unit_id, "
                    f"relevance or label) or a dict query -> unit -> grade; got {type(value).__name__}")


def as_run(value, argument: str = "run", name: str | None = None) -> Run:
    """A Run from what the public API takes: Run, a path to a TREC run file, a long frame or a dict
    query -> unit -> score. Anything else is a TypeError naming the argument and what it accepts."""
    if isinstance(value, Run):
        return value
    if isinstance(value, (str, os.PathLike)):
        return Run.read(value, name=name)
    if isinstance(value, (pd.DataFrame, Mapping)):
        try:
            return Run(value, name=name or "run")
        except TypeError as exc:
            raise TypeError(f"{argument}: {exc}") from None
    raise TypeError(f"{argument}: expected a Run, a path to a TREC run file, a frame (query_id, unit_id, score) "
                    f"or a dict query -> unit -> score; got {type(value).__name__}")


def tie_settled(run: pd.DataFrame, relevant: Mapping[str, object], k: int) -> int:
    """Questions whose figure at depth k the order of tied scores decides (unit id, the canonical rule):
    for some relevant unit, fewer than k units score above it, and with the ones that tie it, k or more —
    so it is in the top k or out of it only by its id. run: query_id, unit_id, score; relevant:
    query_id -> its gold unit id, or a collection of relevant unit ids."""
    n = 0
    for q, part in run.groupby("query_id", sort=False):
        want = relevant.get(q)
        want = {want} if isinstance(want, str) else set(want or ())
        scores = part["score"].to_numpy(dtype="float64")
        settled = False
        for s in part.loc[part["unit_id"].isin(want), "score"].to_numpy(dtype="float64"):
            above, tied = int((scores > s).sum()), int((scores == s).sum()) - 1
            settled |= tied > 0 and above < k <= above + tied
        n += int(settled)
    return n
