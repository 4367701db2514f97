"""The report site's pages, each rendered from a jinja2 template (lookalike/report/templates, autoescaped):
index.html (the front page), summary.html (the stakeholder page) and each stage notebook as HTML —
full (html/<stage>.html) and for stakeholders, without code (html/<stage>.report.html). Where the
run folder's other files go is report.run_folder.

Every HTML file opens offline (no http(s) script or stylesheet) and escapes corpus text.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from lookalike.report import pages
from lookalike.report import tables as readable
from lookalike.report.summary import Block, nouned
from lookalike.vocab import unit_noun

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:1.5rem;
color:#1d2330;line-height:1.45}
h1,h2,h3{line-height:1.2} a{color:#1f4fa3}
table{border-collapse:collapse;font-size:.9rem;margin:.5rem 0} th,td{border-bottom:1px solid #dde;padding:.25rem .6rem;
text-align:right} th{background:#f1f3f8} td:first-child,th:first-child{text-align:left}
pre{background:#f6f7fa;padding:.6rem;font-size:.85rem;white-space:pre-wrap;overflow-wrap:anywhere}
.input_prompt,.output_prompt{display:none} .input_area{border-left:3px solid #c9d3ea;margin:.4rem 0}
.output_stderr{display:none} .cell{margin:.6rem 0} img,svg{max-width:100%;height:auto}
.stage{border:1px solid #dde;border-radius:6px;padding:1rem;margin:1rem 0} .muted{color:#667}
.numbers td{text-align:left} .wide{overflow-x:auto;max-width:100%} table.metric td{white-space:normal}
table.metric caption{text-align:left;color:#667;caption-side:bottom;font-size:.85rem}
.output_html,.jp-RenderedHTML,.jp-OutputArea-output{overflow-x:auto;max-width:100%}
"""


# a cell tag: the cell is left out of <stage>.report.html (its table is shown there as HTML instead)
REPORT_HIDE = "report-hide"


def _page(title: str, body: str, extra_css: str = "") -> str:
    """A page around HTML that is already safe (nbconvert's export of a notebook)."""
    return pages.render("page.html.j2", title=title, css=CSS + extra_css, body=Markup(body))


# a stage report's tables: the stakeholder page's size, field names that wrap where they must (a
# table of many intervals fits a laptop's window instead of scrolling sideways)
REPORT_CSS = """
table.metric{font-size:.8rem} table.metric th{white-space:normal;overflow-wrap:anywhere;vertical-align:bottom}
"""


@functools.cache
def _exporter(with_code: bool):
    """One HTML exporter per kind, made once a process: an exporter compiles its templates on its first
    export, about a third of the time a stage's two exports took when each made its own."""
    from nbconvert import HTMLExporter

    # 'basic' renders cells only: no require.js / MathJax / mermaid from a CDN, unlike 'lab'.
    exporter = HTMLExporter(template_name="basic", exclude_input=not with_code,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    if not with_code:
        # the stakeholder export shows a table once, as HTML: the plain-text twin nbval checks is tagged
        from nbconvert.preprocessors import TagRemovePreprocessor

        exporter.register_preprocessor(TagRemovePreprocessor(remove_cell_tags=(REPORT_HIDE,)), enabled=True)
    return exporter


def notebook_to_html(nb_path: Path, out_path: Path, with_code: bool = True) -> Path:
    """Export an executed notebook to a self-contained offline HTML file (images embedded)."""
    import nbformat
    from pygments.formatters import HtmlFormatter

    nb = nbformat.read(nb_path, as_version=4)
    body, _ = _exporter(with_code).from_notebook_node(nb)
    title = nb_path.stem + ("" if with_code else " (report)")
    css = HtmlFormatter(style="default").get_style_defs(".highlight") + REPORT_CSS
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(_page(title, body, css), encoding="utf-8")
    return out_path


def _table_html(df: pd.DataFrame, table_id: str) -> str:
    """A table as people read it: CI triples folded into 'estimate [lo, hi]', fixed precision, escaped."""
    return readable.html_table(readable.with_ci(df), table_id)


# the systems table on index.html: what each column is called there (the CSV keeps its names)
SYSTEM_HEADERS = {"system": "system", "provenance": "reads", "kind": "kind", "n": "n", "recall_10": "Recall@10",
                  "chance_recall_10": "chance, Recall@10", "vs_chance": "against chance",
                  "ndcg_cut_10": "nDCG@10", "recall_all_10": "RecallAll@10", "search": "search"}


def systems_view(systems: pd.DataFrame) -> dict:
    """index.html's systems table: one row per system, each measure with its 95% CI in one cell, the
    interval's description said once under the table rather than in every row. It fits a 1,300 px
    window: the encoder ids and candidate-search recall stay in tables/systems.csv, named under it."""
    folded = readable.with_ci(systems)
    cols = [c for c in SYSTEM_HEADERS if c in folded.columns]
    said = sorted(set(systems["interval"].astype(str))) if "interval" in systems.columns else []
    return {"table": Markup(readable.html_table(folded[cols].rename(columns=SYSTEM_HEADERS), "index-systems")),
            "intervals": "; ".join(said),
            "rest": ", ".join(c for c in folded.columns if c not in SYSTEM_HEADERS and c != "interval")}


# the stakeholder page reads on a 1,300 px laptop screen without sideways scrolling: a wider column
# than the notebooks' pages (1180 + 2 x 24 px padding), tables a little smaller, cells that may wrap
SUMMARY_CSS = """
body{max-width:1180px} table.metric{font-size:.78rem} table.metric th{white-space:normal;vertical-align:bottom}
table.metric th[colspan]{text-align:center;border-bottom:2px solid #c9d3ea}
.lead{border-left:4px solid #4c6ef5;background:#f4f6ff;padding:.6rem 1rem;margin:1rem 0}
.lead p{margin:.3rem 0} .lead .verdict{font-size:1.08rem;font-weight:600}
"""


def write_summary(run_dir: Path | str, title: str, blocks: list[Block], lead: dict | None = None) -> Path:
    """outputs/<run>/summary.html: the stakeholder page — headings, sentences, tables and figures,
    no code. lead: run, corpus, date and the verdict sentence, shown first (report.summary.lead).
    blocks: report.summary.Block, in order (text escaped; a table escaped, two-level columns as grouped
    headers; a figure inlined as SVG so the page stands alone)."""
    run_dir = Path(run_dir)
    shown = []
    for i, b in enumerate(blocks):
        view: dict[str, Any] = {"heading": b.heading, "text": b.text, "footnote": b.footnote, "note": b.note}
        view["table"] = Markup(_table_html(b.table, f"summary-{i}")) if b.table is not None and len(b.table) else ""
        svg_path = run_dir / "figures" / f"{b.figure}.svg"
        # the run's own chart, drawn by vl-convert from the run's tables (its text escaped as SVG)
        view["svg"] = (Markup(re.sub(r"^<\?xml[^>]*>\s*", "", svg_path.read_text(encoding="utf-8")))
                       if b.figure and svg_path.is_file() else "")
        shown.append(view)
    out = run_dir / "summary.html"
    out.write_text(pages.render("summary.html.j2", title=title, css=CSS + SUMMARY_CSS, lead=lead, blocks=shown,
                                browse=(run_dir / "browse" / "index.html").is_file()), encoding="utf-8")
    return out


def _has_rows(path: Path) -> bool:
    """A CSV with at least one row under its header (reads two lines, not the file)."""
    with path.open(encoding="utf-8") as fh:
        return sum(1 for _, _line in zip(range(2), fh)) > 1


def _failure_words(stage: str, error: str, notebook: str) -> str:
    return (f"Stage {stage} failed: {error}. What to do: open {notebook} (the partial notebook is kept) to see "
            f"the cell that raised, mend the input or parameter the error names (lookalike check PARAMS.yaml "
            f"reads every input in seconds), then run again; --stage {stage} runs that stage alone once the "
            "stages before it have run.")


def write_failed_summary(run_dir: Path | str, title: str, stage: str, error: str, not_run: list[str]) -> Path:
    """summary.html for a run that stopped before its metric tables: what failed and what did not run,
    so a stakeholder's link never opens an old run's figures or nothing."""
    blocks = [Block("This run did not finish", text=_failure_words(stage, error, f"notebooks/{stage}.ipynb"),
                    note=("Did not run, because a stage before them failed: " + ", ".join(not_run) + "."
                          if not_run else ""))]
    return write_summary(run_dir, title, blocks)


def _corpus_sentence(corpus, units: pd.DataFrame) -> str:
    """index.html's corpus line: the source, where it was read from (when there is a where), counts;
    templates are counted only when the corpus names them."""
    source = str(corpus.source)
    where = corpus.demo_size if source == "demo" else (corpus.root or corpus.manifest)
    where = Path(str(where)).name if source != "demo" and where else str(where)
    head = f"{source} corpus" + (f" ({where})" if where else "")
    docs = units["doc_id"].nunique() if "doc_id" in units.columns else 0
    templates = units.loc[units["template_id"].astype(str) != "", "template_id"].nunique() if "template_id" in units.columns else 0
    tmpl = (f"{templates} template" + ("" if templates == 1 else "s") if templates
            else "no template metadata (hard negatives fall back to appearance clusters)")
    return (f"{head}: {len(units)} unit" + ("" if len(units) == 1 else "s") + f" in {docs} document"
            + ("" if docs == 1 else "s") + f", {tmpl}.")


def _run_noun(run_dir: Path, source: str) -> str:
    """What the run's units are called (vocab.unit_noun): from the corpus source and the units' content types."""
    units_csv = run_dir / "tables" / "units.csv"
    types = (pd.read_csv(units_csv, dtype=str, keep_default_na=False, usecols=lambda c: c == "content_type")
             .get("content_type", pd.Series(dtype=str)) if units_csv.is_file() else ())
    return unit_noun(source, types)


def build_index(run_dir: Path | str, cfg, stages: list[str], failed: dict | None = None,
                not_run: list[str] = ()) -> Path:
    """Write outputs/<run>/index.html from the run's headlines, tables and typed parameters (cfg:
    params.typed or params.recorded). failed (stage, error, notebook) and not_run: a run that stopped
    says which stage failed, why, and what did not run."""
    run_dir = Path(run_dir)
    units_csv, systems_csv = run_dir / "tables" / "units.csv", run_dir / "tables" / "systems.csv"
    corpus = (_corpus_sentence(cfg.corpus, pd.read_csv(units_csv, dtype=str, keep_default_na=False))
              if units_csv.is_file() else "")
    noun = _run_noun(run_dir, str(cfg.corpus.source))
    shown = []
    for stage in stages:
        rec_path = run_dir / "headlines" / f"{stage}.json"
        rec = json.loads(rec_path.read_text(encoding="utf-8")) if rec_path.is_file() else {}
        if noun != "page" and rec.get("sentence"):
            # the stages write 'page'; photos and an image folder's units are called by their noun
            said = nouned(str(rec["sentence"]), noun)
            if said != rec["sentence"]:
                rec["sentence"] = said
                rec_path.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        fig = rec.get("figure", "")
        kind = next((k for k in ("svg", "png") if fig and (run_dir / "figures" / f"{fig}.{k}").is_file()), "")
        shown.append({"stage": stage, "title": rec.get("title", stage), "sentence": rec.get("sentence", ""),
                      "numbers": [(str(k), str(v)) for k, v in (rec.get("numbers") or {}).items()],
                      "figure": fig, "figure_kind": kind})
    why = {stage: (f"stage {failed['stage']} failed before it." if failed else
                   "not asked for in this run (lookalike run --stage ran the others), and no earlier run left it here.")
           for stage in not_run}
    page = pages.render(
        "index.html.j2", title=str(cfg.title), css=CSS, run=str(cfg.run or run_dir.name),
        summary=(run_dir / "summary.html").is_file(), browse=(run_dir / "browse" / "index.html").is_file(),
        failed=({**failed, "words": _failure_words(failed["stage"], failed["error"], failed["notebook"])}
                if failed else None),
        corpus=corpus,
        systems=systems_view(pd.read_csv(systems_csv, keep_default_na=False)) if systems_csv.is_file() else None,
        stages=shown, not_run=list(why.items()),
        # tables with no rows (the demo's answer key on your corpus, say) are left out of the list
        tables=sorted(p.name for p in (run_dir / "tables").glob("*.csv") if _has_rows(p)))
    out = run_dir / "index.html"
    out.write_text(page, encoding="utf-8")
    return out
