"""TREC qrels and runs: read, write, and convert between long frames and dicts.

qrels file lines: ``query_id iteration unit_id relevance`` (iteration ignored, relevance an integer)
run file lines:   ``query_id Q0 unit_id rank score tag`` (rank ignored: rankings are recomputed
                  canonically from scores, as trec_eval does)
Lines whose first non-blank character is ``#`` are comments, as in trec_eval; a ``#`` inside an id
is part of the id. Fields after the 4th (qrels) or 6th (run) are ignored, as trec_eval ignores them. Long frames: qrels ``query_id, unit_id, relevance`` (int64); runs
``query_id, unit_id, score`` (float64). Dicts: ``qrels[qid][uid] -> int``, ``run[qid][uid] -> float``.

Three-way labels map to graded relevance by LABEL_GRADES (overridable everywhere it is used):
sufficient -> 2, supporting -> 1, irrelevant -> 0.
"""

from __future__ import annotations

import math
from pathlib import Path
from collections.abc import Iterable, Mapping

import pandas as pd

from lookalike.vocab import LABEL_GRADES, LABELS  # noqa: F401 (re-exported)


class TrecFormatError(ValueError):
    """A qrels or run file (or frame) breaks the format; the message names the file and line."""


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def check_writable_ids(ids, what: str) -> None:
    """Refuse an id a TREC line cannot hold: empty, or with whitespace (every reader splits on it,
    so "initech 2023:1" would come back as a unit "initech" and a shifted score)."""
    for x in ids:
        x = str(x)
        if not x or any(c.isspace() for c in x):
            raise TrecFormatError(f"{what}: id {x!r} is empty or contains whitespace; a TREC file cannot hold it")


def _lines(path: Path) -> Iterable[tuple[int, list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise TrecFormatError(f"{path}: file not found")
    try:
        # utf-8-sig: a byte-order mark is not part of the first query id (Arrow's reader, the
        # columnar path, drops it too, so both paths read the same ids from the same file)
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TrecFormatError(f"{path}: not UTF-8 (byte {exc.start}); ids are compared as UTF-8 text") from exc
    any_line = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        any_line = True
        yield number, stripped.split()
    if not any_line:
        raise TrecFormatError(f"{path}: empty file (no qrels or run lines)")


def read_qrels_file(path: Path | str) -> pd.DataFrame:
    """TREC qrels file -> long frame (query_id, unit_id, relevance), file order kept.

    Errors name the file and line: a line without 4 fields, a non-integer relevance, or a unit
    judged twice for one query (trec_eval refuses that too).
    """
    path = Path(path)
    qids, uids, rels, seen = [], [], [], {}
    for number, fields in _lines(path):
        if len(fields) < 4:
            raise TrecFormatError(f"{path}:{number}: expected 4 fields 'query_id iteration unit_id relevance', "
                                  f"got {len(fields)}")
        qid, _, uid, rel = fields[:4]
        try:
            value = int(rel)
        except ValueError:
            raise TrecFormatError(f"{path}:{number}: relevance {rel!r} is not an integer") from None
        if not INT64_MIN <= value <= INT64_MAX:
            raise TrecFormatError(f"{path}:{number}: relevance {rel!r} is outside the 64-bit integer range")
        key = (qid, uid)
        if key in seen:
            raise TrecFormatError(f"{path}:{number}: unit {uid!r} judged twice for query {qid!r} "
                                  f"(first on line {seen[key]})")
        seen[key] = number
        qids.append(qid)
        uids.append(uid)
        rels.append(value)
    return pd.DataFrame({"query_id": pd.array(qids, dtype=object), "unit_id": pd.array(uids, dtype=object),
                         "relevance": pd.array(rels, dtype="int64")})


def read_run_file(path: Path | str) -> tuple[pd.DataFrame, str]:
    """TREC run file -> (long frame (query_id, unit_id, score), tag).

    Errors name the file and line: a line without 6 fields, a score that is not a finite number,
    or a unit listed twice for one query (trec_eval refuses it too).
    """
    path = Path(path)
    qids, uids, scores, seen = [], [], [], {}
    tag = ""
    for number, fields in _lines(path):
        if len(fields) < 6:
            raise TrecFormatError(f"{path}:{number}: expected 6 fields 'query_id Q0 unit_id rank score tag', "
                                  f"got {len(fields)}")
        qid, _, uid, _, score, tag = fields[:6]
        try:
            value = float(score)
        except ValueError:
            raise TrecFormatError(f"{path}:{number}: score {score!r} is not a number") from None
        if not math.isfinite(value):
            raise TrecFormatError(f"{path}:{number}: score {score!r} is not finite")
        key = (qid, uid)
        if key in seen:
            raise TrecFormatError(f"{path}:{number}: unit {uid!r} listed twice for query {qid!r} "
                                  f"(first on line {seen[key]})")
        seen[key] = number
        qids.append(qid)
        uids.append(uid)
        scores.append(value)
    frame = pd.DataFrame({"query_id": pd.array(qids, dtype=object), "unit_id": pd.array(uids, dtype=object),
                          "score": pd.array(scores, dtype="float64")})
    return frame, tag


def write_qrels(qrels, path: Path | str) -> Path:
    """Write qrels (frame or dict) as TREC lines, sorted by query_id then unit_id."""
    df = qrels_frame(qrels).sort_values(["query_id", "unit_id"], kind="mergesort")
    path = Path(path)
    check_writable_ids(set(df["query_id"]) | set(df["unit_id"]), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for q, u, r in zip(df["query_id"], df["unit_id"], df["relevance"]):
            fh.write(f"{q} 0 {u} {int(r)}\n")
    return path


def _check_ids(df: pd.DataFrame, what: str) -> None:
    for col in ("query_id", "unit_id"):
        if col not in df.columns:
            raise TrecFormatError(f"{what}: column {col!r} is missing (columns: {', '.join(map(str, df.columns))})")
        bad = df[col].isna() | (df[col].astype(str).str.len() == 0)
        if bad.any():
            raise TrecFormatError(f"{what}: row {int(bad.to_numpy().argmax())} has an empty {col}")


def qrels_frame(qrels, what: str = "qrels", grades: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Qrels from a dict, a long frame (relevance, or a three-way label column) -> long frame.

    A frame with a ``label`` column and no ``relevance`` is mapped with grades (default LABEL_GRADES);
    an unknown label or a non-integer relevance is an error naming the row.
    """
    if isinstance(qrels, Mapping):
        rows = [(q, u, r) for q, units in qrels.items() for u, r in units.items()]
        df = pd.DataFrame(rows, columns=["query_id", "unit_id", "relevance"])
    else:
        df = qrels.copy()
    if "relevance" not in df.columns and "label" in df.columns:
        df["relevance"] = labels_to_relevance(df["label"], grades, what)
    _check_ids(df, what)
    if "relevance" not in df.columns:
        raise TrecFormatError(f"{what}: needs a 'relevance' or 'label' column")
    rel = pd.to_numeric(df["relevance"], errors="coerce")
    bad = rel.isna() | (rel != rel.round())
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise TrecFormatError(f"{what}: row {i} relevance {df['relevance'].iloc[i]!r} is not an integer")
    out = pd.DataFrame({"query_id": df["query_id"].astype(str).astype(object),
                        "unit_id": df["unit_id"].astype(str).astype(object),
                        "relevance": rel.astype("int64")})
    dup = out.duplicated(["query_id", "unit_id"])
    if dup.any():
        i = int(dup.to_numpy().argmax())
        raise TrecFormatError(f"{what}: row {i} judges unit {out['unit_id'].iloc[i]!r} a second time for query "
                              f"{out['query_id'].iloc[i]!r}")
    return out.reset_index(drop=True)


def run_frame(run, what: str = "run") -> pd.DataFrame:
    """Run from a dict or a long frame -> long frame (query_id, unit_id, score); checks ids and scores."""
    if isinstance(run, Mapping):
        rows = [(q, u, s) for q, units in run.items() for u, s in units.items()]
        df = pd.DataFrame(rows, columns=["query_id", "unit_id", "score"])
    else:
        df = run
    _check_ids(df, what)
    if "score" not in df.columns:
        raise TrecFormatError(f"{what}: column 'score' is missing")
    score = pd.to_numeric(df["score"], errors="coerce").astype("float64")
    bad = ~pd.Series(score).map(math.isfinite).astype(bool) if len(score) else pd.Series([], dtype=bool)
    if bad.any():
        i = int(bad.to_numpy().argmax())
        raise TrecFormatError(f"{what}: row {i} score {df['score'].iloc[i]!r} is not a finite number")
    out = pd.DataFrame({"query_id": df["query_id"].astype(str).astype(object).to_numpy(),
                        "unit_id": df["unit_id"].astype(str).astype(object).to_numpy(),
                        "score": score.to_numpy()})
    dup = out.duplicated(["query_id", "unit_id"])
    if dup.any():
        i = int(dup.to_numpy().argmax())
        raise TrecFormatError(f"{what}: row {i} lists unit {out['unit_id'].iloc[i]!r} twice for query "
                              f"{out['query_id'].iloc[i]!r}")
    return out


def _nest(df: pd.DataFrame, column: str, cast) -> dict:
    out: dict = {}
    for q, u, v in zip(df["query_id"], df["unit_id"], df[column]):
        out.setdefault(q, {})[u] = cast(v)
    return out


def qrels_dict(qrels) -> dict[str, dict[str, int]]:
    """Qrels (a frame, file or Qrels) as pytrec_eval's nested dict: query -> unit -> relevance."""
    return _nest(qrels_frame(qrels), "relevance", int)


def run_dict(run) -> dict[str, dict[str, float]]:
    """A run (a frame, file or Run) as pytrec_eval's nested dict: query -> unit -> score."""
    return _nest(run_frame(run), "score", float)


def labels_to_relevance(labels: pd.Series, grades: Mapping[str, int] | None = None, what: str = "labels") -> pd.Series:
    """Map three-way labels to graded relevance (default LABEL_GRADES); unknown labels are an error."""
    grades = dict(LABEL_GRADES if grades is None else grades)
    mapped = labels.map(grades)
    if mapped.isna().any():
        i = int(mapped.isna().to_numpy().argmax())
        raise TrecFormatError(f"{what}: row {i} label {labels.iloc[i]!r} is not one of {sorted(grades)}")
    return mapped.astype("int64")


# ----------------------------------------------------------------------------- the columnar fast path

def has_duplicates(qcode, ucode, n_units: int) -> bool:
    """Whether some (query, unit) code pair occurs twice (numpy's integer sort: faster than hashing)."""
    import numpy as np

    if len(qcode) < 2:
        return False
    counts = np.bincount(qcode)
    if counts.min() == counts.max() and bool(np.all(qcode[1:] >= qcode[:-1])):
        # every query holds the same number of entries, stored together: sort each query's units, a
        # slab of queries at a time (a slab's copy is small and reused: no copy as long as the input)
        rows = np.asarray(ucode).reshape(-1, int(counts[0]))
        step = max(1, DUPLICATE_SLAB // rows.shape[1])
        for a in range(0, len(rows), step):
            slab = np.sort(rows[a:a + step], axis=1)
            if (slab[:, 1:] == slab[:, :-1]).any():
                return True
        return False
    keys = np.sort(np.asarray(qcode, dtype=np.int64) * np.int64(max(n_units, 1)) + ucode)
    return bool((keys[1:] == keys[:-1]).any())


DUPLICATE_SLAB = 1 << 20     # entries sorted at a time by has_duplicates' per-query path


# every character str.split() splits on (what the line reader, like trec_eval, treats as a blank)
_SPLIT_BLANKS = "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


def _odd_ids(ids, comment: bool) -> bool:
    """Whether some distinct id is empty, holds a character str.split() would split on, or (query
    ids: comment) starts with '#' — what the line reader reads differently from the CSV reader."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = pa.array(ids, type=pa.string())
    blank = "[" + "".join(f"\\x{{{ord(c):x}}}" for c in _SPLIT_BLANKS) + "]"
    odd = pc.or_(pc.equal(pc.utf8_length(arr), 0), pc.match_substring_regex(arr, blank))
    if comment:
        odd = pc.or_(odd, pc.starts_with(arr, "#"))
    return bool(pc.any(odd).as_py())


class Columns:
    """A TREC file read straight into factorised arrays (no Python object per line): qcode and
    query_ids (sorted: code point order), ucode and unit_ids (sorted), values (float64 scores or
    int64 relevance), tag (a run's last tag)."""

    __slots__ = ("qcode", "query_ids", "ucode", "unit_ids", "values", "tag")

    def __init__(self, qcode, query_ids, ucode, unit_ids, values, tag=""):
        self.qcode, self.query_ids, self.ucode, self.unit_ids = qcode, query_ids, ucode, unit_ids
        self.values, self.tag = values, tag


def sorted_codes(column) -> tuple:
    """A dictionary-encoded Arrow column (as the CSV reader returns it, one dictionary per block)
    -> (int32 codes into the sorted unique values, the sorted values as an object array). Arrow
    orders strings by their UTF-8 bytes, which is code point order: strcmp's.

    Only the blocks' small dictionaries are hashed and sorted; each block's indices are then
    translated, through its dictionary's slice of the mapping, straight into one int32 array. No
    other array as long as the column is made (unifying the dictionaries, concatenating the blocks
    and widening to int64 each made one: on 10 million rows, 0.05-0.6 s of fresh memory a column)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = [c for c in column.chunks if len(c)]
    if not chunks:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=object)
    every = pc.dictionary_encode(pa.concat_arrays([c.dictionary for c in chunks]))
    distinct = every.dictionary
    order = pc.array_sort_indices(distinct).to_numpy()
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    mapping = rank[every.indices.to_numpy(zero_copy_only=False)]        # each block's dictionary -> sorted code
    codes = np.empty(len(column), dtype=np.int32)
    at = start = 0
    for c in chunks:
        width = len(c.dictionary)
        # mode="clip": the indices are valid by construction, and "raise" would buffer the output
        np.take(mapping[start:start + width], c.indices.to_numpy(zero_copy_only=False), out=codes[at:at + len(c)],
                mode="clip")
        at, start = at + len(c), start + width
    return codes, distinct.take(order).to_numpy(zero_copy_only=False).astype(object)


def read_columns(path: Path | str, kind: str) -> Columns | None:
    """A qrels (kind 'qrels') or run ('run') file read with Arrow's CSV reader into factorised
    arrays, or None when the file is not in the plain form this path takes — exactly 4 (qrels) or
    6 (run) fields per line separated by single spaces (or single tabs), no comment line, no
    carriage return, every id non-empty, every relevance an integer, every score finite, no unit
    twice for one query. The line-by-line readers take every other file: they accept what
    trec_eval accepts (runs of blanks, extra fields, comments) and name the line of any error, so
    this path changes no result and no message, only the speed."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pacsv

    path = Path(path)
    if not path.is_file():
        return None
    n_fields = 4 if kind == "qrels" else 6
    with path.open("rb") as fh:
        first = fh.read(1 << 16).split(b"\n", 1)[0]
        fh.seek(max(0, path.stat().st_size - (1 << 16)))
        tail = fh.read()
    delimiter = "\t" if b"\t" in first and b" " not in first else " "
    names = [f"f{i}" for i in range(n_fields)]
    value_field = "f3" if kind == "qrels" else "f4"
    try:
        table = pacsv.read_csv(
            str(path),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(
                include_columns=["f0", "f2", value_field], strings_can_be_null=False, check_utf8=True,
                column_types={"f0": pa.dictionary(pa.int32(), pa.string()), "f2": pa.dictionary(pa.int32(), pa.string()),
                              value_field: pa.int64() if kind == "qrels" else pa.float64()}))
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    value = table.column(value_field)
    if table.num_rows == 0 or value.null_count:
        return None
    values = value.to_numpy()
    if kind == "run" and not np.isfinite(values).all():
        return None
    qcode, query_ids = sorted_codes(table.column("f0"))
    ucode, unit_ids = sorted_codes(table.column("f2"))
    # checked on the distinct ids, not on every line: an id that str.split() would not keep whole
    # (empty: a line that starts with a blank; or holding other whitespace, such as U+00A0) or a
    # query id that starts with '#' (a comment line with the right number of fields) sends the
    # file to the line reader, which splits and skips comments as trec_eval does
    if _odd_ids(query_ids, comment=True) or _odd_ids(unit_ids, comment=False):
        return None
    if has_duplicates(qcode, ucode, len(unit_ids)):
        return None
    tag = ""
    if kind == "run":
        # the last line's tag, as the line reader reports it (read from the file's tail, not a copy of it)
        lines = tail.decode("utf-8", errors="replace").split("\n")
        tag = next(line.split() for line in reversed(lines) if line.strip())[5]
    return Columns(qcode, query_ids, ucode, unit_ids, values, tag)
