"""The leak ablation's computations (analysis.leak_ablation): shuffled metadata, clean indexes, the blind judging pool, imported judgements, judged@k, reference labels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from lookalike.analysis import leakage
from lookalike.retrieval import indexes as retrieve
from lookalike.retrieval.encoders.base import Vectors


def test_shuffled_metadata_moves_every_units_fields(ci_units):
    units, _ = ci_units
    moved = leakage.shuffled_metadata(units, seed=3)
    assert list(moved["unit_id"]) == list(units["unit_id"]) and list(moved["image_path"]) == list(units["image_path"])
    assert sorted(moved["filename"]) == sorted(units["filename"])
    assert (moved["filename"] != units["filename"]).mean() > 0.95


def test_clean_indexes_refuse_caption_vectors_in_the_image_path():
    caption = Vectors("caption-minilm", "caption-text", ["a", "b"], np.eye(2, dtype=np.float32))
    pixels = Vectors("ocr-minilm", "pixels", ["a", "b"], np.eye(2, dtype=np.float32))
    with pytest.raises(retrieve.ProvenanceError):
        leakage.build_indexes(caption, caption, injected=False)
    clean = leakage.build_indexes(pixels, caption)
    assert not clean.injected and not clean.image.allow_foreign_provenance
    injected = leakage.build_indexes(pixels, caption, injected=True)
    assert injected.injected and injected.image.allow_foreign_provenance     # bypass is explicit and recorded


def _runs():
    a = pd.DataFrame({"query_id": ["q1"] * 3 + ["q2"] * 3, "unit_id": ["u1", "u2", "u3", "u4", "u5", "u1"],
                      "score": [3.0, 2.0, 1.0, 3.0, 2.0, 1.0]})
    b = pd.DataFrame({"query_id": ["q1"] * 2 + ["q2"] * 2, "unit_id": ["u2", "u9", "u5", "u8"], "score": [2.0, 1.0, 2.0, 1.0]})
    return {"a": a, "b": b}


def test_pool_is_deduplicated_shuffled_and_blind():
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["first", "second"], "unit_id": ["u1", "u5"]})
    sheet = leakage.sheet(_runs(), queries, k=2, seed=1)
    assert len(sheet) == len(set(zip(sheet["query_id"], sheet["unit_id"]))) == 6
    assert list(sheet.columns) == ["item", "query_id", "text", "unit_id"]
    view = leakage.judge_view(sheet)
    assert list(view.columns) == ["item", "query", "label"]            # no unit id, system, rank or caption
    judged = sheet.iloc[:4][["query_id", "unit_id"]]
    again = leakage.sheet(_runs(), queries, k=2, seed=1, judged=judged)
    assert len(again) == 2 and not set(zip(again["query_id"], again["unit_id"])) & set(zip(judged["query_id"], judged["unit_id"]))


def test_import_judgements_round_trip_and_errors(tmp_path):
    queries = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["first", "second"], "unit_id": ["u1", "u5"]})
    sheet = leakage.sheet(_runs(), queries, k=2, seed=1)
    filled = leakage.judge_view(sheet)
    filled.loc[0, "label"] = "sufficient"
    filled.loc[1, "label"] = "irrelevant"
    filled.to_csv(tmp_path / "filled.csv", index=False)
    got = leakage.import_judgements(tmp_path / "filled.csv", sheet)
    assert list(got["label"]) == ["sufficient", "irrelevant"] and list(got["grade"]) == [2, 0]
    assert set(got["judge"]) == {"human"}
    assert (got["unit_id"].iloc[0], got["query_id"].iloc[0]) == (sheet["unit_id"].iloc[0], sheet["query_id"].iloc[0])
    filled.loc[2, "label"] = "3"
    filled.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="bad.csv: row 3: label '3' is not one of sufficient, supporting, irrelevant"):
        leakage.import_judgements(tmp_path / "bad.csv", sheet)
    # a sheet from before the labels (grades 2 / 1 / 0) reads through the same grades
    old = leakage.judge_view(sheet).rename(columns={"label": "grade"})
    old.loc[0, "grade"], old.loc[1, "grade"] = "1", "2"
    old.to_csv(tmp_path / "old.csv", index=False)
    assert list(leakage.import_judgements(tmp_path / "old.csv", sheet)["label"]) == ["supporting", "sufficient"]


def test_judged_at_k_shows_unfair_pools():
    judgements = pd.DataFrame({"query_id": ["q1", "q1"], "unit_id": ["u1", "u2"], "label": ["sufficient", "irrelevant"]})
    table = leakage.judged_at_k(_runs(), judgements, k=2).set_index("system")["judged_2"]
    assert table["a"] == pytest.approx(0.5)       # q1: u1,u2 judged (1.0); q2: none (0.0)
    assert table["b"] == pytest.approx(0.25)


def test_reference_labels(ci_units):
    units, _ = ci_units
    q = leakage.build_query_sets(units, seed=7).head(2)
    target = q["unit_id"].iloc[0]
    same = units[(units["template_id"] == units.set_index("unit_id").loc[target, "template_id"])
                 & (units["metric"] == units.set_index("unit_id").loc[target, "metric"])
                 & (units["entity"] == units.set_index("unit_id").loc[target, "entity"])
                 & (units["unit_id"] != target)]["unit_id"].iloc[0]
    sheet = pd.DataFrame({"item": ["j0", "j1"], "query_id": [q["query_id"].iloc[0]] * 2, "unit_id": [target, same]})
    got = leakage.reference_labels(sheet, q, units)
    near = "supporting" if units.set_index("unit_id").loc[target, "metric"] else "irrelevant"
    assert list(got["label"]) == ["sufficient", near]
    assert list(got["grade"]) == [2, 1 if near == "supporting" else 0]
    assert set(got["judge"]) == {"reference"}
