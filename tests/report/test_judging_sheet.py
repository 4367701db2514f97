"""The blind judging sheet (report.judging_sheet)."""

from __future__ import annotations

from pathlib import Path
import pandas as pd
from lookalike.analysis import leakage


def test_judging_sheet_html_hides_ids_and_escapes(tmp_path, ci_units):
    units, base = ci_units
    sheet = pd.DataFrame({"item": ["j0"], "query_id": ["q"], "text": ["<script>x</script> revenue"],
                          "unit_id": [units["unit_id"].iloc[1]]})
    page = leakage.judging_sheet_html(sheet, units, tmp_path / "sheet.html", base).read_text()
    assert "&lt;script&gt;x" in page and "<script>x" not in page
    assert units["unit_id"].iloc[1] not in page and Path(units["image_path"].iloc[1]).stem not in page
    assert len(list((tmp_path / "sheet_images").iterdir())) == 1
