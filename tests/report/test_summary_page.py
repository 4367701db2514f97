"""The stakeholder page's grouped headline headers and settings footnote (report.summary),
and summary.html at a laptop's width in headless Chromium."""

from __future__ import annotations

import pandas as pd
import pytest

from lookalike.report import site
from lookalike.report import summary

from tests.conftest import headless_chrome, needs_chromium, sideways


def test_headline_columns_sit_under_their_question_set():
    head = pd.DataFrame(columns=["system", "top-1, random negatives (as generated)", "chance (top-1)",
                                 "n (as generated)", "sufficient@5, hard (validated)", "n (validated)",
                                 "gain slot 1→5 (paired)"])
    cols = list(summary.spanned(head).columns)
    assert cols[0] == ("", "system")
    assert [c[1] for c in cols[1:4]] == ["top-1", "chance", "n"] and len({c[0] for c in cols[1:4]}) == 1
    assert [c[1] for c in cols[4:]] == ["sufficient@5", "n", "gain 1→5, paired"]
    assert {c[0] for c in cols[4:]} == {summary.HEADLINE_GROUPS["validated"]}


def test_settings_that_did_not_run_become_one_footnote():
    view = pd.DataFrame({"family": ["a", "a", "b"], "setting": ["Base", "Rerank", "Rerank"], "system": ["a", "a+r", "b+r"],
                         "n": [9, 0, 0], "RecallAll@10 Micro": ["0.5 [0.4, 0.6]", "—", "—"],
                         "note": ["", "not run: rerank.systems does not name it", "not run: rerank.systems does not name it"]})
    ran, foot = summary.split_not_run(view)
    assert list(ran["setting"]) == ["Base"] and "note" not in ran.columns
    assert foot == "Not run: a Rerank, b Rerank (rerank.systems does not name it)."
    assert summary.split_not_run(view.iloc[:1])[1] == ""


def test_summary_page_escapes_the_lead_and_groups_headers(tmp_path):
    head = summary.spanned(pd.DataFrame({"system": ["<b>x</b>"], "n (validated)": [3]}))
    page = site.write_summary(tmp_path, "t", [summary.Block("h", table=head, footnote="Not run: <i>y</i>.")],
                              summary.lead("ci", "the <demo>", "2026-01-01", "Best: <script>")).read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;demo&gt;" in page
    assert 'colspan="1"' in page or "hard negatives · validated questions" in page
    assert "&lt;i&gt;y&lt;/i&gt;" in page


@needs_chromium
@pytest.mark.browser
def test_summary_html_has_no_sideways_scroll_at_1300_px(ci_run):
    """The whole page and every table box on it fit a 1,300 px window: nothing scrolls sideways — on
    summary.html, index.html (its systems table once cut off a column) and every stage report."""
    assert sideways(ci_run) == []
    driver = headless_chrome("--allow-file-access-from-files", "--window-size=1300,900")
    try:
        driver.get((ci_run / "summary.html").as_uri())
        lead = driver.find_element("css selector", ".lead").text
        assert "run ci" in lead and "under hard negatives" in lead
    finally:
        driver.quit()


@needs_chromium
@pytest.mark.browser
def test_a_table_too_wide_for_the_window_is_found(tmp_path):
    """The width check can fail: a page with a box holding a 3,000 px table is named."""
    (tmp_path / "html").mkdir()
    (tmp_path / "index.html").write_text('<html><body style="max-width:1100px"><div class=wide style="overflow-x:auto">'
                                         '<table><tr><td style="white-space:nowrap">' + "x" * 600
                                         + "</td></tr></table></div></body></html>")
    got = sideways(tmp_path)
    assert len(got) == 1 and got[0].startswith("index.html: a box scrolls sideways")
