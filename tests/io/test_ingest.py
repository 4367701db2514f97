"""Bring your own documents: PDF and image folders, page selection, metadata from names, bad input."""

from pathlib import Path

import pandas as pd
import pytest
from lookalike.data import schema
from PIL import Image
from lookalike.io import corpus as corpus_io
from lookalike.io import ingest

from tests.conftest import make_png


def make_pdf(path, pages=3, size=(300, 200)):
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    for _ in range(pages):
        pdf.new_page(*size)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.save(str(path))
    pdf.close()
    return path


ENCRYPTED = (b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
             b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
             b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>endobj\n"
             b"4 0 obj<</Filter/Standard/V 1/R 2/O(0123456789abcdef0123456789abcdef)"
             b"/U(fedcba9876543210fedcba9876543210)/P -4>>endobj\n"
             b"trailer<</Root 1 0 R/Size 5/Encrypt 4 0 R/ID[<00112233445566778899aabbccddeeff><00112233445566778899aabbccddeeff>]>>\n%%EOF\n")


@pytest.fixture
def pdfs(tmp_path):
    folder = tmp_path / "pdfs"
    make_pdf(folder / "2023 Q1 AAPL.pdf", pages=3)
    make_pdf(folder / "2023 Q2 AAPL.pdf", pages=2)
    (folder / "empty.pdf").write_bytes(b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
                                       b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
                                       b"trailer<</Root 1 0 R/Size 3>>\n%%EOF\n")
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf at all")
    (folder / "locked.pdf").write_bytes(ENCRYPTED)
    return folder


def test_pdf_folder_renders_pages_and_reports_every_bad_file(pdfs, tmp_path):
    c = ingest.pdf_folder(pdfs, tmp_path / "run" / "corpus", dpi=36)
    assert list(c.units["unit_id"]) == ["2023_Q1_AAPL:1", "2023_Q1_AAPL:2", "2023_Q1_AAPL:3",
                                        "2023_Q2_AAPL:1", "2023_Q2_AAPL:2"]
    assert (tmp_path / "run" / c.units["image_path"].iloc[0]).is_file()
    problems = dict(zip(c.skipped["source"], c.skipped["problem"]))
    assert "zero pages" in problems["empty.pdf"]
    assert "unreadable or corrupt" in problems["broken.pdf"]
    assert "encrypted" in problems["locked.pdf"]
    assert set(c.skipped["unit_id"]) == {"empty:*", "broken:*", "locked:*"}


def test_a_render_is_reused_only_for_the_same_file_and_dpi(pdfs, tmp_path):
    """Renders used to be named by document and page only: a rerun with another dpi, or after the
    PDF changed, silently kept the old images. Now the name carries the file's content and the dpi."""
    out = tmp_path / "run" / "corpus"
    first = ingest.pdf_folder(pdfs, out, dpi=36)
    path = tmp_path / "run" / first.units["image_path"].iloc[0]
    stamp = path.stat().st_mtime_ns
    again = ingest.pdf_folder(pdfs, out, dpi=36)
    assert list(again.units["image_path"]) == list(first.units["image_path"])
    assert path.stat().st_mtime_ns == stamp                                  # not rendered again
    sharper = ingest.pdf_folder(pdfs, out, dpi=72)
    other = tmp_path / "run" / sharper.units["image_path"].iloc[0]
    assert other != path and Image.open(other).width == 2 * Image.open(path).width
    make_pdf(pdfs / "2023 Q1 AAPL.pdf", pages=3, size=(400, 200))          # the file changed
    changed = ingest.pdf_folder(pdfs, out, dpi=36)
    assert changed.units["image_path"].iloc[0] != first.units["image_path"].iloc[0]
    assert ingest.pdf_folder(pdfs, tmp_path / "listed", dpi=36, render=False).units["image_path"].iloc[0].endswith(
        Path(changed.units["image_path"].iloc[0]).name)                    # check lists the names a render writes


def test_page_selection_and_cap(pdfs, tmp_path):
    c = ingest.pdf_folder(pdfs, tmp_path / "c", dpi=36, pages="2-3")
    assert list(c.units["unit_id"]) == ["2023_Q1_AAPL:2", "2023_Q1_AAPL:3", "2023_Q2_AAPL:2"]
    c = ingest.pdf_folder(pdfs, tmp_path / "d", dpi=36, max_pages=1)
    assert list(c.units["page"]) == [1, 1]
    for bad in ("0-2", "3-1", "x"):
        with pytest.raises(schema.CorpusError, match="corpus.pages"):
            ingest.parse_pages(bad)


def test_metadata_from_file_names(pdfs, tmp_path):
    c = ingest.pdf_folder(pdfs, tmp_path / "c", dpi=36, name_pattern=r"(?P<period>\d{4} Q\d) (?P<entity>[A-Z]+)")
    u = c.units.set_index("unit_id")
    assert u.loc["2023_Q2_AAPL:1", "entity"] == "AAPL" and u.loc["2023_Q2_AAPL:1", "period"] == "2023 Q2"
    assert any("does not match corpus.name_pattern" in p for p in c.skipped["problem"])
    with pytest.raises(schema.CorpusError, match="allowed"):
        ingest.pdf_folder(pdfs, tmp_path / "e", name_pattern=r"(?P<colour>\w+)")


def test_image_folder_skips_unreadable_oversized_and_duplicate(tmp_path):
    folder = tmp_path / "imgs"
    make_png(folder / "a.png")
    make_png(folder / "big.png", size=(400, 300))
    make_png(folder / "sub" / "a.png")
    (folder / "bad.jpg").write_bytes(b"not an image")
    c = ingest.image_folder(folder, max_pixels=100_000)
    assert list(c.units["unit_id"]) == ["a:1"] and c.units["image_path"].iloc[0].endswith("a.png")
    problems = dict(zip(c.skipped["source"], c.skipped["problem"]))
    assert "not a readable image" in problems["bad.jpg"]
    assert "over the limit" in problems["big.png"] and "400x300" in problems["big.png"]
    assert "duplicate doc id 'a'" in problems["sub/a.png"]


def test_load_dispatches_and_names_what_is_missing(pdfs, tmp_path):
    c = corpus_io.load("pdf", 0, tmp_path / "run" / "corpus", root=str(pdfs), dpi=36, max_pages=1)
    assert len(c.units) == 2 and len(c.skipped) == 3
    with pytest.raises(schema.CorpusError, match="corpus.root is empty"):
        corpus_io.load("images", 0, tmp_path / "x")
    with pytest.raises(schema.CorpusError, match="no .pdf files"):
        corpus_io.load("pdf", 0, tmp_path / "x", root=str(tmp_path / "run"))


def _png_bytes(color, size=(60, 40)):
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def test_vidore_parquet_units_questions_and_bad_rows(tmp_path):
    rows = pd.DataFrame({
        "query": ["What is shown?", None, "Which page?", "Broken?"],
        "image": [{"bytes": _png_bytes((200, 0, 0)), "path": None}, {"bytes": _png_bytes((0, 200, 0)), "path": None},
                  {"bytes": _png_bytes((200, 0, 0)), "path": None}, {"bytes": b"nope", "path": None}],
        "image_filename": ["docs/report a.png", "b.png", "docs/report a.png", "c.png"],
        "answer": ["a chart", "", "one", ""],
    })
    rows.to_parquet(tmp_path / "test.parquet")
    c = ingest.vidore_parquet(tmp_path / "test.parquet", tmp_path / "run" / "corpus")
    assert list(c.units["unit_id"]) == ["report_a:1", "b:1"]
    assert list(c.questions["query_id"]) == ["v00000", "v00002"]
    assert set(c.questions["evidence_unit_ids"]) == {"report_a:1"} and len(c.qrels) == 2
    assert "unreadable embedded image" in c.skipped.loc[0, "problem"] and c.skipped.loc[0, "row"] == 4
    with pytest.raises(schema.CorpusError, match="no 'image' column"):
        pd.DataFrame({"query": ["x"]}).to_parquet(tmp_path / "bad.parquet")
        ingest.vidore_parquet(tmp_path / "bad.parquet", tmp_path / "x")


def test_beir_folder_with_embedded_images_and_unknown_ids(tmp_path):
    folder = tmp_path / "beir"
    folder.mkdir()
    pd.DataFrame({"corpus-id": ["d1", "d2", "d2"], "image": [{"bytes": _png_bytes((1, 2, 3))},
                                                            {"bytes": _png_bytes((4, 5, 6))}, {"bytes": _png_bytes((7, 8, 9))}]}
                 ).to_parquet(folder / "corpus.parquet")
    pd.DataFrame({"query-id": ["q1", "q2"], "query": ["first?", "second?"]}).to_parquet(folder / "queries.parquet")
    pd.DataFrame({"query-id": ["q1", "q2", "q9", "q2"], "corpus-id": ["d1", "d2", "d1", "zz"], "score": [1, 2, 1, 1]}
                 ).to_parquet(folder / "qrels.parquet")
    c = ingest.beir_folder(folder, tmp_path / "run" / "corpus")
    assert list(c.units["unit_id"]) == ["d1:1", "d2:1"]
    assert dict(zip(c.questions["query_id"], c.questions["evidence_unit_ids"])) == {"q1": "d1:1", "q2": "d2:1"}
    assert list(c.qrels["relevance"]) == [1, 2]
    problems = list(c.skipped["problem"])
    assert any("duplicate corpus id" in p for p in problems) and any("unknown query 'q9'" in p for p in problems)
    assert any("unknown or skipped corpus id 'zz'" in p for p in problems)


def test_a_manifest_adds_metadata_to_a_pdf_folder(pdfs, tmp_path):
    meta = tmp_path / "meta.csv"
    meta.write_text("doc_id,unit_id,entity,period,content_type,revision\n"
                    "2023 Q1 AAPL,,Apple,2023 Q1,table,\n"
                    ",2023_Q1_AAPL:2,,,chart,\n"
                    "2024 Q9 NOPE,,X,,,\n"
                    ",2023_Q2_AAPL:1,,,diagram,\n"
                    ",2023_Q2_AAPL:2,,,,two\n")
    c = corpus_io.load("pdf", 0, tmp_path / "run" / "corpus", manifest=str(meta), root=str(pdfs), dpi=36)
    u = c.units.set_index("unit_id")
    assert u.loc["2023_Q1_AAPL:1", "entity"] == "Apple" and u.loc["2023_Q1_AAPL:3", "period"] == "2023 Q1"
    assert u.loc["2023_Q1_AAPL:1", "content_type"] == "table" and u.loc["2023_Q1_AAPL:2", "content_type"] == "chart"
    problems = " | ".join(c.skipped["problem"])
    assert "doc_id '2024_Q9_NOPE' is not a document" in problems and "unknown content_type 'diagram'" in problems
    assert "revision 'two'" in problems


def test_vidore_pages_counted_from_0_are_shifted_not_clamped(tmp_path):
    """Page 0 and page 1 of one file are two pages: under the old clamp both became ':1' and merged."""
    rows = pd.DataFrame({
        "query": ["first page?", "second page?"],
        "image": [{"bytes": _png_bytes((200, 0, 0)), "path": None}, {"bytes": _png_bytes((0, 0, 200)), "path": None}],
        "image_filename": ["deck.pdf", "deck.pdf"], "page": [0, 1]})
    rows.to_parquet(tmp_path / "zero.parquet")
    c = ingest.vidore_parquet(tmp_path / "zero.parquet", tmp_path / "run" / "corpus")
    assert list(c.units["unit_id"]) == ["deck:1", "deck:2"]
    assert list(c.questions["evidence_unit_ids"]) == ["deck:1", "deck:2"]
