"""The run folder and the offline report site.

outputs/<run>/
  notebooks/   executed stage notebooks (papermill)
  html/        each notebook as HTML: full (<stage>.html) and for stakeholders, without code
               (<stage>.report.html)
  tables/      CSV at full precision (parquet beside large ones)
  figures/     Altair charts: spec JSON + SVG + HTML with Vega inlined; other images as PNG
  headlines/   one JSON per stage: the sentence and figure index.html shows for it
  index.html   the site's front page
  manifest.json  versions, params and hash, git revision, stage wall times, corpus fingerprint

Every HTML file opens offline (no http(s) script or stylesheet) and escapes corpus text.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import platform
import re
import subprocess
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from lookalike.io.cache import default_cache_dir
from lookalike.report import tables as readable
from lookalike.report.summary import nouned
from lookalike.vocab import unit_noun

LARGE_TABLE_ROWS = 100_000
KEY_PACKAGES = ("lookalike", "numpy", "pandas", "pyarrow", "torch", "torchvision", "colpali-engine", "transformers",
                "papermill", "nbconvert", "nbval", "altair", "vl-convert-python", "pillow", "faiss-cpu", "scipy")


def run_dirs(run_dir: Path | str) -> dict[str, Path]:
    """The run folder's subfolders, created if missing: keys run, tables, figures, headlines, corpus."""
    run_dir = Path(run_dir)
    dirs = {"run": run_dir}
    for name in ("tables", "figures", "headlines", "corpus"):
        dirs[name] = run_dir / name
        dirs[name].mkdir(parents=True, exist_ok=True)
    return dirs


def write_table(df: pd.DataFrame, run_dir: Path | str, name: str, sort_by: list[str] | None = None) -> Path:
    """Write tables/<name>.csv at full precision (and .parquet when large), rows in a fixed order.

    Floats are written with repr precision (17 significant digits round-trip), so a re-run with the
    same params gives the same bytes.
    """
    out = Path(run_dir) / "tables"
    out.mkdir(parents=True, exist_ok=True)
    if sort_by:
        df = df.sort_values(sort_by, kind="mergesort")
    df = df.reset_index(drop=True)
    path = out / f"{name}.csv"
    df.to_csv(path, index=False, float_format="%.17g", lineterminator="\n")
    if len(df) >= LARGE_TABLE_ROWS:
        df.to_parquet(out / f"{name}.parquet", index=False)
    return path


def save_chart(chart, run_dir: Path | str, name: str):
    """Save an Altair chart as figures/<name>.{vl.json,svg,html} (Vega inlined) and return an SVG display.

    The notebook shows the SVG, so neither the notebook nor its HTML export needs Vega from a CDN.
    """
    import vl_convert as vlc
    from IPython.display import SVG

    out = Path(run_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    spec = chart.to_dict()
    (out / f"{name}.vl.json").write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    svg = vlc.vegalite_to_svg(spec)
    (out / f"{name}.svg").write_text(svg, encoding="utf-8")
    with _vega_bundle_from_disk(vlc):
        chart.save(str(out / f"{name}.html"), inline=True)
    return SVG(svg)


@contextmanager
def _vega_bundle_from_disk(vlc):
    """While altair saves a chart with Vega inlined, vl_convert's JavaScript bundle comes from the
    cache folder. vl_convert builds the bundle (Vega, Vega-Lite, Vega-Embed: 0.9 MB) anew in every
    process, 1.5-2 s here, and each stage is a process. The bundle depends only on vl_convert's
    version and the Vega-Lite version asked for, which name the file; its sha256 is kept beside it,
    and a copy that does not match is built again. Only the plain call altair makes (no snippet) is
    served from disk; the original function is back when the block ends."""
    original = vlc.javascript_bundle

    def bundle(snippet=None, vl_version=None):
        if snippet is not None:
            return original(snippet, vl_version=vl_version)
        folder = default_cache_dir() / "vega-bundles"
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", f"vl-convert-{metadata.version('vl-convert-python')}-vega-lite-{vl_version}")
        js, digest = folder / f"{stem}.js", folder / f"{stem}.sha256"
        try:
            text = js.read_text(encoding="utf-8")
            if hashlib.sha256(text.encode("utf-8")).hexdigest() == digest.read_text(encoding="ascii").strip():
                return text
        except (OSError, UnicodeDecodeError):
            pass
        text = original(vl_version=vl_version)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for path, body in ((js, text), (digest, hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")):
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                tmp.write_text(body, encoding="utf-8")
                os.replace(tmp, path)                 # whole files only, even with stages in parallel
        except OSError:
            pass                                      # an unwritable cache costs time, not the chart
        return text

    vlc.javascript_bundle = bundle
    try:
        yield
    finally:
        vlc.javascript_bundle = original


def save_image(img, run_dir: Path | str, name: str):
    """Save a PIL image as figures/<name>.png and return it for display."""
    out = Path(run_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    img.save(out / f"{name}.png", format="PNG")
    return img


def record_headline(run_dir: Path | str, stage: str, title: str, sentence: str, figure: str = "",
                    numbers: dict[str, Any] | None = None) -> None:
    """What index.html shows for a stage: a title, one sentence, a figure file (under figures/), key numbers."""
    out = Path(run_dir) / "headlines"
    out.mkdir(parents=True, exist_ok=True)
    record = {"stage": stage, "title": title, "sentence": sentence, "figure": figure, "numbers": numbers or {}}
    (out / f"{stage}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------- HTML

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
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{CSS}{extra_css}</style></head>\n"
            f"<body>\n{body}\n</body></html>\n")


# a stage report's tables: the stakeholder page's size, field names that wrap where they must (a
# table of many intervals fits a laptop's window instead of scrolling sideways)
REPORT_CSS = """
table.metric{font-size:.8rem} table.metric th{white-space:normal;overflow-wrap:anywhere;vertical-align:bottom}
"""


def notebook_to_html(nb_path: Path, out_path: Path, with_code: bool = True) -> Path:
    """Export an executed notebook to a self-contained offline HTML file (images embedded)."""
    import nbformat
    from nbconvert import HTMLExporter
    from pygments.formatters import HtmlFormatter

    nb = nbformat.read(nb_path, as_version=4)
    # 'basic' renders cells only: no require.js / MathJax / mermaid from a CDN, unlike 'lab'.
    exporter = HTMLExporter(template_name="basic", exclude_input=not with_code,
                            exclude_input_prompt=True, exclude_output_prompt=True)
    if not with_code:
        # the stakeholder export shows a table once, as HTML: the plain-text twin nbval checks is tagged
        from nbconvert.preprocessors import TagRemovePreprocessor

        exporter.register_preprocessor(TagRemovePreprocessor(remove_cell_tags=(REPORT_HIDE,)), enabled=True)
    body, _ = exporter.from_notebook_node(nb)
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


def systems_html(systems: pd.DataFrame) -> str:
    """index.html's systems table: one row per system, each measure with its 95% CI in one cell, the
    interval's description said once under the table rather than in every row. It fits a 1,300 px
    window: the encoder ids and candidate-search recall stay in tables/systems.csv, named under it."""
    folded = readable.with_ci(systems)
    cols = [c for c in SYSTEM_HEADERS if c in folded.columns]
    table = readable.html_table(folded[cols].rename(columns=SYSTEM_HEADERS), "index-systems")
    said = sorted(set(systems["interval"].astype(str))) if "interval" in systems.columns else []
    rest = [c for c in folded.columns if c not in SYSTEM_HEADERS and c != "interval"]
    note = (f"<p class=muted>n: questions scored; intervals: {html.escape('; '.join(said))}. First look: every "
            "question against the whole corpus, scored by its evidence units (no hard negatives yet)."
            + (f" Also in tables/systems.csv: {html.escape(', '.join(rest))}." if rest else "") + "</p>")
    return f"<div class=wide>{table}</div>{note}"


# the stakeholder page reads on a 1,300 px laptop screen without sideways scrolling: a wider column
# than the notebooks' pages (1180 + 2 x 24 px padding), tables a little smaller, cells that may wrap
SUMMARY_CSS = """
body{max-width:1180px} table.metric{font-size:.78rem} table.metric th{white-space:normal;vertical-align:bottom}
table.metric th[colspan]{text-align:center;border-bottom:2px solid #c9d3ea}
.lead{border-left:4px solid #4c6ef5;background:#f4f6ff;padding:.6rem 1rem;margin:1rem 0}
.lead p{margin:.3rem 0} .lead .verdict{font-size:1.08rem;font-weight:600}
"""


def write_summary(run_dir: Path | str, title: str, blocks: list[dict], lead: dict | None = None) -> Path:
    """outputs/<run>/summary.html: the stakeholder page — headings, sentences, tables and figures,
    no code. lead: run, corpus, date and the verdict sentence, shown first (report.summary.lead).
    blocks: dicts with heading, text (plain; escaped), optional table (DataFrame; escaped; two-level
    columns become grouped headers), figure (a name under figures/, inlined as SVG so the page stands
    alone), note and footnote (a muted line under the table: what did not run and why)."""
    run_dir = Path(run_dir)
    esc = html.escape
    parts = [f"<h1>{esc(title)}</h1>"]
    if lead:
        parts.append(f'<div class=lead><p class=muted>run <b>{esc(str(lead["run"]))}</b> · {esc(str(lead["corpus"]))} · '
                     f'{esc(str(lead["date"]))}</p><p class=verdict>{esc(str(lead["verdict"]))}</p></div>')
    for b in blocks:
        parts.append(f"<h2>{esc(b['heading'])}</h2>")
        if b.get("text"):
            parts.append(f"<p>{esc(b['text'])}</p>")
        if b.get("table") is not None and len(b["table"]):
            parts.append(f'<div class=wide>{_table_html(b["table"], f"summary-{len(parts)}")}</div>')
        fig = b.get("figure")
        if fig and (run_dir / "figures" / f"{fig}.svg").is_file():
            svg = (run_dir / "figures" / f"{fig}.svg").read_text(encoding="utf-8")
            svg = re.sub(r"^<\?xml[^>]*>\s*", "", svg)
            parts.append(f"<figure>{svg}</figure>")
        if b.get("footnote"):
            parts.append(f"<p class=muted><small>{esc(b['footnote'])}</small></p>")
        if b.get("note"):
            parts.append(f"<p class=muted>{esc(b['note'])}</p>")
    if (run_dir / "browse" / "index.html").is_file():
        parts.append('<p><a href="browse/index.html"><b>Failure browser</b></a>: every question and system — '
                     'what came back instead of the gold, and how that look-alike differs.</p>')
    parts.append('<p class=muted><a href="index.html">Full report</a> · every number above comes from this run; '
                 'tables are in tables/ as CSV.</p>')
    out = run_dir / "summary.html"
    out.write_text(_page(title, "\n".join(parts), SUMMARY_CSS), encoding="utf-8")
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
    blocks = [{"heading": "This run did not finish",
               "text": _failure_words(stage, error, f"notebooks/{stage}.ipynb"),
               "note": ("Did not run, because a stage before them failed: " + ", ".join(not_run) + "."
                        if not_run else "")}]
    return write_summary(run_dir, title, blocks)


def _corpus_sentence(params: dict[str, Any], units: pd.DataFrame) -> str:
    """index.html's corpus line: the source, where it was read from (when there is a where), counts;
    templates are counted only when the corpus names them."""
    corpus = params.get("corpus", {})
    source = str(corpus.get("source", ""))
    where = corpus.get("demo_size", "") if source == "demo" else (corpus.get("root", "") or corpus.get("manifest", ""))
    where = Path(str(where)).name if source != "demo" and where else str(where)
    head = f"{source} corpus" + (f" ({where})" if where else "")
    docs = units["doc_id"].nunique() if "doc_id" in units.columns else 0
    templates = units.loc[units["template_id"].astype(str) != "", "template_id"].nunique() if "template_id" in units.columns else 0
    tmpl = (f"{templates} template" + ("" if templates == 1 else "s") if templates
            else "no template metadata (hard negatives fall back to appearance clusters)")
    return (f"{head}: {len(units)} unit" + ("" if len(units) == 1 else "s") + f" in {docs} document"
            + ("" if docs == 1 else "s") + f", {tmpl}.")


def _run_noun(run_dir: Path, params: dict[str, Any]) -> str:
    """What the run's units are called (vocab.unit_noun): from the corpus source and the units' content types."""
    units_csv = run_dir / "tables" / "units.csv"
    types = (pd.read_csv(units_csv, dtype=str, keep_default_na=False, usecols=lambda c: c == "content_type")
             .get("content_type", pd.Series(dtype=str)) if units_csv.is_file() else ())
    return unit_noun(str((params.get("corpus") or {}).get("source", "")), types)


def build_index(run_dir: Path | str, params: dict[str, Any], stages: list[str], failed: dict | None = None,
                not_run: list[str] = ()) -> Path:
    """Write outputs/<run>/index.html from the run's headlines, tables and manifest. failed (stage, error,
    notebook) and not_run: a run that stopped says which stage failed, why, and what did not run."""
    run_dir = Path(run_dir)
    esc = html.escape
    parts = [f"<h1>{esc(str(params.get('title', 'lookalike report')))}</h1>",
             f"<p class=muted>run <b>{esc(str(params.get('run', run_dir.name)))}</b></p>"]
    if (run_dir / "summary.html").is_file():
        parts.append('<p><a href="summary.html"><b>Summary for stakeholders</b></a>: the headline tables, '
                     'without code.</p>')
    if (run_dir / "browse" / "index.html").is_file():
        parts.append('<p><a href="browse/index.html"><b>Failure browser</b></a>: one row per question and system — '
                     'the top 5 with their labels, the gold, and the look-alike that beat it.</p>')
    if failed:
        parts.append(f"<h2>This run did not finish</h2><p class=failed>"
                     f"{esc(_failure_words(failed['stage'], failed['error'], failed['notebook']))}</p>")
    units_csv = run_dir / "tables" / "units.csv"
    if units_csv.is_file():
        units = pd.read_csv(units_csv, dtype=str, keep_default_na=False)
        parts.append(f"<h2>Corpus</h2><p>{esc(_corpus_sentence(params, units))}</p>")
    systems_csv = run_dir / "tables" / "systems.csv"
    parts.append("<h2>Systems</h2>")
    if systems_csv.is_file():
        parts.append(systems_html(pd.read_csv(systems_csv, keep_default_na=False)))
    else:
        parts.append("<p class=muted>No retrieval stage ran in this run, so no system was evaluated.</p>")
    parts.append("<h2>Stages</h2>")
    noun = _run_noun(run_dir, params)
    for stage in stages:
        rec_path = run_dir / "headlines" / f"{stage}.json"
        rec = json.loads(rec_path.read_text(encoding="utf-8")) if rec_path.is_file() else {}
        if noun != "page" and rec.get("sentence"):
            # the stages write 'page'; photos and an image folder's units are called by their noun
            said = nouned(str(rec["sentence"]), noun)
            if said != rec["sentence"]:
                rec["sentence"] = said
                rec_path.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        links = (f'<a href="html/{esc(stage)}.report.html">report</a> · '
                 f'<a href="html/{esc(stage)}.html">notebook with code</a> · '
                 f'<a href="notebooks/{esc(stage)}.ipynb">.ipynb</a>')
        block = [f"<div class=stage><h3>{esc(rec.get('title', stage))}</h3>",
                 f"<p>{esc(rec.get('sentence', ''))}</p>"]
        if rec.get("numbers"):
            rows = "".join(f"<tr><td>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>" for k, v in rec["numbers"].items())
            block.append(f"<table class=numbers>{rows}</table>")
        fig = rec.get("figure", "")
        if fig:
            svg = run_dir / "figures" / f"{fig}.svg"
            png = run_dir / "figures" / f"{fig}.png"
            if svg.is_file():
                block.append(f'<p><a href="figures/{esc(fig)}.html"><img src="figures/{esc(fig)}.svg" alt="{esc(fig)}"></a></p>')
            elif png.is_file():
                block.append(f'<p><img src="figures/{esc(fig)}.png" alt="{esc(fig)}"></p>')
        block.append(f"<p>{links}</p></div>")
        parts.extend(block)
    if failed:
        parts.append(f"<div class=stage><h3>{esc(failed['stage'])}: failed</h3><p>{esc(failed['error'])}</p>"
                     f'<p><a href="{esc(failed["notebook"])}">the partial notebook</a></p></div>')
    for stage in not_run:
        why = (f"stage {failed['stage']} failed before it." if failed else
               "not asked for in this run (lookalike run --stage ran the others), and no earlier run left it here.")
        parts.append(f"<div class=stage><h3>{esc(stage)}: did not run</h3><p>{esc(why)}</p></div>")
    # tables with no rows (the demo's answer key on your corpus, say) are left out of the list
    tables = sorted(p.name for p in (run_dir / "tables").glob("*.csv")
                    if _has_rows(p))
    if tables:
        parts.append("<h2>Tables</h2><ul>" + "".join(
            f'<li><a href="tables/{esc(t)}">{esc(t)}</a></li>' for t in tables) + "</ul>")
    parts.append('<p class=muted>Versions, parameters and timings: <a href="manifest.json">manifest.json</a>.</p>')
    out = run_dir / "index.html"
    out.write_text(_page(str(params.get("title", "lookalike report")), "\n".join(parts)), encoding="utf-8")
    return out


# ----------------------------------------------------------------------------- manifest

def _git_revision(repo: Path) -> str:
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, check=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in KEY_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


# what a run wrote that its figures rest on: the manifest records each file's sha256, and lookalike audit
# checks them (labels/ and labelling/ are left out: people label into a finished run)
RECORDED = ("summary.html", "index.html", "claims.json", "tables/*.csv", "runs/*.run", "runs_validated/*.run",
            "runs_hard/*.run", "qrels/*.qrels", "headlines/*.json", "html/*.html", "browse/**/*.html")


def recorded_files(run_dir: Path | str) -> dict[str, str]:
    """{path relative to the run folder: sha256 of its bytes} for every file RECORDED names."""
    run_dir = Path(run_dir)
    paths = sorted({p for pattern in RECORDED for p in run_dir.glob(pattern) if p.is_file()})
    return {p.relative_to(run_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def write_manifest(run_dir: Path | str, params: dict[str, Any], params_hash: str, timings: dict[str, float],
                   corpus_fingerprint: str, repo: Path | None, started: str, finished: str) -> Path:
    """manifest.json: the one place for timestamps, host, versions and revision (never in tables or cells)."""
    record = {
        "run": params.get("run"),
        "started": started,
        "finished": finished,
        "host": {"machine": platform.machine(), "system": platform.system(), "node": platform.node()},
        # an installed package has no revision of its own (the version is under versions)
        "git_revision": _git_revision(repo) if repo is not None else "installed package",
        "params": params,
        "params_hash": params_hash,
        "stage_wall_seconds": {k: round(v, 2) for k, v in timings.items()},
        "corpus_fingerprint": corpus_fingerprint,
        "versions": package_versions(),
        "files": recorded_files(run_dir),
    }
    out = Path(run_dir) / "manifest.json"
    out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out
