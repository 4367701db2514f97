"""lookalike audit: each invariant catches the defect it names on a run folder built by hand, and
stays quiet on the same folder once the defect is gone."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lookalike.report import audit

from tests.conftest import write_params

STAGES = ["01_stratify_corpus"]


def _run_dir(tmp_path: Path, source: str = "pdf") -> Path:
    """A minimal run folder every invariant holds on."""
    run = tmp_path / "run"
    for sub in ("headlines", "tables", "notebooks", "html", "runs_validated", "qrels"):
        (run / sub).mkdir(parents=True, exist_ok=True)
    from lookalike import stages as stage_modules

    # the stages after the first did not run: the index says so for each (the complete invariant)
    (run / "index.html").write_text("<h1>run</h1><p>01_stratify_corpus: 12 units</p>" + "".join(
        f"<p>{s}: did not run</p>" for s in list(stage_modules.STAGES)[1:]))
    (run / "summary.html").write_text("<h1>summary</h1><p>All figures.</p>")
    (run / "notebooks" / "01_stratify_corpus.ipynb").write_text("{}")
    (run / "headlines" / "01_stratify_corpus.json").write_text(json.dumps(
        {"sentence": "12 units in 3 documents.", "numbers": {"units": "12"}}))
    (run / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": source}}}))
    pd.DataFrame({"unit_id": [f"d:{i}" for i in range(1, 13)]}).to_csv(run / "tables" / "units.csv", index=False)
    return run


def _lines(run: Path) -> list[str]:
    return [v.line() for v in audit.audit(run, STAGES)]


def test_a_clean_run_folder_has_no_violation(tmp_path):
    assert _lines(_run_dir(tmp_path)) == []


def test_a_manifest_whose_params_the_schema_does_not_know_is_said_and_the_other_checks_still_run(tmp_path):
    """The audit reads a run's parameters typed (params.recorded); a hand-edited key is one 'readable'
    violation naming manifest.json and the key, not a crash and not silently the defaults."""
    run = _run_dir(tmp_path, source="images")
    (run / "summary.html").write_text("<h1>summary</h1><p>12 pages.</p>")
    (run / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": "images", "sauce": "x"}}}))
    lines = _lines(run)
    assert any(line.startswith("readable") and "manifest.json" in line and "corpus.sauce" in line for line in lines), lines
    # the words check ran without the params (a folder that says nothing of its corpus reads as the demo's)
    (run / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": "images"}}}))
    assert any(line.startswith("words") for line in _lines(run))


def test_complete_a_missing_summary_and_an_unexplained_stage(tmp_path):
    run = _run_dir(tmp_path)
    (run / "summary.html").unlink()
    (run / "notebooks" / "01_stratify_corpus.ipynb").unlink()
    (run / "index.html").write_text("<h1>run</h1>")
    got = _lines(run)
    assert "complete: summary.html: the page: missing" in got
    assert any(line.startswith("complete: index.html: 01_stratify_corpus") for line in got)


@pytest.mark.parametrize("text", ["nan% of 12 questions", "contamination nan", "SE ±nan", "-inf", "pdf corpus ()"])
def test_no_nan_in_headlines_and_pages(tmp_path, text):
    run = _run_dir(tmp_path)
    (run / "headlines" / "01_stratify_corpus.json").write_text(json.dumps({"sentence": f"x {text} y", "numbers": {}}))
    (run / "summary.html").write_text(f"<p>{text}</p><script>var a = NaN;</script>")
    got = _lines(run)
    assert any(line.startswith("no-nan: headlines/01_stratify_corpus.json: sentence") for line in got), got
    assert any(line.startswith("no-nan: summary.html: page text") for line in got), got


def test_no_nan_does_not_read_scripts_or_words_that_hold_the_letters(tmp_path):
    run = _run_dir(tmp_path)
    (run / "summary.html").write_text("<p>financial infrastructure, Nancy's info</p><script>x = NaN</script>")
    assert _lines(run) == []


def test_reproducible_a_run_out_of_canonical_order(tmp_path):
    run = _run_dir(tmp_path)
    (run / "runs_validated" / "s.run").write_text("q1 Q0 d:1 1 1.0 s\nq1 Q0 d:2 2 1.0 s\n")   # tie: d:2 first
    got = _lines(run)
    assert any("reproducible: runs_validated/s.run: run order: line 2" in line for line in got), got
    (run / "runs_validated" / "s.run").write_text("q1 Q0 d:2 1 1.0 s\nq1 Q0 d:1 2 1.0 s\n")
    assert _lines(run) == []


def test_reproducible_the_haystack_full_corpus_point_equals_the_exported_run(tmp_path):
    run = _run_dir(tmp_path)
    (run / "qrels" / "evidence_validated.qrels").write_text("q1 0 d:3 1\nq2 0 d:4 1\n")
    (run / "runs_validated" / "s.run").write_text("q1 Q0 d:3 1 2.0 s\nq2 Q0 d:1 1 2.0 s\n")   # recall@10 = 0.5
    curve = pd.DataFrame({"system": ["s"], "measure": ["recall_10"], "corpus_size": [12], "n": [2], "value": [0.71],
                          "lo": [0.0], "hi": [1.0], "extrapolated": [False]})
    curve.to_csv(run / "tables" / "haystack_curve.csv", index=False)
    got = _lines(run)
    assert any("haystack_curve.csv: recall_10, s, 12 units: 0.710000 in the table, 0.500000" in line for line in got)
    curve.assign(value=0.5).to_csv(run / "tables" / "haystack_curve.csv", index=False)
    assert _lines(run) == []


def test_defined_kappa_printed_where_it_is_undefined(tmp_path):
    run = _run_dir(tmp_path)
    (run / "summary.html").write_text("<p>agreement on 12 pairs: kappa 0.00 [0.00, 0.00].</p>")
    assert any(line.startswith("defined: summary.html: kappa") for line in _lines(run))


def test_discriminating_a_column_at_the_ceiling_must_say_so(tmp_path):
    run = _run_dir(tmp_path)
    pd.DataFrame({"system": ["a", "b"], "sufficient@5": ["1.00 [1.00, 1.00]"] * 2}).to_csv(
        run / "tables" / "headline.csv", index=False)
    assert any(line.startswith("discriminating: summary.html: sufficient@5") for line in _lines(run))
    (run / "summary.html").write_text("<p>sufficient@5: cannot separate the systems — every one is at the ceiling</p>")
    assert _lines(run) == []


def test_discriminating_recall_beside_chance(tmp_path):
    run = _run_dir(tmp_path)
    systems = pd.DataFrame({"system": ["a"], "recall_10": [0.07], "recall_10_lo": [0.02], "recall_10_hi": [0.12]})
    systems.to_csv(run / "tables" / "systems.csv", index=False)
    assert any("shown without chance" in line for line in _lines(run))
    systems.assign(chance_recall_10=0.063, vs_chance="above chance").to_csv(run / "tables" / "systems.csv", index=False)
    assert any("not called indistinguishable from chance" in line for line in _lines(run))
    systems.assign(chance_recall_10=0.063, vs_chance="indistinguishable from chance").to_csv(
        run / "tables" / "systems.csv", index=False)
    assert _lines(run) == []


def test_people_first_a_people_judged_question_moved_by_a_machine_rule(tmp_path):
    run = _run_dir(tmp_path)
    pd.DataFrame({"query_id": ["q1"], "unit_id": ["d:1"], "relevance": [1], "level": ["page"]}).to_csv(
        run / "tables" / "qrels.csv", index=False)
    pd.DataFrame({"query_id": ["q1"], "slice": ["dropped"]}).to_csv(run / "tables" / "question_validation.csv", index=False)
    assert any(line.startswith("people-first: tables/question_validation.csv: question q1") for line in _lines(run))
    pd.DataFrame({"query_id": ["q1"], "slice": ["single-gold"]}).to_csv(run / "tables" / "question_validation.csv",
                                                                         index=False)
    assert _lines(run) == []


def test_words_demo_vocabulary_off_the_demo(tmp_path):
    run = _run_dir(tmp_path, source="images")
    (run / "summary.html").write_text("<p>the competitors are pages one fact away from the answer</p>")
    assert any(line.startswith("words: summary.html") for line in _lines(run))
    assert _lines(_run_dir(tmp_path / "demo", source="demo")) == []


BROKEN_ENCODER = '''
class Broken:
    """An encoder whose every call fails: stage 02 raises."""
    name = "broken"
    kind = "single"
    provenance = "pixels"

    def __init__(self, **kw):
        pass

    def encode_units(self, units, base_dir, cache=None):
        raise RuntimeError("the broken encoder broke")

    def encode_queries(self, texts, ids, cache=None):
        raise RuntimeError("the broken encoder broke")
'''


@pytest.mark.slow
def test_a_failed_stage_still_leaves_an_index_and_a_summary_that_say_what_happened(tmp_path):
    from lookalike.cli import run as runner
    from lookalike import stages as stage_modules
    from PIL import Image, ImageDraw

    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(4):
        img = Image.new("RGB", (300, 120), "white")
        ImageDraw.Draw(img).text((10, 40), f"page {i}", fill="black")
        img.save(folder / f"p{i}.png")
    (tmp_path / "broken.py").write_text(BROKEN_ENCODER)
    params = write_params(tmp_path / "broken.yaml", f"""
run: broken
corpus:
  source: images
  root: {folder}
encode:
  encoders: [appearance, "{tmp_path / 'broken.py'}:Broken"]
""")
    with pytest.raises(runner.StageFailed) as info:
        runner.execute(params, out_root=tmp_path / "out", log=lambda *_: None)
    run = tmp_path / "out" / "broken"
    index = (run / "index.html").read_text()
    summary = (run / "summary.html").read_text()
    assert info.value.stage == "02_encode"
    assert "Stage 02_encode failed" in index and "the broken encoder broke" in index
    assert "03_leak_ablation: did not run" in index and "08_mined_candidates: did not run" in index
    assert "This run did not finish" in summary and "03_leak_ablation" in summary
    assert not [v for v in audit.audit(run, list(stage_modules.STAGES)) if v.invariant == "complete"]


def test_words_an_image_folder_is_not_called_pages(tmp_path):
    run = _run_dir(tmp_path, source="images")
    (run / "summary.html").write_text("<p>Top-1 against random pages; page-single n = 4</p>")
    got = _lines(run)
    assert len(got) == 1 and "'pages' for units that are images" in got[0]
    (run / "summary.html").write_text("<p>Top-1 against random images; page-single n = 4</p>")
    assert _lines(run) == []
    # index.html's line for a stage too
    (run / "headlines" / "04_hard_negatives.json").write_text(json.dumps({"sentence": "3 pages with look-alikes."}))
    assert any(line.startswith("words: headlines/04_hard_negatives.json: sentence: 'pages' for units that are images")
               for line in _lines(run))


def test_complete_every_question_is_accounted_for(tmp_path):
    run = _run_dir(tmp_path)
    pd.DataFrame({"query_id": ["q1", "q2", "q3"]}).to_csv(run / "tables" / "questions.csv", index=False)
    pd.DataFrame({"query_id": ["q1"], "status": ["ok"], "slice": ["single-gold"]}).to_csv(
        run / "tables" / "question_validation.csv", index=False)
    got = _lines(run)
    assert got == ["complete: tables/question_validation.csv: questions: 2 question(s) of tables/questions.csv have "
                   "no validation row (first: q2, q3)"]


def test_reproducible_your_run_is_exported_as_its_canonical_ranking(tmp_path):
    run = _run_dir(tmp_path)
    pd.DataFrame({"query_id": ["q1"]}).to_csv(run / "tables" / "questions.csv", index=False)
    source = tmp_path / "mine.run"
    source.write_text("q1 Q0 d:1 1 1.0 x\nq1 Q0 d:3 2 1.0 x\nq1 Q0 d:2 3 0.5 x\n")     # a tie in file order
    (run / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": "pdf", "page_base": 1},
                                                              "retrieve": {"external_runs": [f"mine={source}"]}}}))
    (run / "runs").mkdir()
    (run / "runs" / "mine.run").write_text("q1 Q0 d:1 1 1.0 mine\nq1 Q0 d:3 2 1.0 mine\nq1 Q0 d:2 3 0.5 mine\n")
    got = _lines(run)
    assert any("runs/mine.run: run mine: not the canonical ranking of mine.run: first difference at line 1" in line
               for line in got), got
    (run / "runs" / "mine.run").write_text("q1 Q0 d:3 1 1.0 mine\nq1 Q0 d:1 2 1.0 mine\nq1 Q0 d:2 3 0.5 mine\n")
    assert _lines(run) == []


def _notebook(path: Path, printed: str, tags=()) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("res.print('x')", metadata={"tags": list(tags)})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed),
                    nbformat.v4.new_output("display_data", data={"text/html": "<table><tr><th>page</th></tr>"
                                                                              "<tr><td>3</td></tr></table>"})]
    nb.cells = [cell]
    nbformat.write(nb, path)


def test_words_a_stage_report_printing_pages_for_images(tmp_path):
    run = _run_dir(tmp_path, source="images")
    nb = run / "notebooks" / "02_encode.ipynb"
    _notebook(nb, "ocr-bm25 read its page text: 40 pages by OCR (tesseract)\n")
    got = _lines(run)
    assert len(got) == 1 and got[0].startswith("words: notebooks/02_encode.ipynb: printed output: ") \
        and "for units that are images (and 1 more)" in got[0]
    # the same words said of images pass; a column header called page is a field name, not a word
    _notebook(nb, "ocr-bm25 read its image text: 40 images by OCR (tesseract)\n")
    assert _lines(run) == []
    # the parameters cell (hidden from the report) is not a sentence of the stage
    _notebook(nb, '{"pages": "", "qrels_level": "page"}\n', tags=["injected-parameters"])
    assert _lines(run) == []
    # on a page corpus pages are pages
    pdf = _run_dir(tmp_path / "pdf", source="pdf")
    _notebook(pdf / "notebooks" / "02_encode.ipynb", "40 pages by OCR\n")
    assert _lines(pdf) == []
