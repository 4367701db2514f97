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
ENGINES = ("tesseract", "rapidocr")


def tesseract_available() -> bool:
    return shutil.which("tesseract") is not None


def default_engine() -> str:
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


def ocr_many(paths: Sequence[str], engine: str | None = None, cache: Cache | None = None, workers: int = 0,
             progress: bool = True) -> tuple[list[str], dict]:
    """OCR every image (cached by image sha256 + engine id); workers=0 means one per core."""
    engine = engine or default_engine()
    if engine == "tesseract" and not tesseract_available():
        raise EncodeError("OCR engine 'tesseract' needs Debian's tesseract-ocr (make setup installs it), "
                          "or set encode.ocr_engine: rapidocr")
    eid = engine_id(engine)
    cache = cache or Cache()
    shas = [image_sha256(p) for p in paths]
    texts: list[str | None] = [cache.get_text(s, eid) for s in shas]
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
    stats = {"engine": eid, "cached": len(paths) - len(todo), "computed": len(todo), "workers": workers}
    return [t or "" for t in texts], stats


def _progress(iterable, total, enabled, desc):
    """A bar on the terminal (never in a notebook: lookalike.progress) for a long pass."""
    from lookalike import progress as bars

    return bars.bar(iterable, total=total, desc=desc, unit="page") if enabled else iterable
