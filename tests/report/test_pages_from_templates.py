"""Every HTML page lookalike writes comes from a jinja2 template (autoescaped): no module of
lookalike.report builds markup in an f-string, where one forgotten escape lets a caption's markup
into a stakeholder's page."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import lookalike

REPORT = Path(lookalike.__file__).resolve().parent / "report"
TAG = re.compile(r"</?[A-Za-z!][A-Za-z0-9-]*[\s>/=]")


def fstring_markup(source: str) -> list[int]:
    """Lines of f-strings whose literal parts hold an HTML tag."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            literal = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
            # a tag may close around a formatted value: '<h2>{x}</h2>' holds '<h2>' and '</h2>'
            if TAG.search(literal) or TAG.search(literal.replace("{", "").replace("}", "") + " "):
                lines.append(node.lineno)
    return lines


def test_no_module_of_the_report_writes_html_in_an_fstring():
    found = {p.name: fstring_markup(p.read_text(encoding="utf-8")) for p in sorted(REPORT.glob("*.py"))}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_the_check_finds_markup_in_an_fstring():
    assert fstring_markup('x = f"<h2>{title}</h2>"\n') == [1]
    assert fstring_markup("x = f'<td class=a>{v}'\n") == [1]
    assert fstring_markup('x = f"<p>{a}"\n') == [1]
    assert fstring_markup('x = f"{a} < {b} and 1 <2"\n') == []
    assert fstring_markup('x = "<p>{}</p>".format(a)\n') == []


def test_every_page_template_extends_the_one_page_frame():
    templates = REPORT / "templates"
    for name in ("index.html.j2", "summary.html.j2"):
        assert '{% extends "page.html.j2" %}' in (templates / name).read_text(encoding="utf-8")
