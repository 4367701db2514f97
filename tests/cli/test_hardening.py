"""Regression tests for the edges issue 37 found: each fails on the code before the fix."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image

from tests.conftest import REPO, broken_png, make_png, truncated_jpeg
from lookalike import params
from lookalike.data.schema import CorpusError
from lookalike.eval import metrics
from lookalike.eval import ranking, trec
from lookalike.io import corpus as corpus_io
from lookalike.io import ingest, inputs


def _manifest(folder: Path, rows: list[dict]) -> Path:
    path = folder / "manifest.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


# ----------------------------------------------------------------------------- ids that TREC files cannot hold

def test_manifest_unit_id_with_a_space_is_skipped_and_named(tmp_path):
    make_png(tmp_path / "a.png")
    make_png(tmp_path / "b.png", color=(1, 2, 3))
    m = _manifest(tmp_path, [{"unit_id": "initech 2023:1", "image_path": "a.png"},
                             {"unit_id": "initech_2023:1", "image_path": "b.png"}])
    c = corpus_io.read_manifest(m)
    assert list(c.units["unit_id"]) == ["initech_2023:1"]
    (problem,) = c.skipped["problem"]
    assert "'initech 2023:1'" in problem and "whitespace" in problem and c.skipped["row"].iloc[0] == 1


def test_write_run_refuses_an_id_with_whitespace(tmp_path):
    run = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["initech 2023:1", "acme:1"], "score": [2.0, 1.0]})
    with pytest.raises(trec.TrecFormatError, match="initech 2023:1"):
        ranking.write_run(run, tmp_path / "x.run")
    with pytest.raises(trec.TrecFormatError, match="whitespace"):
        trec.write_qrels(pd.DataFrame({"query_id": ["q 1"], "unit_id": ["a:1"], "relevance": [1]}), tmp_path / "x.qrels")


# ----------------------------------------------------------------------------- images that open but do not decode

def test_broken_png_and_truncated_jpeg_are_skipped_in_manifests_and_folders(tmp_path):
    folder = tmp_path / "imgs"
    make_png(folder / "good.png")
    broken_png(folder / "broken.png")
    truncated_jpeg(folder / "cut.jpg")
    with Image.open(folder / "broken.png") as im:
        im.verify()                                        # the old check passed it
    c = ingest.image_folder(folder)
    assert list(c.units["unit_id"]) == ["good:1"]
    problems = dict(zip(c.skipped["source"], c.skipped["problem"]))
    assert "not a readable image" in problems["broken.png"] and "not a readable image" in problems["cut.jpg"]
    m = _manifest(folder, [{"unit_id": "g:1", "image_path": "good.png"}, {"unit_id": "b:1", "image_path": "broken.png"},
                           {"unit_id": "c:1", "image_path": "cut.jpg"}])
    c = corpus_io.read_manifest(m)
    assert list(c.units["unit_id"]) == ["g:1"] and list(c.skipped["unit_id"]) == ["b:1", "c:1"]


def test_manifest_rows_obey_max_pixels(tmp_path):
    make_png(tmp_path / "big.png", size=(400, 300))
    make_png(tmp_path / "small.png")
    m = _manifest(tmp_path, [{"unit_id": "big:1", "image_path": "big.png"}, {"unit_id": "s:1", "image_path": "small.png"}])
    c = corpus_io.read_manifest(m, max_pixels=100_000)
    assert list(c.units["unit_id"]) == ["s:1"] and "over the limit of 100000" in c.skipped["problem"].iloc[0]


def test_a_huge_pdf_page_is_skipped_before_it_is_rendered(tmp_path):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    Image.new("RGB", (200, 260), "white").save(folder / "doc.pdf", save_all=True,
                                               append_images=[Image.new("RGB", (200, 200), "white")], resolution=72.0)
    Image.new("RGB", (200, 200), "white").save(folder / "poster.pdf", resolution=1.0)   # 200 x 200 inches
    for render in (False, True):
        c = ingest.pdf_folder(folder, tmp_path / f"out{render}", dpi=110, render=render)
        assert "poster:1" not in set(c.units["unit_id"]) and {"doc:1", "doc:2"} <= set(c.units["unit_id"])
        (problem,) = c.skipped.loc[c.skipped["unit_id"] == "poster:1", "problem"]
        assert "200 x 200 inches" in problem and "corpus.max_pixels" in problem


def test_manifest_with_a_header_and_no_rows_is_refused(tmp_path):
    (tmp_path / "m.csv").write_text("unit_id,image_path\n")
    with pytest.raises(CorpusError, match=r"m\.csv: the manifest has a header and no rows"):
        corpus_io.read_manifest(tmp_path / "m.csv")


def test_a_symlink_leaving_the_image_root_is_refused(tmp_path):
    outside = make_png(tmp_path / "outside" / "secret.png")
    folder = tmp_path / "imgs"
    make_png(folder / "a.png")
    (folder / "link.png").symlink_to(outside)
    c = ingest.image_folder(folder)
    assert list(c.units["unit_id"]) == ["a:1"]
    assert "outside the corpus root" in c.skipped.set_index("source").loc["link.png", "problem"]


# ----------------------------------------------------------------------------- questions files

def test_questions_jsonl_with_missing_null_and_non_object_lines(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join([json.dumps({"query_id": "q1", "text": "What was revenue?"}),
                               json.dumps({"query_id": "q2"}),
                               json.dumps({"query_id": None, "text": "Who?"}),
                               json.dumps({"query_id": "q4", "text": None}),
                               json.dumps({"query_id": "q5", "text": ["a", "list"]})]) + "\n")
    got, skipped = inputs.read_questions(path)
    assert list(got["query_id"]) == ["q1"]
    problems = dict(zip(skipped["row"], skipped["problem"]))
    assert "question text" in problems[2] and "'query_id'" in problems[3] and "question text" in problems[4]
    assert "holds a JSON list" in problems[5]
    path.write_text(json.dumps({"query_id": "q1", "text": "x"}) + "\n[1, 2]\n")
    with pytest.raises(CorpusError, match=r"q\.jsonl: line 2 is a JSON list, expected an object"):
        inputs.read_questions(path)


# ----------------------------------------------------------------------------- TREC files read alike by both paths

def test_a_byte_order_mark_is_read_alike_by_both_paths(tmp_path):
    qrels = "\ufeffq1 0 a:1 1\nq1 0 a:2 0\nq2 0 a:3 1\n"
    run_plain = "q1 Q0 a:2 1 0.9 r\nq1 Q0 a:1 2 0.8 r\nq2 Q0 a:3 1 0.7 r\n"
    (tmp_path / "plain.qrels").write_text(qrels, encoding="utf-8")
    (tmp_path / "spaced.qrels").write_text(qrels.replace("q2 0", "q2  0"), encoding="utf-8")   # forces the line reader
    (tmp_path / "r.run").write_text(run_plain)
    assert trec.read_columns(tmp_path / "plain.qrels", "qrels") is not None
    assert trec.read_columns(tmp_path / "spaced.qrels", "qrels") is None
    assert list(trec.read_qrels_file(tmp_path / "spaced.qrels")["query_id"])[0] == "q1"
    run = ranking.Run.read(tmp_path / "r.run")
    values = [metrics.evaluate(ranking.Qrels.read(tmp_path / name), run, ["map"]).per_query["map"].to_dict()
              for name in ("plain.qrels", "spaced.qrels")]
    assert values[0] == values[1] and set(values[0]) == {"q1", "q2"}


_ids = st.text(alphabet="abcxyz019:_-#", min_size=1, max_size=4).filter(lambda s: not s.startswith("#"))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_ids, _ids, st.integers(-2, 3)), min_size=1, max_size=8,
                     unique_by=lambda r: (r[0], r[1])),
       bom=st.booleans(), crlf=st.booleans(), gap=st.sampled_from([" ", "  ", "\t", " \t"]))
def test_both_qrels_readers_agree_whatever_the_spacing(tmp_path_factory, rows, bom, crlf, gap):
    path = tmp_path_factory.mktemp("prop") / "x.qrels"
    text = ("\r\n" if crlf else "\n").join(gap.join([q, "0", u, str(r)]) for q, u, r in rows) + "\n"
    path.write_bytes((("\ufeff" if bom else "") + text).encode("utf-8"))
    lines = trec.read_qrels_file(path)
    cols = trec.read_columns(path, "qrels")
    if cols is not None:
        fast = sorted(zip((cols.query_ids[c] for c in cols.qcode), (cols.unit_ids[c] for c in cols.ucode), cols.values))
        assert fast == sorted(zip(lines["query_id"], lines["unit_id"], lines["relevance"]))
    assert list(lines["query_id"]) == [q for q, _, _ in rows]


def test_a_relevance_beyond_64_bits_is_refused_with_its_line(tmp_path):
    (tmp_path / "x.qrels").write_text("q1 0 a:1 1\nq1 0 a:2 99999999999999999999\n")
    with pytest.raises(trec.TrecFormatError, match=r"x\.qrels:2: relevance .* outside the 64-bit"):
        trec.read_qrels_file(tmp_path / "x.qrels")
    (tmp_path / "y.qrels").write_text("q1 0 a:1 99999999999999999999\n")
    got, skipped = inputs.read_judgements(tmp_path / "y.qrels", ["a:1"], ["q1"])
    assert got.empty and "64-bit" in skipped["problem"].iloc[0]


def test_beir_qrels_score_that_is_not_a_number_names_file_and_row(tmp_path):
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    make_png(folder / "p.png")
    (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "image_path": "p.png"}) + "\n")
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "what?"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\tabc\n")
    with pytest.raises(CorpusError, match=r"qrels/test\.tsv: row 1 \(query 'q1', corpus id 'd1'\): column 'score' is 'abc'"):
        ingest.beir_folder(folder, tmp_path / "out")


# ----------------------------------------------------------------------------- parameters check knows what stages reject

@pytest.mark.parametrize("text, key", [
    ("encode:\n  encoders: []\n", "encode.encoders"),
    ("report:\n  haystack_fractions: [a]\n", "report.haystack_fractions"),
    ("report:\n  haystack_fractions: [0.0, 1.0]\n", "report.haystack_fractions"),
    ("mining:\n  windows: [abc]\n", "mining.windows"),
    ("mining:\n  windows: ['20-4']\n", "mining.windows"),
    ("mining:\n  alphas: [2, -1]\n", "mining.alphas"),
    ("retrieve:\n  external_runs: [x.run]\n", "retrieve.external_runs"),
    ("run: ''\n", "run"),
    ("run: ../../../x\n", "run"),
    ("run: '..'\n", "run"),
])
def test_list_and_name_parameters_are_checked_entry_by_entry(tmp_path, text, key):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(params.ParamsError, match=rf"p\.yaml: key '{key}'"):
        params.load_params(path)


def test_run_refuses_an_output_root_it_cannot_write(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = subprocess.run([sys.executable, "-m", "lookalike", "run", str(REPO / "params" / "ci.yaml"),
                          "--out", str(blocker / "sub")], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 2 and "cannot write the run folder" in res.stderr and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------- self-healing state

def test_a_truncated_query_vector_store_is_reported_and_rebuilt(tmp_path, capsys):
    from lookalike.retrieval import runstore
    from lookalike.retrieval.encoders.base import Vectors

    calls = []

    def encode(texts, ids):
        calls.append(list(texts))
        return Vectors("enc", "pixels", list(ids), np.ones((len(ids), 3), dtype=np.float32), "single")

    runstore.query_vectors(tmp_path, "sys", "enc", ["q1"], ["hello"], encode)
    (path,) = (tmp_path / runstore.STORE / "queries").glob("*.npz")
    path.write_bytes(path.read_bytes()[:40])                       # a torn write
    vectors, encoded = runstore.query_vectors(tmp_path, "sys", "enc", ["q1"], ["hello"], encode)
    assert encoded == 1 and len(calls) == 2 and vectors.ids == ["q1"]
    assert "damaged" in capsys.readouterr().err


def test_a_torn_last_line_of_the_label_store_is_set_aside(tmp_path):
    from lookalike.judging.store import LabelError, LabelStore

    path = tmp_path / "store.jsonl"
    store = LabelStore(path)
    store.append([{"query_id": "q1", "unit_id": "a:1", "question_sha": "", "label": "sufficient", "judge": "h",
                   "source": "human"}])
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"query_id": "q1", "unit_id": "a:2", "lab')           # a killed write
    again = LabelStore(path)
    assert len(again.rows) == 1 and "set aside" in again.torn
    assert (tmp_path / "store.jsonl.torn").read_text().startswith('{"query_id": "q1", "unit_id": "a:2"')
    again.append([{"query_id": "q1", "unit_id": "a:3", "question_sha": "", "label": "irrelevant", "judge": "h",
                   "source": "human"}])
    assert len(LabelStore(path).rows) == 2                            # no later append glued onto the torn line
    path.write_text('not json\n' + path.read_text())
    with pytest.raises(LabelError, match="line 1 is not JSON"):
        LabelStore(path)                                              # a damaged line inside is no torn write


def test_people_label_files_report_conflicts_and_unknown_ids(tmp_path):
    from lookalike.judging.judges import HumanJudge

    (tmp_path / "l.csv").write_text("query_id,unit_id,label\nq1,a:1,sufficient\nq1,a:1,irrelevant\nq1,a:2,supporting\n"
                                    "q1,zz:1,sufficient\nq9,a:2,sufficient\nq1,a:2,supporting\n")
    judge = HumanJudge(tmp_path / "l.csv", ["a:1", "a:2"], query_ids=["q1"])
    assert judge.labels == {("q1", "a:2"): ("supporting", "")}
    problems = list(judge.skipped["problem"])
    assert sum("conflicting labels" in p for p in problems) == 2 and "row 1: sufficient, row 2: irrelevant" in problems[0]
    assert any("unknown unit 'zz:1'" in p for p in problems) and any("unknown query 'q9'" in p for p in problems)


def test_labels_import_of_an_empty_file_says_so(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "labelling").mkdir(parents=True)
    (run_dir / "labelling" / "key.csv").write_text("pair_id,query_id,unit_id\np1,q1,a:1\n")
    (tmp_path / "empty.csv").write_text("")
    res = subprocess.run([sys.executable, "-m", "lookalike", "labels", "import", str(tmp_path / "empty.csv"),
                          "--run-dir", str(run_dir)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "empty.csv: the file is empty" in res.stdout and "Traceback" not in res.stderr


def test_eval_refuses_zero_bootstrap_resamples(tmp_path):
    (tmp_path / "x.qrels").write_text("q1 0 a:1 1\n")
    (tmp_path / "x.run").write_text("q1 Q0 a:1 1 1.0 r\n")
    res = subprocess.run([sys.executable, "-m", "lookalike", "eval", "--ci", "--n-boot", "0", str(tmp_path / "x.qrels"),
                          str(tmp_path / "x.run")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "--n-boot must be at least 200" in res.stderr and "Traceback" not in res.stderr


# ----------------------------------------------------------------------------- byte-identical pages

def test_byte_identical_pages_are_found_and_kept_out_of_each_others_negatives(tmp_path):
    from lookalike.analysis import negatives

    a = make_png(tmp_path / "a.png")
    (tmp_path / "copy.png").write_bytes(a.read_bytes())
    make_png(tmp_path / "b.png", color=(1, 2, 3))
    units = pd.DataFrame({"unit_id": ["d:1", "d:2", "e:1"], "image_path": [str(tmp_path / n) for n in
                                                                          ("a.png", "copy.png", "b.png")]})
    dup = corpus_io.identical_images(units, tmp_path)
    assert list(dup["unit_id"]) == ["d:1", "d:2"] and set(dup["duplicate_of"]) == {"d:1"}
    distractors = pd.DataFrame({"query_id": ["q1", "q1"], "gold_unit_id": ["d:1", "d:1"], "unit_id": ["d:2", "e:1"],
                                "axis": ["random", "random"], "similarity": [np.nan, np.nan]})
    kept, dropped = negatives.without_copies(distractors, dup)
    assert list(kept["unit_id"]) == ["e:1"] and list(dropped["unit_id"]) == ["d:2"]


# ----------------------------------------------------------------------------- judges and kernels that hang or outlive us

class _Hanging(http.server.BaseHTTPRequestHandler):
    def do_POST(self):                                     # noqa: N802 - http.server's name
        time.sleep(3)
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_judge_timeout_and_attempts_bound_a_hanging_endpoint(tmp_path):
    from lookalike.judging.judges import JudgeError, make_judge

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hanging)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        judge = make_judge("openai-compatible", url=f"http://127.0.0.1:{server.server_port}/v1", model="m",
                           timeout_s=0.5, max_attempts=2)
        assert judge.timeout == 0.5 and judge.retries == 1
        judge.backoff = 0.01
        t0 = time.perf_counter()
        with pytest.raises(JudgeError, match="after 2 attempts"):
            judge._one({"model": "m", "messages": []})
        assert time.perf_counter() - t0 < 2.5
    finally:
        server.shutdown()


def test_a_kernel_dies_with_the_runner_that_started_it(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl(PR_SET_PDEATHSIG) is Linux's")
    script = tmp_path / "runner.py"
    script.write_text(textwrap.dedent("""
        import asyncio
        from lookalike.cli.run import kernel_manager_class

        async def main():
            km = kernel_manager_class()(kernel_name="python3")
            await km.start_kernel()
            print(km.provisioner.pid, flush=True)
            await asyncio.sleep(120)

        asyncio.run(main())
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        kernel = int(proc.stdout.readline())
        os.kill(kernel, 0)                                   # alive while the runner is
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                os.kill(kernel, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(kernel, signal.SIGKILL)
            pytest.fail("the kernel outlived its runner")
    finally:
        proc.kill()


def test_eval_warns_when_qrels_and_run_count_pages_differently(tmp_path):
    (tmp_path / "x.qrels").write_text("q1 0 a:0 1\nq2 0 b:2 1\nq3 0 c:4 1\n")
    (tmp_path / "x.run").write_text("q1 Q0 a:1 1 1.0 r\nq2 Q0 b:3 1 1.0 r\nq3 Q0 c:5 1 1.0 r\n")
    res = subprocess.run([sys.executable, "-m", "lookalike", "eval", str(tmp_path / "x.qrels"), str(tmp_path / "x.run")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "count pages differently (the qrels from 0 and the run from 1)" in res.stderr
    (tmp_path / "y.run").write_text("q1 Q0 a:0 1 1.0 r\nq2 Q0 b:2 1 1.0 r\nq3 Q0 c:4 1 1.0 r\n")
    res = subprocess.run([sys.executable, "-m", "lookalike", "eval", str(tmp_path / "x.qrels"), str(tmp_path / "y.run")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "count pages" not in res.stderr
