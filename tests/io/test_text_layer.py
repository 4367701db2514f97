"""A PDF page's own text (its text layer) read instead of OCR: the rule for a usable layer, the
layer kept beside the render, each policy of encode.text_source, and the units' text_source column.
PDFs with a text layer are drawn with matplotlib (TrueType fonts keep their text extractable); the
example generator's PDFs are images only, so they stand for scanned pages."""

from __future__ import annotations

import pandas as pd
import pytest
from PIL import Image

from lookalike.io import ingest
from lookalike.io.cache import Cache
from lookalike.retrieval import systems
from lookalike.retrieval.encoders import ocr


def born_digital_pdf(path, pages=2, lines=40):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with matplotlib.rc_context({"pdf.fonttype": 42}), PdfPages(path) as pdf:
        for i in range(pages):
            fig = plt.figure(figsize=(8.5, 11))
            for j in range(lines):
                fig.text(0.05, 0.95 - j * 0.022, f"Revenue for 2023 was {100 * i + j} million in region {j}", fontsize=9)
            pdf.savefig(fig)
            plt.close(fig)
    return path


def scanned_pdf(path):
    Image.new("RGB", (612, 792), "white").save(path, save_all=True, append_images=[Image.new("RGB", (612, 792), "grey")])
    return path


@pytest.mark.parametrize("text, problem", [
    ("", "no text layer"),
    ("12", "characters on a 94 square-inch page"),
    ("\ufffd" * 200, "replacement, control or private-use"),
    ("a" * 200, ""),
])
def test_the_rule_for_a_usable_text_layer(text, problem):
    got = ingest.text_layer_problem(text, 612, 792)          # a letter page: 94 square inches
    assert (problem in got) if problem else got == ""


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    born_digital_pdf(folder / "filing.pdf")
    scanned_pdf(folder / "scan.pdf")
    loaded = ingest.pdf_folder(folder, tmp_path / "run" / "corpus", dpi=40)
    return loaded.units, tmp_path / "run"


def test_the_layer_is_kept_beside_the_render_only_where_it_is_usable(corpus):
    units, run = corpus
    paths = {u: run / p for u, p in zip(units["unit_id"], units["image_path"])}
    assert sorted(units["unit_id"]) == ["filing:1", "filing:2", "scan:1", "scan:2"]
    assert "Revenue for 2023 was 105 million in region 5" in ingest.read_text_layer(paths["filing:2"])
    assert ingest.read_text_layer(paths["scan:1"]) is None
    assert systems.text_sources(units, run, "auto", "tesseract") == [
        "text-layer" if u.startswith("filing") else "ocr:tesseract" for u in units["unit_id"]]


class NoOcr(Exception):
    pass


def test_each_policy_reads_what_it_says(corpus, monkeypatch, tmp_path):
    units, run = corpus
    paths = [str(run / p) for p in units["image_path"]]
    filing = [u.startswith("filing") for u in units["unit_id"]]
    calls = []
    monkeypatch.setattr(ocr, "ocr_image", lambda path, engine: calls.append(path) or "ocr text")
    monkeypatch.setattr(ocr, "engine_id", lambda engine: f"{engine}-test")
    monkeypatch.setattr(ocr, "tesseract_available", lambda: True)
    cache = Cache(tmp_path / "cache")
    # auto: the layer where there is one, OCR for the scanned pages only (one worker: no process pool)
    texts, stats = ocr.ocr_many(paths, "rapidocr", cache, workers=1, progress=False, text_source="auto")
    assert [("Revenue" in t) for t in texts] == filing
    assert sorted(calls) == sorted(p for p, f in zip(paths, filing) if not f)
    assert stats["sources"] == {"text-layer": 2, "ocr:rapidocr": 2} and stats["engine"] == "text-layer+rapidocr-test"
    # text-layer: no OCR at all, the scanned pages get no text and say so
    calls.clear()
    texts, stats = ocr.ocr_many(paths, "rapidocr", cache, workers=1, progress=False, text_source="text-layer")
    assert calls == [] and [t == "" for t in texts] == [not f for f in filing]
    assert stats["sources"] == {"text-layer": 2, "none": 2}
    # ocr: every page OCR'd (the scanned ones come from the cache now), as before the text layer existed
    texts, stats = ocr.ocr_many(paths, "rapidocr", Cache(tmp_path / "fresh"), workers=1, progress=False,
                                text_source="ocr")
    assert texts == ["ocr text"] * 4 and stats["engine"] == "rapidocr-test" and stats["sources"] == {"ocr:rapidocr": 4}
    with pytest.raises(Exception, match="text_source"):
        ocr.ocr_many(paths, "rapidocr", cache, workers=1, progress=False, text_source="both")


def test_a_corpus_without_text_layers_keys_its_caches_as_before(tmp_path, monkeypatch):
    # the demo and every image corpus: no page has a layer, so the texts' id is the OCR engine's own and no
    # cached vector or text is computed again
    monkeypatch.setattr(ocr, "engine_id", lambda engine: f"{engine}-test")
    assert ocr.texts_id(["ocr:tesseract"] * 3, "tesseract") == "tesseract-test"
    assert ocr.texts_id(["text-layer"] * 3, "tesseract") == "text-layer"
    assert ocr.texts_id(["none"], "tesseract") == "none"


def test_the_words_for_the_page_text():
    assert systems.text_source_words(["text-layer"] * 3 + ["ocr:tesseract"]) == \
        "3 pages from the PDF text layer, 1 page by OCR (tesseract)"
    assert systems.text_source_words(pd.Series(["none"])) == "1 page with no text (no usable text layer)"


@pytest.mark.shared_data
def test_real_filings_are_read_from_their_text_layer(shared_data, tmp_path):
    folder = shared_data / "sec10q" / "docs"
    if not folder.is_dir():
        pytest.skip("../shared/data/sec10q/docs is absent")
    pdfs = sorted(folder.glob("*.pdf"))[:1]
    loaded = ingest.pdf_folder(pdfs[0].parent, tmp_path / "run" / "corpus", dpi=30, pages="1-12",
                               name_pattern="")
    sources = systems.text_sources(loaded.units, tmp_path / "run", "auto", "tesseract")
    assert sources.count("text-layer") >= 0.8 * len(sources), sources
