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
  its line, never a traceback).
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lookalike import params as P
from lookalike.eval import metrics as M
from lookalike.eval import trec

TOLERANCE = 1e-9


@dataclass(frozen=True)
class Violation:
    invariant: str
    file: str
    figure: str
    problem: str

    def line(self) -> str:
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
            out.append((rel, "the headline", f"<unreadable: {exc}>"))
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
        return trec.read_qrels(path) if kind == "qrels" else trec.read_run(path)
    except (trec.TrecFormatError, ValueError, OSError) as exc:
        text = str(exc)
        prefix = f"{path}:"
        raise Unreadable(str(path.relative_to(run_dir)),
                         text[len(prefix):].lstrip() if text.startswith(prefix) else text) from None


def check_external_runs(run_dir: Path, params: dict) -> list[Violation]:
    """Each run of yours (retrieve.external_runs) is exported as its file's canonical ranking: the same
    (question, unit, score) rows, ties ordered by the canonical rule, whatever order the file had."""
    from lookalike.eval import ranking
    from lookalike.io import inputs

    out = []
    specs = ((params.get("retrieve") or {}).get("external_runs")) or []
    units, questions = _read(run_dir, "units"), _read(run_dir, "questions")
    if not specs or not len(units) or not len(questions):
        return out
    for spec in specs:
        name, _, path = (x.strip() for x in str(spec).partition("="))
        source = P.repo_path(path)         # relative paths are the repository's, as the stages read them
        exported = run_dir / "runs" / f"{name}.run"
        if source is None or not source.is_file() or not exported.is_file():
            continue
        mine, _ = inputs.read_external_run(source, units["unit_id"].astype(str), questions["query_id"].astype(str),
                                           int((params.get("corpus") or {}).get("page_base", 1)))
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
                continue
            run, _ = _trec(run_dir, run_path, "run")
            run = run[run["query_id"].isin(set(qids))]
            value = float(M.evaluate(qrels, run, [row.measure], complete=True).per_query[row.measure].reindex(
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
            if not run_path.is_file() or not one_unit or int(row.n) != len(one_unit):
                continue
            run, _ = _trec(run_dir, run_path, "run")
            names = [f"sufficient_{row.k}", f"supporting_only_{row.k}", f"neither_{row.k}"]
            pq = M.evaluate(qrels[qrels["query_id"].isin(set(one_unit))], run[run["query_id"].isin(set(one_unit))],
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


def check_words(run_dir: Path, params: dict) -> list[Violation]:
    out = []
    source = (params.get("corpus") or {}).get("source", "demo")
    if source == "images" and (run_dir / "summary.html").is_file():
        # an image folder holds photos or scans: the stakeholder page calls its units images
        text = _text_of_html((run_dir / "summary.html").read_text(encoding="utf-8", errors="replace"))
        hits = list(UNIT_WORDS.finditer(text))
        if hits:
            m = hits[0]
            out.append(Violation("words", "summary.html", "page text", f"'{m.group(0)}' for the units of an image "
                                 f"folder: '{_snippet(text, m.start(), m.end())}'"
                                 + (f" (and {len(hits) - 1} more)" if len(hits) > 1 else "")))
    if source == "demo":
        return out
    for rel, figure, text in _headline_texts(run_dir):
        m = DEMO_WORDS.search(text)
        if m:
            out.append(Violation("words", rel, figure, f"demo vocabulary '{m.group(0)}' on a "
                                 f"{params['corpus'].get('source')} corpus: '{_snippet(text, m.start(), m.end())}'"))
    for page in [run_dir / "index.html", run_dir / "summary.html"]:
        if page.is_file():
            text = _text_of_html(page.read_text(encoding="utf-8", errors="replace"))
            m = DEMO_WORDS.search(text)
            if m:
                out.append(Violation("words", page.name, "page text", f"demo vocabulary '{m.group(0)}' on a "
                                     f"{params['corpus'].get('source')} corpus: '{_snippet(text, m.start(), m.end())}'"))
    return out


def _manifest_params(run_dir: Path) -> dict:
    manifest = run_dir / "manifest.json"
    if not manifest.is_file():
        return {}
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise Unreadable("manifest.json", f"not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:
        raise Unreadable("manifest.json", f"not JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("params", {}), dict):
        raise Unreadable("manifest.json", "expected a JSON object whose 'params' is an object")
    return data.get("params", {})


def audit(run_dir: Path | str, stages: list[str]) -> list[Violation]:
    """Every invariant on one run folder; [] when the run's figures hold. A file a check cannot read
    is a violation of 'readable' naming the file (and line), and the other checks still run."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: no such run folder")
    found: list[Violation] = []
    try:
        params = _manifest_params(run_dir)
    except Unreadable as exc:
        found.append(Violation("readable", exc.file, "the file", exc.problem))
        params = {}
    checks = [
        ("complete", lambda: check_complete(run_dir, stages)), ("accounted", lambda: check_accounted(run_dir)),
        ("no-nan", lambda: check_no_nan(run_dir)), ("reproducible", lambda: check_reproducible(run_dir)),
        ("external runs", lambda: check_external_runs(run_dir, params)), ("defined", lambda: check_defined(run_dir)),
        ("discriminating", lambda: check_discriminating(run_dir)), ("chance", lambda: check_chance(run_dir)),
        ("people-first", lambda: check_people_first(run_dir)), ("words", lambda: check_words(run_dir, params)),
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


__all__ = ["Violation", "Unreadable", "audit", "TOLERANCE"]
