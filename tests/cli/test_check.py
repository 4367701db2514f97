"""``lookalike check``: every input read as the run reads it, in seconds, with exit codes 0 / 1 / 2."""

import subprocess
import sys

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.conftest import REPO

DOCS = [f"filing_{i}" for i in range(5)]


@pytest.fixture(scope="module")
def pdf_corpus(tmp_path_factory):
    """Five generated 10-page PDFs, 40 questions, qrels written 0-based with 10% of rows on page 0."""
    root = tmp_path_factory.mktemp("pdfs")
    for d in DOCS:
        pages = []
        for p in range(10):
            im = Image.new("RGB", (200, 260), "white")
            ImageDraw.Draw(im).text((20, 20), f"{d} page {p + 1}", fill="black")
            pages.append(im)
        pages[0].save(root / f"{d}.pdf", save_all=True, append_images=pages[1:])
    rng = np.random.default_rng(2)
    (root / "questions.csv").write_text("query_id,text,answer\n" + "".join(
        f"q{i:02d},What does page {i} say?,x\n" for i in range(40)))
    pages0 = rng.integers(1, 10, size=40)
    pages0[rng.choice(40, size=4, replace=False)] = 0                 # 10% on page 0: 0-based
    (root / "qrels.txt").write_text("".join(f"q{i:02d} 0 {rng.choice(DOCS)}:{p} 1\n" for i, p in enumerate(pages0)))
    return root


def _params(tmp_path, root, page_base):
    path = tmp_path / f"run_base{page_base}.yaml"
    path.write_text(f"title: checked\ncorpus:\n  source: pdf\n  root: {root}\n  questions: {root / 'questions.csv'}\n"
                    f"  qrels: {root / 'qrels.txt'}\n  page_base: {page_base}\nvalidate:\n  regressions: ''\n")
    return path


def _check(path):
    return subprocess.run([sys.executable, "-m", "lookalike", "check", str(path)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_check_refuses_zero_based_qrels_declared_one_based(tmp_path, pdf_corpus):
    res = _check(_params(tmp_path, pdf_corpus, 1))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "qrels" in res.stdout and "REFUSED" in res.stdout
    assert "4 of 40 judged page ids name page 0" in res.stdout and "page base is wrong" in res.stdout
    assert "Declare corpus.page_base: 0" in res.stdout


def test_check_accepts_them_declared_zero_based_and_reports_each_input(tmp_path, pdf_corpus):
    res = _check(_params(tmp_path, pdf_corpus, 0))
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "corpus (pdf)" in out and "5 documents, 50 pages (listed, not rendered)" in out
    assert "questions" in out and "40 rows read, 0 skipped" in out
    assert "page base declared 0; 40 doc:page ids; 4 on page 0, 0 on a document's last page: counts from 0" in out
    assert "questions per evidence structure: page-single 40" in out
    assert "the run can proceed" in out


def test_check_shows_page_base_evidence_for_csv_qrels_too(tmp_path, pdf_corpus):
    """CSV / TSV qrels name pages in a column: the evidence line was missing for them."""
    rows = [line.split() for line in (pdf_corpus / "qrels.txt").read_text().splitlines()]
    csv = tmp_path / "qrels.csv"
    csv.write_text("query_id,unit_id,relevance\n" + "".join(f"{q},{u},{r}\n" for q, _, u, r in rows))
    path = _params(tmp_path, pdf_corpus, 0)
    path.write_text(path.read_text().replace(str(pdf_corpus / "qrels.txt"), str(csv)))
    res = _check(path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "page base declared 0; 40 doc:page ids; 4 on page 0, 0 on a document's last page: counts from 0" in res.stdout


def test_check_exits_2_on_bad_parameters(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("corpus:\n  page_base: 2\n")
    res = _check(bad)
    assert res.returncode == 2 and "page_base" in res.stdout


def test_check_says_what_each_stage_will_do_with_questions_that_have_no_answer(tmp_path, pdf_corpus):
    qs = tmp_path / "questions.jsonl"
    qs.write_text("".join(f'{{"query_id": "q{i:02d}", "text": "What does page {i} say?"}}\n' for i in range(40)))
    path = _params(tmp_path, pdf_corpus, 0)
    path.write_text(path.read_text().replace(str(pdf_corpus / "questions.csv"), str(qs)))
    res = _check(path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "what each stage will do:" in out
    assert "05_validate_questions: checks 40 questions with evidence pages" in out
    assert "40 have no answer (or one that says none): distractor check not run for them (answer-string needs an answer)" in out
    assert "03_leak_ablation: runs the metadata probe only; the retrieval half is NOT EVALUATED" in out
    assert "04_hard_negatives: look-alikes for the" in out and "by its appearance cluster (no template" in out
    assert "per-axis" not in out.split("04_hard_negatives")[1].split("\n")[0]


def test_check_refuses_a_mining_retriever_the_run_does_not_rank(tmp_path):
    """Stage 08 crashed after every other stage had run when mining.retriever named no system of the run."""
    path = tmp_path / "mr.yaml"
    path.write_text("run: mr\nencode:\n  encoders: [ocr-bm25, appearance]\n")
    res = _check(path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "mining.retriever 'ocr-minilm' is not a system this run ranks (appearance, ocr-bm25)" in res.stdout
    path.write_text("run: mr\nencode:\n  encoders: [ocr-bm25, appearance]\nmining:\n  retriever: ocr-bm25\n")
    assert _check(path).returncode == 0


def test_check_reads_the_team_label_database_and_refuses_one_it_cannot(tmp_path):
    from lookalike.judging.labeldb import LabelDB

    good = tmp_path / "team.sqlite"
    LabelDB(good)
    path = tmp_path / "db.yaml"
    path.write_text(f"run: db\nlabels:\n  db: {good}\n")
    res = _check(path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "team label database" in res.stdout and "schema version 3; 0 pairs, 0 live labels from 0 people" in res.stdout
    bad = tmp_path / "broken.sqlite"
    bad.write_bytes(b"\x00garbage" * 512)
    path.write_text(f"run: db\nlabels:\n  db: {bad}\n")
    res = _check(path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "REFUSED" in res.stdout and "broken.sqlite: not a lookalike label database" in res.stdout
