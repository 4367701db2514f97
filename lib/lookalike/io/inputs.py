"""Your questions, judgements and runs: read, checked against the corpus, normalised.

Questions: JSON Lines (one object per line) or CSV, with ``query_id`` and ``text`` and optional
``answer``, ``evidence_structure``, ``stratum``, ``register``. ``columns`` maps other column names
onto these ("text=Question,answer=Answer"); without a query_id column, ids come from
``id_template`` and the 0-based row ("docu_{row:03d}").

Judgements (qrels): TREC qrels (``query_id 0 unit_id relevance``), or a CSV/TSV with a header
(``query_id``/``question_id``, ``unit_id``/``doc_id``/``doc_name``, ``relevance``/``label``).
Relevance is an integer grade or a three-way label (sufficient 2, supporting 1, irrelevant 0).
``level``: "page" (ids are units, ``doc:page``) or "document" (ids are documents: a relevant
document makes the run scored per document, each document taking its best page's score).
``page_base``: 0 or 1, what the file's page numbers start at; 0-based pages are shifted to the
corpus's 1-based ids. A file whose ids contradict the declared base is refused (``io.pagebase``:
one page-0 id under base 1, one id naming page N of an N-page document under base 0). A row naming
an unknown query or unit is skipped and reported; when most page ids miss and shifting them by one
would match, the error says the page base looks wrong.

Runs: TREC run files, one per system (``runs`` in params: name -> path), checked against the
corpus and the questions like qrels, page base normalised, then used like built-in systems.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from collections.abc import Iterable, Mapping

import pandas as pd

from lookalike.data.schema import QUESTION_COLUMNS, CorpusError, read_required_csv
from lookalike.eval import trec
from lookalike.eval.trec import LABEL_GRADES
from lookalike.io import pagebase

SKIP_COLUMNS = ["source", "row", "unit_id", "problem"]
QUESTION_FIELDS = ("query_id", "text", "answer", "evidence_structure", "stratum", "register")


def _mapping(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    if not spec:
        return {}
    if isinstance(spec, Mapping):
        return dict(spec)
    out = {}
    for part in str(spec).split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise CorpusError(f"question columns: {part!r} is not field=column")
        k, v = (x.strip() for x in part.split("=", 1))
        if k not in QUESTION_FIELDS:
            raise CorpusError(f"question columns: unknown field {k!r}; fields are {', '.join(QUESTION_FIELDS)}")
        out[k] = v
    return out


def _text_cell(value) -> str:
    """A question field as text: '' for null or missing, numbers as written, never 'None' or 'nan'."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def read_questions(path: Path | str, columns: str | Mapping[str, str] | None = None,
                   id_template: str = "q{row:04d}") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(questions with QUESTION_FIELDS, skipped). Errors name the file and the row (JSON Lines: the
    line; CSV: the data row, the header being row 0): a line that is not a JSON object is refused; a null or missing id or text, or a field
    that holds a list or an object, skips that row with the field named."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: questions file not found")
    m = _mapping(columns)
    rows: list[dict] = []
    lines: list[int] = []
    try:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            for n, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CorpusError(f"{path}: line {n} is not JSON ({exc.msg})") from exc
                if not isinstance(obj, dict):
                    raise CorpusError(f"{path}: line {n} is a JSON {type(obj).__name__}, expected an object "
                                      '({"query_id": ..., "text": ...})')
                rows.append(obj)
                lines.append(n)
            names = list(dict.fromkeys(k for r in rows for k in r))
        else:
            raw = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig",
                              sep="\t" if path.suffix.lower() == ".tsv" else ",")
            rows = raw.to_dict("records")
            lines = [i + 1 for i in range(len(rows))]          # data rows from 1 (the header is row 0), as manifests
            names = [str(c) for c in raw.columns]
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    except pd.errors.ParserError as exc:
        raise CorpusError(f"{path}: not a readable CSV ({exc})") from exc
    except pd.errors.EmptyDataError as exc:
        raise CorpusError(f"{path}: the questions file is empty") from exc
    if not rows:
        raise CorpusError(f"{path}: the questions file has no questions (expected one per line or row)")
    if m.get("text", "text") not in names:
        raise CorpusError(f"{path}: no question text column (expected 'text', or map one: columns 'text=Question'); "
                          f"columns are {', '.join(map(str, names))}")
    id_col = m.get("query_id", "query_id")
    make_ids = id_col not in names or not any(_text_cell(r.get(id_col)).strip() for r in rows)
    skipped, seen, keep = [], set(), []
    for i, (line, rec) in enumerate(zip(lines, rows)):
        problem = ""
        row = {}
        for f in QUESTION_FIELDS:
            value = rec.get(m.get(f, f))
            if isinstance(value, (list, dict)):
                problem = problem or f"field {m.get(f, f)!r} holds a JSON {type(value).__name__}, expected text"
            row[f] = _text_cell(value)
        if make_ids:
            row["query_id"] = id_template.format(row=i)
        if not problem and not row["query_id"]:
            problem = f"missing or empty {id_col!r}"
        elif not problem and not row["text"].strip():
            problem = f"missing or empty question text ({m.get('text', 'text')!r})"
        elif not problem and row["query_id"] in seen:
            problem = f"duplicate query_id {row['query_id']!r}"
        elif not problem and re.search(r"\s", row["query_id"]):
            problem = f"query_id {row['query_id']!r} contains whitespace (TREC files split on it)"
        if problem:
            skipped.append({"source": path.name, "row": line, "unit_id": "", "problem": problem})
            continue
        seen.add(row["query_id"])
        keep.append(row)
    return (pd.DataFrame(keep, columns=list(QUESTION_FIELDS)).astype(str),
            pd.DataFrame(skipped, columns=SKIP_COLUMNS))


def _grade(value: str) -> int | None:
    v = str(value).strip()
    if v in LABEL_GRADES:
        return LABEL_GRADES[v]
    if not re.fullmatch(r"-?\d+", v):
        return None
    g = int(v)
    return g if trec.INT64_MIN <= g <= trec.INT64_MAX else None    # held as int64: a larger one is no grade


_shift_page = pagebase.shift


def judgement_rows(path: Path | str) -> list[tuple[int, str, str, str]]:
    """(line or row, query id, unit or document id, relevance) as written in a qrels file: TREC lines,
    or a CSV / TSV with a header (query_id or question_id; unit_id, doc_id, doc_name or docno;
    relevance, label or grade). Nothing is normalised here; read_judgements does that."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: qrels file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from exc
    first = text.splitlines()[0] if text.strip() else ""
    if re.search(r"query_id|question_id|relevance|label", first):
        sep = "\t" if "\t" in first else ","
        df = pd.read_csv(path, dtype=str, keep_default_na=False, sep=sep, encoding="utf-8-sig")
        q = next((c for c in ("query_id", "question_id", "qid") if c in df.columns), None)
        u = next((c for c in ("unit_id", "doc_id", "doc_name", "docno") if c in df.columns), None)
        r = next((c for c in ("relevance", "label", "grade") if c in df.columns), None)
        if not (q and u and r):
            raise CorpusError(f"{path}: needs a query column (query_id or question_id), a unit/document column "
                              f"(unit_id, doc_id or doc_name) and relevance or label; columns are {', '.join(df.columns)}")
        rows = [(i + 2, a, b, c) for i, (a, b, c) in enumerate(zip(df[q], df[u], df[r]))]
    else:
        rows = []
        for n, f in trec._lines(path):
            if len(f) < 4:
                raise CorpusError(f"{path}: line {n} has {len(f)} fields; a TREC qrels line is 'query 0 unit relevance'")
            rows.append((n, f[0], f[2], f[3]))
    return rows


def read_judgements(path: Path | str, unit_ids: Iterable[str], query_ids: Iterable[str], level: str = "page",
                    page_base: int = 1, doc_ids: Iterable[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(qrels: query_id, unit_id, relevance — unit_id is a document id when level is 'document';
    skipped). See the module docstring."""
    path = Path(path)
    if level not in ("page", "document"):
        raise CorpusError(f"qrels level must be 'page' or 'document', got {level!r}")
    if page_base not in (0, 1):
        raise CorpusError(f"{path}: qrels page_base must be 0 or 1, got {page_base!r}")
    rows = judgement_rows(path)
    known_q = set(query_ids)
    if level == "page":
        unit_ids = list(unit_ids)
        pagebase.check(str(path), [u for _, _, u, _ in rows], page_base, unit_ids, [n for n, *_ in rows], "judged page ids")
    if level == "document":
        known = {re.sub(r"\s+", "_", d) for d in (doc_ids if doc_ids is not None else [])}
        norm = lambda x: re.sub(r"\s+", "_", x.strip())  # noqa: E731 - document names as ingest makes doc ids
    else:
        known = set(unit_ids)
        norm = (lambda x: _shift_page(x.strip(), 1)) if page_base == 0 else (lambda x: x.strip())
    out, skipped, seen = [], [], set()
    misses = shifted_hits = 0
    for line, qid, uid, rel in rows:
        g = _grade(rel)
        u = norm(uid)
        problem = ""
        if g is None:
            problem = f"relevance {rel!r} is not an integer (64-bit) or one of {', '.join(LABEL_GRADES)}"
        elif qid not in known_q:
            problem = f"unknown query {qid!r}"
        elif u not in known:
            problem = f"unknown {'document' if level == 'document' else 'unit'} {uid!r}"
            misses += 1
            if level == "page" and _shift_page(u, 1) in known:
                shifted_hits += 1
        elif (qid, u) in seen:
            problem = f"{u!r} judged twice for query {qid!r}"
        if problem:
            skipped.append({"source": path.name, "row": line, "unit_id": uid, "problem": problem})
            continue
        seen.add((qid, u))
        out.append((qid, u, g))
    if level == "page" and misses and shifted_hits >= max(1, misses // 2) and shifted_hits >= len(out):
        raise CorpusError(f"{path}: {misses} of {len(rows)} page ids are not units of the corpus, and {shifted_hits} "
                          f"would be with pages counted from {0 if page_base == 1 else 1} — is the page base wrong? "
                          f"(set qrels page_base to {0 if page_base == 1 else 1})")
    return (pd.DataFrame(out, columns=["query_id", "unit_id", "relevance"]),
            pd.DataFrame(skipped, columns=SKIP_COLUMNS))


def document_run(run: pd.DataFrame, unit_doc: Mapping[str, str]) -> pd.DataFrame:
    """A page run as a document run: each document scored by its best page."""
    r = run.assign(unit_id=run["unit_id"].map(unit_doc))
    r = r.dropna(subset=["unit_id"])
    return r.groupby(["query_id", "unit_id"], as_index=False)["score"].max()


def read_external_run(path: Path | str, unit_ids: Iterable[str], query_ids: Iterable[str],
                      page_base: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A TREC run file from any retriever: (run: query_id, unit_id, score; skipped). Unknown
    queries or units are skipped and reported; 0-based pages are shifted to 1-based."""
    path = Path(path)
    frame, _ = trec.read_run_file(path)
    unit_ids = list(unit_ids)
    known_u, known_q = set(unit_ids), set(query_ids)
    if page_base in (0, 1):
        pagebase.check(str(path), list(frame["unit_id"]), page_base, unit_ids, what="ranked page ids")
    if page_base == 0:
        frame = frame.assign(unit_id=[_shift_page(u, 1) for u in frame["unit_id"]])
    elif page_base != 1:
        raise CorpusError(f"run page_base must be 0 or 1, got {page_base!r}")
    bad_q = ~frame["query_id"].isin(known_q)
    bad_u = ~frame["unit_id"].isin(known_u)
    skipped = [{"source": path.name, "row": int(i) + 1, "unit_id": u,
                "problem": f"unknown query {q!r}" if bq else f"unknown unit {u!r}"}
               for i, (q, u, bq, bu) in enumerate(zip(frame["query_id"], frame["unit_id"], bad_q, bad_u)) if bq or bu]
    if len(frame) and (bad_u & ~bad_q).mean() > 0.5 and page_base == 1:
        shifted = frame["unit_id"].map(lambda u: _shift_page(u, 1)).isin(known_u)
        if shifted[bad_u].mean() > 0.5:
            raise CorpusError(f"{path}: most unit ids are not units of the corpus but would be with pages counted "
                              "from 0 — set this run's page_base to 0")
    keep = frame[~(bad_q | bad_u)][["query_id", "unit_id", "score"]].reset_index(drop=True)
    return keep, pd.DataFrame(skipped, columns=SKIP_COLUMNS)


def infer_structure(unit_ids: list[str], pages: Mapping[str, int], docs: Mapping[str, str]) -> str:
    """Evidence structure from the evidence units: page-single, doc-adjacent / doc-near / doc-far
    (two or more pages of one document, by the largest gap: 1, up to 3, more), cross-doc."""
    if len(unit_ids) == 1:
        return "page-single"
    if not unit_ids:
        return ""
    if len({docs[u] for u in unit_ids}) > 1:
        return "cross-doc"
    p = sorted(pages[u] for u in unit_ids)
    gap = max(b - a for a, b in zip(p, p[1:]))
    return "doc-adjacent" if gap <= 1 else "doc-near" if gap <= 3 else "doc-far"


def as_questions(questions: pd.DataFrame, qrels: pd.DataFrame, units: pd.DataFrame, level: str = "page") -> pd.DataFrame:
    """Your questions in the run's questions table (lookalike.corpus.QUESTION_COLUMNS): page-level
    qrels give each question its evidence units (relevance > 0) and, unless the file gave one, its
    evidence structure; document-level qrels leave evidence_unit_ids empty (see tables/qrels.csv)."""
    pages = dict(zip(units["unit_id"], units["page"].astype(int)))
    docs = dict(zip(units["unit_id"], units["doc_id"]))
    rel = qrels[qrels["relevance"] > 0] if level == "page" else qrels.head(0)
    evidence = rel.groupby("query_id")["unit_id"].apply(lambda s: sorted(s, key=lambda u: (docs[u], pages[u]))).to_dict()
    rows = []
    for r in questions.itertuples(index=False):
        ev = evidence.get(r.query_id, [])
        structure = r.evidence_structure or infer_structure(ev, pages, docs)
        rows.append({"query_id": r.query_id, "text": r.text, "answer": r.answer, "evidence_structure": structure,
                     "register": r.register or "question", "qualified": False, "qualifiers": "",
                     "evidence_unit_ids": ";".join(ev)})
    return pd.DataFrame(rows, columns=QUESTION_COLUMNS)


REGRESSION_COLUMNS = ["query_id", "text", "expected_unit_id", "returned_unit_id", "system", "note"]


def read_regressions(path, unit_ids, page_base: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Failures users reported: CSV with text and expected_unit_id (the unit that should have come
    back); optional query_id, returned_unit_id (what did), system, note.

    Returns (rows, skipped). A row with empty text or an unknown unit id is skipped with its row
    number and reason — never the whole file. query_id defaults to r001, r002, ... by row. Unit ids
    that contradict page_base refuse the file (io.pagebase); 0-based ids are shifted to the corpus's.
    """
    path = Path(path)
    df = read_required_csv(path, ("text", "expected_unit_id"), "regression file",
                           hint="need text, expected_unit_id; optional query_id, returned_unit_id, system, note")
    for col in REGRESSION_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    unit_ids = list(unit_ids)
    rows = range(2, len(df) + 2)
    for col in ("expected_unit_id", "returned_unit_id"):
        pagebase.check(str(path), list(df[col]), page_base, unit_ids, rows, what=col)
        df[col] = [u if not u.strip() else v for u, v in zip(df[col], pagebase.normalise(df[col], page_base))]
    known = set(unit_ids)
    keep, skipped, seen = [], [], set()
    for i, r in enumerate(df.to_dict("records"), start=2):          # row 1 is the header
        qid = r["query_id"].strip() or f"r{i - 1:03d}"
        problem = ""
        if not r["text"].strip():
            problem = "empty text"
        elif r["expected_unit_id"] not in known:
            problem = f"expected_unit_id {r['expected_unit_id']!r} is not a unit of this corpus"
        elif r["returned_unit_id"] and r["returned_unit_id"] not in known:
            problem = f"returned_unit_id {r['returned_unit_id']!r} is not a unit of this corpus"
        elif qid in seen:
            problem = f"duplicate query_id {qid!r}"
        if problem:
            skipped.append(dict(source=str(path), row=i, unit_id=r["expected_unit_id"], problem=problem))
            continue
        seen.add(qid)
        keep.append({**r, "query_id": qid})
    return (pd.DataFrame(keep, columns=REGRESSION_COLUMNS),
            pd.DataFrame(skipped, columns=["source", "row", "unit_id", "problem"]))


BLIND_QUERY_COLUMNS = ["row", "query_id", "unit_id", "text", "register"]


def read_blind_query_file(path: Path | str, unit_ids: Iterable[str], page_base: int = 1,
                          registers: Iterable[str] = ()) -> pd.DataFrame:
    """Your own blind queries (CSV: query_id, unit_id, text[, register]): one row per query with its row
    number in the file; register defaults to "shown". Errors name the file and row: a missing column, page
    numbers that contradict page_base (io.pagebase), an unknown unit, a register not in registers."""
    path = Path(path)
    df = read_required_csv(path, ("query_id", "unit_id", "text"), "blind query file", ValueError, "columns: {columns}")
    known = list(unit_ids)
    pagebase.check(str(path), list(df["unit_id"]), page_base, known, range(2, len(df) + 2))
    df["unit_id"] = pagebase.normalise(df["unit_id"], page_base)
    known, allowed = set(known), list(registers)
    rows = []
    for i, rec in enumerate(df.to_dict("records"), start=1):
        if rec["unit_id"] not in known:
            raise ValueError(f"{path}: row {i} (query {rec['query_id']!r}): unknown unit_id {rec['unit_id']!r}")
        register = rec.get("register", "") or "shown"
        if allowed and register not in allowed:
            raise ValueError(f"{path}: row {i}: register {register!r} is not one of {', '.join(allowed)}")
        rows.append({"row": i, "query_id": rec["query_id"], "unit_id": rec["unit_id"], "text": rec["text"],
                     "register": register})
    return pd.DataFrame(rows, columns=BLIND_QUERY_COLUMNS)
