"""The public API (lookalike.compare / Report / open_run / read_*) and lookalike.plugin."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import lookalike


def _data(n_queries: int = 30, seed: int = 0):
    """Qrels with two relevant units per query among 20, and three runs of different skill."""
    rng = np.random.default_rng(seed)
    qrels, runs = [], {"weak": [], "mid": [], "strong": []}
    for q in range(n_queries):
        qid = f"q{q:03d}"
        rel = set(rng.choice(20, 2, replace=False).tolist())
        qrels += [(qid, f"u{u:02d}", int(u in rel)) for u in range(20)]
        for name, skill in (("weak", 0.0), ("mid", 0.8), ("strong", 2.0)):
            scores = rng.normal(size=20) + skill * np.isin(np.arange(20), list(rel))
            runs[name] += [(qid, f"u{u:02d}", float(s)) for u, s in enumerate(scores)]
    q = pd.DataFrame(qrels, columns=["query_id", "unit_id", "relevance"])
    return q, {k: pd.DataFrame(v, columns=["query_id", "unit_id", "score"]) for k, v in runs.items()}


def test_read_helpers_and_parse_measure(tmp_path):
    (tmp_path / "q").write_text("q1 0 a 1\nq1 0 b 0\n")
    (tmp_path / "r").write_text("q1 Q0 b 1 2.0 mine\nq1 Q0 a 2 1.0 mine\n")
    q, r = lookalike.read_qrels(tmp_path / "q"), lookalike.read_run(tmp_path / "r")
    assert r.name == "mine" and lookalike.evaluate(q, r, ["recip_rank"]).mean()["recip_rank"] == 0.5
    one = lookalike.parse_measure("ndcg_cut.10")
    assert one == lookalike.parse_measure("nDCG@10") == lookalike.parse_measure("ndcg@10") and one.trec_name == "ndcg_cut_10"
    with pytest.raises(lookalike.MeasureError, match="names 2 measures"):
        lookalike.parse_measure("P.5,10")


def _finished(tmp_path: Path) -> Path:
    qrels, runs = _data(6)
    from lookalike.eval import ranking, trec

    root = tmp_path / "run"
    (root / "tables").mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"params": {"corpus": {"source": "demo"}}, "finished": "x"}))
    pd.DataFrame({"system": ["mid"], "value": [0.5], "extrapolated": [False]}).to_csv(root / "tables" / "t.csv",
                                                                                      index=False)
    (root / "qrels").mkdir()
    trec.write_qrels(qrels, root / "qrels" / "evidence.qrels")
    (root / "runs").mkdir()
    for name, run in runs.items():
        ranking.write_run(run, root / "runs" / f"{name}.run", tag=name)
    return root


def test_open_run_reads_a_finished_run_back(tmp_path):
    run = lookalike.open_run(_finished(tmp_path))
    assert run.tables == ["t"] and run["t"]["extrapolated"].dtype == bool
    assert set(run.runs()) == {"weak", "mid", "strong"} and run.params["corpus"]["source"] == "demo"
    rep = run.compare(["map"], baseline="weak", n_boot=200, n_perm=200)
    assert rep.n_queries == 6 and rep.baseline == "weak"
    with pytest.raises(KeyError, match="it has t"):
        run.table("headline")
    with pytest.raises(KeyError, match="it has evidence"):
        run.qrels("labels")
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        lookalike.open_run(tmp_path)




def _any_argument():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6)
    nested = st.dictionaries(st.text(max_size=4), st.dictionaries(st.text(max_size=4), scalars, max_size=3)
                             | scalars | st.lists(scalars, max_size=3), max_size=3)
    return nested | scalars | st.lists(scalars, max_size=3) | st.dictionaries(st.integers(), scalars, max_size=2)


def test_the_api_refuses_any_argument_of_the_wrong_shape_in_words():
    """evaluate and compare, given qrels and runs of any shape hypothesis draws (the catalogue's {'q1': 'd1'}
    among them): a result, or a TypeError / ValueError whose message names the argument or the row —
    never an AttributeError from deep inside (``'str' object has no attribute 'keys'``)."""
    import warnings

    from hypothesis import HealthCheck, example, given, settings

    good_q, good_r = {"q1": {"d1": 1}}, {"q1": {"d1": 1.0}}

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(qrels=_any_argument(), run=_any_argument())
    @example(qrels={"q1": "d1"}, run=good_r)
    @example(qrels=good_q, run={"q1": ["d1"]})
    @example(qrels={"q1": {"d1": "x"}}, run=good_r)
    def check(qrels, run):
        for q, r in ((qrels, good_r), (good_q, run), (qrels, run)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    lookalike.evaluate(q, r, ["map", "ndcg@10"])
            except (TypeError, ValueError) as exc:
                assert str(exc) and "object has no attribute" not in str(exc), (q, r, exc)

    check()
