"""Indexes and runs (retrieval.indexes): the provenance guard, exact dense search with canonical ties, BM25 over empty text, and top k cut in blocks as the whole matrix ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.base import Vectors


def test_provenance_guard_refuses_caption_vectors_in_a_pixels_index():
    caption = Vectors("caption-minilm", "caption-text", ["u1"], np.ones((1, 4), np.float32))
    with pytest.raises(retrieve.ProvenanceError, match="accepts \\['pixels'\\] vectors only; got 'caption-text'"):
        retrieve.DenseIndex(accepts=("pixels",), name="image").add(caption)
    with pytest.raises(retrieve.ProvenanceError):
        retrieve.BM25Index(accepts=("pixels",)).add(Vectors("c", "caption-text", ["u1"], ["text"], "text"))
    with pytest.raises(retrieve.ProvenanceError):
        retrieve.MultiVectorIndex(accepts=("pixels",)).add(
            Vectors("c", "metadata", ["u1"], [np.ones((2, 4), np.float32)], "multi"))
    # only an explicit override lets it through, and the index records it
    index = retrieve.DenseIndex(accepts=("pixels",), allow_foreign_provenance=True).add(caption)
    assert index.allow_foreign_provenance and index.unit_ids == ["u1"]


def test_dense_search_is_exact_and_ties_are_canonical():
    units = Vectors("e", "pixels", ["a", "b", "c", "d"],
                    np.array([[1, 0], [0, 1], [1, 0], [0.6, 0.8]], dtype=np.float32))
    queries = Vectors("e", "query-text", ["q"], np.array([[1, 0]], dtype=np.float32))
    run = retrieve.DenseIndex().add(units).search(queries, k=3)
    assert list(run["unit_id"]) == ["c", "a", "d"]          # a and c tie: unit id descending first
    assert run["score"].tolist() == pytest.approx([1.0, 1.0, 0.6])


def test_bm25_over_units_without_any_text_scores_zero():
    index = retrieve.BM25Index().add(Vectors("ocr-bm25", "pixels", ["a", "b"], ["", "   "], "text"))
    run = index.search(Vectors("q", "query-text", ["q"], ["revenue"], "text"), k=2)
    assert run["score"].tolist() == [0.0, 0.0]


def test_run_from_scores_keeps_top_k_in_canonical_order():
    from lookalike.retrieval import indexes as retrieve

    s = np.array([[0.2, 0.9, 0.2], [0.1, 0.3, 0.5]])
    r = retrieve.run_from_scores(s, ["q1", "q2"], ["a", "b", "c"], k=2)
    assert list(zip(r["query_id"], r["unit_id"])) == [("q1", "b"), ("q1", "c"), ("q2", "c"), ("q2", "b")]


@pytest.mark.parametrize("block_cells", [1 << 22, 7])
def test_a_full_score_matrix_cut_to_its_top_k_in_blocks_ranks_as_the_whole_matrix_does(monkeypatch, block_cells):
    """run_from_scores and BM25 search cut each block of rows to the columns that can stand in the top k
    before ranking: the same run as ranking every (query, unit) pair, ties at the cut (many equal
    scores, as BM25's zeros) broken by unit id, whatever the block size."""
    from lookalike.eval.ranking import rank

    monkeypatch.setattr(retrieve, "BLOCK_CELLS", block_cells)
    rng = np.random.default_rng(5)
    for trial in range(120):
        q, n, k = int(rng.integers(1, 6)), int(rng.integers(1, 50)), int(rng.integers(1, 15))
        s = rng.integers(0, 3, size=(q, n)).astype(float) if trial % 2 else rng.random((q, n))
        ids = [f"u{int(rng.integers(0, 10**6))}-{j}" for j in range(n)]
        qids = [f"q{i}" for i in range(q)]
        whole = rank(pd.DataFrame({"query_id": np.repeat(qids, n), "unit_id": ids * q, "score": s.ravel()}))
        want = whole[whole["rank"] <= k][["query_id", "unit_id", "score"]].reset_index(drop=True)
        pd.testing.assert_frame_equal(retrieve.run_from_scores(s, qids, ids, k), want)
    texts = ["revenue rose", "revenue fell", "margin", "", "revenue and margin"] * 3
    index = retrieve.BM25Index().add(Vectors("ocr-bm25", "pixels", [f"u{i:02d}" for i in range(15)], texts, "text"))
    queries = Vectors("q", "query-text", ["q1", "q2", "q3"], ["revenue", "margin", "dividend"], "text")
    run = index.search(queries, k=4)
    whole = rank(pd.DataFrame({"query_id": np.repeat(["q1", "q2", "q3"], 15), "unit_id": index.unit_ids * 3,
                               "score": index.scores(queries).ravel().astype(np.float64)}))
    pd.testing.assert_frame_equal(run, whole[whole["rank"] <= 4][["query_id", "unit_id", "score"]].reset_index(drop=True))
