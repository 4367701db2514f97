"""The report's charts (report.charts): every estimate drawn with its interval, the sets in reading order,
nothing drawn from an empty table, and an extrapolation drawn and titled as one."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lookalike.report import charts


def _spec(chart) -> str:
    return json.dumps(chart.to_dict(), sort_keys=True)


def _encodings(spec: dict) -> list[dict]:
    """Every encoding block in a chart spec (layers and facets included)."""
    out, stack = [], [spec]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "encoding" in item:
                out.append(item["encoding"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _draws_interval(chart, lo: str, hi: str) -> bool:
    return any(enc.get(a, {}).get("field") == lo and enc.get(b, {}).get("field") == hi
               for enc in _encodings(chart.to_dict()) for a, b in (("y", "y2"), ("x", "x2")))


def test_every_estimate_is_drawn_with_its_interval():
    top = pd.DataFrame({"system": ["s"] * 3, "negatives": ["hard", "corpus", "random"], "n": [9] * 3,
                        "top1": [0.3, 0.2, 0.9], "top1_lo": [0.1, 0.05, 0.6], "top1_hi": [0.6, 0.5, 1.0]})
    assert _draws_interval(charts.top1(top, "t"), "top1_lo", "top1_hi")
    look = pd.DataFrame({"system": ["s"], "provenance": ["pixels"], "recall_10": [0.5], "recall_10_lo": [0.3],
                         "recall_10_hi": [0.7]})
    assert _draws_interval(charts.first_look(look), "recall_10_lo", "recall_10_hi")
    shares = pd.DataFrame({"axis": ["period"], "n": [10], "answerable": [2], "share": [0.2], "share_lo": [0.05],
                           "share_hi": [0.5]})
    assert _draws_interval(charts.answerable(shares, "reference"), "share_lo", "share_hi")
    rules = pd.DataFrame({"rule": ["top"], "judge": ["j"], "contamination": [0.1], "contamination_lo": [0.0],
                          "contamination_hi": [0.3], "n_negatives": [40], "backfill_share": [0.0]})
    assert _draws_interval(charts.negative_rules(rules, ["top"], "validated"), "contamination_lo", "contamination_hi")
    ablation = pd.DataFrame({"index": ["image"], "query_set": ["blind"], "recall_10": [0.4], "recall_10_lo": [0.2],
                             "recall_10_hi": [0.6]})
    assert _draws_interval(charts.leak_ablation(ablation, ["blind"], ["image"]), "recall_10_lo", "recall_10_hi")


def test_the_sets_of_negatives_read_random_hard_corpus_whatever_the_rows_order():
    top = pd.DataFrame({"system": ["s"] * 3, "negatives": ["corpus", "hard", "random"], "n": [9] * 3,
                        "top1": [0.1, 0.2, 0.3], "top1_lo": [0.0] * 3, "top1_hi": [0.5] * 3})
    sorts = [enc["x"].get("sort") for enc in _encodings(charts.top1(top, "t").to_dict()) if "x" in enc]
    assert sorts and all(s == ["random", "hard", "corpus"] for s in sorts)


@pytest.mark.parametrize("make", [
    lambda: charts.first_look(pd.DataFrame(columns=["system", "provenance", "recall_10", "recall_10_lo", "recall_10_hi"])),
    lambda: charts.answerable(pd.DataFrame(columns=["axis", "n", "answerable", "share", "share_lo", "share_hi"]), "j"),
    lambda: charts.sufficiency(pd.DataFrame(columns=["system", "k", "n", "sufficient", "supporting_only", "neither"])),
    lambda: charts.negative_rules(pd.DataFrame(columns=["rule", "judge", "contamination"]), [], "all"),
], ids=["first_look", "answerable", "sufficiency", "negative_rules"])
def test_nothing_is_drawn_from_an_empty_table(make):
    assert make() is None


def _curve(extrapolated: bool) -> pd.DataFrame:
    rows = [("s", "recall@10", size, 40, value, value - 0.1, value + 0.1, False)
            for size, value in ((100, 0.9), (200, 0.8), (400, 0.7))]
    if extrapolated:
        rows.append(("s", "recall@10", 10_000, 40, 0.4, 0.2, 0.6, True))
    return pd.DataFrame(rows, columns=["system", "measure", "corpus_size", "n", "value", "lo", "hi", "extrapolated"])


def test_an_extrapolation_is_dashed_hollow_and_said_in_the_title():
    guessed = charts.haystack(_curve(True)).to_dict()
    assert "dashed: extrapolated, not measured" in guessed["title"] and "n = 40 questions" in guessed["title"]
    marks = json.dumps(guessed)
    assert '"strokeDash": [5, 4]' in marks and '"filled": false' in marks
    measured = charts.haystack(_curve(False)).to_dict()
    assert "extrapolated" not in measured["title"] and "strokeDash" not in json.dumps(measured)


def test_the_sufficiency_stack_keeps_its_outcome_order_and_colours():
    suff = pd.DataFrame({"system": ["s"], "k": [5], "n": [20], "sufficient": [0.5], "supporting_only": [0.3],
                         "neither": [0.2]})
    spec = _spec(charts.sufficiency(suff))
    assert '"sort": ["sufficient", "supporting_only", "neither"]' in spec
    assert '"range": ["#2e7d32", "#f9a825", "#c62828"]' in spec
