"""Label files people bring: read, checked, every bad row named by file and row.

- a label file (the human judge's ``validate.labels``): CSV with query_id, unit_id, label and an
  optional note; page numbers checked against the page base (``io.pagebase``); rows naming an
  unknown question or unit, and pairs given two different labels, are set aside with the reason;
- a filled judging sheet (stage 03's blind-query sheet): CSV with item and label (or, from before
  the labels, grade 2 / 1 / 0); empty cells are not judged yet;
- a labelling-page export (``lookalike labels import``): CSV or JSON with pair_id and label, and
  optional note and time.

Each reader takes the error class its caller reports with, so a judge's file error stays a judge
error and a label-store import error stays a label error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lookalike.data.schema import CorpusError, read_required_csv
from lookalike.io import pagebase
from lookalike.io.inputs import SKIP_COLUMNS
from lookalike.vocab import GRADE_LABELS, LABELS

SHEET_COLUMNS = ["item", "label", "judge"]
EXPORT_COLUMNS = ["pair_id", "label", "note", "time"]


def check_labels(labels: pd.Series, path: Path, error: type[Exception]) -> None:
    """Every label one of LABELS; else the error names the file, the 1-based row and the value."""
    bad = ~labels.isin(LABELS)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise error(f"{path}: row {i + 1} label {labels.iloc[i]!r} is not one of {', '.join(LABELS)}")


def read_label_file(path: Path | str, unit_ids: Sequence[str] | None = None, query_ids: Sequence[str] | None = None,
                    page_base: int = 1, error: type[Exception] = CorpusError
                    ) -> tuple[dict[tuple[str, str], tuple[str, str]], pd.DataFrame]:
    """({(query_id, unit_id): (label, note)}, skipped rows: source, row, unit_id, problem).

    unit_ids: the corpus's, to check the file's page numbers against page_base and to set aside
    rows naming no unit; query_ids: the run's questions, likewise. A pair listed twice with
    different labels is a conflict: both rows are set aside and the pair has no label (never the
    later one silently); the same label twice is one label."""
    path = Path(path)
    df = read_required_csv(path, ("query_id", "unit_id", "label"), "label file", error)
    check_labels(df["label"], path, error)
    if unit_ids is not None:
        try:
            pagebase.check(str(path), list(df["unit_id"]), page_base, unit_ids, range(2, len(df) + 2))
        except pagebase.PageBaseError as exc:
            raise error(str(exc)) from exc
    df["unit_id"] = pagebase.normalise(df["unit_id"], page_base)
    notes = df["note"] if "note" in df.columns else pd.Series([""] * len(df), index=df.index)
    known_u = None if unit_ids is None else set(unit_ids)
    known_q = None if query_ids is None else set(query_ids)
    by_pair: dict[tuple, list[tuple[int, str, str]]] = {}
    skipped = []
    for row, (q, u, lab, note) in enumerate(zip(df["query_id"], df["unit_id"], df["label"], notes), start=1):
        if known_q is not None and q not in known_q:
            skipped.append((str(path), row, u, f"unknown query {q!r}"))
        elif known_u is not None and u not in known_u:
            skipped.append((str(path), row, u, f"unknown unit {u!r} (query {q!r})"))
        else:
            by_pair.setdefault((q, u), []).append((row, lab, note))
    labels = {}
    for (q, u), rows in by_pair.items():
        if len({lab for _, lab, _ in rows}) > 1:
            listed = ", ".join(f"row {r}: {lab}" for r, lab, _ in rows)
            skipped += [(str(path), r, u, f"conflicting labels for query {q!r} ({listed}); the pair is left "
                                          "unlabelled until one is removed") for r, _, _ in rows]
        else:
            _, lab, note = rows[-1]
            labels[(q, u)] = (lab, note)
    return labels, pd.DataFrame(sorted(skipped, key=lambda x: x[1]), columns=SKIP_COLUMNS)


def read_filled_sheet(path: Path | str, items: Iterable[str], error: type[Exception] = ValueError) -> pd.DataFrame:
    """The judged rows of a filled judging sheet: item, label, judge ('human' where the sheet names
    none). items: the sheet's own items; a row naming another is refused, as is a label that is
    not one of the three (or a grade that is not 2 / 1 / 0)."""
    path = Path(path)
    filled = pd.read_csv(path, dtype=str, keep_default_na=False)
    column = "label" if "label" in filled.columns or "grade" not in filled.columns else "grade"
    for col in ("item", column):
        if col not in filled.columns:
            raise error(f"{path}: column {col!r} is missing (columns: {', '.join(filled.columns)})")
    allowed = dict(zip(LABELS, LABELS)) if column == "label" else {str(g): lab for g, lab in GRADE_LABELS.items()}
    known = set(items)
    rows = []
    for i, rec in enumerate(filled.to_dict("records"), start=1):
        value = rec[column].strip()
        if value == "":
            continue                                   # not judged yet
        if rec["item"] not in known:
            raise error(f"{path}: row {i}: unknown item {rec['item']!r}")
        if value not in allowed:
            raise error(f"{path}: row {i}: {column} {value!r} is not one of {', '.join(allowed)}")
        rows.append((rec["item"], allowed[value], rec.get("judge", "") or "human"))
    return pd.DataFrame(rows, columns=SHEET_COLUMNS)


def read_page_export(path: Path | str, error: type[Exception] = CorpusError) -> pd.DataFrame:
    """A labelling-page export (CSV or JSON) -> pair_id, label, note, time. Errors name the file and row."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: file not found")
    try:
        if path.suffix.lower() == ".json":
            rows = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(rows, list):
                raise error(f"{path}: expected a JSON list of labels")
            df = pd.DataFrame(rows)
        else:
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError as exc:
        raise error(f"{path}: the file is empty (a labelling-page export has a header: pair_id,label,note,time)") from exc
    except (json.JSONDecodeError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise error(f"{path}: cannot read it as a labelling export ({exc})") from exc
    if df.empty:
        raise error(f"{path}: the export holds no labels")
    for col in ("pair_id", "label"):
        if col not in df.columns:
            raise error(f"{path}: column {col!r} is missing (a labelling-page export has pair_id, label, note, time)")
    for col in ("note", "time"):
        if col not in df.columns:
            df[col] = ""
    check_labels(df["label"], path, error)
    return df[EXPORT_COLUMNS].fillna("").astype(str)
