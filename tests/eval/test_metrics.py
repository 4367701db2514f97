"""Hand-checkable fixtures, properties and bad input for lookalike.metrics / trec / stats."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lookalike.eval import metrics
from lookalike.eval import trec

# A query with 3 relevant units (grades 2, 1, 1), one judged non-relevant, and a ranking of 5.
QRELS = {"q1": {"a": 2, "b": 1, "c": 1, "d": 0}, "q2": {"x": 1}}
RUN = {"q1": {"a": 0.9, "d": 0.8, "b": 0.7, "e": 0.6, "f": 0.5}, "q2": {"y": 1.0, "x": 0.5}}


def test_hand_computed_values():
    ev = metrics.evaluate(QRELS, RUN, ["P_2", "recall_5", "recip_rank", "map", "success_1", "top1", "Rprec",
                                 "recall_all_3", "recall_all_5", "num_rel", "num_ret"])
    q1 = ev.per_query.loc["q1"]
    assert q1["P_2"] == 0.5                          # a relevant, d not
    assert q1["recall_5"] == pytest.approx(2 / 3)    # c never retrieved
    assert q1["recip_rank"] == 1.0
    assert q1["map"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert q1["success_1"] == q1["top1"] == 1.0
    assert q1["Rprec"] == pytest.approx(2 / 3)
    assert q1["recall_all_5"] == 0.0                 # evidence incomplete: c is missing
    assert (q1["num_rel"], q1["num_ret"]) == (3, 5)
    q2 = ev.per_query.loc["q2"]
    assert q2["recip_rank"] == 0.5 and q2["top1"] == 0.0
    assert q2["recall_all_3"] == 1.0


def test_ndcg_by_hand():
    ev = metrics.evaluate(QRELS, RUN, ["ndcg_cut_3", "ndcg_exp_cut_3", "ndcg_all_3"])
    dcg = 2 / math.log2(2) + 0 + 1 / math.log2(4)
    idcg = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ev.per_query.loc["q1", "ndcg_cut_3"] == pytest.approx(dcg / idcg)
    dcg_e = 3 / math.log2(2) + 1 / math.log2(4)
    idcg_e = 3 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert ev.per_query.loc["q1", "ndcg_exp_cut_3"] == pytest.approx(dcg_e / idcg_e)
    assert ev.per_query.loc["q1", "ndcg_all_3"] == 0.0     # c is not in the top 3


def test_three_way_labels_and_sufficiency():
    labels = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2", "q2", "q3"],
                           "unit_id": ["s", "p", "i", "p2", "i2", "i3"],
                           "label": ["sufficient", "supporting", "irrelevant", "supporting", "irrelevant", "irrelevant"]})
    run = {"q1": {"p": 3.0, "i": 2.0, "s": 1.0}, "q2": {"i2": 2.0, "p2": 1.0}, "q3": {"x": 1.0, "i3": 0.5}}
    names = ["sufficient_1", "supporting_only_1", "neither_1", "sufficient_3", "supporting_only_3", "neither_3",
             "judged_1", "judged_2"]
    ev = metrics.evaluate(labels, run, names)
    pq = ev.per_query
    assert list(pq.loc["q1", names[:6]]) == [0, 1, 0, 1, 0, 0]
    assert list(pq.loc["q2", names[:6]]) == [0, 0, 1, 0, 1, 0]
    assert list(pq.loc["q3", names[:6]]) == [0, 0, 1, 0, 0, 1]
    assert pq.loc["q3", "judged_1"] == 0.0 and pq.loc["q3", "judged_2"] == 0.5
    # a custom mapping is honoured
    grades = {"sufficient": 3, "supporting": 2, "irrelevant": 0}
    ev2 = metrics.evaluate(metrics.Qrels(labels, grades=grades), run, ["sufficient_3"], grades=grades)
    assert ev2.per_query["sufficient_3"].tolist() == [1.0, 0.0, 0.0]


def test_queries_outside_the_intersection_are_reported():
    ev = metrics.evaluate({"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}},
                    {"q1": {"a": 1.0}, "q9": {"a": 1.0}, "q3": {"a": 1.0}}, ["map"])
    assert list(ev.per_query.index) == ["q1", "q3"]
    assert ev.run_only_queries == ["q9"] and ev.missing_from_run == ["q2"] and ev.no_relevant_queries == ["q3"]
    assert ev.mean()["map"] == 0.5
    complete = metrics.evaluate({"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}}, {"q1": {"a": 1.0}}, ["map"], complete=True)
    assert list(complete.per_query.index) == ["q1", "q2", "q3"]
    assert complete.mean()["map"] == pytest.approx(1 / 3)


def test_query_with_only_negative_judgements_scores_zero():
    # trec_eval loops forever on this input; we score it as a query with no relevant unit.
    ev = metrics.evaluate({"q": {"a": -1, "b": -1}}, {"q": {"a": 1.0, "b": 0.5}}, ["map", "ndcg", "ndcg_cut_5", "bpref"])
    assert ev.per_query.loc["q"].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert ev.no_relevant_queries == ["q"]


def test_macro_and_micro_aggregation():
    pq = pd.DataFrame({"m": [1.0, 0.0, 0.0, 0.0]}, index=pd.Index(["a", "b", "c", "d"], name="query_id"))
    table = metrics.aggregate(pq, {"a": "x", "b": "y", "c": "y", "d": "y"}, ["m"], name="structure")
    micro = table[table["aggregate"] == "micro"].iloc[0]
    macro = table[table["aggregate"] == "macro"].iloc[0]
    assert micro["value"] == 0.25 and micro["n"] == 4
    assert macro["value"] == 0.5 and macro["n"] == 2
    sizes = table[table["aggregate"] == "group"].set_index("structure")["n"].to_dict()
    assert sizes == {"x": 1, "y": 3}
    with pytest.raises(ValueError, match="no group for queries"):
        metrics.aggregate(pq, {"a": "x"}, ["m"])


def test_parse_measures_accepts_trec_eval_forms():
    assert metrics.parse_measures(["P.5,10", "ndcg_cut.10", "map", "P_5"]) == ["P_5", "P_10", "ndcg_cut_10", "map"]
    assert metrics.parse_measures(["ndcg_cut.23.4"]) == ["ndcg_cut_23"]
    assert metrics.parse_measures(["iprec_at_recall.0,.5"]) == ["iprec_at_recall_0.00", "iprec_at_recall_0.50"]
    with pytest.raises(metrics.MeasureError, match="unknown measure 'ndgc_cut_10'"):
        metrics.parse_measures(["ndgc_cut_10"])


# ----------------------------------------------------------------------------- properties

def _random_labelled(seed, n_queries=6):
    rng = np.random.default_rng(seed)
    units = [f"u{i}" for i in range(10)]
    qrels, run = {}, {}
    for q in range(n_queries):
        judged = rng.choice(10, size=rng.integers(1, 7), replace=False)
        qrels[f"q{q}"] = {units[j]: int(rng.integers(0, 3)) for j in judged}
        ret = rng.choice(10, size=rng.integers(1, 10), replace=False)
        run[f"q{q}"] = {units[j]: float(rng.integers(0, 4)) for j in ret}
    return qrels, run


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([1, 3, 5, 10]))
def test_properties(seed, k):
    qrels, run = _random_labelled(seed)
    names = [f"sufficient_{k}", f"supporting_only_{k}", f"neither_{k}", f"recall_all_{k}", f"recall_{k}",
             f"ndcg_all_{k}", f"ndcg_cut_{k}", f"judged_{k}", f"P_{k}"]
    pq = metrics.evaluate(qrels, run, names).per_query
    total = pq[f"sufficient_{k}"] + pq[f"supporting_only_{k}"] + pq[f"neither_{k}"]
    assert np.allclose(total, 1.0)
    assert (pq[f"recall_all_{k}"] <= pq[f"recall_{k}"] + 1e-12).all()
    assert (pq[f"ndcg_all_{k}"] <= pq[f"ndcg_cut_{k}"] + 1e-12).all()
    for col in names:
        assert ((pq[col] >= 0) & (pq[col] <= 1 + 1e-12)).all()
    # macro equals micro when every group has the same size
    groups = {q: f"g{i % 2}" for i, q in enumerate(sorted(pq.index))}
    table = metrics.aggregate(pq, groups, [f"P_{k}"])
    values = table.set_index("aggregate")["value"]
    assert values["macro"] == pytest.approx(values["micro"])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_input_forms_are_interchangeable(seed):
    qrels, run = _random_labelled(seed)
    a = metrics.evaluate(qrels, run, ["map", "ndcg_cut_5", "P_3"]).per_query
    qf = pd.DataFrame([(q, u, r) for q, d in qrels.items() for u, r in d.items()],
                      columns=["query_id", "unit_id", "relevance"])
    rf = pd.DataFrame([(q, u, s) for q, d in run.items() for u, s in d.items()],
                      columns=["query_id", "unit_id", "score"])
    b = metrics.evaluate(qf, rf.iloc[::-1], ["map", "ndcg_cut_5", "P_3"]).per_query
    pd.testing.assert_frame_equal(a, b)
    assert trec.qrels_dict(qf) == qrels and trec.run_dict(rf) == run


# ----------------------------------------------------------------------------- I/O and bad input


# ----------------------------------------------------------------------------- statistics


def test_a_run_over_exactly_the_judged_queries_scores_as_through_the_alignment():
    """evaluate skips aligning query ids when the run holds exactly the judged queries; the values
    must be those the alignment gives (reached here by one run-only query more)."""
    rng = np.random.default_rng(11)
    qrels = {f"q{i:02d}": {f"d{j}": int(rng.integers(0, 3)) for j in rng.choice(30, 6, replace=False)}
             for i in range(40)}
    run = {q: {f"d{j}": float(rng.random()) for j in rng.choice(30, 12, replace=False)} for q in qrels}
    names = ["P_5", "recall_10", "recip_rank", "map", "ndcg_cut_10", "ndcg"]
    fast = metrics.evaluate(qrels, run, names)
    aligned = metrics.evaluate(qrels, {**run, "zz-run-only": {"d1": 1.0}}, names)
    assert aligned.run_only_queries == ["zz-run-only"] and fast.run_only_queries == []
    pd.testing.assert_frame_equal(fast.per_query, aligned.per_query)
    complete = metrics.evaluate({**qrels, "zz-judged-only": {"d1": 1}}, run, names, complete=True)
    pd.testing.assert_frame_equal(fast.per_query, complete.per_query.drop(index="zz-judged-only"))


def test_a_run_from_dicts_joins_judgements_by_id_even_when_hashes_collide(monkeypatch):
    """The join of a run from dicts confirms every hash match on the unit id itself: ids that share a
    hash are never taken for one another, and two judgements that share a key fall back to the coded
    join; the values equal those of the same run given as a frame."""
    from lookalike.eval import metrics, ranking

    monkeypatch.setattr(ranking, "unit_hash", len)          # every one-letter id collides with every other
    run = {"q1": {"a": 0.9, "b": 0.8, "c": 0.7}, "q2": {"d": 0.5, "a": 0.4, "xy": 0.3}}
    qrels = {"q1": {"c": 1, "zz": 1}, "q2": {"b": 2, "xy": 1}}
    frame = pd.DataFrame([(q, u, s) for q, r in run.items() for u, s in r.items()],
                         columns=["query_id", "unit_id", "score"])
    names = ["map", "recip_rank", "ndcg", "P_5", "num_rel_ret"]
    R, Q = ranking.Run(run), ranking.Qrels(qrels)
    assert R.unit_hashes is not None
    got = metrics.evaluate(qrels, run, names).per_query
    want = metrics.evaluate(qrels, frame, names).per_query
    pd.testing.assert_frame_equal(got, want)
    assert got.loc["q1", "recip_rank"] == 1 / 3 and got.loc["q2", "recip_rank"] == 1 / 3
    # the ranks come from the hashed join itself (one-letter "a", "b", "d" all collide with "b" of q2)
    jq = np.repeat(np.arange(2), np.diff(Q.offsets))
    assert list(metrics._judged_ranks_hashed(R, jq, Q.unit_ids)) == [3, 0, 0, 3]
    # two judgements of one query sharing a key ("c" and "d" collide): the coded join decides
    assert metrics._judged_ranks_hashed(R, np.zeros(2, dtype=np.int64), np.array(["c", "d"], dtype=object)) is None
    clash = {"q1": {"c": 1, "d": 1}}
    pd.testing.assert_frame_equal(metrics.evaluate(clash, run, names).per_query,
                                  metrics.evaluate(clash, frame.iloc[:3], names).per_query)
