"""Bring your own documents: a folder of PDFs or of images -> the same units table as the demo.

PDF folder: every ``*.pdf`` under the folder (sorted), rendered page by page with pypdfium2 at
``dpi`` into the run's corpus folder; unit id ``"{doc_id}:{page}"`` with 1-based pages; doc_id is
the file name without its extension, whitespace replaced by ``_`` (unit ids must survive TREC
files, which split on whitespace). Page selection: ``pages`` ("1-3,7": 1-based, inclusive) and
``max_pages`` (a cap per document, 0 = none) — OCR dominates the cost of real filings.

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

import re
from pathlib import Path

import pandas as pd

from lookalike.corpus import Corpus, CorpusError, UNIT_COLUMNS

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp", ".gif")
META_GROUPS = ("entity", "period", "metric", "template_id", "revision", "content_type")
SKIP_COLUMNS = ["source", "row", "unit_id", "problem"]


def doc_id_from(path: Path) -> str:
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


def _admit(path: Path, folder: Path, seen: dict, rx: re.Pattern | None) -> tuple[str, str, dict, str]:
    """(relative path, doc id, metadata from the name, problem or "") for one input file."""
    rel = path.relative_to(folder).as_posix()
    doc_id = doc_id_from(path)
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
               name_pattern: str = "") -> Corpus:
    """Render every PDF in folder into out_dir/images (paths in the table relative to out_dir's parent)."""
    import pypdfium2 as pdfium

    folder, out_dir = Path(folder), Path(out_dir)
    if not folder.is_dir():
        raise CorpusError(f"{folder}: PDF folder not found")
    wanted = parse_pages(pages)
    rx = _compile(name_pattern)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    units, skipped, seen = [], [], {}
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() == ".pdf" and p.is_file())
    if not files:
        raise CorpusError(f"{folder}: no .pdf files")
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
            for p in todo:
                target = out_dir / "images" / f"{doc_id}_p{p:04d}.png"
                try:
                    if not target.is_file():
                        page = pdf[p - 1]
                        image = page.render(scale=dpi / 72).to_pil().convert("RGB")
                        image.save(target, format="PNG", optimize=False)
                except Exception as exc:  # noqa: BLE001 - a page pdfium cannot render is skipped, not fatal
                    skipped.append(_skip(rel, p, f"{doc_id}:{p}", f"page {p} failed to render: {exc}"))
                    continue
                units.append(_unit(doc_id, p, (Path(out_dir.name) / "images" / target.name).as_posix(), meta, path.name))
        finally:
            pdf.close()
    return Corpus(units=pd.DataFrame(units, columns=UNIT_COLUMNS), skipped=pd.DataFrame(skipped, columns=SKIP_COLUMNS))


def image_folder(folder: Path | str, name_pattern: str = "", max_pixels: int = 40_000_000) -> Corpus:
    """One unit per image file, used in place (absolute image paths)."""
    from PIL import Image

    folder = Path(folder)
    if not folder.is_dir():
        raise CorpusError(f"{folder}: image folder not found")
    rx = _compile(name_pattern)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not files:
        raise CorpusError(f"{folder}: no image files ({', '.join(IMAGE_SUFFIXES)})")
    units, skipped, seen = [], [], {}
    for path in files:
        rel, doc_id, meta, problem = _admit(path, folder, seen, rx)
        if problem:
            skipped.append(_skip(rel, "", f"{doc_id}:1", problem))
            continue
        try:
            with Image.open(path) as im:
                w, h = im.size
                if w * h > max_pixels:
                    skipped.append(_skip(rel, "", f"{doc_id}:1", f"image is {w}x{h} = {w * h} pixels, over the limit "
                                                                  f"of {max_pixels} (corpus.max_pixels)"))
                    continue
                im.verify()
        except Exception as exc:  # noqa: BLE001 - PIL raises many types for broken files
            skipped.append(_skip(rel, "", f"{doc_id}:1", f"unreadable image: {exc}"))
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
