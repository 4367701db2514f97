"""Loading a run's corpus: the built-in demo, a manifest, or a folder of PDFs / images / BEIR / ViDoRe.

Manifest format (bring-your-own corpus, CSV or parquet), one row per unit:
  required  image_path (relative to the corpus root; may not leave it), and either unit_id or
            doc_id + page (1-based)
  optional  template_id, entity, metric, period, revision (integer, default 1),
            content_type (one of CONTENT_TYPES), entity_kind, filename, alt_text, caption
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lookalike.data import demo
from lookalike.data.schema import CONTENT_TYPES, UNIT_COLUMNS, Corpus, CorpusError, read_table, resolve_image
from lookalike.io import ingest
from lookalike.io.cache import image_sha256
from lookalike.registry import Registry


def read_manifest(path: Path | str, root: Path | str | None = None, strict: bool = False,
                  max_pixels: int = 40_000_000) -> Corpus:
    """Units from a manifest CSV/parquet; bad rows are skipped and listed (or raise when strict).

    Each problem names the manifest, the 1-based data row (header is row 0), the unit id and what
    was expected. Image paths are resolved against root (default: the manifest's folder) and may
    not escape it. Ids may hold no whitespace: every TREC file splits on it, so "initech 2023:1"
    would be read back as a unit "initech" (rows with one are skipped and named, never rewritten:
    your qrels and runs name the ids as written). Every image is decoded once, and one over
    max_pixels is skipped. A manifest with no data row is refused.
    """
    path = Path(path)
    return manifest_rows(read_table(path), str(path), Path(root) if root else path.parent, strict, max_pixels)


def manifest_rows(raw: pd.DataFrame, path: str, root: Path, strict: bool = False,
                  max_pixels: int = 40_000_000) -> Corpus:
    """Units from a manifest's rows (read_manifest's checks, each problem naming path — the file, or the
    plug-in source that gave the rows — and the 1-based row): what a manifest file and a plug-in corpus
    source (register_source) hand over is checked one way."""
    raw = raw.fillna("")
    raw.columns = [str(c).strip() for c in raw.columns]
    if "image_path" not in raw.columns:
        raise CorpusError(f"{path}: required column 'image_path' is missing (columns: {', '.join(raw.columns)})")
    if "unit_id" not in raw.columns and not {"doc_id", "page"} <= set(raw.columns):
        raise CorpusError(f"{path}: needs a 'unit_id' column or both 'doc_id' and 'page'")
    if raw.empty:
        raise CorpusError(f"{path}: the manifest has a header and no rows (expected one row per unit)")
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
        elif re.search(r"\s", uid) or re.search(r"\s", doc_id):
            problem = (f"unit_id {uid!r} contains whitespace; TREC files split on it (write it without spaces, "
                       "e.g. with '_', in the manifest and in every qrels or run that names it)")
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
            elif ingest.leaves_root(img, root):
                problem = f"image_path {rec['image_path']!r} leaves the corpus root {root}"
            elif not img.is_file():
                problem = f"image {rec['image_path']!r} not found under {root}"
            else:
                why = ingest.image_problem(img, max_pixels)
                if why:
                    problem = f"image {rec['image_path']!r}: {why}"
        if problem:
            msg = f"{path}: row {i} (unit_id {uid!r}): {problem}"
            if strict:
                raise CorpusError(msg)
            skipped.append(dict(source=path, row=i, unit_id=uid, problem=problem))
            continue
        seen[uid] = i
        row = {c: rec.get(c, "") for c in UNIT_COLUMNS}
        row.update(unit_id=uid, doc_id=doc_id, page=int(page), image_path=str((root / rec["image_path"]).resolve()),
                   revision=int(rec.get("revision") or 1))
        rows.append(row)
    units = pd.DataFrame(rows, columns=UNIT_COLUMNS)
    units = units.astype({"page": "int64", "revision": "int64"})
    return Corpus(units=units, skipped=pd.DataFrame(skipped, columns=["source", "row", "unit_id", "problem"]))


@dataclass(frozen=True)
class SourceSpec:
    """A corpus.source: what it needs (corpus.root, corpus.manifest, or neither) and how it loads."""

    name: str
    needs: str            # "", "root" or "manifest"
    load: Callable        # (root, out_dir, options) -> Corpus
    what: str


SOURCES: Registry[SourceSpec] = Registry("corpus.source")
SOURCES.register(SourceSpec("demo", "", lambda root, out_dir, o: demo.generate(o["demo_size"], o["seed"], out_dir),
                            "the built-in generator"))
SOURCES.register(SourceSpec("manifest", "manifest", lambda root, out_dir, o: read_manifest(
    Path(o["manifest"]), Path(root) if root else None, strict=o["strict"], max_pixels=o["max_pixels"]),
    "a CSV or parquet file listing the units"))
SOURCES.register(SourceSpec("pdf", "root", lambda root, out_dir, o: ingest.pdf_folder(
    root, out_dir, dpi=o["dpi"], pages=o["pages"], max_pages=o["max_pages"], name_pattern=o["name_pattern"],
    render=o["render"], max_pixels=o["max_pixels"]), "a folder of PDFs, rendered page by page"))
SOURCES.register(SourceSpec("images", "root", lambda root, out_dir, o: ingest.image_folder(
    root, name_pattern=o["name_pattern"], max_pixels=o["max_pixels"]), "a folder of images"))
SOURCES.register(SourceSpec("beir", "root", lambda root, out_dir, o: ingest.beir_folder(
    root, out_dir, max_pixels=o["max_pixels"]), "a BEIR-style folder (corpus, queries, qrels)"))
SOURCES.register(SourceSpec("vidore", "root", lambda root, out_dir, o: ingest.vidore_parquet(
    root, out_dir, max_pixels=o["max_pixels"]), "a ViDoRe-style parquet file"))


def register_source(name: str, needs: str = "root", what: str = ""):
    """Decorator: enter a function as the corpus source ``name`` (a plug-in lists its module in the run's
    ``plugins`` key, then sets ``corpus.source: name``). The function takes (root, options) — root the
    corpus.root folder as a Path (needs="root"; "" when needs=""), options the corpus settings (seed,
    strict, max_pixels, ...) — and returns a DataFrame of manifest rows: image_path (relative to root),
    unit_id or doc_id + page, and any optional manifest column. Those rows are checked as a manifest's
    are (manifest_rows): a bad row is skipped and named, with the source's name in place of a file."""
    if needs not in ("root", ""):
        raise ValueError(f"register_source({name!r}): needs must be 'root' or '', got {needs!r}")

    def enter(fn: Callable) -> Callable:
        def load(root, out_dir, o):
            folder = Path(root) if root else Path(".")
            rows = fn(folder, dict(o))
            if not isinstance(rows, pd.DataFrame):
                raise CorpusError(f"corpus.source {name!r} ({fn.__module__}.{fn.__qualname__}) returned "
                                  f"{type(rows).__name__}, expected a DataFrame of manifest rows")
            return manifest_rows(rows, f"corpus.source {name}", folder, o["strict"], o["max_pixels"])
        load.plugin = (fn.__module__, fn.__qualname__)           # type: ignore[attr-defined]
        doc = (fn.__doc__ or "").strip().split("\n")[0]
        spec = SourceSpec(name, needs, load, what or doc or f"the plug-in source {name}")
        held = SOURCES[name] if name in SOURCES else None
        if held is not None and getattr(held.load, "plugin", None) == load.plugin:
            SOURCES.replace(spec)         # the same module imported again (a plug-in file read anew)
        else:
            SOURCES.register(spec)        # a taken name (a built-in's or another plug-in's) is refused
        return fn
    return enter


def load(source: str, seed: int, out_dir: Path | str, demo_size: str = "ci", manifest: str = "",
         root: str = "", strict: bool = False, dpi: int = 110, pages: str = "", max_pages: int = 0,
         name_pattern: str = "", max_pixels: int = 40_000_000, render: bool = True) -> Corpus:
    """The run's corpus from its source (SOURCES): the built-in demo rendered into out_dir, a manifest
    (see the module docstring), a folder of PDFs rendered into out_dir, a folder of images, a BEIR folder
    or a ViDoRe parquet file (lookalike.ingest); with a manifest beside a folder source, its metadata by
    unit_id or doc_id. render=False: PDF pages are listed, not rendered (``lookalike check``)."""
    if source not in SOURCES:
        raise CorpusError(f"corpus.source must be one of {', '.join(repr(n) for n in SOURCES)}, got {source!r}")
    spec = SOURCES[source]
    if spec.needs == "manifest" and not manifest:
        raise CorpusError("corpus.source is manifest but corpus.manifest is empty; give the manifest's path")
    if spec.needs == "root" and not root:
        raise CorpusError(f"corpus.source is {source} but corpus.root is empty; give the folder (or file)")
    loaded = spec.load(root, out_dir, dict(seed=seed, demo_size=demo_size, manifest=manifest, strict=strict, dpi=dpi,
                                           pages=pages, max_pages=max_pages, name_pattern=name_pattern,
                                           max_pixels=max_pixels, render=render))
    if spec.needs == "root" and manifest:                # metadata for the rendered / found units
        loaded.units, extra = ingest.apply_metadata(loaded.units, manifest)
        loaded.skipped = pd.concat([loaded.skipped, extra], ignore_index=True)
    return loaded


DUPLICATE_COLUMNS = ["unit_id", "duplicate_of", "image_sha256"]


def identical_images(units: pd.DataFrame, base_dir: Path | str) -> pd.DataFrame:
    """Units whose image files are byte-identical: one row per unit of every group of two or more,
    each naming its group's first unit id (code point order) as duplicate_of, with the group's
    sha256 (16 hex). A copy of the gold page ties with it in every ranking and would "win" as a
    distractor, so the stages keep a group's members out of each other's negative sets."""
    digests = {uid: image_sha256(resolve_image(image, Path(base_dir)))[:16]
               for uid, image in zip(units["unit_id"], units["image_path"])}
    groups: dict[str, list[str]] = {}
    for uid in sorted(digests):
        groups.setdefault(digests[uid], []).append(uid)
    rows = [(u, ids[0], sha) for sha, ids in groups.items() if len(ids) > 1 for u in ids]
    return pd.DataFrame(sorted(rows), columns=DUPLICATE_COLUMNS)
