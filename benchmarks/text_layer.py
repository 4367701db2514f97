"""Page text from a PDF's own text layer against OCR of the same pages, in one run.

    python benchmarks/text_layer.py                      # generated born-digital filings (matplotlib)
    python benchmarks/text_layer.py --folder DIR --pages 1-40

Reads every page's text layer the way stage 01 does (pypdfium2, beside a render at --dpi) and
times that alone, then OCRs the same rendered pages with tesseract (one process per core, as stage
02 does), and reports pages/s for both, how many pages the usability rule accepts, and a BM25
agreement check: each page's text-layer text retrieves its own OCR text at rank 1 (a sanity check
that both read the same page). Last line: ``layer_pages_per_s=A ocr_pages_per_s=B speedup=A/B``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def generated(folder: Path, docs: int, pages: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    for d in range(docs):
        with matplotlib.rc_context({"pdf.fonttype": 42}), PdfPages(folder / f"filing{d:02d}.pdf") as pdf:
            for p in range(pages):
                fig = plt.figure(figsize=(8.5, 11))
                fig.text(0.05, 0.96, f"Filing {d} — page {p + 1}: statement of operations", fontsize=12)
                for j in range(45):
                    fig.text(0.05, 0.93 - j * 0.02, f"Line {j}: revenue of segment {d}-{p}-{j} was {d * 1000 + p * 45 + j} "
                             "thousand dollars for the quarter", fontsize=8)
                pdf.savefig(fig)
                plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", default="", help="a folder of PDFs (default: generated born-digital filings)")
    ap.add_argument("--docs", type=int, default=4)
    ap.add_argument("--pages", default="", help="pages per document: a count for generated PDFs, or a 1-based "
                                                "range such as 1-40 for --folder")
    ap.add_argument("--dpi", type=int, default=110)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-ocr", action="store_true", help="time the text layer only")
    args = ap.parse_args(argv)

    import pypdfium2 as pdfium

    from lookalike.io import ingest, text_layer
    from lookalike.retrieval.encoders import ocr

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.folder:
            folder = Path(args.folder)
            wanted = ingest.parse_pages(args.pages)
        else:
            folder = tmp / "pdfs"
            folder.mkdir()
            generated(folder, args.docs, int(args.pages or 12))
            wanted = None
        loaded = ingest.pdf_folder(folder, tmp / "run" / "corpus", dpi=args.dpi, pages=args.pages if args.folder else "")
        images = [tmp / "run" / p for p in loaded.units["image_path"]]
        print(f"{len(images)} pages from {loaded.units['doc_id'].nunique()} PDFs in {folder} "
              f"({len(loaded.skipped)} skipped)")

        # the text layer alone: open each PDF, read each page's text, apply the rule (what stage 01 adds)
        times, usable = [], 0
        for _ in range(max(1, args.repeat)):
            usable = 0
            t0 = time.perf_counter()
            for path in sorted(folder.glob("*.pdf")):
                pdf = pdfium.PdfDocument(str(path))
                try:
                    for i in range(len(pdf)):
                        if wanted is not None and i + 1 not in wanted:
                            continue
                        page = pdf[i]
                        tp = page.get_textpage()
                        text = " ".join(tp.get_text_range().split())
                        tp.close()
                        usable += not text_layer.text_layer_problem(text, *page.get_size())
                finally:
                    pdf.close()
            times.append(time.perf_counter() - t0)
        layer_rate = len(images) / statistics.median(times)
        print(f"text layer: {usable} of {len(images)} pages usable; {layer_rate:.1f} pages/s "
              f"(median of {len(times)} rounds, one process)")
        if args.no_ocr or not ocr.tesseract_available():
            print("OCR not timed" + ("" if args.no_ocr else " (tesseract is not installed)"))
            print(f"layer_pages_per_s={layer_rate:.1f} ocr_pages_per_s=nan speedup=nan")
            return 0
        from lookalike.io.cache import Cache

        t0 = time.perf_counter()
        ocr_texts, _ = ocr.ocr_many([str(p) for p in images], "tesseract", Cache(tmp / "cache"), progress=False,
                                    text_source="ocr")
        ocr_rate = len(images) / (time.perf_counter() - t0)
        layer_texts, stats = ocr.ocr_many([str(p) for p in images], "tesseract", Cache(tmp / "cache"), progress=False,
                                          text_source="auto")
        print(f"OCR (tesseract, {stats['workers']} processes): {ocr_rate:.2f} pages/s (one round: OCR is cached after it)")
        import bm25s

        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(ocr_texts, show_progress=False), show_progress=False)
        hits, _ = retriever.retrieve(bm25s.tokenize(layer_texts, show_progress=False), k=1, show_progress=False)
        own = sum(int(hits[i][0]) == i for i in range(len(images)))
        print(f"each page's text-layer text finds its own OCR text first by BM25: {own} of {len(images)}")
        print(f"layer_pages_per_s={layer_rate:.1f} ocr_pages_per_s={ocr_rate:.2f} speedup={layer_rate / ocr_rate:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
