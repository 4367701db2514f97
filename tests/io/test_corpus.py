import pandas as pd
import pytest
from lookalike.data import schema
from lookalike.io import corpus as corpus_io

from tests.conftest import make_png


def _manifest(tmp_path, rows, name="manifest.csv"):
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_good_manifest_reads_all_rows(tmp_path):
    make_png(tmp_path / "img" / "a.png")
    make_png(tmp_path / "img" / "b.png")
    m = _manifest(tmp_path, [
        {"unit_id": "deck:1", "image_path": "img/a.png", "content_type": "chart", "caption": "Revenue"},
        {"doc_id": "deck", "page": "2", "image_path": "img/b.png", "content_type": ""},
    ])
    c = corpus_io.read_manifest(m)
    assert list(c.units["unit_id"]) == ["deck:1", "deck:2"]
    assert list(c.units["page"]) == [1, 2]
    assert list(c.units.columns) == schema.UNIT_COLUMNS
    assert len(c.skipped) == 0


def test_bad_rows_are_skipped_and_named(tmp_path):
    make_png(tmp_path / "a.png")
    (tmp_path / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\nthis is not a png")
    (tmp_path.parent / "outside.png").write_bytes(b"")
    m = _manifest(tmp_path, [
        {"unit_id": "d:1", "image_path": "a.png", "content_type": "chart"},
        {"unit_id": "d:2", "image_path": "missing.png", "content_type": "chart"},
        {"unit_id": "d:1", "image_path": "a.png", "content_type": "chart"},
        {"unit_id": "d:3", "image_path": "a.png", "content_type": "diagramme"},
        {"unit_id": "d:4", "image_path": "corrupt.png", "content_type": "table"},
        {"unit_id": "d:5", "image_path": "../outside.png", "content_type": "table"},
        {"unit_id": "d:0", "image_path": "a.png", "content_type": "table"},
    ])
    c = corpus_io.read_manifest(m)
    assert list(c.units["unit_id"]) == ["d:1"]
    problems = dict(zip(c.skipped["row"], c.skipped["problem"]))
    assert "not found" in problems[2]
    assert "duplicate unit_id (first seen on row 1)" in problems[3]
    assert "unknown content_type 'diagramme'" in problems[4]
    assert "not a readable image" in problems[5]
    assert "leaves the corpus root" in problems[6]
    assert "not a 1-based page number" in problems[7]
    assert set(c.skipped["source"]) == {str(m)}


def test_strict_mode_raises_naming_file_row_and_id(tmp_path):
    m = _manifest(tmp_path, [{"unit_id": "x:1", "image_path": "nope.png"}])
    with pytest.raises(schema.CorpusError, match=r"manifest.csv: row 1 \(unit_id 'x:1'\): image 'nope.png' not found"):
        corpus_io.read_manifest(m, strict=True)


def test_structural_problems_raise(tmp_path):
    with pytest.raises(schema.CorpusError, match="absent.csv: manifest not found"):
        corpus_io.read_manifest(tmp_path / "absent.csv")
    m = _manifest(tmp_path, [{"unit_id": "x:1", "path": "a.png"}])
    with pytest.raises(schema.CorpusError, match="required column 'image_path' is missing"):
        corpus_io.read_manifest(m)
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("unit_id,image_path,caption\nx:1,a.png,caf\xe9\n".encode("latin-1"))
    with pytest.raises(schema.CorpusError, match="latin1.csv: not UTF-8"):
        corpus_io.read_manifest(bad)


