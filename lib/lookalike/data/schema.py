"""The units schema: the tables every stage reads, their columns, strata, sampling and image helpers.

A unit is one retrievable item (a page image), id ``"{doc_id}:{page}"`` with 1-based pages.
The units table (``tables/units.csv``) has one row per unit and the columns of UNIT_COLUMNS;
a corpus that lacks a field leaves it empty.

"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from lookalike.vocab import CONTENT_TYPES, EVIDENCE_STRUCTURES, REGISTERS  # noqa: F401 (re-exported)

UNIT_COLUMNS = [
    "unit_id", "doc_id", "page", "image_path", "template_id", "entity", "metric", "period", "revision",
    # stratum columns
    "content_type", "entity_kind",
    # caption fields: what an asset database says about the image (never shown to pixel encoders or judges)
    "filename", "alt_text", "caption",
]
STRATUM_COLUMNS = ["content_type", "entity_kind"]
CAPTION_COLUMNS = ["filename", "alt_text", "caption"]
def filename_words(filename: str) -> str:
    """A file name as the words a reader (or a leaky pipeline) takes from it: no extension,
    separators as spaces ('cs_2024q1_deck_p01.png' -> 'cs 2024q1 deck p01')."""
    return re.sub(r"[_\-.]+", " ", Path(str(filename)).stem).strip()


FACT_COLUMNS = ["unit_id", "entity", "metric", "period", "member", "value", "unit", "revision"]
QUESTION_COLUMNS = ["query_id", "text", "answer", "evidence_structure", "register", "qualified", "qualifiers",
                    "evidence_unit_ids"]
# The demo's answer key: one row per fact a question needs. op: how the facts make the answer
# (argmax_value, argmax, value, diff, sum, ratio, greater, higher_of); member: a member name,
# "total", or "*segment" / "*region" (all members of that kind); template_id: the page kind the
# question names ("" when it names none).
ANSWER_KEY_COLUMNS = ["query_id", "op", "need", "template_id", "entity", "metric", "period", "member", "revision"]


# What a page visibly shows, in words (the demo's generator writes it; tables/visible.csv): its
# colour, its layout, its title and every text it prints ("printed", joined with " | "). The leak
# ablation's blind queries are written from it; it holds nothing from the caption fields.
VISIBLE_COLUMNS = ["unit_id", "colour", "layout", "title", "printed"]
# What the demo generator planted, for the report to recover (tables/planted.csv; stage 07 writes
# planted_effects.csv beside it): one row per effect, its planted value and what it means.
PLANTED_COLUMNS = ["effect", "planted", "meaning"]


class CorpusError(ValueError):
    """A corpus file cannot be used at all (missing, unreadable, required column absent)."""


@dataclass
class Corpus:
    """A loaded corpus: units, questions, facts, the answer key, qrels, the visible caption fields, and the rows
    skipped with the reason."""
    units: pd.DataFrame
    questions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=QUESTION_COLUMNS))
    facts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=FACT_COLUMNS))
    skipped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["source", "row", "unit_id", "problem"]))
    answer_key: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=ANSWER_KEY_COLUMNS))
    qrels: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["query_id", "unit_id", "relevance"]))
    visible: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=VISIBLE_COLUMNS))
    planted: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PLANTED_COLUMNS))


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


def read_table(path: Path) -> pd.DataFrame:
    """A manifest table (CSV as text, or Parquet); a missing or non-UTF-8 file is a CorpusError naming it."""
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
    """An image path as written in a manifest, resolved against the manifest's folder when relative."""
    p = Path(image_path)
    return p if p.is_absolute() else Path(base_dir) / p


def fingerprint(units: pd.DataFrame, base_dir: Path) -> str:
    """sha256 over the units table's ids and every image's bytes, in unit_id order."""
    h = hashlib.sha256()
    for rec in units.sort_values("unit_id").itertuples():
        h.update(rec.unit_id.encode("utf-8") + b"\0")
        h.update(resolve_image(rec.image_path, base_dir).read_bytes())
    return h.hexdigest()


def image_data_url(path: Path | str) -> str:
    """An image file as a data URL, its MIME type read from the file's content (not its name):
    what the OpenAI-compatible judge and embedding clients send."""
    import base64
    import mimetypes

    from PIL import Image

    path = Path(path)
    data = path.read_bytes()
    with Image.open(path) as im:
        mime = Image.MIME.get(im.format or "", "") or mimetypes.guess_type(path.name)[0] or "image/png"
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
