"""A worked plug-in encoder for lookalike: OCR text of the page, hashed into a fixed-size vector.

Named in a run's parameters by its path (or, once installed as a package, by "module:Class"):

    encode:
      encoders: [ocr-bm25, "examples/plugin_encoder/hashed_ocr.py:HashedOcr"]
      settings:
        hashed-ocr: {dim: 2048, bigrams: true}

What lookalike asks of an encoder class (docs/encoders.md: bring your own encoder):

- ``name``: the system's name in every table and file (here "hashed-ocr");
- ``provenance``: what its page index reads — "pixels" here, since OCR sees only the image;
- ``kind``: "single" (one vector per item), "multi" (a matrix per item, scored by MaxSim) or
  "text" (plain text, for BM25);
- ``revision``: bump it when the output changes, so no stale vector comes back from a cache;
- ``encode_units(units, base_dir, cache)`` -> Vectors over units["unit_id"], in order;
- ``encode_queries(texts, ids)`` -> Vectors in the same space;
- optionally ``encode_captions(texts, ids, cache)`` -> Vectors of provenance "caption-text": the
  caption fields embedded by the same model. With it, the leak ablation builds this system's own
  image / caption / both indexes and gates its image index.

Its constructor receives device, batch_size and progress, then encode.settings[name] as keywords;
keywords passed on to Encoder.__init__ become part of its id, so a changed setting never reuses a
cached vector.

The encoder itself is a hashing bag of words (the hashing trick): each lower-cased word (and each
pair of adjacent words) goes to one of ``dim`` buckets with a sign, both from a fixed hash; counts
are log-scaled and the vector L2-normalised. The same function embeds page text, questions and
captions, so all three meet in one space. It needs no weights, which is why it can ship as an
example; as a retriever it is a plain lexical one.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lookalike.plugin import Cache, Encoder, Vectors, default_ocr_engine, ocr_texts, resolve_image

_WORD = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")


def hashed(text: str, dim: int, bigrams: bool) -> np.ndarray:
    """The text's hashed, signed, log-scaled and L2-normalised bag of words (float32, dim)."""
    words = _WORD.findall(str(text).lower())
    grams = words + ([f"{a} {b}" for a, b in zip(words, words[1:])] if bigrams else [])
    vec = np.zeros(dim, np.float64)
    for gram in grams:
        digest = hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest()
        h = int.from_bytes(digest, "little")
        vec[h % dim] += 1.0 if (h >> 63) & 1 else -1.0
    vec = np.sign(vec) * np.log1p(np.abs(vec))
    norm = np.linalg.norm(vec)
    return (vec / norm if norm > 0 else vec).astype(np.float32)


class HashedOcr(Encoder):
    """Page pixels -> OCR text -> hashed bag of words; questions and captions -> the same hashing."""

    name, provenance, kind = "hashed-ocr", "pixels", "single"
    revision = "1"

    def __init__(self, dim: int = 1024, bigrams: bool = True, ocr_engine: str = "", workers: int = 0, **kw):
        if int(dim) < 16:
            raise ValueError(f"hashed-ocr: dim must be at least 16, got {dim}")
        super().__init__(dim=int(dim), bigrams=bool(bigrams), ocr_engine=ocr_engine or default_ocr_engine(), **kw)
        self.workers = workers

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        dim, bigrams = self.settings["dim"], self.settings["bigrams"]
        return np.stack([hashed(t, dim, bigrams) for t in texts]) if len(texts) else np.zeros((0, dim), np.float32)

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        t0 = time.perf_counter()
        paths = [str(resolve_image(p, base_dir)) for p in units["image_path"]]
        # lookalike's OCR: cached per image content, shared with the built-in OCR systems
        texts, stats = ocr_texts(paths, self.settings["ocr_engine"], cache or Cache(), self.workers,
                           progress=self.progress)
        stats = dict(stats, seconds=round(time.perf_counter() - t0, 2))
        return Vectors(self.id, self.provenance, list(units["unit_id"]), self._embed(texts), "single", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        return Vectors(self.id, "query-text", list(ids), self._embed(list(texts)), "single")

    def encode_captions(self, texts: Sequence[str], ids: Sequence[str], cache: Cache | None = None) -> Vectors:
        return Vectors(self.id, "caption-text", list(ids), self._embed(list(texts)), "single")
