"""The run's store: what one stage computed and later stages read instead of computing again.

Two things are kept under ``<run>/store/``:

* ``page_texts/<fingerprint>.json`` -- every unit's OCR text, as the judges and the leak check read it. Before
  it, stages 05, 06 and 08 each asked the OCR cache for every page, which hashes every image
  again. The entry names the OCR engine and a fingerprint of the units (unit id, image path, file
  size and modification time), so a changed page or engine is read again, never served stale.
* ``queries/<encoder>.npz`` -- one vector per question and encoder, keyed by a hash of the
  encoder's id and the question's text. A question encoded by one stage is read by every later
  one; only questions not yet held are encoded (together, in the order asked). So a question has
  the same vector in every stage of a run, and the same run gives the same bytes.

Both are rebuilt from nothing when deleted: they are caches of the run, not inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zipfile
from pathlib import Path
from collections.abc import Callable, Sequence

import numpy as np

from lookalike.retrieval.encoders.base import Vectors

STORE = "store"
# what a damaged store file raises when read: a truncated .npz is a BadZipFile (or an EOFError
# inside numpy), a torn JSON a ValueError; each is reported, then rebuilt, never fatal
DAMAGED = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def report_damaged(path: Path, exc: BaseException) -> None:
    """Say on stderr that a store file was damaged and is being rebuilt (the run goes on)."""
    print(f"lookalike: {path} is damaged ({type(exc).__name__}: {exc}); rebuilding it", file=sys.stderr)


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def units_fingerprint(unit_ids: Sequence[str], image_paths: Sequence[Path]) -> str:
    """A hash of each unit's id, image path, file size and modification time (stat only, no reading)."""
    h = hashlib.sha256()
    for uid, p in zip(unit_ids, image_paths):
        try:
            st = os.stat(p)
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "missing"
        h.update(f"{uid}\0{p}\0{stamp}\n".encode())
    return h.hexdigest()


def page_texts(run_dir: Path, engine_id: str, unit_ids: Sequence[str], image_paths: Sequence[Path],
               compute: Callable[[], dict[str, str]]) -> dict[str, str]:
    """unit id -> OCR text: from the store when it was written for these units and this engine,
    else computed (by `compute`) and written."""
    fingerprint = units_fingerprint(unit_ids, image_paths)
    # one file per set of units (the leak check reads a subset of its own), named by its fingerprint
    path = Path(run_dir) / STORE / "page_texts" / f"{fingerprint[:20]}.json"
    if path.is_file():
        try:
            held = json.loads(path.read_text(encoding="utf-8"))
            if held.get("engine") == engine_id and held.get("fingerprint") == fingerprint:
                return dict(held["texts"])
        except DAMAGED as exc:
            report_damaged(path, exc)              # computed again and replaced below
    texts = compute()
    body = json.dumps({"engine": engine_id, "fingerprint": fingerprint, "texts": texts}, ensure_ascii=False)
    _atomic_write(path, lambda tmp: tmp.write_text(body, encoding="utf-8"))
    return texts


def _key(encoder_id: str, text: str) -> str:
    return hashlib.sha256(f"{encoder_id}\0{text}".encode()).hexdigest()


def _file_name(name: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def query_vectors(run_dir: Path, name: str, encoder_id: str, ids: Sequence[str], texts: Sequence[str],
                  encode: Callable[[list[str], list[str]], Vectors]) -> tuple[Vectors, int]:
    """The questions' vectors for one encoder, in the order asked, and how many were encoded now.

    encode(texts, ids) is called once, for the questions the store does not hold yet. For an
    encoder whose "vectors" are the texts themselves (BM25) there is nothing to keep: call it
    directly instead."""
    folder = Path(run_dir) / STORE / "queries"
    fname = _file_name(name)
    path = folder / f"{fname}.npz"
    held: Vectors | None = None
    if path.is_file():
        try:
            held = Vectors.load(path)
        except DAMAGED as exc:
            report_damaged(path, exc)
            held = None
        if held is not None and held.encoder_id != encoder_id:
            held = None                            # another model or setting: start again
    keys = [_key(encoder_id, t) for t in texts]
    position = {k: i for i, k in enumerate(held.ids)} if held is not None else {}
    todo = [i for i, k in enumerate(keys) if k not in position]
    seen: set[str] = set()
    todo = [i for i in todo if not (keys[i] in seen or seen.add(keys[i]))]
    if todo:
        new = encode([texts[i] for i in todo], [ids[i] for i in todo])
        merged_ids = (list(held.ids) if held is not None else []) + [keys[i] for i in todo]
        if new.kind == "multi":
            data = (list(held.data) if held is not None else []) + list(new.data)
        else:
            data = np.concatenate([held.data, new.data]) if held is not None else np.asarray(new.data)
        held = Vectors(new.encoder_id, new.provenance, merged_ids, data, new.kind)
        position = {k: i for i, k in enumerate(held.ids)}
        tmp = held.save(folder, f".{fname}.{os.getpid()}.tmp")
        os.replace(tmp, path)
    rows = [position[k] for k in keys]
    data = [held.data[r] for r in rows] if held.kind == "multi" else np.asarray(held.data)[rows]
    return Vectors(held.encoder_id, held.provenance, list(ids), data, held.kind), len(todo)
