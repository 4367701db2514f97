"""Clustering of embedding vectors: spherical k-means (cosine), used for document context
vectors (retrieval.indexes) and the clustering fallback of hard negatives (analysis.negatives)."""

from __future__ import annotations

import numpy as np


def spherical_kmeans(x: np.ndarray, n_clusters: int, rng: np.random.Generator, iterations: int = 20) -> np.ndarray:
    """Unit-norm centroids of x's rows under cosine similarity (k-means++-style seeding from rng)."""
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    n = len(x)
    k = min(n_clusters, n)
    centres = [x[rng.integers(n)]]
    for _ in range(1, k):
        d = 1.0 - np.max(x @ np.stack(centres).T, axis=1)
        p = np.clip(d, 0, None)
        centres.append(x[rng.choice(n, p=p / p.sum())] if p.sum() > 0 else x[rng.integers(n)])
    c = np.stack(centres)
    for _ in range(iterations):
        assign = np.argmax(x @ c.T, axis=1)
        new = np.stack([x[assign == j].sum(axis=0) if np.any(assign == j) else c[j] for j in range(k)])
        new /= np.maximum(np.linalg.norm(new, axis=1, keepdims=True), 1e-12)
        if np.allclose(new, c):
            break
        c = new
    return c.astype(np.float32)
