"""Other libraries' own pinned values, run through lookalike as data: ir_measures' provider tests
(tests/test_pytrec_eval.py, test_judged.py, test_compat.py) and ranx's metric unit tests. Each case
holds the peer's inputs, the measure in the peer's own spelling, the values its test pins and its
tolerance; the peer's repository and commit are in each data file. Every case must agree: none
differs by definition today (docs/metrics.md says where the libraries part, and these inputs show
that lookalike computes each library's name as that library does)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lookalike.eval import metrics

HERE = Path(__file__).parent / "peers"

def _load(name: str) -> dict:
    return json.loads((HERE / name).read_text(encoding="utf-8"))


def _frames(data: dict, case: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    qrels = pd.DataFrame(data["fixtures"][case["qrels"]], columns=["query_id", "unit_id", "relevance"])
    run = pd.DataFrame(data["fixtures"][case["run"]], columns=["query_id", "unit_id", "score"])
    return qrels, run


def _check(data: dict, case: dict) -> None:
    """lookalike's value of the case's measure (in the peer's spelling) against each value the peer pins:
    per query, or 'all' for the peer's aggregate."""
    qrels, run = _frames(data, case)
    measure = case["measure"]
    ev = metrics.evaluate(qrels, run, [measure])
    mean = ev.mean()
    for qid, expected in case["expected"].items():
        got = mean[measure] if qid == "all" else ev.per_query.loc[qid, measure]
        assert got == pytest.approx(expected, abs=max(case["tolerance"], 1e-12)), (measure, qid)


IR = _load("ir_measures_cases.json")


def test_the_ir_measures_port_is_whole():
    assert IR["commit"] and len(IR["cases"]) >= 80
    assert sum(len(c["expected"]) for c in IR["cases"]) >= 130


@pytest.mark.parametrize("case", IR["cases"], ids=[f"{c['source'].split('::')[1]}-{c['measure']}-{i}"
                                                   for i, c in enumerate(IR["cases"])])
def test_ir_measures_pinned_values(case):
    _check(IR, case)


RANX = _load("ranx_cases.json")


def test_the_ranx_port_is_whole():
    assert RANX["commit"] and len(RANX["cases"]) >= 25


@pytest.mark.parametrize("case", RANX["cases"], ids=[f"{c['source'].split('::')[1]}-{c['measure']}-{i}"
                                                     for i, c in enumerate(RANX["cases"])])
def test_ranx_pinned_values(case):
    _check(RANX, case)


# ir_measures' cwl_eval and gdeval tests pin values made by outside tools; their inputs sit in the shared
# data folder (tests skip without it). The measures lookalike does not compute are refused by name.
NOT_COMPUTED = ("BPM", "INSQ", "INST", "SDCG", "NERR8", "NERR9", "NERR10", "NERR11")


@pytest.mark.shared_data
def test_cwl_eval_and_gdeval_pinned_values(shared_data):
    d = shared_data / "ir_measures"
    spec = json.loads((d / "expected.json").read_text())
    qrels, run = metrics.Qrels.read(d / spec["cwl"]["qrels"]), metrics.Run.read(d / spec["cwl"]["run"])
    checked = 0
    for measure, values in spec["cwl"]["per_query"].items():
        if measure.startswith(NOT_COMPUTED):
            with pytest.raises(metrics.MeasureError, match="unknown measure"):
                metrics.evaluate(qrels, run, [measure])
            continue
        pq = metrics.evaluate(qrels, run, [measure]).per_query[measure]
        for qid, value in values.items():
            assert pq[qid] == pytest.approx(value, abs=1e-4), (measure, qid)
            checked += 1
    assert checked >= 3 * 7          # AP, P@1/5/10/20, RBP(p=0.9,rel=1), RR on three topics
    g = spec["gdeval"]
    qrels, run = metrics.Qrels.read(d / g["qrels"]), metrics.Run.read(d / g["run"])
    for measure in ("ERR@20", "ERR@2"):
        ev = metrics.evaluate(qrels, run, [measure])
        for qid, value in g[measure]["per_query"].items():
            assert ev.per_query.loc[qid, measure] == pytest.approx(value, abs=5e-6)
        assert ev.mean()[measure] == pytest.approx(g[measure]["mean"], abs=5e-6)
