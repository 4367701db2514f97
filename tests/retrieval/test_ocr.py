"""OCR (retrieval.encoders.ocr): a demo page's title read, and worker processes spawned that read what one process reads."""

from __future__ import annotations

import pytest
from lookalike.io.cache import Cache
from lookalike.retrieval.encoders import ocr


@pytest.mark.skipif(not ocr.tesseract_available(), reason="tesseract-ocr not installed (make setup installs it)")
def test_ocr_reads_the_title_of_a_demo_page(ci_units, tmp_path):
    units, base = ci_units
    picks = units[units["template_id"].isin(["segment_bar", "kpi_table", "risk_factors"])].groupby("template_id").head(1)
    texts, stats = ocr.ocr_many([str(base / p) for p in picks["image_path"]], "tesseract", Cache(tmp_path), 1, False)
    by_template = dict(zip(picks["template_id"], texts))
    assert "by segment" in by_template["segment_bar"]          # e.g. "Revenue by segment"
    assert "Key figures" in by_template["kpi_table"]            # white text on a coloured title band
    assert "Risk factors" in by_template["risk_factors"]
    assert stats["computed"] == 3


@pytest.mark.skipif(not ocr.tesseract_available(), reason="tesseract-ocr not installed (make setup installs it)")
def test_ocr_workers_are_spawned_not_forked_and_read_what_one_process_reads(ci_units, tmp_path, monkeypatch):
    # a forked worker of a threaded stage kernel can deadlock on a lock copied mid-use; the pool must spawn
    units, base = ci_units
    paths = [str(base / p) for p in units["image_path"].head(3)]
    contexts = []
    real_pool = ocr.ProcessPoolExecutor

    def recording_pool(*args, **kwargs):
        contexts.append(kwargs.get("mp_context"))
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(ocr, "ProcessPoolExecutor", recording_pool)
    pooled, stats = ocr.ocr_many(paths, "tesseract", Cache(tmp_path / "pooled"), 2, False)
    assert stats["computed"] == 3
    assert [c.get_start_method() if c else None for c in contexts] == ["spawn"]
    assert pooled == [ocr.ocr_image(p, "tesseract") for p in paths]
