"""The judge pool, the append-only label store, and the labelling page for people.

Pool: the union of every system's top k per validated question (plus, when given, each
question's hard-negative candidates), pooled once and reused across experiments.

Store (JSON Lines, one label per line): query_id, unit_id, label (sufficient | supporting |
irrelevant), question_sha (the first 12 hex digits of the sha256 of the question text the label
was given for — a repaired question is another question), judge, source (model | human |
reference), time (UTC, ISO 8601), note. It is
append-only: nothing is ever rewritten or deleted, and appending a label identical to one already
held (same query, unit, label, judge, source and note) adds nothing, so re-running a stage is a
no-op. The *current* label of a pair is the latest adjudicated one (source human or reference, in
file order); a model label is current only while no adjudication exists, so nothing a person
wrote is ever overridden by a model. Two adjudications that disagree are both kept and reported
as a conflict.

Labelling page: one self-contained offline HTML file — shuffled, blind (no system, rank, file
name, caption or unit id; each item carries an opaque pair id whose key stays in
``key.csv`` beside the page), one page image with its question at a time, keys 1/2/3 (or s/p/i)
for the three labels, u or Backspace to undo, a progress bar, a free-text note, export to CSV and
JSON. ``lookalike labels import FILE --run-dir outputs/<run>`` merges an export into the store.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from lookalike.data.schema import fit, resolve_image
from lookalike.eval.metrics import rank
from lookalike.eval.trec import LABEL_GRADES
from lookalike.judging.judges import LABELS, check_labels

STORE_COLUMNS = ["query_id", "unit_id", "question_sha", "label", "judge", "source", "time", "note"]
SOURCES = ("model", "human", "reference")
ADJUDICATORS = ("human", "reference")
POOL_COLUMNS = ["query_id", "unit_id", "systems", "best_rank", "hard_candidate"]


class LabelError(ValueError):
    """A label file or store line cannot be used (named with its file and line)."""


# ----------------------------------------------------------------------------- pool

def pool(runs: Mapping[str, pd.DataFrame], query_ids: Iterable[str], k: int,
         candidates: Mapping[str, Iterable[str]] | None = None) -> pd.DataFrame:
    """Union of each system's top k per question (canonical order: score desc, unit id desc),
    plus any candidates given per question. One row per (query, unit): which systems put it in
    their top k, its best rank there (0 when only a candidate), and whether it is a candidate."""
    wanted = set(query_ids)
    rows: dict[tuple, dict] = {}
    for name in sorted(runs):
        run = runs[name]
        mine = run[run["query_id"].isin(wanted)]
        ranked = rank(mine[["query_id", "unit_id", "score"]]) if len(mine) else pd.DataFrame(columns=["query_id", "unit_id", "rank"])
        for q, u, r in zip(ranked["query_id"], ranked["unit_id"], ranked["rank"]):
            if r > k:
                continue
            row = rows.setdefault((q, u), {"systems": [], "best_rank": int(r), "hard_candidate": False})
            row["systems"].append(name)
            row["best_rank"] = min(row["best_rank"], int(r))
    for q, units in (candidates or {}).items():
        if q not in wanted:
            continue
        for u in units:
            row = rows.setdefault((q, u), {"systems": [], "best_rank": 0, "hard_candidate": True})
            row["hard_candidate"] = True
    out = pd.DataFrame([{"query_id": q, "unit_id": u, "systems": ";".join(r["systems"]), "best_rank": r["best_rank"],
                         "hard_candidate": r["hard_candidate"]} for (q, u), r in rows.items()], columns=POOL_COLUMNS)
    return out.sort_values(["query_id", "unit_id"], kind="mergesort").reset_index(drop=True)


def pool_by_system(pooled: pd.DataFrame, systems: Iterable[str]) -> pd.DataFrame:
    """Per system: pairs it contributed, and pairs only it contributed."""
    lists = pooled["systems"].str.split(";")
    rows = []
    for s in systems:
        mine = lists.apply(lambda xs, s=s: s in xs)
        only = lists.apply(lambda xs, s=s: xs == [s])
        rows.append({"system": s, "pairs": int(mine.sum()), "only_this_system": int(only.sum())})
    return pd.DataFrame(rows, columns=["system", "pairs", "only_this_system"])


# ----------------------------------------------------------------------------- store

def _now() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


class LabelStore:
    """An append-only JSON Lines file of labels (see the module docstring)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.rows: list[dict] = []
        if self.path.is_file():
            for number, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise LabelError(f"{self.path}: line {number} is not JSON ({exc.msg})") from exc
                self.rows.append(_check(row, f"{self.path}: line {number}"))
        self._seen = {_identity(r) for r in self.rows}

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
        return pd.DataFrame(self.rows, columns=STORE_COLUMNS)

    def current(self, question_shas: Mapping[str, str] | None = None) -> pd.DataFrame:
        """One row per (query, unit): the latest adjudicated label, else the latest model label.
        question_shas: query_id -> question_sha of the wording in use; labels given for another
        wording are ignored (they stay in the store). Columns: query_id, unit_id, label, judge,
        source, adjudicated, conflict."""
        df = _for_questions(self.frame(), question_shas)
        cols = ["query_id", "unit_id", "label", "judge", "source", "adjudicated", "conflict"]
        if df.empty:
            return pd.DataFrame({c: pd.Series(dtype=bool if c in ("adjudicated", "conflict") else object) for c in cols})
        df["order"] = np.arange(len(df))
        df["adjudicated"] = df["source"].isin(ADJUDICATORS)
        latest = (df.sort_values(["adjudicated", "order"], kind="mergesort")
                  .groupby(["query_id", "unit_id"], sort=False).tail(1))
        adj = df[df["adjudicated"]]
        conflicts = adj.groupby(["query_id", "unit_id"])["label"].nunique()
        conflicts = set(conflicts[conflicts > 1].index)
        latest = latest.assign(conflict=[(q, u) in conflicts for q, u in zip(latest["query_id"], latest["unit_id"])])
        return latest[cols].sort_values(["query_id", "unit_id"], kind="mergesort").reset_index(drop=True)

    def conflicts(self, question_shas: Mapping[str, str] | None = None) -> pd.DataFrame:
        """Every adjudicated label of the pairs whose adjudications disagree (all kept)."""
        df = _for_questions(self.frame(), question_shas)
        adj = df[df["source"].isin(ADJUDICATORS)]
        n = adj.groupby(["query_id", "unit_id"])["label"].transform("nunique")
        return adj[n > 1].sort_values(["query_id", "unit_id"], kind="mergesort").reset_index(drop=True)


def _identity(row: Mapping) -> tuple:
    return tuple(row[c] for c in ("query_id", "unit_id", "question_sha", "label", "judge", "source", "note"))


def question_sha(text: str) -> str:
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
    return hashlib.sha256(f"{query_id}\0{unit_id}\0{question}".encode("utf-8")).hexdigest()[:12]


def _image_uri(path: Path, width: int) -> str:
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        if im.width > width:
            im = im.resize((width, round(im.height * width / im.width)))
        buf = io.BytesIO()
        im.save(buf, format="JPEG", quality=82, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def labelling_page(pairs: pd.DataFrame, questions: pd.DataFrame, units: pd.DataFrame, base_dir: Path | str,
                   out_dir: Path | str, seed: int, title: str = "lookalike — label pages", width: int = 760) -> Path:
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
            images[u] = (img, _image_uri(resolve_image(paths[u], base_dir), width))
        items.append({"id": pid, "q": str(text[q]), "img": img})
        key.append({"pair_id": pid, "query_id": q, "unit_id": u, "question_sha": question_sha(text[q])})
    pd.DataFrame(key, columns=["pair_id", "query_id", "unit_id", "question_sha"]).sort_values("pair_id").to_csv(
        out_dir / "key.csv", index=False, lineterminator="\n")
    data = {"page": hashlib.sha256("".join(it["id"] for it in items).encode()).hexdigest()[:10], "items": items,
            "images": {k: v for k, v in images.values()}}
    payload = json.dumps(data, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    html = PAGE.replace("__TITLE__", _escape(title)).replace("__DATA__", payload)
    path = out_dir / "label.html"
    path.write_text(html, encoding="utf-8")
    return path


def _escape(s: str) -> str:
    import html

    return html.escape(s, quote=True)


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:900px;padding:1rem;color:#1d2330}
#q{font-size:1.25rem;margin:.6rem 0 .8rem}
#img{max-width:100%;border:1px solid #ccd;display:block}
.bar{height:8px;background:#e6e9f2;border-radius:4px;overflow:hidden;margin:.4rem 0}
.bar div{height:100%;background:#1f4fa3;width:0}
button{font-size:1rem;margin:.3rem .3rem .3rem 0;padding:.4rem .8rem;cursor:pointer}
textarea{width:100%;min-height:2.5rem;font:inherit}
.muted{color:#667;font-size:.9rem} #done{display:none;padding:1rem;background:#eef6ee;border-radius:6px}
kbd{border:1px solid #bbc;border-radius:3px;padding:0 .3rem;font-size:.85rem}
</style></head><body>
<h1>__TITLE__</h1>
<p class="muted">Does the page answer the question? <kbd>1</kbd>/<kbd>s</kbd> sufficient — the page alone answers it;
<kbd>2</kbd>/<kbd>p</kbd> supporting — part of the evidence; <kbd>3</kbd>/<kbd>i</kbd> irrelevant;
<kbd>u</kbd>/<kbd>Backspace</kbd> undo. Your labels stay in this browser until you export them.</p>
<div><span id="progress"></span><div class="bar"><div id="fill"></div></div></div>
<div id="item"><p id="q"></p>
<p><button data-label="sufficient">1 · sufficient</button><button data-label="supporting">2 · supporting</button>
<button data-label="irrelevant">3 · irrelevant</button><button id="undo">undo</button></p>
<label class="muted" for="note">note (optional)</label><textarea id="note"></textarea>
<img id="img" alt="page to judge"></div>
<div id="done">All pages labelled. Export below.</div>
<p><button id="csv">export CSV</button><button id="json">export JSON</button></p>
<script>
const DATA = __DATA__;
const KEY = "lookalike-labels-" + DATA.page;
let done = JSON.parse(localStorage.getItem(KEY) || "[]");
const $ = (id) => document.getElementById(id);
function save() { localStorage.setItem(KEY, JSON.stringify(done)); }
function show() {
  const i = done.length, n = DATA.items.length;
  $("progress").textContent = i + " of " + n + " labelled";
  $("fill").style.width = (n ? 100 * i / n : 100) + "%";
  if (i >= n) { $("item").style.display = "none"; $("done").style.display = "block"; return; }
  $("item").style.display = "block"; $("done").style.display = "none";
  const it = DATA.items[i];
  $("q").textContent = it.q;
  $("img").src = DATA.images[it.img];
  $("note").value = "";
}
function label(l) {
  if (done.length >= DATA.items.length) return;
  const it = DATA.items[done.length];
  done.push({pair_id: it.id, label: l, note: $("note").value, time: new Date().toISOString()});
  save(); show();
}
function undo() { if (done.length) { done.pop(); save(); show(); } }
function download(name, type, text) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], {type: type}));
  a.download = name; document.body.appendChild(a); a.click(); a.remove();
}
function csvCell(s) { s = String(s); return /[",\\n\\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; }
$("csv").onclick = () => download("labels-" + DATA.page + ".csv", "text/csv",
  "pair_id,label,note,time\\n" + done.map(r => [r.pair_id, r.label, r.note, r.time].map(csvCell).join(",")).join("\\n") + "\\n");
$("json").onclick = () => download("labels-" + DATA.page + ".json", "application/json", JSON.stringify(done, null, 1));
document.querySelectorAll("button[data-label]").forEach(b => b.onclick = () => label(b.dataset.label));
$("undo").onclick = undo;
document.addEventListener("keydown", (e) => {
  if (e.target === $("note")) return;
  const k = e.key.toLowerCase();
  if (k === "1" || k === "s") label("sufficient");
  else if (k === "2" || k === "p") label("supporting");
  else if (k === "3" || k === "i") label("irrelevant");
  else if (k === "u" || k === "backspace") { e.preventDefault(); undo(); }
});
show();
</script></body></html>
"""


def pair_sheet(pairs: pd.DataFrame, units: pd.DataFrame, base_dir: Path | str, thumb_width: int = 300):
    """Thumbnails of (query, unit) pairs in a row, each captioned with its unit id and the two
    labels (columns label_model, label_adjudicated)."""
    from PIL import Image, ImageDraw, ImageFont

    paths = units.set_index("unit_id")["image_path"]
    th = int(thumb_width * 9 / 16)
    sheet = Image.new("RGB", (max(1, len(pairs)) * (thumb_width + 8), th + 44), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=13)
    for i, r in enumerate(pairs.itertuples()):
        x = i * (thumb_width + 8)
        with Image.open(resolve_image(paths[r.unit_id], base_dir)) as im:
            sheet.paste(fit(im, thumb_width, th), (x, 0))
        draw.text((x + 2, th + 4), f"{r.query_id} · {r.unit_id}"[:44], fill="black", font=font)
        draw.text((x + 2, th + 22), f"model: {r.label_model}  adjudicated: {r.label_adjudicated}", fill=(160, 30, 30),
                  font=font)
    return sheet


# ----------------------------------------------------------------------------- import

def read_export(path: Path | str) -> pd.DataFrame:
    """A labelling-page export (CSV or JSON) -> pair_id, label, note, time. Errors name the file and row."""
    path = Path(path)
    if not path.is_file():
        raise LabelError(f"{path}: file not found")
    try:
        if path.suffix.lower() == ".json":
            rows = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(rows, list):
                raise LabelError(f"{path}: expected a JSON list of labels")
            df = pd.DataFrame(rows)
        else:
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (json.JSONDecodeError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise LabelError(f"{path}: cannot read it as a labelling export ({exc})") from exc
    for col in ("pair_id", "label"):
        if col not in df.columns:
            raise LabelError(f"{path}: column {col!r} is missing (a labelling-page export has pair_id, label, note, time)")
    for col in ("note", "time"):
        if col not in df.columns:
            df[col] = ""
    check_labels(df["label"], path, LabelError)
    return df[["pair_id", "label", "note", "time"]].fillna("").astype(str)


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


def labels_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lookalike labels", description="The label store.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("import", help="merge a labelling-page export (CSV or JSON) into a run's label store")
    p.add_argument("file")
    p.add_argument("--run-dir", required=True, help="the run folder, e.g. outputs/demo (holds labelling/key.csv "
                                                    "and labels/store.jsonl)")
    p.add_argument("--judge", default="human", help="who labelled (stored as the judge name; default: human)")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    key = run_dir / "labelling" / "key.csv"
    if not key.is_file():
        print(f"lookalike labels: {key} not found — run stage 06 for this run first", flush=True)
        return 2
    try:
        store = LabelStore(run_dir / "labels" / "store.jsonl")
        result = import_export(args.file, key, store, args.judge)
    except LabelError as exc:
        print(f"lookalike labels: {exc}", flush=True)
        return 2
    print(f"added {result['added']} labels ({result['already_held']} already held); "
          f"{len(result['unknown'])} unknown pair ids skipped{': ' + ', '.join(result['unknown'][:10]) if result['unknown'] else ''}; "
          f"{result['conflicting_pairs']} pairs with conflicting adjudications (all kept)")
    return 0
