"""Label rows and units as the label database and the corpus give them, for the team, door and stage 06 tests."""

import pandas as pd


def frame(rows, pairs=None) -> pd.DataFrame:
    """Labels like LabelDB.labels(): (annotator, pair, label[, pool, kind, minute])."""
    out = []
    for i, r in enumerate(rows):
        name, pid, label = r[:3]
        pool = r[3] if len(r) > 3 else "blind"
        kind = r[4] if len(r) > 4 else "label"
        minute = r[5] if len(r) > 5 else i
        q = pid.split("-")[0]
        out.append({"id": i + 1, "pair_id": pid, "query_id": q, "unit_id": pid.split("-")[1], "question_sha": "x",
                    "annotator": name, "pool": pool, "kind": kind, "label": label, "note": "",
                    "time": f"2026-12-04T10:{minute:02d}:00.000+00:00", "seconds": 3.0, "retracted": 0})
    return pd.DataFrame(out)


def door_units():
    """Eight units in four documents, every other one with a file name that names the metric."""
    return pd.DataFrame({"unit_id": [f"u{i}" for i in range(8)], "doc_id": [f"d{i // 2}" for i in range(8)],
                         "filename": ["revenue_table.png" if i % 2 == 0 else "scan.png" for i in range(8)],
                         "caption": [""] * 8})
