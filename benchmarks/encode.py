"""Benchmark: OCR pages/s (1 worker vs every core, each engine) and MiniLM units/s.

    python benchmarks/encode.py [--pages 48] [--engines tesseract,rapidocr]

Pages are demo-corpus renders (960 x 540). Every measurement uses an empty cache, so it times
real work; the ratio printed is all-cores throughput over one worker.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
from lookalike.data import demo
from lookalike.io.cache import Cache  # noqa: E402
from lookalike.retrieval.encoders import ocr, text  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=48)
    ap.add_argument("--engines", default="tesseract,rapidocr")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        corpus = demo.generate("ci", 7, Path(tmp) / "corpus")
        paths = [str(Path(tmp) / p) for p in corpus.units["image_path"][: args.pages]]
        print(f"{len(paths)} demo pages, {cores} cores")
        texts = None
        for engine in [e for e in args.engines.split(",") if e]:
            if engine == "tesseract" and not ocr.tesseract_available():
                print("tesseract: not installed, skipped")
                continue
            rates = {}
            for workers in (1, cores):
                t0 = time.perf_counter()
                texts, _ = ocr.ocr_many(paths, engine, Cache(Path(tmp) / f"cache-{engine}-{workers}"), workers, False)
                rates[workers] = len(paths) / (time.perf_counter() - t0)
            print(f"OCR {engine:<10} 1 worker: {rates[1]:6.2f} pages/s   {cores} workers: {rates[cores]:6.2f} pages/s   "
                  f"({rates[cores] / rates[1]:.2f}x)")
        sample = texts or list(corpus.units["caption"][: args.pages])
        text.embed(sample[:4])                                    # load the model outside the timer
        reps = max(1, 512 // len(sample))
        batch = sample * reps
        t0 = time.perf_counter()
        text.embed(batch, batch_size=64)
        print(f"MiniLM (all-MiniLM-L6-v2, CPU): {len(batch) / (time.perf_counter() - t0):.0f} units/s "
              f"({len(batch)} OCR texts)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
