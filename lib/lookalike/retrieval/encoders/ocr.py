"""OCR of page pixels, in parallel worker processes, cached per image.

Engines:
  tesseract (default): Debian tesseract-ocr + pytesseract. On the demo pages it reads titles,
    table cells and labels with word spaces; about 1.5 pages/s per core here (benchmarks/encode.py).
  rapidocr: rapidocr-onnxruntime, models inside the wheel (works from pip alone). Here it reads
    the characters right but drops the spaces between English words ("Revenuebyregion"), which
    hurts BM25 and embeddings, and it is slower (about 0.7 pages/s on 2 cores).
Both see the pixels only: the unit's caption fields never reach them.

Preprocessing for tesseract (``PREP_VERSION``): grey scale; rows whose median is dark (title
bands, table headers) are inverted so light-on-dark text becomes dark-on-light; then a fixed
threshold. Tesseract otherwise skips white text on coloured bands.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageOps

from lookalike.io.cache import Cache, image_sha256
from lookalike.retrieval.encoders.base import EncodeError

PREP_VERSION = "2"
OCR_BAR_PAGES = 8          # OCR passes of at least this many pages draw a bar (lookalike.progress)
ENGINES = ("tesseract", "rapidocr")


def tesseract_available() -> bool:
    """Whether the tesseract binary is on PATH."""
    return shutil.which("tesseract") is not None


def default_engine() -> str:
    """tesseract where it is installed, else rapidocr (a pip package)."""
    return "tesseract" if tesseract_available() else "rapidocr"


def _prepare(img: Image.Image) -> Image.Image:
    a = np.asarray(ImageOps.grayscale(img), dtype=np.uint8).copy()
    dark = np.median(a, axis=1) < 128
    a[dark] = 255 - a[dark]
    return Image.fromarray(np.where(a > 150, 255, 0).astype(np.uint8))


@lru_cache(maxsize=1)
def _rapid():
    from rapidocr_onnxruntime import RapidOCR

    # det_limit_type="max" avoids the default resizing that misreads thin strips of text.
    return RapidOCR(det_limit_type="max", det_limit_side_len=960)


def engine_id(engine: str) -> str:
    """The engine with its version and this module's preprocessing version: part of every OCR cache key."""
    if engine == "tesseract":
        import pytesseract

        return f"tesseract-{pytesseract.get_tesseract_version()}-psm11-prep{PREP_VERSION}"
    if engine == "rapidocr":
        from importlib.metadata import version

        return f"rapidocr-{version('rapidocr-onnxruntime')}-max960"
    raise EncodeError(f"unknown OCR engine {engine!r}; expected one of {ENGINES}")


def ocr_image(path: str, engine: str) -> str:
    """Text read off one image, whitespace-normalised, in reading order of the engine."""
    try:
        with Image.open(path) as im:
            im.load()
            img = im.convert("RGB")
    except Exception as exc:
        raise EncodeError(f"{path}: cannot read image for OCR ({type(exc).__name__}: {exc})") from exc
    if engine == "tesseract":
        import pytesseract

        text = pytesseract.image_to_string(_prepare(img), config="--psm 11")
    elif engine == "rapidocr":
        result, _ = _rapid()(np.asarray(img))
        text = " ".join(r[1] for r in (result or []))
    else:
        raise EncodeError(f"unknown OCR engine {engine!r}; expected one of {ENGINES}")
    return " ".join(text.split())


# The pool's workers are spawned, never forked: ocr_many runs inside stage kernels, which hold threads
# (the kernel's heartbeat and message threads, torch's pools). A forked child inherits locks those
# threads held at the moment of the fork and can wait on them forever, hanging the stage with no error.
# A spawned worker starts a fresh interpreter and imports only this module (well under a second).
POOL_CONTEXT = multiprocessing.get_context("spawn")


def _worker_init():
    os.environ["OMP_THREAD_LIMIT"] = "1"     # one tesseract thread per worker process


def _ocr_task(args):
    path, engine = args
    return ocr_image(path, engine)


TEXT_SOURCES = ("auto", "text-layer", "ocr")


def text_layers(paths: Sequence[str], text_source: str = "auto") -> list[str | None]:
    """Each page's usable PDF text layer (kept beside its render by stage 01), or None where the page
    has none or text_source says OCR ('ocr': always OCR)."""
    if text_source not in TEXT_SOURCES:
        raise EncodeError(f"encode.text_source {text_source!r} is not one of {', '.join(TEXT_SOURCES)}")
    if text_source == "ocr":
        return [None] * len(paths)
    from lookalike.io.text_layer import read_text_layer

    return [read_text_layer(p) for p in paths]


def source_label(engine: str, text_source: str, has_layer: bool) -> str:
    """What a page's text is read from: 'text-layer', 'ocr:<engine>' or 'none' (text_source
    'text-layer' on a page without a usable layer)."""
    if has_layer and text_source != "ocr":
        return "text-layer"
    return "none" if text_source == "text-layer" else f"ocr:{engine}"


def texts_id(sources: Sequence[str], engine: str, eid: str | None = None) -> str:
    """The id of a set of page texts (part of every cache key built on them): the OCR engine's id
    alone when no page read a text layer, so a corpus without one keys exactly as before; 'text-layer',
    'text-layer+<engine id>' when some or all did; 'none' when nothing was read. eid: the engine's id
    when the caller has it already (asking runs the engine's binary)."""
    layered = "text-layer" in sources
    ocr = any(src.startswith("ocr:") for src in sources)
    if eid is None:
        eid = engine_id(engine) if ocr or not sources else ""
    return (eid if not layered else "text-layer" if not ocr else f"text-layer+{eid}") or "none"


def ocr_many(paths: Sequence[str], engine: str | None = None, cache: Cache | None = None, workers: int = 0,
             progress: bool = True, text_source: str = "auto") -> tuple[list[str], dict]:
    """Each page's text: its PDF text layer where it has a usable one (text_source 'auto' or
    'text-layer'), else OCR of its pixels (cached by image sha256 + engine id; workers=0 means one
    per core) — or nothing with 'text-layer'. stats['engine'] names what the texts were read with
    (the OCR engine's id, 'text-layer', or both), stats['sources'] counts pages per source."""
    engine = engine or default_engine()
    layers = text_layers(paths, text_source)
    sources = [source_label(engine, text_source, layer is not None) for layer in layers]
    needs_ocr = any(src.startswith("ocr:") for src in sources)
    if needs_ocr and engine == "tesseract" and not tesseract_available():
        raise EncodeError("OCR engine 'tesseract' needs Debian's tesseract-ocr (make setup installs it), "
                          "or set encode.ocr_engine: rapidocr")
    eid = engine_id(engine) if needs_ocr or not paths else ""
    cache = cache or Cache()
    shas = [image_sha256(p) if src.startswith("ocr:") else "" for p, src in zip(paths, sources)]
    texts: list[str | None] = [layer if layer is not None else "" if src == "none" else cache.get_text(sha, eid)
                               for layer, src, sha in zip(layers, sources, shas)]
    todo = [i for i, t in enumerate(texts) if t is None]
    workers = workers or (os.cpu_count() or 1)
    if todo:
        jobs = [(str(paths[i]), engine) for i in todo]
        # Worker processes even for one worker: each runs tesseract single-threaded (OMP_THREAD_LIMIT=1),
        # which is several times faster per core than tesseract's own OpenMP threads here.
        if (workers > 1 or engine == "tesseract") and len(todo) > 1:
            with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=POOL_CONTEXT,
                                     initializer=_worker_init) as pool:
                results = _progress(pool.map(_ocr_task, jobs, chunksize=4), len(jobs), progress, "OCR")
                results = list(results)
        else:
            results = [ocr_image(p, e) for p, e in _progress(jobs, len(jobs), progress, "OCR")]
        for i, text in zip(todo, results):
            texts[i] = text
            cache.put_text(shas[i], eid, text)
    counts = {src: sources.count(src) for src in sorted(set(sources))}
    layered = counts.get("text-layer", 0)
    stats = {"engine": texts_id(sources, engine, eid), "cached": len(paths) - len(todo) - layered - counts.get("none", 0),
             "computed": len(todo), "workers": workers, "sources": counts}
    return [t or "" for t in texts], stats


def _progress(iterable, total, enabled, desc):
    """A bar on the terminal (never in a notebook: lookalike.progress) for a long pass."""
    from lookalike import progress as bars

    # OCR takes about a second a page per core: a pass of a few pages already keeps a person waiting
    return bars.bar(iterable, total=total, desc=desc, unit="page", min_total=OCR_BAR_PAGES) if enabled else iterable
