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
