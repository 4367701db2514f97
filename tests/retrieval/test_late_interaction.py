"""MaxSim (retrieval.late_interaction): equal to colpali-engine's scorer, and page padding masked."""

from __future__ import annotations

import numpy as np
import torch
from lookalike.retrieval import indexes as retrieve


def _random_multi(rng, n, lo, hi, dim):
    return [rng.standard_normal((int(rng.integers(lo, hi)), dim)).astype(np.float32) for _ in range(n)]


def _colpali_scores(qs, ps, batch_size=4):
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    return BaseVisualRetrieverProcessor.score_multi_vector([torch.from_numpy(q) for q in qs],
                                                           [torch.from_numpy(p) for p in ps],
                                                           batch_size=batch_size).float().numpy()


def test_maxsim_equals_colpali_engine_scorer():
    rng = np.random.default_rng(0)
    qs = _random_multi(rng, 7, 3, 12, 32)
    ps = [rng.standard_normal((30, 32)).astype(np.float32) for _ in range(23)]
    ours = retrieve.maxsim(qs, ps, memory_budget_mb=0.01)          # tiny budget: many blocks
    assert np.abs(ours - _colpali_scores(qs, ps)).max() < 1e-4


def test_maxsim_masks_page_padding_where_colpali_engine_does_not():
    # colpali-engine pads shorter pages with zero vectors and takes the max over the padding too, so
    # a query token whose every similarity with a short page is negative scores 0 there instead of
    # its true (negative) maximum. Real ColPali embeddings are normalised and such tokens are rare;
    # lookalike masks the padding. With non-negative vectors the two agree on ragged pages exactly.
    rng = np.random.default_rng(1)
    qs = [np.abs(q) for q in _random_multi(rng, 5, 3, 12, 16)]
    ps = [np.abs(p) for p in _random_multi(rng, 17, 2, 40, 16)]
    assert np.abs(retrieve.maxsim(qs, ps, 0.01) - _colpali_scores(qs, ps)).max() < 1e-4
    signed_q = _random_multi(rng, 5, 3, 12, 16)
    signed_p = _random_multi(rng, 17, 2, 40, 16)
    ours = retrieve.maxsim(signed_q, signed_p)
    theirs = _colpali_scores(signed_q, signed_p)
    assert (theirs >= ours - 1e-4).all()               # padding can only raise colpali-engine's score
    exact = np.array([[sum(max(float(t @ v) for v in p) for t in q) for p in signed_p] for q in signed_q])
    assert np.abs(ours - exact).max() < 1e-4


def test_equal_pages_score_the_same_bits_as_the_page_list_and_refuse_other_shapes():
    """Pages of one shape kept as one array (late_interaction.EqualPages) hand maxsim slices instead of
    page-by-page copies: the scores are the same bits at any block size, and document context over a
    dense encoder's pages uses them."""
    import pytest
    from lookalike.retrieval import doc_context
    from lookalike.retrieval.late_interaction import EqualPages, maxsim, padded_block

    rng = np.random.default_rng(3)
    for tokens in (1, 4):
        pages = [rng.standard_normal((tokens, 16)).astype(np.float32) for _ in range(57)]
        qs = _random_multi(rng, 9, 1, 6, 16)
        equal = EqualPages(pages)
        assert EqualPages.fits(pages) and len(equal) == 57 and (equal.lengths() == tokens).all()
        for idx in (range(3, 40), [5, 0, 56, 5]):
            assert torch.equal(equal.block(idx), padded_block(pages, idx, 16))
        for budget in (0.002, 0.05, 512.0):
            np.testing.assert_array_equal(maxsim(qs, equal, budget), maxsim(qs, pages, budget))
    assert not EqualPages.fits([np.zeros((1, 4)), np.zeros((2, 4))])
    assert not EqualPages.fits([np.zeros((0, 4)), np.zeros((0, 4))])
    with pytest.raises(ValueError, match="tokens >= 1"):
        EqualPages([np.zeros((0, 4))])
    dense = list(rng.standard_normal((40, 8)).astype(np.float32))
    docs = [f"d{i // 6}" for i in range(40)]
    scorer = doc_context.ContextScorer(dense, docs, n_context=2)
    assert isinstance(scorer.pages, EqualPages)
    queries = list(rng.standard_normal((5, 8)).astype(np.float32))
    got = scorer.parts(queries)
    scorer.pages = [p[None, :] for p in dense]
    want = scorer.parts(queries)
    assert got[0].shape == got[1].shape == (5, 40)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
