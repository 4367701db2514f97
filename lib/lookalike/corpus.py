"""Corpus units: the table every stage reads, its validation, strata, sampling and montage.

A unit is one retrievable item (a page image), id ``"{doc_id}:{page}"`` with 1-based pages.
The units table (``tables/units.csv``) has one row per unit and the columns of UNIT_COLUMNS;
a corpus that lacks a field leaves it empty.

Manifest format (bring-your-own corpus, CSV or parquet), one row per unit:
  required  image_path (relative to the corpus root; may not leave it), and either unit_id or
            doc_id + page (1-based)
  optional  template_id, entity, metric, period, revision (integer, default 1),
            content_type (one of CONTENT_TYPES), entity_kind, filename, alt_text, caption
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFont

UNIT_COLUMNS = [
    "unit_id", "doc_id", "page", "image_path", "template_id", "entity", "metric", "period", "revision",
    # stratum columns
    "content_type", "entity_kind",
    # caption fields: what an asset database says about the image (never shown to pixel encoders or judges)
    "filename", "alt_text", "caption",
]
STRATUM_COLUMNS = ["content_type", "entity_kind"]
CAPTION_COLUMNS = ["filename", "alt_text", "caption"]
CONTENT_TYPES = ("chart", "table", "text", "graphic", "photo", "other")
FACT_COLUMNS = ["unit_id", "entity", "metric", "period", "member", "value", "unit", "revision"]
QUESTION_COLUMNS = ["query_id", "text", "answer", "evidence_structure", "register", "qualified", "qualifiers",
                    "evidence_unit_ids"]
# The demo's answer key: one row per fact a question needs. op: how the facts make the answer
# (argmax_value, argmax, value, diff, sum, ratio, greater, higher_of); member: a member name,
# "total", or "*segment" / "*region" (all members of that kind); template_id: the page kind the
# question names ("" when it names none).
ANSWER_KEY_COLUMNS = ["query_id", "op", "need", "template_id", "entity", "metric", "period", "member", "revision"]
EVIDENCE_STRUCTURES = ("page-single", "page-multi", "doc-adjacent", "doc-near", "doc-far", "cross-doc")
REGISTERS = ("shown", "style", "question")


class CorpusError(ValueError):
    """A corpus file cannot be used at all (missing, unreadable, required column absent)."""


@dataclass
class Corpus:
    units: pd.DataFrame
    questions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=QUESTION_COLUMNS))
    facts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FACT_COLUMNS))
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["source", "row", "unit_id", "problem"]))
    answer_key: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ANSWER_KEY_COLUMNS))
    qrels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["query_id", "unit_id", "relevance"]))


def read_required_csv(path: Path | str, columns, what: str, error: type[Exception] = CorpusError,
                      hint: str | None = None) -> pd.DataFrame:
    """A CSV read as text (empty cells stay ''), with its required columns. Errors name the file:
    '{what} not found', or the missing column followed by hint (or, when hint is None, nothing)."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {what} not found")
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in columns:
        if col not in df.columns:
            raise error(f"{path}: column {col!r} is missing" + (f" ({hint.format(columns=', '.join(df.columns))})"
                                                              if hint else ""))
    return df


def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise CorpusError(f"{path}: manifest not found")
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save the manifest as UTF-8") from exc
    except Exception as exc:  # pandas/pyarrow raise many types for unreadable files
        raise CorpusError(f"{path}: cannot read the manifest: {exc}") from exc


def read_manifest(path: Path | str, root: Path | str | None = None, strict: bool = False) -> Corpus:
    """Units from a manifest CSV/parquet; bad rows are skipped and listed (or raise when strict).

    Each problem names the manifest, the 1-based data row (header is row 0), the unit id and what
    was expected. Image paths are resolved against root (default: the manifest's folder) and may
    not escape it.
    """
    path = Path(path)
    root = Path(root) if root else path.parent
    raw = _read_table(path).fillna("")
    raw.columns = [str(c).strip() for c in raw.columns]
    if "image_path" not in raw.columns:
        raise CorpusError(f"{path}: required column 'image_path' is missing (columns: {', '.join(raw.columns)})")
    if "unit_id" not in raw.columns and not {"doc_id", "page"} <= set(raw.columns):
        raise CorpusError(f"{path}: needs a 'unit_id' column or both 'doc_id' and 'page'")
    root_resolved = root.resolve()
    rows, skipped, seen = [], [], {}
    for i, rec in enumerate(raw.to_dict("records"), start=1):
        rec = {k: (str(v).strip() if v is not None else "") for k, v in rec.items()}
        uid = rec.get("unit_id", "")
        doc_id, page = rec.get("doc_id", ""), rec.get("page", "")
        if not uid and doc_id and page:
            uid = f"{doc_id}:{page}"
        if uid and not doc_id:
            doc_id, _, page = uid.rpartition(":") if ":" in uid else (uid, "", "1")
        problem = None
        if not uid:
            problem = "empty unit_id (expected 'doc_id:page' or doc_id and page columns)"
        elif not str(page).isdigit() or int(page) < 1:
            problem = f"page {page!r} is not a 1-based page number"
        elif uid in seen:
            problem = f"duplicate unit_id (first seen on row {seen[uid]})"
        elif rec.get("content_type") and rec["content_type"] not in CONTENT_TYPES:
            problem = f"unknown content_type {rec['content_type']!r} (expected one of {', '.join(CONTENT_TYPES)})"
        elif rec.get("revision") and not rec["revision"].isdigit():
            problem = f"revision {rec['revision']!r} is not a positive integer"
        else:
            img = (root / rec["image_path"]).resolve()
            if not rec["image_path"]:
                problem = "empty image_path"
            elif not img.is_relative_to(root_resolved):
                problem = f"image_path {rec['image_path']!r} leaves the corpus root {root}"
            elif not img.is_file():
                problem = f"image {rec['image_path']!r} not found under {root}"
            else:
                try:
                    with Image.open(img) as im:
                        im.verify()
                except Exception as exc:
                    problem = f"image {rec['image_path']!r} is not a readable image ({type(exc).__name__})"
        if problem:
            msg = f"{path}: row {i} (unit_id {uid!r}): {problem}"
            if strict:
                raise CorpusError(msg)
            skipped.append(dict(source=str(path), row=i, unit_id=uid, problem=problem))
            continue
        seen[uid] = i
        row = {c: rec.get(c, "") for c in UNIT_COLUMNS}
        row.update(unit_id=uid, doc_id=doc_id, page=int(page), image_path=str((root / rec["image_path"]).resolve()),
                   revision=int(rec.get("revision") or 1))
        rows.append(row)
    units = pd.DataFrame(rows, columns=UNIT_COLUMNS)
    units = units.astype({"page": "int64", "revision": "int64"})
    return Corpus(units=units, skipped=pd.DataFrame(skipped, columns=["source", "row", "unit_id", "problem"]))


def load(source: str, seed: int, out_dir: Path | str, demo_size: str = "ci", manifest: str = "",
         root: str = "", strict: bool = False, dpi: int = 110, pages: str = "", max_pages: int = 0,
         name_pattern: str = "", max_pixels: int = 40_000_000) -> Corpus:
    """The run's corpus: the built-in demo rendered into out_dir, a manifest (see the module
    docstring), a folder of PDFs rendered into out_dir, or a folder of images (lookalike.ingest)."""
    if source == "demo":
        from lookalike import demo

        return demo.generate(demo_size, seed, out_dir)
    if source == "manifest":
        if not manifest:
            raise CorpusError("corpus.source is manifest but corpus.manifest is empty; give the manifest's path")
        return read_manifest(Path(manifest), Path(root) if root else None, strict=strict)
    if source in ("pdf", "images", "beir", "vidore"):
        from lookalike import ingest

        if not root:
            raise CorpusError(f"corpus.source is {source} but corpus.root is empty; give the folder (or file)")
        if source == "pdf":
            loaded = ingest.pdf_folder(root, out_dir, dpi=dpi, pages=pages, max_pages=max_pages, name_pattern=name_pattern)
        elif source == "beir":
            loaded = ingest.beir_folder(root, out_dir, max_pixels=max_pixels)
        elif source == "vidore":
            loaded = ingest.vidore_parquet(root, out_dir, max_pixels=max_pixels)
        else:
            loaded = ingest.image_folder(root, name_pattern=name_pattern, max_pixels=max_pixels)
        if manifest:                                     # metadata for the rendered / found units
            loaded.units, extra = ingest.apply_metadata(loaded.units, manifest)
            loaded.skipped = pd.concat([loaded.skipped, extra], ignore_index=True)
        return loaded
    raise CorpusError(f"corpus.source must be 'demo', 'manifest', 'pdf', 'images', 'beir' or 'vidore', got {source!r}")


def strata_counts(units: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """Units per stratum (one row per combination of the stratum columns), sorted by the columns."""
    columns = columns or ["content_type", "template_id"]
    return (units.groupby(columns, dropna=False).size().rename("units").reset_index()
            .sort_values(columns, kind="mergesort").reset_index(drop=True))


def stratified_sample(units: pd.DataFrame, per_stratum: int, rng: np.random.Generator,
                      column: str = "content_type") -> pd.DataFrame:
    """Up to per_stratum units drawn without replacement from each value of column, sorted by unit_id."""
    picks = []
    for _, group in units.sort_values("unit_id").groupby(column, sort=True):
        n = min(per_stratum, len(group))
        picks.append(group.iloc[np.sort(rng.choice(len(group), size=n, replace=False))])
    return pd.concat(picks).sort_values("unit_id", kind="mergesort").reset_index(drop=True)


def montage(units: pd.DataFrame, base_dir: Path, per_template: int = 3, thumb_width: int = 240) -> Image.Image:
    """One row per template_id with up to per_template example thumbnails, labelled."""
    templates = sorted(units["template_id"].unique())
    th = int(thumb_width * 9 / 16)
    label_w = 150
    sheet = Image.new("RGB", (label_w + per_template * (thumb_width + 8), len(templates) * (th + 8)), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=15)
    for r, tpl in enumerate(templates):
        y = r * (th + 8)
        draw.text((6, y + th // 2 - 8), str(tpl)[:18], fill="black", font=font)
        examples = units[units["template_id"] == tpl].sort_values("unit_id").head(per_template)
        for c, rec in enumerate(examples.itertuples()):
            with Image.open(resolve_image(rec.image_path, base_dir)) as im:
                thumb = fit(im, thumb_width, th)
            sheet.paste(thumb, (label_w + c * (thumb_width + 8), y))
    return sheet


def fit(im: Image.Image, width: int, height: int) -> Image.Image:
    """The image scaled to fit a width x height box, aspect kept, centred on white (portrait PDF
    pages and landscape slides side by side without distortion)."""
    im = im.convert("RGB")
    scale = min(width / im.width, height / im.height)
    small = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))))
    box = Image.new("RGB", (width, height), "white")
    box.paste(small, ((width - small.width) // 2, (height - small.height) // 2))
    return box


def resolve_image(image_path: str, base_dir: Path) -> Path:
    p = Path(image_path)
    return p if p.is_absolute() else Path(base_dir) / p


def fingerprint(units: pd.DataFrame, base_dir: Path) -> str:
    """sha256 over the units table's ids and every image's bytes, in unit_id order."""
    h = hashlib.sha256()
    for rec in units.sort_values("unit_id").itertuples():
        h.update(rec.unit_id.encode("utf-8") + b"\0")
        h.update(resolve_image(rec.image_path, base_dir).read_bytes())
    return h.hexdigest()
