"""The human judge: labels people wrote, read from a file (never overwritten by a model)."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


from lookalike.data.schema import read_required_csv
from lookalike.io import pagebase
from lookalike.vocab import LABELS


from lookalike.judging.protocol import Capabilities, JudgeError, Judgement, register


def check_labels(labels: pd.Series, path: Path, error: type[Exception]) -> None:
    """Every label one of LABELS; else the error names the file, the 1-based row and the value."""
    bad = ~labels.isin(LABELS)
    if bad.any():
        i = int(np.argmax(bad.to_numpy()))
        raise error(f"{path}: row {i + 1} label {labels.iloc[i]!r} is not one of {', '.join(LABELS)}")


@register("human", "labels people wrote, read from a file: the labels every other judge is measured against")
class HumanJudge:
    """Labels people wrote: a CSV with query_id, unit_id, label (and optional note)."""

    capabilities = Capabilities("human", reads_image=True, needs_labels=True)

    @classmethod
    def from_resources(cls, labels="", units=None, page_base=1, **_):
        if not labels:
            raise JudgeError("the human judge needs validate.labels: a CSV of query_id, unit_id, label")
        return cls(labels, None if units is None else units["unit_id"], page_base)

    def __init__(self, path: Path | str, unit_ids: Sequence[str] | None = None, page_base: int = 1,
                 query_ids: Sequence[str] | None = None):
        """unit_ids: the corpus's, to check the file's page numbers against page_base (io.pagebase)
        and to set aside rows naming no unit; query_ids: the run's questions, likewise. A pair
        listed twice with different labels is a conflict: both rows are kept in ``skipped`` and
        the pair has no label (never the later one silently); the same label twice is one label."""
        path = Path(path)
        df = read_required_csv(path, ("query_id", "unit_id", "label"), "label file", JudgeError)
        check_labels(df["label"], path, JudgeError)
        if unit_ids is not None:
            try:
                pagebase.check(str(path), list(df["unit_id"]), page_base, unit_ids, range(2, len(df) + 2))
            except pagebase.PageBaseError as exc:
                raise JudgeError(str(exc)) from exc
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
        self.labels = {}
        for (q, u), rows in by_pair.items():
            if len({lab for _, lab, _ in rows}) > 1:
                listed = ", ".join(f"row {r}: {lab}" for r, lab, _ in rows)
                skipped += [(str(path), r, u, f"conflicting labels for query {q!r} ({listed}); the pair is left "
                                              "unlabelled until one is removed") for r, _, _ in rows]
            else:
                _, lab, note = rows[-1]
                self.labels[(q, u)] = (lab, note)
        self.skipped = pd.DataFrame(sorted(skipped, key=lambda x: x[1]), columns=["source", "row", "unit_id", "problem"])

    def judge(self, question: Mapping, unit: Mapping) -> Judgement:
        key = (question["query_id"], unit["unit_id"])
        if key not in self.labels:
            raise JudgeError(f"no human label for query {key[0]!r} and unit {key[1]!r}")
        label, note = self.labels[key]
        return Judgement(label, note or "human label", self.name)
