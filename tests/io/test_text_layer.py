"""A PDF page's own text (its text layer) read instead of OCR: the rule for a usable layer, the
layer kept beside the render, each policy of encode.text_source, and the units' text_source column.
PDFs with a text layer are drawn with matplotlib (TrueType fonts keep their text extractable); the
example generator's PDFs are images only, so they stand for scanned pages."""

from __future__ import annotations

import pandas as pd
import pytest
from PIL import Image

from lookalike.io import ingest, text_layer
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


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF file from its numbered objects (1-based, in order), with a correct cross-reference table."""
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(data), extra) + data + b"\nendstream"


LINES = [f"Revenue for {2020 + i % 4} was {100 + 7 * i} million in the northern region, as reported" for i in range(30)]


def _text_ops(lines, colour=b"0 g", mode=0) -> bytes:
    body = b"BT /F1 11 Tf %s %d Tr 14 TL 50 740 Td\n" % (colour, mode)
    return body + b"".join(b"(%s) Tj T*\n" % line.encode("latin-1") for line in lines) + b"ET\n"


def hidden_text_pdf(path):
    """One page a reader sees as a photographed page (an image whose words are printed in it) while its text
    layer holds other words drawn in white under that image — the catalogue's white text hidden under a
    full-page image — and a second page whose layer is drawn in render mode 3 (invisible) over an image."""
    import io

    from PIL import ImageDraw

    img = Image.new("RGB", (612, 792), "white")
    draw = ImageDraw.Draw(img)
    for j, line in enumerate(LINES[:20]):
        draw.text((50, 40 + 24 * j), line.upper(), fill="black")
    jpeg = io.BytesIO()
    img.save(jpeg, format="JPEG", quality=85)
    image = _stream(jpeg.getvalue(), b"/Type /XObject /Subtype /Image /Width 612 /Height 792 /ColorSpace /DeviceRGB "
                                     b"/BitsPerComponent 8 /Filter /DCTDecode ")
    hidden = [f"Hidden words nobody sees on this page number {i} of the quarterly report" for i in range(30)]
    under = _text_ops(hidden, colour=b"1 g") + b"q 612 0 0 792 0 0 cm /Im1 Do Q\n"
    over = b"q 612 0 0 792 0 0 cm /Im1 Do Q\n" + _text_ops(hidden, mode=3)
    font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    resources = b"/Resources << /Font << /F1 3 0 R >> /XObject << /Im1 4 0 R >> >>"
    path.write_bytes(_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [5 0 R 7 0 R] /Count 2 >>", font, image,
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R %s >>" % resources, _stream(under),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 8 0 R %s >>" % resources, _stream(over)]))
    return path


def garbled_text_pdf(path):
    """A page that shows plain words while its font's Unicode map (ToUnicode) shifts every letter by seven
    places, so its text layer reads "Ylclubl mvy 2020 dhz ..." — the catalogue's garbled ToUnicode."""
    rows = []
    for lo, hi in ((ord("a"), ord("z")), (ord("A"), ord("Z"))):
        for c in range(lo, hi + 1):
            rows.append(b"<%02X> <%04X>" % (c, lo + (c - lo + 7) % 26))
    cmap = (b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Shift def "
            b"1 begincodespacerange <00> <FF> endcodespacerange\n%d beginbfchar\n" % len(rows)
            + b"\n".join(rows) + b"\nendbfchar endcmap CMapName currentdict /CMap defineresource pop end end")
    font = (b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding "
            b"/ToUnicode 4 0 R >>")
    path.write_bytes(_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>", font, _stream(cmap),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R /Resources << /Font << /F1 3 0 R >> >> >>",
        _stream(_text_ops(LINES))]))
    return path


def scanned_pdf(path):
    Image.new("RGB", (612, 792), "white").save(path, save_all=True, append_images=[Image.new("RGB", (612, 792), "grey")])
    return path


@pytest.mark.parametrize("text, problem", [
    ("", "no text layer"),
    ("12", "characters on a 94 square-inch page"),
    ("\ufffd" * 200, "replacement, control or private-use"),
    ("Revenue for 2023 was 105 million in region 5. " * 10, ""),
    ("Ylclubl mvy 2023 dhz 105 tpsspvu pu ylnpvu 5. " * 10, "its letters do not form words"),   # shifted by 7
])
def test_the_rule_for_a_usable_text_layer(text, problem):
    got = text_layer.text_layer_problem(text, 612, 792)          # a letter page: 94 square inches
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
    assert "Revenue for 2023 was 105 million in region 5" in text_layer.read_text_layer(paths["filing:2"])
    assert text_layer.read_text_layer(paths["scan:1"]) is None
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


def test_a_layer_a_reader_does_not_see_is_refused_and_the_page_read_by_ocr_saying_why(tmp_path):
    """The catalogue's two text layers: white text under a full-page image (and invisible text over one), and
    a font whose Unicode map garbles every letter. Each was kept as the page's text with no note."""
    import pypdfium2 as pdfium

    folder = tmp_path / "pdfs"
    folder.mkdir()
    hidden_text_pdf(folder / "hidden.pdf")
    garbled_text_pdf(folder / "garbled.pdf")
    born_digital_pdf(folder / "plain.pdf", pages=1)
    pdf = pdfium.PdfDocument(str(folder / "garbled.pdf"))
    textpage = pdf[0].get_textpage()
    assert textpage.get_text_range().startswith("Ylclubl mvy 2020")         # the layer really is garbled
    textpage.close()
    pdf.close()
    loaded = ingest.pdf_folder(folder, tmp_path / "run" / "corpus", dpi=72)
    run = tmp_path / "run"
    sources = dict(zip(loaded.units["unit_id"], systems.text_sources(loaded.units, run, "auto", "tesseract")))
    assert sources["plain:1"] == "text-layer"
    for unit in ("hidden:1", "hidden:2", "garbled:1"):
        assert sources[unit].startswith("ocr:tesseract (text layer refused: "), (unit, sources[unit])
        assert text_layer.read_text_layer(run / loaded.units.set_index("unit_id").loc[unit, "image_path"]) is None
    assert "hidden text" in sources["hidden:1"] and "covered by an image" in sources["hidden:1"]
    assert "hidden text" in sources["hidden:2"] and "drawn invisibly" in sources["hidden:2"]
    assert "its letters do not form words" in sources["garbled:1"]
    words = systems.text_source_words(list(sources.values()))
    assert words.startswith("3 pages by OCR (tesseract), 1 page from the PDF text layer (3 of them because their "
                            "text layer was refused"), words
    if ocr.tesseract_available():
        # and OCR reads what the page shows: the image's words, the garbled font's real letters
        texts, _ = ocr.ocr_many([str(run / p) for p in loaded.units["image_path"]], "tesseract",
                                Cache(tmp_path / "cache"), workers=1, progress=False, text_source="auto")
        got = dict(zip(loaded.units["unit_id"], texts))
        assert "REVENUE" in got["hidden:1"].upper() and "Hidden" not in got["hidden:1"]
        assert "Revenue" in got["garbled:1"]
