"""Encoders: what turns units and queries into vectors (see base.py for the interface).

Offline here: ocr-minilm, ocr-bm25 (pixels -> OCR -> MiniLM / BM25 text), caption-minilm (caption
fields -> MiniLM; provenance caption-text), appearance (pixels -> layout/colour vector).
With weights: colpali (ColPali, ColQwen2, ColIdefics3, ColModernVBert through colpali-engine),
bi (their single-vector Bi* twins), clip (CLIP / SigLIP / SigLIP-2 through transformers).
With a server: endpoint (an OpenAI-compatible /v1/embeddings server).
Your own: a plug-in named by import path, "package.module:Class" or "path/to/file.py:Class"
(``encoder_class``); it declares name, provenance and kind like the built-in classes.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from lookalike.data.schema import resolve_image
from lookalike.io.cache import Cache, image_sha256
from lookalike import registry
from lookalike.registry import Registry
from lookalike.retrieval.encoders import appearance as _appearance
from lookalike.retrieval.encoders import ocr as _ocr
from lookalike.retrieval.encoders import text as _text
from lookalike.retrieval.encoders.base import PROVENANCES, EncodeError, Encoder, Vectors, resolve_device
from lookalike.retrieval.encoders.base import pending_pages as _pending_pages

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
    distributable = reads_ocr = True        # retrieval.engine: runs on Ray, after its OCR stage

    def __init__(self, ocr_engine: str = "", workers: int = 0, text_source: str = "auto", **kw):
        super().__init__(ocr_engine=ocr_engine or _ocr.default_engine(), **kw)
        self.workers = workers
        # where page text comes from (encode.text_source); kept out of the settings that make the encoder's
        # id: the texts' own id (ocr.texts_id) joins every cache key built on them instead
        self.text_source = text_source
        self.revision = f"minilm-{_text.model_revision()}"

    def ocr(self, units: pd.DataFrame, base_dir: Path, cache: Cache) -> tuple[list[str], dict]:
        return _ocr.ocr_many(_paths(units, base_dir), self.settings["ocr_engine"], cache, self.workers, self.progress,
                             text_source=self.text_source)

    def texts_id(self, units: pd.DataFrame, base_dir: Path) -> str:
        paths = _paths(units, base_dir)
        layers = _ocr.text_layers(paths, self.text_source)
        sources = [_ocr.source_label(self.settings["ocr_engine"], self.text_source, x is not None) for x in layers]
        return _ocr.texts_id(sources, self.settings["ocr_engine"])

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
            new = _text.embed([texts[i] for i in todo], self.device, self.progress)
            for i, v in zip(todo, new):
                vecs[i] = v
                cache.put_array(shas[i], key_id, v)
        data = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, 384), np.float32)
        stats.update(ocr_seconds=round(t_ocr, 2), embedded=len(todo), seconds=round(time.perf_counter() - t0, 2))
        return Vectors(key_id, self.provenance, list(units["unit_id"]), data, "single", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str], cache: Cache | None = None) -> Vectors:
        return _minilm_queries(self, texts, ids, cache)

    def pending(self, units: pd.DataFrame, base_dir: Path, cache: Cache) -> list[int]:
        key_id = f"{self.id}|{self.texts_id(units, base_dir)}"
        return _pending_pages(units, base_dir, cache, key_id)


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

    def pending(self, units, base_dir, cache):
        return None          # its work is the OCR, which the engine plans itself


def _minilm_queries(enc: Encoder, texts: Sequence[str], ids: Sequence[str], cache: Cache | None) -> Vectors:
    """A MiniLM encoder's query vectors. With a cache, each text's vector is kept under the text's
    hash (text.embed_cached): a vector is a function of its text alone, so a warm run reads the
    same bits a cold one computes, and loads no model when every text is held."""
    texts = list(texts)
    data = (_text.embed(texts, enc.device) if cache is None
            else _text.embed_cached(texts, cache, f"{enc.id}|query-text", enc.device))
    return Vectors(enc.id, "query-text", list(ids), data, "single")


class CaptionMiniLM(Encoder):
    """The unit's caption fields (file name, alt text, caption) -> all-MiniLM-L6-v2. Provenance caption-text."""

    name, provenance, kind = "caption-minilm", "caption-text", "single"
    distributable = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.revision = f"minilm-{_text.model_revision()}"

    def encode_units(self, units: pd.DataFrame, base_dir: Path, cache: Cache | None = None) -> Vectors:
        t0 = time.perf_counter()
        texts = [caption_text(row) for row in units.to_dict("records")]
        # keyed by the caption text itself: the leak check's shuffled captions are texts like any other
        data = _text.embed_cached(texts, cache or Cache(), f"{self.id}|caption-text", self.device, self.progress)
        stats = {"seconds": round(time.perf_counter() - t0, 2), "empty_captions": sum(not t for t in texts)}
        return Vectors(self.id, self.provenance, list(units["unit_id"]), data, "single", stats)

    def encode_queries(self, texts: Sequence[str], ids: Sequence[str], cache: Cache | None = None) -> Vectors:
        return _minilm_queries(self, texts, ids, cache)

    def pending(self, units: pd.DataFrame, base_dir: Path, cache: Cache) -> list[int]:
        key_id = f"{self.id}|caption-text"
        return [i for i, row in enumerate(units.to_dict("records"))
                if not cache.holds_array(_text.text_sha(caption_text(row)), key_id)]


class Appearance(Encoder):
    """Page pixels -> layout / edge / colour vector (see encoders/appearance.py). Pages only."""

    name, provenance, kind = "appearance", "pixels", "single"
    distributable = True
    answers_queries = False                  # a page's look, with no text side: it ranks nothing for a question
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

    def pending(self, units: pd.DataFrame, base_dir: Path, cache: Cache) -> list[int]:
        return _pending_pages(units, base_dir, cache, self.id)

    def encode_queries(self, texts, ids):
        raise EncodeError("the appearance encoder encodes pages only (it has no text side); use it for "
                          "nearest-by-appearance and clustering, not for answering queries")


def _colpali(**kw):
    from lookalike.retrieval.encoders.colpali import ColPaliEncoder

    return ColPaliEncoder(**kw)


def _endpoint(**kw):
    from lookalike.retrieval.encoders.endpoint import EndpointEncoder

    return EndpointEncoder(**kw)


def _bi(**kw):
    from lookalike.retrieval.encoders.colpali import BiEncoder

    return BiEncoder(**kw)


def _clip(**kw):
    from lookalike.retrieval.encoders.clip import ClipEncoder

    return ClipEncoder(**kw)


@dataclass(frozen=True)
class Setting:
    """One setting an encoder is built with: its keyword (the key under encode.settings.<system>), the
    type its value must have, and its default."""

    name: str
    type: type
    default: object

    def check(self, value, where: str) -> None:
        """Refuse a value of another type, naming where it was set, by the parameters' rule
        (params.compatible: a bool is not a number here, and a whole number is a float's value too)."""
        from lookalike.params import compatible

        if self.type not in (bool, int, float, str) or compatible(self.type(), value):
            return
        raise EncodeError(f"{where}.{self.name}: expected {_TYPE_WORDS.get(self.type, self.type.__name__)}, "
                          f"got {value!r}")


_TYPE_WORDS = {str: "text (str)", int: "a whole number (int)", float: "a number (float)", bool: "true or false (bool)"}
# keywords every encoder takes that are not its settings: the base class's progress bar switch
NOT_SETTINGS = frozenset({"self", "progress"})


def declared_settings(cls) -> dict[str, Setting]:
    """The settings an encoder class declares: the named keywords of the __init__ methods of it and its
    bases (the subclass's default wins), each with the type of its default (or its annotation when the
    default is None). What lookalike checks a run's encode.settings against."""
    out: dict[str, Setting] = {}
    for klass in reversed(cls.__mro__):
        init = klass.__dict__.get("__init__")
        if init is None or klass is object:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name in NOT_SETTINGS:
                continue
            default = None if p.default is p.empty else p.default
            kind = type(default) if default is not None else _annotated(p.annotation)
            out[p.name] = Setting(p.name, kind, default)
    return out


def _annotated(annotation) -> type:
    """The first of str, int, float, bool an annotation (a string under postponed evaluation) names."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    for kind in (bool, int, float, str):
        if re.search(rf"\b{kind.__name__}\b", text):
            return kind
    return object


# what an encoder that reads OCR text is built with: the OCR engine, its worker processes, and whether a
# PDF page's text layer stands in for OCR
OCR_RUN_KEYS = (("ocr_engine", "ocr_engine"), ("workers", "workers"), ("text_source", "text_source"))


@dataclass(frozen=True)
class EncoderSpec:
    """A built-in encoder: how to make it (its class, or a constructor that imports a heavy module only when
    called) and what it declares — what it reads (provenance), its vectors' kind, whether it also embeds
    caption text into its query space (the leak ablation's caption index for that model), whether
    retrieval.engine may run it on Ray, whether it reads OCR text, and which of the run's encode.*
    parameters it is built with (``run_keys``: its keyword, then the run settings' key —
    retrieval.systems.run_settings — a dotted key reading into a nested one), and the settings it takes
    (``settings``: key, type and default of each; a built-in class's come from its constructor, and an
    encoder made on first use — its module imports heavy packages — names them here, which a test holds
    to the class's constructor). Calling the spec makes the encoder."""

    name: str
    make: Callable[..., Encoder]
    provenance: str
    kind: str
    captions: bool = False
    distributable: bool = False
    reads_ocr: bool = False
    run_keys: tuple[tuple[str, str], ...] = ()
    answers_queries: bool = True
    settings: tuple[Setting, ...] = ()

    def __call__(self, **settings) -> Encoder:
        return self.make(**settings)

    def declared(self) -> dict[str, Setting]:
        """The settings this encoder takes, by key."""
        return {s.name: s for s in self.settings}

    @classmethod
    def of(cls, enc: type) -> EncoderSpec:
        """The spec a built-in class declares with its class attributes."""
        reads_ocr = bool(getattr(enc, "reads_ocr", False))
        return cls(enc.name, enc, enc.provenance, enc.kind,
                   bool(getattr(enc, "captions", callable(getattr(enc, "encode_captions", None)))),
                   bool(getattr(enc, "distributable", False)), reads_ocr, OCR_RUN_KEYS if reads_ocr else (),
                   bool(getattr(enc, "answers_queries", True)), tuple(declared_settings(enc).values()))


ENCODERS: Registry[EncoderSpec] = Registry("encoder")
for _cls in (OcrMiniLM, OcrBM25, CaptionMiniLM, Appearance):
    ENCODERS.register(EncoderSpec.of(_cls))
# the page encoders whose modules import heavy packages: made on first use; the endpoint's work is a
# server's, so it does not run on Ray
_BASE = (Setting("device", str, "auto"), Setting("batch_size", int, 32))
_MODEL = (*_BASE, Setting("model", str, ""), Setting("family", str, ""), Setting("pool_factor", int, 1))
ENCODERS.register(EncoderSpec("colpali", _colpali, "pixels", "multi", captions=False, distributable=True,
                              run_keys=(("model", "colpali_model"), ("family", "colpali_family")), settings=_MODEL))
ENCODERS.register(EncoderSpec("bi", _bi, "pixels", "single", captions=True, distributable=True, settings=_MODEL))
ENCODERS.register(EncoderSpec("clip", _clip, "pixels", "single", captions=True, distributable=True,
                              settings=(*_BASE, Setting("model", str, ""), Setting("max_length", int, 64))))
ENCODERS.register(EncoderSpec("endpoint", _endpoint, "pixels", "single", captions=True, distributable=False,
                              run_keys=tuple((k, f"endpoint.{k}") for k in ("url", "model", "api_key_env", "dimensions",
                                                                           "image_prompt")),
                              settings=(*_BASE, Setting("url", str, ""), Setting("model", str, ""),
                                        Setting("api_key_env", str, "LOOKALIKE_EMBEDDINGS_API_KEY"),
                                        Setting("dimensions", int, 0), Setting("image_prompt", str, ""),
                                        Setting("timeout_s", float, 60.0), Setting("retries", int, 4),
                                        Setting("backoff_s", float, 1.0))))

KINDS = ("single", "multi", "text")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
PLUGIN_HOW_TO = registry.PLUGIN_HOW_TO
is_plugin = registry.is_plugin


def encoder_class(spec: str):
    """The class (or lazy constructor) an encode.encoders entry names: a built-in name, or a plug-in
    by import path, imported once and checked (``check_plugin``)."""
    spec = str(spec)
    if spec in ENCODERS:
        return ENCODERS[spec]
    if not is_plugin(spec):
        raise EncodeError(f"unknown encoder {spec!r}; known: {', '.join(ENCODERS)}; or {PLUGIN_HOW_TO}")
    return _plugin(spec)


class PluginRefused(EncodeError, registry.PluginError):
    """An encoder plug-in that does not load or is not an encoder (registry.load_plugin's refusals)."""


@functools.cache
def _plugin(spec: str):
    from lookalike.params import PROJECT_ROOT

    return registry.load_plugin(spec, "encoder", [PROJECT_ROOT], lambda cls: check_plugin(cls, spec), PluginRefused)


def check_plugin(cls, spec: str = "") -> None:
    """What lookalike needs of an encoder class, each failure named: a name (the system's name in
    every table and file, not a built-in one), a provenance from PROVENANCES, a kind from KINDS,
    callable encode_units and encode_queries (and encode_captions, when present)."""
    where = f"encoder {spec or cls!r}"
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name == Encoder.name:
        raise EncodeError(f"{where}: set a class attribute name (letters, digits, '.', '_', '-'): it names the "
                          f"system in every table and file; got {name!r}")
    if name in ENCODERS:
        raise EncodeError(f"{where}: name {name!r} is a built-in encoder's; choose another")
    if getattr(cls, "provenance", None) not in PROVENANCES:
        raise EncodeError(f"{where}: provenance must be one of {', '.join(PROVENANCES)} (what its index reads), "
                          f"got {getattr(cls, 'provenance', None)!r}")
    if getattr(cls, "kind", None) not in KINDS:
        raise EncodeError(f"{where}: kind must be one of {', '.join(KINDS)}, got {getattr(cls, 'kind', None)!r}")
    for method in ("encode_units", "encode_queries"):
        if not callable(getattr(cls, method, None)):
            raise EncodeError(f"{where}: no {method} method (docs/encoders.md: bring your own encoder)")
        if getattr(cls, method) is getattr(Encoder, method):
            raise EncodeError(f"{where}: {method} is the base class's, which encodes nothing; implement it")


def system_name(spec: str) -> str:
    """The system an encode.encoders entry gives: the built-in name, or the plug-in's declared name."""
    return encoder_class(spec).name if is_plugin(spec) else str(spec)


def answers_queries(spec: str) -> bool:
    """Whether the encoder has a text side, so its system ranks units for a question (a plug-in must:
    it implements encode_queries); appearance does not."""
    found = ENCODERS.get(system_name(spec))
    return found.answers_queries if found is not None and not is_plugin(spec) else True


def has_captions(spec: str) -> bool:
    """Whether the encoder also embeds caption text into its query space (encode_captions)."""
    cls = encoder_class(spec)
    return bool(getattr(cls, "captions", callable(getattr(cls, "encode_captions", None))))


def make_encoder(spec: str, **settings) -> Encoder:
    """The encoder a name or plug-in spec gives, built with these settings (constructor keywords); a plug-in
    whose constructor raises is named with its error (registry.construct)."""
    cls = encoder_class(spec)
    return registry.construct(cls, "encoder", str(spec), PluginRefused, **settings) if is_plugin(spec) else cls(**settings)


def checked(vectors: Vectors, ids: Sequence[str], who: str, provenance: str | None = None) -> Vectors:
    """An encoder's output, checked before anything indexes it: one item per id, in order, of its
    declared kind and provenance — a plug-in that drops or reorders a unit is named, never trusted."""
    if not isinstance(vectors, Vectors):
        raise EncodeError(f"{who}: returned {type(vectors).__name__}, expected lookalike Vectors")
    got = list(vectors.ids)
    failed = {str(u) for u, _ in vectors.stats.get("failed", [])}     # reported by the encoder, left out
    ids = [i for i in ids if i not in failed]
    if got != list(ids):
        missing = [i for i in ids if i not in set(got)]
        raise EncodeError(f"{who}: returned {len(got)} ids for {len(ids)} items"
                          + (f"; missing {missing[:3]}" if missing else "; in another order"))
    if vectors.kind not in KINDS:
        raise EncodeError(f"{who}: kind {vectors.kind!r} is not one of {', '.join(KINDS)}")
    if vectors.kind == "single":
        data = np.asarray(vectors.data)
        if data.ndim != 2 or len(data) != len(got):
            raise EncodeError(f"{who}: single-vector data must be (items, dim), got shape {data.shape}")
        if not np.isfinite(data).all():
            bad = [got[i] for i in np.flatnonzero(~np.isfinite(data).all(axis=1))[:3]]
            raise EncodeError(f"{who}: non-finite values in the vectors of {bad}")
    elif len(vectors.data) != len(got):
        raise EncodeError(f"{who}: {len(vectors.data)} items of data for {len(got)} ids")
    if provenance is not None and vectors.provenance != provenance:
        raise EncodeError(f"{who}: vectors declare provenance {vectors.provenance!r}, the encoder {provenance!r}")
    return vectors
