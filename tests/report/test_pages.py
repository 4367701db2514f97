"""The stand-alone pages (labelling page, blind judging sheet) render from the package's jinja2
templates: corpus text escaped, the label words and meanings from lookalike.vocab, nothing remote."""

import json
import re
from importlib import resources

from lookalike.judging import judges
from lookalike.report import pages
from lookalike.vocab import LABEL_MEANINGS, LABELS


def test_templates_ship_as_package_data():
    folder = resources.files("lookalike") / "report" / "templates"
    assert {p.name for p in folder.iterdir()} >= {"labelling.html.j2", "judging_sheet.html.j2"}


def test_labelling_page_escapes_title_and_data_and_states_the_labels():
    data = {"page": "p1", "items": [{"id": "a", "q": "</script><script>alert(1)</script>", "img": "i0"}],
            "images": {"i0": "data:image/jpeg;base64,AAAA"}}
    html = pages.labelling_page("<b>title</b> & co", data)
    assert "&lt;b&gt;title&lt;/b&gt; &amp; co" in html and "<b>title</b>" not in html
    assert "</script><script>alert" not in html
    payload = re.search(r"const DATA = (.*);\n", html).group(1)
    assert json.loads(payload)["items"][0]["q"] == data["items"][0]["q"]       # escaped, not altered
    for lab in LABELS:
        assert LABEL_MEANINGS[lab] in html.replace("&#39;", "'")
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert html.startswith("<!doctype html>") and html.endswith("</html>\n")


def test_judging_sheet_escapes_and_uses_the_three_labels():
    html = pages.judging_sheet([("j00000", "<img src=x onerror=alert(1)> revenue", "sheet_images/abc.png")])
    assert "&lt;img src=x" in html and "<img src=x" not in html
    assert '<img src="sheet_images/abc.png"' in html
    for lab in LABELS:
        assert f"<b>{lab}</b>" in html
    assert "grade 2" in html and "0, 1 or 2" not in html


def test_the_vlm_rubric_uses_the_same_meanings():
    for lab in LABELS:
        assert f'"{lab}" if {LABEL_MEANINGS[lab]}' in judges.RUBRIC


def test_photos_are_labelled_by_the_photo_rubric():
    """Seen on photos with captions: the rubric asked whether a photo 'answers' a descriptive query,
    in words written for financial filings."""
    from lookalike.report import pages
    from lookalike.vocab import label_meanings, unit_noun

    assert unit_noun("manifest", ["photo", "photo"]) == "photo" and unit_noun("images") == "image"
    assert unit_noun("pdf", ["chart", "photo"]) == "page"
    data = {"page": "p", "items": [], "images": {}}
    photo = pages.labelling_page("t", data, "photo") + pages.label_server_page("image")
    assert label_meanings("photo")["sufficient"] in photo and "competent reader" not in photo
    assert "competent reader" in pages.labelling_page("t", data)
