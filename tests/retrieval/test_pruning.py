"""Pruned top-k MaxSim returns exactly what exact MaxSim over every page returns."""

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lookalike.retrieval import indexes
from lookalike.retrieval.encoders.base import Vectors
from lookalike.retrieval.indexes import maxsim
from lookalike.retrieval.pruning import bounds, maxsim_topk, page_balls

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import corpora  # noqa: E402


def _exact_topk(scores, k):
    n = scores.shape[1]
    idx = np.stack([np.lexsort((-np.arange(n), -row))[:k] for row in scores])
    return idx, np.take_along_axis(scores, idx, 1)


def _with_ties(rng, n_pages, dim, lengths=(3, 40)):
    """Random pages of varied length, some exact copies (ties), one empty page, unnormalised."""
    pages = []
    for i in range(n_pages):
        if i and rng.random() < 0.25:
            pages.append(pages[int(rng.integers(i))].copy())
        else:
            pages.append(rng.standard_normal((int(rng.integers(*lengths)), dim)).astype(np.float32)
                         * np.float32(rng.uniform(0.5, 2.0)))
    pages[n_pages // 2] = np.zeros((0, dim), np.float32)
    return pages


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 5, 17])
def test_pruned_topk_equals_exact_maxsim_with_ties_and_ragged_pages(seed, k):
    rng = np.random.default_rng(seed)
    dim = 8
    pages = _with_ties(rng, 90, dim)
    queries = [rng.standard_normal((int(rng.integers(1, 6)), dim)).astype(np.float32) for _ in range(13)]
    queries.append(pages[3][:2].copy())                          # a query that is part of a page
    exact = maxsim(queries, pages)
    result = maxsim_topk(queries, pages, k, page_balls(pages, clusters=4))
    idx, sc = result.ranked(k)
    ref_idx, ref_sc = _exact_topk(exact, k)
    assert np.array_equal(idx, ref_idx)
    assert np.abs(sc - ref_sc).max() <= 1e-5
    # every page tied with the k-th is returned, so a later cut by unit id is the canonical one
    for i in range(len(queries)):
        kth = ref_sc[i, -1]
        assert set(np.flatnonzero(exact[i] >= kth)) == set(result.idx[i][result.idx[i] >= 0])


def test_the_bound_is_above_every_exact_score_even_for_unnormalised_and_zero_vectors():
    rng = np.random.default_rng(1)
    pages = _with_ties(rng, 60, 6)
    pages[5][2:] = 0.0
    queries = [rng.standard_normal((4, 6)).astype(np.float32) * 3 for _ in range(9)]
    queries[0][1] = 0.0
    exact = maxsim(queries, pages)
    Q = torch.zeros((len(queries), 4, 6))
    for i, q in enumerate(queries):
        Q[i, : len(q)] = torch.as_tensor(q)
    U = bounds(Q, Q.norm(dim=-1), page_balls(pages, clusters=3)).numpy()
    assert (U >= exact - 1e-4).all()
    # one cluster per vector makes the bound exact
    U1 = bounds(Q, Q.norm(dim=-1), page_balls(pages, clusters=64)).numpy()
    assert np.abs(U1 - exact).max() < 1e-4


def test_pruning_skips_most_pages_on_structured_pages_and_none_are_lost():
    queries, pages, _ = corpora.structured(300, 12, page_tokens=64, query_tokens=8, dim=64, seed=3,
                                           words_per_page=12)
    result = maxsim_topk(queries, pages, 5, page_balls(pages, clusters=24))
    assert result.share_pruned > 0.5
    idx, sc = result.ranked(5)
    ref_idx, ref_sc = _exact_topk(maxsim(queries, pages), 5)
    assert np.array_equal(idx, ref_idx) and np.abs(sc - ref_sc).max() <= 1e-5


def test_when_bounds_separate_nothing_every_page_is_scored_and_the_answer_is_still_exact():
    queries, pages, _ = corpora.uniform(200, 6, page_tokens=48, query_tokens=8, dim=32, seed=2)
    result = maxsim_topk(queries, pages, 10, page_balls(pages, clusters=4))
    assert result.stats["query_blocks_scored_in_full"] == 1 and result.share_pruned == 0.0
    idx, _ = result.ranked(10)
    assert np.array_equal(idx, _exact_topk(maxsim(queries, pages), 10)[0])


def test_page_balls_are_deterministic():
    _, pages, _ = corpora.structured(40, 1, page_tokens=30, query_tokens=4, dim=16, seed=5)
    a, b = page_balls(pages, clusters=8), page_balls(pages, clusters=8)
    assert torch.equal(a.centres, b.centres) and torch.equal(a.radii, b.radii)
    assert np.array_equal(a.order, b.order)


def test_multivector_index_search_prunes_large_corpora_and_writes_the_same_run(monkeypatch):
    queries, pages, _ = corpora.structured(120, 7, page_tokens=40, query_tokens=6, dim=64, seed=4,
                                           words_per_page=8)
    ids = [f"u{i:04d}" for i in range(len(pages))]
    pages[7] = pages[8].copy()                                   # a tie decided by unit id
    page_vectors = Vectors(ids=ids, data=pages, kind="multi", provenance="pixels", encoder_id="toy")
    qv = Vectors(ids=[f"q{i}" for i in range(len(queries))], data=queries, kind="multi", provenance="query",
                 encoder_id="toy")
    plain = indexes.MultiVectorIndex().add(page_vectors).search(qv, k=10)
    monkeypatch.setattr(indexes, "PRUNE_FROM_PAGES", 50)
    index = indexes.MultiVectorIndex().add(page_vectors)
    pruned = index.search(qv, k=10)
    assert index.last_search["pairs_scored"] < index.last_search["pairs_total"]
    assert pruned.equals(plain)


def test_maxsim_gives_a_page_the_same_bits_however_the_work_is_blocked():
    # torch's sum picks its order by shape; summed that way, one (query, page) scored in blocks of
    # different sizes differed in the last bit, which split tied duplicate pages apart
    queries, pages, _ = corpora.structured(64, 40, page_tokens=50, query_tokens=20, dim=32, seed=7)
    whole = maxsim(queries, pages)
    for budget in (0.05, 0.3, 2.0):
        assert np.array_equal(maxsim(queries, pages, memory_budget_mb=budget), whole)
    for i in (0, 17, 39):
        assert np.array_equal(maxsim(queries[i:i + 1], pages[5:21])[0], whole[i, 5:21])
