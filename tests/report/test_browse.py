"""The failure browser: what each row says, an offline escaped page, and the page working in a browser."""

import pandas as pd
import pytest

from tests.conftest import headless_chrome, make_png, needs_chromium
from lookalike.report import browse


@pytest.fixture
def corpus(tmp_path):
    # two templates; t1 has three look-alikes of one page that differ on period, entity and revision
    units = pd.DataFrame({
        "unit_id": ["d:1", "d:2", "d:3", "d:4", "d:5", "d:6"],
        "image_path": [f"img/p{i}.png" for i in range(1, 7)],
        "template_id": ["t1", "t1", "t1", "t1", "t2", "t2"],
        "content_type": ["table"] * 4 + ["chart"] * 2,
        "entity": ["Acme", "Acme", "Bolt", "Acme", "Acme", "Acme"],
        "period": ["Q1", "Q2", "Q1", "Q1", "Q1", "Q1"],
        "metric": ["", "", "", "", "", ""],
        "revision": [1, 1, 1, 2, 1, 1],
        "filename": ["secret-file-name.png"] * 6})
    for i in range(1, 7):
        make_png(tmp_path / "img" / f"p{i}.png", (40 * i, 90, 200 - 20 * i), (160, 90))
    questions = pd.DataFrame({"query_id": ["q1", "q2"],
                              "text": ['Revenue </script><script>window.pwned=1</script> & <b>more</b>?', "Chart?"],
                              "evidence_unit_ids": ["d:1", "d:5"], "evidence_structure": ["page-single"] * 2,
                              "register": ["question", "shown"]})
    labels = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2"], "unit_id": ["d:1", "d:2", "d:3", "d:5", "d:6"],
                           "label": ["sufficient", "supporting", "irrelevant", "sufficient", "irrelevant"]})
    distractors = pd.DataFrame({"query_id": ["q1"], "gold_unit_id": ["d:1"], "unit_id": ["d:3"], "axis": ["entity"]})

    def run(order):
        return pd.DataFrame([{"query_id": q, "unit_id": u, "score": float(10 - r)} for q, us in order.items()
                             for r, u in enumerate(us)])

    runs = {"good": run({"q1": ["d:1", "d:2", "d:5"], "q2": ["d:5", "d:6"]}),
            "fooled": run({"q1": ["d:2", "d:3", "d:1"], "q2": ["d:6", "d:1", "d:2", "d:3", "d:4", "d:5"]}),
            "lost": run({"q1": ["d:3", "d:6"], "q2": ["d:4"]})}
    return tmp_path, units, questions, labels, distractors, runs


def test_rows_say_the_outcome_the_gold_rank_and_the_axis(corpus):
    _, units, questions, labels, distractors, runs = corpus
    f = browse.failure_rows(questions, runs, labels, units, distractors).set_index(["system", "query_id"])
    assert list(f.columns) == browse.FAILURE_COLUMNS[2:]
    good, fooled, lost = f.loc[("good", "q1")], f.loc[("fooled", "q1")], f.loc[("lost", "q1")]
    assert good["outcome"] == "sufficient@1" and good["gold_rank"] == 1 and not good["hard_negative_loss"]
    # a supporting look-alike of the same template beat the gold: it differs on the period
    assert fooled["outcome"] == "sufficient@2-5" and fooled["gold_rank"] == 3
    assert fooled["hard_negative_loss"] and fooled["lookalike_unit_id"] == "d:2" and fooled["axis"] == "period"
    # the distractor table names the axis when the look-alike is a stage-04 distractor
    assert lost["lookalike_unit_id"] == "d:3" and lost["axis"] == "entity" and lost["gold_rank"] == 0
    assert lost["outcome"] == "neither@5" and lost["top_labels"] == "irrelevant;unlabelled"
    # unlabelled pages count as neither; a page of another template above the gold is no look-alike loss
    q2 = f.loc[("fooled", "q2")]
    assert q2["gold_rank"] == 6 and q2["outcome"] == "neither@5" and q2["lookalike_unit_id"] == "d:6"
    assert q2["axis"] == "other"                                         # same template, no axis in the metadata differs
    assert f.loc[("lost", "q2")]["lookalike_unit_id"] == "" and not f.loc[("lost", "q2")]["hard_negative_loss"]


def test_differing_axis_reads_the_metadata():
    assert browse.differing_axis({"period": "Q1", "entity": "A"}, {"period": "Q2", "entity": "A"}) == "period"
    assert browse.differing_axis({"period": "Q1", "revision": 1}, {"period": "Q2", "revision": 2}) == "period+revision"
    assert browse.differing_axis({"period": "Q1"}, {"period": "Q1"}) == "other"
    assert browse.differing_axis({}, {"period": "Q1"}) == "other"            # unknown metadata says nothing


def test_page_is_offline_escaped_and_names_no_corpus_file(corpus):
    root, units, questions, labels, distractors, runs = corpus
    f = browse.failure_rows(questions, runs, labels, units, distractors)
    page = browse.write_browser(root, f, questions, units, root)
    html = page.read_text()
    assert "http://" not in html and "https://" not in html
    assert "</script><script>window.pwned" not in html and "<b>more</b>" not in html
    assert "secret-file-name" not in html
    written = sorted(p.name for p in (root / "browse" / "pages").iterdir())
    assert written == [f"{i:06d}.jpg" for i in range(6)]                 # every page shown, named by position
    counts = browse.outcome_counts(f)
    assert counts.set_index("system").loc["fooled", "hard-negative loss"] == 2 and counts["n"].tolist() == [2, 2, 2]


def test_an_unreadable_page_is_reported_and_the_row_kept(corpus):
    root, units, questions, labels, distractors, runs = corpus
    (root / "img" / "p6.png").write_bytes(b"not a png")
    f = browse.failure_rows(questions, runs, labels, units, distractors)
    html = browse.write_browser(root, f, questions, units, root).read_text()
    assert "could not be read" in html and "d:6" in html
    assert '"rows": [' in html and html.count('"q": "q2"') == 3


@pytest.mark.browser
@pytest.mark.slow
@needs_chromium
def test_browser_filters_counts_and_opens_a_page_in_headless_chromium(corpus):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    root, units, questions, labels, distractors, runs = corpus
    f = browse.failure_rows(questions, runs, labels, units, distractors)
    page = browse.write_browser(root, f, questions, units, root)
    driver = headless_chrome("--allow-file-access-from-files")
    try:
        driver.get(page.as_uri())
        count = lambda: driver.find_element(By.ID, "count").text  # noqa: E731
        rows = lambda: driver.find_elements(By.CSS_SELECTOR, "#rows tr.row")  # noqa: E731
        assert count() == "6 of 6 rows" and len(rows()) == 6
        # it opens on failures first: a look-alike loss (else the worst gold rank) heads the list
        assert Select(driver.find_element(By.ID, "sort")).first_selected_option.get_attribute("value") == "failures"
        if f["hard_negative_loss"].any():
            assert rows()[0].get_attribute("data-outcome") in set(f.loc[f["hard_negative_loss"], "outcome"])
            assert f.loc[f["hard_negative_loss"], "outcome"].ne("sufficient@1").all()
        assert driver.execute_script("return window.pwned === undefined")      # the question's markup stayed text
        assert "</script><script>window.pwned=1</script> & <b>more</b>?" in driver.find_element(By.ID, "rows").text
        Select(driver.find_element(By.ID, "f-system")).select_by_visible_text("fooled")
        assert count() == "2 of 6 rows" and {r.get_attribute("data-system") for r in rows()} == {"fooled"}
        Select(driver.find_element(By.ID, "f-system")).select_by_visible_text("(all)")
        Select(driver.find_element(By.ID, "f-outcome")).select_by_visible_text("hard-negative loss")
        assert count() == f"{int(f['hard_negative_loss'].sum())} of 6 rows"
        Select(driver.find_element(By.ID, "f-outcome")).select_by_visible_text("neither@5")
        assert count() == f"{int((f['outcome'] == 'neither@5').sum())} of 6 rows"
        Select(driver.find_element(By.ID, "f-outcome")).select_by_visible_text("(all)")
        Select(driver.find_element(By.ID, "f-register")).select_by_visible_text("shown")
        assert count() == "3 of 6 rows"
        Select(driver.find_element(By.ID, "f-register")).select_by_visible_text("(all)")
        Select(driver.find_element(By.ID, "sort")).select_by_value("gold_rank")
        first = rows()[0].find_elements(By.CSS_SELECTOR, "td")[1].text
        assert first == "lost"                                              # a gold not in the ranking sorts first
        thumb = rows()[0].find_element(By.CSS_SELECTOR, "figure img")
        assert driver.execute_script("return arguments[0].naturalWidth", thumb) > 0
        thumb.click()
        viewer = driver.find_element(By.ID, "viewer")
        assert viewer.is_displayed()
        full = driver.find_element(By.ID, "viewer-img")
        driver.execute_script("return new Promise(r => arguments[0].complete ? r() : arguments[0].onload = r)", full)
        assert full.get_attribute("src").endswith(".jpg") and driver.execute_script(
            "return arguments[0].naturalWidth", full) == 160
        viewer.click()
        assert not viewer.is_displayed()
    finally:
        driver.quit()


def test_a_page_whose_full_size_image_fails_has_no_thumbnail_and_the_others_stay_in_place(corpus, monkeypatch):
    """Each shown page has one thumbnail at its own position. Before, a page whose thumbnail was made
    but whose full-size JPEG failed got two entries (the thumbnail, then ''), shifting every later one."""
    root, units, questions, labels, distractors, runs = corpus
    f = browse.failure_rows(questions, runs, labels, units, distractors)
    seen, save = {}, browse.images.save_jpeg
    monkeypatch.setattr(browse.pages, "script_json", lambda data, _real=browse.pages.script_json: seen.update(data) or _real(data))

    def failing(src, out, width):
        if out.name == "000002.jpg":                                   # d:3, the third page shown
            raise OSError("disk full")
        return save(src, out, width)

    monkeypatch.setattr(browse.images, "save_jpeg", failing)
    html = browse.write_browser(root, f, questions, units, root).read_text()
    assert seen["units"] == ["d:1", "d:2", "d:3", "d:4", "d:5", "d:6"]
    assert len(seen["thumbs"]) == 6 and seen["thumbs"][2] == "" and seen["missing"] == ["d:3"]
    assert all(t.startswith("data:image/jpeg;base64,") for i, t in enumerate(seen["thumbs"]) if i != 2)
    assert "disk full" in html


def test_each_gold_page_shows_its_own_rank():
    units = pd.DataFrame({"unit_id": ["d:1", "d:2", "d:3"], "image_path": ["a", "b", "c"], "template_id": ["t"] * 3})
    questions = pd.DataFrame({"query_id": ["q"], "text": ["?"], "evidence_unit_ids": ["d:1;d:3"]})
    run = pd.DataFrame({"query_id": ["q"] * 2, "unit_id": ["d:3", "d:2"], "score": [2.0, 1.0]})
    f = browse.failure_rows(questions, {"s": run}, pd.DataFrame(columns=["query_id", "unit_id", "label"]), units,
                       pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis"]))
    assert f.loc[0, "gold_rank"] == 1 and f.loc[0, "gold_ranks"] == "0;1"      # d:1 not ranked, d:3 first


@needs_chromium
@pytest.mark.browser
def test_a_many_page_gold_keeps_the_row_inside_a_1300_pixel_screen(tmp_path):
    """Eight gold pages in one row pushed the top-5 and outcome columns off a laptop's screen."""
    from selenium.webdriver.common.by import By

    ids = [f"d:{i}" for i in range(1, 11)]
    units = pd.DataFrame({"unit_id": ids, "image_path": [f"img/p{i}.png" for i in range(1, 11)], "template_id": ["t"] * 10})
    for i in range(1, 11):
        make_png(tmp_path / "img" / f"p{i}.png", (20 * i, 90, 120), (160, 200))
    questions = pd.DataFrame({"query_id": ["q"], "text": ["Which pages?"], "evidence_unit_ids": [";".join(ids[:8])]})
    run = pd.DataFrame({"query_id": ["q"] * 10, "unit_id": ids[::-1], "score": [float(10 - r) for r in range(10)]})
    f = browse.failure_rows(questions, {"s": run}, pd.DataFrame(columns=["query_id", "unit_id", "label"]), units,
                       pd.DataFrame(columns=["query_id", "gold_unit_id", "unit_id", "axis"]))
    page = browse.write_browser(tmp_path, f, questions, units, tmp_path)
    driver = headless_chrome("--allow-file-access-from-files", "--window-size=1300,900")
    try:
        driver.get(page.as_uri())
        row = driver.find_element(By.CSS_SELECTOR, "#rows tr.row")
        right = driver.execute_script("return arguments[0].getBoundingClientRect().right", row)
        width = driver.execute_script("return document.documentElement.clientWidth")
        assert right <= width, f"the row ends at {right} px on a {width} px page"
        captions = [c.text for c in row.find_elements(By.CSS_SELECTOR, "td.gold figcaption")]
        assert captions[:2] == ["rank 10", "rank 9"] and len(captions) == 8       # d:1 ranked last of ten
    finally:
        driver.quit()
