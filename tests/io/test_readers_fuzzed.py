"""Every reader of what users bring, given files hypothesis writes: TREC runs and qrels (lookalike's own and the
line-by-line readers), questions (CSV and JSON Lines), judgements, your runs and manifests. Each returns what
it read, or refuses with the project's error (a ValueError: TrecFormatError, CorpusError) naming the file —
never a traceback from deep inside (KeyError, IndexError, AttributeError, UnicodeDecodeError ...)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lookalike.eval import ranking, trec
from lookalike.io import corpus, inputs

UNITS = ["d1:1", "d1:2", "d2:1"]
QUERIES = ["q1", "q2"]
# lines near the formats, broken in the ways files break: fields missing or extra, words for numbers,
# nan and inf, ids with odd characters, BOMs, NULs, CRLF, a lone surrogate's UTF-8, empty lines
FIELDS = st.sampled_from(["q1", "q2", "Q0", "0", "1", "-1", "2", "d1:1", "d2:1", "d1:0", "nan", "inf", "1e400", "-0",
                          "x", "", "\ufeffq1", "\x00", "é", "q 1", "1.5", "run"])
LINE = st.lists(FIELDS, min_size=0, max_size=7).map(" ".join) | st.text(max_size=30)
BODY = st.lists(LINE, max_size=8).map(lambda lines: "\n".join(lines)) | st.sampled_from(
    ["", "\n", "q1 Q0 d1:1 1 1.0 r\r\n", "q1 0 d1:1 1\n", "\ufeffq1 Q0 d1:1 1 1.0 r\n", "query_id,text\nq1,what\n",
     '{"query_id": "q1", "text": "x"}\n', "[1, 2]\n", "unit_id,image_path\n"])
ENCODED = BODY.map(lambda t: t.encode("utf-8", "surrogatepass")) | st.binary(max_size=60)


def _readers(path: Path):
    yield "run (line by line)", lambda: trec.read_run_file(path)
    yield "qrels (line by line)", lambda: trec.read_qrels_file(path)
    yield "Run.read", lambda: ranking.Run.read(path)
    yield "Qrels.read", lambda: ranking.Qrels.read(path)
    yield "your run", lambda: inputs.read_external_run(path, UNITS, QUERIES)
    yield "judgements", lambda: inputs.read_judgements(path, UNITS, QUERIES)
    yield "questions", lambda: inputs.read_questions(path)
    yield "manifest", lambda: corpus.read_manifest(path)


@pytest.mark.parametrize("suffix", [".txt", ".csv", ".jsonl", ".tsv"])
def test_every_reader_reads_or_refuses_naming_the_file(tmp_path, suffix):
    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=ENCODED)
    @example(data=b"q1 Q0 d1:1 1 nan r\n")
    @example(data=b"\xff\xfe q1 0 d1:1 1\n")
    @example(data=b"q1 Q0 d1:1 1 1.0 r\nq1 Q0 d1:1 2 0.5 r\n")
    def check(data):
        path = tmp_path / f"input{suffix}"
        path.write_bytes(data)
        for name, read in _readers(path):
            try:
                read()
            except ValueError as exc:          # TrecFormatError, CorpusError: the project's refusals
                assert str(path.name) in str(exc) or str(path) in str(exc), (name, data, exc)
                assert not isinstance(exc, UnicodeDecodeError), (name, data, exc)

    check()
