"""The append-only label store, the labelling page for people, and importing what they labelled.

Store (JSON Lines, one label per line): query_id, unit_id, label (sufficient | supporting |
irrelevant), question_sha (the first 12 hex digits of the sha256 of the question text the label
was given for — a repaired question is another question), judge, source (model | human |
reference), time (UTC, ISO 8601), note. It is
append-only: nothing is ever rewritten or deleted, and appending a label identical to one already
held (same query, unit, label, judge, source and note) adds nothing, so re-running a stage is a
no-op. The *current* label of a pair is the latest one of the highest precedence: a person's
(human) over the demo's answer key (reference) over a model's, in any order of writes and re-runs,
so nothing a person wrote is ever overridden by a model or by the reference; among people's labels
an adjudicator's decision (judge ``adjudicator:<name>``, written by the team label server's export)
ranks above any one person's. Two adjudications that disagree are both kept and reported as a
conflict; people who disagreed are not a conflict once an adjudicator settled the pair (only the
adjudicator's decisions are compared then).

Labelling page: one self-contained offline HTML file — shuffled, blind (no system, rank, file
name, caption or unit id; each item carries an opaque pair id whose key stays in
``key.csv`` beside the page), one page image with its question at a time, keys 1/2/3 (or s/p/i)
for the three labels, u or Backspace to undo, a progress bar, a free-text note, export to CSV and
JSON (rendered from the report's template). ``lookalike labels import FILE --run-dir outputs/<run>``
(lookalike.cli.labels) merges an export into the store.
"""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import datetime, UTC
from pathlib import Path
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from lookalike.data.schema import resolve_image
from lookalike.eval.trec import LABEL_GRADES
from lookalike.vocab import GRADE_LABELS
from lookalike.io.labels import read_page_export
from lookalike.judging.judges import LABELS
from lookalike.report import images as report_images
from lookalike.report import pages
from lookalike.report.summary import labels_provenance

STORE_COLUMNS = ["query_id", "unit_id", "question_sha", "label", "judge", "source", "time", "note"]
SOURCES = ("model", "human", "reference")
ADJUDICATORS = ("human", "reference")
PRECEDENCE = {"model": 0, "reference": 1, "human": 2}     # which label of a pair is current: the highest, then the latest
ADJUDICATOR_PREFIX = "adjudicator:"                        # a person's decision on people's disagreement: above them


class LabelError(ValueError):
    """A label file or store line cannot be used (named with its file and line)."""


# ----------------------------------------------------------------------------- store

def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


class LabelStore:
    """An append-only JSON Lines file of labels (see the module docstring)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.rows: list[dict] = []
        self.torn = ""
        if self.path.is_file():
            lines = self.path.read_text(encoding="utf-8").splitlines()
            last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    if number - 1 == last:
                        self._set_aside(lines[:last], line, number)
                        break
                    raise LabelError(f"{self.path}: line {number} is not JSON ({exc.msg}); only a torn last line "
                                     "is set aside by itself — fix or remove this one") from exc
                self.rows.append(_check(row, f"{self.path}: line {number}"))
        self._seen = {_identity(r) for r in self.rows}

    def _set_aside(self, keep: list[str], torn: str, number: int) -> None:
        """A write cut short (a killed process, a full disk) leaves a torn last line: it is moved to
        ``<store>.torn`` (appended, never lost) and the store rewritten without it, so no later
        stage is blocked and no later append is glued onto it. The note says where it went."""
        aside = self.path.with_name(self.path.name + ".torn")
        with aside.open("a", encoding="utf-8") as fh:
            fh.write(torn + "\n")
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
        tmp.replace(self.path)
        self.torn = (f"{self.path}: line {number} was torn (not JSON: an interrupted write); it was set aside to "
                     f"{aside} and the store kept the {sum(1 for line in keep if line.strip())} lines before it")
        print(f"lookalike: {self.torn}", file=sys.stderr)

    def append(self, labels: Iterable[Mapping], time: str | None = None) -> int:
        """Append new labels (identical ones already held are skipped); returns how many were added."""
        new = []
        stamp = time or _now()
        for i, lab in enumerate(labels):
            row = _check({"time": stamp, "note": "", **lab}, f"label {i + 1}")
            key = _identity(row)
            if key in self._seen:
                continue
            self._seen.add(key)
            new.append(row)
        if new:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                for row in new:
                    fh.write(json.dumps({c: row[c] for c in STORE_COLUMNS}, ensure_ascii=False) + "\n")
            self.rows.extend(new)
        return len(new)

    def frame(self) -> pd.DataFrame:
        """Every line of the store as a frame (STORE_COLUMNS), in the order written."""
        return pd.DataFrame(self.rows, columns=STORE_COLUMNS)

    def current(self, question_shas: Mapping[str, str] | None = None) -> pd.DataFrame:
        """One row per (query, unit): the latest label of the highest precedence — people's (human)
        over the demo's answer key (reference) over a model's — whatever the order the lines were
        written in, so neither a model nor the reference ever overrides a person's label.
        question_shas: query_id -> question_sha of the wording in use; labels given for another
        wording are ignored (they stay in the store). Columns: query_id, unit_id, label, judge,
        source, adjudicated, conflict (adjudications of the pair disagree; all are kept)."""
        df = _for_questions(self.frame(), question_shas)
        cols = ["query_id", "unit_id", "label", "judge", "source", "adjudicated", "conflict"]
        if df.empty:
            return pd.DataFrame({c: pd.Series(dtype=bool if c in ("adjudicated", "conflict") else object) for c in cols})
        df["order"] = np.arange(len(df))
        df["adjudicated"] = df["source"].isin(ADJUDICATORS)
        df["precedence"] = _precedence(df)
        latest = (df.sort_values(["precedence", "order"], kind="mergesort")
                  .groupby(["query_id", "unit_id"], sort=False).tail(1))
        adj = _top_adjudications(df[df["adjudicated"]])
        conflicts = adj.groupby(["query_id", "unit_id"])["label"].nunique()
        conflicts = set(conflicts[conflicts > 1].index)
        latest = latest.assign(conflict=[(q, u) in conflicts for q, u in zip(latest["query_id"], latest["unit_id"])])
        return latest[cols].sort_values(["query_id", "unit_id"], kind="mergesort").reset_index(drop=True)

    def conflicts(self, question_shas: Mapping[str, str] | None = None) -> pd.DataFrame:
        """Every adjudicated label of the pairs whose adjudications disagree (all kept)."""
        df = _for_questions(self.frame(), question_shas)
        adj = df[df["source"].isin(ADJUDICATORS)]
        if len(adj):
            adj = _top_adjudications(adj)
        n = adj.groupby(["query_id", "unit_id"])["label"].transform("nunique")
        return adj[n > 1].sort_values(["query_id", "unit_id"], kind="mergesort").reset_index(drop=True)


def _precedence(df: pd.DataFrame) -> pd.Series:
    rank = df["source"].map(PRECEDENCE)
    return rank + ((df["source"] == "human") & df["judge"].str.startswith(ADJUDICATOR_PREFIX)).astype(int)


def _top_adjudications(adj: pd.DataFrame) -> pd.DataFrame:
    """The adjudicated rows a conflict is judged on: an adjudicator's decisions where the pair has
    any, else all of its people's and reference labels."""
    if adj.empty:
        return adj
    tier = ((adj["source"] == "human") & adj["judge"].str.startswith(ADJUDICATOR_PREFIX)).astype(int)
    top = tier.groupby([adj["query_id"], adj["unit_id"]]).transform("max")
    return adj[tier == top]


def _identity(row: Mapping) -> tuple:
    return tuple(row[c] for c in ("query_id", "unit_id", "question_sha", "label", "judge", "source", "note"))


def question_sha(text: str) -> str:
    """A short hash of a question's wording: labels record which wording they were given for."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:12]


def _for_questions(df: pd.DataFrame, shas: Mapping[str, str] | None) -> pd.DataFrame:
    """Rows whose question_sha matches the current wording of their question (or is unrecorded)."""
    if shas is None or df.empty:
        return df
    want = df["query_id"].map(shas).fillna("")
    return df[(df["question_sha"] == "") | (df["question_sha"] == want)]


def _check(row: Mapping, where: str) -> dict:
    row = dict(row)
    for col in ("query_id", "unit_id", "label", "judge", "source"):
        if not str(row.get(col, "")).strip():
            raise LabelError(f"{where}: {col} is missing")
    if row["label"] not in LABELS:
        raise LabelError(f"{where}: label {row['label']!r} is not one of {', '.join(LABELS)}")
    if row["source"] not in SOURCES:
        raise LabelError(f"{where}: source {row['source']!r} is not one of {', '.join(SOURCES)}")
    row["note"] = str(row.get("note") or "")
    row["time"] = str(row.get("time") or "")
    row["question_sha"] = str(row.get("question_sha") or "")
    return {c: str(row[c]) for c in STORE_COLUMNS}


def qrels_from(current: pd.DataFrame) -> pd.DataFrame:
    """Current labels -> graded qrels (query_id, unit_id, relevance) with the three-way grades."""
    return pd.DataFrame({"query_id": current["query_id"], "unit_id": current["unit_id"],
                         "relevance": current["label"].map(LABEL_GRADES).astype(int)})


# ----------------------------------------------------------------------------- labelling page

def pair_id(query_id: str, unit_id: str, question: str = "") -> str:
    """A pair's short id from its query, unit and the question's wording."""
    return hashlib.sha256(f"{query_id}\0{unit_id}\0{question}".encode()).hexdigest()[:12]


def labelling_page(pairs: pd.DataFrame, questions: pd.DataFrame, units: pd.DataFrame, base_dir: Path | str,
                   out_dir: Path | str, seed: int, title: str = "lookalike — label pages", width: int = 760,
                   noun: str = "page") -> Path:
    """Write out_dir/label.html (self-contained) and out_dir/key.csv (pair id -> query, unit).

    pairs: query_id, unit_id. The page is shuffled with the seed and shows only the question text
    and the page image; every string reaches the DOM through textContent, never as markup.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = questions.set_index("query_id")["text"]
    paths = units.set_index("unit_id")["image_path"]
    order = np.random.default_rng([seed, 6]).permutation(len(pairs))
    items, images, key = [], {}, []
    for i in order:
        q, u = pairs["query_id"].iloc[i], pairs["unit_id"].iloc[i]
        pid = pair_id(q, u, text[q])
        img = f"i{len(images)}" if u not in images else images[u][0]
        if u not in images:
            images[u] = (img, report_images.data_uri(resolve_image(paths[u], base_dir), width))
        items.append({"id": pid, "q": str(text[q]), "img": img})
        key.append({"pair_id": pid, "query_id": q, "unit_id": u, "question_sha": question_sha(text[q])})
    pd.DataFrame(key, columns=["pair_id", "query_id", "unit_id", "question_sha"]).sort_values("pair_id").to_csv(
        out_dir / "key.csv", index=False, lineterminator="\n")
    data = {"page": hashlib.sha256("".join(it["id"] for it in items).encode()).hexdigest()[:10], "items": items,
            "images": {k: v for k, v in images.values()}}
    html = pages.labelling_page(title, data, noun)
    path = out_dir / "label.html"
    path.write_text(html, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- import

def read_export(path: Path | str) -> pd.DataFrame:
    """A labelling-page export (CSV or JSON) -> pair_id, label, note, time (io.labels reads it)."""
    return read_page_export(path, LabelError)


def import_export(export: Path | str, key: Path | str, store: LabelStore, judge: str = "human") -> dict:
    """Merge a page export into the store as human labels. Returns counts: added, already held,
    unknown pair ids (skipped and listed), and pairs now in conflict."""
    df = read_export(export)
    k = pd.read_csv(key, dtype=str, keep_default_na=False).set_index("pair_id")
    known = df["pair_id"].isin(k.index)
    unknown = sorted(df.loc[~known, "pair_id"])
    rows = [{"query_id": k.loc[p, "query_id"], "unit_id": k.loc[p, "unit_id"],
             "question_sha": k.loc[p, "question_sha"] if "question_sha" in k.columns else "", "label": lab, "judge": judge,
             "source": "human", "note": note, "time": t}
            for p, lab, note, t in zip(df["pair_id"][known], df["label"][known], df["note"][known], df["time"][known])]
    added = 0
    for r in rows:                                  # each keeps the time the person labelled it
        added += store.append([r], time=r["time"] or None)
    conflicts = store.conflicts()
    return {"added": added, "already_held": len(rows) - added, "unknown": unknown,
            "conflicting_pairs": int(conflicts[["query_id", "unit_id"]].drop_duplicates().shape[0])}


# ----------------------------------------------------------------------------- your judgements as labels

def labels_from_qrels(qrels: pd.DataFrame, source_name: str, question_shas: Mapping[str, str] | None = None) -> list[dict]:
    """Page-level judgements a user supplied, as people's labels for the store (source human, judge
    'qrels:<file>'). Grades: a graded file's 2 / 1 / 0 are sufficient / supporting / irrelevant; a
    binary file (no grade above 1) marks the pages that answer, so its 1 is sufficient."""
    if qrels is None or not len(qrels):
        return []
    binary = int(pd.to_numeric(qrels["relevance"]).max()) <= 1
    rows = []
    for q, u, rel in zip(qrels["query_id"], qrels["unit_id"], pd.to_numeric(qrels["relevance"]).astype(int)):
        label = ("sufficient" if rel >= 1 else "irrelevant") if binary else GRADE_LABELS.get(min(max(rel, 0), 2))
        rows.append({"query_id": q, "unit_id": u, "question_sha": (question_shas or {}).get(q, ""), "label": label,
                     "judge": f"qrels:{source_name}", "source": "human",
                     "note": f"your judgement (relevance {rel}{', binary file' if binary else ''})"})
    return rows


# ----------------------------------------------------------------------------- what the labels rest on

provenance = labels_provenance   # the words live in report.summary, where the audit derives them again
