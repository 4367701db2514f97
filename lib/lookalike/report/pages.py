"""Stand-alone HTML pages people work in — the labelling page and stage 03's blind judging sheet —
rendered from jinja2 templates shipped as package data (lookalike/report/templates). Autoescaping
is on: text from a corpus (questions, captions, file names) reaches the page escaped."""

from __future__ import annotations

import json
from functools import lru_cache
from collections.abc import Iterable, Mapping

import jinja2

from lookalike.vocab import LABEL_GRADES, LABEL_MEANINGS, LABELS, label_meanings

# The labelling page's keys per label: a number and a letter.
LABEL_KEYS = {"sufficient": ("1", "s"), "supporting": ("2", "p"), "irrelevant": ("3", "i")}


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The jinja2 environment over the package's templates: autoescaped, strict about undefined names."""
    return jinja2.Environment(loader=jinja2.PackageLoader("lookalike", "report/templates"),
                              autoescape=jinja2.select_autoescape(["html", "html.j2"], default_for_string=True),
                              keep_trailing_newline=True, undefined=jinja2.StrictUndefined)


def render(template: str, **context) -> str:
    """A template rendered with these values."""
    return environment().get_template(template).render(**context)


def script_json(data) -> str:
    """JSON that is safe inside a <script> block: <, > and & as \\u escapes, ASCII only."""
    return (json.dumps(data, ensure_ascii=True)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def labelling_page(title: str, data: Mapping, noun: str = "page") -> str:
    """The labelling page: data holds page (an id), items (id, q, img) and images (img -> data URI);
    the rubric is the one for the corpus's units (vocab.label_meanings)."""
    labels = [(*LABEL_KEYS[lab], lab, label_meanings(noun)[lab]) for lab in LABELS]
    return render("labelling.html.j2", title=title, data=script_json(data), labels=labels)


def judging_sheet(items: Iterable[tuple[str, str, str]], noun: str = "page") -> str:
    """Stage 03's blind judging sheet: items are (item id, query text, image src); noun: what the corpus calls
    a unit (vocab.unit_noun)."""
    labels = [(lab, LABEL_GRADES[lab], LABEL_MEANINGS[lab]) for lab in LABELS]
    return render("judging_sheet.html.j2", items=list(items), labels=labels, noun=noun)


def label_server_page(noun: str = "page") -> str:
    """The label server's one page: sign in with a personal token, then label (or adjudicate) one pair
    at a time. It holds no corpus text and nothing about who is in which pool: every question, label
    and caption arrives as JSON and is set with textContent."""
    labels = [(*LABEL_KEYS[lab], lab, label_meanings(noun)[lab]) for lab in LABELS]
    return render("label_server.html.j2", labels=labels)


def _cell(value) -> str:
    if isinstance(value, float):
        return "" if value != value else f"{value:.2f}"
    return str(value)


def _rows(df) -> tuple[list[str], list[list[str]]]:
    return list(df.columns), [[_cell(v) for v in row] for row in df.itertuples(index=False)]


def label_progress_page(progress: Mapping, per_pair: int, pools: int, lead: bool = False) -> str:
    """Progress: pairs done per annotator and per question, labels per hour, time left at that rate.
    Who is in which pool (and that there are pools) is shown to the lead only."""
    rate, left = progress["labels_per_hour"], progress["hours_left"]
    summary = (f"{progress['filled']} of {progress['slots']} label slots filled ({per_pair * (1 if lead else pools)} "
               "per pair" + (f" in each of {pools} pools" if pools > 1 and lead else "") + "); "
               + (f"the team labels {rate:.0f} pairs an hour; at that rate {left:.1f} hours are left"
                  if left is not None else "the rate is not measured yet (it needs two labels)"))
    people = progress["per_annotator"] if lead else progress["per_annotator"].drop(columns=["pool"])
    return render("label_tables.html.j2", title="lookalike — labelling progress", summary=summary,
                  tables=[("per annotator", *_rows(people)),
                          ("per question", *_rows(progress["per_question"]))], lines=[])


def label_agreement_page(table, lines: list[str]) -> str:
    """Agreement among people and with the model, each row in words and as a table."""
    return render("label_tables.html.j2", title="lookalike — agreement", summary="", lines=lines,
                  tables=[("agreement", *_rows(table))])
