"""A corpus of your own, end to end: an image folder, your questions and page-level judgements with
0-based pages, and an external run — through every stage like the built-in systems."""

import json

import pytest

import pandas as pd
from lookalike.cli import run
from lookalike.eval import trec
from PIL import Image, ImageDraw, ImageFont

from tests.conftest import write_params

pytestmark = pytest.mark.slow   # runs the stages end to end

PAGES = {  # doc, page (0-based in the user's files) -> the text printed on it
    ("acme", 0): "ACME quarterly report", ("acme", 1): "ACME revenue 437 million",
    ("acme", 2): "ACME operating income 58 million", ("zeta", 0): "ZETA quarterly report",
    ("zeta", 1): "ZETA revenue 912 million", ("zeta", 2): "ZETA operating income 77 million",
}


def _page(path, text):
    img = Image.new("RGB", (900, 300), "white")
    ImageDraw.Draw(img).text((30, 110), text, fill="black", font=ImageFont.load_default(size=44))
    img.save(path)


def test_your_corpus_questions_judgements_and_run_flow_through_every_stage(tmp_path, stage_kernel):
    folder = tmp_path / "images"
    folder.mkdir()
    manifest = ["image_path,doc_id,page,entity"]
    for (doc, p), text in PAGES.items():
        _page(folder / f"{doc}-{p}.png", text)
        manifest.append(f"{doc}-{p}.png,{doc},{p + 1},{doc.upper()}")
    (folder / "manifest.csv").write_text("\n".join(manifest) + "\n")
    (tmp_path / "q.jsonl").write_text(
        json.dumps({"query_id": "u1", "text": "What was ACME revenue?", "answer": "437 million"}) + "\n"
        + json.dumps({"query_id": "u2", "text": "What was ZETA operating income?", "answer": "77 million"}) + "\n")
    (tmp_path / "q.qrels").write_text("u1 0 acme:1 2\nu2 0 zeta:2 sufficient\nu2 0 nowhere:0 1\n")
    (tmp_path / "mine.run").write_text("".join(
        f"{q} Q0 {u} {r} {s} mine\n" for q, ranking in (("u1", ["zeta:1", "acme:1", "acme:0"]),
                                                        ("u2", ["zeta:2", "acme:2", "zeta:0"]))
        for r, (u, s) in enumerate(zip(ranking, (3.0, 2.0, 1.0)), start=1)))
    params = write_params(tmp_path / "mine.yaml", f"""
run: mine
corpus:
  source: manifest
  manifest: {folder / 'manifest.csv'}
  questions: {tmp_path / 'q.jsonl'}
  qrels: {tmp_path / 'q.qrels'}
  page_base: 0
retrieve:
  external_runs: ["mine={tmp_path / 'mine.run'}"]
negatives:
  clusters: 2
  random: 2
encode:
  encoders: [ocr-minilm, ocr-bm25, appearance]
""")
    out = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    t = lambda name: pd.read_csv(out / "tables" / f"{name}.csv", keep_default_na=False)  # noqa: E731
    questions = t("questions").set_index("query_id")
    assert questions.loc["u1", "evidence_unit_ids"] == "acme:2"          # 0-based page 1 -> unit acme:2
    assert questions.loc["u2", "evidence_unit_ids"] == "zeta:3"
    assert "unknown unit 'nowhere:0'" in " ".join(t("skipped")["problem"])
    systems = t("systems").set_index("system")
    assert systems.loc["mine", "provenance"] == "external"
    ext, _ = trec.read_run_file(out / "runs" / "mine.run")
    assert set(ext["unit_id"]) <= set(t("units")["unit_id"]) and "acme:2" in set(ext["unit_id"])
    # the external run is pooled, labelled and tabulated like the built-in systems
    assert "mine" in set(t("pool_by_system")["system"]) and "mine" in set(t("judged")["system"])
    assert "mine" in set(t("sufficiency")["system"]) and "mine" in set(t("evidence_complete")["system"])
    assert (out / "runs_validated" / "mine.run").is_file()
    assert len(t("question_validation")) == 2
