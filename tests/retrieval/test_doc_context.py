"""Document context (retrieval.doc_context): a page scored with its document's context vectors."""

from __future__ import annotations

import numpy as np
import pytest
from lookalike.retrieval import doc_context
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval import catalog
from lookalike.retrieval.encoders.base import Vectors


def test_document_context_lifts_pages_of_the_right_document():
    # Two documents; the query's tokens match doc A's context, and pages p2 (doc A) and p3 (doc B)
    # are equally good on their own. Document context must put p2 first.
    e = np.eye(4, dtype=np.float32)
    pages = [np.stack([e[0], e[1]]), np.stack([e[2]]), np.stack([e[2], e[3]])]   # p1, p2 in A; p3 in B
    docs = ["A", "A", "B"]
    query = [np.stack([e[0], e[2]])]
    plain = retrieve.maxsim(query, pages)
    assert plain[0, 1] == plain[0, 2]
    ctx = doc_context.document_context_scores(query, pages, docs, n_context=2, seed=0)
    assert ctx[0, 1] > ctx[0, 2]
    added = ctx - plain                                   # the document term: same for pages of one document
    assert added[0, 0] == pytest.approx(added[0, 1]) and added[0, 1] > added[0, 2]


def _multi_vectors(rng, n, tokens=5, dim=8):
    return [rng.normal(size=(tokens, dim)).astype("float32") for _ in range(n)]


def test_a_doc_context_system_is_scored_with_its_specs_context_vectors():
    rng = np.random.default_rng(3)
    pages, queries = _multi_vectors(rng, 6), _multi_vectors(rng, 2, tokens=3)
    docs = ["a", "a", "a", "b", "b", "b"]
    member = "ocr-minilm"
    units = {member: Vectors("u", "pixels", [f"p{i}" for i in range(6)], pages, "multi")}
    qv = {member: Vectors("q", "query-text", ["q1", "q2"], queries, "multi")}
    spec = catalog.SYSTEMS[catalog.DOC_CONTEXT]
    score = doc_context.system_scorer(spec.name, [member], units, docs, seed=0)
    got = score(qv[member])
    same = doc_context.document_context_scores(queries, pages, docs, n_context=spec.context_vectors, seed=0)
    other = doc_context.document_context_scores(queries, pages, docs, n_context=1, seed=0)
    assert np.array_equal(got, same) and not np.allclose(got, other)
    # the context vectors are found once: a block of questions at a time scores as all of them at once (to
    # float32 rounding: the matrix product's summation order follows the block's shape)
    one_by_one = np.vstack([score(qv[member].take([0])), score(qv[member].take([1]))])
    assert np.allclose(one_by_one, same, rtol=1e-6, atol=0)
