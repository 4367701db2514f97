"""Fusion of runs (retrieval.fusion): RRF, round robin and score-sum normalisation."""

from __future__ import annotations

import pandas as pd
import pytest
from lookalike.retrieval import fusion


def _run(pairs):
    return pd.DataFrame(pairs, columns=["query_id", "unit_id", "score"])


def test_rrf_of_one_list_keeps_its_order():
    run = _run([("q", "a", 0.2), ("q", "b", 0.9), ("q", "c", 0.5), ("r", "x", 1.0)])
    fused = fusion.rrf([run])
    assert list(fused[fused["query_id"] == "q"]["unit_id"]) == ["b", "c", "a"]


def test_rrf_sums_reciprocal_ranks():
    a = _run([("q", "u1", 3.0), ("q", "u2", 2.0)])
    b = _run([("q", "u2", 5.0), ("q", "u3", 1.0)])
    fused = fusion.rrf([a, b], k=60).set_index("unit_id")["score"]
    assert fused["u2"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["u1"] == pytest.approx(1 / 61) and fused["u3"] == pytest.approx(1 / 62)


def test_round_robin_interleaves_without_duplicates():
    a = _run([("q", "u1", 3.0), ("q", "u2", 2.0), ("q", "u3", 1.0)])
    b = _run([("q", "u2", 3.0), ("q", "u4", 2.0), ("q", "u1", 1.0)])
    fused = fusion.round_robin([a, b])
    order = list(fused.sort_values("score", ascending=False)["unit_id"])
    assert order == ["u1", "u2", "u4", "u3"]
    assert len(order) == len(set(order))


def test_score_sum_normalisation():
    a = _run([("q", "u1", 10.0), ("q", "u2", 0.0)])
    b = _run([("q", "u2", 1.0), ("q", "u1", 0.5), ("q", "u3", 0.0)])
    mm = fusion.score_sum([a, b], "minmax").set_index("unit_id")["score"]
    assert mm["u1"] == pytest.approx(1.5) and mm["u2"] == pytest.approx(1.0) and mm["u3"] == 0.0
    z = fusion.normalise_scores(b, "zscore")
    assert z["score"].mean() == pytest.approx(0.0) and z["score"].std(ddof=0) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown normalisation"):
        fusion.normalise_scores(a, "rank")
