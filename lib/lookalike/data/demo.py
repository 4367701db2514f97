"""The built-in demo corpus: synthetic quarterly-filing decks that look alike on purpose.

Hundreds of pages share a handful of visual templates (segment bar chart, KPI table, trend line,
region table) and differ in one fact: the entity, the period, the metric or the revision. Filler
pages (risk factors, cash-flow statement, audit opinion, signature page, org chart) share no
template and are the pool random negatives come from. Everything is generated from one seed:
the same (size, seed) gives byte-identical PNGs and tables.

What a unit carries (see ``lookalike.corpus.UNIT_COLUMNS``): ids, the image, template metadata,
a content_type stratum, and caption fields as an asset database holds them (filename, alt text,
marketing caption) — partial, sometimes naming what is not visible, sometimes omitting what is.
The ground-truth facts a reader can read off each page go to a separate facts table; the
questions are generated from those facts, with answers and evidence units, and an answer key
saying which facts each question asks for (the `reference` judge reads facts and key).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from lookalike.data.schema import (ANSWER_KEY_COLUMNS, FACT_COLUMNS, PLANTED_COLUMNS, QUESTION_COLUMNS, UNIT_COLUMNS,
                                   VISIBLE_COLUMNS, Corpus)
from lookalike.vocab import money

WIDTH, HEIGHT = 960, 540


@dataclass(frozen=True)
class Style:
    """A house style: every deck of one entity wears it."""

    name: str            # the colour word a person would use ("teal", "navy", ...)
    bg: tuple
    ink: tuple
    primary: tuple
    accent: tuple
    band: tuple          # title band colour
    title_align: str     # "left" | "center"


@dataclass(frozen=True)
class Entity:
    """A company in the demo corpus: its name, kind, segments, page style and revenue scale (subsidiaries name
    their parent)."""
    slug: str
    name: str
    kind: str            # consolidated | subsidiary | independent
    segments: tuple
    style: Style
    scale: float         # revenue level, $M per quarter
    parent: str = ""
    headcount: int = 0


STYLES = {
    "navy": Style("navy", (250, 250, 252), (20, 28, 48), (31, 58, 122), (232, 134, 44), (31, 58, 122), "left"),
    "teal": Style("teal", (247, 252, 251), (18, 40, 40), (0, 128, 128), (214, 72, 96), (0, 105, 105), "left"),
    "burgundy": Style("burgundy", (253, 249, 247), (50, 20, 24), (128, 30, 52), (70, 130, 180), (128, 30, 52), "center"),
    "forest": Style("forest", (249, 251, 246), (24, 40, 24), (46, 110, 60), (200, 160, 40), (46, 110, 60), "left"),
    "slate": Style("slate", (244, 245, 247), (30, 30, 36), (88, 96, 112), (0, 150, 200), (60, 66, 80), "center"),
    "plum": Style("plum", (251, 248, 252), (40, 20, 44), (106, 50, 120), (120, 180, 60), (90, 40, 100), "left"),
}

# Subsidiaries first: the consolidated group's segments are its subsidiaries, and its numbers
# are their sums, so facts agree across documents.
ENTITIES = (
    Entity("halvorsen-energy", "Halvorsen Energy", "subsidiary", ("Upstream", "Grid", "Renewables"),
           STYLES["teal"], 820.0, parent="halvorsen-group", headcount=5200),
    Entity("halvorsen-retail", "Halvorsen Retail", "subsidiary", ("Grocery", "Home", "Online"),
           STYLES["burgundy"], 1140.0, parent="halvorsen-group", headcount=14800),
    Entity("halvorsen-logistics", "Halvorsen Logistics", "subsidiary", ("Freight", "Warehousing", "Last Mile"),
           STYLES["forest"], 610.0, parent="halvorsen-group", headcount=7300),
    Entity("halvorsen-group", "Halvorsen Group", "consolidated", (), STYLES["navy"], 0.0),
    Entity("corvane-systems", "Corvane Systems", "independent", ("Cloud", "Devices", "Services"),
           STYLES["slate"], 940.0, headcount=9100),
    Entity("brightwater-foods", "Brightwater Foods", "independent", ("Dairy", "Bakery", "Beverages"),
           STYLES["plum"], 430.0, headcount=3900),
)

REGIONS = ("North America", "Europe", "Asia Pacific")
METRICS = {
    "revenue": ("Revenue", "$M"),
    "operating_income": ("Operating income", "$M"),
    "headcount": ("Headcount", "employees"),
    "capex": ("Capital expenditure", "$M"),
}
# Figures a page prints that no question asks for, each a fact under its own metric.
METRICS.update({f"{m}_change": (f"{label} change on a year earlier", "%") for m, (label, _) in list(METRICS.items())})
METRICS.update({
    "operating_cash_flow": ("Net cash from operations", "$M"), "capex_paid": ("Capital expenditure", "$M"),
    "free_cash_flow": ("Free cash flow", "$M"), "dividends_paid": ("Dividends paid", "$M"),
})

# Pages of one quarterly deck, per size: (template_id, metric). Filler pages carry no metric.
DECK_PAGES = {
    "ci": (
        ("cover", ""), ("segment_bar", "revenue"), ("segment_bar", "operating_income"),
        ("kpi_table", "kpi_summary"), ("trend_line", "revenue"), ("region_table", "revenue"),
        ("risk_factors", ""), ("cash_flow", ""), ("closing", ""),
    ),
    "demo": (
        ("cover", ""), ("segment_bar", "revenue"), ("segment_bar", "operating_income"),
        ("segment_bar", "capex"), ("kpi_table", "kpi_summary"), ("trend_line", "revenue"),
        ("trend_line", "operating_income"), ("trend_line", "headcount"), ("region_table", "revenue"),
        ("risk_factors", ""), ("cash_flow", ""), ("closing", ""),
    ),
}
# The restatement supplement republishes the pages a revenue restatement touches.
RESTATED_PAGES = (("cover", ""), ("segment_bar", "revenue"), ("kpi_table", "kpi_summary"), ("trend_line", "revenue"))
CLOSING_KINDS = ("audit_opinion", "signature", "org_chart")
LAYOUT = {
    "cover": "cover slide", "segment_bar": "bar chart", "trend_line": "line chart", "kpi_table": "table",
    "region_table": "table", "cash_flow": "table", "risk_factors": "text page", "audit_opinion": "text page",
    "signature": "signature page", "org_chart": "organisation chart",
}
CONTENT_TYPE = {
    "cover": "graphic", "segment_bar": "chart", "trend_line": "chart", "kpi_table": "table",
    "region_table": "table", "cash_flow": "table", "risk_factors": "text", "audit_opinion": "text",
    "signature": "text", "org_chart": "graphic",
}
SIZES = {
    # entities (by slug order in ENTITIES), fiscal quarters, restated decks, questions per structure
    "ci": dict(entities=("halvorsen-energy", "halvorsen-retail", "halvorsen-group", "corvane-systems"),
               periods=4, restated=2, questions={"page-single": 48, "page-multi": 16, "doc-adjacent": 8,
                                                  "doc-near": 8, "doc-far": 8, "cross-doc": 8}),
    "demo": dict(entities=tuple(e.slug for e in ENTITIES), periods=8, restated=6,
                 questions={"page-single": 72, "page-multi": 24, "doc-adjacent": 24,
                            "doc-near": 24, "doc-far": 24, "cross-doc": 24}),
}
HISTORY = 5  # quarters before the first deck, so every trend line has six points


def _periods(n: int) -> list[str]:
    """n + HISTORY fiscal quarters ending Q4 FY2024, oldest first: 'Q1 FY2023', ..."""
    out = []
    year, q = 2024, 4
    for _ in range(n + HISTORY):
        out.append(f"Q{q} FY{year}")
        q -= 1
        if q == 0:
            year, q = year - 1, 4
    return out[::-1]


def _period_code(period: str) -> str:
    q, fy = period.split()
    return f"{fy[2:]}{q.lower()}"  # 'Q2 FY2024' -> '2024q2'


@lru_cache(maxsize=64)
def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


class _WrittenPages:
    """Writes the demo's page images, skipping a page whose file already holds exactly these pixels.

    A re-run renders every page again (its drawing also gives the page's visible texts), but PNG
    encoding was half of that time. ``.pixels.json`` beside the images records, per file, the
    sha256 of the pixels written and the file's size and modification time. A file is written
    again unless all three still match, so a page changed or replaced on disk is never kept.
    """

    INDEX = ".pixels.json"

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        try:
            self.held = json.loads((self.folder / self.INDEX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.held = {}
        self.now: dict[str, dict] = {}

    def save(self, img: Image.Image, path: Path) -> None:
        digest = hashlib.sha256(img.mode.encode() + repr(img.size).encode() + img.tobytes()).hexdigest()
        entry = self.held.get(path.name)
        try:
            st = path.stat()
            same = (entry is not None and entry.get("pixels") == digest and entry.get("size") == st.st_size
                    and entry.get("mtime_ns") == st.st_mtime_ns)
        except OSError:
            same = False
        if not same:
            img.save(path, format="PNG", optimize=False)
            st = path.stat()
        self.now[path.name] = {"pixels": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}

    def close(self) -> None:
        body = json.dumps(dict(sorted({**self.held, **self.now}.items())), indent=0)
        (self.folder / self.INDEX).write_text(body, encoding="utf-8")


def _fmt(metric: str, value: float) -> str:
    return f"{value:,.0f}" if metric == "headcount" else money(value)


# ----------------------------------------------------------------------------- values

@dataclass
class Book:
    """All numbers of the corpus: values[(entity, metric, period, member)] -> float."""

    periods: list
    values: dict = field(default_factory=dict)
    restated: dict = field(default_factory=dict)   # same keys, the revision-2 value

    def get(self, entity, metric, period, member="total", revision=1):
        """One simulated figure; revision 2 reads a restated value where the entity restated it."""
        key = (entity, metric, period, member)
        if revision >= 2 and key in self.restated:
            return self.restated[key]
        return self.values[key]


def _simulate(entities: list[Entity], periods: list[str], rng: np.random.Generator) -> Book:
    book = Book(periods=periods)
    season = np.array([0.97, 1.0, 1.01, 1.06])
    for ent in entities:
        if ent.kind == "consolidated":
            continue
        weights = rng.dirichlet(np.full(len(ent.segments), 6.0))
        region_w = rng.dirichlet(np.full(len(REGIONS), 5.0))
        level = ent.scale
        margins = rng.uniform(0.06, 0.22, size=len(ent.segments))
        heads = float(ent.headcount)
        for _t, period in enumerate(periods):
            level *= 1.0 + rng.normal(0.012, 0.03)
            q = int(period[1]) - 1
            seg_rev = level * season[q] * weights * rng.normal(1.0, 0.04, size=len(weights))
            seg_inc = seg_rev * np.clip(margins + rng.normal(0, 0.015, size=len(margins)), 0.01, None)
            seg_capex = seg_rev * rng.uniform(0.04, 0.11, size=len(weights))
            for s, seg in enumerate(ent.segments):
                book.values[(ent.slug, "revenue", period, seg)] = round(float(seg_rev[s]), 0)
                book.values[(ent.slug, "operating_income", period, seg)] = round(float(seg_inc[s]), 0)
                book.values[(ent.slug, "capex", period, seg)] = round(float(seg_capex[s]), 0)
            total = sum(book.values[(ent.slug, "revenue", period, s)] for s in ent.segments)
            rw = region_w * rng.normal(1.0, 0.03, size=len(REGIONS))
            rw = rw / rw.sum()
            reg = [round(total * w, 0) for w in rw[:-1]]
            reg.append(total - sum(reg))   # regions add up to the total exactly
            for r, region in enumerate(REGIONS):
                book.values[(ent.slug, "revenue", period, region)] = float(reg[r])
            for metric in ("revenue", "operating_income", "capex"):
                book.values[(ent.slug, metric, period, "total")] = float(
                    sum(book.values[(ent.slug, metric, period, s)] for s in ent.segments))
            heads *= 1.0 + rng.normal(0.006, 0.012)
            book.values[(ent.slug, "headcount", period, "total")] = float(round(heads, -1))
    for ent in entities:
        if ent.kind != "consolidated":
            continue
        subs = [e for e in entities if e.parent == ent.slug]
        for period in periods:
            for metric in ("revenue", "operating_income", "capex", "headcount"):
                for sub in subs:
                    book.values[(ent.slug, metric, period, sub.name.split()[-1])] = book.values[
                        (sub.slug, metric, period, "total")]
                book.values[(ent.slug, metric, period, "total")] = float(
                    sum(book.values[(s.slug, metric, period, "total")] for s in subs))
            for region in REGIONS:
                book.values[(ent.slug, "revenue", period, region)] = float(
                    sum(book.values[(s.slug, "revenue", period, region)] for s in subs))
    return book


def _segments(ent: Entity, entities: list[Entity]) -> tuple:
    if ent.kind == "consolidated":
        return tuple(e.name.split()[-1] for e in entities if e.parent == ent.slug)
    return ent.segments


# ----------------------------------------------------------------------------- drawing

class _Recorder(ImageDraw.ImageDraw):
    """ImageDraw that remembers every text it draws with its box: what the page prints, for the
    facts-vs-pixels test (``generate(..., drawn=...)``)."""

    def __init__(self, img: Image.Image):
        super().__init__(img)
        self.drawn: list[tuple[str, tuple]] = []

    def text(self, xy, text, fill=None, font=None, *args, **kwargs):
        self.drawn.append((str(text), tuple(round(v) for v in self.textbbox(xy, text, font=font))))
        return super().text(xy, text, fill, font, *args, **kwargs)


def _canvas(style: Style) -> tuple[Image.Image, _Recorder]:
    img = Image.new("RGB", (WIDTH, HEIGHT), style.bg)
    return img, _Recorder(img)


def _header(draw, style: Style, ent: Entity, title: str, subtitle: str, page: int, footnote: str = ""):
    draw.rectangle([0, 0, WIDTH, 74], fill=style.band)
    font = _font(28)
    if style.title_align == "center":
        w = draw.textlength(title, font=font)
        draw.text(((WIDTH - w) / 2, 12), title, fill=(255, 255, 255), font=font)
        w = draw.textlength(subtitle, font=_font(17))
        draw.text(((WIDTH - w) / 2, 46), subtitle, fill=(235, 235, 235), font=_font(17))
    else:
        draw.text((32, 12), title, fill=(255, 255, 255), font=font)
        draw.text((32, 46), subtitle, fill=(235, 235, 235), font=_font(17))
    draw.rectangle([0, HEIGHT - 34, WIDTH, HEIGHT], fill=tuple(int(c * 0.92) for c in style.bg))
    draw.text((32, HEIGHT - 27), ent.name.upper(), fill=style.primary, font=_font(15))
    draw.text((WIDTH - 90, HEIGHT - 27), f"Page {page}", fill=style.ink, font=_font(15))
    if footnote:
        draw.text((32, HEIGHT - 58), footnote, fill=style.accent, font=_font(15))


def _draw_segment_bar(draw, style, members, values, metric):
    top, bottom, left = 120, HEIGHT - 90, 110
    vmax = max(values) * 1.18
    slot = (WIDTH - left - 80) / len(members)
    draw.line([left, bottom, WIDTH - 60, bottom], fill=style.ink, width=2)
    for i, (member, value) in enumerate(zip(members, values)):
        x0 = left + i * slot + slot * 0.2
        x1 = x0 + slot * 0.6
        y0 = bottom - (bottom - top) * value / vmax
        draw.rectangle([x0, y0, x1, bottom], fill=style.primary if i % 2 == 0 else style.accent)
        label = _fmt(metric, value)
        w = draw.textlength(label, font=_font(20))
        draw.text(((x0 + x1) / 2 - w / 2, y0 - 28), label, fill=style.ink, font=_font(20))
        w = draw.textlength(member, font=_font(18))
        draw.text(((x0 + x1) / 2 - w / 2, bottom + 8), member, fill=style.ink, font=_font(18))


def _draw_table(draw, style, header, rows, top=110, col_w=None):
    col_w = col_w or [300] + [180] * (len(header) - 1)
    left = 60
    y = top
    draw.rectangle([left - 10, y - 6, left + sum(col_w), y + 30], fill=style.primary)
    x = left
    for j, cell in enumerate(header):
        draw.text((x, y), cell, fill=(255, 255, 255), font=_font(19))
        x += col_w[j]
    y += 44
    for i, row in enumerate(rows):
        if i % 2 == 1:
            draw.rectangle([left - 10, y - 6, left + sum(col_w), y + 30], fill=tuple(int(c * 0.95) for c in style.bg))
        x = left
        for j, cell in enumerate(row):
            draw.text((x, y), cell, fill=style.ink, font=_font(19))
            x += col_w[j]
        y += 40


def _draw_trend(draw, style, labels, values, metric):
    top, bottom, left, right = 120, HEIGHT - 100, 90, WIDTH - 70
    vmin, vmax = min(values) * 0.9, max(values) * 1.1
    xs = [left + i * (right - left) / (len(values) - 1) for i in range(len(values))]
    ys = [bottom - (bottom - top) * (v - vmin) / (vmax - vmin) for v in values]
    draw.line([left, bottom, right, bottom], fill=style.ink, width=1)
    draw.line(list(zip(xs, ys)), fill=style.primary, width=4)
    for i, (x, y) in enumerate(zip(xs, ys)):
        draw.ellipse([x - 6, y - 6, x + 6, y + 6], fill=style.accent)
        label = _fmt(metric, values[i])
        w = draw.textlength(label, font=_font(16))
        # a background box: the line must not cross the printed value
        draw.rectangle([x - w / 2 - 10, y - 44, x + w / 2 + 10, y - 14], fill=style.bg)
        draw.text((x - w / 2, y - 38), label, fill=style.ink, font=_font(16))
        w = draw.textlength(labels[i], font=_font(16))
        draw.text((x - w / 2, bottom + 10), labels[i], fill=style.ink, font=_font(16))


RISK_SENTENCES = (
    "Demand for our products may decline if economic conditions weaken in our principal markets.",
    "We depend on a limited number of suppliers for critical components and services.",
    "Changes in interest rates and currency exchange rates could affect reported results.",
    "Cybersecurity incidents could disrupt operations and expose us to liability.",
    "Regulatory changes in the jurisdictions where we operate may increase our costs.",
    "Our results vary from quarter to quarter and past results may not predict future results.",
    "We may not realise the anticipated benefits of acquisitions or investments.",
    "Labour shortages or disputes could delay projects and raise operating costs.",
)


def _wrap(draw, text, font, width):
    # a period ("Q1 FY2024") is one word: a reader must not find its halves on two lines
    words, lines, line = re.findall(r"Q[1-4] FY\d{4}\S*|\S+", text), [], ""
    for word in words:
        trial = f"{line} {word}".strip()
        if draw.textlength(trial, font=font) > width and line:
            lines.append(line)
            line = word
        else:
            line = trial
    if line:
        lines.append(line)
    return lines


class Printed:
    """The numbers a page prints, looked up from its facts rows — the one source both the facts
    table and the render read, so a page can show nothing the facts table lacks (and the
    facts-vs-pixels test finds a fact a render forgets)."""

    def __init__(self, facts: list[dict]):
        self.by_key = {(f["metric"], f["period"], f["member"]): f["value"] for f in facts}

    def __call__(self, metric: str, period: str, member: str = "total") -> float | None:
        """The value printed for (metric, period, member), or None when the page has no such fact."""
        return self.by_key.get((metric, period, member))

    def text(self, metric: str, period: str, member: str = "total", fmt=None) -> str:
        """The value as the page prints it (the metric's own format unless fmt is given); '' when absent."""
        value = self(metric, period, member)
        if value is None:
            return ""
        return (fmt or (lambda v: _fmt(metric, v)))(value)


def _render(page: dict, facts: list[dict], ent: Entity, entities: list[Entity], book: Book,
            rng: np.random.Generator) -> tuple[Image.Image, list]:
    """Draw the page; returns the image and every text drawn, with its box. Every number drawn
    comes from facts (``_page_facts``); book gives only the layout (which periods a page covers),
    never a value."""
    style = ent.style
    img, draw = _canvas(style)
    tpl, metric, period, rev = page["template_id"], page["metric"], page["period"], page["revision"]
    printed = Printed(facts)
    foot = "Restated: figures revised, see Note 2 to the supplement." if rev >= 2 and tpl != "cover" else ""
    if tpl == "cover":
        draw.rectangle([0, 0, WIDTH, HEIGHT], fill=style.band)
        draw.rectangle([60, 330, WIDTH - 60, 336], fill=style.accent)
        draw.text((60, 170), ent.name, fill=(255, 255, 255), font=_font(54))
        sub = "Restatement supplement" if rev >= 2 else "Quarterly results"
        draw.text((60, 250), f"{sub} — {period}", fill=(235, 235, 235), font=_font(30))
        draw.text((60, 360), "Investor presentation", fill=(220, 220, 220), font=_font(22))
        return img, draw.drawn
    label, unit = METRICS.get(metric, ("", ""))
    if tpl == "segment_bar":
        members = [m for m in _segments(ent, entities) if printed(metric, period, m) is not None]
        values = [printed(metric, period, m) for m in members]
        _header(draw, style, ent, f"{label} by segment", f"{period}  ·  {unit}", page["page"], foot)
        if members:
            _draw_segment_bar(draw, style, members, values, metric)
    elif tpl == "kpi_table":
        prior = book.periods[book.periods.index(period) - 4]
        rows = [[METRICS[m][0], printed.text(m, period), printed.text(m, prior),
                 printed.text(f"{m}_change", period, fmt=lambda v: f"{v:+.1f}%")]
                for m in KPI_METRICS]
        _header(draw, style, ent, "Key figures", f"{period} compared with {prior}", page["page"], foot)
        _draw_table(draw, style, ["Metric", period, prior, "Change"], rows)
    elif tpl == "trend_line":
        i = book.periods.index(period)
        labels = [p for p in book.periods[i - 5:i + 1] if printed(metric, p) is not None]
        values = [printed(metric, p) for p in labels]
        _header(draw, style, ent, f"{label} trend", f"Last six quarters to {period}  ·  {unit}", page["page"], foot)
        if len(values) >= 2:
            _draw_trend(draw, style, [f"{p[:2]} '{p[-2:]}" for p in labels], values, metric)
    elif tpl == "region_table":
        prior = book.periods[book.periods.index(period) - 4]
        rows = [[region, printed.text(metric, period, region), printed.text(metric, prior, region),
                 printed.text(f"{metric}_change", period, region, fmt=lambda v: f"{v:+.1f}%")]
                for region in REGIONS]
        _header(draw, style, ent, f"{label} by region", f"{period}  ·  {unit}", page["page"], foot)
        _draw_table(draw, style, ["Region", period, prior, "Change"], rows)
    elif tpl == "risk_factors":
        _header(draw, style, ent, "Risk factors", f"{period} report", page["page"])
        y = 100
        for k in rng.permutation(len(RISK_SENTENCES))[:4]:
            for line in _wrap(draw, RISK_SENTENCES[k], _font(18), WIDTH - 120):
                draw.text((60, y), line, fill=style.ink, font=_font(18))
                y += 26
            y += 14
    elif tpl == "cash_flow":
        rows = [[METRICS[m][0], printed.text(m, period, "total", fmt=money)] for m in CASH_FLOW_ITEMS]
        _header(draw, style, ent, "Condensed cash flow statement", f"{period}  ·  $M", page["page"])
        _draw_table(draw, style, ["Item", "Amount"], rows, col_w=[420, 200])
    elif tpl == "audit_opinion":
        _header(draw, style, ent, "Review report of the independent auditor", period, page["page"])
        text = (f"We have reviewed the condensed interim financial statements of {ent.name} for {period}. "
                "Based on our review, nothing has come to our attention that causes us to believe that "
                "the statements are not prepared, in all material respects, in accordance with the "
                "applicable financial reporting framework.")
        y = 110
        for line in _wrap(draw, text, _font(19), WIDTH - 120):
            draw.text((60, y), line, fill=style.ink, font=_font(19))
            y += 28
    elif tpl == "signature":
        _header(draw, style, ent, "Signatures", period, page["page"])
        for k, role in enumerate(("Chief Executive Officer", "Chief Financial Officer", "Chair of the Board")):
            y = 140 + k * 110
            draw.line([60, y + 40, 420, y + 40], fill=style.ink, width=1)
            draw.text((60, y + 48), role, fill=style.ink, font=_font(18))
    elif tpl == "org_chart":
        _header(draw, style, ent, "Organisation", period, page["page"])
        draw.rectangle([380, 110, 580, 160], outline=style.primary, width=3)
        draw.text((400, 125), ent.name.split()[0], fill=style.ink, font=_font(18))
        members = _segments(ent, entities)
        for k, m in enumerate(members):
            x = 120 + k * 260
            draw.line([480, 160, x + 100, 260], fill=style.ink, width=2)
            draw.rectangle([x, 260, x + 200, 310], outline=style.accent, width=3)
            draw.text((x + 20, 275), m, fill=style.ink, font=_font(18))
    return img, draw.drawn


KPI_METRICS = ("revenue", "operating_income", "capex", "headcount")
CASH_FLOW_ITEMS = ("operating_cash_flow", "capex_paid", "free_cash_flow", "dividends_paid")


def _page_facts(page: dict, ent: Entity, entities: list[Entity], book: Book, rng: np.random.Generator) -> list[dict]:
    """What a reader can read off the page: one row per printed number (the render draws these and
    only these). Derived figures a page prints (a year-on-year change, free cash flow) are facts
    too, under their own metric."""
    tpl, metric, period, rev = page["template_id"], page["metric"], page["period"], page["revision"]
    rows = []

    def add(m, p, member, value):
        rows.append(dict(unit_id=page["unit_id"], entity=ent.name, metric=m, period=p, member=member,
                         value=float(value), unit=METRICS[m][1], revision=rev))

    def change(m, member, cur, old):
        add(f"{m}_change", period, member, round((cur / old - 1) * 100, 1))

    if tpl == "segment_bar":
        for m in _segments(ent, entities):
            add(metric, period, m, book.get(ent.slug, metric, period, m, rev))
    elif tpl == "kpi_table":
        prior = book.periods[book.periods.index(period) - 4]
        for m in KPI_METRICS:
            cur, old = book.get(ent.slug, m, period, "total", rev), book.get(ent.slug, m, prior, "total", 2)
            add(m, period, "total", cur)
            add(m, prior, "total", old)
            change(m, "total", cur, old)
    elif tpl == "trend_line":
        i = book.periods.index(period)
        for p in book.periods[i - 5:i + 1]:
            add(metric, p, "total", book.get(ent.slug, metric, p, "total", rev if p == period else 2))
    elif tpl == "region_table":
        prior = book.periods[book.periods.index(period) - 4]
        for region in REGIONS:
            cur, old = book.get(ent.slug, metric, period, region, rev), book.get(ent.slug, metric, prior, region, 2)
            add(metric, period, region, cur)
            add(metric, prior, region, old)
            change(metric, region, cur, old)
    elif tpl == "cash_flow":
        ocf = round(book.get(ent.slug, "operating_income", period) * float(rng.uniform(1.05, 1.3)), 0)
        capex = book.get(ent.slug, "capex", period)
        add("operating_cash_flow", period, "total", ocf)
        add("capex_paid", period, "total", -capex)
        add("free_cash_flow", period, "total", ocf - capex)
        add("dividends_paid", period, "total", -round(ocf * 0.2, 0))
    return rows


# ----------------------------------------------------------------------------- captions

def _captions(page: dict, ent: Entity, rng: np.random.Generator) -> dict:
    """Caption fields as an asset database holds them: partial and sometimes wrong."""
    tpl, metric, period = page["template_id"], page["metric"], page["period"]
    short = "".join(w[0] for w in ent.name.split()).lower()
    code = _period_code(period)
    label = METRICS.get(metric, ("", ""))[0].lower()
    u = rng.random(3)
    if u[0] < 0.45:
        filename = f"{short}_{code}_deck_p{page['page']:02d}.png"
    elif u[0] < 0.75:
        filename = f"{tpl}_{metric or 'page'}_{code}_final.png".replace("__", "_")
    else:
        filename = f"IMG_{int(rng.integers(1000, 9999))}.png"
    kind = {"segment_bar": "bar chart", "trend_line": "line chart", "kpi_table": "table",
            "region_table": "table", "cash_flow": "table"}.get(tpl, "slide")
    if u[1] < 0.35:
        alt = ""
    elif u[1] < 0.65:
        alt = kind
    else:
        alt = f"{kind} of {label} for {ent.name}" if label else f"{ent.name} {kind}"
    subject = {"segment_bar": f"{label} by segment", "trend_line": f"{label} over six quarters",
               "region_table": f"{label} by region", "kpi_table": "key figures", "cash_flow": "cash flow",
               "risk_factors": "risk factors", "audit_opinion": "auditor's review", "signature": "sign-off page",
               "org_chart": "group structure", "cover": "results presentation"}[tpl]
    if u[2] < 0.25:
        caption = ""
    elif u[2] < 0.5:
        caption = f"{ent.name} {subject}, {period}"
    elif u[2] < 0.7:
        # names things the page does not show
        caption = f"{ent.name} delivers a record quarter" if label else f"{ent.name} investor update"
    elif u[2] < 0.85:
        caption = f"{subject.capitalize()} at {ent.name}, {period.split()[1]}"
    else:
        caption = f"{subject.capitalize()} at a glance"
    return dict(filename=filename, alt_text=alt, caption=caption)


# ----------------------------------------------------------------------------- questions

QUALIFIER_AXES = ("entity", "metric", "period")


def _questions(units: pd.DataFrame, entities: dict, ents: list[Entity], book: Book, counts: dict,
               rng: np.random.Generator) -> pd.DataFrame:
    r1 = units[units["revision"] == 1]
    by_key = {(r.entity, r.template_id, r.metric, r.period): r for r in r1.itertuples()}
    decks = sorted({(r.entity, r.period) for r in r1.itertuples()})
    slug = {e.name: e.slug for e in ents}
    cands: dict[str, list[dict]] = {k: [] for k in counts}

    def q(structure, register, text, answer, evidence, quals, op, needs, template=""):
        # the answer key: what the question asks for, as facts (see lookalike.judges.ReferenceJudge)
        key = [dict(op=op, need=i + 1, template_id=template, entity=ne, metric=nm, period=np_, member=mem,
                    revision=1) for i, (ne, nm, np_, mem) in enumerate(needs)]
        cands[structure].append((dict(text=text, answer=answer, evidence_structure=structure,
                                      register=register, qualifiers=";".join(quals),
                                      qualified=len(quals) == 3,
                                      evidence_unit_ids=";".join(evidence)), key))

    for entity_name, period in decks:
        e = entities[slug[entity_name]]
        members = _segments(e, ents)
        sb = by_key.get((entity_name, "segment_bar", "revenue", period))
        sbi = by_key.get((entity_name, "segment_bar", "operating_income", period))
        kpi = by_key.get((entity_name, "kpi_table", "kpi_summary", period))
        rt = by_key.get((entity_name, "region_table", "revenue", period))
        seg_rev = {m: book.get(e.slug, "revenue", period, m) for m in members}
        top = max(seg_rev, key=seg_rev.get)
        top_ans = f"{top}, {money(seg_rev[top])}"
        top_key = ("argmax_value", [(entity_name, "revenue", period, "*segment")])
        # page-single, three registers, qualified and under-specified forms
        q("page-single", "question", f"Which segment contributed the most revenue for {entity_name} in {period}?",
          top_ans, [sb.unit_id], QUALIFIER_AXES, *top_key)
        q("page-single", "question", "Which segment contributed the most revenue?", top_ans, [sb.unit_id], ("metric",),
          *top_key)
        q("page-single", "question", f"Which segment of {entity_name} brought in the most revenue?", top_ans,
          [sb.unit_id], ("entity", "metric"), *top_key)
        q("page-single", "shown", f"Bar chart of revenue by segment for {entity_name}, {period}", top_ans,
          [sb.unit_id], QUALIFIER_AXES, *top_key, "segment_bar")
        q("page-single", "shown", f"Bar chart of revenue by segment, {period}", top_ans, [sb.unit_id],
          ("metric", "period"), *top_key, "segment_bar")
        q("page-single", "style",
          f"{e.style.name.capitalize()}-coloured bar chart slide under a {e.style.name} title band: {entity_name} "
          f"revenue by segment, {period}", top_ans, [sb.unit_id], QUALIFIER_AXES, *top_key, "segment_bar")
        total_inc = book.get(e.slug, "operating_income", period)
        q("page-single", "question", f"What was {entity_name}'s operating income in {period}?", money(total_inc),
          [kpi.unit_id], QUALIFIER_AXES, "value", [(entity_name, "operating_income", period, "total")])
        q("page-single", "shown", f"Table of key figures for {entity_name} comparing {period} with a year earlier",
          money(book.get(e.slug, "revenue", period)), [kpi.unit_id], ("entity", "period"),
          "value", [(entity_name, "revenue", period, "total")], "kpi_table")
        q("page-single", "style", f"Striped {e.style.name} table of {entity_name} revenue by region, "
          f"{period}", REGIONS[int(np.argmax([book.get(e.slug, 'revenue', period, r) for r in REGIONS]))],
          [rt.unit_id], QUALIFIER_AXES, "argmax", [(entity_name, "revenue", period, "*region")], "region_table")
        # page-multi: two facts of one page
        a, b = members[0], members[1]
        diff = seg_rev[a] - seg_rev[b]
        q("page-multi", "question", f"How much more revenue did {a} bring in than {b} at {entity_name} in {period}?",
          money(diff), [sb.unit_id], QUALIFIER_AXES, "diff",
          [(entity_name, "revenue", period, a), (entity_name, "revenue", period, b)])
        reg = {r: book.get(e.slug, "revenue", period, r) for r in REGIONS}
        q("page-multi", "question", f"What was the combined revenue of Europe and Asia Pacific for {entity_name} "
          f"in {period}?", money(reg["Europe"] + reg["Asia Pacific"]), [rt.unit_id], QUALIFIER_AXES, "sum",
          [(entity_name, "revenue", period, "Europe"), (entity_name, "revenue", period, "Asia Pacific")])
        # doc-adjacent / near / far: pairs of pages of one deck, structure from their distance
        seg_inc = book.get(e.slug, "operating_income", period, top)
        rev_top, inc_top = (entity_name, "revenue", period, top), (entity_name, "operating_income", period, top)
        pairs = [
            ((sb, sbi), f"What was the operating margin of {entity_name}'s {top} segment in {period}?",
             f"{seg_inc / seg_rev[top] * 100:.1f}%", "ratio", [inc_top, rev_top]),
            ((sb, kpi), f"What share of {entity_name}'s total revenue in {period} came from the {top} segment?",
             f"{seg_rev[top] / book.get(e.slug, 'revenue', period) * 100:.1f}%", "ratio",
             [rev_top, (entity_name, "revenue", period, "total")]),
            ((sb, rt), f"At {entity_name} in {period}, was {top} segment revenue larger than North America revenue?",
             "yes" if seg_rev[top] > reg["North America"] else "no", "greater",
             [rev_top, (entity_name, "revenue", period, "North America")]),
            ((sbi, rt), f"At {entity_name} in {period}, what was the {top} segment's operating income as a share of "
             f"Europe revenue?", f"{seg_inc / reg['Europe'] * 100:.1f}%", "ratio",
             [inc_top, (entity_name, "revenue", period, "Europe")]),
        ]
        for (u1, u2), text, answer, op, needs in pairs:
            gap = abs(int(u1.page) - int(u2.page))
            structure = "doc-adjacent" if gap == 1 else "doc-near" if gap <= 3 else "doc-far"
            q(structure, "question", text, answer, [u1.unit_id, u2.unit_id], QUALIFIER_AXES, op, needs)
    # cross-doc: the same metric and period for two entities
    periods = sorted({p for _, p in decks}, key=book.periods.index)
    for period in periods:
        names = sorted({n for n, p in decks if p == period})
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                a, b = names[i], names[j]
                ka, kb = by_key[(a, "kpi_table", "kpi_summary", period)], by_key[(b, "kpi_table", "kpi_summary", period)]
                va, vb = book.get(slug[a], "operating_income", period), book.get(slug[b], "operating_income", period)
                q("cross-doc", "question", f"Which had the higher operating income in {period}: {a} or {b}?",
                  a if va > vb else b, [ka.unit_id, kb.unit_id], QUALIFIER_AXES, "higher_of",
                  [(a, "operating_income", period, "total"), (b, "operating_income", period, "total")])
    rows, keys = [], []
    for structure, n in counts.items():
        pool = cands[structure]
        take = rng.choice(len(pool), size=min(n, len(pool)), replace=False)
        for k in sorted(take):
            rows.append(pool[k][0])
            keys.append(pool[k][1])
    out = pd.DataFrame(rows)
    out.insert(0, "query_id", [f"q{i + 1:04d}" for i in range(len(out))])
    key = pd.DataFrame([dict(query_id=qid, **need) for qid, needs in zip(out["query_id"], keys) for need in needs],
                       columns=ANSWER_KEY_COLUMNS)
    return out[QUESTION_COLUMNS], key


# ----------------------------------------------------------------------------- corpus

def generate(size: str, seed: int, out_dir: Path | str, drawn: dict | None = None) -> Corpus:
    """Render the demo corpus into out_dir/images and return its units, facts and questions.
    drawn: a dict to fill with unit_id -> [(text, (x0, y0, x1, y1)), ...], every text each page
    prints (the facts-vs-pixels test reads it).

    size: "ci" (~150 units) or "demo" (~600 units). Image paths in the units table are relative to
    out_dir's parent (the run directory), so a run folder can be moved whole.
    """
    if size not in SIZES:
        raise ValueError(f"unknown demo size {size!r}; expected one of {sorted(SIZES)}")
    spec = SIZES[size]
    out_dir = Path(out_dir)
    img_dir = out_dir / "images"
    img_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 20240])
    ents = [e for e in ENTITIES if e.slug in spec["entities"]]
    periods = _periods(spec["periods"])
    book = _simulate(ents, periods, rng)
    deck_periods = periods[HISTORY:]
    pages = []
    for ent in ents:
        for period in deck_periods:
            doc_id = f"{ent.slug}-{_period_code(period)}"
            for p, (tpl, metric) in enumerate(DECK_PAGES[size], start=1):
                if tpl == "closing":
                    tpl = CLOSING_KINDS[(deck_periods.index(period) + ENTITIES.index(ent)) % 3]
                pages.append(dict(doc_id=doc_id, page=p, template_id=tpl, metric=metric, entity=ent.name,
                                  period=period, revision=1, slug=ent.slug))
    # Restatements: some decks get a supplement whose revenue figures differ (revision 2).
    order = rng.permutation(len(ents) * (len(deck_periods) - 1))[: spec["restated"]]
    for k in sorted(order):
        ent = ents[k // (len(deck_periods) - 1)]
        period = deck_periods[k % (len(deck_periods) - 1)]
        members = _segments(ent, ents)
        seg = members[int(rng.integers(len(members)))]
        key = (ent.slug, "revenue", period, seg)
        delta = round(book.values[key] * float(rng.choice([-1, 1]) * rng.uniform(0.03, 0.08)), 0)
        book.restated[key] = book.values[key] + delta
        book.restated[(ent.slug, "revenue", period, "total")] = book.values[(ent.slug, "revenue", period, "total")] + delta
        doc_id = f"{ent.slug}-{_period_code(period)}-restated"
        for p, (tpl, metric) in enumerate(RESTATED_PAGES, start=1):
            pages.append(dict(doc_id=doc_id, page=p, template_id=tpl, metric=metric, entity=ent.name,
                              period=period, revision=2, slug=ent.slug))
    by_slug = {e.slug: e for e in ents}
    unit_rows, fact_rows, visible_rows = [], [], []
    written = _WrittenPages(img_dir)
    for page in pages:
        page["unit_id"] = f"{page['doc_id']}:{page['page']}"
        ent = by_slug[page["slug"]]
        page_rng = np.random.default_rng([seed, len(unit_rows)])
        facts = _page_facts(page, ent, ents, book, page_rng)
        img, texts = _render(page, facts, ent, ents, book, page_rng)
        visible_rows.append(dict(unit_id=page["unit_id"], colour=ent.style.name, layout=LAYOUT[page["template_id"]],
                                 title=texts[1 if page["template_id"] == "cover" else 0][0],
                                 printed=" | ".join(t for t, _ in texts)))
        if drawn is not None:
            drawn[page["unit_id"]] = texts
        rel = Path(out_dir.name) / "images" / f"{page['doc_id']}_p{page['page']:02d}.png"
        written.save(img, out_dir.parent / rel)
        caps = _captions(page, ent, page_rng)
        unit_rows.append(dict(unit_id=page["unit_id"], doc_id=page["doc_id"], page=page["page"],
                              image_path=rel.as_posix(), template_id=page["template_id"], entity=page["entity"],
                              metric=page["metric"], period=page["period"], revision=page["revision"],
                              content_type=CONTENT_TYPE[page["template_id"]], entity_kind=ent.kind, **caps))
        fact_rows.extend(facts)
    written.close()
    units = pd.DataFrame(unit_rows)[UNIT_COLUMNS]
    facts = pd.DataFrame(fact_rows, columns=FACT_COLUMNS)
    questions, answer_key = _questions(units, by_slug, ents, book, spec["questions"], rng)
    return Corpus(units=units, facts=facts, questions=questions, answer_key=answer_key,
                  visible=pd.DataFrame(visible_rows, columns=VISIBLE_COLUMNS), planted=planted(units, questions))


def restated_twins(units: pd.DataFrame) -> set[str]:
    """Units in a restatement pair: a page of figures and its republished twin (same entity, period,
    template and metric, the other revision). A republished cover prints no figure and is no pair."""
    key = units["entity"] + "|" + units["period"] + "|" + units["template_id"] + "|" + units["metric"]
    revisions = units.groupby(key)["revision"].nunique()
    return set(units.loc[(key.map(revisions) > 1) & (units["metric"] != ""), "unit_id"])


def under_specified(questions: pd.DataFrame, units: pd.DataFrame) -> pd.Series:
    """The questions the generator made under-specified, by construction: those that omit the entity or
    the period (other decks print the same kind of page), and those whose evidence a restatement
    republished without the question naming a revision (the supplement answers it too). A
    question that omits only the metric of a key-figures table is not: that page is one per deck."""
    twins = restated_twins(units)
    omits = questions["qualifiers"].map(lambda q: not {"entity", "period"} <= set(str(q).split(";")))
    republished = questions["evidence_unit_ids"].map(lambda ids: any(u in twins for u in str(ids).split(";")))
    return (omits | republished).rename("under_specified")


def planted(units: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """What this corpus plants for the report to recover (tables/planted.csv). Stage 07 pairs each row
    with what the instrument measured (tables/planted_effects.csv)."""
    flags = under_specified(questions, units)
    rows = [
        ("under-specified questions", float(flags.mean()),
         f"{int(flags.sum())} of {len(flags)} questions omit the entity or the period, or ask about a page a "
         "restatement republished; stage 05 must flag this share"),
        ("restatement pairs", float(len(restated_twins(units))),
         "units whose figures are printed in two revisions (each restated page and its original); the revision "
         "pools (stage 04's rule, over every unit) must find exactly these"),
        ("leaky pixel system", "LEAK",
         "a pixel system whose input has the unit's file name appended (the leak-check filename injection); the "
         "gate must say LEAK for it and PASS for the clean systems"),
        ("caption index: caption-derived / blind recall@10", 2.0,
         "blind queries describe the page, caption-derived ones paraphrase the caption: the caption index must "
         "find caption-derived queries at least twice as often"),
        ("image index: caption-derived − blind recall@10", 0.0,
         "the pixels-only index reads no caption: its paired difference must have a CI containing 0"),
        ("judge door: relevant labels gained with metadata visible", "more",
         "a lenient judge (half of the question's words on the page make it supporting) run again with each "
         "unit's file name and caption appended to what it reads must label more pairs relevant, the gains "
         "concentrated on units whose file name or caption holds a query term"),
        ("validity ladder: slope under random negatives", 0.0,
         "top-1 of synthetic systems of sibling discrimination p must stay flat under random negatives "
         "(slope within ±0.1)"),
        ("validity ladder: slope under hard negatives", 1.0,
         "and follow p under hard negatives (slope above 0.5)"),
    ]
    return pd.DataFrame(rows, columns=PLANTED_COLUMNS)
