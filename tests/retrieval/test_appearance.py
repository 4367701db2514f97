"""The appearance vector (retrieval.encoders.appearance): pixels only, look-alike layouts near each other, and the same-template neighbour check as a blocked sample."""

from __future__ import annotations

import numpy as np


def test_the_appearance_neighbour_check_is_a_blocked_sample_not_an_n_by_n_matrix(monkeypatch):
    """Stage 02's appearance check held every unit's similarity to every other (37 GiB at 100,000 units,
    found by benchmarks/scale_pipeline.py): now a block of units at a time, and at most NEIGHBOUR_SAMPLE
    units looked up (seeded); up to that size the figure is the exact all-units one."""
    import numpy as np

    from lookalike.retrieval.encoders import appearance

    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((300, 8)).astype(np.float32)
    templates = rng.integers(0, 4, size=300).astype(str)

    def brute(rows):
        sims = vectors @ vectors.T
        np.fill_diagonal(sims, -np.inf)
        return float(np.mean(templates[sims.argmax(axis=1)[rows]] == templates[rows]))

    monkeypatch.setattr(appearance, "NEIGHBOUR_BLOCK_CELLS", 7 * 300)          # blocks of 7 units
    observed, chance, n = appearance.same_template_neighbour_rate(vectors, templates)
    assert n == 300 and observed == brute(np.arange(300))
    _, counts = np.unique(templates, return_counts=True)
    assert chance == float(np.sum(counts * (counts - 1)) / (300 * 299))
    sampled, _, n = appearance.same_template_neighbour_rate(vectors, templates, sample=50, seed=1)
    rows = np.sort(np.random.default_rng(1).choice(300, size=50, replace=False))
    assert n == 50 and sampled == brute(rows)


def _page(bars: list[tuple[int, int, int, int]], ink=(30, 60, 150), paper=(255, 255, 255)):
    from PIL import Image, ImageDraw

    im = Image.new("RGB", (320, 180), paper)
    draw = ImageDraw.Draw(im)
    for box in bars:
        draw.rectangle(box, fill=ink)
    return im


def test_the_vector_is_unit_length_and_the_same_for_the_same_pixels():
    from lookalike.retrieval.encoders.appearance import appearance_vector

    page = _page([(20, 100, 60, 170), (80, 60, 120, 170), (140, 30, 180, 170)])
    v = appearance_vector(page)
    assert v.dtype == np.float32 and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    assert np.array_equal(v, appearance_vector(page.copy()))


def test_a_page_of_the_same_layout_is_nearer_than_a_page_of_another_layout():
    from lookalike.retrieval.encoders.appearance import appearance_vector

    bars = [(20, 100, 60, 170), (80, 60, 120, 170), (140, 30, 180, 170)]
    gold = appearance_vector(_page(bars))
    # the same template with other bar heights (another period's figures)
    alike = appearance_vector(_page([(20, 90, 60, 170), (80, 70, 120, 170), (140, 40, 180, 170)]))
    # another layout: one wide band across the top, as a text page's heading block
    other = appearance_vector(_page([(10, 10, 310, 50)]))
    assert float(gold @ alike) > float(gold @ other)
