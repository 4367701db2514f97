"""The site (report.site): the index and summary pages, notebooks as HTML without code for stakeholders, no external link, no warning or machine path, corpus text escaped."""

from __future__ import annotations

import json
from lookalike import params as P
from tests.report.test_audit import _run_dir
import re
from pathlib import Path
import pandas as pd
import pytest
from lookalike.cli import run
from tests.conftest import make_png, write_params
from tests.cli.test_run import _dirty


def test_the_index_calls_an_image_folders_units_images(tmp_path):
    from lookalike.report import site

    run = _run_dir(tmp_path, source="images")
    (run / "headlines" / "02_encode.json").write_text(json.dumps({"sentence": "the best system finds 3 pages"}))
    site.build_index(run, P.recorded({"title": "t", "run": "r", "corpus": {"source": "images"}}), ["02_encode"])
    assert json.loads((run / "headlines" / "02_encode.json").read_text())["sentence"] == "the best system finds 3 images"


EXTERNAL_REF = re.compile(
    r"""<(?:script|img|iframe|source)[^>]*\ssrc\s*=\s*["']?(?:https?:)?//"""
    r"""|<link[^>]*\shref\s*=\s*["']?(?:https?:)?//"""
    r"""|@import\s+(?:url\()?["']?(?:https?:)?//"""
    r"""|\bimport\(\s*["'](?:https?:)?//""",
    re.I,
)


def _html_files(root: Path):
    return sorted(root.rglob("*.html"))


def test_stakeholder_html_has_no_code(ci_run):
    report_html = (ci_run / "html" / "01_stratify_corpus.report.html").read_text()
    full_html = (ci_run / "html" / "01_stratify_corpus.html").read_text()
    # the notebook's code (now one stage call and result.print cells) is in the full export only
    assert 'class="input_area"' in full_html and "NBVAL_CHECK_OUTPUT" in full_html
    assert 'class="input_area"' not in report_html and "NBVAL_CHECK_OUTPUT" not in report_html
    assert "Units per stratum" in report_html


def test_no_external_url_in_any_written_html(ci_run):
    files = _html_files(ci_run)
    assert len(files) >= 4
    for f in files:
        hits = EXTERNAL_REF.findall(f.read_text(encoding="utf-8"))
        assert not hits, f"{f.name} loads {hits[:3]}"


def test_external_ref_pattern_catches_cdn_links():
    assert EXTERNAL_REF.search('<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>')
    assert EXTERNAL_REF.search("<link rel=stylesheet href='//fonts.example/x.css'>")
    assert not EXTERNAL_REF.search('<svg xmlns="http://www.w3.org/2000/svg"></svg>')


@pytest.mark.slow
def test_corpus_text_is_escaped_in_html(tmp_path, stage_kernel):
    corpus = tmp_path / "corpus"
    make_png(corpus / "a.png")
    make_png(corpus / "b.png", color=(0, 90, 200))
    pd.DataFrame([
        {"unit_id": "deck:1", "image_path": "a.png", "template_id": "t1", "content_type": "chart",
         "caption": '<script>alert("caption")</script>', "filename": "<img src=x onerror=alert(1)>.png"},
        {"unit_id": "deck:2", "image_path": "b.png", "template_id": "t1", "content_type": "table",
         "caption": "fine"},
    ]).to_csv(corpus / "manifest.csv", index=False)
    params = write_params(tmp_path / "mine.yaml", f"run: mine\ntitle: 'Mine <b>bold</b>'\ncorpus:\n"
                                                  f"  source: manifest\n  manifest: {corpus / 'manifest.csv'}\n")
    out = run.execute(params, out_root=tmp_path / "out", log=lambda *_: None, shared_kernel=stage_kernel)
    html_files = _html_files(out)
    seen_escaped = False
    for f in html_files:
        text = f.read_text(encoding="utf-8")
        assert '<script>alert("caption")' not in text, f.name
        assert "<img src=x onerror" not in text, f.name
        assert "<b>bold</b>" not in text, f.name
        seen_escaped |= "&lt;script&gt;alert(" in text
    assert seen_escaped, "the caption should be shown, escaped"


def test_written_html_carries_no_warning_and_no_machine_path(ci_run):
    for path in [ci_run / "index.html", ci_run / "summary.html", ci_run / "browse" / "index.html",
                 *sorted((ci_run / "html").glob("*.html"))]:
        assert _dirty(path.read_text(encoding="utf-8")) == [], path.name
