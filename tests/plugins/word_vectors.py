"""A multi-vector test encoder with no weights: a page's OCR words, each hashed to a fixed random
unit vector (one vector per distinct word), and a question's words the same way — MaxSim then
counts the question's words found on the page. Its encode_units returns the pages in memory (no
store_dir), so the report writes them to the run's float16 page store itself."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from lookalike.data.schema import resolve_image
from lookalike.io.cache import Cache
from lookalike.retrieval.encoders import Encoder, Vectors
from lookalike.retrieval.encoders import ocr

_WORD = re.compile(r"[a-z0-9]+")


def word_vectors(text: str, dim: int) -> np.ndarray:
    words = sorted(set(_WORD.findall(str(text).lower()))) or [""]
    rows = []
    for w in words:
        seed = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
        v = np.random.default_rng(seed).standard_normal(dim)
        rows.append(v / np.linalg.norm(v))
    return np.asarray(rows, dtype=np.float32)


class WordVectors(Encoder):
    name, provenance, kind = "word-vectors", "pixels", "multi"

    def __init__(self, dim: int = 32, ocr_engine: str = "", **kw):
        super().__init__(dim=int(dim), ocr_engine=ocr_engine or ocr.default_engine(), **kw)

    def encode_units(self, units, base_dir, cache=None):
        paths = [str(resolve_image(p, base_dir)) for p in units["image_path"]]
        texts, stats = ocr.ocr_many(paths, self.settings["ocr_engine"], cache or Cache(), 0, progress=False)
        data = [word_vectors(t, self.settings["dim"]) for t in texts]
        return Vectors(self.id, self.provenance, list(units["unit_id"]), data, "multi", stats)

    def encode_queries(self, texts, ids):
        return Vectors(self.id, "query-text", list(ids), [word_vectors(t, self.settings["dim"]) for t in texts], "multi")
