"""Contact sheets and embedded images (report.images): a row per template or axis with the gold framed,
images never wider than asked, any mode written as a JPEG a browser shows."""

from __future__ import annotations

import base64
import io

import pandas as pd
from PIL import Image

from lookalike.report import images


def _pages(tmp_path, colours: dict[str, tuple[int, int, int]]) -> pd.DataFrame:
    rows = []
    for uid, colour in colours.items():
        Image.new("RGB", (160, 90), colour).save(tmp_path / f"{uid}.png")
        rows.append({"unit_id": uid, "image_path": f"{uid}.png", "template_id": "t" + uid[0]})
    return pd.DataFrame(rows)


def test_the_montage_has_a_row_per_template_and_at_most_per_template_thumbnails(tmp_path):
    units = _pages(tmp_path, {"a1": (255, 0, 0), "a2": (255, 0, 0), "a3": (255, 0, 0), "b1": (0, 0, 255)})
    sheet = images.montage(units, tmp_path, per_template=2, thumb_width=80)
    th = int(80 * 9 / 16)
    assert sheet.size == (150 + 2 * (80 + 8), 2 * (th + 8))
    # template a: two red thumbnails, the third left out; template b: one blue one, then white
    assert sheet.getpixel((150 + 40, th // 2))[0] > 200 and sheet.getpixel((150 + 88 + 40, th // 2))[0] > 200
    assert sheet.getpixel((150 + 40, th + 8 + th // 2))[2] > 200
    assert sheet.getpixel((150 + 88 + 40, th + 8 + th // 2)) == (255, 255, 255)


def test_the_gold_is_framed_in_red_and_an_axis_without_distractors_is_left_out(tmp_path):
    units = _pages(tmp_path, {"g1": (255, 255, 255), "d1": (0, 128, 0), "d2": (0, 128, 0)})
    distractors = pd.DataFrame({"gold_unit_id": ["g1", "g1"], "unit_id": ["d1", "d2"], "axis": ["period", "period"]})
    sheet = images.distractor_montage("g1", distractors, units, tmp_path, ["entity", "period"], thumb_width=80)
    th = int(80 * 9 / 16)
    assert sheet.size == (90 + 3 * (80 + 6), th + 6)          # one row (period), gold + two distractors
    assert sheet.getpixel((90 + 1, 1)) == (220, 40, 40)        # the gold's frame
    assert sheet.getpixel((90 + 86 + 40, th // 2)) == (0, 128, 0)


def test_a_data_uri_is_a_jpeg_no_wider_than_asked_from_any_mode(tmp_path):
    rgba = Image.new("RGBA", (400, 100), (10, 20, 30, 128))
    uri = images.data_uri(rgba, 200)
    assert uri.startswith("data:image/jpeg;base64,")
    back = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert back.format == "JPEG" and back.size == (200, 50)
    Image.new("L", (120, 60), 90).save(tmp_path / "grey.png")
    out = images.save_jpeg(tmp_path / "grey.png", tmp_path / "grey.jpg", 500)
    with Image.open(out) as im:                                # narrower than asked: kept at its size
        assert im.format == "JPEG" and im.size == (120, 60) and im.mode == "RGB"


def test_a_pair_sheet_holds_one_captioned_thumbnail_per_pair(tmp_path):
    units = _pages(tmp_path, {"u1": (0, 0, 0), "u2": (0, 0, 0)})
    pairs = pd.DataFrame({"query_id": ["q1", "q2"], "unit_id": ["u1", "u2"], "label_model": ["sufficient", "irrelevant"],
                          "label_adjudicated": ["supporting", "irrelevant"]})
    sheet = images.pair_sheet(pairs, units, tmp_path, thumb_width=100)
    assert sheet.size == (2 * 108, int(100 * 9 / 16) + 44)
    caption = sheet.crop((0, int(100 * 9 / 16) + 20, 100, int(100 * 9 / 16) + 40))
    import numpy as np

    px = np.asarray(caption)
    assert ((px[..., 0] > 100) & (px[..., 1] < 80)).any()     # the labels line, in red
