"""Contact sheets: a template montage, a gold beside its distractors, labelled pairs."""

from __future__ import annotations

import base64
import io
from contextlib import nullcontext
from pathlib import Path
from collections.abc import Sequence

import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from lookalike.data.schema import fit, resolve_image


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


def data_uri(src: Path | str | Image.Image, width: int) -> str:
    """The image (a path, or an image already read) as a JPEG data URI, at most width pixels wide
    (for self-contained pages)."""
    buf = io.BytesIO()
    with _opened(src) as im:
        _at_most(im, width).save(buf, format="JPEG", quality=82, optimize=True)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _opened(src: Path | str | Image.Image):
    """A context giving the image: opened from a path (and closed after), or the image itself."""
    return nullcontext(src) if isinstance(src, Image.Image) else Image.open(src)


def distractor_montage(gold_id: str, distractors: pd.DataFrame, units: pd.DataFrame, base_dir, axes: Sequence[str],
                       thumb_width: int = 220) -> Image.Image:
    """One row per axis (in the order given; axes without distractors are left out): the gold unit,
    framed in red, then its distractors on that axis, the row labelled by its axis."""
    paths = units.set_index("unit_id")["image_path"]
    mine = distractors[distractors["gold_unit_id"] == gold_id]
    axes = [a for a in axes if a in set(mine["axis"])]
    per_row = 1 + (mine.groupby("axis").size().max() if len(mine) else 0)
    th = int(thumb_width * 9 / 16)
    label_w = 90
    sheet = Image.new("RGB", (label_w + per_row * (thumb_width + 6), max(1, len(axes)) * (th + 6)), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=14)
    for r, axis in enumerate(axes):
        y = r * (th + 6)
        draw.text((4, y + th // 2 - 7), axis, fill="black", font=font)
        row = [gold_id] + list(mine[mine["axis"] == axis]["unit_id"])
        for c, uid in enumerate(row):
            x = label_w + c * (thumb_width + 6)
            with Image.open(resolve_image(paths[uid], base_dir)) as im:
                sheet.paste(fit(im, thumb_width, th), (x, y))
            if c == 0:
                draw.rectangle([x, y, x + thumb_width - 1, y + th - 1], outline=(220, 40, 40), width=3)
    return sheet


def pair_sheet(pairs: pd.DataFrame, units: pd.DataFrame, base_dir: Path | str, thumb_width: int = 300) -> Image.Image:
    """Thumbnails of (query, unit) pairs in a row, each captioned with its unit id and the two
    labels (columns label_model, label_adjudicated)."""
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


def save_jpeg(src: Path | str | Image.Image, out: Path | str, width: int) -> Path:
    """The image (a path, or an image already read) written as a JPEG at most width pixels wide (what
    a browser can always show)."""
    out = Path(out)
    with _opened(src) as im:
        _at_most(im, width).save(out, format="JPEG", quality=85, optimize=True)
    return out


def _at_most(im: Image.Image, width: int) -> Image.Image:
    """The image in RGB, scaled down (aspect kept) when wider than width."""
    im = im.convert("RGB")
    return im.resize((width, round(im.height * width / im.width))) if im.width > width else im
