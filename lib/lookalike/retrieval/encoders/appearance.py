"""A pixel-only appearance vector, for "nearest by appearance" and for clustering.

What it captures (each block standardised, weighted, the whole L2-normalised):
  layout   a 32 x 18 grey thumbnail (where ink and large shapes sit: bands, bars, tables);
  profile  the share of non-background pixels in 16 horizontal and 16 vertical bands;
  edges    edge density on a 6 x 4 grid (text-heavy vs chart vs empty regions);
  colour   an 8-bin histogram per RGB channel (a house style's palette).
It ignores what the text says, so two pages of one template differ mostly in their colours and
the exact bar heights — the "look alike" that hard negatives need. It reads pixels only.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageFilter, ImageOps

from lookalike import memory

VERSION = "1"
THUMB = (32, 18)
WEIGHTS = {"layout": 1.0, "profile": 0.7, "edges": 0.7, "colour": 0.5}


def _unit(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.float64)
    v = v - v.mean()
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def appearance_vector(img: Image.Image) -> np.ndarray:
    """A page's appearance vector: a grey thumbnail of its layout, ink profiles by row and column, and colour
    statistics (what look-alike pages share)."""
    rgb = img.convert("RGB")
    grey = ImageOps.grayscale(rgb)
    layout = np.asarray(grey.resize(THUMB, Image.BILINEAR), dtype=np.float64).ravel() / 255.0
    a = np.asarray(grey.resize((256, 144), Image.BILINEAR), dtype=np.float64) / 255.0
    background = np.median(a)
    ink = np.abs(a - background) > 0.15
    profile = np.r_[[b.mean() for b in np.array_split(ink, 16, axis=0)],
                    [b.mean() for b in np.array_split(ink, 16, axis=1)]]
    edges_img = np.asarray(grey.resize((256, 144)).filter(ImageFilter.FIND_EDGES), dtype=np.float64) / 255.0
    edges = np.array([cell.mean() for row in np.array_split(edges_img, 4, axis=0)
                      for cell in np.array_split(row, 6, axis=1)])
    c = np.asarray(rgb.resize((128, 72)), dtype=np.int64)
    colour = np.concatenate([np.bincount(c[..., k].ravel() // 32, minlength=8) for k in range(3)]) / (128 * 72)
    parts = [WEIGHTS["layout"] * _unit(layout), WEIGHTS["profile"] * _unit(profile),
             WEIGHTS["edges"] * _unit(edges), WEIGHTS["colour"] * _unit(colour)]
    v = np.concatenate(parts)
    return (v / np.linalg.norm(v)).astype(np.float32)


NEIGHBOUR_SAMPLE = 2000        # units whose nearest neighbour is looked up: the check is a sample, not n x n
NEIGHBOUR_BLOCK_CELLS = 16_000_000   # similarities held at once (64 MB of float32)


def same_template_neighbour_rate(vectors: np.ndarray, templates, sample: int = NEIGHBOUR_SAMPLE,
                                 seed: int = 0) -> tuple[float, float, int]:
    """Share of units whose nearest other unit (cosine, over the whole corpus) has the same template,
    that share by chance, and how many units it was measured on: every unit up to ``sample`` of them,
    else a seeded sample of ``sample`` units (an all-pairs matrix is n x n: 37 GiB at 100,000 units).
    Similarities are taken a block of units at a time."""
    templates = np.asarray(templates)
    n = len(templates)
    rows = (np.arange(n) if n <= sample else np.sort(np.random.default_rng(seed).choice(n, size=sample, replace=False)))
    step = max(1, NEIGHBOUR_BLOCK_CELLS // max(n, 1))
    nearest = np.empty(len(rows), dtype=np.int64)
    with memory.returning_freed_blocks():
        for start in range(0, len(rows), step):
            block = rows[start:start + step]
            sims = vectors[block] @ vectors.T
            sims[np.arange(len(block)), block] = -np.inf
            nearest[start:start + step] = sims.argmax(axis=1)
    observed = float(np.mean(templates[nearest] == templates[rows])) if len(rows) else 0.0
    _, counts = np.unique(templates, return_counts=True)
    chance = float(np.sum(counts * (counts - 1)) / (n * (n - 1))) if n > 1 else 0.0
    return observed, chance, len(rows)
