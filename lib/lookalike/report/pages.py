"""Stand-alone HTML pages people work in — the labelling page and stage 03's blind judging sheet —
rendered from jinja2 templates shipped as package data (lookalike/report/templates). Autoescaping
is on: text from a corpus (questions, captions, file names) reaches the page escaped."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Iterable, Mapping

import jinja2

from lookalike.vocab import LABEL_GRADES, LABEL_MEANINGS, LABELS

# The labelling page's keys per label: a number and a letter.
LABEL_KEYS = {"sufficient": ("1", "s"), "supporting": ("2", "p"), "irrelevant": ("3", "i")}


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("lookalike", "report/templates"),
                              autoescape=jinja2.select_autoescape(["html", "html.j2"], default_for_string=True),
                              keep_trailing_newline=True, undefined=jinja2.StrictUndefined)


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)


def script_json(data) -> str:
    """JSON that is safe inside a <script> block: <, > and & as \\u escapes, ASCII only."""
    return (json.dumps(data, ensure_ascii=True)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def labelling_page(title: str, data: Mapping) -> str:
    """The labelling page: data holds page (an id), items (id, q, img) and images (img -> data URI)."""
    labels = [(*LABEL_KEYS[lab], lab, LABEL_MEANINGS[lab]) for lab in LABELS]
    return render("labelling.html.j2", title=title, data=script_json(data), labels=labels)


def judging_sheet(items: Iterable[tuple[str, str, str]]) -> str:
    """Stage 03's blind judging sheet: items are (item id, query text, image src)."""
    labels = [(lab, LABEL_GRADES[lab], LABEL_MEANINGS[lab]) for lab in LABELS]
    return render("judging_sheet.html.j2", items=list(items), labels=labels)
