"""The units schema and its helpers (data.schema): manifest tables read or refused with the file named, strata and stratified samples, images fitted and resolved, the corpus fingerprint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from lookalike.data import schema


def test_stratified_sample_takes_up_to_n_per_stratum_deterministically():
    units = pd.DataFrame({"unit_id": [f"u{i:02d}" for i in range(30)],
                          "content_type": ["chart"] * 20 + ["table"] * 8 + ["text"] * 2})
    a = schema.stratified_sample(units, 5, np.random.default_rng(3))
    b = schema.stratified_sample(units, 5, np.random.default_rng(3))
    assert a.equals(b)
    assert a.groupby("content_type").size().to_dict() == {"chart": 5, "table": 5, "text": 2}
    assert a["unit_id"].is_monotonic_increasing


def test_strata_counts_sorted():
    units = pd.DataFrame({"content_type": ["table", "chart", "chart"], "template_id": ["t", "b", "a"]})
    counts = schema.strata_counts(units)
    assert counts.values.tolist() == [["chart", "a", 1], ["chart", "b", 1], ["table", "t", 1]]


def test_a_manifest_table_that_is_missing_or_not_utf8_is_refused_with_its_path(tmp_path):
    with pytest.raises(schema.CorpusError, match="manifest not found"):
        schema.read_table(tmp_path / "nope.csv")
    bad = tmp_path / "latin1.csv"
    bad.write_bytes("unit_id,caption\nu1,caf\xe9\n".encode("latin-1"))
    with pytest.raises(schema.CorpusError, match=r"latin1\.csv: not UTF-8 text .*save the manifest as UTF-8"):
        schema.read_table(bad)
    good = tmp_path / "m.csv"
    good.write_text("unit_id,caption\nu1,\nu2,NA\n", encoding="utf-8")
    # every cell is text as written: an empty caption stays '', 'NA' stays 'NA' (never NaN)
    assert schema.read_table(good).to_dict("list") == {"unit_id": ["u1", "u2"], "caption": ["", "NA"]}


def test_fit_keeps_the_aspect_and_centres_on_white():
    from PIL import Image

    tall = Image.new("RGB", (10, 40), (0, 0, 0))
    box = schema.fit(tall, 40, 40)
    assert box.size == (40, 40)
    assert box.getpixel((20, 20)) == (0, 0, 0) and box.getpixel((2, 20)) == (255, 255, 255)


def test_relative_image_paths_resolve_against_the_manifest_folder(tmp_path):
    assert schema.resolve_image("a/b.png", tmp_path) == tmp_path / "a" / "b.png"
    assert schema.resolve_image(str(tmp_path / "c.png"), Path("/elsewhere")) == tmp_path / "c.png"


def test_the_fingerprint_follows_ids_and_bytes_not_row_order(tmp_path):
    (tmp_path / "a.png").write_bytes(b"one")
    (tmp_path / "b.png").write_bytes(b"two")
    units = pd.DataFrame({"unit_id": ["u1", "u2"], "image_path": ["a.png", "b.png"]})
    first = schema.fingerprint(units, tmp_path)
    assert schema.fingerprint(units.iloc[::-1], tmp_path) == first
    (tmp_path / "b.png").write_bytes(b"changed")
    assert schema.fingerprint(units, tmp_path) != first
    assert schema.fingerprint(units.assign(unit_id=["u1", "u3"]), tmp_path) != schema.fingerprint(units, tmp_path)
