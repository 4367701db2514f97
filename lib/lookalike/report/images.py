"""Contact sheets: a template montage, a gold beside its distractors, labelled pairs."""

from __future__ import annotations

from pathlib import Path

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
