"""Spherical k-means (retrieval.clustering)."""

from __future__ import annotations

import numpy as np
from lookalike.retrieval import clustering


def test_spherical_kmeans_returns_unit_centroids():
    rng = np.random.default_rng(1)
    x = np.r_[rng.normal([5, 0], 0.1, (20, 2)), rng.normal([0, 5], 0.1, (20, 2))]
    c = clustering.spherical_kmeans(x, 2, np.random.default_rng(0))
    assert np.allclose(np.linalg.norm(c, axis=1), 1.0)
    assert sorted(np.round(np.abs(c).max(axis=1), 2)) == [1.0, 1.0]
