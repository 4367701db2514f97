"""io.labels: the three label files people bring (a label file, a filled judging sheet, a labelling-page
export), each read in one place, each bad row named by file and row, nothing merged silently."""

from __future__ import annotations

import json

import pytest

from lookalike.data.schema import CorpusError
from lookalike.io import labels as IL

UNITS = ["a:1", "a:2", "b:1"]


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_a_label_file_sets_aside_unknown_rows_and_conflicts_and_keeps_one_of_a_repeat(tmp_path):
    f = _write(tmp_path / "l.csv", "query_id,unit_id,label,note\n"
                                   "q1,a:1,sufficient,seen\n"      # kept
                                   "q1,a:2,supporting,\n"          # conflict with row 3
                                   "q1,a:2,irrelevant,\n"
                                   "q1,z:9,irrelevant,\n"          # unknown unit
                                   "q9,a:1,irrelevant,\n"          # unknown query
                                   "q1,b:1,irrelevant,\n"          # repeated with the same label: one label
                                   "q1,b:1,irrelevant,again\n")
    labels, skipped = IL.read_label_file(f, UNITS, ["q1"])
    assert labels == {("q1", "a:1"): ("sufficient", "seen"), ("q1", "b:1"): ("irrelevant", "again")}
    assert list(skipped["row"]) == [2, 3, 4, 5]
    assert "conflicting labels for query 'q1' (row 2: supporting, row 3: irrelevant)" in skipped["problem"].iloc[0]
    assert skipped["problem"].iloc[2] == "unknown unit 'z:9' (query 'q1')"
    assert skipped["problem"].iloc[3] == "unknown query 'q9'"


def test_a_label_file_with_zero_based_pages_is_shifted_and_one_that_contradicts_its_base_refused(tmp_path):
    f = _write(tmp_path / "l.csv", "query_id,unit_id,label\nq1,a:0,sufficient\n")
    labels, _ = IL.read_label_file(f, UNITS, page_base=0)
    assert labels == {("q1", "a:1"): ("sufficient", "")}
    with pytest.raises(CorpusError, match="l.csv"):
        IL.read_label_file(f, UNITS, page_base=1)


def test_a_bad_label_names_the_file_the_row_and_the_value_in_the_callers_error(tmp_path):
    class MyError(Exception):
        pass

    f = _write(tmp_path / "l.csv", "query_id,unit_id,label\nq1,a:1,sufficient\nq1,a:2,relevant\n")
    with pytest.raises(MyError, match=r"l.csv: row 2 label 'relevant' is not one of sufficient, supporting, irrelevant"):
        IL.read_label_file(f, error=MyError)


def test_a_filled_sheet_reads_labels_or_old_grades_and_leaves_empty_cells_unjudged(tmp_path):
    f = _write(tmp_path / "s.csv", "item,label,judge\ni1,sufficient,\ni2,,\ni3,irrelevant,ann\n")
    got = IL.read_filled_sheet(f, ["i1", "i2", "i3"])
    assert got.values.tolist() == [["i1", "sufficient", "human"], ["i3", "irrelevant", "ann"]]
    old = _write(tmp_path / "old.csv", "item,grade\ni1,1\ni2,2\n")
    assert list(IL.read_filled_sheet(old, ["i1", "i2"])["label"]) == ["supporting", "sufficient"]
    with pytest.raises(ValueError, match=r"s.csv: row 1: unknown item 'i1'"):
        IL.read_filled_sheet(f, ["i3"])
    bad = _write(tmp_path / "bad.csv", "item,grade\ni1,3\n")
    with pytest.raises(ValueError, match=r"bad.csv: row 1: grade '3' is not one of 2, 1, 0"):
        IL.read_filled_sheet(bad, ["i1"])


def test_a_page_export_reads_csv_or_json_and_fills_the_optional_columns(tmp_path):
    j = _write(tmp_path / "e.json", json.dumps([{"pair_id": "p1", "label": "supporting"}]))
    assert IL.read_page_export(j).values.tolist() == [["p1", "supporting", "", ""]]
    c = _write(tmp_path / "e.csv", "pair_id,label,note,time\np2,irrelevant,n,2026-01-01\n")
    assert IL.read_page_export(c).values.tolist() == [["p2", "irrelevant", "n", "2026-01-01"]]
    for text, said in (("", "the file is empty"), ("pair_id,label\n", "holds no labels"),
                       ('{"pair_id": "p1"}', "expected a JSON list")):
        path = _write(tmp_path / ("x.json" if text.startswith("{") else "x.csv"), text)
        with pytest.raises(CorpusError, match=said):
            IL.read_page_export(path)
    with pytest.raises(CorpusError, match="file not found"):
        IL.read_page_export(tmp_path / "missing.csv")
