"""Paired comparison of runs (eval.compare): agreement with evaluate and Holm, intervals that do not move, refusals, missing queries said, the saved report escaped, p-values as people read them."""

from __future__ import annotations

import json
import numpy as np
import pandas as pd
import pytest
import lookalike
from lookalike.eval import metrics
from lookalike.eval import stats
from tests.test_api import _data


def test_compare_agrees_with_evaluate_and_with_holm_per_measure():
    qrels, runs = _data()
    rep = lookalike.compare(qrels, runs, ["ndcg@10", "P@5"], baseline="weak", n_boot=500, n_perm=2000)
    t = rep.to_dataframe()
    assert rep.systems == ["weak", "mid", "strong"] and list(t["measure"].unique()) == ["ndcg@10", "P@5"]
    for name, run in runs.items():
        means = metrics.evaluate(qrels, run, ["ndcg_cut_10", "P_5"]).mean()
        got = t[t["system"] == name].set_index("measure")["mean"]
        assert got["ndcg@10"] == pytest.approx(means["ndcg_cut_10"]) and got["P@5"] == pytest.approx(means["P_5"])
    for _m, part in t.groupby("measure"):
        others = part[part["system"] != "weak"]
        assert np.allclose(others["p_holm"], stats.holm(others["p_randomisation"].to_numpy()))
        assert (others["wins"] + others["ties"] + others["losses"] == 30).all()
        base = part[part["system"] == "weak"].iloc[0]
        assert np.isnan(base["delta"]) and pd.isna(base["wins"])
    strong = t[(t["system"] == "strong") & (t["measure"] == "ndcg@10")].iloc[0]
    assert strong["delta"] > 0 and strong["p_holm"] < 0.05 and strong["delta_lo"] > 0


def test_adding_a_run_moves_no_other_runs_interval():
    qrels, runs = _data()
    two = lookalike.compare(qrels, {k: runs[k] for k in ("weak", "mid")}, ["map"], n_boot=300, n_perm=500).table
    three = lookalike.compare(qrels, runs, ["map"], n_boot=300, n_perm=500).table
    for name in ("weak", "mid"):
        a, b = two[two["system"] == name].iloc[0], three[three["system"] == name].iloc[0]
        assert (a["ci_lo"], a["ci_hi"]) == (b["ci_lo"], b["ci_hi"])


def test_compare_refuses_what_it_cannot_compare():
    qrels, runs = _data(5)
    with pytest.raises(lookalike.MeasureError, match="num_q is a count"):
        lookalike.compare(qrels, runs, ["num_q"])
    with pytest.raises(ValueError, match="at least two runs"):
        lookalike.compare(qrels, {"weak": runs["weak"]})
    with pytest.raises(ValueError, match="baseline 'bm25' is not one of the runs"):
        lookalike.compare(qrels, runs, baseline="bm25")
    with pytest.raises(lookalike.MeasureError, match="did you mean"):
        lookalike.compare(qrels, runs, ["ndgc@10"])


def test_queries_one_run_lacks_are_left_out_and_said():
    qrels, runs = _data(10)
    short = runs["mid"][runs["mid"]["query_id"] != "q000"]
    rep = lookalike.compare(qrels, {"weak": runs["weak"], "mid": short}, ["map"], n_boot=200, n_perm=200)
    assert rep.n_queries == 9 and (rep.table["n"] == 9).all()
    assert any("weak: 1 of its 10 scored queries are left out" in n for n in rep.notes)
    full = lookalike.compare(qrels, {"weak": runs["weak"], "mid": short}, ["map"], complete=True, n_boot=200,
                             n_perm=200)
    assert full.n_queries == 10 and not full.notes


def test_report_saves_and_escapes(tmp_path):
    qrels, runs = _data(8)
    runs = {"<b>bold</b>": runs["weak"], "a_b&c": runs["mid"]}
    rep = lookalike.compare(qrels, runs, ["map"], n_boot=200, n_perm=200)
    page = rep.save(tmp_path / "r.html").read_text()
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    tex = rep.save(tmp_path / "r.tex").read_text()
    assert r"a\_b\&c" in tex and r"\toprule" in tex
    back = pd.read_csv(rep.save(tmp_path / "r.csv"))
    assert np.allclose(back["mean"], rep.table["mean"])
    assert json.loads(rep.save(tmp_path / "r.json").read_text())["baseline"] == "<b>bold</b>"
    with pytest.raises(ValueError, match="r.xlsx"):
        rep.save(tmp_path / "r.xlsx")
    assert "<table" in rep._repr_html_() and "win / tie / loss" in str(rep)


def test_p_values_are_written_as_people_read_them():
    assert lookalike.format_p(0.0004) == "< 0.001" and lookalike.format_p(0.01234) == "0.012"
    assert lookalike.format_p(float("nan")) == ""
