"""A worked plug-in corpus source for lookalike: a folder of page images listed in ``pages.jsonl``.

Named in a run's parameters:

    plugins: [examples/plugin_source/jsonl_pages.py]    # imported first: registers "jsonl-pages"
    corpus:
      source: jsonl-pages
      root: path/to/folder                             # holds pages.jsonl and the images it names

Each line of ``pages.jsonl`` is one page: ``{"file": "a/p1.png", "document": "a", "page": 1}``, with
any of ``template``, ``company``, ``metric``, ``period`` and ``caption`` (what an asset database says
about the image: the leak ablation keeps it away from the image path).

What lookalike asks of a corpus source (docs/development.md, "Adding a corpus source"): a function,
entered with ``register_source(name)``, that takes the corpus root and the corpus options and returns a
DataFrame of manifest rows — ``image_path`` relative to the root, ``unit_id`` or ``doc_id`` + ``page``,
and any optional manifest column (``template_id``, ``entity``, ``metric``, ``period``, ``caption``, ...).
lookalike checks those rows as it checks a manifest's: a row whose image is missing or unreadable, whose
id holds a space or repeats another is skipped and named (the run goes on), and ``corpus.strict: true``
stops at the first. Raise CorpusError only when the source as a whole cannot be read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from lookalike.plugin import CorpusError, register_source

# this format's field -> the manifest column it fills
FIELDS = {"file": "image_path", "document": "doc_id", "page": "page", "template": "template_id",
          "company": "entity", "metric": "metric", "period": "period", "caption": "caption"}


@register_source("jsonl-pages", needs="root")
def jsonl_pages(root: Path, options: dict) -> pd.DataFrame:
    """a folder of page images listed in pages.jsonl"""
    listing = root / "pages.jsonl"
    if not listing.is_file():
        raise CorpusError(f"{listing}: not found (corpus.source jsonl-pages reads pages.jsonl in corpus.root)")
    rows = []
    for number, line in enumerate(listing.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{listing}: line {number} is not JSON ({exc.msg})") from None
        rows.append({column: str(record.get(field, "")) for field, column in FIELDS.items()})
    return pd.DataFrame(rows, columns=list(FIELDS.values()))
