"""lookalike audit RUN_DIR: the invariants every run's figures must hold, checked on its outputs.

Each check reads what a run wrote (pages, headlines, tables, the exported qrels and runs) and
returns violations, one per broken figure, naming the file and the figure. The checks:

- complete: index.html and summary.html exist, and every stage either ran or its page says why not;
- no-nan: no nan / inf / empty parentheses in any headline, page or stage report;
- reproducible: exported runs are in the canonical order; stage 07's full-corpus figures equal
  lookalike's evaluation of the exported runs against the exported judgements (to 1e-9);
- defined: no interval or kappa printed where the statistic is undefined;
- discriminating: a figure at the ceiling or floor for every system says it cannot separate them;
- people-first: no question people judged is moved out of the main set by a machine rule;
- words: no demo vocabulary on a corpus that is not the demo;
- readable: every file a check reads parses (a malformed run, qrels, table or manifest is named with
  its line, never a traceback);
- recorded: every file manifest.json lists exists with the sha256 the run recorded;
- no-nan (tables): no table cell is nan or inf;
- re-derived: the hard columns of tables/sufficiency.csv scored again from runs_hard/ and
  qrels/labels.qrels, tables/headline.csv from the tables it shows, tables/systems.csv's first look
  from runs/ and qrels/evidence.qrels;
- claims: every record of claims.json (report.claims) says what its figures say, the summary says it
  word for word, its figures are its tables' cells, it is the claim the tables give when derived again,
  and its preconditions hold (not saturated by construction, nothing at chance called best or level,
  'ahead' and 'not distinguishable' as the paired test says).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lookalike import params
from lookalike.eval import metrics
from lookalike.eval import trec
from lookalike.report import run_folder

TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violation:
    """One failed invariant: which, the file and figure it concerns, and what is wrong."""
    invariant: str
    file: str
    figure: str
    problem: str

    def line(self) -> str:
        """The violation as one printed line."""
        return f"{self.invariant}: {self.file}: {self.figure}: {self.problem}"


def _text_of_html(text: str) -> str:
    """What a reader sees: scripts and styles dropped, tags removed, entities decoded."""
    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", text)
    text = re.sub(r"(?s)<[^>]+>", " ", text)
    return html.unescape(text)


# nan / inf as a printed value ("nan", "nan%", "-inf", "NaN"), never inside a word ("finance")
_NAN = re.compile(r"(?<![A-Za-z0-9_])(?:nan|NaN|NAN|-?inf|-?Infinity)(?![A-Za-z0-9_])")
_EMPTY_PARENS = re.compile(r"\(\s*\)")
# words that only the built-in demo corpus makes true
DEMO_WORDS = re.compile(r"(?i)\b(generator|planted|one fact (?:apart|away))\b")


def _pages(run_dir: Path) -> list[Path]:
    pages = [run_dir / "index.html", run_dir / "summary.html"]
    pages += sorted((run_dir / "html").glob("*.report.html"))
    pages += sorted((run_dir / "browse").rglob("*.html"))
    return [p for p in pages if p.is_file()]


def _headline_texts(run_dir: Path) -> list[tuple[str, str, str]]:
    """(file, figure, text) for each headline sentence and number."""
    out = []
    for path in sorted((run_dir / "headlines").glob("*.json")):
        rel = f"headlines/{path.name}"
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            out.append((rel, "the headline", f"(unreadable: {exc})"))
            continue
        out.append((rel, "sentence", str(rec.get("sentence", ""))))
        for key, value in (rec.get("numbers") or {}).items():
            out.append((rel, str(key), f"{key}: {value}"))
    return out


def _snippet(text: str, start: int, end: int) -> str:
    return " ".join(text[max(0, start - 50): end + 30].split())


def check_complete(run_dir: Path, stages: list[str]) -> list[Violation]:
    out = []
    for page in ("index.html", "summary.html"):
        if not (run_dir / page).is_file():
            out.append(Violation("complete", page, "the page", "missing"))
    index = (_text_of_html((run_dir / "index.html").read_text(encoding="utf-8", errors="replace"))
             if (run_dir / "index.html").is_file() else "")
    for stage in stages:
        ran = (run_dir / "notebooks" / f"{stage}.ipynb").is_file() and (run_dir / "headlines" / f"{stage}.json").is_file()
        said = f"{stage}: did not run" in index or f"{stage}: failed" in index
        if not ran and index and not said:
            out.append(Violation("complete", "index.html", stage, "the stage left no notebook and headline, and the "
                                 "index does not say that it failed or why it did not run"))
    return out


def check_accounted(run_dir: Path) -> list[Violation]:
    """Every question the run read has a row in stage 05's validation table (a status, and a slice it
    is scored in or the reason it is not): nothing is dropped without a word."""
    questions, validation = _read(run_dir, "questions"), _read(run_dir, "question_validation")
    if not len(questions) or "query_id" not in validation.columns:
        return []
    missing = sorted(set(questions["query_id"].astype(str)) - set(validation["query_id"].astype(str)))
    if not missing:
        return []
    return [Violation("complete", "tables/question_validation.csv", "questions",
                      f"{len(missing)} question(s) of tables/questions.csv have no validation row (first: "
                      f"{', '.join(missing[:5])})")]


def check_no_nan(run_dir: Path) -> list[Violation]:
    out = []
    for rel, figure, text in _headline_texts(run_dir):
        for rx, what in ((_NAN, "a nan / inf value"), (_EMPTY_PARENS, "empty parentheses")):
            m = rx.search(text)
            if m:
                out.append(Violation("no-nan", rel, figure, f"{what}: '{_snippet(text, m.start(), m.end())}'"))
    for page in _pages(run_dir):
        text = _text_of_html(page.read_text(encoding="utf-8", errors="replace"))
        rel = str(page.relative_to(run_dir))
        for rx, what in ((_NAN, "a nan / inf value"), (_EMPTY_PARENS, "empty parentheses")):
            hits = list(rx.finditer(text))
            if hits:
                m = hits[0]
                more = f" (and {len(hits) - 1} more)" if len(hits) > 1 else ""
                out.append(Violation("no-nan", rel, "page text", f"{what}: '{_snippet(text, m.start(), m.end())}'{more}"))
    return out


def _canonical_problem(path: Path) -> str:
    """'' when the run file's lines are in canonical order with ranks 1, 2, ... per query."""
    last: dict[str, tuple[int, float, str]] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            f = line.split()
            if len(f) != 6:
                return f"line {n}: {len(f)} fields, expected 6"
            q, u = f[0], f[2]
            try:
                r = int(f[3])
            except ValueError:
                return f"line {n}: rank {f[3]!r} is not a whole number"
            try:
                s = float(f[4])
            except ValueError:
                return f"line {n}: score {f[4]!r} is not a number"
            prev = last.get(q)
            if prev is None:
                if r != 1:
                    return f"line {n}: query {q} starts at rank {r}, expected 1"
            else:
                pr, ps, pu = prev
                if r != pr + 1:
                    return f"line {n}: query {q} rank {r} follows rank {pr}"
                if s > ps or (s == ps and u > pu):
                    return (f"line {n}: query {q} unit {u} (score {s!r}) ranked after {pu} (score {ps!r}): not the "
                            "canonical order (score descending, ties by unit id descending)")
            last[q] = (r, s, u)
    return ""


class Unreadable(Exception):
    """A file a check needs cannot be parsed: reported as a violation naming the file (and line)."""

    def __init__(self, file: str, problem: str):
        super().__init__(f"{file}: {problem}")
        self.file, self.problem = file, problem


def _read(run_dir: Path, name: str) -> pd.DataFrame:
    path = run_dir / "tables" / f"{name}.csv"
    try:
        return pd.read_csv(path, keep_default_na=False) if path.is_file() else pd.DataFrame()
    except pd.errors.EmptyDataError:        # a table a stage wrote with no columns: nothing to check
        return pd.DataFrame()
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise Unreadable(f"tables/{name}.csv", f"not a readable CSV table ({' '.join(str(exc).split())})") from None


def _trec(run_dir: Path, path: Path, kind: str):
    """A run or qrels file the run exported, read; a malformed one is Unreadable (its file and line)."""
    try:
        return trec.read_qrels_file(path) if kind == "qrels" else trec.read_run_file(path)
    except (trec.TrecFormatError, ValueError, OSError) as exc:
        text = str(exc)
        prefix = f"{path}:"
        raise Unreadable(str(path.relative_to(run_dir)),
                         text[len(prefix):].lstrip() if text.startswith(prefix) else text) from None


def check_external_runs(run_dir: Path, cfg) -> list[Violation]:
    """Each run of yours (retrieve.external_runs) is exported as its file's canonical ranking: the same
    (question, unit, score) rows, ties ordered by the canonical rule, whatever order the file had."""
    from lookalike.eval import ranking
    from lookalike.io import inputs

    out = []
    specs = list(cfg.retrieve.external_runs) if cfg is not None else []
    units, questions = _read(run_dir, "units"), _read(run_dir, "questions")
    if not specs or not len(units) or not len(questions):
        return out
    for spec in specs:
        name, _, path = (x.strip() for x in str(spec).partition("="))
        source = params.repo_path(path)         # relative paths are the repository's, as the stages read them
        exported = run_dir / "runs" / f"{name}.run"
        if source is None or not source.is_file() or not exported.is_file():
            continue
        mine, _ = inputs.read_external_run(source, units["unit_id"].astype(str), questions["query_id"].astype(str),
                                           int(cfg.corpus.page_base))
        want = ranking.rank(mine)[["query_id", "unit_id"]].reset_index(drop=True)
        got = ranking.Run(_trec(run_dir, exported, "run")[0]).frame()
        with exported.open(encoding="utf-8") as fh:
            as_written = pd.DataFrame([line.split()[:3:2] for line in fh], columns=["query_id", "unit_id"])
        if not as_written.equals(want) or len(got) != len(want):
            first = next((i for i in range(min(len(want), len(as_written)))
                          if tuple(want.iloc[i]) != tuple(as_written.iloc[i])), min(len(want), len(as_written)))
            out.append(Violation("reproducible", f"runs/{name}.run", f"run {name}",
                                 f"not the canonical ranking of {source.name}: first difference at line {first + 1}"))
    return out


def check_reproducible(run_dir: Path) -> list[Violation]:
    out = []
    for folder in ("runs", "runs_validated"):
        for path in sorted((run_dir / folder).glob("*.run")):
            problem = _canonical_problem(path)
            if problem:
                out.append(Violation("reproducible", f"{folder}/{path.name}", "run order", problem))
    evidence = run_dir / "qrels" / "evidence_validated.qrels"
    curve = _read(run_dir, "haystack_curve")
    units = _read(run_dir, "units")
    if len(curve) and not evidence.is_file():
        out.append(Violation("reproducible", "qrels/evidence_validated.qrels", "the evidence judgements",
                             "stage 07 drew a haystack curve but did not export the judgements it scored"))
    if len(curve) and evidence.is_file():
        qrels = _trec(run_dir, evidence, "qrels")
        qids = sorted(set(qrels["query_id"]))
        full = curve[(curve["corpus_size"] == len(units)) & ~curve["extrapolated"].astype(str).str.lower().eq("true")]
        for row in full.itertuples():
            run_path = run_dir / "runs_validated" / f"{row.system}.run"
            if not run_path.is_file():
                # a run removed with its manifest entry is still missed: the table names the system it scored
                out.append(Violation("reproducible", f"runs_validated/{row.system}.run", f"{row.measure}, {row.system}",
                                     "tables/haystack_curve.csv scores it over the whole corpus and its ranking is "
                                     "missing"))
                continue
            run, _ = _trec(run_dir, run_path, "run")
            run = run[run["query_id"].isin(set(qids))]
            value = float(metrics.evaluate(qrels, run, [row.measure], complete=True).per_query[row.measure].reindex(
                qids).fillna(0.0).mean()) if qids else float("nan")
            if not abs(value - float(row.value)) <= TOLERANCE:
                out.append(Violation("reproducible", "tables/haystack_curve.csv",
                                     f"{row.measure}, {row.system}, {row.corpus_size} units",
                                     f"{float(row.value):.6f} in the table, {value:.6f} from runs_validated/"
                                     f"{row.system}.run against qrels/evidence_validated.qrels"))
    suff = _read(run_dir, "sufficiency")
    labels = run_dir / "qrels" / "labels.qrels"
    if len(suff) and labels.is_file() and evidence.is_file():
        qrels = _trec(run_dir, labels, "qrels")
        ev = _trec(run_dir, evidence, "qrels")
        one_unit = sorted(q for q, n in ev.groupby("query_id").size().items() if n == 1)
        for row in suff[suff["negatives"] == "corpus"].itertuples():
            run_path = run_dir / "runs_validated" / f"{row.system}.run"
            if not run_path.is_file() and int(row.n) > 0:
                out.append(Violation("reproducible", f"runs_validated/{row.system}.run",
                                     f"sufficient@{row.k}, {row.system}, corpus",
                                     "tables/sufficiency.csv scores it over the corpus and its ranking is missing"))
                continue
            if not run_path.is_file() or not one_unit or int(row.n) != len(one_unit):
                continue
            run, _ = _trec(run_dir, run_path, "run")
            names = [f"sufficient_{row.k}", f"supporting_only_{row.k}", f"neither_{row.k}"]
            pq = metrics.evaluate(qrels[qrels["query_id"].isin(set(one_unit))], run[run["query_id"].isin(set(one_unit))],
                            names, complete=True).per_query
            for name, col in zip(names, ("sufficient", "supporting_only", "neither")):
                value = float(pq[name].reindex(one_unit).fillna(0.0 if col != "neither" else 1.0).mean())
                if not abs(value - float(getattr(row, col))) <= TOLERANCE:
                    out.append(Violation("reproducible", "tables/sufficiency.csv", f"{col}@{row.k}, {row.system}, corpus",
                                         f"{float(getattr(row, col)):.6f} in the table, {value:.6f} from runs_validated/"
                                         f"{row.system}.run against qrels/labels.qrels"))
    return out


_KAPPA_ZERO = re.compile(r"kappa\s+(-?0\.00)\s*\[\s*-?0\.00,\s*-?0\.00\s*\]")


def check_defined(run_dir: Path) -> list[Violation]:
    out = []
    for page in _pages(run_dir):
        text = _text_of_html(page.read_text(encoding="utf-8", errors="replace"))
        m = _KAPPA_ZERO.search(text)
        if m:
            out.append(Violation("defined", str(page.relative_to(run_dir)), "kappa",
                                 f"'{_snippet(text, m.start(), m.end())}': a kappa with a zero-width interval at 0 "
                                 "is what one label on one side gives; kappa is undefined there"))
    for name in ("label_agreement", "judge_agreement"):
        t = _read(run_dir, name)
        if len(t) and "kappa" in t.columns:
            for row in t.itertuples():
                k = pd.to_numeric(pd.Series([row.kappa]), errors="coerce").iloc[0]
                if pd.notna(k) and "kappa_note" in t.columns and str(row.kappa_note):
                    out.append(Violation("defined", f"tables/{name}.csv", "kappa",
                                         f"a kappa {k} is given beside the note '{row.kappa_note}'"))
    return out


def check_discriminating(run_dir: Path) -> list[Violation]:
    """A headline column whose every system sits at the ceiling (or floor) with a zero-width interval
    cannot separate systems: the summary must say so beside it."""
    out = []
    head = _read(run_dir, "headline")
    summary = (run_dir / "summary.html").read_text(encoding="utf-8", errors="replace") if (run_dir / "summary.html").is_file() else ""
    said = _text_of_html(summary)
    for col in head.columns:
        cells = head[col].astype(str)
        if len(head) < 2 or not cells.str.match(r"^-?\d").all():
            continue
        for edge in ("1.00 [1.00, 1.00]", "0.00 [0.00, 0.00]"):
            if (cells == edge).all() and f"{col}: cannot separate" not in said:
                out.append(Violation("discriminating", "summary.html", col,
                                     f"every system is at {edge} and the page does not say the figure cannot "
                                     "separate them"))
    return out


def check_chance(run_dir: Path) -> list[Violation]:
    """Recall@10 and top-1 are shown beside chance, and a system whose CI holds chance is called
    indistinguishable from it."""
    out = []
    systems = _read(run_dir, "systems")
    if len(systems) and "recall_10" in systems.columns:
        if "chance_recall_10" not in systems.columns:
            out.append(Violation("discriminating", "tables/systems.csv", "Recall@10", "shown without chance (k/N)"))
        else:
            for r in systems.itertuples():
                lo, chance = float(r.recall_10_lo), float(r.chance_recall_10)
                said = str(getattr(r, "vs_chance", ""))
                if lo <= chance and "indistinguishable" not in said:
                    out.append(Violation("discriminating", "tables/systems.csv", f"Recall@10, {r.system}",
                                         f"its CI reaches down to {lo:.3f}, at or below chance {chance:.3f}, and it is "
                                         "not called indistinguishable from chance"))
    head = _read(run_dir, "headline")
    if len(head) and "top-1, random negatives (as generated)" in head.columns and "chance (top-1)" not in head.columns:
        out.append(Violation("discriminating", "tables/headline.csv", "top-1, random negatives",
                             "shown without chance (1 / (1 + negatives))"))
    return out


def check_people_first(run_dir: Path) -> list[Violation]:
    """A question with people's judgements (the user's qrels) stays in the main set whatever a machine
    judge said about its distractors."""
    out = []
    qrels = _read(run_dir, "qrels")
    validation = _read(run_dir, "question_validation")
    if not len(qrels) or not len(validation) or "slice" not in validation.columns:
        return out
    people = set(qrels["query_id"].astype(str))
    moved = validation[validation["query_id"].astype(str).isin(people)
                       & ~validation["slice"].isin(["single-gold", "multi-page", "people-judged"])]
    for row in moved.head(20).itertuples():
        out.append(Violation("people-first", "tables/question_validation.csv", f"question {row.query_id}",
                             f"judged by people, moved to slice '{row.slice}' by a machine rule"))
    if len(moved) > 20:
        out.append(Violation("people-first", "tables/question_validation.csv", "questions",
                             f"and {len(moved) - 20} more people-judged questions moved"))
    return out


# a corpus unit called a page or a slide, as a word ("page-single", an evidence structure, is a name)
UNIT_WORDS = re.compile(r"(?i)\b(pages?|slides?)\b(?!-)")


def check_words(run_dir: Path, cfg) -> list[Violation]:
    out = []
    from lookalike.report.summary import unit_noun

    source = _source(cfg)
    units = _read(run_dir, "units")
    noun = unit_noun(str(source), units["content_type"] if "content_type" in units.columns else ())
    if noun != "page" and (run_dir / "summary.html").is_file():
        # photos and the units of an image folder are not pages: the stakeholder page calls them by their noun
        text = _text_of_html((run_dir / "summary.html").read_text(encoding="utf-8", errors="replace"))
        hits = list(UNIT_WORDS.finditer(text))
        if hits:
            m = hits[0]
            out.append(Violation("words", "summary.html", "page text", f"'{m.group(0)}' for units that are "
                                 f"{noun}s: '{_snippet(text, m.start(), m.end())}'"
                                 + (f" (and {len(hits) - 1} more)" if len(hits) > 1 else "")))
    if noun != "page":
        # index.html's line for each stage too
        for rel, figure, text in _headline_texts(run_dir):
            m = UNIT_WORDS.search(text) if figure == "sentence" else None
            if m:
                out.append(Violation("words", rel, figure, f"'{m.group(0)}' for units that are {noun}s: "
                                     f"'{_snippet(text, m.start(), m.end())}'"))
    if noun != "page":
        out += _stage_output_words(run_dir, noun)
    if source == "demo":
        return out
    for rel, figure, text in _headline_texts(run_dir):
        m = DEMO_WORDS.search(text)
        if m:
            out.append(Violation("words", rel, figure, f"demo vocabulary '{m.group(0)}' on a "
                                 f"{source} corpus: '{_snippet(text, m.start(), m.end())}'"))
    for page in [run_dir / "index.html", run_dir / "summary.html"]:
        if page.is_file():
            text = _text_of_html(page.read_text(encoding="utf-8", errors="replace"))
            m = DEMO_WORDS.search(text)
            if m:
                out.append(Violation("words", page.name, "page text", f"demo vocabulary '{m.group(0)}' on a "
                                     f"{source} corpus: '{_snippet(text, m.start(), m.end())}'"))
    return out


# cells whose output a stage report leaves out (the parameters as injected, tables shown another way)
_HIDDEN_CELLS = {"report-hide", "parameters", "injected-parameters"}


def _stage_output_words(run_dir: Path, noun: str) -> list[Violation]:
    """What each stage computed and printed (its notebook's code-cell outputs: sentences, tables, the
    headline) calls the units by their noun. The notebooks' own prose explains the method for every
    corpus and is not read here; column headers (<th>) are field names, not words."""
    import nbformat

    out = []
    for path in sorted((run_dir / "notebooks").glob("*.ipynb")):
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception:  # noqa: BLE001 (not a notebook with outputs: it printed no words to check)
            continue
        hits = []
        for cell in nb.cells:
            if cell.cell_type != "code" or _HIDDEN_CELLS & set(cell.get("metadata", {}).get("tags", [])):
                continue
            for o in cell.get("outputs", []):
                data = o.get("data", {})
                text = o.get("text") or data.get("text/html") or data.get("text/plain") or ""
                text = "".join(text) if isinstance(text, list) else str(text)
                text = _text_of_html(re.sub(r"(?is)<th\b[^>]*>.*?</th>", " ", text))
                hits += [_snippet(text, m.start(), m.end()) for m in UNIT_WORDS.finditer(text)]
        if hits:
            out.append(Violation("words", f"notebooks/{path.name}", "printed output",
                                 f"'{hits[0]}' for units that are {noun}s"
                                 + (f" (and {len(hits) - 1} more)" if len(hits) > 1 else "")))
    return out


# ----------------------------------------------------------------------------- files and tables

_NAN_CELL = re.compile(r"(?i)^\s*[-+]?(nan|inf|infinity)\s*$")


def check_recorded(run_dir: Path, manifest: dict) -> list[Violation]:
    """Every file the run's manifest lists exists with the sha256 it recorded: a figure edited by hand,
    or a run, table or judgement file deleted, is named."""
    out = []
    files = manifest.get("files")
    if not isinstance(files, dict):
        return out
    import hashlib

    for rel, digest in sorted(files.items()):
        path = run_dir / rel
        if not path.is_file():
            out.append(Violation("recorded", rel, "the file", "listed in manifest.json, and missing"))
        elif hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            out.append(Violation("recorded", rel, "the file", "changed since the run wrote it (its sha256 differs "
                                 "from manifest.json's)"))
    return out


def check_tables_finite(run_dir: Path) -> list[Violation]:
    """No cell of any table is nan or inf: an undefined figure is said in words, never printed as a number."""
    out = []
    for path in sorted((run_dir / "tables").glob("*.csv")):
        t = _read(run_dir, path.stem)
        for col in t.columns:
            hit = t[col].astype(str).str.match(_NAN_CELL)
            if hit.any():
                i = int(hit.to_numpy().nonzero()[0][0])
                key = f"row {i + 2}" + (f" ({t.columns[0]} {t.iloc[i, 0]})" if len(t.columns) else "")
                out.append(Violation("no-nan", f"tables/{path.name}", f"{col}, {key}",
                                     f"'{t.iloc[i][col]}' is not a figure" + (f" (and {int(hit.sum()) - 1} more in "
                                                                              "the column)" if hit.sum() > 1 else "")))
    return out


def _close(a, b) -> bool:
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)
    return (a != a and b != b) or abs(a - b) <= TOLERANCE


def check_rederived(run_dir: Path) -> list[Violation]:
    """The tables the summary shows, computed again from the exported runs and judgements: the hard
    columns of tables/sufficiency.csv from runs_hard/ against qrels/labels.qrels on the questions
    tables/hard_sets.csv puts in them; tables/headline.csv from tables/sufficiency.csv and
    tables/top1_random_original.csv; the first look of tables/systems.csv from runs/ against
    qrels/evidence.qrels."""
    from lookalike.report.tables import fmt_ci
    from lookalike.vocab import HARD_KS

    out = []
    suff, hard_sets = _read(run_dir, "sufficiency"), _read(run_dir, "hard_sets")
    labels = run_dir / "qrels" / "labels.qrels"
    if len(suff) and len(hard_sets):
        inside = sorted(hard_sets.loc[hard_sets["in_hard"].astype(str).str.lower() == "true", "query_id"].astype(str))
        rows = suff[suff["negatives"] == "hard"]
        qrels = _trec(run_dir, labels, "qrels") if labels.is_file() else None
        for system, group in rows.groupby("system", sort=True):
            run_path = run_dir / "runs_hard" / f"{system}.run"
            if not run_path.is_file() or qrels is None:
                if int(pd.to_numeric(group["n"], errors="coerce").max()) > 0:
                    out.append(Violation("reproducible", f"runs_hard/{system}.run", f"sufficient@k (hard), {system}",
                                         "the hard columns cannot be scored again: the ranking or qrels/labels.qrels "
                                         "is missing"))
                continue
            run, _ = _trec(run_dir, run_path, "run")
            ranked = sorted(set(run["query_id"]))
            if ranked != inside:
                out.append(Violation("reproducible", f"runs_hard/{system}.run", "its questions",
                                     f"ranks {len(ranked)} questions; tables/hard_sets.csv puts {len(inside)} in the "
                                     "hard columns"))
                continue
            names = [f"{m}_{k}" for k in HARD_KS for m in ("sufficient", "supporting_only", "neither")]
            pq = metrics.evaluate(qrels[qrels["query_id"].isin(set(inside))], run, names, complete=True).per_query
            for row in group.itertuples():
                if int(row.k) not in HARD_KS:
                    continue
                if int(row.n) != len(inside):
                    out.append(Violation("reproducible", "tables/sufficiency.csv", f"n, {system}, hard, k {row.k}",
                                         f"{row.n} in the table, {len(inside)} questions in the hard columns"))
                for col in ("sufficient", "supporting_only", "neither"):
                    value = float(pq[f"{col}_{row.k}"].reindex(inside).fillna(0.0 if col != "neither" else 1.0).mean()
                                  ) if inside else float("nan")
                    if not _close(value, getattr(row, col)):
                        out.append(Violation("reproducible", "tables/sufficiency.csv", f"{col}@{row.k}, {system}, hard",
                                             f"{getattr(row, col)} in the table, {value:.6f} from runs_hard/{system}.run "
                                             "against qrels/labels.qrels"))
    head, top1 = _read(run_dir, "headline"), _read(run_dir, "top1_random_original")
    if len(head) and len(suff):
        sh = {(str(r.system), int(r.k)): r for r in suff[suff["negatives"] == "hard"].itertuples()}
        tr = {str(r.system): r for r in top1.itertuples()} if len(top1) else {}
        for row in head.to_dict("records"):
            system = str(row["system"])
            want = {}
            for label, m, k in (("sufficient@1", "sufficient", 1), ("sufficient@5", "sufficient", 5),
                                ("supporting-only@5", "supporting_only", 5), ("neither@5", "neither", 5)):
                r = sh.get((system, k))
                if r is not None:
                    want[f"{label}, hard (validated)"] = fmt_ci(float(getattr(r, m)), float(getattr(r, f"{m}_lo")),
                                                                float(getattr(r, f"{m}_hi")))
            if system in tr:
                r = tr[system]
                want["top-1, random negatives (as generated)"] = fmt_ci(float(r.top1), float(r.top1_lo), float(r.top1_hi))
                want["n (as generated)"] = str(int(r.n))
            for col, value in want.items():
                if col in row and str(row[col]) != value:
                    out.append(Violation("reproducible", "tables/headline.csv", f"{col}, {system}",
                                         f"'{row[col]}' in the table, '{value}' from tables/"
                                         + ("top1_random_original.csv" if "random" in col else "sufficiency.csv")))
    systems, evidence = _read(run_dir, "systems"), run_dir / "qrels" / "evidence.qrels"
    if len(systems) and evidence.is_file() and "recall_10" in systems.columns:
        qrels = _trec(run_dir, evidence, "qrels")
        measures = [m for m in ("recall_10", "ndcg_cut_10", "recall_all_10") if m in systems.columns]
        for row in systems.to_dict("records"):
            path = run_dir / "runs" / f"{row['system']}.run"
            if not path.is_file():
                out.append(Violation("reproducible", f"runs/{row['system']}.run", f"first look, {row['system']}",
                                     "tables/systems.csv scores it and its ranking is missing"))
                continue
            pq = metrics.evaluate(qrels, _trec(run_dir, path, "run")[0], measures, complete=True).per_query
            for m in measures:
                value = float(pq[m].mean()) if len(pq) else float("nan")
                if not _close(value, row[m]):
                    out.append(Violation("reproducible", "tables/systems.csv", f"{m}, {row['system']}",
                                         f"{row[m]} in the table, {value:.6f} from runs/{row['system']}.run against "
                                         "qrels/evidence.qrels"))
    return out


# ----------------------------------------------------------------------------- claims


def _visible(run_dir: Path, page: str) -> str:
    path = run_dir / page
    return " ".join(_text_of_html(path.read_text(encoding="utf-8", errors="replace")).split()) if path.is_file() else ""


def check_claims(run_dir: Path, cfg) -> list[Violation]:
    """Every claim of claims.json: its text is what its record says (report.claims.render), the page
    says it word for word, each figure it quotes equals its table's cell, the claim derived again from
    the tables is the same claim, and its preconditions hold (no hard-set figure saturated by
    construction; nothing indistinguishable from chance called best, ahead or level with a system that
    is not; 'ahead' and 'not distinguishable' as the paired test says)."""
    from lookalike.report import claims as CL
    from lookalike.report.summary import unit_noun

    out: list[Violation] = []
    path = run_dir / "claims.json"
    suff = _read(run_dir, "sufficiency")
    if not path.is_file():
        if len(suff):
            out.append(Violation("claims", "claims.json", "the claims", "missing: stage 07 ran (tables/sufficiency.csv) "
                                 "and left no record of what the summary claims"))
        return out
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        claims = {str(c["id"]): c for c in record["claims"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise Unreadable("claims.json", f"not a claims record ({exc})") from None
    said = _visible(run_dir, "summary.html")
    for cid, claim in claims.items():
        try:
            text = CL.render(claim)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            out.append(Violation("claims", "claims.json", f"claim {cid}", f"its record cannot be read ({exc!r})"))
            continue
        if text != claim.get("text"):
            out.append(Violation("claims", "claims.json", f"claim {cid}", f"its text '{claim.get('text')}' is not what "
                                 f"its figures say: '{text}'"))
        if " ".join(str(claim.get("text", "")).split()) not in said:
            out.append(Violation("claims", claim.get("page", "summary.html"), f"claim {cid}",
                                 f"the page does not say '{claim.get('text')}'"))
        if not CL.finite(claim):
            out.append(Violation("claims", "claims.json", f"claim {cid}", "a figure it quotes is nan or inf"))
    for cid, claim in claims.items():
        if claim.get("kind") != "derived":
            continue
        rule = str(claim.get("rule", ""))
        if rule not in CL.RULES:
            out.append(Violation("claims", "claims.json", f"claim {cid}", f"names no rule lookalike knows ({rule!r})"))
            continue
        args = dict(claim.get("args") or {})
        if "corpus_size" in args and int(args["corpus_size"]) != len(_read(run_dir, "units")):
            out.append(Violation("claims", "claims.json", f"claim {cid}", f"says the corpus has {args['corpus_size']} "
                                 f"units; tables/units.csv has {len(_read(run_dir, 'units'))}"))
        if "interval" in args and len(suff) and args["interval"] not in set(suff["interval"].astype(str)):
            out.append(Violation("claims", "claims.json", f"claim {cid}", f"names the interval '{args['interval']}', "
                                 "which no row of tables/sufficiency.csv was computed with"))
        again = CL.derived_claim(rule, {n: _read(run_dir, n) for n in CL.RULES[rule][1]},
                                 str(claim.get("noun", "page")), **args)["text"]
        if again != claim.get("text"):
            out.append(Violation("claims", "claims.json", f"claim {cid}", f"derived again from "
                                 f"{', '.join(CL.RULES[rule][1])} it says '{again}', not '{claim.get('text')}'"))
    hard_sets, sig = _read(run_dir, "hard_sets"), _read(run_dir, "significance")
    verdict = claims.get("verdict")
    stage_line = run_dir / "headlines" / "07_metric_tables.json"
    if verdict is not None and stage_line.is_file():
        # index.html's line for stage 07 leads with the same claim
        try:
            line = str(json.loads(stage_line.read_text(encoding="utf-8")).get("sentence", ""))
        except ValueError as exc:
            raise Unreadable("headlines/07_metric_tables.json", f"not JSON ({exc})") from None
        if not line.startswith(str(verdict.get("text", ""))):
            out.append(Violation("claims", "headlines/07_metric_tables.json", "claim verdict",
                                 f"the index's line for stage 07 does not lead with the verdict: '{line[:120]}'"))
    if verdict is not None:
        k = int(verdict.get("k", CL.VERDICT_K))
        rows = {(str(r["system"]), str(r["negatives"]), int(r["k"])): r for r in suff.to_dict("records")} if len(suff) else {}
        for f in verdict.get("figures", []):
            key = f["key"]
            r = rows.get((str(key["system"]), str(key["negatives"]), int(key["k"])))
            if r is None:
                out.append(Violation("claims", "claims.json", f"claim verdict, {key['system']}",
                                     "quotes a row tables/sufficiency.csv does not have"))
                continue
            for name, col in (("value", "sufficient"), ("lo", "sufficient_lo"), ("hi", "sufficient_hi"), ("n", "n")):
                if not _close(f.get(name), r[col]):
                    out.append(Violation("claims", "claims.json", f"claim verdict, {key['system']} {name}",
                                         f"{f.get(name)} in the claim, {r[col]} in tables/sufficiency.csv"))
        validated = _read(run_dir, "questions_validated")
        gold = dict(zip(validated["query_id"].astype(str), validated["evidence_unit_ids"].astype(str))) if len(validated) else {}
        ties = {}
        for system in sorted(set(suff["system"].astype(str))) if len(suff) else []:
            path = run_dir / "runs_hard" / f"{system}.run"
            if path.is_file():
                ties[system] = CL.tie_settled(_trec(run_dir, path, "run")[0], gold, k)
        again = CL.verdict_claim(suff, sig, hard_sets, k=k, alpha=float(verdict.get("alpha", CL.ALPHA)),
                                 noun=str(verdict.get("noun", "page")), ties=ties,
                                 reads=CL.reads_of(_read(run_dir, "systems")))
        for f in verdict.get("figures", []):
            system = f["key"]["system"]
            if "ties" in f and system in ties and int(f["ties"]) != ties[system]:
                out.append(Violation("claims", "claims.json", f"claim verdict, {system} ties",
                                     f"{f['ties']} questions settled by tie order in the claim, {ties[system]} in "
                                     f"runs_hard/{system}.run"))
        fields = ("kind", "best", "peers", "behind", "at_chance", "n", "reads", "ceiling")
        if any(again.get(x) != verdict.get(x) for x in fields):
            out.append(Violation("claims", "claims.json", "claim verdict",
                                 f"derived again from the tables it says '{CL.render(again)}', not "
                                 f"'{verdict.get('text')}'"))
        units = _read(run_dir, "units")
        noun = unit_noun(_source(cfg), units["content_type"] if "content_type" in units.columns else ())
        if cfg is not None and verdict.get("noun") != noun:
            out.append(Violation("claims", "claims.json", "claim verdict",
                                 f"calls the units '{verdict.get('noun')}', the corpus's are '{noun}'"))
        out += _verdict_preconditions(run_dir, verdict, hard_sets, sig)
    scored = claims.get("scored")
    if scored is not None:
        validated = _read(run_dir, "questions_validated")
        strict = (validated[validated["slice"] == "single-gold"] if len(validated) and "slice" in validated.columns
                  else validated.head(0) if len(validated) else pd.DataFrame(columns=["query_id", "evidence_unit_ids"]))
        one = strict[~strict["evidence_unit_ids"].astype(str).str.contains(";")] if len(strict) else strict
        top1 = _read(run_dir, "top1_random_original")
        again = CL.scored_claim(_read(run_dir, "questions"), _read(run_dir, "question_validation"),
                                strict["query_id"].astype(str) if len(strict) else [],
                                one["query_id"].astype(str) if len(one) else [], hard_sets,
                                int(pd.to_numeric(top1["n"], errors="coerce").max()) if len(top1) else 0,
                                k=int(scored.get("k", CL.VERDICT_K)), noun=str(scored.get("noun", "page")))
        if (again["counts"], again["not_scored"]) != (scored.get("counts"), scored.get("not_scored")):
            out.append(Violation("claims", "claims.json", "claim scored",
                                 f"counted again from the tables it says '{CL.render(again)}', not "
                                 f"'{scored.get('text')}'"))
    return out


def _verdict_preconditions(run_dir: Path, verdict: dict, hard_sets: pd.DataFrame, sig: pd.DataFrame) -> list[Violation]:
    """The verdict's preconditions, checked on the files themselves (not through the code that made it)."""
    out = []
    k, n = int(verdict.get("k", 5)), int(verdict.get("n", 0) or 0)
    if verdict.get("kind") == "none" or not n:
        return out
    inside = (hard_sets[hard_sets["in_hard"].astype(str).str.lower() == "true"] if len(hard_sets) else hard_sets)
    sizes = dict(zip(inside["query_id"].astype(str), pd.to_numeric(inside["candidates"], errors="coerce"))) if len(inside) else {}
    small = sorted(q for q, c in sizes.items() if not c > k)
    if len(sizes) != n:
        out.append(Violation("claims", "claims.json", "claim verdict",
                             f"rests on {n} questions; tables/hard_sets.csv puts {len(sizes)} in the hard columns"))
    if small:
        out.append(Violation("claims", "tables/hard_sets.csv", "claim verdict",
                             f"saturated by construction: {len(small)} question(s) in the hard columns have {k} or "
                             f"fewer candidates, so sufficient@{k} holds their gold whatever the system does (first: "
                             f"{', '.join(small[:5])})"))
    for system in [verdict.get("best")] + list(verdict.get("peers", [])) + list(verdict.get("behind", [])):
        path = run_dir / "runs_hard" / f"{system}.run"
        if not system or not path.is_file():
            continue
        run, _ = _trec(run_dir, path, "run")
        counts = run.groupby("query_id").size()
        few = sorted(str(q) for q, c in counts.items() if c <= k)
        if few:
            out.append(Violation("claims", f"runs_hard/{system}.run", "claim verdict",
                                 f"saturated by construction: {len(few)} question(s) ranked among {k} or fewer "
                                 f"candidates (first: {', '.join(few[:5])})"))
    chance = float((verdict.get("chance") or {}).get("value", float("nan")))
    figs = {f["key"]["system"]: f for f in verdict.get("figures", [])}
    named = ([verdict.get("best")] if verdict.get("kind") in ("only", "ahead", "not-distinguishable") else []) + list(
        verdict.get("peers", []))
    from lookalike.report.claims import hard_chance

    recomputed = hard_chance(hard_sets, k)
    if not _close(chance, recomputed):
        out.append(Violation("claims", "claims.json", "claim verdict, chance",
                             f"{chance} in the claim, {recomputed} from tables/hard_sets.csv"))
    for system in named:
        f = figs.get(system)
        if f is not None and chance == chance and not float(f["lo"]) > chance:
            out.append(Violation("claims", "claims.json", f"claim verdict, {system}",
                                 f"indistinguishable from chance (its CI reaches {float(f['lo']):.2f}, chance "
                                 f"{chance:.2f}) and named " + ("best" if system == verdict.get("best") else
                                                                f"as level with {verdict.get('best')}")))
    alpha = float(verdict.get("alpha", 0.05))
    for t in verdict.get("tests", []):
        a, b = t.get("pair", ["", ""])
        hit = (sig[(sig["measure"] == verdict.get("measure")) & (((sig["system"] == a) & (sig["baseline"] == b))
                                                                 | ((sig["system"] == b) & (sig["baseline"] == a)))]
               if len(sig) else sig)
        p = float(hit["p_holm"].iloc[0]) if len(hit) and str(hit["p_holm"].iloc[0]) != "" else float("nan")
        if "p_holm" in t and not _close(t["p_holm"], p):
            out.append(Violation("claims", "claims.json", f"claim verdict, {a} − {b}",
                                 f"Holm-adjusted p {t['p_holm']} in the claim, {p} in tables/significance.csv"))
        if b in verdict.get("behind", []) and not p < alpha:
            out.append(Violation("claims", "claims.json", f"claim verdict, {a} − {b}",
                                 f"{a} is said to be ahead of {b}; the paired test gives Holm-adjusted p {p}"))
        if b in verdict.get("peers", []) and p < alpha:
            out.append(Violation("claims", "claims.json", f"claim verdict, {a} − {b}",
                                 f"said not distinguishable; the paired test separates them (Holm-adjusted p {p})"))
    return out


def _source(cfg) -> str:
    """The corpus source a run was made with; a folder without a manifest reads as the demo's."""
    return str(cfg.corpus.source) if cfg is not None else "demo"


def _manifest_params(run_dir: Path) -> dict:
    try:
        return run_folder.read_manifest(run_dir)
    except run_folder.ManifestError as exc:
        raise Unreadable("manifest.json", str(exc)) from None


# The recorded files a check computes again from other files (pattern -> from what); every other file the
# manifest records is guarded by its sha256 only, and the audit says which (coverage).
REDERIVED = {
    "tables/sufficiency.csv": "hard columns from runs_hard/ and qrels/labels.qrels, corpus rows from runs_validated/",
    "tables/headline.csv": "from tables/sufficiency.csv and tables/top1_random_original.csv",
    "tables/systems.csv": "the first look from runs/ against qrels/evidence.qrels",
    "tables/haystack_curve.csv": "the full-corpus point from runs_validated/ against qrels/evidence_validated.qrels",
    "claims.json": "each claim from the tables it names",
    "summary.html": "each claim's sentence, read on the page",
    "runs/*.run": "the canonical order of its scores (and the first look's figures)",
    "runs_validated/*.run": "the canonical order of its scores (and the corpus figures)",
    "runs_hard/*.run": "the canonical order of its scores (and the hard columns)",
}


def coverage(run_dir: Path | str, manifest: dict | None = None) -> tuple[list[tuple[str, str]], list[str]]:
    """What the audit re-derives and what it guards by hash only: ([(file, from what)], [file]) over the
    files the run's manifest records (every file when it records none)."""
    import fnmatch

    run_dir = Path(run_dir)
    if manifest is None:
        try:
            manifest = run_folder.read_manifest(run_dir)
        except run_folder.ManifestError:
            manifest = {}
    files = sorted((manifest or {}).get("files") or run_folder.recorded_files(run_dir))
    derived, hashed = [], []
    for rel in files:
        how = next((how for pattern, how in REDERIVED.items() if fnmatch.fnmatch(rel, pattern)), None)
        if how is None:
            hashed.append(rel)
        else:
            derived.append((rel, how))
    return derived, hashed


def audit(run_dir: Path | str, stages: list[str]) -> list[Violation]:
    """Every invariant on one run folder; [] when the run's figures hold. A file a check cannot read
    is a violation of 'readable' naming the file (and line), and the other checks still run."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    found: list[Violation] = []
    try:
        manifest = _manifest_params(run_dir)
    except Unreadable as exc:
        found.append(Violation("readable", exc.file, "the file", exc.problem))
        manifest = {}
    try:
        cfg = run_folder.run_config(run_dir, manifest)
    except run_folder.ManifestError as exc:
        found.append(Violation("readable", "manifest.json", "params", str(exc)))
        cfg = None
    checks = [
        ("complete", lambda: check_complete(run_dir, stages)), ("accounted", lambda: check_accounted(run_dir)),
        ("no-nan", lambda: check_no_nan(run_dir)), ("reproducible", lambda: check_reproducible(run_dir)),
        ("external runs", lambda: check_external_runs(run_dir, cfg)), ("defined", lambda: check_defined(run_dir)),
        ("discriminating", lambda: check_discriminating(run_dir)), ("chance", lambda: check_chance(run_dir)),
        ("people-first", lambda: check_people_first(run_dir)), ("words", lambda: check_words(run_dir, cfg)),
        ("recorded", lambda: check_recorded(run_dir, manifest)), ("finite", lambda: check_tables_finite(run_dir)),
        ("re-derived", lambda: check_rederived(run_dir)), ("claims", lambda: check_claims(run_dir, cfg)),
    ]
    for name, check in checks:
        try:
            found += check()
        except Unreadable as exc:
            violation = Violation("readable", exc.file, "the file", exc.problem)
            if violation not in found:
                found.append(violation)
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            # a cell or field of the wrong kind in a file the check reads (a table edited by hand, say)
            found.append(Violation("readable", f"the files the '{name}' check reads", "a value",
                                   f"could not be read as expected ({type(exc).__name__}: {exc}); the check did not run"))
    return found


__all__ = ["Violation", "Unreadable", "audit", "coverage", "REDERIVED", "TOLERANCE"]
