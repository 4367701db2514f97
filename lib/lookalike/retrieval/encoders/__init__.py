"""Encoders: what turns units and queries into vectors (see base.py for the interface).

Offline here: ocr-minilm, ocr-bm25 (pixels -> OCR -> MiniLM / BM25 text), caption-minilm (caption
fields -> MiniLM; provenance caption-text), appearance (pixels -> layout/colour vector).
With weights: colpali (ColPali, ColQwen2, ColIdefics3, ColModernVBert through colpali-engine).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from PIL import Image

from lookalike.data.schema import resolve_image
from lookalike.io.cache import Cache, image_sha256
from lookalike.retrieval.encoders import appearance as _appearance
from lookalike.retrieval.encoders import ocr as _ocr
from lookalike.retrieval.encoders import text as _text
from lookalike.retrieval.encoders.base import PROVENANCES, EncodeError, Encoder, Vectors, resolve_device

__all__ = ["Encoder", "Vectors", "EncodeError", "PROVENANCES", "make_encoder", "ENCODERS", "caption_text",
           "resolve_device"]


def caption_text(row) -> str:
    """The caption fields of a unit as one text: file name words, alt text, caption."""
    name = Path(str(row.get("filename", "") or "")).stem.replace("_", " ").replace("-", " ")
    parts = [name, str(row.get("alt_text", "") or ""), str(row.get("caption", "") or "")]
    return " ".join(p for p in parts if p.strip())


def _paths(units: pd.DataFrame, base_dir: Path) -> list[str]:
    return [str(resolve_image(p, base_dir)) for p in units["image_path"]]


class OcrMiniLM(Encoder):
    """Page pixels -> OCR -> all-MiniLM-L6-v2 (384-dim, normalised)."""

    name, provenance, kind = "ocr-minilm", "pixels", "single"

    def __init__(self, ocr_engine: str = "", workers: int = 0, **kw):
        super().__init__(ocr_engine=ocr_engine or _ocr.default_engine(), **kw)
        self.workers = workers
        self.revision = f"minilm-{_text.model_revision()}"

    def ocr(self, units: pd.DataFrame, base_dir: Path, cache: Cache) -> tuple[list[str], dict]:
        return _ocr.ocr_many(_paths(units, base_dir), self.settings["ocr_engine"], cache, self.workers, self.progress)

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        cache = cache or Cache()
        t0 = time.perf_counter()
        texts, stats = self.ocr(units, base_dir, cache)
        t_ocr = time.perf_counter() - t0
        key_id = f"{self.id}|{stats['engine']}"
        shas = [image_sha256(p) for p in _paths(units, base_dir)]
        vecs = [cache.get_array(s, key_id) for s in shas]
        todo = [i for i, v in enumerate(vecs) if v is None]
        if todo:
            new = _text.embed([texts[i] for i in todo], self.device, self.batch_size, self.progress)
            for i, v in zip(todo, new):
                vecs[i] = v
                cache.put_array(shas[i], key_id, v)
        data = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, 384), np.float32)
        stats.update(ocr_seconds=round(t_ocr, 2), embedded=len(todo), seconds=round(time.perf_counter() - t0, 2))
        return Vectors(key_id, self.provenance, list(units["unit_id"]), data, "single", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        return Vectors(self.id, "query-text", list(ids), _text.embed(list(texts), self.device, self.batch_size), "single")


class OcrBM25(OcrMiniLM):
    """Page pixels -> OCR text, for a BM25 index (bm25s)."""

    name, provenance, kind = "ocr-bm25", "pixels", "text"

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        t0 = time.perf_counter()
        texts, stats = self.ocr(units, base_dir, cache or Cache())
        stats.update(seconds=round(time.perf_counter() - t0, 2))
        return Vectors(f"{self.id}|{stats['engine']}", self.provenance, list(units["unit_id"]), texts, "text", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        return Vectors(self.id, "query-text", list(ids), list(texts), "text")


class CaptionMiniLM(Encoder):
    """The unit's caption fields (file name, alt text, caption) -> all-MiniLM-L6-v2. Provenance caption-text."""

    name, provenance, kind = "caption-minilm", "caption-text", "single"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.revision = f"minilm-{_text.model_revision()}"

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        t0 = time.perf_counter()
        texts = [caption_text(row) for row in units.to_dict("records")]
        # keyed by the caption text itself: the leak check's shuffled captions are texts like any other
        data = _text.embed_cached(texts, cache or Cache(), f"{self.id}|caption-text", self.device, self.batch_size,
                                  self.progress)
        stats = {"seconds": round(time.perf_counter() - t0, 2), "empty_captions": sum(not t for t in texts)}
        return Vectors(self.id, self.provenance, list(units["unit_id"]), data, "single", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str]) -> Vectors:
        return Vectors(self.id, "query-text", list(ids), _text.embed(list(texts), self.device, self.batch_size), "single")


class Appearance(Encoder):
    """Page pixels -> layout / edge / colour vector (see encoders/appearance.py). Pages only."""

    name, provenance, kind = "appearance", "pixels", "single"
    revision = _appearance.VERSION

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        cache = cache or Cache()
        t0 = time.perf_counter()
        vecs, computed = [], 0
        for path in _paths(units, base_dir):
            sha = image_sha256(path)
            v = cache.get_array(sha, self.id)
            if v is None:
                try:
                    with Image.open(path) as im:
                        v = _appearance.appearance_vector(im)
                except OSError as exc:
                    raise EncodeError(f"{path}: cannot read image ({exc})") from exc
                cache.put_array(sha, self.id, v)
                computed += 1
            vecs.append(v)
        data = np.stack(vecs) if vecs else np.zeros((0, 1), np.float32)
        stats = {"computed": computed, "cached": len(vecs) - computed, "seconds": round(time.perf_counter() - t0, 2)}
        return Vectors(self.id, self.provenance, list(units["unit_id"]), data, "single", stats)

    def encode_queries(self, texts, ids):
        raise EncodeError("the appearance encoder encodes pages only (it has no text side); use it for "
                          "nearest-by-appearance and clustering, not for answering queries")


def _colpali(**kw):
    from lookalike.retrieval.encoders.colpali import ColPaliEncoder

    return ColPaliEncoder(**kw)


def _endpoint(**kw):
    from lookalike.retrieval.encoders.endpoint import EndpointEncoder

    return EndpointEncoder(**kw)


# the lazy constructors (their modules import heavy packages) declare what their encoders read,
# as the classes do: systems.declared_provenance asks every registry entry
_colpali.provenance = _endpoint.provenance = "pixels"
_colpali.kind, _endpoint.kind = "multi", "single"

ENCODERS = {"ocr-minilm": OcrMiniLM, "ocr-bm25": OcrBM25, "caption-minilm": CaptionMiniLM,
            "appearance": Appearance, "colpali": _colpali, "endpoint": _endpoint}


def make_encoder(name: str, **settings) -> Encoder:
    if name not in ENCODERS:
        raise EncodeError(f"unknown encoder {name!r}; known: {', '.join(ENCODERS)}")
    return ENCODERS[name](**settings)


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
