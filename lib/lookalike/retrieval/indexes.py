"""Retrieval: exact indexes (dense, MaxSim late interaction, BM25) and runs from score matrices.
Fusing runs is retrieval.fusion; document-context scoring is retrieval.doc_context.

Every search returns a run as a long frame (query_id, unit_id, score) in the canonical order of
lookalike.metrics (score descending, ties by unit id descending), cut at k.

The provenance guard: an index is built for a set of accepted provenances (an image index accepts
``pixels`` only) and refuses vectors of any other, so caption text cannot enter a pixels index by
accident. The only way past it is ``allow_foreign_provenance=True``, which the leak ablation's
fault injection uses on purpose and which is recorded on the index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from lookalike import memory
from lookalike.eval.metrics import rank
from lookalike.eval.ranking import _factorize_sorted
from lookalike.retrieval.encoders.base import Vectors
from lookalike.retrieval.late_interaction import maxsim


class ProvenanceError(ValueError):
    """Vectors of a provenance the index does not accept."""


def _check(vectors: Vectors, accepts: Sequence[str], allow_foreign: bool, index: str) -> None:
    if vectors.provenance not in accepts and not allow_foreign:
        raise ProvenanceError(f"{index} index accepts {list(accepts)} vectors only; got {vectors.provenance!r} "
                              f"vectors from encoder {vectors.encoder_id!r}")


BLOCK_CELLS = 1 << 22        # cells of one block of a (queries x units) score matrix cut to its top k at a time


def top_columns(scores: np.ndarray, k: int, unit_rank: np.ndarray) -> np.ndarray:
    """Per row of a full score matrix, the columns that can stand in its canonical top k (-1 pads): the
    k largest scores, and of the scores equal to the row's k-th largest, the ones with the largest unit
    ids — so ranking these alone gives the top k that ranking the whole row gives, ties at the cut
    broken by unit id as the canonical rule says (a BM25 row where most units score 0 ties at the cut
    across thousands of units)."""
    rows = np.arange(len(scores))[:, None]
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    kth = scores[rows, part].min(axis=1)
    tied = scores == kth[:, None]
    need = k - (scores > kth[:, None]).sum(axis=1)
    m = int(need.max())
    key = np.where(tied, unit_rank[None, :], -1)
    best_tied = np.argpartition(-key, m - 1, axis=1)[:, :m] if m < scores.shape[1] else np.tile(
        np.arange(scores.shape[1]), (len(scores), 1))
    best_tied = np.where(tied[rows, best_tied], best_tied, -1)
    cand = np.sort(np.hstack([part, best_tied]), axis=1)
    cand[:, 1:][cand[:, 1:] == cand[:, :-1]] = -1          # a column in both halves, once
    return cand


def _run_frame_full(query_ids, unit_ids, scores: np.ndarray, k: int) -> pd.DataFrame:
    """_run_frame of a full (queries x units) score matrix: each block of rows cut to the columns that
    can stand in its top k first, so no frame of every (query, unit) pair is ever built (at 100,000
    units and 5,000 questions it would hold 500 million rows)."""
    n = scores.shape[1] if scores.ndim == 2 else 0
    if n <= k or not len(query_ids):
        return _run_frame(query_ids, unit_ids, scores, np.tile(np.arange(n), (len(scores), 1)), k)
    # an index's unit ids are distinct: their codes in sorted (strcmp) order are their ranks
    unit_rank = _factorize_sorted(np.asarray(unit_ids, dtype=object))[0]
    block = max(1, BLOCK_CELLS // n)
    parts = []
    with memory.returning_freed_blocks():
        for a in range(0, len(query_ids), block):
            s = np.asarray(scores[a:a + block])
            cand = top_columns(s, k, unit_rank)
            got = np.where(cand >= 0, s[np.arange(len(s))[:, None], np.maximum(cand, 0)], 0.0)
            parts.append(_run_frame(list(query_ids[a:a + block]), unit_ids, got, cand, k))
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _run_frame(query_ids, unit_ids, scores, idx, k) -> pd.DataFrame:
    nq = len(query_ids)
    if nq == 0 or idx.size == 0:
        return pd.DataFrame({"query_id": pd.Series([], dtype=object), "unit_id": pd.Series([], dtype=object),
                             "score": pd.Series([], dtype=np.float64)})
    frame = pd.DataFrame({"query_id": np.repeat(np.asarray(query_ids, dtype=object), idx.shape[1]),
                          "unit_id": np.asarray(unit_ids, dtype=object)[idx.ravel()],
                          "score": scores.ravel().astype(np.float64)})
    frame = frame[idx.ravel() >= 0] if (idx < 0).any() else frame
    ranked = rank(frame)
    keep = ranked["rank"] <= k
    return ranked.loc[keep, ["query_id", "unit_id", "score"]].reset_index(drop=True)


class DenseIndex:
    """Exact inner-product search over single vectors (faiss IndexFlatIP)."""

    def __init__(self, accepts: Sequence[str] = ("pixels",), name: str = "dense", allow_foreign_provenance: bool = False):
        self.accepts = tuple(accepts)
        self.name = name
        self.allow_foreign_provenance = allow_foreign_provenance
        self.unit_ids: list[str] = []
        self.encoder_id = ""
        self._index = None

    def add(self, vectors: Vectors) -> DenseIndex:
        """Index these single vectors (their provenance checked against what this index accepts); returns the
        index."""
        import faiss

        _check(vectors, self.accepts, self.allow_foreign_provenance, self.name)
        if vectors.kind != "single":
            raise ValueError(f"{self.name}: DenseIndex takes single vectors; use MultiVectorIndex for {vectors.kind}")
        data = np.ascontiguousarray(vectors.data, dtype=np.float32)
        if self._index is None:
            self._index = faiss.IndexFlatIP(data.shape[1])
        self._index.add(data)
        self.unit_ids.extend(vectors.ids)
        self.encoder_id = vectors.encoder_id
        return self

    def scores(self, queries: Vectors) -> np.ndarray:
        """Dense (n_queries, n_units) inner products."""
        q = np.ascontiguousarray(queries.data, dtype=np.float32)
        return q @ self._index.reconstruct_n(0, len(self.unit_ids)).T

    def search(self, queries: Vectors, k: int = 100) -> pd.DataFrame:
        """Each query's top k by inner product in the canonical order (score, then unit id, both descending)."""
        q = np.ascontiguousarray(queries.data, dtype=np.float32)
        # Ask faiss for more than k until no question's tie at the cut runs past what came back, so
        # the canonical rule (not faiss' internal order) picks among tied units: a caption index
        # that scores every page of one document alike has ties far wider than any fixed margin.
        n = len(self.unit_ids)
        depth = min(n, k + 16)
        while True:
            scores, idx = self._index.search(q, depth)
            if depth >= n or depth <= k or not len(q) or not np.any(scores[:, depth - 1] >= scores[:, k - 1]):
                break
            depth = min(n, depth * 4)
        return _run_frame(queries.ids, self.unit_ids, scores, idx, k)


PRUNE_FROM_PAGES = 256


class MultiVectorIndex:
    """MaxSim over multi-vector pages (ColPali family), exact, within a memory budget."""

    def __init__(self, accepts: Sequence[str] = ("pixels",), name: str = "multivector", memory_budget_mb: float = 512.0,
                 device: str = "cpu", allow_foreign_provenance: bool = False, search: str = "exact",
                 n_candidates: int = 200, clusters: int = 64):
        if search not in ("exact", "candidates"):
            raise ValueError(f"{name}: search must be 'exact' or 'candidates', got {search!r}")
        self.accepts, self.name, self.memory_budget_mb, self.device = tuple(accepts), name, memory_budget_mb, device
        self.allow_foreign_provenance = allow_foreign_provenance
        self.search_mode, self.n_candidates, self.clusters = search, int(n_candidates), int(clusters)
        self.unit_ids: list[str] = []
        self.pages: list[np.ndarray] = []
        self._balls = None
        self._centroids = None
        self.last_search: dict = {}

    def add(self, vectors: Vectors) -> MultiVectorIndex:
        """Index the vectors' pages. Pages stored on disk (Vectors.stored: a float16 PageStore) stay
        there and are read a block at a time by every search (memory follows memory_budget_mb, not
        the corpus); they are indexed as given, once — a stored index takes no second add."""
        _check(vectors, self.accepts, self.allow_foreign_provenance, self.name)
        if vectors.kind != "multi":
            raise ValueError(f"{self.name}: MultiVectorIndex takes multi-vectors, got {vectors.kind}")
        if vectors.stored or self.stored:
            if self.unit_ids:
                raise ValueError(f"{self.name}: an index over stored pages is built from one add; got a second")
            self.pages = vectors.data
        else:
            self.pages.extend(vectors.data)
        self.unit_ids.extend(vectors.ids)
        return self

    @property
    def stored(self) -> bool:
        """Whether the pages are read from a float16 page store on disk rather than held in memory."""
        return hasattr(self.pages, "store")

    def scores(self, queries: Vectors) -> np.ndarray:
        """Every query's MaxSim score against every page, (n_queries, n_pages) float32."""
        return maxsim(queries.data, self.pages, self.memory_budget_mb, self.device)

    def search(self, queries: Vectors, k: int = 100) -> pd.DataFrame:
        """Each query's exact top k. From PRUNE_FROM_PAGES pages on, pages whose score bound
        cannot reach the k-th are skipped (retrieval.pruning): the same run, less work. With
        search="candidates": the top k among each query's n_candidates best pages by centroid
        MaxSim (retrieval.store), scored exactly — approximate; ``candidate_recall`` says how much."""
        if self.search_mode == "candidates" and len(self.pages) > self.n_candidates and len(queries):
            from lookalike.retrieval import store

            if self._centroids is None or self._centroids[0] != len(self.pages):
                if self.stored:
                    # centroids go to disk beside the pages (float16), then into memory as int8 only
                    folder = self.pages.store.folder / f"centroids-{self.clusters}"
                    first = store.CentroidIndex.build(self.pages.store, folder, self.clusters).first_stage()
                else:
                    dim = int(np.asarray(self.pages[0]).shape[1])
                    first = store.Int8Centroids(list(store.centroid_pages(self.pages, self.clusters)), dim)
                self._centroids = (len(self.pages), first)
            idx, scores, cand = store.candidate_search(queries.data, self.pages, self._centroids[1], k,
                                                       self.n_candidates, self.memory_budget_mb)
            self.last_search = {"candidates": cand, "query_ids": list(queries.ids)}
            return _run_frame(queries.ids, self.unit_ids, scores, idx, k)
        if self.stored and len(queries):
            # exact over stored pages: a chunk of pages at a time into a running top k (store.exact_topk),
            # never a (queries x pages) matrix; ties at the cut are kept for the canonical rule
            from lookalike.retrieval import store

            idx, scores = store.exact_topk(queries.data, self.pages, k, self.memory_budget_mb, self.device)
            self.last_search = {"pages": len(self.pages), "stored": True}
            return _run_frame(queries.ids, self.unit_ids, scores, idx, k)
        if len(self.pages) >= PRUNE_FROM_PAGES and k < len(self.pages) and self.device == "cpu":
            from lookalike.retrieval.pruning import maxsim_topk, page_balls

            if self._balls is None or self._balls[0] != len(self.pages):
                self._balls = (len(self.pages), page_balls(self.pages))
            top = maxsim_topk(queries.data, self.pages, k, self._balls[1], budget_mb=min(self.memory_budget_mb, 32.0))
            self.last_search = {"pairs_scored": top.pairs_scored, "pairs_total": top.pairs_total}
            return _run_frame(queries.ids, self.unit_ids, top.scores, top.idx, k)
        s = self.scores(queries)
        idx = np.tile(np.arange(len(self.unit_ids)), (len(s), 1))
        return _run_frame(queries.ids, self.unit_ids, s, idx, k)


    def candidate_recall(self, queries: Vectors, sample: int = 100, seed: int = 0) -> dict:
        """After a candidate search: on a seeded sample of its queries, the share of each query's
        exact top 10 / top 100 (exact MaxSim over every page) found among its candidates.
        {"n": queries sampled, "candidates": n_candidates, "recall_10", "recall_100"}; {} for an
        exact search."""
        if "candidates" not in self.last_search:
            return {}
        from lookalike.retrieval import store

        cand = self.last_search["candidates"]
        rng = np.random.default_rng([seed, 18])
        pick = np.sort(rng.choice(len(cand), size=min(sample, len(cand)), replace=False))
        sample = [queries.data[i] for i in pick]
        if self.stored:             # the exact top 100 a chunk of pages at a time: no (sample x pages) matrix
            idx, scores = store.exact_topk(sample, self.pages, 100, self.memory_budget_mb, self.device)
            exact = store.canonical_rows(idx, scores, 100)
        else:
            exact = store.topk(maxsim(sample, self.pages, self.memory_budget_mb, self.device), 100)
        got = store.candidate_recall(exact, cand[pick])
        return {"n": len(pick), "candidates": self.n_candidates, "recall_10": got[10], "recall_100": got[100]}


class BM25Index:
    """BM25 (bm25s, Lucene variant) over unit texts, e.g. the OCR text of page pixels."""

    def __init__(self, accepts: Sequence[str] = ("pixels",), name: str = "bm25", k1: float = 1.5, b: float = 0.75,
                 allow_foreign_provenance: bool = False):
        self.accepts, self.name, self.k1, self.b = tuple(accepts), name, k1, b
        self.allow_foreign_provenance = allow_foreign_provenance
        self.unit_ids: list[str] = []
        self._retriever = None

    def add(self, vectors: Vectors) -> BM25Index:
        """Index these texts for BM25 (their provenance checked against what this index accepts); returns the
        index."""
        import bm25s

        _check(vectors, self.accepts, self.allow_foreign_provenance, self.name)
        if vectors.kind != "text":
            raise ValueError(f"{self.name}: BM25Index takes texts, got {vectors.kind}")
        if self.unit_ids:
            raise ValueError(f"{self.name}: BM25Index is built once; create a new one to add units")
        self.unit_ids = list(vectors.ids)
        tokens = bm25s.tokenize(list(vectors.data), stopwords="en", show_progress=False)
        if not tokens.vocab:
            self._retriever = None          # no unit has any text (e.g. OCR found none): every score is 0
            return self
        self._retriever = bm25s.BM25(k1=self.k1, b=self.b)
        self._retriever.index(tokens, show_progress=False)
        return self

    def scores(self, queries: Vectors) -> np.ndarray:
        """Every query's BM25 score against every unit, (n_queries, n_units) float32."""
        return self._scores(list(queries.data))

    def _scores(self, texts: list) -> np.ndarray:
        import bm25s

        out = np.zeros((len(texts), len(self.unit_ids)), dtype=np.float32)
        if self._retriever is None:
            return out
        for i, text in enumerate(texts):
            toks = bm25s.tokenize([text], stopwords="en", show_progress=False, return_ids=False)[0]
            if toks:
                out[i] = self._retriever.get_scores(toks)
        return out

    def search(self, queries: Vectors, k: int = 100) -> pd.DataFrame:
        """Each query's top k by BM25 in the canonical order, a block of queries at a time."""
        # a block of questions at a time: the (questions x units) matrix is never held whole
        block = max(1, BLOCK_CELLS // max(1, len(self.unit_ids)))
        ids, texts = list(queries.ids), list(queries.data)
        with memory.returning_freed_blocks():
            parts = [_run_frame_full(ids[a:a + block], self.unit_ids, self._scores(texts[a:a + block]), k)
                     for a in range(0, len(ids), block)] or [_run_frame_full([], self.unit_ids, np.zeros((0, 0)), k)]
        return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def run_from_scorer(score_rows, query_ids: Sequence[str], unit_ids: Sequence[str], k: int = 100) -> pd.DataFrame:
    """run_from_scores without the full matrix: score_rows(positions) scores the queries at those
    positions of query_ids against every unit, called for a block of queries at a time."""
    query_ids = list(query_ids)
    block = max(1, BLOCK_CELLS // max(1, len(unit_ids)))
    with memory.returning_freed_blocks():
        parts = [run_from_scores(score_rows(range(a, min(a + block, len(query_ids)))), query_ids[a:a + block],
                                 unit_ids, k) for a in range(0, len(query_ids), block)]
    return (pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]) if parts else \
        run_from_scores(np.zeros((0, len(unit_ids))), [], unit_ids, k)


def run_from_scores(scores: np.ndarray, query_ids: Sequence[str], unit_ids: Sequence[str], k: int = 100) -> pd.DataFrame:
    """A full score matrix (n_queries, n_units) as a run: each query's top k in canonical order."""
    scores = np.asarray(scores, dtype=np.float64)
    if not scores.size:
        return _run_frame(query_ids, unit_ids, scores, np.zeros((len(query_ids), 0), int), k)
    return _run_frame_full(list(query_ids), unit_ids, scores, k)
