"""Document-context scoring (VL-DocIR eq. 8): a page's score is its own MaxSim against the question
plus the question's MaxSim against its document's context vectors — the spherical k-means centroids
of all the document's pages' vectors. The catalogue's doc-context systems (retrieval.catalog:
``ocr-minilm+doc-context``) and stage 07's Ctx / B+Ctx settings are scored here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lookalike.retrieval import catalog
from lookalike.retrieval.clustering import spherical_kmeans
from lookalike.retrieval.late_interaction import EqualPages, maxsim


def document_context_scores(queries: Sequence[np.ndarray], pages: Sequence[np.ndarray], doc_ids: Sequence[str],
                            n_context: int = 8, seed: int = 0, memory_budget_mb: float = 512.0) -> np.ndarray:
    """VL-DocIR eq. 8: page score = MaxSim(query, page) + MaxSim(query, document context vectors).

    Each document's context vectors are the spherical k-means centroids (n_context) of all its
    pages' vectors; single-vector pages are treated as one-token pages.
    """
    return ContextScorer(pages, doc_ids, n_context, seed, memory_budget_mb)(queries)


def document_context_parts(queries: Sequence[np.ndarray], pages: Sequence[np.ndarray], doc_ids: Sequence[str],
                           n_context: int = 8, seed: int = 0, memory_budget_mb: float = 512.0
                           ) -> tuple[np.ndarray, np.ndarray]:
    """The two terms of ``document_context_scores`` apart, each (n_queries, n_pages): the page's own
    MaxSim, and its document's context match (the same for every page of a document) — the
    benchmark's Base and Ctx settings; their sum is B+Ctx."""
    return ContextScorer(pages, doc_ids, n_context, seed, memory_budget_mb).parts(queries)


class ContextScorer:
    """Document-context scoring prepared once for a corpus: each document's context vectors (the
    spherical k-means centroids of its pages' vectors) are found here, then any block of queries is
    scored against every page — so a caller scores a block of questions at a time and never holds the
    whole question x page matrix (three of them: page, context and sum)."""

    def __init__(self, pages: Sequence[np.ndarray], doc_ids: Sequence[str], n_context: int = 8, seed: int = 0,
                 memory_budget_mb: float = 512.0):
        listed = [p if p.ndim == 2 else p[None, :] for p in pages]
        self.pages = EqualPages(listed) if EqualPages.fits(listed) else listed
        self.memory_budget_mb = memory_budget_mb
        # each document's pages found in one pass (sorted document ids, pages in corpus order within each),
        # not one scan of the corpus per document, which grows with documents x pages
        codes, docs = pd.factorize(pd.Series(np.asarray(doc_ids, dtype=object)), sort=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(docs) + 1))
        rng = np.random.default_rng(seed)
        self.codes = codes
        self.contexts = [spherical_kmeans(np.concatenate([self.pages[i] for i in order[bounds[j]:bounds[j + 1]]]),
                                          n_context, rng) for j in range(len(docs))]

    def parts(self, queries: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(page scores, context scores) of these queries, each (n_queries, n_pages)."""
        queries = [q if q.ndim == 2 else q[None, :] for q in queries]
        page_scores = maxsim(queries, self.pages, self.memory_budget_mb)
        doc_scores = maxsim(queries, self.contexts, self.memory_budget_mb)
        return page_scores, doc_scores[:, self.codes]

    def __call__(self, queries: Sequence[np.ndarray]) -> np.ndarray:
        """Scores over every unit for a block of questions' vectors: each page's own score plus its document's
        context score."""
        page_scores, context_scores = self.parts(queries)
        return page_scores + context_scores


def system_scorer(name: str, members: Sequence[str], unit_vectors: Mapping, doc_ids: Sequence[str], seed: int = 0):
    """The catalogue's doc-context system named name as a function of its member's query Vectors (a
    block of questions) -> scores over every unit (n_queries, n_units): the member's page score plus
    the document-context match, with the spec's number of context vectors per document (found once)."""
    scorer = ContextScorer(list(unit_vectors[members[0]].data), doc_ids,
                           n_context=catalog.SYSTEMS[name].context_vectors, seed=seed)
    return lambda query_vectors: scorer(list(query_vectors.data))
