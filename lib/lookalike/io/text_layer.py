"""A PDF page's own text (its text layer): when it may stand in for OCR of the page's pixels, and why not.

A text layer is trusted only where it is what a reader sees. Stage 01 reads each rendered page's layer and
keeps it beside the render (``<render>.text-layer.txt``) when every rule below holds; otherwise the page is
read by OCR, and the reason is kept beside the render (``<render>.text-layer-refused.txt``) for units.csv's
``text_source`` to say. The rules, in order:

- **present and dense enough**: at least MIN_CHARS_PER_SQUARE_INCH visible characters per square inch (a
  letter page: 94; a scan carries none, a page with a stray page number a handful);
- **readable**: at most MAX_UNREADABLE_SHARE of them replacement, control or private-use characters (a font
  without a Unicode map gives those);
- **drawn where a reader sees it**: at most MAX_HIDDEN_SHARE of the page's characters (a sample of at most
  HIDDEN_SAMPLE, spread over the page) drawn invisibly — text render mode 3 (invisible) or 7 (clip only),
  a transparent fill, covered by an image or an opaque filled shape drawn after it, or leaving no mark in
  the page's own render (white on white, clipped away, outside the page). An OCR'd scan whose words lie
  invisibly over the image is read by OCR here too: its layer is an earlier OCR's, not what the page shows;
- **words, not a scrambled alphabet**: on a page whose letters are mostly a–z (at least MIN_BIGRAMS letter
  pairs inside words), at least MIN_COMMON_BIGRAM_SHARE of those pairs are among COMMON_BIGRAMS, the
  commonest pairs of English and the other Western European languages. A font whose Unicode map shifts
  or scrambles the alphabet ("HJTL Jvywvyhapvu" for "ACME Corporation") fails it. Measured on the shared
  10-Q filings and public records (575 pages with 150 pairs or more): 0.41 at the lowest, 0.56 the median;
  the same pages with the alphabet shifted by 1–25 places: at most 0.24, scrambled at random: at most 0.20.
  Pages in other scripts, or with too few letters to say, are not judged by this rule.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

TEXT_LAYER_SUFFIX = ".text-layer.txt"
REFUSED_SUFFIX = ".text-layer-refused.txt"
MIN_CHARS_PER_SQUARE_INCH = 1.0
MAX_UNREADABLE_SHARE = 0.10
MAX_HIDDEN_SHARE = 0.10
HIDDEN_SAMPLE = 400
# a glyph's box in the render whose grey levels span less than this shows no glyph
NO_MARK_SPREAD = 24
MIN_BIGRAMS = 150
MIN_COMMON_BIGRAM_SHARE = 0.30
COMMON_BIGRAMS = frozenset(
    "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me de hi ri "
    "ro ic ne ea ra ce li ch ll be ma si om ur".split())


def text_layer_problem(text: str, width_pt: float, height_pt: float) -> str:
    """'' when a page's text (the layer's characters, whitespace-normalised) can stand in for OCR of its
    pixels by the rules on the text alone (dense enough, readable, words); otherwise why not."""
    visible = [c for c in text if not c.isspace()]
    if not visible:
        return "no text layer"
    unreadable = sum(1 for c in visible if c == "\ufffd" or unicodedata.category(c) in ("Cc", "Cf", "Co", "Cn", "Cs"))
    if unreadable > MAX_UNREADABLE_SHARE * len(visible):
        return f"{unreadable} of {len(visible)} characters are replacement, control or private-use characters"
    area = (width_pt / 72) * (height_pt / 72)
    if len(visible) < MIN_CHARS_PER_SQUARE_INCH * area:
        return f"{len(visible)} characters on a {area:.0f} square-inch page (fewer than {MIN_CHARS_PER_SQUARE_INCH:g} per square inch)"
    return garbled_problem(text)


def garbled_problem(text: str) -> str:
    """'' unless the text's letters do not form words: on a page of mostly a–z letters with at least
    MIN_BIGRAMS pairs inside words, fewer than MIN_COMMON_BIGRAM_SHARE of them common (module docstring)."""
    letters = [c for c in text if c.isalpha()]
    ascii_letters = [c for c in letters if c.isascii()]
    if len(ascii_letters) < len(letters) / 2:
        return ""
    pairs = [w[i:i + 2] for w in re.findall(r"[a-z]{2,}", text.lower()) for i in range(len(w) - 1)]
    if len(pairs) < MIN_BIGRAMS:
        return ""
    common = sum(p in COMMON_BIGRAMS for p in pairs) / len(pairs)
    if common < MIN_COMMON_BIGRAM_SHARE:
        return (f"its letters do not form words: {common:.0%} of its {len(pairs)} letter pairs are common ones "
                f"(a page of words has {MIN_COMMON_BIGRAM_SHARE:.0%} or more; a font map that scrambles the "
                "alphabet gives this)")
    return ""


def hidden_problem(page, textpage, grey) -> str:
    """'' unless more than MAX_HIDDEN_SHARE of a page's characters are drawn where no reader sees them
    (module docstring), read from pdfium's page objects and the page's own render. page, textpage:
    pypdfium2's PdfPage and PdfTextPage; grey: the render as a 2-D uint8 array (rows from the top)."""
    import ctypes

    import numpy as np
    import pypdfium2.raw as raw

    tp = textpage.raw
    count = raw.FPDFText_CountChars(tp)
    sample = [i for i in range(0, count, max(1, count // HIDDEN_SAMPLE))
              if raw.FPDFText_GetUnicode(tp, i) > 32 and not chr(raw.FPDFText_GetUnicode(tp, i)).isspace()]
    if not sample:
        return ""
    objects = [raw.FPDFPage_GetObject(page.raw, k) for k in range(raw.FPDFPage_CountObjects(page.raw))]
    covers = []         # (z-order, left, bottom, right, top) of images and opaque filled shapes
    for k, o in enumerate(objects):
        kind = raw.FPDFPageObj_GetType(o)
        if kind == raw.FPDF_PAGEOBJ_PATH:
            fill, stroke = ctypes.c_int(0), ctypes.c_int(0)
            r, g, b, a = (ctypes.c_uint(0) for _ in range(4))
            if not (raw.FPDFPath_GetDrawMode(o, ctypes.byref(fill), ctypes.byref(stroke)) and fill.value
                    and raw.FPDFPageObj_GetFillColor(o, *map(ctypes.byref, (r, g, b, a))) and a.value == 255):
                continue
        elif kind != raw.FPDF_PAGEOBJ_IMAGE:
            continue
        box = [ctypes.c_float(0) for _ in range(4)]
        if raw.FPDFPageObj_GetBounds(o, *map(ctypes.byref, box)):
            covers.append((k, *(v.value for v in box)))
    why: Counter = Counter()
    boxes = []          # (z-order of its text object, left, bottom, right, top) of each character still visible
    for i in sample:
        obj = raw.FPDFText_GetTextObject(tp, i)
        mode = raw.FPDFTextObj_GetTextRenderMode(obj) if obj else raw.FPDF_TEXTRENDERMODE_FILL
        if mode in (raw.FPDF_TEXTRENDERMODE_INVISIBLE, raw.FPDF_TEXTRENDERMODE_CLIP):
            why["drawn invisibly (text render mode 3 or 7)"] += 1
            continue
        r, g, b, a = (ctypes.c_uint(0) for _ in range(4))
        if raw.FPDFText_GetFillColor(tp, i, *map(ctypes.byref, (r, g, b, a))) and a.value == 0:
            why["drawn transparent"] += 1
            continue
        left, right, bottom, top = (ctypes.c_double(0) for _ in range(4))
        if raw.FPDFText_GetCharBox(tp, i, *map(ctypes.byref, (left, right, bottom, top))):
            boxes.append((ctypes.cast(obj, ctypes.c_void_p).value or 0, left.value, bottom.value, right.value,
                          top.value))
    if boxes:
        box = np.asarray([b[1:] for b in boxes], dtype=np.float64)
        covered = np.zeros(len(box), dtype=bool)
        if covers:
            c = np.asarray(covers, dtype=np.float64)
            inside = ((c[None, :, 1] <= box[:, None, 0]) & (c[None, :, 2] <= box[:, None, 1])
                      & (c[None, :, 3] >= box[:, None, 2]) & (c[None, :, 4] >= box[:, None, 3]))
            if inside.any():
                # drawn over the character, or under it (a table cell's shading)? the drawing order says
                place = {ctypes.cast(o, ctypes.c_void_p).value: k for k, o in enumerate(objects)}
                z = np.asarray([place.get(b[0], len(objects)) for b in boxes], dtype=np.float64)
                covered = (inside & (c[None, :, 0] > z[:, None])).any(axis=1)
        why["covered by an image or a filled shape drawn over it"] += int(covered.sum())
        height, width = grey.shape
        # page space -> the render's pixels (pdfium's own transform: page rotation and origin included)
        corners = []        # pdfium's transform gives whole pixels: three points 1,000 pt apart fix it closely
        for x, y in ((0.0, 0.0), (1000.0, 0.0), (0.0, 1000.0)):
            ix, iy = ctypes.c_int(0), ctypes.c_int(0)
            raw.FPDF_PageToDevice(page.raw, 0, 0, width, height, 0, x, y, ctypes.byref(ix), ctypes.byref(iy))
            corners.append((ix.value, iy.value))
        step = 1000.0
        (ox, oy), (ax, ay), (bx, by) = corners
        ux, uy, vx, vy = (ax - ox) / step, (ay - oy) / step, (bx - ox) / step, (by - oy) / step
        for left, bottom, right, top in box[~covered]:
            xs = [ox + ux * x + vx * y for x in (left, right) for y in (bottom, top)]
            ys = [oy + uy * x + vy * y for x in (left, right) for y in (bottom, top)]
            x0, x1 = int(np.floor(min(xs))), int(np.ceil(max(xs)))
            y0, y1 = int(np.floor(min(ys))), int(np.ceil(max(ys)))
            region = grey[max(0, y0):min(height, y1 + 1), max(0, x0):min(width, x1 + 1)]
            if region.size == 0 or int(region.max()) - int(region.min()) < NO_MARK_SPREAD:
                why["leaving no mark in the render (the background's colour, clipped, or off the page)"] += 1
    hidden = sum(why.values())
    if hidden <= MAX_HIDDEN_SHARE * len(sample):
        return ""
    return (f"hidden text: {hidden} of {len(sample)} characters checked are "
            + "; ".join(f"{n} {what}" for what, n in why.most_common()))


def text_layer_path(image: Path | str) -> Path:
    """Where a rendered page's usable text layer is kept: beside the render, named after it."""
    image = Path(image)
    return image.with_name(image.name + TEXT_LAYER_SUFFIX)


def refused_path(image: Path | str) -> Path:
    """Where the reason a rendered page's text layer was not used is kept (none when it had no text)."""
    image = Path(image)
    return image.with_name(image.name + REFUSED_SUFFIX)


def read_text_layer(image: Path | str) -> str | None:
    """A rendered PDF page's usable text layer (whitespace-normalised), or None when it has none."""
    try:
        return text_layer_path(image).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def read_refusal(image: Path | str) -> str:
    """Why a rendered page's text layer was refused ('' when it was used, or the page had none)."""
    try:
        return refused_path(image).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def keep(page, target: Path, w_pt: float, h_pt: float, image=None) -> None:
    """Read the page's own text and keep it beside its render when every rule holds; otherwise keep the
    reason (a page with no text at all keeps nothing: a scan is read by OCR as a matter of course). A page
    whose text cannot be read is left to OCR. image: the render (PIL) when the caller has it in memory;
    otherwise it is read from target."""
    layer, refused = text_layer_path(target), refused_path(target)
    if layer.is_file() or refused.is_file():
        return
    try:
        textpage = page.get_textpage()
        try:
            text = " ".join(textpage.get_text_range().split())
            problem = text_layer_problem(text, w_pt, h_pt)
            if not problem:
                import numpy as np
                from PIL import Image

                if image is None:
                    with Image.open(target) as img:
                        grey = np.asarray(img.convert("L"))
                else:
                    grey = np.asarray(image.convert("L"))
                problem = hidden_problem(page, textpage, grey)
        finally:
            textpage.close()
    except Exception:  # noqa: BLE001 - an unreadable text layer is no text layer: OCR reads the pixels
        return
    if problem == "no text layer":
        return
    out, body = (refused, problem) if problem else (layer, text)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(body, encoding="utf-8")
    tmp.replace(out)
