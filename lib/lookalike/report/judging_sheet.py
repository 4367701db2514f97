"""The leak ablation's blind judging sheet as an offline HTML page: an item id, the query and the page
image, nothing that names the unit."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pandas as pd

from lookalike.data.schema import resolve_image
from lookalike.report import pages


def judging_sheet_html(sheet: pd.DataFrame, units: pd.DataFrame, out_path: Path, image_root: Path,
                       salt: str = "", noun: str = "page") -> Path:
    """A static, offline HTML judging sheet: per item its id, the query and the page image — nothing else.

    Images are linked (hard links, else copies) into a folder beside the page under opaque names, so
    not even the page source shows a unit id or file name. Labels go into the CSV sheet by item id.
    """
    images = units.set_index("unit_id")["image_path"]
    out_path = Path(out_path)
    folder = out_path.parent / (out_path.stem + "_images")
    folder.mkdir(parents=True, exist_ok=True)
    tokens = {}
    for uid in sorted(set(sheet["unit_id"])):
        token = hashlib.sha256(f"{salt}:{uid}".encode()).hexdigest()[:16]
        src = resolve_image(images[uid], image_root)
        dst = folder / f"{token}{Path(src).suffix}"
        if not dst.exists():
            try:
                os.link(src, dst)
            except OSError:
                shutil.copyfile(src, dst)
        tokens[uid] = dst.name
    items = [(rec.item, rec.text, f"{folder.name}/{tokens[rec.unit_id]}") for rec in sheet.itertuples()]
    out_path.write_text(pages.judging_sheet(items, noun), encoding="utf-8")
    return out_path
