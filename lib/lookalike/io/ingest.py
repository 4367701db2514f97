"""Bring your own documents: a folder of PDFs or of images -> the same units table as the demo.

PDF folder: every ``*.pdf`` under the folder (sorted), rendered page by page with pypdfium2 at
``dpi`` into the run's corpus folder; unit id ``"{doc_id}:{page}"`` with 1-based pages; doc_id is
the file name without its extension, whitespace replaced by ``_`` (unit ids must survive TREC
files, which split on whitespace). Page selection: ``pages`` ("1-3,7": 1-based, inclusive) and
``max_pages`` (a cap per document, 0 = none). Each page's own text (its text layer) is kept
beside its render when it is what a reader sees (``io.text_layer`` states the rules), so stage 02
reads it instead of OCR-ing a born-digital page, and the reason is kept when it is not.

Image folder: every image file (png, jpg, jpeg, tif, tiff, webp, bmp, gif), one unit per file,
doc_id from the file name, page 1, the image used in place (absolute paths, as for manifests).

Metadata from file names: ``name_pattern`` is a regular expression with named groups among
entity, period, metric, template_id, revision, content_type — e.g.
``(?P<period>\\d{4} Q\\d) (?P<entity>[A-Z]+)`` for "2023 Q1 AAPL.pdf".

Bad input never loses work: a corrupt, encrypted or zero-page PDF, a page that fails to render,
an unreadable image or one over ``max_pixels``, a duplicate doc id or a name the pattern does not
match are skipped, each with the file, the page when there is one, and the reason, in the
``skipped`` table; everything else is kept.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pandas as pd

from lookalike import progress as bars
from lookalike.data.schema import CONTENT_TYPES, QUESTION_COLUMNS, UNIT_COLUMNS, Corpus, CorpusError, read_table
from lookalike.eval import trec
from lookalike.io import text_layer

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif")
META_GROUPS = ("entity", "period", "metric", "template_id", "revision", "content_type")
SKIP_COLUMNS = ["source", "row", "unit_id", "problem"]


def doc_id_from(path: Path) -> str:
    """A document id from a file name: its stem with runs of whitespace as underscores."""
    return re.sub(r"\s+", "_", path.stem.strip())


def parse_pages(spec: str) -> set[int] | None:
    """'1-3,7' -> {1, 2, 3, 7} (1-based); '' -> None (all pages)."""
    spec = str(spec or "").strip()
    if not spec:
        return None
    out: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or int(m.group(1)) < 1 or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            raise CorpusError(f"corpus.pages: {part!r} is not a page or a range like 2-5 (pages are 1-based)")
        out.update(range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1))
    return out


def _metadata(stem: str, pattern: re.Pattern | None) -> dict | None:
    if pattern is None:
        return {}
    m = pattern.search(stem)
    if not m:
        return None
    return {k: v for k, v in m.groupdict().items() if k in META_GROUPS and v is not None}


def _files(folder: Path, suffixes, what: str, none: str) -> list[Path]:
    """Every file below folder with one of the suffixes (any case), sorted; a missing folder or
    none found is an error naming the folder."""
    if not folder.is_dir():
        raise CorpusError(f"{folder}: {what} not found")
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in suffixes and p.is_file())
    if not files:
        raise CorpusError(f"{folder}: {none}")
    return files


def image_problem(path: Path, max_pixels: int) -> str:
    """What keeps an image file from being a unit, or "": over ``max_pixels`` (checked from the
    header, before any pixel is decoded), or not decodable. Every pixel is decoded once here:
    ``Image.verify()`` reads no pixel data, so a PNG with a broken data stream or a truncated JPEG
    passed it and failed later, in a stage, with no file named."""
    from PIL import Image

    try:
        with Image.open(path) as im:
            w, h = im.size
            if w * h > max_pixels:
                return f"image is {w}x{h} = {w * h} pixels, over the limit of {max_pixels} (corpus.max_pixels)"
            im.load()
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken files
        return f"not a readable image ({type(exc).__name__}: {exc})"
    return ""


def leaves_root(path: Path, root: Path) -> bool:
    """Whether path, symlinks followed, lies outside root (a link out of the corpus is refused
    like a manifest path that leaves it)."""
    return not path.resolve().is_relative_to(root.resolve())


def _admit(path: Path, folder: Path, seen: dict, rx: re.Pattern | None) -> tuple[str, str, dict, str]:
    """(relative path, doc id, metadata from the name, problem or "") for one input file."""
    rel = path.relative_to(folder).as_posix()
    doc_id = doc_id_from(path)
    if leaves_root(path, folder):
        return rel, doc_id, {}, f"a symlink to {path.resolve()}, outside the corpus root {folder}"
    if doc_id in seen:
        return rel, doc_id, {}, f"duplicate doc id {doc_id!r} (also {seen[doc_id]})"
    meta = _metadata(path.stem, rx)
    if meta is None:
        return rel, doc_id, {}, f"file name does not match corpus.name_pattern {rx.pattern!r}"
    return rel, doc_id, meta, ""


def _unit(doc_id: str, page: int, image_path: str, meta: dict, filename: str) -> dict:
    row = dict.fromkeys(UNIT_COLUMNS, "")
    row.update(unit_id=f"{doc_id}:{page}", doc_id=doc_id, page=page, image_path=image_path, revision=1,
               filename=filename)
    row.update(meta)
    row["revision"] = int(row["revision"] or 1)
    return row


def _compile(pattern: str) -> re.Pattern | None:
    if not pattern:
        return None
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise CorpusError(f"corpus.name_pattern {pattern!r} is not a regular expression: {exc}") from exc
    unknown = set(rx.groupindex) - set(META_GROUPS)
    if unknown:
        raise CorpusError(f"corpus.name_pattern names groups {sorted(unknown)}; allowed: {', '.join(META_GROUPS)}")
    return rx


def pdf_folder(folder: Path | str, out_dir: Path | str, dpi: int = 110, pages: str = "", max_pages: int = 0,
               name_pattern: str = "", render: bool = True, max_pixels: int = 40_000_000) -> Corpus:
    """Render every PDF in folder into out_dir/images (paths in the table relative to out_dir's parent).
    render=False lists the same units (ids, pages, metadata) without rendering a page
    (``lookalike check``); their image paths name the files a render would write. A page whose
    render at ``dpi`` would exceed ``max_pixels`` is skipped and named (its size is read from the
    page box, so ``check`` names it too, and no render ever allocates it)."""
    import pypdfium2 as pdfium

    folder, out_dir = Path(folder), Path(out_dir)
    wanted = parse_pages(pages)
    rx = _compile(name_pattern)
    if render:
        (out_dir / "images").mkdir(parents=True, exist_ok=True)
    units, skipped, seen = [], [], {}
    files = _files(folder, (".pdf",), "PDF folder", "no .pdf files")
    for path in files:
        rel, doc_id, meta, problem = _admit(path, folder, seen, rx)
        if problem:
            skipped.append(_skip(rel, "", f"{doc_id}:*", problem))
            continue
        try:
            pdf = pdfium.PdfDocument(str(path))
        except pdfium.PdfiumError as exc:
            reason = str(exc)
            if "password" in reason.lower():
                problem = f"PDF is encrypted (a password is needed): {reason}"
            elif _empty_page_tree(path):
                problem = "PDF has zero pages (its page tree is empty)"
            else:
                problem = f"PDF is unreadable or corrupt: {reason}"
            skipped.append(_skip(rel, "", f"{doc_id}:*", problem))
            continue
        try:
            n = len(pdf)
            if n == 0:
                skipped.append(_skip(rel, "", f"{doc_id}:*", "PDF has zero pages"))
                continue
            seen[doc_id] = rel
            todo = [p for p in range(1, n + 1) if wanted is None or p in wanted]
            if max_pages:
                todo = todo[:max_pages]
            # a render is named by the PDF's content and the dpi, so a changed file or dpi never reuses an
            # old image, and an unchanged one (a rerun, every `lookalike leak-check`) is not rendered again
            key = f"{hashlib.sha256(path.read_bytes()).hexdigest()[:10]}-{dpi}dpi"
            # a long document draws a bar (render, text layer and its checks: about 50 ms a page)
            for p in bars.bar(todo, desc=f"{doc_id}: pages" if render else f"{doc_id}: listing", unit="page"):
                target = out_dir / "images" / f"{doc_id}_p{p:04d}_{key}.png"
                try:
                    w_pt, h_pt = pdf[p - 1].get_size()
                    pixels = round(w_pt * dpi / 72) * round(h_pt * dpi / 72)
                except Exception as exc:  # noqa: BLE001 - a page pdfium cannot open is skipped, not fatal
                    skipped.append(_skip(rel, p, f"{doc_id}:{p}", f"page {p} cannot be read: {exc}"))
                    continue
                if pixels > max_pixels:
                    skipped.append(_skip(rel, p, f"{doc_id}:{p}", (
                        f"page {p} is {w_pt / 72:.0f} x {h_pt / 72:.0f} inches: {pixels} pixels at {dpi} dpi, over "
                        f"the limit of {max_pixels} (corpus.max_pixels); lower corpus.dpi or raise the limit")))
                    continue
                image = None
                try:
                    if render and not target.is_file():
                        page = pdf[p - 1]
                        image = page.render(scale=dpi / 72).to_pil().convert("RGB")
                        # zlib level 1: a rendered page is mostly flat background, so the fastest level is
                        # also the smaller file here (17 ms and 155 KiB a 10-Q page against 27 ms and 178 KiB)
                        image.save(target, format="PNG", optimize=False, compress_level=1)
                except Exception as exc:  # noqa: BLE001 - a page pdfium cannot render is skipped, not fatal
                    skipped.append(_skip(rel, p, f"{doc_id}:{p}", f"page {p} failed to render: {exc}"))
                    continue
                if render:
                    text_layer.keep(pdf[p - 1], target, w_pt, h_pt, image)
                units.append(_unit(doc_id, p, (Path(out_dir.name) / "images" / target.name).as_posix(), meta, path.name))
        finally:
            pdf.close()
    return Corpus(units=pd.DataFrame(units, columns=UNIT_COLUMNS), skipped=pd.DataFrame(skipped, columns=SKIP_COLUMNS))


def image_folder(folder: Path | str, name_pattern: str = "", max_pixels: int = 40_000_000) -> Corpus:
    """One unit per image file, used in place (absolute image paths)."""
    folder = Path(folder)
    rx = _compile(name_pattern)
    files = _files(folder, IMAGE_SUFFIXES, "image folder", f"no image files ({', '.join(IMAGE_SUFFIXES)})")
    units, skipped, seen = [], [], {}
    for path in files:
        rel, doc_id, meta, problem = _admit(path, folder, seen, rx)
        if problem:
            skipped.append(_skip(rel, "", f"{doc_id}:1", problem))
            continue
        problem = image_problem(path, max_pixels)
        if problem:
            skipped.append(_skip(rel, "", f"{doc_id}:1", problem))
            continue
        seen[doc_id] = rel
        units.append(_unit(doc_id, 1, str(path.resolve()), meta, path.name))
    return Corpus(units=pd.DataFrame(units, columns=UNIT_COLUMNS), skipped=pd.DataFrame(skipped, columns=SKIP_COLUMNS))


def _empty_page_tree(path: Path) -> bool:
    """pdfium refuses a PDF without pages as malformed; tell that case apart by its page tree."""
    try:
        data = path.read_bytes()[:1_000_000]
    except OSError:
        return False
    return (re.search(rb"/Type\s*/Pages\b[^>]*?/Count\s+0\b", data) is not None
            and re.search(rb"/Type\s*/Page\b(?!s)", data) is None)


def _skip(source: str, row, unit_id: str, problem: str) -> dict:
    return {"source": source, "row": row, "unit_id": unit_id, "problem": problem}


# ----------------------------------------------------------------------------- ViDoRe / BEIR

def _image_bytes(value) -> bytes | None:
    """The bytes of an embedded image cell: a dict/struct with 'bytes', raw bytes, or None."""
    if isinstance(value, dict):
        value = value.get("bytes")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return None


def _save_image(data: bytes, target: Path, max_pixels: int) -> str:
    """Write an embedded image as PNG; returns a problem or ''."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            if im.size[0] * im.size[1] > max_pixels:
                return f"image is {im.size[0]}x{im.size[1]}, over the limit of {max_pixels} pixels (corpus.max_pixels)"
            im.convert("RGB").save(target, format="PNG", optimize=False)
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken bytes
        return f"unreadable embedded image: {exc}"
    return ""


def _cell(value) -> str:
    """A table cell as text: '' for None and NaN."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value)


def _safe_id(value: str) -> str:
    return re.sub(r"\s+", "_", str(value).strip())


def vidore_parquet(path: Path | str, out_dir: Path | str, max_pixels: int = 40_000_000) -> Corpus:
    """A ViDoRe (v1) / MTEB-style parquet file of (query, image) rows read from local disk.

    Columns: ``image`` (embedded: a struct with bytes), ``query`` (may be empty: an image without a
    question), optional ``image_filename`` (the unit's name; else the row), ``page``, ``answer``.
    Each distinct image becomes a unit ``"{name}:{page}"``; each row with a query a question
    (``v{row:05d}``) whose evidence is that unit, relevance 1 in ``qrels``. Pages: when any row has
    page 0 the file counts from 0 and every page is shifted by one (page 0 and page 1 of a file stay
    two units); a row without a page is page 1 (from 0: page 0).
    """
    path, out_dir = Path(path), Path(out_dir)
    if not path.is_file():
        raise CorpusError(f"{path}: parquet file not found")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise CorpusError(f"{path}: not a readable parquet file ({exc})") from exc
    if "image" not in df.columns:
        raise CorpusError(f"{path}: no 'image' column (columns: {', '.join(map(str, df.columns))})")
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    units, questions, qrels, skipped, by_name = [], [], [], [], {}
    records = df.to_dict("records")
    pages = [int(r["page"]) if isinstance(r.get("page"), (int, float)) and not pd.isna(r.get("page")) else None
             for r in records]
    shift = 1 if any(p == 0 for p in pages) else 0          # a file with a page 0 counts from 0
    for i, rec in enumerate(records):
        name = _safe_id(Path(_cell(rec.get("image_filename")) or f"row{i:05d}").stem) or f"row{i:05d}"
        page = (pages[i] if pages[i] is not None else 1 - shift) + shift
        if page < 1:
            skipped.append(_skip(path.name, i + 1, f"{name}:{pages[i]}", f"page {pages[i]} is not a page number"))
            continue
        uid = f"{name}:{page}"
        if uid not in by_name:
            data = _image_bytes(rec.get("image"))
            target = out_dir / "images" / f"{name}_p{page:04d}.png"
            problem = "no embedded image bytes" if data is None else _save_image(data, target, max_pixels)
            if problem:
                skipped.append(_skip(path.name, i + 1, uid, problem))
                by_name[uid] = None
                continue
            by_name[uid] = uid
            units.append(_unit(name, page, (Path(out_dir.name) / "images" / target.name).as_posix(), {},
                               _cell(rec.get("image_filename"))))
        if by_name[uid] is None:
            continue
        query = _cell(rec.get("query")).strip()
        if query:
            qid = f"v{i:05d}"
            questions.append({"query_id": qid, "text": query, "answer": _cell(rec.get("answer")),
                              "evidence_structure": "page-single", "register": "question", "qualified": False,
                              "qualifiers": "", "evidence_unit_ids": uid})
            qrels.append((qid, uid, 1))
    return Corpus(units=pd.DataFrame(units, columns=UNIT_COLUMNS),
                  questions=pd.DataFrame(questions, columns=QUESTION_COLUMNS),
                  skipped=pd.DataFrame(skipped, columns=SKIP_COLUMNS),
                  qrels=pd.DataFrame(qrels, columns=["query_id", "unit_id", "relevance"]))


def beir_folder(folder: Path | str, out_dir: Path | str, split: str = "test", max_pixels: int = 40_000_000) -> Corpus:
    """A BEIR-style folder read from local disk: corpus, queries and qrels.

    corpus: ``corpus.parquet`` with ``corpus-id`` (or ``_id``) and an embedded ``image`` (ViDoRe v2 /
    MTEB layout), or ``corpus.jsonl`` with ``_id`` and ``image_path`` (relative to the folder).
    queries: ``queries.parquet`` / ``queries.jsonl`` with ``query-id``/``_id`` and ``query``/``text``.
    qrels: ``qrels.parquet`` or ``qrels/<split>.tsv`` with ``query-id``, ``corpus-id``, ``score``.
    Corpus ids become units ``"{id}:1"`` (an id that already ends in ``:<page>`` keeps it).
    Unknown ids in qrels are skipped and reported.
    """
    folder, out_dir = Path(folder), Path(out_dir)
    if not folder.is_dir():
        raise CorpusError(f"{folder}: BEIR folder not found")

    def table(stem: str) -> pd.DataFrame:
        for suffix in (".parquet", ".jsonl"):
            p = folder / f"{stem}{suffix}"
            if p.is_file():
                return pd.read_parquet(p) if suffix == ".parquet" else pd.read_json(p, lines=True, dtype=False)
        raise CorpusError(f"{folder}: neither {stem}.parquet nor {stem}.jsonl")

    def col(df: pd.DataFrame, names: tuple, what: str) -> str:
        for n in names:
            if n in df.columns:
                return n
        raise CorpusError(f"{folder}: {what} needs one of the columns {', '.join(names)} (has {', '.join(map(str, df.columns))})")

    corpus = table("corpus")
    cid = col(corpus, ("corpus-id", "_id", "id"), "corpus")
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    units, skipped, unit_of = [], [], {}
    for i, rec in enumerate(corpus.to_dict("records")):
        raw_id = _safe_id(rec[cid])
        doc, sep, page = raw_id.rpartition(":")
        doc, page = (doc, int(page)) if sep and page.isdigit() and int(page) >= 1 else (raw_id, 1)
        uid = f"{doc}:{page}"
        if uid in unit_of.values():
            skipped.append(_skip("corpus", i + 1, uid, f"duplicate corpus id {rec[cid]!r}"))
            continue
        if "image" in corpus.columns:
            data = _image_bytes(rec["image"])
            target = out_dir / "images" / f"{doc}_p{page:04d}.png"
            problem = "no embedded image bytes" if data is None else _save_image(data, target, max_pixels)
            image_path = (Path(out_dir.name) / "images" / target.name).as_posix()
        elif "image_path" in corpus.columns:
            img = (folder / str(rec["image_path"])).resolve()
            problem = ("" if not leaves_root(img, folder) and img.is_file()
                       else f"image_path {rec['image_path']!r} is missing or leaves the folder")
            problem = problem or image_problem(img, max_pixels)
            image_path = str(img)
        else:
            raise CorpusError(f"{folder}: the corpus has no 'image' (embedded) or 'image_path' column")
        if problem:
            skipped.append(_skip("corpus", i + 1, uid, problem))
            continue
        unit_of[str(rec[cid])] = uid
        units.append(_unit(doc, page, image_path, {}, str(rec[cid])))
    queries = table("queries")
    qid_col, text_col = col(queries, ("query-id", "_id", "id"), "queries"), col(queries, ("query", "text"), "queries")
    qpath = folder / "qrels.parquet"
    if qpath.is_file():
        qr = pd.read_parquet(qpath)
    elif (folder / "qrels" / f"{split}.tsv").is_file():
        qr = pd.read_csv(folder / "qrels" / f"{split}.tsv", sep="\t", dtype=str, keep_default_na=False)
    else:
        raise CorpusError(f"{folder}: neither qrels.parquet nor qrels/{split}.tsv")
    q_c, c_c = col(qr, ("query-id", "query_id"), "qrels"), col(qr, ("corpus-id", "corpus_id"), "qrels")
    s_c = col(qr, ("score", "relevance"), "qrels")
    known_q = {str(x) for x in queries[qid_col]}
    rows = []
    qrels_name = "qrels.parquet" if qpath.is_file() else f"qrels/{split}.tsv"
    for i, r in enumerate(qr.to_dict("records"), start=1):
        q, c = str(r[q_c]), str(r[c_c])
        score = str(r[s_c]).strip()
        if not re.fullmatch(r"-?\d+(\.0*)?", score) or not trec.INT64_MIN <= int(score.split(".")[0]) <= trec.INT64_MAX:
            raise CorpusError(f"{folder / qrels_name}: row {i} (query {q!r}, corpus id {c!r}): column {s_c!r} is "
                              f"{r[s_c]!r}; expected an integer relevance grade (64-bit)")
        if q not in known_q:
            skipped.append(_skip("qrels", i, c, f"unknown query {q!r}"))
        elif c not in unit_of:
            skipped.append(_skip("qrels", i, c, f"unknown or skipped corpus id {c!r}"))
        else:
            rows.append((_safe_id(q), unit_of[c], int(score.split(".")[0])))
    qrels = pd.DataFrame(rows, columns=["query_id", "unit_id", "relevance"])
    evidence = qrels[qrels["relevance"] > 0].groupby("query_id")["unit_id"].apply(lambda s: ";".join(sorted(s)))
    qs = pd.DataFrame({"query_id": [_safe_id(x) for x in queries[qid_col]], "text": queries[text_col].astype(str)})
    qs = qs.assign(answer="", evidence_structure="", register="question", qualified=False, qualifiers="",
                   # a query with no relevant unit has no evidence: "" (map gives NaN; with no evidence
                   # at all the column would be float, which pandas 4 will not fill with a string)
                   evidence_unit_ids=[evidence.get(q, "") for q in qs["query_id"]])
    return Corpus(units=pd.DataFrame(units, columns=UNIT_COLUMNS), questions=qs[QUESTION_COLUMNS],
                  skipped=pd.DataFrame(skipped, columns=SKIP_COLUMNS), qrels=qrels)


# ----------------------------------------------------------------------------- metadata manifest

META_COLUMNS = ("template_id", "entity", "metric", "period", "revision", "content_type", "entity_kind",
                "alt_text", "caption")


def apply_metadata(units: pd.DataFrame, path: Path | str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Add metadata to rendered or found units from a manifest (CSV or parquet) keyed by
    ``unit_id`` (one page) or ``doc_id`` (every page of the document; a page row wins over its
    document's row). Columns among META_COLUMNS are copied; rows naming no unit or document of the
    corpus, and bad revisions or content types, are skipped and reported."""
    path = Path(path)
    raw = read_table(path).fillna("")
    raw.columns = [str(c).strip() for c in raw.columns]
    if "unit_id" not in raw.columns and "doc_id" not in raw.columns:
        raise CorpusError(f"{path}: a metadata manifest needs a unit_id or a doc_id column")
    cols = [c for c in META_COLUMNS if c in raw.columns]
    if not cols:
        raise CorpusError(f"{path}: no metadata columns (any of {', '.join(META_COLUMNS)})")
    out = units.copy()
    by_unit = {u: i for i, u in enumerate(out["unit_id"])}
    by_doc: dict[str, list[int]] = {}
    for i, d in enumerate(out["doc_id"]):
        by_doc.setdefault(d, []).append(i)
    skipped, page_rows, doc_rows = [], [], []
    for n, rec in enumerate(raw.to_dict("records"), start=1):
        rec = {k: str(v).strip() for k, v in rec.items()}
        uid, did = rec.get("unit_id", ""), re.sub(r"\s+", "_", rec.get("doc_id", ""))
        problem = ""
        if rec.get("revision") and not rec["revision"].isdigit():
            problem = f"revision {rec['revision']!r} is not a positive integer"
        elif rec.get("content_type") and rec["content_type"] not in CONTENT_TYPES:
            problem = f"unknown content_type {rec['content_type']!r} (expected one of {', '.join(CONTENT_TYPES)})"
        elif uid and uid not in by_unit:
            problem = f"unit_id {uid!r} is not a unit of this corpus"
        elif not uid and did not in by_doc:
            problem = f"doc_id {did!r} is not a document of this corpus"
        if problem:
            skipped.append(_skip(path.name, n, uid or did, problem))
            continue
        (page_rows if uid else doc_rows).append(([by_unit[uid]] if uid else by_doc[did], rec))
    for rows, rec in doc_rows + page_rows:              # page rows last: they win
        for c in cols:
            if rec.get(c, "") != "":
                out.loc[out.index[rows], c] = int(rec[c]) if c == "revision" else rec[c]
    return out, pd.DataFrame(skipped, columns=SKIP_COLUMNS)
