"""A test encoder: a page's mean colour and a little texture, computed slowly (a fixed sleep per
page) through encoders.base.cached_pages, so a test can kill an encode part-way. Distributable:
it runs on the Ray engine."""

from __future__ import annotations

import time

import numpy as np

from lookalike.retrieval.encoders import Encoder, Vectors
from lookalike.retrieval.encoders.base import cached_pages


class SlowPages(Encoder):
    name, provenance, kind = "slow-pages", "pixels", "single"
    distributable = True

    def __init__(self, seconds: float = 0.5, **kw):
        super().__init__(seconds=float(seconds), **kw)

    def _embed(self, images):
        out = []
        for im in images:
            time.sleep(self.settings["seconds"])
            a = np.asarray(im, dtype=np.float32) / 255.0
            out.append(np.concatenate([a.mean(axis=(0, 1)), a.std(axis=(0, 1)), [1.0]]))
        return out

    def encode_units(self, units, base_dir, cache=None):
        ids, vecs, stats = cached_pages(self, units, base_dir, cache, self._embed)
        data = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, 7), np.float32)
        return Vectors(self.id, self.provenance, ids, data, "single", stats)

    def encode_queries(self, texts, ids):
        return Vectors(self.id, "query-text", list(ids), np.ones((len(ids), 7), np.float32), "single")
