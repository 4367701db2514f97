"""Synthetic multi-vector corpora for the search benchmarks (maxsim.py, scale.py).

Two kinds:

* ``uniform``: every vector drawn uniformly on the unit sphere and queries unrelated to pages --
  the worst case for any pruning or candidate search (nothing has structure to exploit).
* ``structured``: shaped like ColPali-family page embeddings. A page belongs to a topic; a share of
  its vectors are background (blank paper, margins: a few directions shared by every page, with
  a little noise), the rest are its "words" -- a small vocabulary of directions near its topic --
  each repeated over several patches with noise. A share of pages are near-duplicates of another
  page (the same template with a few vectors changed). A query is built from one target page:
  most tokens are noisy copies of that page's word vectors, a few are generic (query-prefix
  and augmentation tokens near the background directions). Every vector is L2-normalised.

Deterministic in the seed. Vectors are float32 numpy arrays; pages are (tokens, dim).
"""

from __future__ import annotations

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _noise(rng, shape, norm: float) -> np.ndarray:
    """Gaussian noise whose vectors have about the given Euclidean norm."""
    return (norm / np.sqrt(shape[-1])) * rng.standard_normal(shape, dtype=np.float32)


def uniform(n_pages: int, n_queries: int, page_tokens: int = 1030, query_tokens: int = 20, dim: int = 128,
            seed: int = 0):
    rng = np.random.default_rng(seed)
    pages = [_unit(rng.standard_normal((page_tokens, dim), dtype=np.float32)) for _ in range(n_pages)]
    queries = [_unit(rng.standard_normal((query_tokens, dim), dtype=np.float32)) for _ in range(n_queries)]
    return queries, pages, np.full(n_queries, -1)


def structured(n_pages: int, n_queries: int, page_tokens: int = 1030, query_tokens: int = 20, dim: int = 128,
               seed: int = 0, background_share: float = 0.45, words_per_page: int = 48,
               duplicate_share: float = 0.1, duplicate_changed: float = 0.03):
    """Returns (queries, pages, targets): targets[i] is the page query i was built from."""
    rng = np.random.default_rng(seed)
    n_topics = max(8, n_pages // 40)
    topics = _unit(rng.standard_normal((n_topics, dim), dtype=np.float32))
    background = _unit(rng.standard_normal((6, dim), dtype=np.float32))
    n_bg = int(round(background_share * page_tokens))
    pages, words = [], []
    for p in range(n_pages):
        if p and rng.random() < duplicate_share:                   # a near-duplicate of an earlier page
            src = int(rng.integers(p))
            page = pages[src].copy()
            changed = rng.choice(page_tokens, max(1, int(duplicate_changed * page_tokens)), replace=False)
            own = words[src]
            page[changed] = _unit(own[rng.integers(len(own), size=len(changed))]
                                  + _noise(rng, (len(changed), dim), 0.25))
            pages.append(page)
            words.append(own)
            continue
        t = topics[rng.integers(n_topics)]
        vocab = _unit(t + _noise(rng, (words_per_page, dim), 1.0))
        bg = background[rng.integers(len(background), size=n_bg)]
        bg = _unit(bg + _noise(rng, bg.shape, 0.15))
        content = vocab[rng.integers(words_per_page, size=page_tokens - n_bg)]
        content = _unit(content + _noise(rng, content.shape, 0.25))
        page = np.concatenate([bg, content])
        pages.append(page[rng.permutation(page_tokens)])
        words.append(vocab)
    targets = rng.integers(n_pages, size=n_queries)
    queries = []
    n_generic = max(1, query_tokens // 5)
    for target in targets:
        vocab = words[target]
        q_words = vocab[rng.integers(len(vocab), size=query_tokens - n_generic)]
        q_words = _unit(q_words + _noise(rng, q_words.shape, 0.5))
        generic = background[rng.integers(len(background), size=n_generic)]
        generic = _unit(generic + _noise(rng, generic.shape, 0.8))
        queries.append(np.concatenate([q_words, generic]))
    return queries, pages, targets


class StructuredStream:
    """``structured`` for corpora that do not fit in memory: pages are generated one at a time
    (``pages()``, a generator) and only the query targets' vocabularies are kept; a near-duplicate
    copies one of the last ``window`` pages. ``queries()`` (after the pages) builds the queries.
    Deterministic in the seed; the same shape as ``structured``, not the same numbers."""

    def __init__(self, n_pages: int, n_queries: int, page_tokens: int = 1030, query_tokens: int = 20, dim: int = 128,
                 seed: int = 0, background_share: float = 0.45, words_per_page: int = 48,
                 duplicate_share: float = 0.1, duplicate_changed: float = 0.03, window: int = 256):
        self.n_pages, self.page_tokens, self.query_tokens, self.dim = n_pages, page_tokens, query_tokens, dim
        self.seed, self.background_share, self.words_per_page = seed, background_share, words_per_page
        self.duplicate_share, self.duplicate_changed, self.window = duplicate_share, duplicate_changed, window
        rng = np.random.default_rng([seed, 1])
        self.targets = rng.integers(n_pages, size=n_queries)
        self._vocab: dict[int, np.ndarray] = {}

    def pages(self):
        rng = np.random.default_rng([self.seed, 2])
        dim, T = self.dim, self.page_tokens
        n_topics = max(8, self.n_pages // 40)
        topics = _unit(rng.standard_normal((n_topics, dim), dtype=np.float32))
        self.background = _unit(rng.standard_normal((6, dim), dtype=np.float32))
        n_bg = int(round(self.background_share * T))
        wanted = set(int(t) for t in self.targets)
        recent: list[tuple[np.ndarray, np.ndarray]] = []
        for p in range(self.n_pages):
            if recent and rng.random() < self.duplicate_share:
                src_page, vocab = recent[int(rng.integers(len(recent)))]
                page = src_page.copy()
                changed = rng.choice(T, max(1, int(self.duplicate_changed * T)), replace=False)
                page[changed] = _unit(vocab[rng.integers(len(vocab), size=len(changed))]
                                      + _noise(rng, (len(changed), dim), 0.25))
            else:
                t = topics[rng.integers(n_topics)]
                vocab = _unit(t + _noise(rng, (self.words_per_page, dim), 1.0))
                bg = self.background[rng.integers(len(self.background), size=n_bg)]
                bg = _unit(bg + _noise(rng, bg.shape, 0.15))
                content = vocab[rng.integers(self.words_per_page, size=T - n_bg)]
                content = _unit(content + _noise(rng, content.shape, 0.25))
                page = np.concatenate([bg, content])[rng.permutation(T)]
            if p in wanted:
                self._vocab[p] = vocab
            recent.append((page, vocab))
            if len(recent) > self.window:
                recent.pop(0)
            yield page

    def queries(self) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, 3])
        n_generic = max(1, self.query_tokens // 5)
        out = []
        for target in self.targets:
            vocab = self._vocab[int(target)]
            q_words = vocab[rng.integers(len(vocab), size=self.query_tokens - n_generic)]
            q_words = _unit(q_words + _noise(rng, q_words.shape, 0.5))
            generic = self.background[rng.integers(len(self.background), size=n_generic)]
            generic = _unit(generic + _noise(rng, generic.shape, 0.8))
            out.append(np.concatenate([q_words, generic]))
        return out
