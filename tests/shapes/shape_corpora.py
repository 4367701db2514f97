"""Corpus shapes built at test time: each a small corpus nobody tuned the tool to, with its params file.

Every shape is drawn with PIL from a seeded generator (pages carry printed text; photos carry none)
and is at most a few dozen units, so the whole lane runs every stage on every shape in minutes.
A shape is a function (folder, seed) -> params path; SHAPES names them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from lookalike.data.examples import COLOURS, ENTITIES, METRICS, PERIODS, SHAPE_WORDS  # noqa: F401 (the shapes' words)
from lookalike.data.examples import filing_questions as _filing_questions
from lookalike.data.examples import filings as _filings
from lookalike.data.examples import full_metadata as _full_metadata
from lookalike.data.examples import page as _page
from lookalike.data.examples import photo_questions as _photo_questions
from lookalike.data.examples import photos as _photos
from lookalike.data.examples import value as _value
from lookalike.data.examples import write_pdfs as _write_pdfs
from lookalike.data.examples import write_qrels as _qrels
from lookalike.data.examples import write_questions as _questions

# every shape runs the cheap built-in systems: OCR + BM25, OCR + MiniLM, and the appearance encoder
FAST = """
encode:
  encoders: [ocr-minilm, ocr-bm25, appearance]
negatives:
  clusters: 3
  random: 3
report:
  haystack_fractions: [0.5, 1.0]
mining:
  judge_top: 5
labels:
  page_items: 20
leak:
  gate_units: 40
"""


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _params(folder: Path, name: str, body: str) -> Path:
    """The shape's run file: FAST's cheap settings, with what the shape's body sets taking precedence."""
    import yaml

    settings = _merge(yaml.safe_load(FAST), yaml.safe_load(body) or {})
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"run": name, "title": f"shape {name}", **settings}, sort_keys=False),
                    encoding="utf-8")
    return path


def _pdf_shape(folder: Path, seed: int, name: str, corpus_extra: str = "", entities=ENTITIES, periods=PERIODS,
               n: int = 12, answers: bool = True, qrels: bool = True, metadata=None) -> Path:
    """Filings drawn as PDFs, n questions about their facts (with answers and / or qrels), and the
    params of a pdf-folder run; metadata(folder, docs, facts) writes any extra file first."""
    rng = np.random.default_rng(seed)
    docs, facts = _filings(rng, entities, periods)
    _write_pdfs(folder / "pdfs", docs)
    if metadata is not None:
        metadata(folder, docs, facts)
    qs, qr = _filing_questions(facts, rng, n=n, answers=answers, qrels=qrels)
    _questions(folder / "q.jsonl", qs)
    lines = ["  source: pdf", f"  root: {folder / 'pdfs'}", f"  questions: {folder / 'q.jsonl'}"]
    if qrels:
        _qrels(folder / "q.qrels", qr)
        lines.append(f"  qrels: {folder / 'q.qrels'}")
    return _params(folder, name, "\ncorpus:\n" + "\n".join(lines) + "\n" + corpus_extra)


def pdf_full_metadata(folder: Path, seed: int) -> Path:
    """PDFs whose manifest names template, period, metric and entity for every page."""
    return _pdf_shape(folder, seed, "pdf-full-metadata", f"  manifest: {folder / 'meta.csv'}\n",
                      metadata=_full_metadata)


def pdf_no_metadata(folder: Path, seed: int) -> Path:
    """PDFs and nothing about them: no manifest, no file-name pattern."""
    return _pdf_shape(folder, seed, "pdf-no-metadata")


def pdf_name_pattern(folder: Path, seed: int) -> Path:
    """PDFs whose file names give the entity and period only (corpus.name_pattern)."""
    return _pdf_shape(folder, seed, "pdf-name-pattern", '  name_pattern: "(?P<entity>[a-z]+)-(?P<period>[0-9]{4})"\n')


def _photo_params(folder: Path, name: str, qs: list, qr: list, extra: str = "") -> Path:
    """The questions and qrels of a photo folder (photos/ with meta.csv beside it), and its params."""
    _questions(folder / "q.jsonl", qs)
    _qrels(folder / "q.qrels", qr)
    return _params(folder, name, f"\ncorpus:\n  source: images\n  root: {folder / 'photos'}\n  manifest: "
                   f"{folder / 'meta.csv'}\n  questions: {folder / 'q.jsonl'}\n  qrels: {folder / 'q.qrels'}\n" + extra)


def photos_captions_qrels_only(folder: Path, seed: int) -> Path:
    """Photos with captions and alt text; questions with people's qrels and no answers."""
    rng = np.random.default_rng(seed)
    rows = _photos(folder, rng, 40)
    pd.DataFrame(rows)[["unit_id", "caption", "alt_text"]].to_csv(folder / "meta.csv", index=False)
    qs, qr = _photo_questions(rows, rng, 14)
    return _photo_params(folder, "photos-captions", qs, qr, "encode:\n  encoders: [ocr-bm25, caption-minilm, appearance]\nmining:\n  retriever: ocr-bm25\n")


def photos_blind_queries(folder: Path, seed: int) -> Path:
    """Photos with captions and the team's own blind queries (leak.blind_queries), each written from what
    a photo shows — its shapes, right to left, in colours named differently from the caption's — never
    from its caption: the leak gate's retrieval half runs on photos, with its power measured on a
    caption-index leak planted in the same run."""
    rng = np.random.default_rng(seed)
    rows = _photos(folder, rng, 40)
    pd.DataFrame(rows)[["unit_id", "caption", "alt_text"]].to_csv(folder / "meta.csv", index=False)
    qs, qr = _photo_questions(rows, rng, 14)
    hue = {"red": "crimson", "blue": "navy", "green": "olive", "yellow": "golden", "purple": "violet"}
    blind = [{"query_id": f"b{i:02d}", "unit_id": r["unit_id"], "register": "shown",
              "text": " beside ".join(f"a {hue.get(c, c)} {s}" for c, s in reversed(r["drawn"]))}
             for i, r in enumerate(rows)]
    pd.DataFrame(blind).to_csv(folder / "blind.csv", index=False)
    return _photo_params(folder, "photos-blind-queries", qs, qr,
                         "encode:\n  encoders: [ocr-bm25, caption-minilm, appearance]\nmining:\n  retriever: ocr-bm25\n"
                         f"leak:\n  blind_queries: {folder / 'blind.csv'}\n")


def photos_no_text(folder: Path, seed: int) -> Path:
    """Photos smoothed to a few blended colours, so OCR reads nothing on any of them: every OCR system scores
    every photo alike for every question (each ranking one long tie), so only the tie rule orders them;
    captions, qrels only."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    rows = _photos(folder, rng, 30)
    for r in rows:
        path = folder / "photos" / f"{r['doc_id']}.jpg"
        with Image.open(path) as img:
            img.resize((3, 3)).resize(img.size, Image.Resampling.BILINEAR).save(path, quality=90)
    pd.DataFrame(rows)[["unit_id", "caption", "alt_text"]].to_csv(folder / "meta.csv", index=False)
    qs, qr = _photo_questions(rows, rng, 12)
    return _photo_params(folder, "photos-no-text", qs, qr)


def photos_template_entity(folder: Path, seed: int) -> Path:
    """Photos whose metadata names a template and an entity only (no period, no metric)."""
    rng = np.random.default_rng(seed)
    rows = _photos(folder, rng, 36)
    meta = pd.DataFrame(rows)
    meta["template_id"] = [f"shoot-{i % 4}" for i in range(len(meta))]
    meta["entity"] = [ENTITIES[i % 3] for i in range(len(meta))]
    meta[["unit_id", "template_id", "entity", "caption"]].to_csv(folder / "meta.csv", index=False)
    pick = rng.choice(len(rows), size=12, replace=False)
    qs, qr = [], []
    for i, j in enumerate(sorted(pick)):
        qs.append({"query_id": f"t{i:02d}", "text": f"Find the {rows[j]['alt_text']} photo for {meta.loc[j, 'entity']}"})
        qr.append((f"t{i:02d}", rows[j]["unit_id"], 1))
    return _photo_params(folder, "photos-template-entity", qs, qr)


def photos_partial_metadata(folder: Path, seed: int) -> Path:
    """Photos with a template and an entity on two thirds of them; the rest have no metadata, so their
    golds get look-alikes from appearance clusters, never a hard set of the gold alone."""
    rng = np.random.default_rng(seed)
    rows = _photos(folder, rng, 36)
    meta = pd.DataFrame(rows)
    meta["template_id"] = [f"shoot-{i % 3}" if i % 3 else "" for i in range(len(meta))]
    meta["entity"] = [ENTITIES[i % 3] if i % 3 else "" for i in range(len(meta))]
    meta[["unit_id", "template_id", "entity", "caption"]].to_csv(folder / "meta.csv", index=False)
    qs, qr = _photo_questions(rows, rng, 12)
    return _photo_params(folder, "photos-partial-metadata", qs, qr)


def answers_only(folder: Path, seed: int) -> Path:
    """Questions with answers and no judgements at all."""
    return _pdf_shape(folder, seed, "answers-only", entities=ENTITIES[:3], qrels=False)


def multi_page_evidence(folder: Path, seed: int) -> Path:
    """Every question needs two pages: two metrics of one filing, or one metric in two filings."""
    rng = np.random.default_rng(seed)
    docs, facts = _filings(rng, ENTITIES[:3])
    _write_pdfs(folder / "pdfs", docs)
    by = {(e, per, m): (d, p, v) for d, p, e, per, m, v in facts}
    qs, qr = [], []
    for i, (e, per) in enumerate([(e, per) for e in ENTITIES[:3] for per in PERIODS]):
        (d1, p1, v1), (d2, p2, v2) = by[(e, per, "revenue")], by[(e, per, "operating income")]
        qs.append({"query_id": f"m{i:02d}", "text": f"What were the revenue and the operating income of {e} in {per}?",
                   "answer": f"{v1}; {v2}", "evidence_structure": "page-multi"})
        qr += [(f"m{i:02d}", f"{d1}:{p1}", 2), (f"m{i:02d}", f"{d2}:{p2}", 2)]
    for i, e in enumerate(ENTITIES[:3]):
        (d1, p1, v1), (d2, p2, v2) = by[(e, "2023", "headcount")], by[(e, "2024", "headcount")]
        qs.append({"query_id": f"x{i:02d}", "text": f"How did the headcount of {e} change from 2023 to 2024?",
                   "answer": f"{v1} to {v2}", "evidence_structure": "cross-doc"})
        qr += [(f"x{i:02d}", f"{d1}:{p1}", 2), (f"x{i:02d}", f"{d2}:{p2}", 2)]
    _questions(folder / "q.jsonl", qs)
    _qrels(folder / "q.qrels", qr)
    return _params(folder, "multi-page", f"""
corpus:
  source: pdf
  root: {folder / 'pdfs'}
  questions: {folder / 'q.jsonl'}
  qrels: {folder / 'q.qrels'}
""")


def one_document(folder: Path, seed: int) -> Path:
    """A single PDF."""
    return _pdf_shape(folder, seed, "one-document", entities=ENTITIES[:1], periods=PERIODS[:1], n=3)


def beir_folder(folder: Path, seed: int) -> Path:
    """A BEIR-style folder: corpus.jsonl with image paths, queries.jsonl, qrels/test.tsv."""
    rng = np.random.default_rng(seed)
    docs, facts = _filings(rng, ENTITIES[:3])
    root = folder / "beir"
    (root / "images").mkdir(parents=True)
    (root / "qrels").mkdir()
    corpus = []
    for doc, pages in docs.items():
        for p, lines in enumerate(pages, start=1):
            _page(lines).save(root / "images" / f"{doc}_{p}.png")
            corpus.append({"_id": f"{doc}_{p}", "image_path": f"images/{doc}_{p}.png"})
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    qs, qr = _filing_questions(facts, rng, answers=False)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q["query_id"], "text": q["text"]}) + "\n" for q in qs))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{u.replace(':', '_')}\t1\n" for q, u, _ in qr))
    return _params(folder, "beir", f"\ncorpus:\n  source: beir\n  root: {root}\n")


def vidore_parquet(folder: Path, seed: int) -> Path:
    """A ViDoRe / MTEB-style parquet file: one row per query with its page image and answer."""
    import io

    rng = np.random.default_rng(seed)
    docs, facts = _filings(rng, ENTITIES[:3])
    pick = rng.choice(len(facts), size=10, replace=False)
    chosen = {int(j) for j in pick}
    rows = []
    for j, (doc, page, ent, per, m, v) in enumerate(facts):
        buf = io.BytesIO()
        _page(docs[doc][page - 1]).save(buf, format="PNG")
        rows.append({"query": f"What was the {m} of {ent} in {per}?" if j in chosen else None,
                     "image": {"bytes": buf.getvalue()}, "image_filename": f"{doc}_{page}.png",
                     "answer": v if j in chosen else None})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "vidore.parquet"
    pd.DataFrame(rows).to_parquet(path)
    return _params(folder, "vidore", f"\ncorpus:\n  source: vidore\n  root: {path}\n")


def five_units(folder: Path, seed: int) -> Path:
    """Five pages in all, with two questions."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "imgs").mkdir()
    lines, qs, qr = ["image_path,doc_id,page"], [], []
    for i in range(5):
        ent = ENTITIES[i % 4]
        v = _value(rng, "revenue")
        _page([f"{ent} results", f"Revenue was {v}"]).save(folder / "imgs" / f"u{i}.png")
        lines.append(f"u{i}.png,{ent.lower()}{i},1")
        if i < 2:
            qs.append({"query_id": f"f{i}", "text": f"What was the revenue of {ent}?", "answer": v})
            qr.append((f"f{i}", f"{ent.lower()}{i}:1", 1))
    (folder / "imgs" / "manifest.csv").write_text("\n".join(lines) + "\n")
    _questions(folder / "q.jsonl", qs)
    _qrels(folder / "q.qrels", qr)
    return _params(folder, "five-units", f"""
corpus:
  source: manifest
  manifest: {folder / 'imgs' / 'manifest.csv'}
  questions: {folder / 'q.jsonl'}
  qrels: {folder / 'q.qrels'}
""")


PLUGIN_SOURCE = Path(__file__).resolve().parents[2] / "examples" / "plugin_source" / "jsonl_pages.py"


def plugin_source(folder: Path, seed: int) -> Path:
    """Filing pages from a corpus source a plug-in registers (examples/plugin_source: pages.jsonl listing
    PNGs with template, company, metric and period), one listed page whose image is missing (skipped and
    named, the run goes on), and questions with answers and qrels."""
    rng = np.random.default_rng(seed)
    docs, facts = _filings(rng, ENTITIES[:3])
    root = folder / "listed"
    (root / "pages").mkdir(parents=True)
    listing = []
    meta = {(doc, page): (ent, per, m) for doc, page, ent, per, m, _ in facts}
    for doc, pages in docs.items():
        for p, lines in enumerate(pages, start=1):
            _page(lines).save(root / "pages" / f"{doc}-{p}.png")
            ent, per, m = meta.get((doc, p), ("", "", ""))
            listing.append({"file": f"pages/{doc}-{p}.png", "document": doc, "page": p, "company": ent,
                            "period": per, "metric": m, "template": f"{m.replace(' ', '-')}-page" if m else "cover"})
    listing.append({"file": "pages/never-written.png", "document": "lost", "page": 1})
    (root / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in listing))
    qs, qr = _filing_questions(facts, rng, n=10)
    _questions(folder / "q.jsonl", qs)
    _qrels(folder / "q.qrels", qr)
    return _params(folder, "plugin-source", f"""
plugins: [{PLUGIN_SOURCE}]
corpus:
  source: jsonl-pages
  root: {root}
  questions: {folder / 'q.jsonl'}
  qrels: {folder / 'q.qrels'}
""")


def demo_seed(seed: int):
    """The built-in demo generator (ci size) with another seed: a calibration corpus the project's
    configuration was not written against (every planted effect must be recovered on it too)."""
    def build(folder: Path, seed_unused: int = 0, **_) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"demo-seed-{seed}.yaml"
        path.write_text(f"run: demo-seed-{seed}\ntitle: \"demo generator, seed {seed}\"\nseed: {seed}\n"
                        "corpus:\n  source: demo\n  demo_size: ci\n", encoding="utf-8")
        return path
    build.__doc__ = f"The demo generator at ci size with seed {seed}."
    return build


def external_run_with_ties(folder: Path, seed: int) -> Path:
    """Your own run whose scores tie far past the cut (every page of a filing scored alike, 150 rows a
    question against a depth of 20): the exported run must be the canonical top 20."""
    params = pdf_no_metadata(folder, seed)
    qs = [json.loads(line) for line in (folder / "q.jsonl").read_text().splitlines()]
    docs, _ = _filings(np.random.default_rng(seed))
    units = [f"{d}:{p}" for d, pages in docs.items() for p in range(1, len(pages) + 1)]
    lines = []
    for q in qs:
        for rank, u in enumerate(units, start=1):
            lines.append(f"{q['query_id']} Q0 {u} {rank} {1.0 if u.startswith(('acme', 'borealis')) else 0.5} tied\n")
    (folder / "tied.run").write_text("".join(lines))
    import yaml

    settings = yaml.safe_load(params.read_text())
    settings.update(run="external-ties", title="shape external-ties")
    settings["retrieve"] = {"depth": 20, "external_runs": [f"tied={folder / 'tied.run'}"]}
    out = folder / "external-ties.yaml"
    out.write_text(yaml.safe_dump(settings, sort_keys=False))
    return out


SHAPES = {
    "pdf-full-metadata": pdf_full_metadata,
    "pdf-no-metadata": pdf_no_metadata,
    "pdf-name-pattern": pdf_name_pattern,
    "photos-captions": photos_captions_qrels_only,
    "photos-template-entity": photos_template_entity,
    "photos-blind-queries": photos_blind_queries,
    "photos-partial-metadata": photos_partial_metadata,
    "photos-no-text": photos_no_text,
    "answers-only": answers_only,
    "multi-page": multi_page_evidence,
    "one-document": one_document,
    "five-units": five_units,
    "beir": beir_folder,
    "vidore": vidore_parquet,
    "external-ties": external_run_with_ties,
    "plugin-source": plugin_source,
    "demo-seed-1": demo_seed(1),
    "demo-seed-2": demo_seed(2),
    "demo-seed-3": demo_seed(3),
}
