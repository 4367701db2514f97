"""Facts are what the pixels show: every value in the demo's facts table is printed on its page,
every number a page prints is a fact or a listed decoration, and the printed text can be read back
from the pixels by OCR.

The generator records every text it draws with its box (``generate(..., drawn=...)``). Two checks
follow: (1) from the drawn texts, facts and printed numbers agree both ways — exact, signs and
decimals included; (2) each drawn text that holds a number is OCR'd from its box in the PNG
(tesseract, single line, 3x) and must read back with the same digits — so a value that was drawn
and then painted over, clipped or drawn off the page fails. OCR drops thin minus signs, so that
check compares digits; (1) already compares signs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest
from PIL import Image

from lookalike.data import demo

# Numbers a page prints that are not facts: period labels (Q2 FY2024, Q1 '24, FY2024), the page
# number and the restatement's note reference.
DECORATIONS = (r"Q[1-4]\s*FY\s*\d{4}", r"FY\s*\d{4}", r"Q[1-4]\s*['’‘]\s*\d{2}", r"\bPage\s+\d+", r"\bNote\s+\d+")
_NUMBER = re.compile(r"[-+]?\$?[-+]?\d[\d,]*(?:\.\d+)?")


def without_decorations(text: str) -> str:
    for pattern in DECORATIONS:
        text = re.sub(pattern, " ", text)
    return text


def numbers(text: str) -> list[float]:
    """The numbers a drawn text prints, signed ('$-54M' -> -54.0, '+4.3%' -> 4.3, '5,520' -> 5520.0)."""
    out = []
    for m in _NUMBER.finditer(without_decorations(text)):
        token = m.group()
        sign = -1.0 if "-" in token else 1.0
        out.append(sign * float(re.sub(r"[^\d.]", "", token)))
    return out


def digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def disagreements(facts, drawn: dict) -> list[str]:
    """Facts not printed on their page, and printed numbers that are no fact of their page. Counted
    as multisets: a page whose trend prints $2,090M twice needs two facts of that value."""
    problems = []
    by_unit = {u: Counter(round(v, 6) for v in g["value"]) for u, g in facts.groupby("unit_id")}
    for unit_id, items in drawn.items():
        printed = Counter(round(v, 6) for text, _ in items for v in numbers(text))
        values = by_unit.get(unit_id, Counter())
        for v, n in sorted((values - printed).items()):
            problems.append(f"{unit_id}: fact {v:g} is not printed" + (f" ({n} times)" if n > 1 else ""))
        for text, _ in items:
            if any(round(p, 6) in (printed - values) for p in numbers(text)):
                problems.append(f"{unit_id}: prints {text!r}, which is no fact of the page")
    return problems


def box_image(page: Image.Image, box) -> Image.Image:
    """A drawn text's box cut from its page (greyscale), with a margin, at 3x, dark text on light."""
    x0, y0, x1, y1 = box
    crop = page.crop((max(0, x0 - 6), max(0, y0 - 6), x1 + 6, y1 + 6))
    crop = crop.resize((crop.width * 3, crop.height * 3), Image.LANCZOS)
    a = np.asarray(crop).copy()
    if np.median(a) < 128:          # light text on a title band
        a = 255 - a
    return Image.fromarray(a)


def read_boxes(boxes: list, folder) -> list[str]:
    """Each (page path, box) read by tesseract as one line of digits. One tesseract process reads them
    all from a list of files (its pages come back separated by form feeds): a process per box spent
    most of its time starting tesseract and loading its model."""
    pages: dict = {}
    names = []
    for i, (path, box) in enumerate(boxes):
        if path not in pages:
            pages[path] = Image.open(path).convert("L")
        names.append(folder / f"box{i:05d}.png")
        box_image(pages[path], box).save(names[-1])
    listing = folder / "boxes.txt"
    listing.write_text("".join(f"{n}\n" for n in names), encoding="utf-8")
    done = subprocess.run(["tesseract", str(listing), "stdout", "--psm", "7", "-c",
                           "tessedit_char_whitelist=0123456789$,.M%+-"], capture_output=True, text=True, check=True,
                          env=dict(os.environ, OMP_THREAD_LIMIT="1"))
    reads = done.stdout.split("\f")[:len(names)]
    assert len(reads) == len(names), f"tesseract gave {len(reads)} pages of text for {len(names)} boxes"
    return reads


def unreadable(units, drawn: dict, root, folder) -> list[str]:
    """Drawn texts holding a number whose box, OCR'd from the PNG, does not give the same digits."""
    paths = dict(zip(units["unit_id"], units["image_path"]))
    jobs = [(u, text, box) for u, items in drawn.items() for text, box in items if digits(without_decorations(text))]
    reads = read_boxes([(root / paths[u], box) for u, _, box in jobs], folder)
    return [f"{u}: drew {text!r}, OCR reads {read.strip()!r}"
            for (u, text, _), read in zip(jobs, reads) if digits(text) != digits(read)]


@pytest.fixture(scope="module")
def ci_pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("pixels") / "corpus"
    drawn: dict = {}
    corpus = demo.generate("ci", 7, out, drawn=drawn)
    return corpus, drawn, out.parent


def test_every_fact_is_printed_and_every_printed_number_is_a_fact(ci_pages):
    corpus, drawn, _ = ci_pages
    assert set(drawn) == set(corpus.units["unit_id"])
    assert disagreements(corpus.facts, drawn) == []
    # a number the cash-flow page prints must be a fact too (capital expenditure, free cash flow)
    cash = corpus.units[corpus.units["template_id"] == "cash_flow"]["unit_id"]
    assert set(corpus.facts[corpus.facts["unit_id"].isin(cash)]["metric"]) >= {"capex_paid", "free_cash_flow"}


def test_a_fact_dropped_from_a_render_is_found(ci_pages, monkeypatch, tmp_path):
    corpus, _, _ = ci_pages
    real = demo._render

    def forgetful(page, facts, *args, **kwargs):   # draws the page without its first fact
        return real(page, facts[1:], *args, **kwargs)

    monkeypatch.setattr(demo, "_render", forgetful)
    drawn: dict = {}
    broken = demo.generate("ci", 7, tmp_path / "corpus", drawn=drawn)
    problems = disagreements(broken.facts, drawn)
    assert problems and all("is not printed" in p for p in problems)
    assert {p.rsplit(": ", 1)[0] for p in problems} == set(broken.facts["unit_id"])  # every page with facts


def test_a_printed_number_that_is_no_fact_is_found(ci_pages):
    corpus, drawn, _ = ci_pages
    unit = corpus.facts["unit_id"].iloc[0]
    extra = dict(drawn)
    extra[unit] = drawn[unit] + [("Capital expenditure $-54,321M", (0, 0, 1, 1))]
    assert disagreements(corpus.facts, extra) == [f"{unit}: prints 'Capital expenditure $-54,321M', which is no fact of the page"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
def test_printed_numbers_read_back_from_the_pixels(ci_pages, tmp_path):
    corpus, drawn, root = ci_pages
    assert unreadable(corpus.units, drawn, root, tmp_path) == []


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract is not installed")
def test_a_value_painted_over_is_found_by_ocr(ci_pages, tmp_path):
    corpus, drawn, root = ci_pages
    unit = corpus.units[corpus.units["template_id"] == "kpi_table"].iloc[0]
    text, box = next((t, b) for t, b in drawn[unit["unit_id"]] if t.startswith("$"))
    im = Image.open(root / unit["image_path"]).convert("RGB")
    im.paste((255, 255, 255), box)       # the value is drawn, then covered
    (tmp_path / "x").mkdir()
    im.save(tmp_path / "x" / "page.png")
    units = corpus.units[corpus.units["unit_id"] == unit["unit_id"]].assign(image_path="x/page.png")
    problems = unreadable(units, {unit["unit_id"]: [(text, box)]}, tmp_path, tmp_path)
    assert len(problems) == 1 and text in problems[0]
