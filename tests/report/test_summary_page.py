"""The stakeholder page's verdict, grouped headline headers and settings footnote (report.summary),
and summary.html at a laptop's width in headless Chromium."""

from __future__ import annotations

import pandas as pd
import pytest

from lookalike.report import site
from lookalike.report import summary as SU

from conftest import headless_chrome, needs_chromium


def _suff(rows):
    return pd.DataFrame([dict(system=s, negatives="hard", k=5, n=n, sufficient=v, sufficient_lo=v - 0.1,
                              sufficient_hi=min(1.0, v + 0.1)) for s, v, n in rows])


def _sig(a, b, p):
    return pd.DataFrame([dict(measure="sufficient@5 (hard)", system=a, baseline=b, p_holm=p)])


def test_the_verdict_names_the_best_system_and_whether_it_leads():
    suff = _suff([("bm25", 0.6, 40), ("colpali", 0.9, 40), ("clip", 0.5, 40)])
    ahead = SU.verdict(suff, _sig("bm25", "colpali", 0.0004))
    assert ahead.startswith("Best under hard negatives: colpali") and "0.90 [0.80, 1.00]" in ahead
    assert "ahead of the next, bm25 at 0.60 [0.50, 0.70], at Holm-adjusted p < 0.001" in ahead and "of the 40" in ahead
    level = SU.verdict(suff, _sig("colpali", "bm25", 0.2))
    assert "not distinguishable from the next, bm25" in level and "p = 0.200 (not below 0.05)" in level
    assert "no paired test" in SU.verdict(suff, _sig("clip", "bm25", 0.01))


def test_the_verdict_says_so_when_it_cannot_name_one():
    assert SU.verdict(_suff([]), pd.DataFrame()).startswith("No system can be named best")
    assert SU.verdict(_suff([("a", 0.5, 0)]), pd.DataFrame()).startswith("No system can be named best")
    assert "the only system scored" in SU.verdict(_suff([("a", 0.5, 10)]), pd.DataFrame())
    assert "tied with b" in SU.verdict(_suff([("a", 0.5, 10), ("b", 0.5, 10)]), _sig("a", "b", 1.0))


def test_headline_columns_sit_under_their_question_set():
    head = pd.DataFrame(columns=["system", "top-1, random negatives (as generated)", "chance (top-1)",
                                 "n (as generated)", "sufficient@5, hard (validated)", "n (validated)",
                                 "gain slot 1→5 (paired)"])
    cols = list(SU.spanned(head).columns)
    assert cols[0] == ("", "system")
    assert [c[1] for c in cols[1:4]] == ["top-1", "chance", "n"] and len({c[0] for c in cols[1:4]}) == 1
    assert [c[1] for c in cols[4:]] == ["sufficient@5", "n", "gain, slot 1→5 (paired)"]
    assert {c[0] for c in cols[4:]} == {SU.HEADLINE_GROUPS["validated"]}


def test_settings_that_did_not_run_become_one_footnote():
    view = pd.DataFrame({"family": ["a", "a", "b"], "setting": ["Base", "Rerank", "Rerank"], "system": ["a", "a+r", "b+r"],
                         "n": [9, 0, 0], "RecallAll@10 Micro": ["0.5 [0.4, 0.6]", "—", "—"],
                         "note": ["", "not run: rerank.systems does not name it", "not run: rerank.systems does not name it"]})
    ran, foot = SU.split_not_run(view)
    assert list(ran["setting"]) == ["Base"] and "note" not in ran.columns
    assert foot == "Not run: a Rerank, b Rerank (rerank.systems does not name it)."
    assert SU.split_not_run(view.iloc[:1])[1] == ""


def test_summary_page_escapes_the_lead_and_groups_headers(tmp_path):
    head = SU.spanned(pd.DataFrame({"system": ["<b>x</b>"], "n (validated)": [3]}))
    page = site.write_summary(tmp_path, "t", [{"heading": "h", "table": head, "footnote": "Not run: <i>y</i>."}],
                              SU.lead("ci", "the <demo>", "2026-01-01", "Best: <script>")).read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;demo&gt;" in page
    assert 'colspan="1"' in page or "hard negatives · validated questions" in page
    assert "&lt;i&gt;y&lt;/i&gt;" in page


@needs_chromium
@pytest.mark.browser
def test_summary_html_has_no_sideways_scroll_at_1300_px(ci_run):
    """The whole page and every table box on it fit a 1,300 px window: nothing scrolls sideways."""
    driver = headless_chrome("--allow-file-access-from-files", "--window-size=1300,900")
    try:
        driver.get((ci_run / "summary.html").as_uri())
        page = driver.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert page[0] <= page[1], f"the page is {page[0]} px wide in a {page[1]} px window"
        boxes = driver.execute_script("return Array.from(document.querySelectorAll('.wide, pre')).map(e => "
                                      "[e.previousElementSibling ? e.previousElementSibling.textContent.slice(0, 60) : '',"
                                      " e.scrollWidth, e.clientWidth])")
        wide = [b for b in boxes if b[1] > b[2] + 1]
        assert not wide, f"these boxes scroll sideways: {wide}"
        lead = driver.find_element("css selector", ".lead").text
        assert "run ci" in lead and "Best under hard negatives" in lead
    finally:
        driver.quit()


def test_the_verdict_calls_an_image_folders_units_images():
    said = SU.verdict(_suff([("a", 0.9, 10), ("b", 0.5, 10)]), _sig("a", "b", 0.01), noun="image")
    assert "a sufficient image in its top 5" in said and "page" not in said


def test_a_tie_at_the_top_names_every_tied_system_and_no_best():
    """Seen on photos with captions: three systems at 1.00, and the verdict called the first in
    alphabetical order best, tied with the second only."""
    said = SU.verdict(_suff([("ocr", 1.0, 14), ("caption", 1.0, 14), ("hybrid", 1.0, 14), ("weak", 0.5, 14)]),
                      pd.DataFrame(), noun="image")
    assert said.startswith("No single best under hard negatives: caption is tied with hybrid and ocr")
    assert "weak" not in said and "sufficient image" in said
