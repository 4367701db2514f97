"""Each library's names mean what they mean there: trec_eval's, ir_measures' and ranx's spellings,
their parameters, the measures where the three differ (RBP, Judged, SetF's beta), trec_eval's -J and
the suggestions for names that do not parse."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from lookalike.cli.eval import main as eval_main
from lookalike.eval import measures as ms, metrics

# graded judgements with a -1 label, a run with unjudged units and a query with nothing relevant retrieved
QRELS = pd.DataFrame([("q1", "a", 2), ("q1", "b", 1), ("q1", "c", 0), ("q1", "d", 3), ("q1", "e", -1),
                      ("q2", "a", 1), ("q2", "x", 2), ("q2", "y", 0), ("q3", "z", 1)],
                     columns=["query_id", "unit_id", "relevance"])
RUN = pd.DataFrame([("q1", u, 10.0 - i) for i, u in enumerate(["b", "u1", "a", "e", "c", "d", "u2"])]
                   + [("q2", u, 5.0 - i) for i, u in enumerate(["y", "x", "u3", "a"])]
                   + [("q3", u, 3.0 - i) for i, u in enumerate(["u4", "u5"])],
                   columns=["query_id", "unit_id", "score"])


def values(names, qrels=QRELS, run=RUN, **kw) -> pd.DataFrame:
    return metrics.evaluate(qrels, run, names, **kw).per_query


# ------------------------------------------------------------------ the two value bugs

def test_rbp_resid_is_zero_when_every_retrieved_unit_is_judged(tmp_path, capsys):
    (tmp_path / "q").write_text("q1 0 d1 1\n")
    (tmp_path / "r").write_text("q1 Q0 d1 1 1.0 r\n")
    assert eval_main(["-m", "rbp_resid", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out == f"{'rbp_resid':<22}\tall\t0.0000\n"           # trec_eval 10.0 prints 0.0000
    # and with an unjudged unit retrieved it is what rbp could still gain
    got = values(["rbp_resid"], pd.DataFrame([("q1", "d1", 1)], columns=["query_id", "unit_id", "relevance"]),
                 pd.DataFrame([("q1", "d1", 2.0), ("q1", "d2", 1.0)], columns=["query_id", "unit_id", "score"]))
    assert got["rbp_resid"].iloc[0] == pytest.approx(0.9 ** 2 + 0.1 * 0.9)


def test_rbp_means_what_each_library_means_by_it():
    q = {"q1": {"d1": 1}}
    r = {"q1": {"d1": 1.0, "d2": 0.5}}
    got = metrics.evaluate(q, r, ["RBP", "rbp", "RBP(p=0.9)", "RBP(p=0.9,rel=1)", "rbp.8", "rbp.p=0.8"]).per_query.iloc[0]
    # trec_eval prints a measure with its parameters as rbp_p=0.8
    assert got["RBP"] == pytest.approx(0.2)                 # ir_measures: p = 0.8
    assert got["rbp"] == pytest.approx(0.1)                 # trec_eval: p = 0.9
    assert got["RBP(p=0.9)"] == got["RBP(p=0.9,rel=1)"] == pytest.approx(0.1)
    assert got["rbp.8"] == got["rbp_p=0.8"] == pytest.approx(0.2)
    # on graded labels they part: trec_eval scales by the query's top grade, ranx takes the raw grade,
    # ir_measures counts relevant units
    g = metrics.evaluate({"q1": {"a": 2, "b": 1}}, {"q1": {"a": 2.0, "b": 1.0}}, ["rbp", "RBP(p=0.9)", "rbp.9"]).per_query.iloc[0]
    assert g["rbp"] == pytest.approx(0.1 * (1 + 0.9 * 0.5))
    assert g["RBP(p=0.9)"] == pytest.approx(0.1 * (1 + 0.9))
    assert g["rbp.9"] == pytest.approx(0.1 * (2 + 0.9 * 1))


# ------------------------------------------------------------------ spellings and their equivalents

SAME = [
    ("MAP", "map"), ("MRR", "recip_rank"), ("NDCG@10", "ndcg_cut_10"), ("Precision@5", "P_5"),
    ("Recall@100", "recall_100"), ("RPrec", "Rprec"), ("BPref", "bpref"), ("SetP(relative=True)", "set_relative_P"),
    ("NumRet(rel=1)", "num_rel_ret"), ("nDCG(dcg='exp-log2')@10", "ndcg_exp_cut_10"), ("nDCG(dcg='log2')@10", "ndcg_cut_10"),
    ("precision@5-l2", "P(rel=2)@5"), ("SetF(beta=0.5)", "set_F.0.5"), ("SetF", "set_F"), ("RBP(p=0.9)", "RBP(p=0.9,rel=1)"),
    ("infAP", "infAP(rel=1)"), ("nDCG(gains={0:1,1:4})", "ndcg.0=1,1=4"), ("mrr@5", "RR@5"), ("AP", "map"),
]


@pytest.mark.parametrize("spelling, equivalent", SAME)
def test_each_spelling_gives_its_equivalents_values(spelling, equivalent):
    got = values([spelling, equivalent])
    assert got.shape[1] in (1, 2)
    assert got.iloc[:, 0].tolist() == pytest.approx(got.iloc[:, -1].tolist())


@pytest.mark.parametrize("bare, expanded", [
    ("P", [f"P_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]),
    ("recall", [f"recall_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]),
    ("ndcg_cut", [f"ndcg_cut_{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]),
    ("set", ["set_P", "set_relative_P", "set_recall", "set_map", "set_F"]),
    ("success", ["success_1", "success_5", "success_10"]),
])
def test_trec_evals_bare_names_take_its_default_parameters(bare, expanded):
    assert [str(m) for m in ms.parse([bare])] == expanded


def test_cut_measures_of_other_libraries():
    got = values(["RR@1", "RR@3", "RR", "hits@3", "P_3", "dcg@3", "ndcg_cut_3", "ERR@3", "F1@3", "dcg_burges@3"])
    q1 = got.loc["q1"]
    assert q1["RR@1"] == 1.0 and got.loc["q2", "RR@1"] == 0.0 and got.loc["q2", "RR@3"] == pytest.approx(0.5)
    assert (got["hits@3"] == got["P_3"] * 3).all()                      # a count, not a rate
    # ranx's DCG@3 of q1: grades 1, (unjudged), 2 at ranks 1..3
    assert q1["dcg@3"] == pytest.approx(1 / np.log2(2) + 2 / np.log2(4))
    assert q1["dcg_burges@3"] == pytest.approx(1 / np.log2(2) + 3 / np.log2(4))
    # gdeval's ERR@3: R = (2^g - 1) / 16 at each rank, the reader stops with probability R
    r1, r3 = 1 / 16, 3 / 16
    assert q1["ERR@3"] == pytest.approx(r1 / 1 + (1 - r1) * r3 / 3)


def test_hits_is_not_hit_rate_and_rr_at_k_is_not_recall():
    got = values(["hits@5", "hit_rate@5", "RR@10", "R@10"])
    assert got.loc["q1", "hits@5"] == 2 and got.loc["q1", "hit_rate@5"] == 1.0
    assert got.loc["q1", "RR@10"] == 1.0 and got.loc["q1", "R@10"] == pytest.approx(3 / 3)


def test_judged_minus_one_labels_by_each_rule():
    got = values(["judged_5", "Judged@5"])
    # q1's top 5: b, u1, a, e (-1), c: trec_eval counts 3 judged, ir_measures 4
    assert got.loc["q1", "judged_5"] == pytest.approx(3 / 5) and got.loc["q1", "Judged@5"] == pytest.approx(4 / 5)


# ------------------------------------------------------------------ trec_eval -J

def test_judged_only_matches_pytrec_eval():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(7)
    qrels, run = {}, {}
    for q in range(30):
        units = [f"u{i}" for i in range(40)]
        judged = rng.choice(40, size=15, replace=False)
        qrels[f"q{q}"] = {units[i]: int(rng.integers(0, 3)) for i in judged}
        run[f"q{q}"] = {units[i]: float(rng.normal()) for i in rng.choice(40, size=25, replace=False)}
    names = ["map", "P_5", "ndcg_cut_10", "recip_rank", "bpref", "num_ret"]
    ours = metrics.evaluate(qrels, run, names, judged_only=True).per_query
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"map", "P.5", "ndcg_cut.10", "recip_rank", "bpref", "num_ret"},
                                         judged_docs_only_flag=True).evaluate(run)
    for q, row in ours.iterrows():
        for name in names:
            assert row[name] == pytest.approx(ref[q][name], abs=1e-12), (q, name)
    # and it is a different evaluation from the full rankings
    assert not ours["P_5"].equals(metrics.evaluate(qrels, run, ["P_5"]).per_query["P_5"])


def test_judged_only_on_the_command_line_and_as_a_measure_parameter(tmp_path, capsys):
    (tmp_path / "q").write_text("q1 0 a 1\nq1 0 b 0\n")
    (tmp_path / "r").write_text("q1 Q0 x 1 3.0 r\nq1 Q0 a 2 2.0 r\nq1 Q0 b 3 1.0 r\n")
    assert eval_main(["-J", "-m", "P.1", "-m", "num_ret", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{'num_ret':<22}\tall\t2", f"{'P_1':<22}\tall\t1.0000"]
    got = values(["P(judged_only=True)@1", "P@1"], pd.read_csv(tmp_path / "q", sep=" ", header=None,
                                                              names=["query_id", "it", "unit_id", "relevance"])
                 .drop(columns="it"), pd.DataFrame([("q1", "x", 3.0), ("q1", "a", 2.0), ("q1", "b", 1.0)],
                                                   columns=["query_id", "unit_id", "score"]))
    assert got.iloc[0].tolist() == [1.0, 0.0]


# ------------------------------------------------------------------ names that do not parse

@pytest.mark.parametrize("name, must, must_not", [
    ("ndcg@10.5", "not a whole number", "did you mean"),
    ("bpref@10", "takes no cutoff", "did you mean"),
    ("hits", "needs a cutoff", "did you mean"),
    ("precison@5", "did you mean precision@5?", "map"),
    ("nDCG(foo=1)@10", "takes no foo=", "did you mean"),
    ("RBP(p=2)", "between 0 and 1", "did you mean"),
])
def test_refusals_say_what_is_wrong_and_never_suggest_another_family(name, must, must_not):
    with pytest.raises(ms.MeasureError) as err:
        ms.parse_one(name)
    assert must in str(err.value) and must_not not in str(err.value)


@pytest.mark.parametrize("name", ["mrr@5", "RR@10", "hits@5", "rbp.95", "ndcg@10-l2", "Compat", "ERR@20", "MAP"])
def test_names_that_used_to_be_refused_or_misread_now_parse(name):
    m = ms.parse_one(name)
    assert m.family not in ("map_cut", "recall", "success", "P")


def test_every_suggestion_parses():
    for k in (None, "5", "10"):
        for spelling in ms._spellings(k):
            ms.parse_one(spelling)


def test_a_mean_over_no_query_is_nan_with_its_reason():
    ev = metrics.evaluate({"q1": {"a": 1}}, {"z": {"a": 1.0}}, ["map", "num_q", "num_ret"])
    with pytest.warns(metrics.EmptyEvaluation, match="share no query id"):
        mean = ev.mean()
    assert np.isnan(mean["map"]) and mean["num_q"] == 0 and mean["num_ret"] == 0


# ------------------------------------------------------------------ queries with nothing relevant or no ranking

def test_ndcg_rel_under_complete_on_a_query_with_nothing_relevant_and_no_ranking(tmp_path, capsys):
    """The crash: ndcg_rel divided a Python 0.0 by 0.0 for a qrels query with no relevant unit and an empty
    ranking (-c). trec_eval 10.0 prints q2 0.0000 and all 0.5000 for these two files."""
    (tmp_path / "q").write_text("q1 0 d1 1\nq2 0 d2 0\n")
    (tmp_path / "r").write_text("q1 Q0 d1 1 1.0 r\n")
    assert eval_main(["-q", "-c", "-m", "ndcg_rel", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines == [["ndcg_rel", "q1", "1.0000"], ["ndcg_rel", "q2", "0.0000"], ["ndcg_rel", "all", "0.5000"]]


@pytest.mark.parametrize("name", ["alpha_nDCG@5", "NRBP", "StRecall@5", "alpha-nDCG@10", "nERR@10"])
def test_a_name_that_adds_a_word_to_a_measure_is_another_measure_never_suggested_as_it(name):
    """docs/metrics.md says suggestions never cross families; alpha_nDCG@5 was met with "nDCG@5?", NRBP with
    "RBP?", StRecall@5 with "Recall@5?" (each a different measure)."""
    with pytest.raises(ms.MeasureError) as err:
        ms.parse_one(name)
    assert "did you mean" not in str(err.value)


@pytest.mark.parametrize("name, hint", [("Map", "map"), ("mAP", "map"), ("NDCG_CUT_10", "ndcg_cut_10"),
                                        ("precison@5", "precision@5"), ("Recal@10", "recall@10")])
def test_a_name_in_another_case_or_with_a_typo_gets_its_hint_back(name, hint):
    with pytest.raises(ms.MeasureError) as err:
        ms.parse_one(name)
    assert f"did you mean {hint}" in str(err.value)


def test_ranx_names_without_a_cutoff_mean_what_ranx_means_or_are_refused_saying_so():
    """ranx's precision without a cutoff reads the whole ranking (its k = 0): trec_eval's set_P (a bare recall
    stays trec_eval's, recall at its default cutoffs). Its hits without one, and rbp@95 (ranx writes rbp.95),
    are refused in words."""
    assert ms.parse_one("precision") == ms.parse_one("set_P")
    assert values(["precision"]).to_numpy().tolist() == values(["set_P"]).to_numpy().tolist()
    for name, words in (("hits", "ranx's hits without one counts"), ("rbp@95", "rbp.95 is p = 0.95")):
        with pytest.raises(ms.MeasureError, match=re.escape(words)):
            ms.parse_one(name)


def test_a_measure_given_parameters_twice_keeps_the_first_as_trec_eval_does(tmp_path, capsys):
    """-m P.5 -m P.10 printed P_5 and P_10; trec_eval 10.0 prints P_5 only."""
    (tmp_path / "q").write_text("q1 0 d1 1\nq1 0 d2 0\n")
    (tmp_path / "r").write_text("q1 Q0 d1 1 1.0 r\nq1 Q0 d3 2 0.5 r\n")
    assert eval_main(["-m", "P.5", "-m", "P.10", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    out = capsys.readouterr()
    assert [line.split()[0] for line in out.out.splitlines()] == ["P_5"]
    assert "keeps the first parameters given for P" in out.err
    assert eval_main(["-m", "P.5,10", str(tmp_path / "q"), str(tmp_path / "r")]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["P_5", "P_10"]
