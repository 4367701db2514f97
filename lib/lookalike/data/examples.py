"""Small generated corpora to try lookalike on your own kind of data: ``lookalike example NAME [DIR]``.

  documents  filings drawn as PDFs (an annual report per company and year: a cover and one page per
             metric), a manifest naming each page's template, entity, period and metric, questions
             with answers, and page-level judgements (qrels)
  photos     photos with no text in them (two coloured shapes on a noisy ground), a manifest with a
             caption and alt text per photo, questions without answers, and qrels

Each is drawn with PIL from a seeded generator, so the same seed gives the same files; the params
files params/examples/documents.yaml and params/examples/photos-captions.yaml run them. The same
drawing code builds the test suite's corpus shapes, so what the examples show is what is tested.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw, ImageFont

ENTITIES = ["Acme", "Borealis", "Cobalt", "Dorian"]
PERIODS = ["2023", "2024"]
METRICS = ["revenue", "operating income", "headcount"]
COLOURS = {"red": (200, 40, 40), "blue": (40, 60, 200), "green": (40, 160, 60), "yellow": (230, 200, 40),
           "purple": (120, 50, 160)}
SHAPE_WORDS = ["circle", "square", "triangle"]


def page(lines: list[str], size=(700, 420)) -> Image.Image:
    """A white page with the lines printed on it, the first one larger (a heading)."""
    img = Image.new("RGB", size, "white")
    d = ImageDraw.Draw(img)
    y = 30
    for i, line in enumerate(lines):
        d.text((30, y), line, fill="black", font=ImageFont.load_default(size=34 if i == 0 else 28))
        y += 56
    return img


def value(rng: np.random.Generator, metric: str) -> str:
    """A made-up figure for a metric, in the unit it is reported in."""
    return f"{int(rng.integers(1000, 9999))} employees" if metric == "headcount" else f"{int(rng.integers(100, 999))} million"


def filings(rng: np.random.Generator, entities=ENTITIES, periods=PERIODS):
    """doc -> pages (lines per page); facts: (doc, page, entity, period, metric, value)."""
    docs, facts = {}, []
    for ent in entities:
        for per in periods:
            doc = f"{ent.lower()}-{per}"
            pages = [[f"{ent} annual report {per}", "Contents: results by metric"]]
            for m in METRICS:
                v = value(rng, m)
                pages.append([f"{ent} {per}: {m}", f"{m.capitalize()} for {per} was {v}", f"Reported by {ent}"])
                facts.append((doc, len(pages), ent, per, m, v))
            docs[doc] = pages
    return docs, facts


FIXED_DATE = time.strptime("2024-01-01", "%Y-%m-%d")     # Pillow writes a struct_time as a PDF date


def write_pdfs(folder: Path, docs: dict, name=lambda doc: doc) -> None:
    """Each document as a PDF of its rendered pages (fixed dates, so the same seed gives the same bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc, pages in docs.items():
        imgs = [page(p) for p in pages]
        # fixed dates: Pillow stamps the clock otherwise, and a PDF's bytes name its page images in the
        # cache and the units table, so the same seed would not give the same corpus (or tables) twice
        imgs[0].save(folder / f"{name(doc)}.pdf", save_all=True, append_images=imgs[1:], resolution=110,
                     creationDate=FIXED_DATE, modDate=FIXED_DATE)


def write_questions(path: Path, rows: list[dict]) -> Path:
    """Questions as JSON lines at path; returns path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_qrels(path: Path, lines: list[tuple[str, str, int]]) -> Path:
    """TREC qrels lines (query, 0, unit, relevance) at path; returns path."""
    path.write_text("".join(f"{q} 0 {u} {r}\n" for q, u, r in lines), encoding="utf-8")
    return path


def full_metadata(folder: Path, docs: dict, facts: list) -> None:
    """meta.csv naming every page's template, entity, period, metric and content type."""
    rows = [{"unit_id": f"{doc}:1", "template_id": "cover", "entity": doc.split("-")[0].capitalize(),
             "period": doc.split("-")[1], "metric": "", "content_type": "text"} for doc in docs]
    rows += [{"unit_id": f"{d}:{p}", "template_id": f"metric-{m.replace(' ', '-')}", "entity": e, "period": per,
              "metric": m, "content_type": "table"} for d, p, e, per, m, _ in facts]
    pd.DataFrame(rows).to_csv(folder / "meta.csv", index=False)


def filing_questions(facts, rng, n=12, answers=True, qrels=True):
    """n questions about n of the facts (with their answers), and their pages as qrels (grade 2)."""
    pick = rng.choice(len(facts), size=min(n, len(facts)), replace=False)
    qs, qr = [], []
    for i, j in enumerate(sorted(pick)):
        doc, pg, ent, per, m, v = facts[j]
        row = {"query_id": f"s{i:02d}", "text": f"What was the {m} of {ent} in {per}?"}
        if answers:
            row["answer"] = v
        qs.append(row)
        if qrels:
            qr.append((row["query_id"], f"{doc}:{pg}", 2))
    return qs, qr


def photo(rng: np.random.Generator, drawn: list | None = None) -> tuple[Image.Image, str, str]:
    """A photo-like picture with no text: two coloured shapes on a noisy ground; (image, caption, alt).
    drawn, when given, receives what was drawn ((colour, shape) left to right): what a person looking
    at the picture sees, kept apart from the caption written about it."""
    base = rng.integers(60, 200, size=3)
    arr = np.clip(base + rng.normal(0, 18, size=(240, 320, 3)), 0, 255).astype("uint8")
    img = Image.fromarray(arr, "RGB")
    d = ImageDraw.Draw(img)
    parts = []
    for slot in range(2):
        colour = list(COLOURS)[int(rng.integers(len(COLOURS)))]
        shape = SHAPE_WORDS[int(rng.integers(len(SHAPE_WORDS)))]
        x, y = 30 + 150 * slot + int(rng.integers(0, 30)), 60 + int(rng.integers(0, 60))
        box = (x, y, x + 100, y + 100)
        if shape == "circle":
            d.ellipse(box, fill=COLOURS[colour])
        elif shape == "square":
            d.rectangle(box, fill=COLOURS[colour])
        else:
            d.polygon([(x, y + 100), (x + 50, y), (x + 100, y + 100)], fill=COLOURS[colour])
        parts.append((colour, shape))
    if drawn is not None:
        drawn.extend(parts)
    caption = f"A {parts[0][0]} {parts[0][1]} to the left of a {parts[1][0]} {parts[1][1]}"
    alt = f"{parts[0][1]} and {parts[1][1]}"
    return img, caption, alt


def photos(folder: Path, rng: np.random.Generator, n: int) -> list[dict]:
    """n photos under folder/photos/ (JPEG); their doc_id, unit_id, caption and alt text."""
    (folder / "photos").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        drawn: list = []
        img, caption, alt = photo(rng, drawn)
        name = f"photo{i:03d}.jpg"
        img.save(folder / "photos" / name, quality=90)
        rows.append({"doc_id": f"photo{i:03d}", "unit_id": f"photo{i:03d}:1", "caption": caption, "alt_text": alt,
                     "drawn": drawn})
    return rows


def photo_questions(rows: list[dict], rng: np.random.Generator, n: int = 14):
    """Questions that describe n of the photos (no answers: a photo shows, it does not state), and
    each photo as the question's one relevant unit."""
    pick = rng.choice(len(rows), size=min(n, len(rows)), replace=False)
    qs, qr = [], []
    for i, j in enumerate(sorted(pick)):
        words = rows[j]["caption"].split()
        qs.append({"query_id": f"p{i:02d}", "text": f"Which picture has a {words[2]} {words[1]} and a "
                   f"{words[-1]} that is {words[-2]}?"})
        qr.append((f"p{i:02d}", rows[j]["unit_id"], 1))
    return qs, qr


def documents(folder: Path | str, seed: int = 0) -> Path:
    """The documents example: pdfs/, meta.csv, questions.jsonl (with answers), qrels.txt."""
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    docs, facts = filings(rng)
    write_pdfs(folder / "pdfs", docs)
    full_metadata(folder, docs, facts)
    qs, qr = filing_questions(facts, rng)
    write_questions(folder / "questions.jsonl", qs)
    write_qrels(folder / "qrels.txt", qr)
    return folder


def photos_with_captions(folder: Path | str, seed: int = 0, n: int = 40) -> Path:
    """The photos example: photos/, meta.csv (unit_id, caption, alt_text), questions.jsonl (no
    answers), qrels.txt."""
    folder = Path(folder)
    rng = np.random.default_rng(seed)
    rows = photos(folder, rng, n)
    pd.DataFrame(rows)[["unit_id", "caption", "alt_text"]].to_csv(folder / "meta.csv", index=False)
    qs, qr = photo_questions(rows, rng)
    write_questions(folder / "questions.jsonl", qs)
    write_qrels(folder / "qrels.txt", qr)
    return folder


EXAMPLES = {"documents": documents, "photos": photos_with_captions}

# what `lookalike example` wrote last into a folder (relative path -> sha256), so that writing the same
# example again replaces only files it wrote itself and nobody changed since
RECORD = ".lookalike-example.json"


class ExampleError(ValueError):
    """An example that cannot be written where asked, said in one line (the CLI's exit 2)."""


@dataclass
class Written:
    """What writing an example corpus did: its folder, the files written, and which of them replaced a file that
    was there."""
    folder: Path
    files: list[str]               # relative paths written
    replaced: list[str]            # of those, files that were there before (--force, or the example's own)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _own_files(folder: Path) -> dict[str, str]:
    """The files the last `lookalike example` into folder wrote, with their hashes then ({} if none)."""
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def conflicts(folder: Path, names: list[str]) -> list[str]:
    """The paths among names (relative to folder) that hold something a user wrote: a file there that the
    last example did not write or that changed since, or a folder or file where the other is needed."""
    own = _own_files(folder)
    out = []
    for rel in names:
        target = folder / rel
        blocked = next((str(a.relative_to(folder)) for a in reversed(target.parents)
                        if a != folder and folder in a.parents and (a.is_file() or a.is_symlink())), None)
        if blocked:
            out.append(f"{blocked} (a file where the example needs a folder)")
        elif target.is_symlink() or target.is_dir():
            out.append(f"{rel} (a {'link' if target.is_symlink() else 'folder'})")
        elif target.exists() and own.get(rel) != _sha(target):
            out.append(rel)
    return sorted(set(out))


def write_example(name: str, folder: Path | str, seed: int = 0, force: bool = False, log=print) -> Written:
    """Generate example `name` into folder without ever overwriting what a user wrote there: the
    corpus is drawn in a scratch folder first, and a file it would replace is refused (ExampleError,
    naming them) unless it is the example's own unchanged earlier output, or force is given — then
    what is replaced is listed (log) before anything is written."""
    import shutil
    import tempfile

    if name not in EXAMPLES:
        raise ExampleError(f"no example named {name!r}; there are {', '.join(EXAMPLES)}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ExampleError(f"--seed must be a whole number, 0 or more (the generator's seed), got {seed!r}")
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ExampleError(f"{folder} is a file, not a folder: give a folder to write the example into")
    existing = next((a for a in [folder, *folder.parents] if a.exists()), None)
    if existing is not None and not existing.is_dir():
        raise ExampleError(f"{folder}: {existing} is a file, not a folder")
    with tempfile.TemporaryDirectory(prefix="lookalike-example-") as scratch:
        EXAMPLES[name](Path(scratch), seed=seed)
        names = sorted(str(p.relative_to(scratch)) for p in Path(scratch).rglob("*") if p.is_file())
        clash = conflicts(folder, names) if folder.is_dir() else []
        if clash and not force:
            shown = ", ".join(clash[:12]) + (f" and {len(clash) - 12} more" if len(clash) > 12 else "")
            raise ExampleError(f"{folder} already holds {len(clash)} file(s) the {name} example would overwrite: "
                               f"{shown}; nothing was written (choose an empty folder, or --force to replace them)")
        if clash:
            log(f"lookalike example: --force: replacing {len(clash)} file(s) in {folder}: " + ", ".join(clash))
        try:
            folder.mkdir(parents=True, exist_ok=True)
            probe = folder / f".write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise ExampleError(f"cannot write into {folder} ({exc.strerror or exc}); choose a folder you can write"
                               ) from None
        replaced = [rel for rel in names if (folder / rel).exists() or (folder / rel).is_symlink()]
        # files an earlier example wrote here and nobody changed stay the example's own
        record = {rel: sha for rel, sha in _own_files(folder).items()
                  if (folder / rel).is_file() and _sha(folder / rel) == sha}
        for rel in names:
            target = folder / rel
            for a in reversed(target.parents):       # --force: a file standing where a folder goes
                if a != folder and folder in a.parents and (a.is_file() or a.is_symlink()):
                    a.unlink()
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(scratch) / rel, target)
            record[rel] = _sha(target)
    (folder / RECORD).write_text(json.dumps({"example": name, "seed": seed, "files": record}, indent=1,
                                            sort_keys=True) + "\n", encoding="utf-8")
    return Written(folder, names, replaced)
