"""The measure registry: both spellings parse to one measure, print as asked, compute the same."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from lookalike.cli.eval import main as eval_main
from lookalike.eval import measures as ms, metrics

QRELS = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2"], "unit_id": ["a", "b", "c", "a", "d"],
                      "relevance": [2, 1, 0, 1, 2]})
RUN = pd.DataFrame({"query_id": ["q1"] * 4 + ["q2"] * 3, "unit_id": ["b", "a", "x", "c", "d", "y", "a"],
                    "score": [4.0, 3.0, 2.0, 1.0, 3.0, 2.0, 1.0]})


@pytest.mark.parametrize("trec, pretty", [
    ("ndcg_cut_10", "nDCG@10"), ("recall_all_10", "RecallAll@10"), ("ndcg_all_10", "nDCGAll@10"),
    ("sufficient_5", "Sufficient@5"), ("supporting_only_5", "SupportingOnly@5"), ("neither_5", "Neither@5"),
    ("P_5", "P@5"), ("top1", "Top1"), ("recip_rank", "RR"), ("map", "AP"),
    ("recall_100", "R@100"), ("ndcg", "nDCG"),
])
def test_both_spellings_are_one_measure(trec, pretty):
    a, b = ms.parse_one(trec), ms.parse_one(pretty)
    assert a == b and str(a) == trec and str(b) == pretty
    assert a.trec_name == trec and b.pretty_name == pretty
    ev = metrics.evaluate(QRELS, RUN, [trec, pretty])
    # asked for twice, kept once, in the first spelling
    assert list(ev.per_query.columns) == [trec]
    both = metrics.evaluate(QRELS, RUN, [pretty]).per_query[pretty]
    assert both.tolist() == ev.per_query[trec].tolist()


def test_judged_follows_each_librarys_rule_for_minus_one_labels():
    # trec_eval's judged_k (lookalike's own): a -1 label is no judgement; ir_measures' Judged@k: a unit in
    # the qrels is judged, -1 or not. Without -1 labels the two agree.
    q = pd.DataFrame({"query_id": ["q1"] * 3, "unit_id": ["a", "b", "c"], "relevance": [1, -1, 0]})
    r = pd.DataFrame({"query_id": ["q1"] * 4, "unit_id": ["a", "b", "c", "d"], "score": [4.0, 3.0, 2.0, 1.0]})
    got = metrics.evaluate(q, r, ["judged_4", "Judged@4"]).per_query.iloc[0]
    assert got["judged_4"] == 0.5 and got["Judged@4"] == 0.75
    same = metrics.evaluate(QRELS, RUN, ["judged_10", "Judged@10"]).per_query
    assert same["judged_10"].tolist() == same["Judged@10"].tolist()


def test_a_relevance_level_of_its_own():
    p2 = metrics.evaluate(QRELS, RUN, ["P(rel=2)@2"]).per_query["P(rel=2)@2"]
    at_level_2 = metrics.evaluate(QRELS, RUN, ["P_2"], level=2).per_query["P_2"]
    assert p2.tolist() == at_level_2.tolist() == [0.5, 0.5]
    assert metrics.evaluate(QRELS, RUN, ["P_2"]).per_query["P_2"].tolist() == [1.0, 0.5]
    with pytest.raises(ms.MeasureError, match="binary measures only"):
        ms.parse_one("nDCG(rel=2)@10")


def test_aggregation_needs_and_printing_come_from_the_registry():
    assert ms.parse_one("num_ret").aggregation == "sum" and ms.parse_one("num_ret").format(7.0) == "7"
    assert ms.parse_one("gm_map").aggregation == "gmean"
    assert ms.parse_one("Sufficient@5").needs == "three-way"
    assert ms.parse_one("Judged@10").needs == "judged"
    assert ms.parse_one("nDCG@10").format(0.123456) == "0.1235"
    assert set(ms.FAMILIES) == set(metrics.COMPUTE)


def test_trec_eval_parameter_forms_still_expand():
    assert [str(m) for m in ms.parse(["P.5,10", "ndcg_cut.10", "iprec_at_recall.0,.5"])] == [
        "P_5", "P_10", "ndcg_cut_10", "iprec_at_recall_0.00", "iprec_at_recall_0.50"]
    assert [str(m) for m in ms.parse(["official"])] == ms.TREC_DEFAULT


@pytest.mark.parametrize("bad", ["nDGC@10", "P@0", "ndcg_cut_x", "Recall@"])
def test_unknown_or_malformed_measures_are_errors(bad):
    with pytest.raises(ms.MeasureError):
        ms.parse_one(bad)


def test_judged_has_one_definition_min_k_num_ret():
    # q1 retrieves x (unjudged) at rank 3: judged@3 = 2/3; q2 retrieves 3 units, y unjudged: 2/3
    ev = metrics.evaluate(QRELS, RUN, ["Judged@3", "judged_10"]).per_query
    assert ev["Judged@3"].round(6).tolist() == [round(2 / 3, 6), round(2 / 3, 6)]
    # k beyond the ranking: the denominator is num_ret (4 and 3), not k
    assert ev["judged_10"].round(6).tolist() == [0.75, round(2 / 3, 6)]


def test_eval_cli_takes_both_spellings(tmp_path, capsys):
    (tmp_path / "qrels").write_text("".join(f"{q} 0 {u} {r}\n" for q, u, r in QRELS.itertuples(index=False)))
    (tmp_path / "run").write_text("".join(f"{q} Q0 {u} 0 {s} t\n" for q, u, s in RUN.itertuples(index=False)))
    assert eval_main(["-m", "nDCG@10", "-m", "ndcg_cut_10", "-m", "P(rel=2)@2", str(tmp_path / "qrels"),
                      str(tmp_path / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0].strip() for line in lines] == ["nDCG@10", "P(rel=2)@2"]


# ten common measures in trec_eval's, ir_measures' and ranx's spellings
THREE_SPELLINGS = [
    ("ndcg_cut_10", "nDCG@10", "ndcg@10"),
    ("P_5", "P@5", "precision@5"),
    ("recall_10", "R@10", "recall@10"),
    ("map", "AP", "map"),
    ("map_cut_100", "AP@100", "map@100"),
    ("recip_rank", "RR", "mrr"),
    ("success_5", "Success@5", "hit_rate@5"),
    ("Rprec", "Rprec", "r-precision"),
    ("bpref", "Bpref", "bpref"),
    ("ndcg_exp_cut_10", "nDCGExp@10", "ndcg_burges@10"),
]


@pytest.mark.parametrize("trec, pretty, ranx", THREE_SPELLINGS)
def test_three_dialects_name_one_measure(trec, pretty, ranx):
    assert ms.parse_one(trec) == ms.parse_one(pretty) == ms.parse_one(ranx)
    assert str(ms.parse_one(ranx)) == ranx                    # printed as asked


def test_an_ir_measures_list_in_one_string():
    assert [m.trec_name for m in ms.parse(["nDCG@10 P@5 RR", "map_cut.5,10"])] == [
        "ndcg_cut_10", "P_5", "recip_rank", "map_cut_5", "map_cut_10"]


@pytest.mark.parametrize("typo, suggestion", [("nDGC@10", "nDCG@10"), ("hitrate@5", "hit_rate@5"),
                                              ("precison@5", "precision@5"), ("recip_rnk", "recip_rank"),
                                              ("Succes@3", "Success@3")])
def test_a_typo_gets_a_did_you_mean_with_its_own_cutoff(typo, suggestion):
    with pytest.raises(ms.MeasureError, match=f"did you mean {re.escape(suggestion)}"):
        ms.parse_one(typo)


# ranx's values come from a child process with numba's compiler off (NUMBA_DISABLE_JIT=1): ranx's measures
# are Python functions numba compiles, and with it off the same functions run as Python. On 40 queries that
# takes about 4 s; compiled, the first call into a new environment took 84-115 s of numba's compile.
RANX_CHILD = """
import json, sys
import ranx
qrels, run, names = json.load(sys.stdin)
print(json.dumps({k: float(v) for k, v in ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), names).items()}))
"""


def test_ranx_agrees_on_the_measures_it_shares():
    """Our values against ranx's on a run without tied scores (ranx breaks ties its own way)."""
    pytest.importorskip("ranx")
    import json
    import os
    import subprocess
    import sys

    import numpy as np

    rng = np.random.default_rng(35)
    qrels, run = {}, {}
    for q in range(40):
        docs = [f"d{i}" for i in range(60)]
        qrels[f"q{q}"] = {d: int(rng.integers(1, 3)) for d in rng.choice(docs, size=int(rng.integers(1, 8)), replace=False)}
        scores = rng.permutation(len(docs)).astype(float) + rng.random(len(docs)) / 10
        run[f"q{q}"] = {d: float(s) for d, s in zip(docs, scores)}
    ours_q = metrics.Qrels(pd.DataFrame([(q, d, r) for q, ds in qrels.items() for d, r in ds.items()],
                                  columns=["query_id", "unit_id", "relevance"]))
    ours_r = metrics.Run(pd.DataFrame([(q, d, s) for q, ds in run.items() for d, s in ds.items()],
                                columns=["query_id", "unit_id", "score"]))
    names = ["ndcg@10", "map@100", "map", "mrr", "precision@5", "recall@10", "hit_rate@5", "r-precision", "ndcg_burges@10"]
    means = metrics.evaluate(ours_q, ours_r, names).mean()
    child = subprocess.run([sys.executable, "-c", RANX_CHILD], input=json.dumps([qrels, run, names]), text=True,
                           capture_output=True, env={**os.environ, "NUMBA_DISABLE_JIT": "1"}, check=True)
    theirs = json.loads(child.stdout)
    assert sorted(theirs) == sorted(names)
    for name in names:
        assert means[name] == pytest.approx(theirs[name], abs=1e-9), name
