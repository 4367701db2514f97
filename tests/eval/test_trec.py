"""The columnar fast path for TREC files: the same rankings, judgements and errors as the
line-by-line readers, on every file it takes; every other file goes to them."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookalike.eval import metrics
from lookalike.eval import ranking, trec
from tests.eval.test_metrics import QRELS, RUN

# ids as users write them: any character but whitespace (str.split's, which trec_eval's reader is
# compared with); '#' allowed anywhere but first
ID = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6).filter(
    lambda s: len(s.split()) == 1 and s.split()[0] == s and not s.startswith("#"))


def _slow_run(path):
    frame, tag = trec.read_run_file(path)
    return ranking.Run(frame, name=tag or str(path), what=str(path))


def _slow_qrels(path):
    return ranking.Qrels(trec.read_qrels_file(path), what=str(path))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(ID, ID, st.sampled_from([0.0, 0.5, 1.0, -2.25, 3.0, 1e-12])), min_size=1, max_size=40,
                unique_by=lambda t: (t[0], t[1])),
       st.lists(st.tuples(ID, ID, st.integers(-1, 3)), min_size=1, max_size=30, unique_by=lambda t: (t[0], t[1])))
def test_fast_path_reads_what_the_line_reader_reads(tmp_path_factory, run_rows, qrels_rows):
    folder = tmp_path_factory.mktemp("trec")
    rpath, qpath = folder / "x.run", folder / "x.qrels"
    rpath.write_text("".join(f"{q} Q0 {u} {i} {s!r} tag{i}\n" for i, (q, u, s) in enumerate(run_rows)), encoding="utf-8")
    qpath.write_text("".join(f"{q} 0 {u} {r}\n" for q, u, r in qrels_rows), encoding="utf-8")
    assert trec.read_columns(rpath, "run") is not None and trec.read_columns(qpath, "qrels") is not None
    fast, slow = ranking.Run.read(rpath), _slow_run(rpath)
    pd.testing.assert_frame_equal(fast.frame(), slow.frame())              # ties broken the same way
    assert fast.name == slow.name and list(fast.vocab) == list(slow.vocab)
    fq, sq = ranking.Qrels.read(qpath), _slow_qrels(qpath)
    for attr in ("query_ids", "unit_ids", "relevance", "offsets"):
        assert list(getattr(fq, attr)) == list(getattr(sq, attr)), attr
    names = ["map", "ndcg_cut_10", "P_5", "recip_rank", "recall_100"]
    pd.testing.assert_frame_equal(metrics.evaluate(fq, fast, names).per_query, metrics.evaluate(sq, slow, names).per_query)


@pytest.mark.parametrize("text", [
    "# a comment\nq1 Q0 d1 1 0.5 t\n",                   # comment lines: trec_eval skips them
    "q1  Q0 d1 1 0.5 t\n",                               # a run of blanks
    "q1 Q0 d1 1 0.5 t extra\n",                          # a 7th field (ignored by trec_eval)
    "q1\tQ0 d1 1 0.5 t\n",                               # mixed separators
    " # 1 2 3 4\nq1 Q0 d1 1 0.5 t\n",                    # an indented comment that looks like six fields
    "# 1 2 3 4 5\nq1 Q0 d1 1 0.5 t\n",                   # a comment with exactly six fields
    "q1 Q0 d\u00a01 1 0.5 t\n",                          # whitespace str.split() splits on, inside a field
])
def test_files_the_fast_path_declines_are_read_by_the_line_reader(tmp_path, text):
    path = tmp_path / "x.run"
    path.write_text(text, encoding="utf-8")
    assert trec.read_columns(path, "run") is None
    pd.testing.assert_frame_equal(ranking.Run.read(path).frame(), _slow_run(path).frame())


@pytest.mark.parametrize("name, text, message", [
    ("x.run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d1 2 0.4 t\n", r"x\.run:2: unit 'd1' listed twice"),
    ("x.run", "q1 Q0 d1 1 nan t\n", r"x\.run:1: score 'nan' is not finite"),
    ("x.run", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 0.4 t\n", r"x\.run:2: expected 6 fields"),
    ("x.qrels", "q1 0 d1 1\nq1 0 d1 0\n", r"x\.qrels:2: unit 'd1' judged twice"),
    ("x.qrels", "q1 0 d1 1.5\n", r"x\.qrels:1: relevance '1\.5' is not an integer"),
    ("x.qrels", "q1 0 d1 NA\n", r"x\.qrels:1: relevance 'NA' is not an integer"),
])
def test_bad_files_keep_the_line_readers_messages(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    read = ranking.Run.read if name.endswith(".run") else ranking.Qrels.read
    with pytest.raises(trec.TrecFormatError, match=message):
        read(path)


def test_tab_separated_files_take_the_fast_path(tmp_path):
    path = tmp_path / "x.qrels"
    path.write_text("q1\t0\td1\t2\nq0\t0\td2\t1\n", encoding="utf-8")
    cols = trec.read_columns(path, "qrels")
    assert cols is not None and list(cols.query_ids) == ["q0", "q1"] and list(np.asarray(cols.values)) == [2, 1]


def test_crlf_files_read_the_same_either_way(tmp_path):
    path = tmp_path / "x.run"
    path.write_bytes(b"q1 Q0 d1 1 0.5 t\r\nq1 Q0 d2 2 0.5 t\r\nq0 Q0 d2 1 1 last\r\n")
    fast = ranking.Run.read(path)
    pd.testing.assert_frame_equal(fast.frame(), _slow_run(path).frame())
    assert fast.name == "last"


@pytest.mark.parametrize("cells, blocks", [(1 << 22, 2000), (7, 2000), (7, 0)])
def test_judgements_find_their_ranks_by_every_join(monkeypatch, cells, blocks):
    # one dense block, many small blocks, and the hashed join: the same per-query values
    rng = np.random.default_rng(4)
    run = {f"q{q}": {f"d{u}": float(s) for u, s in zip(rng.choice(60, 20, replace=False), rng.integers(0, 5, 20))}
           for q in range(30)}
    qrels = {f"q{q}": {f"d{u}": int(g) for u, g in zip(rng.choice(80, 8, replace=False), rng.integers(0, 3, 8))}
             for q in range(0, 34, 1)}
    names = ["map", "ndcg_cut_10", "P_5", "recip_rank", "recall_100", "num_rel_ret"]
    expected = metrics.evaluate(qrels, run, names).per_query
    monkeypatch.setattr(metrics, "DENSE_CELLS", cells)
    monkeypatch.setattr(metrics, "DENSE_BLOCKS", blocks)
    pd.testing.assert_frame_equal(metrics.evaluate(qrels, run, names).per_query, expected)


def test_sorted_codes_maps_every_blocks_own_dictionary_to_the_sorted_ids():
    # as the CSV reader returns a column: one dictionary per block, each in its own order (and an
    # empty block); the codes must be those of the sorted distinct ids, whatever block a row is in
    import pyarrow as pa

    blocks = [["b", "a", "b", "é"], [], ["zz", "a", "a"], ["é", "Z", "b", "😀"]]
    column = pa.chunked_array([pa.array(b, type=pa.string()).dictionary_encode() for b in blocks],
                              type=pa.dictionary(pa.int32(), pa.string()))
    codes, values = trec.sorted_codes(column)
    flat = [v for b in blocks for v in b]
    want_codes, want_values = pd.factorize(np.asarray(flat, dtype=object), sort=True)
    assert list(values) == list(want_values) == sorted(set(flat))          # code point order
    assert codes.dtype == np.int32 and codes.tolist() == want_codes.tolist()
    empty_codes, empty_values = trec.sorted_codes(pa.chunked_array([], type=pa.dictionary(pa.int32(), pa.string())))
    assert len(empty_codes) == 0 and len(empty_values) == 0


@pytest.mark.parametrize("slab", [1, 3, 4, 1 << 20])
def test_duplicates_are_found_in_any_slab(monkeypatch, slab):
    # 5 queries of 4 units each, stored together: the per-query path sorts a slab of queries at a
    # time; a unit listed twice in the last query (or only in the first) must still be found
    monkeypatch.setattr(trec, "DUPLICATE_SLAB", slab)
    qcode = np.repeat(np.arange(5, dtype=np.int32), 4)
    clean = np.array([0, 1, 2, 3] * 5, dtype=np.int32)
    assert not trec.has_duplicates(qcode, clean, 4)
    for where in (0, 19):
        dup = clean.copy()
        dup[where] = dup[where + (1 if where == 0 else -1)]
        assert trec.has_duplicates(qcode, dup, 4)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.text(st.characters(blacklist_categories=()), max_size=5), st.integers(-3, 3)), max_size=30))
def test_ids_are_coded_in_pythons_sort_order_by_either_coder(ids):
    # all-str ids are coded through Arrow (UTF-8 byte order), anything else through pandas'
    # factorize (Python's order); lone surrogates, ints, a mix: the same codes and sorted ids
    values = np.asarray(ids, dtype=object)
    codes, uniques = ranking._factorize_sorted(values)
    if all(isinstance(v, str) for v in ids):
        assert list(uniques) == sorted(set(ids))
    want_codes, want_uniques = pd.factorize(values, sort=True) if len(values) else (np.zeros(0, int), [])
    assert codes.dtype == np.int64 and codes.tolist() == list(want_codes)
    assert list(uniques) == list(want_uniques)


def test_trec_files_round_trip(tmp_path):
    trec.write_qrels(QRELS, tmp_path / "q.txt")
    ranking.write_run(RUN, tmp_path / "r.txt", tag="sys")
    assert trec.qrels_dict(trec.read_qrels_file(tmp_path / "q.txt")) == QRELS
    frame, tag = trec.read_run_file(tmp_path / "r.txt")
    assert tag == "sys" and trec.run_dict(frame) == RUN
    lines = (tmp_path / "r.txt").read_text().splitlines()
    assert lines[0] == "q1 Q0 a 1 0.9 sys"


@pytest.mark.parametrize("content, message", [
    ("q1 Q0 a 1 0.5 run\nq1 Q0 a 2 0.4 run\n", r"r.txt:2: unit 'a' listed twice for query 'q1' \(first on line 1\)"),
    ("q1 Q0 a 1 nan run\n", r"r.txt:1: score 'nan' is not finite"),
    ("q1 Q0 a 1 inf run\n", r"r.txt:1: score 'inf' is not finite"),
    ("q1 Q0 a 1 high run\n", r"r.txt:1: score 'high' is not a number"),
    ("q1 Q0 a 1\n", r"r.txt:1: expected 6 fields"),
    ("# only a comment\n\n", r"r.txt: empty file"),
])
def test_bad_run_files(tmp_path, content, message):
    (tmp_path / "r.txt").write_text(content)
    with pytest.raises(trec.TrecFormatError, match=message):
        trec.read_run_file(tmp_path / "r.txt")


@pytest.mark.parametrize("content, message", [
    ("q1 0 a 1.5\n", r"q.txt:1: relevance '1.5' is not an integer"),
    ("q1 0 a 1\nq1 0 a 0\n", r"q.txt:2: unit 'a' judged twice for query 'q1'"),
    ("q1 0 a\n", r"q.txt:1: expected 4 fields"),
    ("", r"q.txt: empty file"),
])
def test_bad_qrels_files(tmp_path, content, message):
    (tmp_path / "q.txt").write_text(content)
    with pytest.raises(trec.TrecFormatError, match=message):
        trec.read_qrels_file(tmp_path / "q.txt")


def test_bad_frames():
    with pytest.raises(trec.TrecFormatError, match="row 1 lists unit 'a' twice"):
        metrics.Run(pd.DataFrame({"query_id": ["q", "q"], "unit_id": ["a", "a"], "score": [1.0, 2.0]}))
    with pytest.raises(trec.TrecFormatError, match="non-finite score"):
        metrics.Run({"q": {"a": float("nan")}})
    with pytest.raises(trec.TrecFormatError, match="label 'maybe' is not one of"):
        metrics.Qrels(pd.DataFrame({"query_id": ["q"], "unit_id": ["a"], "label": ["maybe"]}))
    with pytest.raises(trec.TrecFormatError, match="relevance 0.5 of unit 'a' is not an integer"):
        metrics.Qrels({"q": {"a": 0.5}})


def test_comments_and_hash_inside_ids(tmp_path):
    (tmp_path / "q.txt").write_text("# header comment\nq1 0 doc#1 1\n  # indented comment\nq1 0 doc2 0\n")
    frame = trec.read_qrels_file(tmp_path / "q.txt")
    assert list(frame["unit_id"]) == ["doc#1", "doc2"]
